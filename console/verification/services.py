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

    Each decision is one transaction: insert a `pending` DecisionSupport if it has none, claim
    it if pending (or failed) with a conditional UPDATE, compute, write the SpanChecks, the
    figures and the audit event, commit. A worker killed half-way loses only the decision it
    was on (the sweeper queues it again); a duplicate job running at the same time waits on the
    row, then finds it verified and claims nothing.
    """
    result = VerifyResult()
    # Existing decisions only (a stale message may name ids that never were), in one lock order.
    ids = sorted(Decision.objects.filter(pk__in=list(set(decision_ids))).values_list("pk", flat=True))
    for decision_id in ids:
        _verify_decision(actor, decision_id, result)
    return result


def _verify_decision(actor: Actor, decision_id: int, result: VerifyResult) -> None:
    with transaction.atomic():
        DecisionSupport.objects.bulk_create(
            [DecisionSupport(decision_id=decision_id, status=SupportStatus.PENDING)], ignore_conflicts=True
        )
        with connection.cursor() as cursor:
            cursor.execute(_CLAIM_SQL, [[decision_id]])
            if cursor.fetchone() is None:
                return
        claim, slug = Decision.objects.values_list("claim", "route__slug").get(pk=decision_id)
        support = DecisionSupport.objects.get(pk=decision_id)
        outcome = _check(decision_id, claim, _logged_passages(decision_id))
        _apply(support, outcome, timezone.now())
        SpanCheck.objects.filter(decision_id=decision_id).delete()  # left by a failed attempt
        SpanCheck.objects.bulk_create(outcome.checks, batch_size=2_000)
        support.save(update_fields=[
            "status", "units", "units_supported", "expected_support", "fully_supported", "no_supporting_passage",
            "verifier_version", "error", "verified_at",
        ])
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
    return EventSpec(Action.DECISIONS_VERIFIED, "route", slug, {
        "objects": {"decision": [decision_id]},
        "verifier_version": VERIFIER_VERSION,
        "fully_supported": int(support.fully_supported),
        "no_supporting_passage": int(support.no_supporting_passage),
        "failed": [decision_id] if support.status == SupportStatus.FAILED else [],
    })
