"""Thin Celery wrappers around the pool services; they take ids and re-read everything."""

from __future__ import annotations

from audit.services import Actor
from console.core.jobs import job
from grading.services import pool as pool_services


@job("grading.grading_pool_sweep")
def grading_pool_sweep(max_batches: int = 50) -> int:
    """Beat: every ready decision not in the pool enters it: refused decisions whose shadow run has
    finished since their ingest, and any whose entry in the ingest transaction failed."""
    actor = Actor.system("grading_pool_sweep")
    total = 0
    for _batch in range(max_batches):
        result = pool_services.grading_pool_enter(actor=actor)
        handled = result.entered + result.not_sampled
        total += handled
        if handled < pool_services.POOL_BATCH:
            break
    return total
