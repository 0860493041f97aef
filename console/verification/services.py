"""Writes of span verification: checking new decisions' claims against their logged passages.

Claim units: the claim is split with `spans.split_claim_units` (a unit ends at every line break
and after ".", "!" or "?" followed by whitespace; see its docstring). Each unit is searched in
each distinct logged passage with `spans.verify_span`; a unit longer than the verifier's 2,000
characters cannot be searched and counts as not found. Per decision:
- ``expected_support`` = units found anywhere / units (empty when the claim has no units),
- ``fully_supported`` = every unit found,
- ``no_supporting_passage`` = no unit found in any passage (also true without passages).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import groupby

from django.db import connection, transaction
from django.utils import timezone

from audit.models import Action
from audit.services import Actor, EventSpec, audit_record_many
from console.ledger.models import Decision, DecisionPassage
from console.verification.models import DecisionSupport, SpanCheck, SupportStatus
from console.verification.spans import (
    VERIFIER_VERSION,
    ClaimTooLong,
    EncodedText,
    TextNotUtf8,
    split_claim_units,
    support_summary,
    verify_span,
)

logger = logging.getLogger(__name__)

# Decisions verified per transaction; one audit event per route and chunk.
_CHUNK = 100
_MAX_ERROR_CHARS = 4_000

_CLAIM_SQL = (
    f"UPDATE {DecisionSupport._meta.db_table} SET attempts = attempts + 1 "
    "WHERE decision_id = ANY(%s) AND status IN ('pending', 'failed') RETURNING decision_id"
)


@dataclass
class VerifyResult:
    verified: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)


@dataclass
class _Outcome:
    checks: list[SpanCheck]
    units: int = 0
    units_supported: int = 0
    error: str = ""


def decisions_verify(*, actor: Actor, decision_ids: Sequence[int]) -> VerifyResult:
    """Verify the claims of these decisions; decisions verified before are skipped.

    Each chunk is one transaction: insert a `pending` DecisionSupport for every decision without
    one, claim the pending (or failed) ones with a conditional UPDATE, compute, write the
    SpanChecks, the figures and the audit event, commit. A worker killed half-way leaves nothing
    behind (the sweeper queues the decisions again); a duplicate job running at the same time
    waits on the rows, then finds them verified and claims nothing.
    """
    result = VerifyResult()
    # Existing decisions only (a stale message may name ids that never were), in one lock order.
    ids = sorted(Decision.objects.filter(pk__in=list(set(decision_ids))).values_list("pk", flat=True))
    for start in range(0, len(ids), _CHUNK):
        _verify_chunk(actor, ids[start:start + _CHUNK], result)
    return result


def _verify_chunk(actor: Actor, ids: list[int], result: VerifyResult) -> None:
    with transaction.atomic():
        DecisionSupport.objects.bulk_create(
            [DecisionSupport(decision_id=pk, status=SupportStatus.PENDING) for pk in ids], ignore_conflicts=True
        )
        with connection.cursor() as cursor:
            cursor.execute(_CLAIM_SQL, [ids])
            claimed = sorted(row[0] for row in cursor.fetchall())
        if not claimed:
            return
        decisions = {pk: (claim, slug) for pk, claim, slug in Decision.objects.filter(pk__in=claimed)
                     .values_list("pk", "claim", "route__slug")}
        supports = {s.pk: s for s in DecisionSupport.objects.filter(pk__in=claimed)}
        now = timezone.now()
        checks: list[SpanCheck] = []
        for decision_id, passages in _logged_passages(claimed):
            outcome = _check(decision_id, decisions[decision_id][0], passages)
            checks.extend(outcome.checks)
            _apply(supports[decision_id], outcome, now)
            (result.failed if outcome.error else result.verified).append(decision_id)
        SpanCheck.objects.filter(decision_id__in=claimed).delete()  # left by a failed attempt
        SpanCheck.objects.bulk_create(checks, batch_size=2_000)
        DecisionSupport.objects.bulk_update(
            supports.values(),
            ["status", "units", "units_supported", "expected_support", "fully_supported", "no_supporting_passage",
             "verifier_version", "error", "verified_at"],
        )
        audit_record_many(actor=actor, events=_events(claimed, decisions, supports))


def _logged_passages(decision_ids: list[int]) -> Iterator[tuple[int, list[tuple[int, str]]]]:
    """(decision id, [(passage id, text)] in rank order, each passage once) for every id."""
    rows = (DecisionPassage.objects.filter(decision_id__in=decision_ids).order_by("decision_id", "rank")
            .values_list("decision_id", "passage_id", "passage__text").iterator(chunk_size=500))
    seen: set[int] = set()
    for decision_id, group in groupby(rows, key=lambda row: row[0]):
        seen.add(decision_id)
        yield decision_id, list(_first_of_each(group))
    for decision_id in decision_ids:  # decisions logged without passages
        if decision_id not in seen:
            yield decision_id, []


def _first_of_each(rows: Iterable[tuple[int, int, str]]) -> Iterator[tuple[int, str]]:
    taken: set[int] = set()
    for _, passage_id, text in rows:
        if passage_id not in taken:
            taken.add(passage_id)
            yield passage_id, text


def _check(decision_id: int, claim: str, passages: list[tuple[int, str]]) -> _Outcome:
    try:
        units = split_claim_units(claim)
        outcome = _Outcome(checks=[], units=len(units))
        encoded = [(passage_id, _encoded(text)) for passage_id, text in passages]  # once, for every unit
        for index, unit in enumerate(units):
            found = False
            for passage_id, text in encoded:
                try:
                    span = None if text is None else verify_span(text, unit)
                except ClaimTooLong:  # cannot be searched: not found
                    span = None
                found = found or bool(span and span.supported)
                outcome.checks.append(SpanCheck(
                    decision_id=decision_id, passage_id=passage_id, unit_index=index, unit_text=unit,
                    supported=bool(span and span.supported),
                    match_ranges=[list(r) for r in span.match_ranges] if span else [],
                    char_ranges=[list(r) for r in span.char_ranges] if span else [],
                    truncated=bool(span and span.truncated), verifier_version=VERIFIER_VERSION,
                ))
            outcome.units_supported += found
        return outcome
    except Exception as exc:  # one bad decision must not hold back the rest of the chunk
        logger.exception("verifying decision %s failed", decision_id)
        return _Outcome(checks=[], error=f"{type(exc).__name__}: {exc}"[:_MAX_ERROR_CHARS])


def _encoded(text: str) -> EncodedText | None:
    """The passage as the verifier reads it; None for a text with no UTF-8 form (not searchable)."""
    try:
        return EncodedText(text)
    except TextNotUtf8:
        return None


def _apply(support: DecisionSupport, outcome: _Outcome, now) -> None:
    support.verifier_version = VERIFIER_VERSION
    support.verified_at = now
    support.error = outcome.error
    if outcome.error:
        support.status = SupportStatus.FAILED
        support.units = support.units_supported = 0
        support.expected_support = None
        support.fully_supported = support.no_supporting_passage = False
        return
    support.status = SupportStatus.DONE
    support.units, support.units_supported = outcome.units, outcome.units_supported
    if outcome.units:
        missing = outcome.units - outcome.units_supported
        figures = support_summary([True] * outcome.units_supported + [False] * missing)
        support.expected_support, support.fully_supported = figures.expected_support, figures.fully_supported
    else:
        support.expected_support, support.fully_supported = None, False
    support.no_supporting_passage = outcome.units_supported == 0


def _events(claimed: list[int], decisions: dict, supports: dict[int, DecisionSupport]) -> list[EventSpec]:
    by_route: dict[str, list[int]] = {}
    for decision_id in claimed:
        by_route.setdefault(decisions[decision_id][1], []).append(decision_id)
    events = []
    for slug, ids in sorted(by_route.items()):
        rows = [supports[pk] for pk in ids]
        events.append(EventSpec(Action.DECISIONS_VERIFIED, "route", slug, route=slug, payload={
            "objects": {"decision": ids},
            "verifier_version": VERIFIER_VERSION,
            "fully_supported": sum(s.fully_supported for s in rows),
            "no_supporting_passage": sum(s.no_supporting_passage for s in rows),
            "failed": [s.pk for s in rows if s.status == SupportStatus.FAILED],
        }))
    return events
