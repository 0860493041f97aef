"""Writes to the ledger: routes and decisions. Each service is one transaction with its audit."""

from __future__ import annotations

import hashlib
import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import zstandard
from django.core.exceptions import ValidationError
from django.db import IntegrityError, OperationalError, connection, transaction
from django.utils import timezone
from psycopg import errors as psycopg_errors

from audit.changes import field_changes
from audit.models import Action
from audit.services import Actor, EventSpec, audit_record, audit_record_many
from console.accounts.models import Route
from console.core.errors import Conflict, InvalidInput, detail
from console.core.jobs import enqueue
from console.core.partitions import months_ensure
from console.core.pg_arrays import float_array, int_array, text_array
from console.ledger.compression import (
    TRAINED_MAX_BYTES,
    PresetDictionary,
    compress_text,
    decompress_text,
    newest_dictionary,
)
from console.ledger.hooks import queue_after_ingest, run_in_ingest
from console.ledger.models import PassageDictionary, RouteAnswerSettings, origin_key, stored_ranks, uri_split
from console.ledger.validation import DecisionInput, content_hash, same_values

logger = logging.getLogger(__name__)


def route_update(*, actor: Actor, route: Route, name: str) -> bool:
    """Rename a route; True when the name changed. Its other settings belong to the apps that use
    them, each in its own table and service (grading's graders per item, shadow's pipeline, ...)."""
    with transaction.atomic():
        route = Route.objects.select_for_update().get(pk=route.pk)
        wanted = {"name": name}
        changes = {f: {"old": getattr(route, f), "new": v} for f, v in wanted.items() if getattr(route, f) != v}
        if not changes:
            return False
        for field_name, change in changes.items():
            setattr(route, field_name, change["new"])
        route.full_clean()
        route.save(update_fields=list(changes))
        audit_record(
            actor=actor,
            action=Action.ROUTE_UPDATED,
            object_type="route",
            object_id=route.slug,
            route=route.slug,
            payload=changes,
        )
    return True


class _Unchanged:
    def __repr__(self) -> str:
        return "UNCHANGED"


# A setting the caller leaves as it is (None is a value: "no threshold", "no K").
UNCHANGED = _Unchanged()
ANSWER_SETTINGS = ("answer_form", "harm_model", "support_threshold", "expected_claims", "gate_functional")


def answer_settings_dict(settings: RouteAnswerSettings) -> dict[str, object]:
    """The settings as the API gives them and the audit trail records them."""
    return {name: getattr(settings, name) for name in ANSWER_SETTINGS}


def route_answer_settings_set(
    *,
    actor: Actor,
    route: Route,
    answer_form: str | _Unchanged = UNCHANGED,
    harm_model: str | _Unchanged = UNCHANGED,
    support_threshold: float | None | _Unchanged = UNCHANGED,
    expected_claims: int | None | _Unchanged = UNCHANGED,
    gate_functional: str | _Unchanged = UNCHANGED,
) -> tuple[RouteAnswerSettings, bool]:
    """Change how a route's answers are judged; the settings and whether anything changed.

    The ledger's own row of the route (`RouteAnswerSettings`), created on the first change; until
    then the route has the defaults. One `route_answer_settings_changed` event names each changed
    field as {"old", "new"}. The settings are checked as a whole after the change (an `at_least`
    harm model needs a threshold, kept or sent): InvalidInput with a detail per field otherwise.
    """
    wanted = {
        "answer_form": answer_form,
        "harm_model": harm_model,
        "support_threshold": support_threshold,
        "expected_claims": expected_claims,
        "gate_functional": gate_functional,
    }
    # Not durable: the route pages save every section in one transaction.
    with transaction.atomic():
        # The route's row is the lock concurrent changes of its settings queue on.
        Route.objects.select_for_update().filter(pk=route.pk).first()
        settings = RouteAnswerSettings.objects.filter(route_id=route.pk).first() or RouteAnswerSettings(route=route)
        old = answer_settings_dict(settings)
        for name, value in wanted.items():
            if value is not UNCHANGED:
                setattr(settings, name, value)
        changes = field_changes(old=old, new=answer_settings_dict(settings))
        if not changes:
            return settings, False
        try:
            settings.full_clean(validate_unique=False)
        except ValidationError as exc:
            details = [
                detail(name, error.code or "invalid", " ".join(error.messages))
                for name, errors in exc.error_dict.items()
                for error in errors
            ]
            problems = "; ".join(f"{d['field']}: {d['message']}" for d in details)
            raise InvalidInput(f"The answer settings do not hold together ({problems})", details=details) from None
        settings.save()
        route.answer_settings = settings
        audit_record(
            actor=actor,
            action=Action.ROUTE_ANSWER_SETTINGS_CHANGED,
            object_type="route",
            object_id=route.slug,
            route=route.slug,
            payload=changes,
        )
    return settings, True


