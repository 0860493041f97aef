"""Work that other apps want done after decisions are stored.

The ledger does not know the apps above it (docs/architecture.md): span checks, shadow runs and
pool entry register their task here from their AppConfig.ready(), and ingest queues each of them
once per batch with the new decision ids, after the batch commits.
"""

from __future__ import annotations

from typing import Any

from console.core.jobs import enqueue

_after_ingest: list[Any] = []


def register_after_ingest(task: Any) -> None:
    """`task(decision_ids)` will be queued after every ingest batch that stores new decisions."""
    if task not in _after_ingest:
        _after_ingest.append(task)


def after_ingest_tasks() -> tuple[Any, ...]:
    return tuple(_after_ingest)


def queue_after_ingest(decision_ids: list[int]) -> None:
    # One message per batch and job, not per decision: a publish costs about as much as storing a decision.
    for task in _after_ingest:
        enqueue(task, decision_ids)


_in_ingest: list[Any] = []


def register_in_ingest(writer: Any) -> None:
    """`writer(actor=, items=, decision_ids=, routes=)` runs inside the ingest transaction, after the batch's
    decisions are written: for data that travels with the batch but is owned by an app above the
    ledger (question vectors). Raising a ServiceError rolls the whole batch back."""
    if writer not in _in_ingest:
        _in_ingest.append(writer)


def run_in_ingest(*, actor: Any, items: list, decision_ids: list[int], routes: dict) -> None:
    for writer in _in_ingest:
        writer(actor=actor, items=items, decision_ids=decision_ids, routes=routes)
