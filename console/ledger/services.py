"""Writes to the ledger: routes and decisions. Each service is one transaction with its audit."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import IntegrityError, connection, transaction

from audit.models import Action
from audit.services import Actor, EventSpec, audit_record, audit_record_many
from console.errors import Conflict, InvalidInput
from console.ledger.models import Route
from console.ledger.validation import DecisionInput


def route_create(*, actor: Actor, slug: str, name: str, guidelines: str = "",
                 graders_per_item: int = 2, shadow_config: dict | None = None) -> Route:
    route = Route(slug=slug, name=name, guidelines=guidelines, graders_per_item=graders_per_item,
                  shadow_config=shadow_config or {})
    route.full_clean()
    with transaction.atomic():
        route.save()
        audit_record(actor=actor, action=Action.ROUTE_CREATED, object_type="route", object_id=route.pk,
                     payload={"new": {"slug": slug, "name": name, "graders_per_item": graders_per_item,
                                      "shadow_config": route.shadow_config}})
    return route


def routes_for_items(items: list[DecisionInput]) -> tuple[dict[str, Route], list[dict]]:
    """The routes a batch names, and one error per item whose route does not exist."""
    slugs = {item.route for item in items}
    routes = {route.slug: route for route in Route.objects.filter(slug__in=slugs)}
    errors = [{"index": item.index, "field": "route", "message": f"unknown route {item.route!r}",
               "value": item.route} for item in items if item.route not in routes]
    return routes, errors


@dataclass
class IngestResult:
    created: int = 0
    unchanged: int = 0
    created_ids: list[int] = field(default_factory=list)


# The write path streams rows with COPY into session-local staging tables, then moves them with one
# INSERT ... SELECT ... ON CONFLICT DO NOTHING RETURNING per table. COPY avoids building a
# parameterised statement from thousands of Python values, which cost more than the write itself.
_STAGING = """
CREATE TEMP TABLE IF NOT EXISTS stage_passage (
    external_id text, corpus_snapshot text, text text, text_sha256 text, source text, uri text,
    embedding text, content_key text) ON COMMIT DELETE ROWS;
CREATE TEMP TABLE IF NOT EXISTS stage_decision (
    route_id bigint, request_id text, occurred_at timestamptz, question text, claim text, gate_name text,
    gate_score float8, cutoff float8, outcome text, served_answer text, versions text, segments text,
    content_hash text) ON COMMIT DELETE ROWS;
TRUNCATE stage_passage, stage_decision;
"""
_MOVE_PASSAGES = """
INSERT INTO ledger_passage
    (external_id, corpus_snapshot, text, text_sha256, source, uri, embedding, content_key)
SELECT external_id, corpus_snapshot, text, text_sha256, source, uri, embedding::vector, content_key
FROM stage_passage
ON CONFLICT (content_key) DO NOTHING
RETURNING content_key, id
"""
_MOVE_DECISIONS = """
INSERT INTO ledger_decision (route_id, request_id, occurred_at, question, claim, gate_name, gate_score,
    cutoff, outcome, served_answer, versions, segments, ingested_at, content_hash)
SELECT route_id, request_id, occurred_at, question, claim, gate_name, gate_score, cutoff, outcome,
    served_answer, versions::jsonb, segments::jsonb, now(), content_hash
