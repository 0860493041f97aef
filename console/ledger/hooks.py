"""Work that other apps want done after decisions are stored.

The ledger does not know the apps above it (docs/architecture.md): span checks, shadow runs and
pool entry register their task here from their AppConfig.ready(), and ingest queues each of them
once per batch with the new decision ids, after the batch commits.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from console.core.jobs import enqueue

_after_ingest: list[Any] = []
_ids_per_job: dict[Any, int] = {}


def register_after_ingest(task: Any, *, ids_per_job: int | None = None) -> None:
    """`task(decision_ids)` will be queued after every ingest batch that stores new decisions: once
    per batch, or once per `ids_per_job` of its decisions, so that several worker processes share a
    batch's work (and its last decisions are done sooner)."""
    if task not in _after_ingest:
        _after_ingest.append(task)
    if ids_per_job:
        _ids_per_job[task] = ids_per_job


def after_ingest_tasks() -> tuple[Any, ...]:
    return tuple(_after_ingest)


def queue_after_ingest(decision_ids: list[int]) -> None:
    # A message per batch (or per share of one), not per decision: a publish costs about as much as
    # storing a decision.
    for task in _after_ingest:
        size = _ids_per_job.get(task) or len(decision_ids) or 1
        for start in range(0, len(decision_ids), size):
            enqueue(task, decision_ids[start : start + size])


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


# Filters of the refusals list that upper apps supply (the ledger cannot import them): a name, a label,
# a condition for QuerySet.filter (an Exists over the upper app's table, found through the app
# registry by the upper app itself) and whether the list shows a badge where it holds (computed as
# an annotation of the page's one query). Disputes registers "disputed" here from its AppConfig.ready().
@dataclass(frozen=True)
class DecisionFilterHook:
    name: str
    label: str
    help_text: str
    condition: Callable[[], Any]
    badge: bool = False


_decision_filters: dict[str, DecisionFilterHook] = {}


def register_decision_filter(
    name: str, *, label: str, condition: Callable[[], Any], help_text: str = "", badge: bool = False
) -> None:
    _decision_filters[name] = DecisionFilterHook(name, label, help_text, condition, badge)


def decision_filters() -> tuple[DecisionFilterHook, ...]:
    return tuple(_decision_filters.values())


def decision_filter(name: str) -> DecisionFilterHook | None:
    return _decision_filters.get(name)


# Lines that upper apps add to each route's card on the dashboard: `fn(user, routes)` returns, per
# route id, a list of {"text", "url", "warn"} (one query for all routes). Disputes adds its open and
# overdue counts.
_route_summaries: list[Callable[[Any, list], dict[int, list[dict[str, Any]]]]] = []


def register_route_summary(fn: Callable[[Any, list], dict[int, list[dict[str, Any]]]]) -> None:
    if fn not in _route_summaries:
        _route_summaries.append(fn)


def route_summaries(user, routes: list) -> dict[int, list[dict[str, Any]]]:
    lines: dict[int, list[dict[str, Any]]] = {}
    for fn in _route_summaries:
        for route_id, items in fn(user, routes).items():
            lines.setdefault(route_id, []).extend(items)
    return lines


# Figures that upper apps add to each route's health (GET /api/v1/routes/{slug}/health): `fn(user,
# routes)` returns, per route id, {name: number} for every route it counts (one query for all routes),
# or nothing for a user who may not see them. Disputes adds its open and overdue counts.
_route_figures: list[Callable[[Any, list], dict[int, dict[str, Any]]]] = []


def register_route_figures(fn: Callable[[Any, list], dict[int, dict[str, Any]]]) -> None:
    if fn not in _route_figures:
        _route_figures.append(fn)


def route_figures(user, routes: list) -> dict[int, dict[str, Any]]:
    figures: dict[int, dict[str, Any]] = {}
    for fn in _route_figures:
        for route_id, values in fn(user, routes).items():
            figures.setdefault(route_id, {}).update(values)
    return figures


# Work still under way on decisions, which holds their month back from the archive (archive.py
# removes a month's decisions with everything that points at them): `fn(decision_ids)` gets a
# queryset-ready subquery of the month's decision ids and returns how many of the app's rows are
# still at work on them (an open dispute: a person is waiting; a queued shadow run or trial call: a
# job would find its decision gone). Pool items, labels and finished work are archived along.
_archive_holds: dict[str, Callable[[Any], int]] = {}


def register_archive_hold(name: str, count: Callable[[Any], int]) -> None:
    _archive_holds[name] = count


def archive_holds(decision_ids: Any) -> dict[str, int]:
    return {name: n for name, count in _archive_holds.items() if (n := count(decision_ids))}
