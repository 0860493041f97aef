"""Writes of span verification: checking new decisions' claims against their logged passages.

Claim units: the claims the answering system sent with the decision, one unit each (a long
answer, issue 31: unit_index is then the claim's index); else the claim split with
`spans.split_claim_units` (a unit ends at every line break and after ".", "!" or "?" followed by
whitespace; see its docstring); `console.ledger.claims.claim_texts` says which. Each unit is searched in
each distinct logged passage with `spans.verify_span`; a unit longer than the verifier's 2,000
characters cannot be searched and counts as not found. Per decision:
- ``expected_support`` = units found anywhere / units (empty when the claim has no units),
- ``fully_supported`` = every unit found,
- ``no_supporting_passage`` = no unit found in any passage (also true without passages).

Decisions are verified in groups, one transaction per group: a group holds decisions (in id
order) until their claims and passages reach VERIFY_BATCH_BYTES, and a decision larger than that
is a group of its own, so one decision with long passages cannot hold the others of its batch.
Only decisions still to verify are grouped (no DecisionSupport yet, or one left pending or
failed). A group's passages are read in one query; its DecisionSupport rows are written once,
with their figures, in one upsert that inserts new rows and updates only rows still to verify;
its span checks are written in one bulk insert and it writes one audit event per route, both
for the rows that upsert wrote only. A job stopped half-way (a time limit, a killed worker) keeps
every group it finished. A decision whose search runs past VERIFY_DECISION_BUDGET_MS is marked
failed and the group goes on.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from audit.models import Action
from audit.services import Actor, EventSpec, audit_record_many
from console.core.jobs import commit_without_waiting
from console.core.pg_arrays import bool_array, float_array, int_array, text_array, timestamp_array
from console.ledger.compression import decompress_text, utf8_length_sql
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
# Which decisions are still to verify, with their claims, routes and sizes, is read this many
# decisions at a time; passages one group at a time.
_READ_CHUNK = 500

_TABLE = DecisionSupport._meta.db_table
# A DecisionSupport in one of these states is verified again; one in any other (done) is final.
# Pending rows are no longer written (rows are written once, with their outcome), but older code
# wrote them inside its transaction, and one is still claimed if ever found.
_TO_RETRY = f"('{SupportStatus.PENDING.value}', '{SupportStatus.FAILED.value}')"
# The decisions are read one at a time from the list of ids (a LATERAL subquery that OFFSET 0 keeps
# from being flattened into a join), not by filtering with `= ANY(ids)`: right after a burst of
# ingest the table statistics lag behind, the planner takes the new ids for most of the table and
# hashes every row (75 ms a group of 250 where index lookups take a few), and the after-ingest work
# runs exactly then. Each decision's passages are the ids of its row, in rank order, each looked up
# in the passages by its primary key.
# Each decision of a chunk that exists, with what grouping needs: its claim, route, month, and the
# bytes of its logged passages as UTF-8 text (a passage at two ranks counts twice: an upper bound;
# the stored text may be deflated, and its header holds the length: ledger.compression), in id order.
# One statement instead of three (existing ids, then claims, then sizes): on a busy machine the
# after-ingest worker spends more of its time on round trips than on verifying. Both sides are
# LATERAL for the reason above (joined plainly, the planner merged the whole decisions table), and
# a decision is looked up with its month, so only that month's partition is probed.
# Decisions verified before are left out here, each by a probe of its DecisionSupport's key (a
# subquery that OFFSET 0 keeps from becoming an anti-join the planner may run as a hash of the
# table, as in selectors._AWAITING_SQL), so their passages are neither sized nor read.
_CHUNK_SQL = (
    "SELECT d.id, d.claim, d.slug, d.occurred_at, x.bytes, d.claims FROM unnest(%s::bigint[]) AS u(id) "
    "CROSS JOIN LATERAL (SELECT d.id, d.claim, r.slug, d.occurred_at, d.claims, d.passage_ids FROM ledger_decision d "
    "JOIN ledger_route r ON r.id = d.route_id WHERE d.id = u.id "
    f"AND NOT EXISTS (SELECT 1 FROM {_TABLE} s WHERE s.decision_id = d.id AND s.decision_occurred_at = d.occurred_at "
    f"AND s.status NOT IN {_TO_RETRY} OFFSET 0) OFFSET 0) AS d "
    f"CROSS JOIN LATERAL (SELECT sum({utf8_length_sql('p.text')}) AS bytes FROM unnest(d.passage_ids) AS l(id) "
    "JOIN ledger_passage p ON p.id = l.id OFFSET 0) AS x "
    "ORDER BY d.id"
)
_PASSAGES_SQL = (
    "SELECT d.id, x.passage_id, x.text FROM unnest(%s::bigint[], %s::timestamptz[]) AS k(id, at) "
    "CROSS JOIN LATERAL (SELECT d.id, d.passage_ids FROM ledger_decision d WHERE d.id = k.id AND d.occurred_at = k.at "
    "OFFSET 0) AS d "
    "CROSS JOIN LATERAL (SELECT l.passage_id, l.position, p.text FROM unnest(d.passage_ids) WITH ORDINALITY "
    "AS l(passage_id, position) JOIN ledger_passage p ON p.id = l.passage_id OFFSET 0) AS x ORDER BY d.id, x.position"
)
# A whole group's DecisionSupport rows with their figures in one statement, each written once: a
# new row is inserted as it is final, and only a row still to verify (an earlier attempt failed)
# is updated, its attempts counted up. Writing a row as claimed and then updating it with the
# figures left a dead row version and a second set of index entries per decision that VACUUM does
# not give back (bench/storage.py, 20,000 decisions: 210 bytes a decision then, 153 now). A row
# another job verified meanwhile is left alone and not returned (a row that job has written but
# not committed yet is waited for), so the span checks and audit events follow the returned rows
# only. The ids are sorted, so concurrent jobs take rows in one order.
_WRITE_SQL = (
    f"INSERT INTO {_TABLE} AS s (decision_id, decision_occurred_at, status, units, units_supported, "
    "expected_support, fully_supported, no_supporting_passage, verifier_version, attempts, error, verified_at) "
    "SELECT v.decision_id, v.decision_occurred_at, v.status, v.units, v.units_supported, v.expected_support, "
    "v.fully_supported, v.no_supporting_passage, v.verifier_version, 1, v.error, %(now)s "
    "FROM unnest(%(ids)s::bigint[], %(occurred_at)s::timestamptz[], %(status)s::text[], %(units)s::integer[], "
    "%(units_supported)s::integer[], %(expected_support)s::double precision[], %(fully_supported)s::boolean[], "
    "%(no_supporting_passage)s::boolean[], %(verifier_version)s::text[], %(error)s::text[]) "
    "AS v(decision_id, decision_occurred_at, status, units, units_supported, expected_support, fully_supported, "
    "no_supporting_passage, verifier_version, error) ORDER BY v.decision_id "
    "ON CONFLICT (decision_id, decision_occurred_at) DO UPDATE SET status = excluded.status, units = excluded.units, "
    "units_supported = excluded.units_supported, expected_support = excluded.expected_support, "
    "fully_supported = excluded.fully_supported, no_supporting_passage = excluded.no_supporting_passage, "
    "verifier_version = excluded.verifier_version, attempts = s.attempts + 1, error = excluded.error, "
    f"verified_at = excluded.verified_at WHERE s.status IN {_TO_RETRY} RETURNING s.decision_id, s.attempts"
)
# Each written field and how its array travels: as a literal (console/core/pg_arrays.py).
_WRITTEN_FIELDS = {
    "status": text_array,
    "units": int_array,
    "units_supported": int_array,
    "expected_support": float_array,
    "fully_supported": bool_array,
    "no_supporting_passage": bool_array,
    "verifier_version": text_array,
    "error": text_array,
}


@dataclass
class VerifyResult:
    verified: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)


@dataclass
class _Outcome:
    checks: list[tuple]  # rows for COPY, in _CHECK_COLUMNS order
    units: int = 0
    units_supported: int = 0
    error: str = ""


def decisions_verify(*, actor: Actor, decision_ids: Sequence[int]) -> VerifyResult:
    """Verify the claims of these decisions; decisions verified before are skipped.

    Which decisions are still to verify (no DecisionSupport, or one pending or failed) is read with
    their claims, routes and sizes, which never change, a chunk of decisions at a time. Each group
    (see the module docstring) is then computed, and written in one transaction: the DecisionSupport
    rows with their figures in one upsert, then, for the rows it wrote, the SpanChecks and one audit
    event per route; commit. A worker killed half-way loses only the group it was on (the sweeper
    queues it again); a duplicate job running at the same time computes the same group in vain:
    its upsert waits on the other job's rows, finds them verified and writes nothing.
    """
    result = VerifyResult()
    # Existing decisions only (a stale message may name ids that never were), in one lock order.
    ids = sorted(set(decision_ids))
    budget = settings.VERIFY_BATCH_BYTES
    for start in range(0, len(ids), _READ_CHUNK):
        with connection.cursor() as cursor:
            cursor.execute(_CHUNK_SQL, [int_array(ids[start : start + _READ_CHUNK])])
            rows = cursor.fetchall()
        group: list[tuple[int, str, list[dict] | None, str, datetime]] = []
        group_bytes = 0
        for decision_id, claim, slug, occurred_at, passage_bytes, claims in rows:
            # Raw SQL reads the JSON column as its text (Django parses it in the ORM only).
            claims = json.loads(claims) if isinstance(claims, str) else claims
            size = int(passage_bytes or 0) + len(claim.encode()) + sum(len(c["text"].encode()) for c in claims or ())
            if group and group_bytes + size > budget:
                _verify_group(actor, group, result)
                group, group_bytes = [], 0
            group.append((decision_id, claim, claims, slug, occurred_at))
            group_bytes += size
        if group:
            _verify_group(actor, group, result)
    return result


def _verify_group(
    actor: Actor, group: list[tuple[int, str, list[dict] | None, str, datetime]], result: VerifyResult
) -> None:
    # Computed before the transaction: it holds no row while the search runs.
    passages = _logged_passages([(row[0], row[4]) for row in group])
    outcomes = [
        (decision_id, slug, _check(decision_id, claim, claims, passages.get(decision_id, [])))
        for decision_id, claim, claims, slug, _ in group
    ]
    now = timezone.now()  # verified_at: when the group's checks are done, just before they are written
    supports = []
    for decision_id, _, outcome in outcomes:
        support = DecisionSupport(decision_id=decision_id)
        _apply(support, outcome, now)
        supports.append(support)
    with transaction.atomic():
        commit_without_waiting()  # the sweeper queues again what a crash loses (no DecisionSupport)
        with connection.cursor() as cursor:
            cursor.execute(
                _WRITE_SQL,
                {
                    "now": now,
                    "ids": int_array(row[0] for row in group),
                    "occurred_at": timestamp_array(row[4] for row in group),
                    **{
                        name: literal([getattr(x, name) for x in supports]) for name, literal in _WRITTEN_FIELDS.items()
                    },
                },
            )
            attempts = dict(cursor.fetchall())
        if not attempts:
            return  # another job verified the whole group meanwhile
        retried = [decision_id for decision_id, attempt in attempts.items() if attempt > 1]
        if retried:  # an earlier attempt may have left checks
            SpanCheck.objects.filter(decision_id__in=retried).delete()
        checks, verified, failed = [], [], []
        by_route: dict[str, list[DecisionSupport]] = {}
        for (decision_id, slug, outcome), support in zip(outcomes, supports, strict=True):
            if decision_id not in attempts:  # verified by another job meanwhile
                continue
            checks += outcome.checks
            by_route.setdefault(slug, []).append(support)
            (failed if outcome.error else verified).append(decision_id)
        _copy_checks(checks)
        audit_record_many(
            actor=actor, events=[_event(slug, route_supports) for slug, route_supports in sorted(by_route.items())]
        )
    result.verified += verified
    result.failed += failed


_CHECK_TABLE = SpanCheck._meta.db_table
_CHECK_COLUMNS = (
    "decision_id",
    "passage_id",
    "unit_index",
    "unit_text",
    "supported",
    "match_ranges",
    "char_ranges",
    "truncated",
    "verifier_version",
)


def _copy_checks(checks: list[tuple]) -> None:
    """Insert the group's span checks with COPY: a few thousand rows per group, where an INSERT's
    parameter handling cost more than the rows themselves. The rows are plain tuples: building a
    model instance for each cost a quarter of the job's time, for rows nothing reads back."""
    if not checks:
        return
    with (
        connection.cursor() as cursor,
        cursor.cursor.copy(f"COPY {_CHECK_TABLE} ({', '.join(_CHECK_COLUMNS)}) FROM STDIN") as copy,
    ):
        for row in checks:
            copy.write_row(row)


