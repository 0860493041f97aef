from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from audit.selectors import audit_events_for_object, readable_events
from console.accounts import permissions
from console.governance import selectors as governance_selectors
from console.ledger.selectors import get_decision_for_user, route_daily_counts
from console.monitoring.selectors import route_health
from console.shadow import selectors as shadow_selectors
from console.verification import selectors as verification_selectors
from grading.selectors import decision_grading


@require_GET
def decision_detail(request, pk: int):
    # The selector refuses users who may not read decisions (403) and 404s routes they may not see.
    decision = get_decision_for_user(request.user, pk=pk)
    events = audit_events_for_object("decision", decision.pk,
                                     readable_events(request.user, permissions.DECISION_READERS))
    return render(request, "review/decision_detail.html", {
        "decision": decision,
        "passages": decision.ranked_passages.all(),
        "events": events,
        "grading": decision_grading(decision.pk),
        **verification_selectors.support_context(decision),  # "support", "claim_units", marked "passages"
        **shadow_selectors.shadow_context(request.user, decision),
        **governance_selectors.decision_policy_context(request.user, decision),  # "signed_policy", ...
    })


@require_GET
def dashboard(request):
    """Route health: per readable route, the day counters and the monitoring figures (policy in force,
    abstention at its cutoff, rechecks, alarms, grading backlog, shadow failures, compliance)."""
    if not permissions.can_read_decisions(request.user):
        if permissions.can_grade(request.user):  # graders land on their queue
            return redirect("grading-queue")
        return render(request, "review/dashboard.html", {"routes": [], "reader": False})
    routes = route_daily_counts(request.user)
    for row in routes:
        if permissions.can_read_policy(request.user, row["route"]):
            row["health"] = route_health(row["route"])
    return render(request, "review/dashboard.html", {"routes": routes, "reader": True})
