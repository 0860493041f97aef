"""The operating-points page (one view; htmx requests get the region they target) and its CSV."""

import csv

from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import push_url

from console.accounts import permissions
from console.analysis import panels, reports

CSV_INTERVALS = (
    "abstention_rate",
    "false_abstention_rate",
    "correct_withheld_per_1000",
    "wrong_served_per_1000",
    "exchange_rate",
)
# A long route's columns (docs/statistics.md, "Long answers"); Pr(S >= s0) only when s0 is set.
LONG_CSV_INTERVALS = (
    "expected_support",
    "p_fully_supported",
    "p_support_at_least",
    "claim_support_rate",
    "unsupported_claims_per_1000",
    "functional_false_abstention_rate",
    "utility_per_1000",
)


def _csv_intervals(document: dict) -> tuple[str, ...]:
    if document.get("answer_form") != "long":
        return CSV_INTERVALS
    has_s0 = document.get("support_threshold") is not None
    return CSV_INTERVALS + tuple(name for name in LONG_CSV_INTERVALS if has_s0 or name != "p_support_at_least")


def _read_page(request) -> panels.Page:
    if not permissions.can_read_stats(request.user):
        raise PermissionDenied("Your role does not allow reading decisions or their statistics.")
    return panels.read_page(request.user, panels.page_params(request))


@require_GET
@vary_on_headers("HX-Request", "HX-Target", "HX-Current-URL")
def operating_points(request):
    try:
        page = _read_page(request)
    except panels.NoRoutes:
        return render(request, "analysis/operating_points.html", {"page": None})
    target = request.htmx.target if request.htmx else None
    template, context = panels.region(page, target)
    context["can_propose"] = permissions.can_draft_policy(request.user, page.route)
    response = render(request, template or "analysis/operating_points.html", context)
    if request.htmx:
        push_url(response, page.url)
    return response


@require_GET
def operating_points_csv(request):
    """The table as CSV: one line per row, each interval as value/low/high, method named on every line."""
    page = _read_page(request)
    if page.errors:
        return HttpResponse(" ".join(e["message"] for e in page.errors), status=400, content_type="text/plain")
    document = reports.operating_points_report(page.route, page.query).data
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="operating-points-{page.route.slug}.csv"'
    writer = csv.writer(response)
    header = ["cutoff", "refused", "served", "graded_refused", "graded_served"]
    names = _csv_intervals(document)
    for name in names:
        header += [name, f"{name}_low", f"{name}_high"]
    writer.writerow([*header, "confidence", "interval", "exchange_rate_interval", "tie_policy"])
    for row in document["rows"]:
        line = [
            "" if row["cutoff"] is None else row["cutoff"],
            row["refused"],
            row["served"],
            row["graded_refused"],
            row["graded_served"],
        ]
        for name in names:
            cell = row.get(name) or {}
            # Inside an exchange rate a missing bound is unbounded (the band has no wrong answer).
            missing = "inf" if name == "exchange_rate" and cell else ""
            line += [missing if cell.get(k) is None else cell[k] for k in ("value", "low", "high")]
        writer.writerow(
            [
                *line,
                document["confidence"],
                document["interval"],
                document["exchange_rate_interval"],
                document["tie_policy"],
            ]
        )
    return response
