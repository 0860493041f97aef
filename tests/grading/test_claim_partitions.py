"""The queue's claim reads an item's decision from the month partitions that hold it (issue 36, item 4).

Decisions and their ranked passages are partitioned by month of `occurred_at`. An item carries its
decision's time, so the claim's subqueries name the decision's whole key: the executor then probes
one month's partition per table, where the id alone probes every month's (36 index probes per table
and per subquery with three years of months, each a page or more read).
"""

from __future__ import annotations

import json
from datetime import date, timedelta

import pytest
from django.db import connection
from django.utils import timezone

from console.core.partitions import months_ensure
from console.ledger.models import Decision
from grading.models import GradingItem, ItemStatus, Verdict
from grading.services import pool, queue
from tests.factories import TEST_ACTOR, served_record
from tests.grading.helpers import next_item, pooled

MONTHS = ("2026-09-15T10:00:00Z", "2026-10-15T10:00:00Z", "2026-11-15T10:00:00Z")
PARTITIONED = ("ledger_decision",)


def _partition_scans(plan: dict) -> list[tuple[str, int]]:
    """(partition, loops) of every scan of a month partition of the decisions (their passages' ids with them)."""
    found = []
    relation = plan.get("Relation Name", "")
    if relation.startswith(tuple(f"{table}_y" for table in PARTITIONED)):
        found.append((relation, plan["Actual Loops"]))
    for child in plan.get("Plans", []):
        found += _partition_scans(child)
    return found


def _claim_plan(grader, route) -> dict:
    sql, params = queue._claim_statement(grader_id=grader.user.pk, route_ids=[route.pk], now=timezone.now())
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
        [[document]] = cursor.fetchall()
    plans = json.loads(document) if isinstance(document, str) else document
    return plans[0]["Plan"]


def test_a_pool_item_carries_its_decisions_occurred_at(route):
    decision_ids = pooled([served_record(occurred_at=moment) for moment in MONTHS])
    times = dict(Decision.objects.filter(pk__in=decision_ids).values_list("pk", "occurred_at"))
    items = GradingItem.objects.filter(decision_id__in=decision_ids, is_gold=False)
    assert {item.decision_id: item.decision_occurred_at for item in items} == times


def test_an_item_written_without_the_time_or_with_a_wrong_one_gets_its_decisions(route):
    (decision_id,) = pooled([served_record(occurred_at=MONTHS[1])])
    decision = Decision.objects.get(pk=decision_id)
    gold = pool.gold_item_create(actor=TEST_ACTOR, decision=decision, verdict=Verdict.CORRECT)
    gold.refresh_from_db()
    assert gold.decision_occurred_at == decision.occurred_at
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE grading_gradingitem SET decision_occurred_at = decision_occurred_at + interval '1 day' "
            "WHERE id = %s",
            [gold.pk],
        )
    gold.refresh_from_db()
    assert gold.decision_occurred_at == decision.occurred_at


def _items_inserted(route, rows: list[tuple]) -> list[int]:
    """Insert gold items as one statement, as pool entry inserts its items: (decision id or None, time or
    None) each."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO grading_gradingitem (route_id, decision_id, decision_occurred_at, own_question, own_answer, "
            "answer_source, stratum, inclusion_probability, queue_key, grades_required, status, is_gold, "
            "gold_verdict, created_at, public_id) "
            "SELECT r.id, v.decision_id, v.decision_occurred_at, 'q', 'a', 'served', 'all', 1.0, v.position, 1, "
            "'open', true, 'correct', now(), gen_random_uuid() "
            "FROM ledger_route r, unnest(%s::bigint[], %s::timestamptz[]) WITH ORDINALITY "
            "AS v(decision_id, decision_occurred_at, position) WHERE r.id = %s ORDER BY v.position RETURNING id",
            [[row[0] for row in rows], [row[1] for row in rows], route.pk],
        )
        return [pk for (pk,) in cursor.fetchall()]


def test_one_insert_of_many_items_leaves_every_items_time_its_decisions(route):
    """Checked once per statement (grading migration 0015): in one insert, a right time stays, and a
    wrong one, a missing one and one given without a decision end as the decision says."""
    decisions = pooled([served_record(occurred_at=moment) for moment in MONTHS])
    times = dict(Decision.objects.filter(pk__in=decisions).values_list("pk", "occurred_at"))
    first, second, third = decisions
    ids = _items_inserted(
        route,
        [
            (first, times[first]),  # right
            (second, times[first]),  # another decision's time, in another month
            (third, None),  # left out
            (None, times[third]),  # a time without a decision
            (first, times[first] + timedelta(microseconds=1)),  # a microsecond off
        ],
    )
    stored = dict(GradingItem.objects.filter(pk__in=ids).values_list("pk", "decision_occurred_at"))
    assert [stored[pk] for pk in ids] == [times[first], times[second], times[third], None, times[first]]


def _items_rewritten() -> int:
    """Rows of the pool items this transaction has updated so far (PostgreSQL's own count)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_get_xact_tuples_updated('grading_gradingitem'::regclass)")
        return cursor.fetchone()[0]


def test_items_written_with_their_time_or_without_one_are_written_once(route):
    """A right time is confirmed and a missing one filled as the rows go in, never by writing the
    rows a second time; only a wrong time is set afterwards."""
    decisions = pooled([served_record(occurred_at=moment) for moment in MONTHS])
    times = dict(Decision.objects.filter(pk__in=decisions).values_list("pk", "occurred_at"))
    before = _items_rewritten()
    _items_inserted(route, [(pk, times[pk]) for pk in decisions] + [(pk, None) for pk in decisions])
    assert _items_rewritten() == before
    _items_inserted(route, [(decisions[0], times[decisions[1]])])
    assert _items_rewritten() == before + 1


def test_an_insert_naming_a_decision_that_does_not_exist_is_refused(route):
    from django.db import IntegrityError, transaction

    (decision_id,) = pooled([served_record(occurred_at=MONTHS[0])])
    moment = Decision.objects.get(pk=decision_id).occurred_at
    for time in (moment, None):
        with pytest.raises(IntegrityError, match="violates the reference"), transaction.atomic():
            _items_inserted(route, [(decision_id, moment), (decision_id + 10_000, time)])


def test_an_item_follows_its_decision_to_another_month(route):
    (decision_id,) = pooled([served_record(occurred_at=MONTHS[1])])
    months_ensure([date(2026, 12, 1)])
    Decision.objects.filter(pk=decision_id).update(occurred_at="2026-12-02T10:00:00Z")
    item = GradingItem.objects.get(decision_id=decision_id, is_gold=False)
    assert item.decision_occurred_at == Decision.objects.get(pk=decision_id).occurred_at


def test_the_claim_reads_only_the_month_partitions_of_the_item_it_hands_out(route, grader):
    september, october, november = pooled([served_record(occurred_at=moment) for moment in MONTHS])
    # The October item is the only one left to hand out, so the claim's subqueries run for it alone.
    GradingItem.objects.filter(decision_id__in=[september, november]).update(status=ItemStatus.LABELLED)
    scans = _partition_scans(_claim_plan(grader, route))
    read = {partition for partition, loops in scans if loops}
    assert read == {"ledger_decision_y2026m10"}, scans


def test_the_claim_still_hands_out_the_decisions_texts_and_passages(route, grader):
    pooled([served_record(occurred_at=MONTHS[0])])
    item = next_item(grader)
    assert item["question"] and item["answer"] and item["passages"]
