"""Writes of the similarity app: question vectors, built-in embedder fits, HNSW indexes, gap runs.

Vector rows are written with binary COPY (pgvector's psycopg adapter), the fast path at a million
rows. Each space is a partition of the vector table (see models.py), made when the space is and
dropped whole when an embedder version retires; its index is built by a job, outside the ingest
transaction. Both go through functions with the table owner's rights (migration 0006).
"""

from __future__ import annotations

import logging
import math
import time
from collections import defaultdict
from datetime import datetime, timedelta

import numpy as np
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone
from pgvector import HalfVector
from pgvector.psycopg import register_vector

from audit.models import Action
from audit.services import Actor, audit_record
from console.core.errors import InvalidInput
from console.core.jobs import enqueue
from console.core.locks import LockWaitExpired, lock_wait_at_most
from console.ledger.models import Decision, Outcome, Route
from console.ledger.selectors import route_decision_total
from console.ledger.validation import DecisionInput
from console.similarity import embedder, topics
from console.similarity.models import (
    EmbedderModel,
    EmbedderState,
    EmbedderVersion,
    GapCluster,
    GapRun,
    RouteEmbedding,
    Source,
)
from console.similarity.spaces import active_space

logger = logging.getLogger(__name__)

_COPY_VECTORS = (
    "COPY {table} (decision_id, route_id, embedder_id, refused, occurred_at, vector, space) "
    "FROM STDIN WITH (FORMAT BINARY)"
)
_VECTOR_TYPES = ["bigint", "bigint", "bigint", "bool", "timestamptz", "halfvec", "text"]
_EMBED_CHUNK = 5_000


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


