"""Reads of span verification. Access is decided in console.accounts.permissions, applied here.

Verifier results are decision data: only decision readers get them (graders never do).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from django.db import connection

from console.accounts import permissions
from console.core.errors import Forbidden, NotFound
from console.ledger.claims import answer_claims, claim_citations
from console.ledger.models import Decision, Passage
from console.verification.models import DecisionSupport, SpanCheck, SupportStatus


class Segment(NamedTuple):
    """A piece of a passage's text; `marked` pieces are verified claim spans."""

    text: str
    marked: bool


def passage_text_for_user(user, passage_id: int) -> str:
    """The text of a logged passage the user may read: Forbidden for users who read no decisions
    (graders), NotFound when it belongs to no route whose decisions the user may read (or does not
    exist). A passage belongs to the one route that logged it (its content key holds the route),
    which its origin names."""
    if not permissions.can_read_decisions(user):
        raise Forbidden('Your role does not allow verifying logged passages; send {"text", "claim"} instead.')
    passages = permissions.visible(
        Passage.objects.filter(pk=passage_id), user, permissions.DECISION_READERS, field="origin__route"
    )
    text = passages.values_list("text", flat=True).first()
    if text is None:
        raise NotFound(f"No passage {passage_id} that you may read.")
    return text


# Decisions with no DecisionSupport, each looked up by index (a subquery that OFFSET 0 keeps from
# becoming an anti-join, which the planner ran as a hash of every span-check figure), among the ids
# from a lower bound on: the minute sweep reads only the newest decisions, the daily one all.
_AWAITING_SQL = (
    "SELECT d.id FROM ledger_decision d WHERE d.id >= %s AND d.ingested_at < %s "
    "AND NOT EXISTS (SELECT 1 FROM verification_decisionsupport s "
    "WHERE s.decision_id = d.id AND s.decision_occurred_at = d.occurred_at OFFSET 0) "
    "ORDER BY d.id LIMIT %s"
)


def decisions_awaiting_verification(*, ingested_before: datetime, limit: int, newest: int | None = None) -> list[int]:
    """Decisions with no DecisionSupport (their job was lost or is still queued), oldest first.

    ``newest``: only among the newest that many decisions (by id), so the minute sweep reads a
    bounded stretch of the ledger, not all of it, every time; None reads every decision."""
    with connection.cursor() as cursor:
        lowest = 0
        if newest is not None:
            cursor.execute("SELECT max(id) FROM ledger_decision")
            lowest = max(0, (cursor.fetchone()[0] or 0) - newest + 1)
        cursor.execute(_AWAITING_SQL, [lowest, ingested_before, limit])
        return [row[0] for row in cursor.fetchall()]


def support_of(decision: Decision) -> DecisionSupport | None:
    return getattr(decision, "support", None)  # select_related("support") makes this free


def marked_segments(text: str, ranges: list[list[int]] | list[tuple[int, int]]) -> list[Segment]:
    """The text cut at the given [start, end) code-point ranges, overlapping ranges merged.

    The pieces are plain text; the template escapes each one and wraps marked ones in <mark>.
    """
    merged: list[list[int]] = []
    for start, end in sorted((int(s), int(e)) for s, e in ranges):
        start, end = max(0, start), min(len(text), end)
        if start >= end:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    segments, at = [], 0
    for start, end in merged:
        if start > at:
            segments.append(Segment(text[at:start], False))
        segments.append(Segment(text[start:end], True))
        at = end
    if at < len(text) or not segments:
        segments.append(Segment(text[at:], False))
    return segments


def _unit_text_default(decision: Decision) -> str:
    """The text of a unit stored without one: a claim that is a single unit is not stored twice
    (services._check), so a unit no row names is the whole claim."""
    return decision.claim


def support_context(decision: Decision) -> dict[str, Any]:
    """What the refusal detail page shows of verification (one query for the span checks).

    Each ranked passage (prefetched on the decision) gets `segments` for highlighting and
    `units_found`, the claim units found in it.
    """
    rows = list(
        SpanCheck.objects.filter(decision=decision).values_list(
            "passage_id", "unit_index", "unit_text", "supported", "char_ranges"
        )
    )
    ranges_by_passage: dict[int, list] = {}
    units_by_passage: dict[int, set[int]] = {}
    units: dict[int, dict[str, Any]] = {}
    for passage_id, unit_index, unit_text, supported, char_ranges in rows:
        unit = units.setdefault(unit_index, {"index": unit_index + 1, "text": "", "found": False})
        unit["text"] = unit["text"] or unit_text
        if supported:
            unit["found"] = True
            ranges_by_passage.setdefault(passage_id, []).extend(char_ranges)
            units_by_passage.setdefault(passage_id, set()).add(unit_index)
    for unit in units.values():
        unit["text"] = unit["text"] or _unit_text_default(decision)
    links = decision.ranked_passages
    if decision.claims is not None:
        found_in = _found_in(rows, links)
        for check in _claim_checks(decision, found_in, verified=_verified(decision)):
            if check["index"] in units:
                units[check["index"]] |= {"citations": check["citations"], "cited_found": check["cited_supported"]}
    for link in links:
        link.segments = marked_segments(link.passage.text, ranges_by_passage.get(link.passage_id, []))
        link.units_found = len(units_by_passage.get(link.passage_id, ()))
    return {
        "support": support_of(decision),
        "passages": links,
        "claim_units": [units[index] for index in sorted(units)],
        "claims_sent": decision.claims is not None,
    }