def routes_for_items(
    items: list[DecisionInput], *, usable: Callable[[Route], bool] | None = None
) -> tuple[dict[str, Route], list[dict]]:
    """The routes a batch names, and one error per item whose route does not exist.

    A route the caller may not use (`usable` says False) is reported exactly as a route that does
    not exist, so a token learns nothing about the routes beyond its own.
    """
    slugs = {item.route for item in items}
    routes = {route.slug: route for route in Route.objects.filter(slug__in=slugs) if usable is None or usable(route)}
    errors = [
        detail("route", "unknown_route", f"unknown route {item.route!r}", index=item.index, value=item.route)
        for item in items
        if item.route not in routes
    ]
    return routes, errors


@dataclass
class IngestResult:
    created: int = 0
    unchanged: int = 0
    created_ids: list[int] = field(default_factory=list)


# The write path streams rows with COPY straight into the tables, with ids drawn from the tables'
# sequences beforehand so links can be written without reading anything back. Rows already stored
# are filtered out first; a concurrent batch that stores the same decision in between makes the
# COPY fail on a unique constraint, and decision_ingest then runs the batch once more against what
# is stored by then.
#
# Concurrent batches share passages (retrieval returns popular chunks all day), and inserting a
# key another open transaction has just inserted waits for that transaction. Two batches taking
# their keys in different orders would each wait for the other: PostgreSQL's "deadlock detected".
# So every write takes its keys in one global order: a month partition that is missing first (see
# console/ledger/partitions.py), then passages by content key, then request keys and decisions by
# (route, request_id); the day counters' trigger upserts in key order too, and the audit append
# comes last. New passages go through a temporary table into `INSERT ... ORDER BY content_key ON
# CONFLICT DO NOTHING`, so a passage another batch stores first is read back instead of failing
# the batch. Deadlocks and serialization failures that still happen (an outer transaction holding
# other locks) are retried a few times with jitter.
# The sequence is looked up once (OFFSET 0 keeps the subquery apart): in the select list, the
# look-up of a table's sequence ran once per id drawn, three quarters of the statement's time.
# Ascending, so a batch's decisions get ids in the batch's order.
_ALLOCATE_IDS = (
    "SELECT nextval(q.sequence) FROM (SELECT pg_get_serial_sequence(%s, 'id')::regclass AS sequence OFFSET 0) AS q, "
    "generate_series(1, %s) ORDER BY 1"
)
_ATTEMPTS = 5
_RETRY_PAUSE = 0.05  # seconds, doubled each attempt, times a random factor so the racers part


def _json(value) -> str:
    return json.dumps(value, separators=(",", ":"))


def _dedupe_batch(items: list[DecisionInput]) -> tuple[list[DecisionInput], int]:
    """Identical repeats inside one batch count as unchanged; differing repeats are a conflict."""
    seen: dict[tuple[str, str], DecisionInput] = {}
    unique, repeats, conflicts = [], 0, []
    for item in items:
        key = (item.route, item.request_id)
        first = seen.get(key)
        if first is None:
            seen[key] = item
            unique.append(item)
        elif first.content_hash == item.content_hash:
            repeats += 1
        else:
            conflicts.append(
                detail(
                    "request_id",
                    "request_id_conflict",
                    f"differs from item {first.index} with the same request_id",
                    index=item.index,
                    route=item.route,
                    request_id=item.request_id,
                )
            )
    if conflicts:
        raise Conflict(
            "The batch holds the same request_id twice with different content; nothing was written.", details=conflicts
        )
    return unique, repeats


