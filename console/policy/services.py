"""Writes of the policy app: stored statistics documents.

A stored document is derived data: it can be recomputed from decisions and labels at any time
and changes nothing anyone decided, so storing one writes no audit event (the decisions and
labels it reads were audited when they were written).
"""

from __future__ import annotations

from typing import Any

from console.errors import InvalidInput
from console.jobs import enqueue
from console.ledger.models import Route
from console.policy.models import StatsResult
from console.policy.params import CalibrationQuery, CertifiedCutoffQuery, OperatingPointsQuery

# The page's chart curve: every 0.05 from 0 to 1.
CHART_CUTOFFS: tuple[float, ...] = tuple(round(i * 0.05, 2) for i in range(21))
# Risk-coverage points kept for the page's chart (AURC always uses the full curve).
CHART_POINTS = 400
# The band simulator's first proposal: serve with evidence from 0.4, serve outright from 0.7.
DEFAULT_BAND = (0.4, 0.7)


def stats_result_store(*, route: Route, kind: str, params: dict[str, Any], params_key: str, data_version: str,
                       document: str, compute_ms: float) -> None:
    """Insert or replace the document for (route, kind, params) in one statement (safe under races)."""
    result = StatsResult(route=route, kind=kind, params_key=params_key, params=params, data_version=data_version,
                         document=document, compute_ms=compute_ms)
    result.clean_fields(exclude=["route"])  # the route was just read; checking it again costs a query
    StatsResult.objects.bulk_create(
        [result], update_conflicts=True, unique_fields=["route", "kind", "params_key"],
        update_fields=["params", "data_version", "document", "compute_ms", "computed_at"],
    )


def stats_recompute(*, route_id: int) -> int:
    """Compute the documents the API and the page ask for by default, for the route's current
    data; those already stored for this data are left alone. Returns how many were computed."""
    from console.policy import reports

    route = Route.objects.filter(pk=route_id).first()
    if route is None:
        return 0
    before = StatsResult.objects.filter(route=route).values_list("kind", "params_key", "data_version")
    before = set(before)
    table = OperatingPointsQuery()
    reports.operating_points_report(route, table)
    reports.operating_points_report(route, table, curve=CHART_CUTOFFS)
    reports.band_report(route, table, band_lower=DEFAULT_BAND[0], cutoff=DEFAULT_BAND[1])
    for calibration in (CalibrationQuery(), CalibrationQuery(points=CHART_POINTS)):
        try:
            reports.calibration_report_for(route, calibration)
        except InvalidInput:  # gate scores outside [0, 1]: the endpoint explains it on request
            pass
    reports.certified_cutoff_report(route, CertifiedCutoffQuery())
    after = set(StatsResult.objects.filter(route=route).values_list("kind", "params_key", "data_version"))
    return len(after - before)


def stats_recompute_soon(*, route_id: int) -> None:
    """Queue a recompute once the current transaction commits. Services that add decisions or
    labels may call it; the beat sweeper (`tasks.stats_refresh_stale`) catches the rest."""
    from console.policy.tasks import stats_recompute as task

    enqueue(task, route_id)
