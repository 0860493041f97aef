"""The built-in embedder: vectors for the decisions of routes that send none, fits of new
versions, re-embedding while the previous version keeps answering, and promotion."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from audit.changes import field_changes
from audit.models import Action
from audit.services import Actor, audit_record
from console.accounts.models import Route
from console.core.jobs import commit_without_waiting, enqueue
from console.ledger.models import Decision, Outcome
from console.ledger.selectors import route_decision_total
from console.similarity import embedder
from console.similarity.models import EmbedderModel, EmbedderState, EmbedderVersion, RouteEmbedding, Source
from console.similarity.services.partitions import index_create, space_partition_create, space_partition_drop
from console.similarity.services.vectors import copy_vectors, space_fix

_EMBED_CHUNK = 5_000
# A job looks this many times its room past its own decisions for later ones still without a
# vector: enough to find the batches queued behind it, bounded when a refit did most of them.
_LOOK_AHEAD = 4
# A part of an after-ingest job's rows stored at the same time as the rest has at least this many
# (`_store_in_parts`): below it, a connection of its own costs more than it saves.
_ROWS_A_WRITER = 250


def _embed_and_store(
    version: EmbedderVersion, model, decisions: list[tuple[int, str, str, datetime]], *, writers: int = 1
) -> int:
    """Embed (id, question, outcome, occurred_at) rows with `version`; skip those already done, and
    store nothing once the version is retired (its partition is about to go, or gone).

    With `writers` above 1 the rows are stored in that many parts at once, each on a connection and
    in a transaction of its own (`_store_in_parts`). Other connections see only committed decisions,
    so inside an enclosing transaction (a request's, a test's: more than this call's own atomic
    block) the rows go through this connection alone, whatever `writers` says."""
    if not decisions:
        return 0
    if len(connection.atomic_blocks) > 1:
        writers = 1
    vectors = embedder.transform(model, [question for _, question, _, _ in decisions], dimension=version.dimension)
    rows = [
        (pk, version.route_id, version.pk, outcome == Outcome.REFUSED, occurred_at, vector, version.space_key)
        for (pk, _, outcome, occurred_at), vector in zip(decisions, vectors, strict=True)
    ]
    writers = max(1, min(writers, len(rows) // _ROWS_A_WRITER))
    if writers == 1:
        return _store(version.pk, rows)
    return _store_in_parts(version.pk, [rows[part::writers] for part in range(writers)])


def _store(version_id: int, rows: list[tuple]) -> int:
    """COPY the rows into this connection's staging table and insert those not stored yet, in the
    caller's transaction; the rows stored."""
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMP TABLE IF NOT EXISTS similarity_incoming "
            "(decision_id bigint, route_id bigint, embedder_id bigint, refused boolean, "
            "occurred_at timestamptz, vector halfvec, space text) ON COMMIT DELETE ROWS"
        )
        copy_vectors(cursor, rows, table="similarity_incoming")
        # In decision order: two jobs whose decisions overlap (a job takes later batches' decisions
        # too) then wait on each other's rows in the same order, never in a cycle.
        cursor.execute(
            "INSERT INTO similarity_questionvector "
            "(decision_id, route_id, embedder_id, refused, occurred_at, vector, space) "
            "SELECT decision_id, route_id, embedder_id, refused, occurred_at, vector, space FROM similarity_incoming "
            "WHERE EXISTS (SELECT 1 FROM similarity_embedderversion v WHERE v.id = %s AND v.state <> %s) "
            "ORDER BY decision_id ON CONFLICT DO NOTHING",
            [version_id, EmbedderState.RETIRED],
        )
        stored = cursor.rowcount
        cursor.execute("DELETE FROM similarity_incoming")
    return stored


def _store_in_parts(version_id: int, parts: list[list[tuple]]) -> int:
    """Store each part at the same time, each from a thread on that thread's own connection, in a
    transaction of its own that does not wait for the disk (a lost one is embedded again by the
    sweeper).

    A refusal's insert into its route's graph is most of a vector's cost (1.2-3.5 ms once the graph
    outgrows the shared buffers, against about 0.2 ms for the rest of the row), and one job's
    INSERT runs on one PostgreSQL backend: under a stream of 1,199 decisions/s the similarity
    queue's one process left most of a core idle while question vectors fell behind (bench/README.md,
    "Question vectors stored in parts at once"). Parts take every `writers`-th row, so each holds
    its share of refusals, and stay in decision order; their decisions differ, so no part waits for
    another's rows.

    The caller's connection writes none of them, so while it waits for the threads it holds no lock
    a writer could queue behind. When it stored the first part in its own open transaction, a refit
    building the partition's graph queued behind that part's lock, the next part's INSERT queued
    behind the build, and the caller waited for that part: a cycle through this process that
    PostgreSQL cannot see, which held the background worker until its hard time limit (the
    ten-minute stream, bench/README.md "The model kept between jobs")."""

    def stored_from_thread(rows: list[tuple]) -> int:
        try:
            with transaction.atomic():
                commit_without_waiting()
                return _store(version_id, rows)
        finally:
            connection.close()  # the thread's own connection: the thread ends here

    with ThreadPoolExecutor(max_workers=len(parts), thread_name_prefix="vectors-writer") as pool:
        stored = [pool.submit(stored_from_thread, rows) for rows in parts]
        return sum(future.result() for future in stored)


