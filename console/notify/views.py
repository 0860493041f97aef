from django.shortcuts import render
from django.views.decorators.http import require_GET

from console.accounts import permissions
from console.core.errors import Forbidden
from console.notify import selectors


@require_GET
def outbox(request):
    if not permissions.can_read_outbox(request.user):
        raise Forbidden("Only admins may read the outbox.")
    return render(request, "notify/outbox.html", {"notifications": selectors.outbox()})
