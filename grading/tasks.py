"""Thin Celery wrappers around the pool services; they take ids and re-read everything."""

from __future__ import annotations

from audit.services import Actor
from console.core.jobs import job
from grading.services import pool as pool_services


@job("grading.grading_pool_enter")
def grading_pool_enter(decision_ids: list[int]) -> int:
    """Queued after ingest: the new decisions whose answer under review is ready enter the pool.

    Refused decisions still waiting for their shadow run are left to the sweeper.
    """
    result = pool_services.grading_pool_enter(actor=Actor.system("grading_pool_enter"), decision_ids=decision_ids)
    return result.entered + result.not_sampled


@job("grading.grading_pool_sweep")
def grading_pool_sweep(max_batches: int = 50) -> int:
    """Beat: everything the ingest hook missed (broker down, shadow run finished since) enters the pool."""
    actor = Actor.system("grading_pool_sweep")
    total = 0
    for _batch in range(max_batches):
        result = pool_services.grading_pool_enter(actor=actor)
        handled = result.entered + result.not_sampled
        total += handled
        if handled < pool_services.POOL_BATCH:
            break
    return total
