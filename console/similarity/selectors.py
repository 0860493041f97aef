"""Reads of the similarity app: a route's active vector space, nearest refusals, gap runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from console.ledger.models import Decision, Outcome, Route
from console.similarity.hooks import cluster_figures
from console.similarity.models import GapCluster, GapRun
from console.similarity.spaces import Space, active_space


@dataclass
class Neighbour:
    decision: Decision
    similarity: float


@dataclass
class SimilarRefusals:
    space: Space | None
    neighbours: list[Neighbour] = field(default_factory=list)
    has_vector: bool = False
    # "refused N times in 30 days in similar form": refusals within the window at or above the threshold
    similar_form_count: int = 0
    similar_form_capped: bool = False  # the count reached the search depth; the true count may be higher
    threshold: float = 0.0
    days: int = 30


def _nearest_sql(space: Space, outcome: str | None) -> tuple[str, list]:
    dimension = int(space.dimension)
    expression = f"vector::vector({dimension})"
    if outcome == Outcome.REFUSED:
        where = space.refused_predicate
    elif space.embedder_id is None:
        where = f"route_id = {int(space.route_id)} AND embedder_id IS NULL"
    else:
        where = f"embedder_id = {int(space.embedder_id)}"
    extra = ""
    if outcome not in (None, Outcome.REFUSED):
        extra = " AND decision_id IN (SELECT id FROM ledger_decision WHERE outcome = %s)"
    sql = (
        f"SELECT decision_id, {expression} <=> %s::vector({dimension}) AS distance "
        f"FROM similarity_questionvector WHERE {where} AND decision_id <> %s{extra} "
        f"ORDER BY {expression} <=> %s::vector({dimension}) LIMIT %s"
    )
    return sql, [outcome] if extra else []


def nearest(
    space: Space,
    query: np.ndarray,
    *,
    exclude: int = 0,
    k: int = 10,
    outcome: str | None = Outcome.REFUSED,
    ef_search: int | None = None,
) -> list[tuple[int, float]]:
    """(decision id, cosine similarity) of the k nearest vectors of the space, nearest first.
    Refusals go through the space's HNSW index; other outcomes are an exact scan of the route."""
    sql, extra = _nearest_sql(space, outcome)
    literal = "[" + ",".join(repr(float(x)) for x in np.asarray(query, dtype=np.float32)) + "]"
    with transaction.atomic(), connection.cursor() as cursor:
        # ef_search bounds how many candidates HNSW returns: at least k, and enough for recall.
        cursor.execute(f"SET LOCAL hnsw.ef_search = {int(max(ef_search or settings.SIMILARITY_EF_SEARCH, k))}")
        cursor.execute(sql, [literal, exclude, *extra, literal, k])
        return [(row[0], 1.0 - float(row[1])) for row in cursor.fetchall()]


def similar_refusals(
    decision: Decision, *, k: int = 10, outcome: str | None = Outcome.REFUSED, now: datetime | None = None
) -> SimilarRefusals:
    """The k questions of the decision's route nearest to its own, and how often the route
    refused one in similar form (cosine >= SIMILARITY_SAME_FORM_MIN) in the last 30 days.

    Every query names the decision's route (or an embedder version of that route), so another
    route's decisions can never appear.
    """
    space = active_space(decision.route)
    result = SimilarRefusals(space=space, threshold=settings.SIMILARITY_SAME_FORM_MIN)
    if space is None:
        return result
    own = space.vectors().filter(decision=decision).values_list("vector", flat=True).first()
    if own is None:
        return result
    result.has_vector = True
    depth = settings.SIMILARITY_SAME_FORM_DEPTH
    # One index walk serves both the list and the 30-day count when the list is of refusals.
    pool = nearest(space, own, exclude=decision.pk, k=max(k, depth), outcome=Outcome.REFUSED, ef_search=depth)
    found = pool[:k] if outcome == Outcome.REFUSED else nearest(space, own, exclude=decision.pk, k=k, outcome=outcome)
    by_id = Decision.objects.select_related("support").in_bulk([pk for pk, _ in found])
    result.neighbours = [Neighbour(by_id[pk], sim) for pk, sim in found if pk in by_id]
    close = [pk for pk, sim in pool if sim >= result.threshold]
    since = (now or timezone.now()) - timedelta(days=result.days)
    result.similar_form_count = Decision.objects.filter(pk__in=close, occurred_at__gte=since).count()
    result.similar_form_capped = len(close) == len(pool) == depth
    return result


def latest_gap_run(route: Route) -> GapRun | None:
    return GapRun.objects.filter(route=route).order_by("-computed_at", "-pk").first()


def gap_clusters(run: GapRun) -> list[GapCluster]:
    """The run's clusters by rank, each with `graded` and `correct_share` (members with a final
    label and the share graded correct-when-answered; None when none is graded) from the figures
    that apps above this one register."""
    clusters = list(run.clusters.defer("decision_ids").order_by("rank"))
    figures = cluster_figures(run.pk)
    for cluster in clusters:
        labels = figures.get(cluster.pk, {})
        cluster.graded = labels.get("graded", 0)
        cluster.correct_share = labels.get("correct_share")
    return clusters


def cluster_refusals(cluster: GapCluster, *, limit: int = 200) -> list[Decision]:
    return list(
        Decision.objects.filter(pk__in=cluster.decision_ids)
        .select_related("support")
        .order_by("-occurred_at", "-pk")[:limit]
    )
