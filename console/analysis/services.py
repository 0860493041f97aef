"""Writes of the analysis app: recomputing the stored statistics documents (see `cache`)."""

from __future__ import annotations

from console.accounts.models import Route
from console.analysis import reports
from console.analysis.models import StatsResult
from console.analysis.params import CalibrationQuery, CertifiedCutoffQuery, OperatingPointsQuery
from console.analysis.reports import CHART_CUTOFFS, CHART_POINTS, DEFAULT_BAND
from console.core.errors import InvalidInput


def stats_recompute(*, route_id: int) -> int:
    """Compute the documents the API and the page ask for by default, for the route's current
    data; those already stored for this data are left alone. Returns how many were computed."""
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