def _space_for_sent(*, actor: Actor, route: Route, dimension: int) -> tuple[RouteEmbedding, bool]:
    """The route's space, fixing it to sent vectors of `dimension` when it has none yet.

    ON CONFLICT DO NOTHING settles two first batches racing: the second waits for the first to
    commit and then reads its row.
    """
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO similarity_routeembedding (route_id, source, dimension, index_ready, created_at) "
            "VALUES (%s, %s, %s, false, now()) ON CONFLICT (route_id) DO NOTHING RETURNING route_id",
            [route.pk, Source.SENT, dimension],
        )
        created = cursor.fetchone() is not None
    space = RouteEmbedding.objects.get(route=route)
    if created:
        _space_partition_create(space.space_key)
        audit_record(
            actor=actor,
            action=Action.QUESTION_VECTORS_FIXED,
            object_type="route",
            object_id=route.pk,
            route=route.slug,
            payload={"new": {"source": Source.SENT, "dimension": dimension}},
        )
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
                    {
                        "index": item.index,
                        "field": "question_embedding",
                        "value": size,
                        "message": f"route {slug!r} uses the console's built-in embedder; "
                        "it takes no question_embedding",
                    }
                )
            elif size != space.dimension:
                errors.append(
                    {
                        "index": item.index,
                        "field": "question_embedding",
                        "value": size,
                        "message": f"has {size} numbers; route {slug!r} takes {space.dimension}",
                    }
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


# --- partitions and indexes ---------------------------------------------------------------


def _space_partition_create(space: str) -> None:
    """Make the space's partition of the vector table, and of the models for a built-in version
    (`similarity_space_create`, migrations 0006 and 0007, with the table owner's rights: only an
    owner may add partitions); nothing when they exist.
    Creating it and attaching it locks the table against other schema changes only, not against
    reads and writes of vectors."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT similarity_space_create(%s)", [space])


def _space_partition_drop(space: str) -> bool:
    """Detach and drop a retired version's partitions, its vectors with their index and its model:
    the space goes back to the file system at once, where deleting the rows (or emptying the
    model) left it dead in the table. The function refuses the space of a version that is not
    retired.

    Detaching needs the vector table to itself for a moment, and every lookup queues behind a
    detach that waits: it gives up after SIMILARITY_PARTITION_DROP_LOCK_TIMEOUT (a long index
    build or ingest holds the table) and leaves the partitions to the sweeper (False)."""
    try:
        with lock_wait_at_most(settings.SIMILARITY_PARTITION_DROP_LOCK_TIMEOUT), connection.cursor() as cursor:
            cursor.execute("SELECT similarity_space_drop(%s)", [space])
    except LockWaitExpired:
        logger.info("similarity: partitions of %s still in use; the sweeper drops them later", space)
        return False
    return True


def _create_index(*, name: str, dimension: int, space: str) -> None:
    """Build the HNSW index of one space on its partition through `similarity_index_create`
    (migration 0006), which runs with the table owner's rights: the app's role may not create
    indexes itself. The build holds a SHARE lock on the space's partition for its duration
    (writes of its vectors wait; reads do not)."""
    with connection.cursor() as cursor:
        if connection.in_atomic_block:
            # CREATE INDEX refuses a table with deferred foreign-key checks pending in the transaction.
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        # An HNSW build whose graph outgrows maintenance_work_mem slows down by an order of magnitude.
        cursor.execute(
            "SELECT set_config('maintenance_work_mem', %s, %s)",
            [settings.SIMILARITY_INDEX_BUILD_MEMORY, bool(connection.in_atomic_block)],
        )
        cursor.execute(
            "SELECT similarity_index_create(%s, %s, %s, %s, %s)",
            [
                name,
                space,
                int(dimension),
                settings.SIMILARITY_HNSW_M,
                settings.SIMILARITY_HNSW_EF_CONSTRUCTION,
            ],
        )
        if not connection.in_atomic_block:
            cursor.execute("RESET maintenance_work_mem")


def space_index_create(*, route_id: int) -> bool:
    """Build the HNSW index of a route's sent refusals; idempotent."""
    space = RouteEmbedding.objects.filter(route_id=route_id, source=Source.SENT).first()
    if space is None:
        return False
    _create_index(name=space.index_name, dimension=space.dimension, space=space.space_key)
    RouteEmbedding.objects.filter(pk=route_id).update(index_ready=True)
    return True


# --- the built-in embedder ----------------------------------------------------------------


def _embed_and_store(version: EmbedderVersion, model, decisions: list[tuple[int, str, str, datetime]]) -> int:
    """Embed (id, question, outcome, occurred_at) rows with `version`; skip those already done, and
    store nothing once the version is retired (its partition is about to go, or gone)."""
    if not decisions:
        return 0
    vectors = embedder.transform(model, [question for _, question, _, _ in decisions], dimension=version.dimension)
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMP TABLE IF NOT EXISTS similarity_incoming "
            "(decision_id bigint, route_id bigint, embedder_id bigint, refused boolean, "
            "occurred_at timestamptz, vector halfvec, space text) ON COMMIT DELETE ROWS"
        )
        copy_vectors(
            cursor,
            (
                (pk, version.route_id, version.pk, outcome == Outcome.REFUSED, occurred_at, vector, version.space_key)
                for (pk, _, outcome, occurred_at), vector in zip(decisions, vectors, strict=True)
            ),
            table="similarity_incoming",
        )
        cursor.execute(
            "INSERT INTO similarity_questionvector "
            "(decision_id, route_id, embedder_id, refused, occurred_at, vector, space) "
            "SELECT decision_id, route_id, embedder_id, refused, occurred_at, vector, space FROM similarity_incoming "
            "WHERE EXISTS (SELECT 1 FROM similarity_embedderversion v WHERE v.id = %s AND v.state <> %s) "
            "ON CONFLICT DO NOTHING",
            [version.pk, EmbedderState.RETIRED],
        )
        stored = cursor.rowcount
        cursor.execute("DELETE FROM similarity_incoming")
    return stored


def _decision_rows(queryset) -> list[tuple[int, str, str, datetime]]:
    return list(queryset.values_list("pk", "question", "outcome", "occurred_at"))


