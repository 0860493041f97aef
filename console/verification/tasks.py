"""Span verification jobs: thin wrappers that take ids; the service claims the work."""

from datetime import timedelta

from celery.signals import worker_init
from django.conf import settings
from django.utils import timezone

from audit.services import Actor
from console.core.jobs import enqueue, job
from console.verification import selectors, services
from console.verification.folding import fold_tables

_SWEEP_LIMIT = 2_000


@worker_init.connect
def _fold_tables_before_fork(**kwargs) -> None:
    """Build the verifier's case-folding tables once in the worker's main process: every pool child
    forked from it shares them, instead of each scanning every code point on its first job (seconds
    of CPU per child on a busy machine, paid again whenever a grown child is replaced)."""
    fold_tables()


@job("verification.decisions_verify", soft_time_limit=600)
def decisions_verify(decision_ids: list[int]) -> dict[str, int]:
    """Queued once per ingest batch with the new decision ids (one message, not one per decision)."""
    result = services.decisions_verify(actor=Actor.system("decisions_verify"), decision_ids=decision_ids)
    return {"verified": len(result.verified), "failed": len(result.failed)}


@job("verification.decisions_verify_sweep")
def decisions_verify_sweep() -> int:
    """Beat job: queue again decisions that have no DecisionSupport some time after ingest, among
    the newest VERIFY_SWEEP_NEWEST decisions (the daily sweep reads the rest)."""
    return _sweep(newest=settings.VERIFY_SWEEP_NEWEST)


@job("verification.decisions_verify_sweep_all", soft_time_limit=3600)
def decisions_verify_sweep_all() -> int:
    """Beat job, daily: the same over every decision (a message lost longer ago, decisions loaded by
    COPY). It reads the whole ledger, which at millions of decisions takes seconds."""
    return _sweep(newest=None)


def _sweep(*, newest: int | None) -> int:
    ingested_before = timezone.now() - timedelta(seconds=settings.JOBS_REQUEUE_AFTER_SECONDS)
    ids = selectors.decisions_awaiting_verification(ingested_before=ingested_before, limit=_SWEEP_LIMIT, newest=newest)
    for start in range(0, len(ids), settings.VERIFY_IDS_PER_JOB):
        enqueue(decisions_verify, ids[start : start + settings.VERIFY_IDS_PER_JOB])
    return len(ids)
