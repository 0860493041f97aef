"""Per-day aggregates of a route's decisions, kept so the daily monitor reads ~1 row per day.

A day is (re)computed when it has no row, when its row was counted at another cutoff, when the
ledger's day counter (kept by triggers on every insert) no longer matches its decision count (a
late or back-filled decision), or when it is one of the last two days (still filling; span checks
of the newest decisions may still be running). Three grouped queries per route cover every day
that needs it; the (route, occurred_at) index bounds them.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta

from django.db import connection, transaction
from django.db.models import Sum
from django.utils import timezone

from console.accounts.models import Route
from console.ledger.models import RouteDayCount
from console.monitoring.models import SCORE_BINS, DailyAggregate

RECENT_DAYS = 2
CUTOFF_TOLERANCE = 1e-9

_DAY = "(d.occurred_at AT TIME ZONE 'UTC')::date"
_TOTALS_SQL = f"""
    SELECT {_DAY} AS day, count(*), count(*) FILTER (WHERE d.gate_score < %(cutoff)s),
           count(*) FILTER (WHERE d.gate_score < %(cutoff)s AND s.no_supporting_passage),
           count(*) FILTER (WHERE abs(d.cutoff - %(cutoff)s) > %(tolerance)s)
      FROM ledger_decision d LEFT JOIN verification_decisionsupport s ON s.decision_id = d.id
     WHERE d.route_id = %(route)s AND d.occurred_at >= %(start)s AND d.occurred_at < %(end)s
       AND {_DAY} = ANY(%(days)s)
     GROUP BY 1
"""
_HISTOGRAM_SQL = f"""
    SELECT {_DAY} AS day, LEAST(GREATEST(floor(d.gate_score * {SCORE_BINS})::int, 0), {SCORE_BINS - 1}), count(*)
      FROM ledger_decision d
     WHERE d.route_id = %(route)s AND d.occurred_at >= %(start)s AND d.occurred_at < %(end)s
       AND {_DAY} = ANY(%(days)s)
     GROUP BY 1, 2
"""
_SEGMENTS_SQL = f"""
    SELECT {_DAY} AS day, d.segments::text, count(*)
      FROM ledger_decision d
     WHERE d.route_id = %(route)s AND d.occurred_at >= %(start)s AND d.occurred_at < %(end)s
       AND {_DAY} = ANY(%(days)s)
     GROUP BY 1, 2
"""


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=UTC)


def days_to_refresh(route: Route, cutoff: float, *, today: date | None = None) -> list[date]:
    today = today or timezone.now().date()
    counted = dict(
        RouteDayCount.objects.filter(route=route)
        .values("day")
        .annotate(total=Sum("decisions"))
        .values_list("day", "total")
    )
    stored = {
        day: (n, stored_cutoff)
        for day, n, stored_cutoff in DailyAggregate.objects.filter(route=route).values_list("day", "n", "cutoff")
    }
    recent = today - timedelta(days=RECENT_DAYS - 1)
    stale = []
    for day, total in counted.items():
        row = stored.get(day)
        if row is None or row[0] != total or abs(row[1] - cutoff) > CUTOFF_TOLERANCE or day >= recent:
            stale.append(day)
    # A day whose decisions were all deleted keeps no aggregate.
    gone = [day for day in stored if not counted.get(day)]
    if gone:
        DailyAggregate.objects.filter(route=route, day__in=gone).delete()
    return sorted(stale)


def aggregates_refresh(*, route: Route, cutoff: float, today: date | None = None) -> int:
    """Bring the route's aggregates up to date at this cutoff; returns the days recomputed."""
    days = days_to_refresh(route, cutoff, today=today)
    if not days:
        return 0
    params = {
        "route": route.pk,
        "cutoff": cutoff,
        "tolerance": CUTOFF_TOLERANCE,
        "days": days,
        "start": _midnight(days[0]),
        "end": _midnight(days[-1] + timedelta(days=1)),
    }
    rows: dict[date, DailyAggregate] = {}
    now = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(_TOTALS_SQL, params)
        for day, n, refused, no_support, not_following in cursor.fetchall():
            rows[day] = DailyAggregate(
                route=route,
                day=day,
                n=n,
                cutoff=cutoff,
                refused_at_cutoff=refused,
                no_support_refused=no_support,
                not_following=not_following,
                histogram=[0] * SCORE_BINS,
                segments={},
                computed_at=now,
            )
        cursor.execute(_HISTOGRAM_SQL, params)
        for day, score_bin, count in cursor.fetchall():
            rows[day].histogram[score_bin] = count
        cursor.execute(_SEGMENTS_SQL, params)
        for day, segments, count in cursor.fetchall():
            rows[day].segments[segments] = count
    with transaction.atomic():
        DailyAggregate.objects.bulk_create(
            list(rows.values()),
            update_conflicts=True,
            unique_fields=["route", "day"],
            update_fields=[
                "n",
                "cutoff",
                "refused_at_cutoff",
                "no_support_refused",
                "not_following",
                "histogram",
                "segments",
                "computed_at",
            ],
        )
    return len(rows)