_NO_RANGES = json.dumps([])


def _check_row(decision_id: int, passage_id: int, index: int, unit_text: str, span) -> tuple:
    """One span check as a COPY row (_CHECK_COLUMNS); `span` None when the passage was not searched."""
    if span is None:
        return (decision_id, passage_id, index, unit_text, False, _NO_RANGES, _NO_RANGES, False, VERIFIER_VERSION)
    return (
        decision_id,
        passage_id,
        index,
        unit_text,
        bool(span.supported),
        _ranges_json(span.match_ranges),
        _ranges_json(span.char_ranges),
        bool(span.truncated),
        VERIFIER_VERSION,
    )


def _ranges_json(ranges) -> str:
    # Most units are absent from most passages, so most ranges are empty: they skip the encoder
    # (json.dumps took about a tenth of a job's time in a profile).
    return json.dumps([list(r) for r in ranges]) if ranges else _NO_RANGES


def _logged_passages(decisions: list[tuple[int, datetime]]) -> dict[int, list[tuple[int, str]]]:
    """{decision id: [(passage id, text)] in rank order, each passage once}, in one query; the
    decisions are given as (id, occurred_at), which names the month partition of their links."""
    with connection.cursor() as cursor:
        cursor.execute(
            _PASSAGES_SQL, [int_array(pk for pk, _ in decisions), timestamp_array(at for _, at in decisions)]
        )
        rows = cursor.fetchall()
    grouped: dict[int, list[tuple[int, int, bytes]]] = {}
    for row in rows:
        grouped.setdefault(row[0], []).append(row)
    return {decision_id: list(_first_of_each(decision_rows)) for decision_id, decision_rows in grouped.items()}


