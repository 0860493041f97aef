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


_after_demo: list[Any] = []


def register_after_demo(step: Any) -> None:
    """`step(actor=, routes=, users=)` runs at the end of `load_demo`, for demo data of the apps above."""
    if step not in _after_demo:
        _after_demo.append(step)


def after_demo_steps() -> tuple[Any, ...]:
    return tuple(_after_demo)
