"""Background recompute of the statistics documents."""

from __future__ import annotations

from console.accounts.models import Route
from console.analysis import cache, reports, services
from console.analysis.params import OperatingPointsQuery
from console.core.jobs import enqueue, job


@job("analysis.stats_recompute", soft_time_limit=600)
def stats_recompute(route_id: int) -> int:
    """Compute the route's default documents for its current data (idempotent: what is already
    stored for this data is left alone)."""
    return services.stats_recompute(route_id=route_id)


@job("analysis.stats_refresh_stale")
def stats_refresh_stale() -> int:
    """Beat: queue a recompute for every route whose default table is missing for its current data,
    i.e. whose decisions or labels changed since the last computation."""
    default_table = reports.operating_points_params(OperatingPointsQuery())
    stale = [
        route.pk
        for route in Route.objects.all()
        if not cache.is_current(route, reports.OPERATING_POINTS, default_table)
    ]
    for route_id in stale:
        enqueue(stats_recompute, route_id)
    return len(stale)
