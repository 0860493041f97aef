"""A route's vector space: which partition of the shared table it searches, and its index.

HNSW needs a fixed dimension, so each space (a route's sent vectors, or one built-in embedder
version) is a partition of its own with its own partial expression index (models.py). The
queries' predicate lives here: it names the space, so the planner reads that partition alone, and
holds the index's `refused` so the planner can use the index.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection
from django.db.models import QuerySet

from console.accounts.models import Route
from console.similarity.models import (
    EmbedderState,
    EmbedderVersion,
    QuestionVector,
    RouteEmbedding,
    Source,
    builtin_space,
    sent_space,
)


@dataclass(frozen=True)
class Space:
    """The vectors a route is searched in: its sent vectors, or its current built-in version."""

    route_id: int
    source: str
    dimension: int
    embedder_id: int | None
    embedder_number: int | None
    index_name: str
    # The leading components the space's graph holds, when fewer than `dimension` (a built-in
    # version's since similarity migration 0014): lookups re-rank its nearest by the whole vector.
    graph_dimension: int | None = None

    @property
    def source_label(self) -> str:
        return Source(self.source).label

    @property
    def key(self) -> str:
        """The space's partition key (models.QuestionVector.space)."""
        if self.embedder_id is None:
            return sent_space(self.route_id)
        return builtin_space(self.embedder_id)

    @property
    def predicate(self) -> str:
        """Every vector of the space: its partition alone (the key is a checked number after a letter)."""
        return f"space = '{self.key}'"

    @property
    def refused_predicate(self) -> str:
        """The space's refusals: its partition, and the predicate of the partition's HNSW index."""
        return f"{self.predicate} AND refused"

    def vectors(self) -> QuerySet[QuestionVector]:
        return QuestionVector.objects.filter(space=self.key)


def active_space(route: Route) -> Space | None:
    fixed = RouteEmbedding.objects.filter(route=route).first()
    if fixed is None:
        return None
    if fixed.source == Source.SENT:
        return Space(route.pk, Source.SENT, fixed.dimension, None, None, fixed.index_name)
    current = (
        EmbedderVersion.objects.filter(route=route, state=EmbedderState.CURRENT)
        .only("pk", "number", "graph_dimension")
        .first()
    )
    if current is None:
        return None  # the first fit is still re-embedding
    return Space(
        route.pk,
        Source.BUILTIN,
        fixed.dimension,
        current.pk,
        current.number,
        current.index_name,
        current.graph_dimension,
    )


def active_space_and_vector(route: Route, decision_id: int) -> tuple[Space | None, str | None]:
    """The route's active space and the decision's vector in it (pgvector's text form, or None),
    in one query: what `active_space` and a read of the vector do in two or three."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT space.source, space.dimension, version.id, version.number, version.graph_dimension, "
            # The space's key, so that the executor reads that one partition.
            "(SELECT own.vector::text FROM similarity_questionvector own WHERE own.decision_id = %s "
            "AND own.space = CASE WHEN version.id IS NULL THEN 'r' || space.route_id ELSE 'v' || version.id END) "
            "FROM similarity_routeembedding space LEFT JOIN similarity_embedderversion version "
            "ON space.source = %s AND version.route_id = space.route_id AND version.state = %s "
            "WHERE space.route_id = %s ORDER BY version.id DESC NULLS LAST LIMIT 1",
            [decision_id, Source.BUILTIN, EmbedderState.CURRENT, route.pk],
        )
        row = cursor.fetchone()
    if row is None:
        return None, None
    source, dimension, version_id, number, graph_dimension, vector = row
    if source == Source.SENT:
        index_name = RouteEmbedding(route_id=route.pk).index_name
        return Space(route.pk, Source.SENT, dimension, None, None, index_name), vector
    if version_id is None:
        return None, None  # the first fit is still re-embedding
    index_name = EmbedderVersion(pk=version_id).index_name
    return Space(route.pk, Source.BUILTIN, dimension, version_id, number, index_name, graph_dimension), vector
