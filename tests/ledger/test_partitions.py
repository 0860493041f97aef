"""The decisions and their per-decision tables are partitioned by month (console/ledger/partitions.py)."""

from __future__ import annotations

import threading
from datetime import UTC, date, datetime

import pytest
from django.db import IntegrityError, connection, transaction

from console.core.errors import Conflict
from console.core.partitions import month_partitions, months_ensure
from console.ledger.models import Decision, RequestKey
from console.verification.models import DecisionSupport
from console.verification.services import decisions_verify
from tests.factories import TEST_ACTOR, ingest, make_route, record

PARTITIONED = ("ledger_decision", "verification_decisionsupport")


def _partition_of(table: str, column: str, value) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT tableoid::regclass::text FROM {table} WHERE {column} = %s", [value])
        return {row[0] for row in cursor.fetchall()}


def test_the_decisions_and_their_per_decision_tables_are_partitioned_by_range(db):
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname, p.partstrat FROM pg_partitioned_table p JOIN pg_class c ON c.oid = p.partrelid"
        )
        found = dict(cursor.fetchall())
    assert {table: found.get(table) for table in PARTITIONED} == dict.fromkeys(PARTITIONED, "r")


def test_a_decision_and_its_rows_land_in_the_partitions_of_its_month(route):
    october, november = ingest(
        [record(occurred_at="2026-10-31T23:59:59Z"), record(occurred_at="2026-11-01T00:00:00+00:00")]
    )
    decisions_verify(actor=TEST_ACTOR, decision_ids=[october, november])
    assert _partition_of("ledger_decision", "id", october) == {"ledger_decision_y2026m10"}
    assert _partition_of("ledger_decision", "id", november) == {"ledger_decision_y2026m11"}
    assert _partition_of("verification_decisionsupport", "decision_id", november) == {
        "verification_decisionsupport_y2026m11"
    }
    months = {(p.parent, f"{p.month:%Y-%m}") for p in month_partitions()}
    assert {("ledger_decision", "2026-10"), ("verification_decisionsupport", "2026-10")} <= months


def test_a_time_zone_offset_counts_in_the_utc_month(route):
    (pk,) = ingest([record(occurred_at="2026-09-01T01:00:00+02:00")])  # 2026-08-31 23:00 UTC
    assert _partition_of("ledger_decision", "id", pk) == {"ledger_decision_y2026m08"}


def test_making_partitions_that_exist_is_a_no_op(db):
    assert months_ensure([date(2026, 5, 3)]) == len(PARTITIONED)
    assert months_ensure([date(2026, 5, 20), datetime(2026, 5, 31, 23, tzinfo=UTC)]) == 0


def test_a_per_decision_row_must_carry_its_decisions_month(route):
    (pk,) = ingest([record(occurred_at="2026-10-05T10:00:00Z")])
    decisions_verify(actor=TEST_ACTOR, decision_ids=[pk])
    support = DecisionSupport.objects.get(pk=pk)
    DecisionSupport.objects.filter(pk=pk).delete()
    support.decision_occurred_at = support.decision_occurred_at.replace(day=6)
    with pytest.raises(IntegrityError), transaction.atomic():
        support.save(force_insert=True)


def test_deleting_a_decision_in_sql_deletes_its_rows_with_it(route):
    (pk,) = ingest([record(occurred_at="2026-10-05T10:00:00Z")])
    decisions_verify(actor=TEST_ACTOR, decision_ids=[pk])
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM grading_gradingitem WHERE decision_id = %s", [pk])
        cursor.execute("DELETE FROM ledger_decision WHERE id = %s", [pk])
    assert not DecisionSupport.objects.filter(pk=pk).exists()


def test_moving_a_decision_to_another_month_moves_its_rows_with_it(route):
    (pk,) = ingest([record(occurred_at="2026-10-05T10:00:00Z")])
    decisions_verify(actor=TEST_ACTOR, decision_ids=[pk])
    months_ensure([date(2026, 11, 1)])
    Decision.objects.filter(pk=pk).update(occurred_at="2026-11-02T10:00:00Z")
    assert _partition_of("ledger_decision", "id", pk) == {"ledger_decision_y2026m11"}
    assert DecisionSupport.objects.get(pk=pk).decision_occurred_at.month == 11


def _dangling_rows(route):
    from console.shadow.models import ShadowRun
    from grading.models import GradingItem

    yield lambda: ShadowRun.objects.create(decision_id=987654321, pipeline="reference")
    yield lambda: GradingItem.objects.create(route=route, decision_id=987654321, answer_source="served", queue_key=1)


def test_a_row_naming_a_decision_that_does_not_exist_is_refused(route):
    """The tables whose foreign key to a decision the partitioning removed check it on insert."""
    (pk,) = ingest([record()])
    for create in _dangling_rows(route):
        with pytest.raises(IntegrityError, match="violates the reference"), transaction.atomic():
            create()
    from console.shadow.models import ShadowRun

    assert ShadowRun.objects.create(decision_id=pk, pipeline="reference").decision_id == pk


def test_every_table_that_points_at_a_decision_has_a_check(db):
    """A new table with a link to the decisions gets a check of the decision's id, or of its id and
    month (ledger migrations 0007 and 0010 gave them to the tables that existed; a later one must
    say which it wants)."""
    from django.apps import apps

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
            "WHERE NOT t.tgisinternal AND t.tgname LIKE '%%decision_id_exists'"
        )
        checked = {name for (name,) in cursor.fetchall()}
        cursor.execute(
            "SELECT c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
            "WHERE NOT t.tgisinternal AND NOT c.relispartition AND t.tgname = c.relname || '_decision_month_exists'"
        )
        keyed = {name for (name,) in cursor.fetchall()}
    pointing = {
        rel.related_model._meta.db_table
        for model in apps.get_models()
        if model is Decision
        for rel in model._meta.related_objects
        if not rel.many_to_many
    }
    assert pointing and pointing <= checked | keyed, pointing - checked - keyed
    assert keyed == {"verification_decisionsupport"}


def test_a_request_id_stays_unique_within_its_route_across_months(route):
    first = record(occurred_at="2026-10-05T10:00:00Z")
    ingest([first])
    with pytest.raises(Conflict):
        ingest([dict(first, occurred_at="2026-11-05T10:00:00Z", claim="another")])
    assert Decision.objects.filter(request_id=first["request_id"]).count() == 1
    assert RequestKey.objects.filter(request_id=first["request_id"]).count() == 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_batches_with_one_request_id_in_two_months_store_it_once():
    make_route("it-support")
    shared = record(occurred_at="2026-10-05T10:00:00Z")
    batches = [[shared, record()], [dict(shared, occurred_at="2026-11-05T10:00:00Z", claim="another"), record()]]
    outcomes: list[str] = []
    barrier = threading.Barrier(len(batches))

    def client(batch):
        try:
            barrier.wait()
            ingest(batch)
            outcomes.append("stored")
        except Conflict:
            outcomes.append("conflict")
        finally:
            connection.close()

    threads = [threading.Thread(target=client, args=(batch,)) for batch in batches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["conflict", "stored"]
    assert Decision.objects.filter(request_id=shared["request_id"]).count() == 1
