from django.contrib import messages
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from audit.services import Actor
from console.accounts import permissions
from console.core.errors import Forbidden, InvalidInput, detail
from console.notify import selectors, services
from console.notify.models import Digest


@require_GET
def outbox(request):
    if not permissions.can_read_outbox(request.user):
        raise Forbidden("Only admins may read the outbox.")
    return render(request, "notify/outbox.html", {"notifications": selectors.outbox()})


@require_http_methods(["GET", "POST"])
def preferences(request):
    """Every signed-in person chooses how the console emails them."""
    if request.method == "POST":
        digest = request.POST.get("digest", "")
        if digest not in Digest.values:
            raise InvalidInput(
                "Choose how often to be emailed.", details=[detail("digest", "invalid_choice", "unknown")]
            )
        services.preference_set(actor=Actor.user(request.user), user=request.user, digest=digest)
        messages.success(request, f"Saved: {Digest(digest).label.lower()}.")
        return redirect("notify-preferences")
    return render(
        request,
        "notify/preferences.html",
        {
            "digest": services.digest_of(request.user),
            "choices": Digest.choices,
            "waiting": selectors.digest_waiting(request.user),
        },
    )