def _found_in(rows, links) -> dict[int, list[str]]:
    """{unit index: retriever ids of the passages the unit was found in, in rank order}."""
    external = {link.passage_id: link.passage.external_id for link in links}
    rank = {link.passage_id: link.rank for link in links}
    found: dict[int, list[int]] = {}
    for passage_id, unit_index, _, supported, *_ in rows:
        if supported:
            found.setdefault(unit_index, []).append(passage_id)
    return {
        index: list(dict.fromkeys(external[p] for p in sorted(ids, key=lambda p: rank.get(p, 0)) if p in external))
        for index, ids in found.items()
    }


def _claim_checks(decision: Decision, found_in: dict[int, list[str]], *, verified: bool) -> list[dict[str, Any]]:
    """The span check of each claim of the answer (`answer_claims`): found in any logged passage,
    where, and whether in one the claim cites (None when it cites none). Before verification,
    `supported` is None."""
    checks = []
    for index, (text, citations) in enumerate(zip(answer_claims(decision), claim_citations(decision), strict=True)):
        passages = found_in.get(index, [])
        checks.append(
            {
                "index": index,
                "text": text,
                "citations": citations,
                "supported": bool(passages) if verified else None,
                "found_in": passages,
                "cited_supported": (any(p in citations for p in passages) if verified else None) if citations else None,
            }
        )
    return checks


def claim_checks_as_list(decision: Decision, span_checks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each claim's span check, for the decision lookup, from its `span_checks_as_list` (no query;
    the ranked passages prefetched). Before verification (or when it failed) `supported` is None."""
    if not _verified(decision):
        return _claim_checks(decision, {}, verified=False)
    rows = [(c["passage_id"], c["unit_index"], c["unit"], c["supported"]) for c in span_checks]
    return _claim_checks(decision, _found_in(rows, decision.ranked_passages), verified=True)


def _verified(decision: Decision) -> bool:
    support = support_of(decision)
    return support is not None and support.status == SupportStatus.DONE


def support_as_dict(decision: Decision) -> dict[str, Any] | None:
    support = support_of(decision)
    if support is None:
        return None
    return {
        "status": support.status,
        "units": support.units,
        "units_supported": support.units_supported,
        "expected_support": support.expected_support,
        "fully_supported": support.fully_supported,
        "no_supporting_passage": support.no_supporting_passage,
        "verifier_version": support.verifier_version,
        "error": support.error,
        "verified_at": support.verified_at.isoformat() if support.verified_at else None,
    }


def span_checks_as_list(decision: Decision) -> list[dict[str, Any]]:
    fields = (
        "passage_id",
        "unit_index",
        "unit_text",
        "supported",
        "match_ranges",
        "char_ranges",
        "truncated",
        "verifier_version",
    )
    stored = {
        (row[1], row[0]): row
        for row in SpanCheck.objects.filter(decision=decision).order_by("unit_index", "passage_id").values_list(*fields)
    }
    texts: dict[int, str] = {}
    versions: dict[int, str] = {}
    for row in stored.values():  # each unit's text is stored on one of its rows (services._check)
        texts[row[1]] = texts.get(row[1]) or row[2]
        versions.setdefault(row[1], row[7])
    texts = {index: text or _unit_text_default(decision) for index, text in texts.items()}
    # A (unit, passage) pair without a row was searched and not found: only the unit's first row and
    # the rows that found something are stored. Every pair is listed, as when each had its row.
    passage_ids = sorted({link.passage_id for link in decision.ranked_passages} | {p for _, p in stored})
    rows = []
    for unit_index in sorted(texts):
        for passage_id in passage_ids:
            row = stored.get((unit_index, passage_id))
            if row is None:
                row = (passage_id, unit_index, "", False, [], [], False, versions[unit_index])
            rows.append((*row[:2], texts[unit_index], *row[3:]))
    names = (
        "passage_id",
        "unit_index",
        "unit",
        "supported",
        "match_ranges",
        "char_ranges",
        "truncated",
        "verifier_version",
    )
    return [dict(zip(names, row, strict=True)) for row in rows]