FROM stage_decision
ON CONFLICT (route_id, request_id) DO NOTHING
RETURNING id, route_id, request_id
"""


def _json(value) -> str:
    import json

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
            conflicts.append({"index": item.index, "route": item.route, "request_id": item.request_id,
                              "message": f"differs from item {first.index} with the same request_id"})
    if conflicts:
        raise Conflict("The batch holds the same request_id twice with different content; nothing was written.",
                       details=conflicts)
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
    for attempt in range(2):
        try:
            with transaction.atomic():
                return _ingest_once(actor, unique, routes, repeats)
        except IntegrityError:
            if attempt:
                raise
    raise AssertionError("unreachable")


def _existing_hashes(items: list[DecisionInput], routes: dict[str, Route]) -> dict[tuple[int, str], str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT d.route_id, d.request_id, d.content_hash FROM ledger_decision d "
            "JOIN unnest(%s::bigint[], %s::text[]) AS k(route_id, request_id) "
            "ON d.route_id = k.route_id AND d.request_id = k.request_id",
            [[routes[i.route].pk for i in items], [i.request_id for i in items]],
        )
        return {(r, q): h for r, q, h in cursor.fetchall()}


def _raise_conflicts(items, routes, existing) -> list[DecisionInput]:
    """Return the items not stored yet; raise Conflict when a stored one differs."""
    conflicts, fresh = [], []
    for item in items:
        stored = existing.get((routes[item.route].pk, item.request_id))
        if stored is None:
            fresh.append(item)
        elif stored != item.content_hash:
            conflicts.append({"index": item.index, "route": item.route, "request_id": item.request_id,
                              "message": "a decision with this request_id is stored with different content"})
    if conflicts:
        raise Conflict("Some request_ids are already stored with different content; nothing was written.",
                       details=conflicts)
    return fresh


def _ingest_once(actor: Actor, items: list[DecisionInput], routes: dict[str, Route], repeats: int) -> IngestResult:
    fresh = _raise_conflicts(items, routes, _existing_hashes(items, routes))
    result = IngestResult(unchanged=len(items) - len(fresh) + repeats)
    if not fresh:
        return result
    with connection.cursor() as cursor:
        cursor.execute(_STAGING)
        passage_ids = _upsert_passages(cursor, fresh)
        with cursor.cursor.copy(
            "COPY stage_decision (route_id, request_id, occurred_at, question, claim, gate_name, gate_score, "
            "cutoff, outcome, served_answer, versions, segments, content_hash) FROM STDIN"
        ) as copy:
            for i in fresh:
                copy.write_row((routes[i.route].pk, i.request_id, i.occurred_at, i.question, i.claim, i.gate_name,
                                i.gate_score, i.cutoff, i.outcome, i.served_answer, _json(i.versions),
                                _json(i.segments), i.content_hash))
        cursor.execute(_MOVE_DECISIONS)
        inserted = {(route_id, request_id): pk for pk, route_id, request_id in cursor.fetchall()}
        if len(inserted) != len(fresh):
            # Another batch stored some of these between our read and our insert: compare again.
            raced = [i for i in fresh if (routes[i.route].pk, i.request_id) not in inserted]
            _raise_conflicts(raced, routes, _existing_hashes(raced, routes))
            result.unchanged += len(raced)
        with cursor.cursor.copy(
            "COPY ledger_decisionpassage (decision_id, passage_id, rank, retrieval_score) FROM STDIN"
        ) as copy:
            for item in fresh:
                decision_id = inserted.get((routes[item.route].pk, item.request_id))
                if decision_id is None:
                    continue
                for passage in item.passages:
                    copy.write_row((decision_id, passage_ids[passage.content_key], passage.rank,
                                    passage.retrieval_score))
    result.created = len(inserted)
    result.created_ids = sorted(inserted.values())
    by_route: dict[int, list[int]] = {}
    for (route_id, _), pk in inserted.items():
        by_route.setdefault(route_id, []).append(pk)
    slugs = {route.pk: slug for slug, route in routes.items()}
    audit_record_many(actor=actor, events=[
        EventSpec(Action.DECISIONS_INGESTED, "route", slugs[route_id],
                  {"objects": {"decision": sorted(ids)}, "created": len(ids)})
        for route_id, ids in sorted(by_route.items())
    ])
    return result


def _upsert_passages(cursor, items: list[DecisionInput]) -> dict[str, int]:
    """Store passages not seen before; return the id of every passage the batch names."""
    unique = {}
    for item in items:
        corpus = item.versions.get("corpus", "")
        for passage in item.passages:
            unique.setdefault(passage.content_key, (passage, corpus))
    if not unique:
        return {}
    with cursor.cursor.copy(
        "COPY stage_passage (external_id, corpus_snapshot, text, text_sha256, source, uri, embedding, "
        "content_key) FROM STDIN"
    ) as copy:
        for key, (passage, corpus) in unique.items():
            embedding = None if passage.embedding is None else _json(passage.embedding)
            copy.write_row((passage.external_id, corpus, passage.text, passage.text_sha256, passage.source,
                            passage.uri, embedding, key))
    cursor.execute(_MOVE_PASSAGES)
    ids = dict(cursor.fetchall())
    known = [key for key in unique if key not in ids]
    if known:
        cursor.execute("SELECT content_key, id FROM ledger_passage WHERE content_key = ANY(%s)", [known])
        ids.update(cursor.fetchall())
    return ids
