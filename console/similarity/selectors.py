"""Reads of the similarity app: a route's active vector space, nearest refusals, gap runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np
from django.conf import settings
from django.db import connection, transaction
from django.db.models import QuerySet
from django.utils import timezone

from console.ledger.models import Decision, Outcome, Route
from console.similarity.models import (
    EmbedderState,
    EmbedderVersion,
    GapCluster,
    GapRun,
    QuestionVector,
    RouteEmbedding,
    Source,
)
from console.similarity.services import builtin_predicate, sent_predicate


@dataclass(frozen=True)
class Space:
    """The vectors a route is searched in: its sent vectors, or its current built-in version."""

    route_id: int
    source: str
    dimension: int
    embedder_id: int | None
    embedder_number: int | None
    index_name: str

    @property
    def source_label(self) -> str:
        return Source(self.source).label

    @property
    def refused_predicate(self) -> str:
        """The partial index's predicate, repeated word for word so the planner can use it."""
        if self.embedder_id is None:
            return sent_predicate(self.route_id)
        return builtin_predicate(self.embedder_id)

    def vectors(self) -> QuerySet[QuestionVector]:
        if self.embedder_id is None:
            return QuestionVector.objects.filter(route_id=self.route_id, embedder__isnull=True)
        return QuestionVector.objects.filter(embedder_id=self.embedder_id)


def active_space(route: Route) -> Space | None:
    fixed = RouteEmbedding.objects.filter(route=route).first()
    if fixed is None:
        return None
    if fixed.source == Source.SENT:
        return Space(route.pk, Source.SENT, fixed.dimension, None, None, fixed.index_name)
    current = EmbedderVersion.objects.filter(route=route, state=EmbedderState.CURRENT).only("pk", "number").first()
    if current is None:
        return None  # the first fit is still re-embedding
    return Space(route.pk, Source.BUILTIN, fixed.dimension, current.pk, current.number, current.index_name)


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
    sql = (f"SELECT decision_id, {expression} <=> %s::vector({dimension}) AS distance "
           f"FROM similarity_questionvector WHERE {where} AND decision_id <> %s{extra} "
           f"ORDER BY {expression} <=> %s::vector({dimension}) LIMIT %s")
    return sql, [outcome] if extra else []


def nearest(space: Space, query: np.ndarray, *, exclude: int = 0, k: int = 10, outcome: str | None = Outcome.REFUSED,
            ef_search: int | None = None) -> list[tuple[int, float]]:
    """(decision id, cosine similarity) of the k nearest vectors of the space, nearest first.
    Refusals go through the space's HNSW index; other outcomes are an exact scan of the route."""
    sql, extra = _nearest_sql(space, outcome)
    literal = "[" + ",".join(repr(float(x)) for x in np.asarray(query, dtype=np.float32)) + "]"
    with transaction.atomic(), connection.cursor() as cursor:
        # ef_search bounds how many candidates HNSW returns: at least k, and enough for recall.
        cursor.execute(f"SET LOCAL hnsw.ef_search = {int(max(ef_search or settings.SIMILARITY_EF_SEARCH, k))}")
        cursor.execute(sql, [literal, exclude, *extra, literal, k])
        return [(row[0], 1.0 - float(row[1])) for row in cursor.fetchall()]


def similar_refusals(decision: Decision, *, k: int = 10, outcome: str | None = Outcome.REFUSED,
                     now: datetime | None = None) -> SimilarRefusals:
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
    found = nearest(space, own, exclude=decision.pk, k=k, outcome=outcome)
    by_id = Decision.objects.select_related("support").in_bulk([pk for pk, _ in found])
    result.neighbours = [Neighbour(by_id[pk], sim) for pk, sim in found if pk in by_id]
    depth = settings.SIMILARITY_SAME_FORM_DEPTH
    pool = nearest(space, own, exclude=decision.pk, k=depth, outcome=Outcome.REFUSED, ef_search=depth)
    close = [pk for pk, sim in pool if sim >= result.threshold]
    since = (now or timezone.now()) - timedelta(days=result.days)
    result.similar_form_count = Decision.objects.filter(pk__in=close, occurred_at__gte=since).count()
    result.similar_form_capped = len(close) == len(pool) == depth
    return result


def latest_gap_run(route: Route) -> GapRun | None:
    return GapRun.objects.filter(route=route).order_by("-computed_at", "-pk").first()


def gap_clusters(run: GapRun) -> list[GapCluster]:
    return list(run.clusters.defer("decision_ids").order_by("rank"))


def cluster_refusals(cluster: GapCluster, *, limit: int = 200) -> list[Decision]:
    return list(Decision.objects.filter(pk__in=cluster.decision_ids).select_related("support")
                .order_by("-occurred_at", "-pk")[:limit])
