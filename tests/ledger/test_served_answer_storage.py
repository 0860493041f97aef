"""The served answer is stored once: `distinct_served_answer` only when it is not the claim."""

import pytest
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from console.core.db_roles import as_owner
from console.ledger.models import SERVED_ANSWER, SERVED_ANSWER_SQL, Decision
from console.review.selectors import decision_as_dict
from grading.models import GradingItem
from grading.services import pool as pool_services
from tests.factories import TEST_ACTOR, ingest, record, served_record

CLAIM = "Open Settings > Security and choose Reset."


def _stored(decision_id: int) -> str | None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT distinct_served_answer FROM ledger_decision WHERE id = %s", [decision_id])
        return cursor.fetchone()[0]


def test_a_served_claim_is_stored_once_and_the_lookup_gives_it_as_the_served_answer(route, reviewer):
    [decision_id] = ingest([served_record(claim=CLAIM, served_answer=CLAIM)])
    assert _stored(decision_id) is None
    assert Decision.objects.get(pk=decision_id).served_answer == CLAIM
    assert reviewer.get(f"/api/v1/decisions/{decision_id}").json()["served_answer"] == CLAIM


def test_an_answer_other_than_the_claim_is_stored_and_given_back(route, reviewer):
    [decision_id] = ingest([served_record(claim=CLAIM, served_answer="Choose Reset in Settings.")])
    assert _stored(decision_id) == "Choose Reset in Settings."
    assert reviewer.get(f"/api/v1/decisions/{decision_id}").json()["served_answer"] == "Choose Reset in Settings."


def test_a_refusal_has_no_served_answer(route, reviewer):
    [decision_id] = ingest([record(claim=CLAIM)])
    assert _stored(decision_id) is None
    assert Decision.objects.get(pk=decision_id).served_answer is None
    assert reviewer.get(f"/api/v1/decisions/{decision_id}").json()["served_answer"] is None


def test_the_query_expression_and_the_raw_sql_agree_with_the_property(route):
    ids = ingest(
        [
            served_record(claim=CLAIM, served_answer=CLAIM),
            served_record(claim=CLAIM, served_answer="Another answer."),
            record(claim=CLAIM),
        ]
    )
    decisions = Decision.objects.filter(pk__in=ids).order_by("pk")
    expected = [decision.served_answer for decision in decisions]
    assert expected == [CLAIM, "Another answer.", None]
    assert list(decisions.annotate(served_answer=SERVED_ANSWER).values_list("served_answer", flat=True)) == expected
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {SERVED_ANSWER_SQL} FROM ledger_decision WHERE id = ANY(%s) ORDER BY id", [ids])
        assert [answer for (answer,) in cursor.fetchall()] == expected


def test_the_pool_sweep_shows_graders_the_served_claim(route):
    [decision_id] = ingest([served_record(claim=CLAIM, served_answer=CLAIM)])
    GradingItem.objects.filter(decision_id=decision_id).delete()  # so the sweep's own read enters it
    pool_services.grading_pool_enter(actor=TEST_ACTOR, decision_ids=[decision_id])
    assert GradingItem.objects.get(decision_id=decision_id).answer == CLAIM


@pytest.mark.parametrize(
    ("kind", "assignment"),
    [("refused", "'An answer.'"), ("served", "claim")],
    ids=["an answer on a refusal", "a copy of the claim"],
)
def test_the_database_refuses_a_second_spelling_of_a_state(route, kind, assignment):
    [decision_id] = ingest([served_record(claim=CLAIM) if kind == "served" else record(claim=CLAIM)])
    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"UPDATE ledger_decision SET distinct_served_answer = {assignment} WHERE id = %s", [decision_id])


def test_every_month_partition_carries_the_constraints(route):
    ingest([record(occurred_at="2026-10-01T00:00:00Z"), record(occurred_at="2026-11-01T00:00:00Z")])
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, array_agg(k.conname ORDER BY k.conname) FROM pg_inherits i "
            "JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_constraint k ON k.conrelid = c.oid AND k.contype = 'c' "
            "WHERE i.inhparent = 'ledger_decision'::regclass GROUP BY c.relname"
        )
        partitions = dict(cursor.fetchall())
    assert len(partitions) >= 2
    for names in partitions.values():
        assert {"refusal_has_no_distinct_answer", "distinct_answer_is_not_the_claim"} <= set(names)


@pytest.mark.slow  # migrates the test database back and forth: seconds, for the full suite (tests/conftest.py)
@pytest.mark.django_db(transaction=True)
def test_the_migration_keeps_every_answer_both_ways(route):
    same, other, refused = ingest(
        [
            served_record(claim=CLAIM, served_answer=CLAIM),
            served_record(claim=CLAIM, served_answer="Choose Reset in Settings."),
            record(claim=CLAIM),
        ]
    )
    ids = [same, other, refused]
    before = {pk: decision_as_dict(Decision.objects.get(pk=pk))["served_answer"] for pk in ids}
    try:
        with as_owner(), connection.cursor() as cursor:  # migrations run as the tables' owner
            MigrationExecutor(connection).migrate([("ledger", "0014_passage_dictionary")])
            cursor.execute("SELECT id, served_answer FROM ledger_decision WHERE id = ANY(%s)", [ids])
            assert dict(cursor.fetchall()) == before
    finally:
        call_command("migrate", verbosity=0)  # every app forward again, not the ledger alone
    assert [_stored(pk) for pk in ids] == [None, "Choose Reset in Settings.", None]
    assert {pk: Decision.objects.get(pk=pk).served_answer for pk in ids} == before
    assert before == {same: CLAIM, other: "Choose Reset in Settings.", refused: None}