def vectors_embed(*, decision_ids: list[int]) -> int:
    """After ingest: give new decisions of built-in routes a vector from every live embedder
    version (current, and one still re-embedding), and ask for a (re)fit when a route has none
    or has doubled since its current one was fitted."""
    routes = set(Decision.objects.filter(pk__in=decision_ids).values_list("route_id", flat=True))
    sent = set(
        RouteEmbedding.objects.filter(route_id__in=routes, source=Source.SENT).values_list("route_id", flat=True)
    )
    stored = 0
    for route_id in sorted(routes - sent):
        versions = list(EmbedderVersion.objects.filter(route_id=route_id).exclude(state=EmbedderState.RETIRED))
        for version in versions:
            model = _model_load(version)
            if model is None:
                continue  # retired since it was read: its model and vectors are gone
            for start in range(0, len(decision_ids), _EMBED_CHUNK):
                with transaction.atomic():
                    rows = _decision_rows(
                        Decision.objects.filter(route_id=route_id, pk__in=decision_ids[start : start + _EMBED_CHUNK])
                    )
                    stored += _embed_and_store(version, model, rows)
        if _needs_fit(route_id, versions):
            enqueue("similarity.embedder_fit", route_id=route_id)
    return stored


def vectors_embed_missing(*, limit: int = 20_000) -> int:
    """Sweeper: decisions of built-in routes still without a vector from their current version
    (an after-ingest job that never reached the broker), embedded now."""
    stored = 0
    for version in EmbedderVersion.objects.filter(state=EmbedderState.CURRENT):
        missing = list(
            Decision.objects.filter(route_id=version.route_id)
            .exclude(question_vectors__space=version.space_key)
            .order_by("pk")
            .values_list("pk", flat=True)[:limit]
        )
        if missing:
            stored += vectors_embed(decision_ids=missing)
    return stored


def _needs_fit(route_id: int, versions: list[EmbedderVersion]) -> bool:
    if any(v.state == EmbedderState.BUILDING for v in versions):
        return False
    # Asked after every ingest batch: read from the route's counters, not by counting its decisions.
    total = route_decision_total(route_id)
    current = next((v for v in versions if v.state == EmbedderState.CURRENT), None)
    if current is None:
        return total >= settings.SIMILARITY_MIN_FIT_QUESTIONS
    return total >= 2 * current.route_questions


_FIT_LOCK = 0x53696D46  # "SimF": one fit per route at a time, across workers


