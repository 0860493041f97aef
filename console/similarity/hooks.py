"""Figures that apps above similarity add to its results (similarity may not import them).

- Cluster figures: `review` registers the share of each cluster graded correct-when-answered
  (labels live in grading); the gaps page, its CSV and API merge whatever is registered.
- Neighbour facts: what is known elsewhere about each similar decision. `review` registers its
  final label (grading), `disputes` its dispute status. Each fact has a name, so a caller asks only
  for the facts its user may read and the others are never computed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

# fn(run_id) -> {cluster_id: {figure: value}}
ClusterFigures = Callable[[int], dict[int, dict]]
_cluster_figures: list[ClusterFigures] = []


def register_cluster_figures(fn: ClusterFigures) -> None:
    if fn not in _cluster_figures:
        _cluster_figures.append(fn)


def cluster_figures(run_id: int) -> dict[int, dict]:
    merged: dict[int, dict] = {}
    for fn in _cluster_figures:
        for cluster_id, figures in fn(run_id).items():
            merged.setdefault(cluster_id, {}).update(figures)
    return merged


# fn(route_id, [(decision_id, request_id), ...]) -> {decision_id: value}, one query for all of them;
# a decision it knows nothing about is left out.
NeighbourFact = Callable[[int, list[tuple[int, str]]], dict[int, Any]]
_neighbour_facts: dict[str, NeighbourFact] = {}


def register_neighbour_fact(name: str, fn: NeighbourFact) -> None:
    _neighbour_facts[name] = fn


def neighbour_facts(route_id: int, decisions: list[tuple[int, str]], names: Iterable[str]) -> dict[str, dict[int, Any]]:
    """{name: {decision_id: value}} for the registered facts among `names`; none when no decisions."""
    return {
        name: _neighbour_facts[name](route_id, decisions) if decisions else {}
        for name in names
        if name in _neighbour_facts
    }
