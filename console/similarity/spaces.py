"""A route's vector space: which vectors of the shared table it searches, and its index.

HNSW needs a fixed dimension, so each space (a route's sent vectors, or one built-in embedder
version) has its own partial expression index; its predicate lives here, used word for word by
the index (services) and the queries (selectors) so that the planner can match them.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import connection
from django.db.models import QuerySet

from console.ledger.models import Route
from console.similarity.models import EmbedderState, EmbedderVersion, QuestionVector, RouteEmbedding, Source


def sent_predicate(route_id: int) -> str:
    return f"route_id = {int(route_id)} AND embedder_id IS NULL AND refused"


def builtin_predicate(embedder_id: int) -> str:
    return f"embedder_id = {int(embedder_id)} AND refused"


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


def active_space_and_vector(route: Route, decision_id: int) -> tuple[Space | None, str | None]:
    """The route's active space and the decision's vector in it (pgvector's text form, or None),
    in one query: what `active_space` and a read of the vector do in two or three."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT space.source, space.dimension, version.id, version.number, "
            "(SELECT own.vector::text FROM similarity_questionvector own WHERE own.decision_id = %s "
            "AND own.route_id = space.route_id AND own.embedder_id IS NOT DISTINCT FROM version.id) "
            "FROM similarity_routeembedding space LEFT JOIN similarity_embedderversion version "
            "ON space.source = %s AND version.route_id = space.route_id AND version.state = %s "
            "WHERE space.route_id = %s ORDER BY version.id DESC NULLS LAST LIMIT 1",
            [decision_id, Source.BUILTIN, EmbedderState.CURRENT, route.pk],
        )
        row = cursor.fetchone()
    if row is None:
        return None, None
    source, dimension, version_id, number, vector = row
    if source == Source.SENT:
        index_name = RouteEmbedding(route_id=route.pk).index_name
        return Space(route.pk, Source.SENT, dimension, None, None, index_name), vector
    if version_id is None:
        return None, None  # the first fit is still re-embedding
    index_name = EmbedderVersion(pk=version_id).index_name
    return Space(route.pk, Source.BUILTIN, dimension, version_id, number, index_name), vector