def embedder_fit(*, actor: Actor, route_id: int, seed: int = 0, when_due: bool = False) -> EmbedderVersion | None:
    """Fit a new built-in embedder version on the route's questions, embed every decision of the
    route with it while the previous version keeps answering, build its index, make it current,
    and drop the previous version's vectors. None when the route uses sent vectors, has too few
    questions, or another fit of the route is running.

    `when_due` (the after-ingest job): fit only if the route still needs it once the lock is held.
    Every ingest batch of a route that is due asks for a fit, so several jobs queue up behind the
    first; without the check each of them refitted the route again, re-embedding every question
    for nothing."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [_FIT_LOCK, route_id])
        if not cursor.fetchone()[0]:
            return None
    try:
        if when_due and not _needs_fit(route_id, list(EmbedderVersion.objects.filter(route_id=route_id))):
            return None
        return _fit_locked(actor=actor, route_id=route_id, seed=seed)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [_FIT_LOCK, route_id])


def _fit_locked(*, actor: Actor, route_id: int, seed: int) -> EmbedderVersion | None:
    route = Route.objects.get(pk=route_id)
    if RouteEmbedding.objects.filter(route=route, source=Source.SENT).exists():
        return None
    total = route_decision_total(route.pk)
    if total < 2:
        return None
    sample = list(
        Decision.objects.filter(route=route)
        .order_by("?")
        .values_list("question", flat=True)[: settings.SIMILARITY_FIT_SAMPLE]
    )
    model = embedder.fit(sample, seed=seed)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                "INSERT INTO similarity_routeembedding (route_id, source, dimension, index_ready, created_at) "
                "VALUES (%s, %s, %s, false, now()) ON CONFLICT (route_id) DO NOTHING RETURNING route_id",
                [route.pk, Source.BUILTIN, embedder.DIMENSION],
            )
            fixed = cursor.fetchone() is not None
        if RouteEmbedding.objects.get(route=route).source != Source.BUILTIN:
            return None  # sent vectors arrived while fitting
        last = EmbedderVersion.objects.filter(route=route).order_by("-number").first()
        version = EmbedderVersion.objects.create(
            route=route,
            number=(last.number + 1) if last else 1,
            dimension=embedder.DIMENSION,
            components=embedder.components(model),
            fitted_on=len(sample),
            route_questions=total,
        )
        _space_partition_create(version.space_key)
        EmbedderModel.objects.create(version=version, data=embedder.dumps(model))
        if fixed:
            audit_record(
                actor=actor,
                action=Action.QUESTION_VECTORS_FIXED,
                object_type="route",
                object_id=route.pk,
                route=route.slug,
                payload={"new": {"source": Source.BUILTIN, "dimension": embedder.DIMENSION}},
            )
        audit_record(
            actor=actor,
            action=Action.EMBEDDER_FITTED,
            object_type="embedder_version",
            object_id=version.pk,
            route=route.slug,
            payload={"new": {"number": version.number, "fitted_on": len(sample), "components": version.components}},
        )
    embedder_reembed(actor=actor, version=version, model=model)
    return version


def embedder_reembed(*, actor: Actor, version: EmbedderVersion, model=None) -> None:
    """Embed every decision of the route with `version`, then make it current."""
    model = model if model is not None else _model_load(version)
    if model is None:
        return  # retired: nothing to re-embed
    last_id = 0
    while True:
        with transaction.atomic():
            rows = _decision_rows(
                Decision.objects.filter(route_id=version.route_id, pk__gt=last_id).order_by("pk")[:_EMBED_CHUNK]
            )
            if not rows:
                break
            _embed_and_store(version, model, rows)
        last_id = rows[-1][0]
    _create_index(name=version.index_name, dimension=version.dimension, space=version.space_key)
    embedder_promote(actor=actor, version=version)


def embedder_promote(*, actor: Actor, version: EmbedderVersion) -> None:
    with transaction.atomic():
        old = list(
            EmbedderVersion.objects.select_for_update().filter(route_id=version.route_id, state=EmbedderState.CURRENT)
        )
        EmbedderVersion.objects.filter(pk__in=[v.pk for v in old]).update(state=EmbedderState.RETIRED)
        EmbedderVersion.objects.filter(pk=version.pk).update(state=EmbedderState.CURRENT, current_since=timezone.now())
        audit_record(
            actor=actor,
            action=Action.EMBEDDER_PROMOTED,
            object_type="embedder_version",
            object_id=version.pk,
            route=version.route.slug,
            payload={"old": [v.number for v in old], "new": version.number},
        )
    for retired in old:
        # A retired version's vectors and model are never read again: their partitions go whole,
        # index included (the version's row stays as history).
        _space_partition_drop(retired.space_key)


def spaces_retired_drop() -> int:
    """Sweeper: drop the partitions of retired versions still there (a promotion whose drop
    failed, or was cut short, after its transaction committed)."""
    dropped = 0
    for version in EmbedderVersion.objects.filter(state=EmbedderState.RETIRED).only("pk"):
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT to_regclass(%s) IS NOT NULL", [f"public.similarity_questionvector_{version.space_key}"]
            )
            if cursor.fetchone()[0] and _space_partition_drop(version.space_key):
                dropped += 1
    return dropped


def _model_load(version: EmbedderVersion):
    """The version's fitted pipeline; None once it has retired (its model is gone)."""
    data = EmbedderModel.objects.filter(version_id=version.pk).values_list("data", flat=True).first()
    return None if data is None else embedder.loads(data)