def _first_of_each(rows: Iterable[tuple[int, int, bytes]]) -> Iterator[tuple[int, str]]:
    """Each passage once, its stored text (raw SQL reads the column as stored) as text."""
    taken: set[int] = set()
    for _, passage_id, stored in rows:
        if passage_id not in taken:
            taken.add(passage_id)
            yield passage_id, decompress_text(stored)


def _check(decision_id: int, claim: str, claims: list[dict] | None, passages: list[tuple[int, str]]) -> _Outcome:
    deadline = time.monotonic() + settings.VERIFY_DECISION_BUDGET_MS / 1000
    try:
        # The sent claims, else the claim's units: console.ledger.claims.claim_texts, with the
        # splitter named here (the tests replace it to make one decision fail).
        units = [item["text"] for item in claims] if claims else split_claim_units(claim)
        outcome = _Outcome(checks=[], units=len(units))
        encoded = [(passage_id, _encoded(text)) for passage_id, text in passages]  # once, for every unit
        for index, unit in enumerate(units):
            found = False
            for position, (passage_id, text) in enumerate(encoded):
                try:
                    span = None if text is None else verify_span(text, unit, deadline=deadline)
                except ClaimTooLong:  # cannot be searched: not found
                    span = None
                found = found or bool(span and span.supported)
                # One row per unit carries its text (its first-ranked passage's), left empty when the
                # unit is the whole claim (readers take the claim then); the other passages get a row
                # only when it says more than "not found" (selectors.span_checks_as_list lists the
                # missing pairs as not found).
                if position == 0 or (span is not None and (span.supported or span.match_ranges or span.truncated)):
                    text = "" if position > 0 or unit == claim else unit
                    outcome.checks.append(_check_row(decision_id, passage_id, index, text, span))
            outcome.units_supported += found
            if time.monotonic() > deadline:  # the search looks at the clock only on its slow path
                raise TimeBudgetExceeded("The verification ran out of its time budget.")
        return outcome
    except SoftTimeLimitExceeded:
        raise  # the job's own limit: stop here; nothing of this group is written yet, it is queued again
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


def _event(slug: str, supports: list[DecisionSupport]) -> EventSpec:
    """One event for the decisions of one route verified in one transaction."""
    return EventSpec(
        Action.DECISIONS_VERIFIED,
        "route",
        slug,
        route=slug,
        payload={
            "objects": {"decision": [support.decision_id for support in supports]},
            "verifier_version": VERIFIER_VERSION,
            "fully_supported": sum(support.fully_supported for support in supports),
            "no_supporting_passage": sum(support.no_supporting_passage for support in supports),
            "failed": [support.decision_id for support in supports if support.status == SupportStatus.FAILED],
        },
    )
