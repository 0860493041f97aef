from datetime import date

from django.db import connection

from console.ledger.models import Decision, RouteDayCount
from grading.models import GradingItem
from tests.factories import ingest, record, served_record


def counts() -> dict[tuple[str, date, str], int]:
    return {
        (row.route.slug, row.day, row.outcome): row.decisions
        for row in RouteDayCount.objects.select_related("route")
        if row.decisions
    }


def test_ingested_decisions_are_counted_per_route_utc_day_and_outcome(route, other_route):
    ingest(
        [
            record(occurred_at="2026-11-01T23:30:00-02:00"),  # 2 November in UTC
            record(occurred_at="2026-11-01T12:00:00Z"),
            served_record(occurred_at="2026-11-01T13:00:00Z"),
            record(route="hr-policy", occurred_at="2026-11-01T09:00:00Z"),
        ]
    )
    assert counts() == {
        ("it-support", date(2026, 11, 2), "refused"): 1,
        ("it-support", date(2026, 11, 1), "refused"): 1,
        ("it-support", date(2026, 11, 1), "served"): 1,
        ("hr-policy", date(2026, 11, 1), "refused"): 1,
    }


def test_updates_and_deletes_move_the_counts_too(route):
    ingest([record(request_id="a"), record(request_id="b"), record(request_id="c")])
    moved = Decision.objects.filter(request_id="a")
    moved.update(outcome="served", occurred_at="2026-11-03T00:00:00Z")
    assert counts() == {("it-support", date(2026, 11, 1), "refused"): 2, ("it-support", date(2026, 11, 3), "served"): 1}
    # Its passage links and checks go with it; its pool item protects it, so that goes first.
    GradingItem.objects.filter(decision__request_id="b").delete()
    Decision.objects.filter(request_id="b").delete()
    assert counts() == {("it-support", date(2026, 11, 1), "refused"): 1, ("it-support", date(2026, 11, 3), "served"): 1}


def test_the_counts_equal_a_count_of_the_decisions(route, other_route):
    ingest(
        [record(occurred_at=f"2026-10-{day:02d}T10:00:00Z") for day in range(1, 29)]
        + [served_record(occurred_at=f"2026-10-{day:02d}T11:00:00Z") for day in range(1, 29, 3)]
        + [record(route="hr-policy", occurred_at="2026-10-05T10:00:00Z")]
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT route_id, (occurred_at AT TIME ZONE 'UTC')::date, outcome, count(*) "
            "FROM ledger_decision GROUP BY 1, 2, 3"
        )
        expected = {(r, d, o): n for r, d, o, n in cursor.fetchall()}
    stored = {(row.route_id, row.day, row.outcome): row.decisions for row in RouteDayCount.objects.all()}
    assert stored == expected
