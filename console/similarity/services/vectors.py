"""Question vectors: the COPY that writes them, and the vectors an integrator sends with its
decisions (stored inside the ingest transaction)."""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
from django.db import connection
from pgvector import HalfVector
from pgvector.psycopg import register_vector

from audit.changes import field_changes
from audit.models import Action
from audit.services import Actor, audit_record
from console.accounts.models import Route
from console.core.errors import InvalidInput, detail
from console.core.jobs import enqueue
from console.ledger.models import Outcome
from console.ledger.validation import DecisionInput
from console.similarity.models import RouteEmbedding, Source
from console.similarity.services.partitions import space_partition_create

_COPY_VECTORS = (
    "COPY {table} (decision_id, route_id, embedder_id, refused, occurred_at, vector, space) "
    "FROM STDIN WITH (FORMAT BINARY)"
)
_VECTOR_TYPES = ["bigint", "bigint", "bigint", "bool", "timestamptz", "halfvec", "text"]


def copy_vectors(cursor, rows, *, table: str = "similarity_questionvector") -> None:
    """COPY rows (decision_id, route_id, embedder_id, refused, occurred_at, float array, space).

    Vectors are stored as unit `halfvec`s (docs/architecture.md, "Similarity"): every search is by
    cosine, which a vector's length does not change, and scaled to unit length every number fits
    half precision, whatever an integrator sent (a zero vector stays zero).
    The vector types are registered on the psycopg connection under Django's cursor, and a cursor
    made afterwards carries them (a cursor copies its connection's adapters when it is created).
    """
    raw_connection = cursor.cursor.connection
    if not getattr(raw_connection, "_console_vector_registered", False):
        register_vector(raw_connection)
        raw_connection._console_vector_registered = True
    with raw_connection.cursor() as raw, raw.copy(_COPY_VECTORS.format(table=table)) as copy:
        copy.set_types(_VECTOR_TYPES)
        for *row, vector, space in rows:
            copy.write_row((*row, HalfVector(unit(vector)), space))


def unit(vector) -> np.ndarray:
    """`vector` scaled to length 1; a zero vector as it is. When its sum of squares leaves float64's
    range (numbers beyond about 1e154, or all below about 1e-154), it is divided by its largest
    number first."""
    vector = np.asarray(vector, dtype=np.float64)
    with np.errstate(over="ignore", under="ignore"):  # both are handled below
        norm = math.sqrt(vector.dot(vector))
    if not 0 < norm < math.inf:
        largest = np.abs(vector).max(initial=0.0)
        if largest == 0:
            return vector
        vector = vector / largest
        norm = math.sqrt(vector.dot(vector))
    return vector / norm


# --- vectors sent by the integrator -------------------------------------------------------


def space_fix(*, actor: Actor, route: Route, source: str, dimension: int) -> bool:
    """Fix the route's vectors to `source` and `dimension` when it has none yet, with its audit
    event; False when it already had them (whichever source that was).

    ON CONFLICT DO NOTHING settles two first writers racing (two batches, or a batch and a fit):
    the second waits for the first to commit and then finds its row."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO similarity_routeembedding (route_id, source, dimension, index_ready, created_at) "
            "VALUES (%s, %s, %s, false, now()) ON CONFLICT (route_id) DO NOTHING RETURNING route_id",
            [route.pk, source, dimension],
        )
        if cursor.fetchone() is None:
            return False
    audit_record(
        actor=actor,
        action=Action.QUESTION_VECTORS_FIXED,
        object_type="route",
        object_id=route.pk,
        route=route.slug,
        payload=field_changes(new={"source": source, "dimension": dimension}),
    )
    return True


def _space_for_sent(*, actor: Actor, route: Route, dimension: int) -> tuple[RouteEmbedding, bool]:
    """The route's space, fixing it to sent vectors of `dimension` when it has none yet."""
    created = space_fix(actor=actor, route=route, source=Source.SENT, dimension=dimension)
    space = RouteEmbedding.objects.get(route=route)
    if created:
        space_partition_create(space.space_key)
        enqueue("similarity.space_index_create", route_id=route.pk)
    return space, created


def vectors_store_sent(
    *, actor: Actor, items: list[DecisionInput], decision_ids: list[int], routes: dict[str, Route]
) -> None:
    """Store the batch's `question_embedding`s; runs inside the ingest transaction (ledger hook).

    A route takes vectors of one dimension, fixed by its first; a vector of another dimension, or
    any vector on a route that uses the built-in embedder, rejects the batch (400 naming the items).
    """
    by_route: dict[str, list[tuple[DecisionInput, int]]] = defaultdict(list)
    for item, decision_id in zip(items, decision_ids, strict=True):
        if item.question_embedding is not None:
            by_route[item.route].append((item, decision_id))
    if not by_route:
        return
    errors, rows = [], []
    for slug, pairs in sorted(by_route.items()):
        route = routes[slug]
        space, _ = _space_for_sent(actor=actor, route=route, dimension=len(pairs[0][0].question_embedding))
        for item, decision_id in pairs:
            size = len(item.question_embedding)
            if space.source != Source.SENT:
                errors.append(
                    detail(
                        "question_embedding",
                        "embedding_not_taken",
                        f"route {slug!r} uses the console's built-in embedder; it takes no question_embedding",
                        index=item.index,
                        value=size,
                    )
                )
            elif size != space.dimension:
                errors.append(
                    detail(
                        "question_embedding",
                        "embedding_dimension",
                        f"has {size} numbers; route {slug!r} takes {space.dimension}",
                        index=item.index,
                        value=size,
                    )
                )
            else:
                rows.append(
                    (
                        decision_id,
                        route.pk,
                        None,
                        item.outcome == Outcome.REFUSED,
                        item.occurred_at,
                        # float64 until scaled: a finite number beyond float32's range (3.4e38)
                        # would become infinite, which pgvector refuses
                        np.asarray(item.question_embedding, dtype=np.float64),
                        space.space_key,
                    )
                )
    if errors:
        raise InvalidInput(
            f"{len(errors)} question_embedding(s) do not fit their route; nothing was written.",
            details=errors,
            code="embedding_dimension",
        )
    with connection.cursor() as cursor:
        copy_vectors(cursor, rows)
