"""Background recompute of the statistics documents (DESIGN section 6)."""

from __future__ import annotations

from celery import shared_task
from django.db import OperationalError

from console.jobs import enqueue
from console.ledger.models import Route
from console.policy import reports, services
from console.policy.params import OperatingPointsQuery


@shared_task(acks_late=True, autoretry_for=(OperationalError,), retry_backoff=True, max_retries=5)
def stats_recompute(route_id: int) -> int:
    """Compute the route's default documents for its current data (idempotent: what is already
    stored for this data is left alone)."""
    return services.stats_recompute(route_id=route_id)


@shared_task(acks_late=True)
def stats_refresh_stale() -> int:
    """Beat: queue a recompute for every route whose default table is missing for its current data,
    i.e. whose decisions or labels changed since the last computation."""
    default_table = reports.operating_points_params(OperatingPointsQuery())
    stale = [route.pk for route in Route.objects.all()
             if not reports.is_current(route, reports.OPERATING_POINTS, default_table)]
    for route_id in stale:
        enqueue(stats_recompute, route_id)
    return len(stale)
