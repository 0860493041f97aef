"""Figures about gap clusters that apps above similarity add (similarity may not import them).

`review` registers the share of each cluster graded correct-when-answered (labels live in
grading); the gaps page, its CSV and API merge whatever is registered.
"""

from __future__ import annotations

from collections.abc import Callable

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
