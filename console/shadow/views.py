from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from audit.services import Actor
from console.errors import Conflict, Forbidden
from console.shadow import selectors, services


@require_POST
def shadow_run_retry(request, pk: int):
    try:
        run = selectors.get_shadow_run_for_retry(request.user, pk)
    except Forbidden as exc:
        raise PermissionDenied(str(exc)) from exc
    try:
        services.shadow_run_retry(actor=Actor.user(request.user), run=run)
        messages.success(request, "The shadow run is queued again.")
    except Conflict as exc:
        messages.error(request, exc.message)
    return redirect("decision-detail", pk=run.decision_id)
