from django.contrib import messages
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from audit.services import Actor
from console.core.errors import Conflict
from console.shadow import selectors, services


@require_POST
def shadow_run_retry(request, pk: int):
    run = selectors.get_shadow_run_for_retry(request.user, pk)
    try:
        services.shadow_run_retry(actor=Actor.user(request.user), run=run)
        messages.success(request, "The shadow run is queued again.")
    except Conflict as exc:
        messages.error(request, exc.message)
    return redirect("decision-detail", pk=run.decision_id)
