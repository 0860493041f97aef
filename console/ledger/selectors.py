"""Reads from the ledger. Access is decided in console.accounts.permissions, applied here."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.db.models import Q, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce
from django.http import Http404
from django.utils import timezone

from console.accounts import permissions
from console.core.errors import Forbidden
from console.ledger.hooks import decision_filter, decision_filters
from console.ledger.models import Decision, DecisionPassage, Outcome, Route, RouteDayCount


def readable_routes(user) -> QuerySet[Route]:
    return permissions.visible(Route.objects.all(), user, permissions.DECISION_READERS, field="pk")


def stats_routes(user) -> QuerySet[Route]:
    """Routes whose statistics the user may read: every decision reader's routes except a `reader`'s."""
    return permissions.visible(Route.objects.all(), user, permissions.STATS_READERS, field="pk")


def readable_decisions(user) -> QuerySet[Decision]:
    return permissions.visible(Decision.objects.all(), user, permissions.DECISION_READERS)


def get_decision_for_user(user, *, pk: int | None = None, route_slug: str | None = None,
                          request_id: str | None = None) -> Decision:
    """The decision if the user may read it; Forbidden for graders-only users, else 404."""
    if not permissions.can_read_decisions(user):
        raise Forbidden("Your role does not allow reading decisions.")
    queryset = readable_decisions(user).select_related("route", "support").prefetch_related(
        _ranked_passages_prefetch()
    )
    lookup = {"pk": pk} if pk is not None else {"route__slug": route_slug, "request_id": request_id}
    decision = queryset.filter(**lookup).first()
    if decision is None:
        raise Http404("No such decision.")
    return decision


def _ranked_passages_prefetch():
    from django.db.models import Prefetch

    return Prefetch(
        "ranked_passages",
        queryset=DecisionPassage.objects.select_related("passage").order_by("rank"),
    )


@dataclass
class DecisionFilters:
    """Filters shared by the refusals list page and the API; all optional."""

    route: str | None = None
    outcome: str | None = Outcome.REFUSED
    score_min: float | None = None
    score_max: float | None = None
    date_from: date | None = None
    date_to: date | None = None
    versions: dict[str, str] | None = None
    segments: dict[str, Any] | None = None
    no_supporting_passage: bool = False  # verified, and no claim unit found in any logged passage
    extra: tuple[str, ...] = ()  # names of filters registered by upper apps (console/ledger/hooks.py)

    def apply(self, queryset: QuerySet[Decision]) -> QuerySet[Decision]:
        if self.route:
            # An id, not a join on the slug: the planner then knows the route's share of rows.
            queryset = queryset.filter(route_id=Subquery(Route.objects.filter(slug=self.route).values("pk")[:1]))
        if self.outcome:
            queryset = queryset.filter(outcome=self.outcome)
        if self.score_min is not None:
            queryset = queryset.filter(gate_score__gte=self.score_min)
        if self.score_max is not None:
            queryset = queryset.filter(gate_score__lte=self.score_max)
        if self.date_from:
            queryset = queryset.filter(occurred_at__gte=_start_of(self.date_from))
        if self.date_to and self.date_to < date.max:  # nothing is later than the calendar's last day
            queryset = queryset.filter(occurred_at__lt=_start_of(self.date_to + timedelta(days=1)))
        if self.versions:
            queryset = queryset.filter(versions__contains=self.versions)
        if self.segments:
            queryset = queryset.filter(segments__contains=self.segments)
        if self.no_supporting_passage:
            queryset = queryset.filter(support__no_supporting_passage=True)
        for name in self.extra:
            hook = decision_filter(name)
            if hook is not None:
                queryset = queryset.filter(hook.condition())
        return queryset


def decision_badges(decisions: list[Decision]) -> None:
    """Set ``badges`` (labels of the registered filters that hold) on each decision of a page, from
    the annotations ``decision_list`` added."""
    hooks = [hook for hook in decision_filters() if hook.badge]
    for decision in decisions:
        decision.badges = [hook.label for hook in hooks if getattr(decision, f"badge_{hook.name}", False)]


def _start_of(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min), timezone=timezone.get_fixed_timezone(0))


def decision_list(user, filters: DecisionFilters) -> QuerySet[Decision]:
    badges = {f"badge_{hook.name}": hook.condition() for hook in decision_filters() if hook.badge}
    return (filters.apply(readable_decisions(user)).select_related("route", "support").annotate(**badges)
            .order_by("-occurred_at", "-pk"))


# The refusals list counts matches up to this many; past it, it says "more than".
COUNT_CAP = 1_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class DecisionPage:
    """One page of the refusals list, newest first, and cursors to its neighbours."""

    decisions: list[Decision]
    count: int  # matching decisions, exact up to COUNT_CAP
    more_than_count: bool  # more than COUNT_CAP matched
    newer: str | None  # cursor for the page before this one (newer decisions)
    older: str | None  # cursor for the page after it


def decision_page(user, filters: DecisionFilters, *, before: str = "", after: str = "",
                  size: int = 50) -> DecisionPage:
    """A page of ``decision_list`` by keyset: ``before`` (older than a cursor) or ``after``
    (newer than one), else the newest. Every page costs one index range scan however deep it
    is, where an OFFSET would walk every row before it; the count stops at ``COUNT_CAP`` for the
    same reason. A cursor that does not parse gives the newest page."""
    count = filters.apply(readable_decisions(user)).order_by().values("pk")[: COUNT_CAP + 1].count()
    ordered = decision_list(user, filters)
    older_than, newer_than = _parse_cursor(before), _parse_cursor(after)
    if newer_than is not None:
        at, pk = newer_than
        rows = list(ordered.filter(Q(occurred_at__gt=at) | Q(occurred_at=at, pk__gt=pk), occurred_at__gte=at)
                    .order_by("occurred_at", "pk")[: size + 1])
        has_newer, has_older = len(rows) > size, True
        rows = rows[:size][::-1]
    else:
        if older_than is not None:
            at, pk = older_than
            ordered = ordered.filter(Q(occurred_at__lt=at) | Q(occurred_at=at, pk__lt=pk), occurred_at__lte=at)
        rows = list(ordered[: size + 1])
        has_newer, has_older = older_than is not None, len(rows) > size
        rows = rows[:size]
    return DecisionPage(
        decisions=rows,
        count=min(count, COUNT_CAP),
        more_than_count=count > COUNT_CAP,
        newer=_cursor_of(rows[0]) if rows and has_newer else None,
        older=_cursor_of(rows[-1]) if rows and has_older else None,
    )


def _cursor_of(decision: Decision) -> str:
    """``<microseconds since 1970 UTC>.<id>``: exact, ordered as the list is, safe in a URL."""
    return f"{(decision.occurred_at - _EPOCH) // timedelta(microseconds=1)}.{decision.pk}"


def _parse_cursor(value: str) -> tuple[datetime, int] | None:
    try:
        micros, pk = value.split(".")
        return _EPOCH + timedelta(microseconds=int(micros)), int(pk)
    except (ValueError, OverflowError):
        return None


def route_daily_counts(user, *, days: int = 14) -> list[dict[str, Any]]:
    """Per readable route: decisions and refusals in all and per day over the last `days` days,
    read from the counters the database keeps per route, UTC day and outcome (RouteDayCount)."""
    today = timezone.now().date()
    routes = list(readable_routes(user).annotate(
        total=Coalesce(Sum("day_counts__decisions"), 0),
        refused=Coalesce(Sum("day_counts__decisions", filter=Q(day_counts__outcome=Outcome.REFUSED)), 0),
    ))
    rows = (
        permissions.visible(RouteDayCount.objects.all(), user, permissions.DECISION_READERS)
        .filter(day__gte=today - timedelta(days=days - 1))
        .values("route_id", "day")
        .annotate(total=Sum("decisions"), refused=Coalesce(Sum("decisions", filter=Q(outcome=Outcome.REFUSED)), 0))
    )
    by_route: dict[int, dict[date, dict[str, int]]] = {}
    for row in rows:
        by_route.setdefault(row["route_id"], {})[row["day"]] = row
    days_list = [today - timedelta(days=offset) for offset in range(days - 1, -1, -1)]
    result = []
    for route in routes:
        counts = by_route.get(route.pk, {})
        daily = [
            {"day": day, "total": counts.get(day, {}).get("total", 0),
             "refused": counts.get(day, {}).get("refused", 0)}
            for day in days_list
        ]
        peak = max((d["total"] for d in daily), default=0) or 1
        for d in daily:
            d["total_pct"] = round(100 * d["total"] / peak)
            d["refused_pct"] = round(100 * d["refused"] / peak)
        result.append({"route": route, "total": route.total, "refused": route.refused, "daily": daily})
    return result
