"""Writes of span verification: checking new decisions' claims against their logged passages.

Claim units: the claim is split with `spans.split_claim_units` (a unit ends at every line break
and after ".", "!" or "?" followed by whitespace; see its docstring). Each unit is searched in
each distinct logged passage with `spans.verify_span`; a unit longer than the verifier's 2,000
characters cannot be searched and counts as not found. Per decision:
- ``expected_support`` = units found anywhere / units (empty when the claim has no units),
- ``fully_supported`` = every unit found,
- ``no_supporting_passage`` = no unit found in any passage (also true without passages).

Each decision is verified in its own transaction with its own audit event, so that one decision
with long passages cannot hold the others of its batch, and a job stopped half-way (a time
limit, a killed worker) keeps every decision it finished. A decision whose search runs past
VERIFY_DECISION_BUDGET_MS is marked failed and the job goes on.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
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
    TimeBudgetExceeded,
    split_claim_units,
    support_summary,
    verify_span,
)

logger = logging.getLogger(__name__)

_MAX_ERROR_CHARS = 4_000
# Claims and routes are read this many decisions at a time, passages one decision at a time.
_READ_CHUNK = 100

_TABLE = DecisionSupport._meta.db_table
# Insert the decision's DecisionSupport as claimed, or claim the existing one if it is pending or
# failed; no row back means another job verified it (or holds it: this waits on its row lock).
_CLAIM_SQL = (
    f"INSERT INTO {_TABLE} (decision_id, status, units, units_supported, expected_support, fully_supported, "
    "no_supporting_passage, verifier_version, attempts, error, verified_at) "
    "VALUES (%s, 'pending', 0, 0, NULL, false, false, '', 1, '', NULL) "
    f"ON CONFLICT (decision_id) DO UPDATE SET attempts = {_TABLE}.attempts + 1 "
    f"WHERE {_TABLE}.status IN ('pending', 'failed') RETURNING attempts"
)
_RESULT_FIELDS = ["status", "units", "units_supported", "expected_support", "fully_supported",
                  "no_supporting_passage", "verifier_version", "error", "verified_at"]


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

    Each decision is one transaction: insert its DecisionSupport as claimed, or claim it if
    pending (or failed), in one upsert; compute; write the SpanChecks, the figures and the audit
    event; commit. A worker killed half-way loses only the decision it was on (the sweeper
    queues it again); a duplicate job running at the same time waits on the row, then finds it
    verified and claims nothing. Claims and routes never change, so they are read beforehand,
    a chunk of decisions at a time.
    """
    result = VerifyResult()
    # Existing decisions only (a stale message may name ids that never were), in one lock order.
    ids = sorted(Decision.objects.filter(pk__in=list(set(decision_ids))).values_list("pk", flat=True))
    for start in range(0, len(ids), _READ_CHUNK):
        chunk = ids[start : start + _READ_CHUNK]
        decisions = {pk: (claim, slug) for pk, claim, slug in Decision.objects.filter(pk__in=chunk)
                     .values_list("pk", "claim", "route__slug")}
        for decision_id in chunk:
            claim, slug = decisions[decision_id]
            _verify_decision(actor, decision_id, claim, slug, result)
    return result


def _verify_decision(actor: Actor, decision_id: int, claim: str, slug: str, result: VerifyResult) -> None:
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(_CLAIM_SQL, [decision_id])
            claimed = cursor.fetchone()
        if claimed is None:
            return
        outcome = _check(decision_id, claim, _logged_passages(decision_id))
        support = DecisionSupport(decision_id=decision_id)
        _apply(support, outcome, timezone.now())
        if claimed[0] > 1:  # an earlier attempt may have left checks
            SpanCheck.objects.filter(decision_id=decision_id).delete()
        SpanCheck.objects.bulk_create(outcome.checks, batch_size=2_000)
        support.save(update_fields=_RESULT_FIELDS)
        audit_record_many(actor=actor, events=[_event(decision_id, slug, support)])
    (result.failed if outcome.error else result.verified).append(decision_id)


def _logged_passages(decision_id: int) -> list[tuple[int, str]]:
    """[(passage id, text)] of the decision in rank order, each passage once."""
    rows = (DecisionPassage.objects.filter(decision_id=decision_id).order_by("rank")
            .values_list("decision_id", "passage_id", "passage__text"))
    return list(_first_of_each(rows))


def _first_of_each(rows: Iterable[tuple[int, int, str]]) -> Iterator[tuple[int, str]]:
    taken: set[int] = set()
    for _, passage_id, text in rows:
        if passage_id not in taken:
            taken.add(passage_id)
            yield passage_id, text


def _check(decision_id: int, claim: str, passages: list[tuple[int, str]]) -> _Outcome:
    deadline = time.monotonic() + settings.VERIFY_DECISION_BUDGET_MS / 1000
    try:
        units = split_claim_units(claim)
        outcome = _Outcome(checks=[], units=len(units))
        encoded = [(passage_id, _encoded(text)) for passage_id, text in passages]  # once, for every unit
        for index, unit in enumerate(units):
            found = False
            for passage_id, text in encoded:
                try:
                    span = None if text is None else verify_span(text, unit, deadline=deadline)
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
            if time.monotonic() > deadline:  # the search looks at the clock only on its slow path
                raise TimeBudgetExceeded("The verification ran out of its time budget.")
        return outcome
    except SoftTimeLimitExceeded:
        raise  # the job's own limit: stop here, this decision is rolled back and queued again
    except Exception as exc:  # one bad decision must not hold back the rest of the batch
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


def _event(decision_id: int, slug: str, support: DecisionSupport) -> EventSpec:
    return EventSpec(Action.DECISIONS_VERIFIED, "route", slug, route=slug, payload={
        "objects": {"decision": [decision_id]},
        "verifier_version": VERIFIER_VERSION,
        "fully_supported": int(support.fully_supported),
        "no_supporting_passage": int(support.no_supporting_passage),
        "failed": [decision_id] if support.status == SupportStatus.FAILED else [],
    })
