"""Verification 0007 keys span checks by (decision, passage, unit) and drops their surrogate id;
going back gives ids again, and going forward again keeps every check."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from console.core.db_roles import as_owner
from console.verification.models import SpanCheck
from console.verification.services import decisions_verify
from tests.factories import TEST_ACTOR, ingest, make_route, record

PASSAGES = [
    {"id": "kb/reset", "text": "Open Settings and choose Reset. Then restart the laptop.", "rank": 1},
    {"id": "kb/other", "text": "Restart the laptop after any update.", "rank": 2},
]
_FIELDS = ("decision_id", "passage_id", "unit_index", "unit_text", "supported", "match_ranges")


def _checks() -> list[tuple]:
    return sorted(SpanCheck.objects.values_list(*_FIELDS))


@pytest.mark.slow  # migrates the test database back and forth: seconds, for the full suite (tests/conftest.py)
@pytest.mark.django_db(transaction=True)
def test_span_checks_go_back_to_surrogate_ids_and_forward_again_with_every_check():
    make_route("it-support")
    decision_ids = ingest(
        [
            record(claim="Open Settings and choose Reset.\nThen restart the laptop.", passages=PASSAGES),
            record(claim="Nothing here matches.", passages=PASSAGES[:1]),
        ]
    )
    decisions_verify(actor=TEST_ACTOR, decision_ids=decision_ids)
    before = _checks()
    assert len(before) >= 3
    try:
        with as_owner():  # migrations run as the tables' owner
            MigrationExecutor(connection).migrate([("verification", "0006_span_checks_name_their_routes_passage")])
            with connection.cursor() as cursor:
                cursor.execute("SELECT id, decision_id, passage_id, unit_index FROM verification_spancheck ORDER BY id")
                rows = cursor.fetchall()
                # ids again, in (decision, unit, passage) order, and the key is unique as before
                assert [row[0] for row in rows] == list(range(1, len(rows) + 1))
                in_order = sorted(rows, key=lambda row: (row[1], row[3], row[2]))  # decision, unit, passage
                assert [row[1:] for row in rows] == [row[1:] for row in in_order]
                cursor.execute(
                    "SELECT conname FROM pg_constraint WHERE conrelid = 'verification_spancheck'::regclass "
                    "AND contype IN ('p', 'u') ORDER BY 1"
                )
                assert [row[0] for row in cursor.fetchall()] == [
                    "one_check_per_unit_passage",
                    "verification_spancheck_pkey",
                ]
    finally:
        call_command("migrate", verbosity=0)  # every app forward again
    assert _checks() == before
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE conrelid = 'verification_spancheck'::regclass AND contype IN ('p', 'u')"
        )
        assert cursor.fetchall() == [("PRIMARY KEY (decision_id, passage_id, unit_index)",)]