def _decision_rows(queryset) -> list[tuple[int, str, str, datetime]]:
    return list(queryset.values_list("pk", "question", "outcome", "occurred_at"))


def _later_rows(version: EmbedderVersion, *, after: int, limit: int) -> list[tuple[int, str, str, datetime]]:
    """Up to `limit` of the route's decisions after `after` still without a vector from `version`,
    looking at no more than _LOOK_AHEAD x `limit` of them."""
    # The window is read from the (route, id) index alone; only the decisions chosen are read whole.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT d.id, d.question, d.outcome, d.occurred_at FROM ledger_decision d "
            "WHERE d.route_id = %s AND d.id IN ("
            "  SELECT w.id FROM ("
            "    SELECT id FROM ledger_decision WHERE route_id = %s AND id > %s ORDER BY id LIMIT %s"
            "  ) AS w WHERE NOT EXISTS ("
            "    SELECT 1 FROM similarity_questionvector v WHERE v.decision_id = w.id AND v.space = %s"
            "  ) ORDER BY w.id LIMIT %s"
            ") ORDER BY d.id",
            [version.route_id, version.route_id, after, _LOOK_AHEAD * limit, version.space_key, limit],
        )
        return cursor.fetchall()


def vectors_embed(*, decision_ids: list[int]) -> int:
    """After ingest: give new decisions of built-in routes a vector from their route's current
    embedder version, and ask for a (re)fit when a route has none or has doubled since its current
    one was fitted. While a refit runs, the job embeds its decisions past the refit's frontier with
    the version being built, and leaves the rest to the refit (`_version_for_jobs`).

    A job also takes the route's later decisions still without a vector (up to _EMBED_CHUNK with
    its own), so the jobs of the batches behind it find theirs done and cost a query each. Under a
    stream the background worker gets the CPU that ingest leaves it, and per 500 decisions one job
    of thousands spends far less than ten of 500 on everything but the vectors themselves (the
    look-ups, the model's load, the commit, the broker's round trips), so it catches up instead of
    falling further behind (bench/README.md)."""
    routes = set(Decision.objects.filter(pk__in=decision_ids).values_list("route_id", flat=True))
    sent = set(
        RouteEmbedding.objects.filter(route_id__in=routes, source=Source.SENT).values_list("route_id", flat=True)
    )
    stored = 0
    for route_id in sorted(routes - sent):
        versions = list(EmbedderVersion.objects.filter(route_id=route_id).exclude(state=EmbedderState.RETIRED))
        version = _version_for_jobs(route_id, versions)
        if version is not None:
            frontier = version.reembeds_until if version.state == EmbedderState.BUILDING else 0
            stored += _version_embed(version, [pk for pk in decision_ids if pk > frontier])
        if _needs_fit(route_id, versions):
            enqueue("similarity.embedder_fit", route_id=route_id)
    return stored


def _version_for_jobs(route_id: int, versions: list[EmbedderVersion]) -> EmbedderVersion | None:
    """The version after-ingest jobs embed with: the one being built while its refit runs (for the
    decisions past its frontier only, `reembeds_until`: the refit embeds those up to it), else the
    current one.

    While a refit ran, the jobs once embedded with the current version too, and every decision was
    embedded twice; then they left their decisions to the refit, which had to chase the stream in
    passes and a catch-up after its promotion on one process at low priority, and fell minutes
    behind (bench/README.md). Split at the frontier, each decision is embedded once, by whoever
    reaches it, and the refit's work is fixed when it starts. A decision stored during a refit joins
    similar lists when the refit's version becomes current. A building version whose fit lock
    nobody holds is a refit that died: jobs embed with the current version then."""
    building = next((v for v in versions if v.state == EmbedderState.BUILDING), None)
    if building is not None and _fit_lock_held(route_id):
        return building
    return next((v for v in versions if v.state == EmbedderState.CURRENT), None)


