from django.http import HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from audit.selectors import audit_events_for_object, readable_events
from console.accounts import permissions
from console.disputes import views as disputes_views
from console.governance import selectors as governance_selectors
from console.ledger.hooks import route_summaries
from console.ledger.selectors import get_decision_for_user, route_daily_counts
from console.monitoring.selectors import route_health
from console.review import selectors as review_selectors
from console.shadow import selectors as shadow_selectors
from console.similarity import selectors as similarity_selectors
from console.verification import selectors as verification_selectors
from grading.selectors import decision_grading


@require_GET
def decision_detail(request, pk: int):
    # The selector refuses users who may not read decisions (403) and 404s routes they may not see.
    decision = get_decision_for_user(request.user, pk=pk)
    # A `reader` reads the refusal and its disputes, not its grades or audit history.
    reads_stats = permissions.can_read_stats(request.user, decision.route)
    events = (
        audit_events_for_object("decision", decision.pk, readable_events(request.user, permissions.STATS_READERS))
        if reads_stats
        else None
    )
    return render(
        request,
        "review/decision_detail.html",
        {
            "decision": decision,
            "passages": decision.ranked_passages,
            "events": events,
            "reads_stats": reads_stats,
            "grading": decision_grading(decision.pk) if reads_stats else None,
            # The refusals list's address it was opened from (filters, order, page), re-encoded so it
            # can only ever be a query string of that list.
            "back": QueryDict(request.GET.get("back", "")[:2000]).urlencode(),
            **disputes_views.dispute_section(request, decision),  # "disputes", "dispute_form"
            **verification_selectors.support_context(decision),  # "support", "claim_units", marked "passages"
            **shadow_selectors.shadow_context(request.user, decision),
            **governance_selectors.decision_policy_context(request.user, decision),  # "signed_policy", ...
            **similarity_selectors.similar_refusals_context(request.user, decision),  # "similar"
        },
    )


@require_GET
def adjudication_backlog(request):
    """The navigation's backlog badge, loaded by htmx after the page so no page pays for it."""
    if not permissions.can_review_labels(request.user):
        return HttpResponse("")
    count = review_selectors.adjudication_backlog(request.user)
    if not count:
        return HttpResponse("")
    return HttpResponse(
        f'<span class="badge" title="{count} item{"s" if count != 1 else ""} waiting for adjudication">{count}</span>'
    )


@require_GET
def dashboard(request):
    """Route health: per readable route, the day counters and the monitoring figures (policy in force,
    abstention at its cutoff, rechecks, alarms, grading backlog, shadow failures, compliance)."""
    if not permissions.can_read_decisions(request.user):
        if permissions.can_grade(request.user):  # graders land on their queue
            return redirect("grading-queue")
        return render(request, "review/dashboard.html", {"routes": [], "reader": False})
    routes = route_daily_counts(request.user)
    extras = route_summaries(request.user, [row["route"] for row in routes])  # lines of upper apps (disputes)
    for row in routes:
        row["extras"] = extras.get(row["route"].pk, [])
        if permissions.can_read_policy(request.user, row["route"]):
            row["health"] = route_health(row["route"])
            row["grades"] = permissions.can_grade(request.user, row["route"])  # the backlog links to the queue
    return render(request, "review/dashboard.html", {"routes": routes, "reader": True})