def decision_ingest(*, actor: Actor, items: list[DecisionInput], routes: dict[str, Route]) -> IngestResult:
    """Write a validated batch atomically: all new decisions, or nothing.

    A decision already stored with the same content hash is `unchanged`; one stored with another
    hash is a conflict and the whole batch is rolled back. Concurrent batches carrying the same
    request_id are settled by the unique constraint: the loser re-reads and compares.
    """
    if any(item.route not in routes for item in items):
        raise InvalidInput("Every item's route must be resolved first (see routes_for_items).")
    unique, repeats = _dedupe_batch(items)
    for attempt in range(_ATTEMPTS):
        try:
            with transaction.atomic():
                return _ingest_once(actor, unique, routes, repeats)
        except (IntegrityError, OperationalError) as exc:
            # A lost race stores the winner's rows, so a retry sees more of the batch as stored.
            if attempt == _ATTEMPTS - 1 or not _worth_retrying(exc):
                raise
            logger.info("ingest retried after %s (attempt %d)", type(exc.__cause__).__name__, attempt + 1)
            time.sleep(_RETRY_PAUSE * 2**attempt * random.random())
    raise AssertionError("unreachable")


def _worth_retrying(exc: Exception) -> bool:
    """A unique violation (a concurrent batch stored the same decision), a deadlock or a
    serialization failure: the batch itself is fine and a second run settles it. Django wraps
    psycopg's error, which stays as the cause."""
    if isinstance(exc, IntegrityError):
        return True
    return isinstance(exc.__cause__, psycopg_errors.DeadlockDetected | psycopg_errors.SerializationFailure)