def _fit_lock_held(route_id: int) -> bool:
    """Whether any session, this one included, holds the route's fit lock. Read from pg_locks, not by
    trying the lock: a job that took it for a moment made a fit starting then give up."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND classid = %s::oid AND objid = %s::oid AND objsubid = 2)",
            [_FIT_LOCK, route_id],
        )
        return cursor.fetchone()[0]


def _version_embed(version: EmbedderVersion, decision_ids: list[int]) -> int:
    model, stored = None, 0
    for start in range(0, len(decision_ids), _EMBED_CHUNK):
        with transaction.atomic():
            # A lost commit loses vectors the hourly sweep embeds again (vectors_embed_missing).
            commit_without_waiting()
            # Decisions that have their vector already are left out before embedding: a refit's
            # re-embedding, or an earlier job that took them with its own, did them.
            rows = _decision_rows(
                Decision.objects.filter(route_id=version.route_id, pk__in=decision_ids[start : start + _EMBED_CHUNK])
                .exclude(question_vectors__space=version.space_key)
                .order_by("pk")
            )
            if not rows:
                continue
            if start + _EMBED_CHUNK >= len(decision_ids) and len(rows) < _EMBED_CHUNK:
                rows += _later_rows(version, after=rows[-1][0], limit=_EMBED_CHUNK - len(rows))
            # Loaded only when there is something to embed: most jobs behind a coalescing one have nothing.
            model = model if model is not None else _model_load(version)
            if model is None:
                return stored  # retired since it was read: its model and vectors are gone
            stored += _embed_and_store(version, model, rows, writers=settings.SIMILARITY_EMBED_WRITERS)
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
    return total >= 2 * current.route_questions and _refit_informs(current)


def _refit_informs(current: EmbedderVersion) -> bool:
    """Whether a refit could learn what `current` does not know. Below the settled size a doubled route
    is a sample drawn from twice as many questions; past it the sample stays one of the same size
    from a route already four times larger, and only time (new words) makes a refit worth embedding
    every question of the route again. On a route taking hundreds of decisions a second, refits at
    every doubling re-embedded up to a million questions while the stream went on, and the
    after-ingest queues fell behind (bench/ingest.py --stream)."""
    if current.route_questions < settings.SIMILARITY_REFIT_SETTLED_QUESTIONS:
        return True
    settled_for = timedelta(days=settings.SIMILARITY_REFIT_SETTLED_DAYS)
    return current.current_since is None or timezone.now() - current.current_since >= settled_for


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
    with _fit_lock(route_id) as taken:
        if not taken:
            return None
        if when_due and not _needs_fit(route_id, list(EmbedderVersion.objects.filter(route_id=route_id))):
            return None
        return _fit_locked(actor=actor, route_id=route_id, seed=seed)


@contextmanager
def _fit_lock(route_id: int) -> Iterator[bool]:
    """Try the route's fit lock (a session-level advisory lock, so a worker that dies lets it go);
    yields whether it was taken, and releases it on leaving if it was."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [_FIT_LOCK, route_id])
        taken = cursor.fetchone()[0]
    try:
        yield taken
    finally:
        if taken:
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
        space_fix(actor=actor, route=route, source=Source.BUILTIN, dimension=embedder.DIMENSION)
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
            # Read in the transaction that makes the version: a batch committed after this read and
            # before the version is visible is the refit's too (embedder_reembed).
            reembeds_until=_newest_decision_id(route.pk),
        )
        space_partition_create(version.space_key)
        EmbedderModel.objects.create(version=version, data=embedder.dumps(model))
        audit_record(
            actor=actor,
            action=Action.EMBEDDER_FITTED,
            object_type="embedder_version",
            object_id=version.pk,
            route=route.slug,
            payload=field_changes(
                new={"number": version.number, "fitted_on": len(sample), "components": version.components}
            ),
        )
    embedder_reembed(actor=actor, version=version, model=model)
    return version


def embedder_reembed(*, actor: Actor, version: EmbedderVersion, model=None) -> None:
    """Embed the route's decisions up to the version's frontier (`reembeds_until`, the newest when
    it was made) with `version`, make sure none stored just before it became visible is left out,
    build its index and make it current. Decisions past the frontier are the after-ingest jobs'
    (`_version_for_jobs`), so the refit's work is fixed when it starts, however fast the route
    keeps receiving traffic.

    Ids come from a sequence and batches commit in any order, so a batch can commit with ids at or
    below the frontier after the pass has read them, or past it before the version was visible to
    its job. The last chunk below the frontier and everything up to the newest decision seen once
    the version was visible (`settled`) are read again for those without a vector; the hourly sweep
    (`vectors_embed_missing`) embeds anything still missing once the version is current."""
    model = model if model is not None else _model_load(version)
    if model is None:
        return  # retired: nothing to re-embed
    settled = _newest_decision_id(version.route_id)
    _embed_between(version, model, after=0, until=version.reembeds_until)
    _embed_between(
        version, model, after=max(0, version.reembeds_until - _EMBED_CHUNK), until=settled, missing_only=True
    )
    version_graph_create(version)
    embedder_promote(actor=actor, version=version)


