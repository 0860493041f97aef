"""The final labels packed per route, UTC day and sample group (grading.LabelSample) are what a
fresh GROUP BY over the labels gives, whatever wrote the labels: inserts, updates, a decision moved
to another day, deletes, COPY, and the migration for labels written before it."""

from collections import defaultdict
from datetime import UTC, date, datetime

import numpy as np
import pytest
from django.core.management import call_command
from django.db import connection

from console.ledger.models import Decision
from grading.models import FinalLabel, LabelSample
from tests.analysis.populations import label
from tests.audit.attack import superuser_cursor
from tests.factories import ingest, record


def _at(day: int, hour: int = 12, minute: int = 0, second: int = 0) -> str:
    return datetime(2026, 11, day, hour, minute, second, tzinfo=UTC).isoformat()


def _decisions(*times: str, route: str = "it-support") -> list[int]:
    return ingest(
        [
            record(route=route, occurred_at=at, gate={"name": "nli", "score": 0.1 * i, "cutoff": 0.7})
            for i, at in enumerate(times)
        ]
    )


def packed() -> dict[tuple, tuple[int, bytes, bytes]]:
    return {
        (row.route_id, row.day, row.method, row.source, row.item_inclusion_probability, row.item_stratum): (
            row.labels,
            bytes(row.scores),
            bytes(row.correct),
        )
        for row in LabelSample.objects.all()
    }


def grouped() -> dict[tuple, tuple[int, bytes, bytes]]:
    """The reference, computed here from the labels' rows rather than by the database."""
    groups = defaultdict(list)
    # Columns added after migration 0007 are left unread: the migration test reads at 0007.
    for made in FinalLabel.objects.defer("claims_supported", "claims_verifiable", "decision_expected_claims").order_by(
        "id"
    ):
        day = made.decision_occurred_at.astimezone(UTC).date()
        key = (
            made.decision_route_id,
            day,
            made.method,
            made.source,
            made.item_inclusion_probability,
            made.item_stratum,
        )
        groups[key].append(made)
    return {
        key: (
            len(labels),
            np.array([np.nan if m.decision_score is None else m.decision_score for m in labels], dtype=">f8").tobytes(),
            bytes(int(m.correct) for m in labels),
        )
        for key, labels in groups.items()
    }


@pytest.fixture
def labelled(route, other_route):
    """Labels of two routes over three days, imported from two sets and graded in two strata."""
    ids = _decisions(_at(2), _at(2, 18), _at(3), _at(3, 9), _at(4), _at(4, 1)) + _decisions(
        _at(2), _at(3), route="hr-policy"
    )
    label(ids[0], True, source="eval-a")
    label(ids[1], False, source="eval-b")
    label(ids[2], True, method="majority", inclusion_probability=0.5, stratum="high")
    label(ids[3], False, method="majority", inclusion_probability=0.2, stratum="low")
    label(ids[4], True, source="eval-a")
    label(ids[5], True, source="eval-a")
    label(ids[6], False, source="eval-a")
    label(ids[7], True, method="majority", inclusion_probability=0.5, stratum="high")
    return ids


def test_labels_written_are_packed_per_route_utc_day_and_sample_group(labelled, route):
    assert packed() == grouped()
    assert packed()[(route.pk, date(2026, 11, 4), "imported", "eval-a", None, None)][0] == 2
    assert len(packed()) == 7


def test_a_flipped_verdict_is_packed_again(labelled):
    FinalLabel.objects.filter(decision_id=labelled[4]).update(correct=False)
    made = FinalLabel.objects.get(decision_id=labelled[2])
    made.correct = False
    made.save()
    assert packed() == grouped()


def test_a_decision_moved_to_another_day_leaves_its_old_day_and_joins_the_new_one(labelled, route):
    # As the application's copies change: the decision is edited, a trigger updates its label.
    Decision.objects.filter(pk=labelled[2]).update(occurred_at=_at(4, 7))
    rows = packed()
    assert (route.pk, date(2026, 11, 3), "majority", "", 0.5, "high") not in rows
    assert rows[(route.pk, date(2026, 11, 4), "majority", "", 0.5, "high")][0] == 1
    assert rows == grouped()


def test_deleted_labels_leave_their_days(labelled, route):
    FinalLabel.objects.filter(decision_id__in=labelled[4:6]).delete()
    FinalLabel.objects.filter(decision_id=labelled[0]).delete()
    assert not LabelSample.objects.filter(route=route, day=date(2026, 11, 4)).exists()
    assert packed() == grouped()


def test_a_decision_at_23_59_59_and_one_at_midnight_fall_on_different_utc_days(route):
    before, after = _decisions(_at(2, 23, 59, 59), _at(3, 0, 0, 0))
    label(before, True)
    label(after, False)
    assert {row.day: row.labels for row in LabelSample.objects.all()} == {date(2026, 11, 2): 1, date(2026, 11, 3): 1}
    assert packed() == grouped()


def test_labels_copied_in_are_packed(route):
    ids = _decisions(_at(2), _at(2, 5), _at(3))
    with connection.cursor() as cursor:
        with cursor.cursor.copy(
            "COPY grading_finallabel (decision_id, correct, method, source, note, decided_at) FROM STDIN"
        ) as copy:
            for decision_id, correct in zip(ids, (True, False, True), strict=True):
                copy.write_row((decision_id, correct, "imported", "legacy-eval", "", datetime.now(UTC)))
    assert sum(row.labels for row in LabelSample.objects.all()) == 3
    assert packed() == grouped()


def test_a_statement_that_changes_no_label_leaves_the_packed_rows_alone(labelled):
    before = packed()
    FinalLabel.objects.filter(decision_id=-1).update(correct=True)
    FinalLabel.objects.filter(decision_id=-1).delete()
    assert packed() == before


@pytest.mark.django_db(transaction=True)
def test_truncated_labels_leave_no_packed_rows(labelled):
    assert LabelSample.objects.exists()
    with superuser_cursor() as cursor:  # the application's role may not truncate; the owner may
        cursor.execute("TRUNCATE grading_finallabel CASCADE")
    assert not LabelSample.objects.exists()


@pytest.mark.slow  # migrates the test database back and forth: seconds, for the full suite (tests/conftest.py)
@pytest.mark.django_db(transaction=True)
def test_the_migration_packs_the_labels_written_before_it(route, other_route):
    # Written with today's schema, then taken back to before the packed table existed (its reverse
    # drops the table and its triggers), so only the migration's own packing can fill it again.
    ids = _decisions(_at(2), _at(2, 23, 59, 59), _at(3)) + _decisions(_at(2), route="hr-policy")
    label(ids[0], True, source="eval-a")
    label(ids[1], False, source="eval-a")
    label(ids[2], True, method="majority", inclusion_probability=0.5, stratum="high")
    label(ids[3], False, source="eval-b")
    try:
        call_command("migrate", "grading", "0006", verbosity=0)
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_regclass('grading_labelsample')")
            assert cursor.fetchone() == (None,)
        call_command("migrate", "grading", "0007", verbosity=0)
        assert len(packed()) == 3
        assert packed() == grouped()
    finally:
        # Every app, not only grading: later tests expect the whole schema.
        call_command("migrate", verbosity=0)