# --- corpus gaps --------------------------------------------------------------------------


def gaps_compute(
    *, actor: Actor, route_id: int, window_days: int | None = None, now: datetime | None = None, seed: int = 0
) -> GapRun | None:
    """Cluster the route's refused questions of the window and store the clusters, ranked by
    size x share with no supporting passage. None when the route has no vectors yet."""
    started = time.monotonic()
    route = Route.objects.get(pk=route_id)
    space = active_space(route)
    if space is None:
        return None
    window_days = window_days or settings.SIMILARITY_GAPS_WINDOW_DAYS
    window_to = now or timezone.now()
    window_from = window_to - timedelta(days=window_days)
    rows = list(
        space.vectors()
        .filter(refused=True, occurred_at__gte=window_from, occurred_at__lt=window_to)
        .order_by("decision_id")
        .values_list(
            "decision_id",
            "occurred_at",
            "vector",
            "decision__question",
            "decision__support__no_supporting_passage",
            "decision__support__status",
        )
    )
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    vectors = np.stack([np.asarray(r[2], dtype=np.float32) for r in rows]) if rows else np.zeros((0, 1))
    found = (
        topics.cluster(
            vectors,
            sample_max=settings.SIMILARITY_GAPS_SAMPLE,
            seed=seed,
            one_group_min=settings.SIMILARITY_SAME_FORM_MIN,
        )
        if rows
        else None
    )
    clusters = []
    if found is not None and len(found.centres):
        questions = [r[3] for r in rows]
        cluster_ids = list(range(len(found.centres)))
        terms = topics.class_tfidf_terms(questions, found.labels, cluster_ids)
        week = window_to - timedelta(days=7)
        fortnight = window_to - timedelta(days=14)
        for c in cluster_ids:
            members = np.flatnonzero(found.labels == c)
            verified = [i for i in members if rows[i][5] == "done"]
            no_support = sum(1 for i in verified if rows[i][4])
            share = no_support / len(verified) if verified else 0.0
            examples = topics.representatives(vectors, found.labels, found.centres, c)
            clusters.append(
                dict(
                    size=len(members),
                    verified=len(verified),
                    no_support_share=share,
                    score=len(members) * share,
                    size_this_week=sum(1 for i in members if rows[i][1] >= week),
                    size_last_week=sum(1 for i in members if fortnight <= rows[i][1] < week),
                    examples=[{"id": int(ids[i]), "question": questions[i]} for i in examples],
                    terms=terms.get(c, []),
                    decision_ids=[int(ids[i]) for i in members],
                )
            )
    clusters.sort(key=lambda c: (-c["score"], -c["size"]))
    with transaction.atomic():
        run = GapRun.objects.create(
            route=route,
            window_from=window_from,
            window_to=window_to,
            source=space.source,
            embedder_id=space.embedder_id,
            refusals=len(rows),
            sampled=found.sampled if found else 0,
            unclustered=int((found.labels < 0).sum()) if found else 0,
            params={
                "algorithm": "hdbscan",
                "metric": "cosine",
                "sample_max": settings.SIMILARITY_GAPS_SAMPLE,
                "window_days": window_days,
                "seed": seed,
                "one_group_min": settings.SIMILARITY_SAME_FORM_MIN,
            },
            seconds=round(time.monotonic() - started, 3),
        )
        GapCluster.objects.bulk_create([GapCluster(run=run, rank=rank, **c) for rank, c in enumerate(clusters, 1)])
        audit_record(
            actor=actor,
            action=Action.GAPS_COMPUTED,
            object_type="gap_run",
            object_id=run.pk,
            route=route.slug,
            payload={"new": {"refusals": len(rows), "clusters": len(clusters), "window_days": window_days}},
        )
    return run