def version_graph_create(version: EmbedderVersion, components: int | None = None) -> None:
    """Build the version's HNSW graph on its leading `components` (default: `graph_dimension` of its
    dimension), with SIMILARITY_BUILTIN_HNSW_M links a node, and record on the version what the graph
    holds, which its lookups read."""
    graphed = components or graph_dimension(version.dimension)
    links, insert_list = graph_links()
    index_create(
        name=version.index_name,
        dimension=version.dimension,
        space=version.space_key,
        graph_dimension=graphed,
        links=links,
        insert_list=insert_list,
    )
    EmbedderVersion.objects.filter(pk=version.pk).update(graph_dimension=graphed)
    version.graph_dimension = graphed


def graph_links() -> tuple[int, int]:
    """A new version's graph's links a node (SIMILARITY_BUILTIN_HNSW_M), and the candidates a refusal
    inserted later searches: twice the links, the least pgvector allows. Its lookups re-rank the
    graph's candidates by the whole vector, which makes up for the sparser graph (settings.py)."""
    links = settings.SIMILARITY_BUILTIN_HNSW_M
    return links, 2 * links


def graph_dimension(dimension: int) -> int:
    """The leading components a new version's HNSW graph holds: SIMILARITY_BUILTIN_GRAPH_DIMENSION,
    or the whole vector when that is 0 or not shorter. The SVD orders components by variance, so the
    graph's neighbours, re-ranked by the whole vector, are the whole vector's (bench/README.md)."""
    wanted = settings.SIMILARITY_BUILTIN_GRAPH_DIMENSION
    return dimension if wanted <= 0 else min(wanted, dimension)


def _newest_decision_id(route_id: int) -> int:
    """The route's newest decision id (from the (route, id) index), 0 for none."""
    newest = Decision.objects.filter(route_id=route_id).order_by("-pk").values_list("pk", flat=True).first()
    return newest or 0


def _embed_between(version: EmbedderVersion, model, *, after: int, until: int, missing_only: bool = False) -> None:
    """Embed the route's decisions with ids in (`after`, `until`] with `version`, a chunk a transaction;
    with `missing_only`, those still without a vector from it."""
    while after < until:
        with transaction.atomic():
            decisions = Decision.objects.filter(route_id=version.route_id, pk__gt=after, pk__lte=until)
            if missing_only:
                decisions = decisions.exclude(question_vectors__space=version.space_key)
            rows = _decision_rows(decisions.order_by("pk")[:_EMBED_CHUNK])
            if not rows:
                return
            _embed_and_store(version, model, rows)
        after = rows[-1][0]


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
            # At most one version is current (a unique constraint): the route's current one before and now.
            payload={"current_version": {"old": old[0].number if old else None, "new": version.number}},
        )
    for retired in old:
        # A retired version's vectors and model are never read again: their partitions go whole,
        # index included (the version's row stays as history).
        space_partition_drop(retired.space_key)


# The model this process loaded last: ((version id, when it was fitted), pipeline). The time tells
# apart versions that had the same id in databases made afresh (tests).
_kept_model: tuple[tuple[int, datetime], object] | None = None


def _model_load(version: EmbedderVersion):
    """The version's fitted pipeline; None once it has retired (its model is gone).

    The process keeps the last one it loaded, and while the version's model is still stored it is
    taken from there: under a stream every after-ingest job of a route loads the same model, and
    reading and unpacking its megabytes took 0.3-0.4 s of a 2.5-3.5 s job (bench/README.md, "The
    model kept between jobs"). A model never changes once stored, so only whether it is still there
    needs asking. A worker's process goes once idle (console/run.py), and the model with it."""
    global _kept_model
    key = (version.pk, version.fitted_at)
    stored = EmbedderModel.objects.filter(version_id=version.pk)
    if _kept_model is not None and _kept_model[0] == key:
        return _kept_model[1] if stored.exists() else None
    data = stored.values_list("data", flat=True).first()
    if data is None:
        return None
    _kept_model = None  # the previous one goes before the next is unpacked
    model = embedder.loads(data)
    _kept_model = (key, model)
    return model
