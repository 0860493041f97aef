"""Thin Celery wrappers around the pool services; they take ids and re-read everything."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from audit.services import Actor
from console.core.jobs import job
from grading.services import pool as pool_services


@job("grading.grading_pool_enter")
def grading_pool_enter(decision_ids: list[int]) -> int:
    """Queued when entering an ingest batch in its own transaction failed: enter those decisions now."""
    result = pool_services.grading_pool_enter(actor=Actor.system("grading_pool_enter"), decision_ids=decision_ids)
    return result.entered + result.not_sampled


@job("grading.grading_pool_sweep")
def grading_pool_sweep() -> int:
    """Beat, every minute: refusals whose shadow run has succeeded since their ingest enter the pool
    (those of runs created in the last POOL_SWEEP_SHADOW_DAYS; the daily full sweep takes older ones)."""
    actor = Actor.system("grading_pool_sweep")
    since = timezone.now() - timedelta(days=settings.POOL_SWEEP_SHADOW_DAYS)
    total = 0
    while ids := pool_services.shadow_answered_outside_pool(since=since, limit=pool_services.POOL_BATCH):
        result = pool_services.grading_pool_enter(actor=actor, decision_ids=ids)
        total += result.entered + result.not_sampled
        if len(ids) < pool_services.POOL_BATCH or not result.item_ids:
            break
    return total


@job("grading.grading_pool_sweep_all", soft_time_limit=3600)
def grading_pool_sweep_all(max_batches: int = 50) -> int:
    """Beat, daily: every ready decision not in the pool enters it, whatever left it out (a message
    lost with the broker, decisions loaded by COPY, a shadow run that succeeded long after its
    decision). It walks the decisions against the pool, which at millions of decisions takes
    seconds: once a day, not every minute."""
    actor = Actor.system("grading_pool_sweep")
    total = 0
    for _batch in range(max_batches):
        result = pool_services.grading_pool_enter(actor=actor)
        handled = result.entered + result.not_sampled
        total += handled
        if handled < pool_services.POOL_BATCH:
            break
    return total
