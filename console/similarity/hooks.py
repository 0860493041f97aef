"""Figures that apps above similarity add to its results (similarity may not import them).

- Cluster figures: `review` registers the share of each cluster graded correct-when-answered
  (labels live in grading); the gaps page, its CSV and API merge whatever is registered.
- Neighbour facts: what is known elsewhere about each similar decision. `review` registers its
  final label (grading), `disputes` its dispute status, each as annotations of the one query that
  reads the neighbours. Each fact has a name, so a caller asks only for the facts its user may
  read and the others are never computed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
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


@dataclass(frozen=True)
class NeighbourFact:
    """One fact about a similar decision, read in the same query as the decisions themselves:
    `annotations()` gives expressions over the decision's row (OuterRef("pk"), "route_id",
    "request_id"), named "<name>_..."; `read(decision)` turns the annotated values into the fact
    (None when nothing is known)."""

    name: str
    annotations: Callable[[], dict[str, Any]]
    read: Callable[[Any], Any]


_neighbour_facts: dict[str, NeighbourFact] = {}


def register_neighbour_fact(fact: NeighbourFact) -> None:
    _neighbour_facts[fact.name] = fact


def neighbour_facts(names: Iterable[str]) -> list[NeighbourFact]:
    """The registered facts among `names`, in the order asked."""
    return [_neighbour_facts[name] for name in names if name in _neighbour_facts]