def _existing_hashes(items: list[DecisionInput], routes: dict[str, Route]) -> dict[tuple[int, str], str]:
    """The content hash of every decision of the batch already stored, by (route id, request_id).

    Each key is looked up by index (a LATERAL subquery that OFFSET 0 keeps from being flattened):
    joined plainly, the planner hashed the whole decisions table for a batch's 500 keys, a third
    of an ingest request at 88,000 decisions, and more as the table grows."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT k.route_id, k.request_id, encode(d.content_hash, 'hex') FROM unnest(%s::bigint[], %s::text[]) "
            "AS k(route_id, request_id) CROSS JOIN LATERAL (SELECT d.content_hash FROM ledger_decision d "
            "WHERE d.route_id = k.route_id AND d.request_id = k.request_id OFFSET 0) AS d",
            [int_array(routes[i.route].pk for i in items), text_array(i.request_id for i in items)],
        )
        return {(r, q): h for r, q, h in cursor.fetchall()}


def _raise_conflicts(items, routes, existing) -> list[DecisionInput]:
    """Return the items not stored yet; raise Conflict when a stored one differs."""
    conflicts, fresh, differing = [], [], []
    for item in items:
        stored = existing.get((routes[item.route].pk, item.request_id))
        if stored is None:
            fresh.append(item)
        elif stored != item.content_hash:
            differing.append((item, stored))
    for item in _differing_in_content(differing, routes):
        conflicts.append(
            detail(
                "request_id",
                "request_id_conflict",
                "a decision with this request_id is stored with different content",
                index=item.index,
                route=item.route,
                request_id=item.request_id,
            )
        )
    if conflicts:
        raise Conflict(
            "Some request_ids are already stored with different content; nothing was written.", details=conflicts
        )
    return fresh


def _differing_in_content(differing: list[tuple[DecisionInput, str]], routes: dict[str, Route]) -> list:
    """The items whose stored decision really differs. A decision stored before segment numbers were
    hashed in one spelling (`3` and `3.0` alike) keeps its hash as it was sent: rather than rewrite
    those hashes, an item is compared by value with the stored segments and rehashed with their
    spelling, which matches the stored hash exactly when nothing else differs. Costs one query,
    only when a batch repeats a request_id with a different hash."""
    if not differing:
        return []
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT k.route_id, k.request_id, d.segments FROM unnest(%s::bigint[], %s::text[]) "
            "AS k(route_id, request_id) CROSS JOIN LATERAL (SELECT d.segments FROM ledger_decision d "
            "WHERE d.route_id = k.route_id AND d.request_id = k.request_id OFFSET 0) AS d",
            [[routes[i.route].pk for i, _ in differing], [i.request_id for i, _ in differing]],
        )
        stored_segments = {(r, q): json.loads(s) if isinstance(s, str) else s for r, q, s in cursor.fetchall()}
    really = []
    for item, stored in differing:
        segments = stored_segments.get((routes[item.route].pk, item.request_id))
        if not (
            isinstance(segments, dict)
            and same_values(segments, item.segments)
            and content_hash(item, segments) == stored
        ):
            really.append(item)
    return really


def _ingest_once(actor: Actor, items: list[DecisionInput], routes: dict[str, Route], repeats: int) -> IngestResult:
    fresh = _raise_conflicts(items, routes, _existing_hashes(items, routes))
    result = IngestResult(unchanged=len(items) - len(fresh) + repeats)
    if not fresh:
        return result
    now = timezone.now()
    # COPY runs on the raw psycopg cursor; wrap_database_errors turns its errors into Django's.
    with connection.wrap_database_errors, connection.cursor() as cursor:
        months_ensure((i.occurred_at for i in fresh), cursor=cursor)
        passage_ids = _store_passages(cursor, fresh, routes)
        decision_ids = _allocate_ids(cursor, "ledger_decision", len(fresh))
        # Rows in the global lock order (see the note above _ALLOCATE_IDS); ids keep the batch's order.
        in_key_order = sorted(
            zip(decision_ids, fresh, strict=True), key=lambda pair: (routes[pair[1].route].pk, pair[1].request_id)
        )
        # The request keys first: a concurrent batch holding one waits here, then fails and retries.
        with cursor.cursor.copy("COPY ledger_requestkey (route_id, request_id) FROM STDIN") as copy:
            for _, i in in_key_order:
                copy.write_row((routes[i.route].pk, i.request_id))
        with cursor.cursor.copy(
            "COPY ledger_decision (id, route_id, request_id, occurred_at, question, claim, gate_name, gate_score, "
            "cutoff, outcome, distinct_served_answer, versions, segments, ingested_at, content_hash, claims, "
            "expected_claims, gate_functional, passage_ids, passage_ranks, retrieval_scores) FROM STDIN"
        ) as copy:
            for decision_id, i in in_key_order:
                copy.write_row(
                    (
                        decision_id,
                        routes[i.route].pk,
                        i.request_id,
                        i.occurred_at,
                        i.question,
                        i.claim,
                        i.gate_name,
                        i.gate_score,
                        i.cutoff,
                        i.outcome,
                        i.distinct_served_answer,
                        _json(i.versions),
                        _json(i.segments),
                        now,
                        bytes.fromhex(i.content_hash),  # DigestField: bytes in the table, hex in the app
                        None if i.claims is None else _json(i.claims),
                        i.expected_claims,
                        i.gate_functional,
                        # the ranked passages, in rank order (validation sorted them), as array
                        # literals: psycopg adapts a list in Python, element by element (pg_arrays.py)
                        int_array([passage_ids[p.content_key] for p in i.passages]),
                        _ranks_literal(i.passages),
                        float_array([p.retrieval_score for p in i.passages]),
                    )
                )
    result.created = len(fresh)
    result.created_ids = decision_ids
    by_route: dict[str, list[int]] = {}
    for decision_id, item in zip(decision_ids, fresh, strict=True):
        by_route.setdefault(item.route, []).append(decision_id)
    audit_record_many(
        actor=actor,
        events=[
            EventSpec(
                Action.DECISIONS_INGESTED,
                "route",
                slug,
                route=slug,
                payload={"objects": {"decision": ids}, "created": len(ids)},
            )
            for slug, ids in sorted(by_route.items())
        ],
    )
    # After the event that stores the decisions, so the audit chain reads in the order things
    # happened (their vectors, their pool entry); a writer that raises still rolls the batch back.
    run_in_ingest(actor=actor, items=fresh, decision_ids=decision_ids, routes=routes)
    queue_after_ingest(decision_ids)
    return result


def _ranks_literal(passages) -> str | None:
    ranks = stored_ranks([p.rank for p in passages])
    return None if ranks is None else int_array(ranks)


def _allocate_ids(cursor, table: str, count: int) -> list[int]:
    cursor.execute(_ALLOCATE_IDS, [table, count])
    return [row[0] for row in cursor.fetchall()]


def _digests(keys) -> list[bytes]:
    return [bytes.fromhex(key) for key in keys]


def _by_hex(rows) -> dict[str, int]:
    return {bytes(key).hex(): pk for key, pk in rows}


_PASSAGE_COLUMNS = "external_id, text, uri, embedding, content_key"
_ORIGIN_COLUMNS = "route_id, corpus_snapshot, source, uri_prefix, key"


def _columns_of(alias: str) -> str:
    return ", ".join(f"{alias}.{column}" for column in _PASSAGE_COLUMNS.split(", "))


def _store_passages(cursor, items: list[DecisionInput], routes: dict[str, Route]) -> dict[str, int]:
    """Store passages not seen before; return the id of every passage the batch names.

    The batch's origins (route, corpus snapshot, source, uri prefix: `PassageOrigin`), a few, go in
    first, in key order (`ON CONFLICT DO NOTHING`: one a concurrent batch committed is taken, not
    repeated). Every passage of the batch is then COPYed into a temporary table with its origin's
    key and moved from there, joined to its origin's id, into `INSERT ... ORDER BY content_key
    ON CONFLICT DO NOTHING` (the global lock order), a statement that sees the origins the first
    one found committed; it returns the new passages; only those it skipped (stored before, or by
    a concurrent batch that committed while this one waited) are read back. Looking every key up
    first cost an index probe per passage that the insert then made again: the largest statement
    of a batch of new passages.
    The temporary table lives as long as the connection and is emptied by the statement that reads
    it, so a batch neither creates nor drops a table (catalog writes) and an outer transaction
    (tests, an import) finds it empty for its next batch.
    """
    unique = {}
    for item in items:
        corpus = item.versions.get("corpus", "")
        for passage in item.passages:
            # the key holds the route (validation.py), so a key names one route's passage
            unique.setdefault(passage.content_key, (passage, corpus, routes[item.route].pk))
    if not unique:
        return {}
    dictionary = newest_dictionary()  # cached in the process: no query in most batches
    rows, origins = [], {}
    for key, (passage, corpus, route_id) in unique.items():
        uri_prefix, stored_uri = uri_split(passage.uri, passage.external_id)
        parts = (route_id, corpus, passage.source, uri_prefix)
        if (origin := origins.get(parts)) is None:
            origin = origins[parts] = bytes.fromhex(origin_key(*parts))
        embedding = None if passage.embedding is None else _json(passage.embedding)
        text = compress_text(passage.text, dictionary)  # the column holds the stored form (compression.py)
        rows.append((passage.external_id, text, stored_uri, embedding, bytes.fromhex(key), origin))
    route_ids, corpora, sources, prefixes = (list(column) for column in zip(*origins, strict=True))
    cursor.execute(
        f"INSERT INTO ledger_passageorigin ({_ORIGIN_COLUMNS}) "
        "SELECT * FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[], %s::bytea[]) "
        "ORDER BY 5 ON CONFLICT DO NOTHING",
        [route_ids, corpora, sources, prefixes, list(origins.values())],
    )
    cursor.execute(
        "CREATE TEMPORARY TABLE IF NOT EXISTS ingest_passage_batch AS "
        f"SELECT {_columns_of('p')}, o.key AS origin_key "
        "FROM ledger_passage p, ledger_passageorigin o WITH NO DATA"
    )
    with cursor.cursor.copy(f"COPY ingest_passage_batch ({_PASSAGE_COLUMNS}, origin_key) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
    cursor.execute(
        "WITH staged AS (DELETE FROM ingest_passage_batch RETURNING *) "
        f"INSERT INTO ledger_passage ({_PASSAGE_COLUMNS}, origin_id) "
        f"SELECT {_columns_of('s')}, o.id "
        "FROM staged s JOIN ledger_passageorigin o ON o.key = s.origin_key "
        "ORDER BY s.content_key ON CONFLICT DO NOTHING RETURNING content_key, id"
    )
    ids = _by_hex(cursor.fetchall())
    if dictionary is None:
        _dictionary_wanted(sum(len(unique[key][0].text) for key in ids))
    skipped = [key for key in unique if key not in ids]
    if skipped:
        cursor.execute("SELECT content_key, id FROM ledger_passage WHERE content_key = ANY(%s)", [_digests(skipped)])
        ids.update(_by_hex(cursor.fetchall()))
    return ids


# Dictionaries for passage text (console/ledger/compression.py, docs/architecture.md).
#
# The first dictionary is built once enough text is stored: each ingest process that stored
# DICTIONARY_ASK_AFTER characters of passages without one queues the build (after its batch commits).
# A daily beat job builds a dictionary from the newest passages again and keeps it only if it
# compresses them clearly better than the current one: passages change with the corpus, and every
# dictionary a passage names is kept for good, so a new one must earn its bytes.
DICTIONARY_ASK_AFTER = 64 * 1024  # characters of new passages a process stores before it asks again
DICTIONARY_HELD_OUT = 200  # the newest passages: what a new dictionary is judged on, never built from
DICTIONARY_MIN_SAMPLE = 16 * 1024  # bytes of older text without which no dictionary is built
DICTIONARY_MIN_GAIN = 0.03  # the share of the held-out passages' bytes a new dictionary must save
_DICTIONARY_READ = 5_000  # newest passages read: the held-out ones, then the sample
_DICTIONARY_LOCK = 0x50446963  # "PDic": one build at a time, across workers
_text_without_dictionary = 0  # characters this process stored since it last asked for a dictionary


def _dictionary_wanted(characters: int) -> None:
    global _text_without_dictionary
    _text_without_dictionary += characters
    if _text_without_dictionary >= DICTIONARY_ASK_AFTER:
        _text_without_dictionary = 0
        enqueue("ledger.passage_dictionary_build")


def _stored_size(texts: list[str], dictionary: PresetDictionary | None) -> int:
    return sum(len(compress_text(text, dictionary)) for text in texts)


def _trained(sample: list[bytes]) -> bytes | None:
    """A zstd dictionary of at most TRAINED_MAX_BYTES trained on `sample` (smaller when the sample
    is), or None if zstd finds too little in it to train on."""
    try:
        return zstandard.train_dictionary(TRAINED_MAX_BYTES, sample).as_bytes()
    except zstandard.ZstdError:
        logger.info("No passage dictionary: zstd could not train one on %d passages.", len(sample))
        return None


def passage_dictionary_build(*, actor: Actor) -> PassageDictionary | None:
    """Train a zstd dictionary on the newest stored passages; store it if there is none yet, or if
    it stores the newest DICTIONARY_HELD_OUT passages in DICTIONARY_MIN_GAIN fewer bytes than the
    current one. None when there is too little text or no gain.

    The sample is the text of the passages before the held-out ones, each text once. Builds are
    serialised, so a second one queued meanwhile finds the first and stores nothing."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [_DICTIONARY_LOCK])
            cursor.execute("SELECT text FROM ledger_passage ORDER BY id DESC LIMIT %s", [_DICTIONARY_READ])
            texts = [decompress_text(stored) for (stored,) in cursor.fetchall()]
        held_out = texts[:DICTIONARY_HELD_OUT]
        sample = list(dict.fromkeys(data for text in texts[DICTIONARY_HELD_OUT:] if (data := text.encode())))
        sample_bytes = sum(map(len, sample))
        if len(held_out) < DICTIONARY_HELD_OUT or sample_bytes < DICTIONARY_MIN_SAMPLE:
            return None
        data = _trained(sample)
        if data is None:
            return None
        current = PassageDictionary.objects.order_by("-id").first()
        before = _stored_size(held_out, None if current is None else PresetDictionary(current.pk, bytes(current.data)))
        after = _stored_size(held_out, PresetDictionary(0, data))  # the id's size is fixed, its value no matter
        digest = hashlib.sha256(data).hexdigest()
        if after > before * (1 - DICTIONARY_MIN_GAIN) or PassageDictionary.objects.filter(sha256=digest).exists():
            return None
        dictionary = PassageDictionary(data=data, sha256=digest, sample_passages=len(sample), sample_bytes=sample_bytes)
        dictionary.full_clean()
        dictionary.save()
        audit_record(
            actor=actor,
            action=Action.PASSAGE_DICTIONARY_CREATED,
            object_type="passage_dictionary",
            object_id=dictionary.pk,
            # The change is the dictionary new passages are stored with: the one in use before (none
            # at first) and this one.
            payload={
                **field_changes(
                    old=None
                    if current is None
                    else {
                        "id": current.pk,
                        "sha256": current.sha256,
                        "bytes": len(current.data),
                        "sample_passages": current.sample_passages,
                        "sample_bytes": current.sample_bytes,
                    },
                    new={
                        "id": dictionary.pk,
                        "sha256": digest,
                        "bytes": len(data),
                        "sample_passages": len(sample),
                        "sample_bytes": sample_bytes,
                    },
                ),
                # What the newest passages would take on disk with the old and the new dictionary.
                "held_out": {"passages": len(held_out), "stored_bytes_before": before, "stored_bytes_after": after},
            },
        )
    return dictionary
