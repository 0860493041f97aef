"""Reads from the ledger. Access is decided in console.accounts.permissions, applied here."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.contrib.postgres.search import SearchQueryField, SearchVectorField
from django.db.models import BooleanField, F, Func, Q, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Coalesce
from django.http import Http404
from django.utils import timezone

from console.accounts import permissions
from console.accounts.models import Route
from console.core.errors import Forbidden
from console.core.paging import Keyset
from console.ledger.hooks import decision_filter, decision_filters
from console.ledger.models import Decision, Outcome, Passage, RouteAnswerSettings, RouteDayCount


def answer_settings(route: Route) -> RouteAnswerSettings:
    """The route's answer settings: its row, or an unsaved row of the defaults (short answers,
    all-or-nothing harm) when it has none. Cached on the route instance once read;
    `select_related("answer_settings")` saves the query."""
    try:
        return route.answer_settings
    except RouteAnswerSettings.DoesNotExist:
        return RouteAnswerSettings(route_id=route.pk)


def readable_routes(user) -> QuerySet[Route]:
    return permissions.visible(Route.objects.all(), user, permissions.DECISION_READERS, field="pk")


def stats_routes(user) -> QuerySet[Route]:
    """Routes whose statistics the user may read: every decision reader's routes except a `reader`'s."""
    return permissions.visible(Route.objects.all(), user, permissions.STATS_READERS, field="pk")


def readable_decisions(user) -> QuerySet[Decision]:
    return permissions.visible(Decision.objects.all(), user, permissions.DECISION_READERS)


def get_decision_for_user(
    user,
    *,
    pk: int | None = None,
    route_slug: str | None = None,
    request_id: str | None = None,
    passages: bool = True,
) -> Decision:
    """The decision if the user may read it; Forbidden for graders-only users, else 404.
    `passages=False` leaves its passages unread, for callers that never show them."""
    if not permissions.can_read_decisions(user):
        raise Forbidden("Your role does not allow reading decisions.")
    queryset = readable_decisions(user).select_related("route", "support")
    lookup = {"pk": pk} if pk is not None else {"route__slug": route_slug, "request_id": request_id}
    decision = queryset.filter(**lookup).first()
    if decision is None:
        raise Http404("No such decision.")
    if passages:
        ranked_passages_load([decision])
    return decision


def logged_passages(decision_id: int) -> list[Passage]:
    """The passages one decision logged, in rank order, read with the decision's id array in one
    query (for a reader that has the id alone). Their origins are not read with them (a raw query
    leaves out the manager's join): the grader's page reads the texts alone; a reader of source,
    uri or corpus snapshot calls `prefetch_related_objects(passages, "origin")` first."""
    # The model's columns, not p.*: the table keeps a column the model left (route_id, ledger 0027).
    columns = ", ".join(f"p.{field.column}" for field in Passage._meta.concrete_fields)
    return list(
        Passage.objects.raw(
            f"SELECT {columns} FROM ledger_decision d CROSS JOIN LATERAL unnest(d.passage_ids) WITH ORDINALITY "
            "AS l(id, position) JOIN ledger_passage p ON p.id = l.id WHERE d.id = %s ORDER BY l.position",
            [decision_id],
        )
    )


def ranked_passages_load(decisions: Iterable[Decision]) -> None:
    """Give each decision its `ranked_passages` (in rank order) from one query for all their
    passages (`id = ANY(...)`), where reading each decision's would cost one query per decision."""
    decisions = [d for d in decisions if "ranked_passages" not in d.__dict__]
    wanted = sorted({pk for decision in decisions for pk in decision.passage_ids})
    passages = {p.pk: p for p in Passage.objects.filter(pk__in=wanted)} if wanted else {}
    for decision in decisions:
        decision.ranked_passages = decision.ranked(passages)


def decision_record(decision: Decision) -> dict[str, Any]:
    """A decision as the API gives it: the ledger's own fields, as sent and as stored. The lookup
    (console.review) adds passages and what the other apps know of it; the decisions list gives this
    much, so a page of a thousand costs one query."""
    record = {
        "id": decision.pk,
        "route": decision.route.slug,
        "request_id": decision.request_id,
        "occurred_at": decision.occurred_at.isoformat(),
        "ingested_at": decision.ingested_at.isoformat(),
        "question": decision.question,
        "claim": decision.claim,
        "gate": {"name": decision.gate_name, "score": decision.gate_score, "cutoff": decision.cutoff},
        "outcome": decision.outcome,
        "served_answer": decision.served_answer,
        "versions": decision.versions,
        "segments": decision.segments,
        "content_hash": decision.content_hash,
    }
    # A long answer's fields as sent, and only when sent (a short decision reads as it always did).
    if decision.gate_functional:
        record["gate"]["functional"] = decision.gate_functional
    if decision.claims is not None:
        record["claims"] = decision.claims
    if decision.expected_claims is not None:
        record["expected_claims"] = decision.expected_claims
    return record


def route_decisions(user, filters: DecisionFilters) -> QuerySet[Decision]:
    """The decisions the filters keep among those the user may read, with their route: the
    refusals page's filters, for the decisions list of the API (which pages it newest first)."""
    return filters.apply(readable_decisions(user)).select_related("route")


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
    text: str = ""  # words searched in question and claim (PostgreSQL full text, web-search syntax)
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
            queryset = queryset.filter(occurred_at__gte=start_of_day(self.date_from))
        if self.date_to and self.date_to < date.max:  # nothing is later than the calendar's last day
            queryset = queryset.filter(occurred_at__lt=start_of_day(self.date_to + timedelta(days=1)))
        if self.versions:
            queryset = queryset.filter(versions__contains=self.versions)
        if self.segments:
            queryset = queryset.filter(segments__contains=self.segments)
        if self.no_supporting_passage:
            queryset = queryset.filter(support__no_supporting_passage=True)
        if self.text.strip():
            queryset = queryset.filter(_matches_text(self.text))
        for name in self.extra:
            hook = decision_filter(name)
            if hook is not None:
                queryset = queryset.filter(hook.condition())
        return queryset


class _DecisionText(Func):
    """``to_tsvector('simple', question || ' ' || claim)``: the expression of the GIN index
    decision_text_search_idx (migration 0004), which PostgreSQL uses only for this very
    expression. The 'simple' configuration lowercases without stemming or stop words, so it
    serves any language alike. Built from column references, so it holds in any subquery alias."""

    template = "to_tsvector('simple'::regconfig, %(expressions)s)"
    arg_joiner = " || ' ' || "
    output_field = SearchVectorField()


class _WebSearchQuery(Func):
    template = "websearch_to_tsquery('simple'::regconfig, %(expressions)s)"
    output_field = SearchQueryField()


class _Matches(Func):
    template = "%(expressions)s"
    arg_joiner = " @@ "
    output_field = BooleanField()


def _matches_text(text: str) -> _Matches:
    """Question or claim contain the words (quotes for a phrase, `or`, `-word`), as
    ``websearch_to_tsquery`` reads them."""
    return _Matches(_DecisionText(F("question"), F("claim")), _WebSearchQuery(Value(text)))


def decision_badges(decisions: list[Decision]) -> None:
    """Set ``badges`` (labels of the registered filters that hold) on each decision of a page, from
    the annotations ``decision_list`` added."""
    hooks = [hook for hook in decision_filters() if hook.badge]
    for decision in decisions:
        decision.badges = [hook.label for hook in hooks if getattr(decision, f"badge_{hook.name}", False)]


def start_of_day(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min), timezone=timezone.get_fixed_timezone(0))


@dataclass(frozen=True)
class Sort:
    """An order of the refusals list: a column, a direction, and the id to break ties."""

    field: str
    descending: bool
    label: str


SORTS = {
    "newest": Sort("occurred_at", True, "newest first"),
    "oldest": Sort("occurred_at", False, "oldest first"),
    "score": Sort("gate_score", False, "lowest score first"),
    "-score": Sort("gate_score", True, "highest score first"),
}
DEFAULT_SORT = "newest"


def decision_list(user, filters: DecisionFilters, sort: str = DEFAULT_SORT) -> QuerySet[Decision]:
    order = SORTS.get(sort, SORTS[DEFAULT_SORT])
    prefix = "-" if order.descending else ""
    badges = {f"badge_{hook.name}": hook.condition() for hook in decision_filters() if hook.badge}
    return (
        filters.apply(readable_decisions(user))
        .select_related("route", "support")
        .annotate(**badges)
        .order_by(f"{prefix}{order.field}", f"{prefix}pk")
    )


# The refusals list counts matches up to this many; past it, it says "more than".
COUNT_CAP = 1_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class DecisionPage:
    """One page of the refusals list in its order, and cursors to its neighbours."""

    decisions: list[Decision]
    count: int  # matching decisions, exact up to COUNT_CAP
    more_than_count: bool  # more than COUNT_CAP matched
    newer: str | None  # cursor for the page before this one (newer decisions when newest first)
    older: str | None  # cursor for the page after it
    sort: str = DEFAULT_SORT

    @property
    def newest_first(self) -> bool:
        return self.sort == "newest"


def _capped_count(matches: QuerySet[Decision], filters: DecisionFilters) -> int:
    """How many decisions match, counted up to one past ``COUNT_CAP``.

    A score band's matches are counted in score order. Unordered, the planner counted them through a
    bitmap of every decision in the band, which it must build whole before the first row, however
    few the count needs: at 10,000,000 decisions, 355,000 refusals per month in [0.3, 0.5] and
    130 ms. In score order it walks the score index and stops at the cap (under 1 ms; bench/README.md,
    issue 36 item 4)."""
    banded = filters.score_min is not None or filters.score_max is not None
    matches = matches.order_by("gate_score") if banded else matches.order_by()
    return matches.values("pk")[: COUNT_CAP + 1].count()


def decision_page(
    user, filters: DecisionFilters, *, before: str = "", after: str = "", size: int = 50, sort: str = DEFAULT_SORT
) -> DecisionPage:
    """A page of ``decision_list`` by keyset: ``before`` (the rows after a cursor in the list's
    order; older ones when newest first) or ``after`` (the rows before it), else the first page.
    The cursor holds the sort column's value and the id, so every page costs one index range scan
    however deep it is, where an OFFSET would walk every row before it; the count stops at
    ``COUNT_CAP`` for the same reason. A cursor that does not parse gives the first page."""
    sort = sort if sort in SORTS else DEFAULT_SORT
    order = SORTS[sort]
    count = _capped_count(filters.apply(readable_decisions(user)), filters)
    ordered = decision_list(user, filters, sort)
    following, preceding = _parse_cursor(before, order), _parse_cursor(after, order)
    if preceding is not None:
        rows = list(_beyond(ordered, order, preceding, forward=False).reverse()[: size + 1])
        has_previous, has_next = len(rows) > size, True
        rows = rows[:size][::-1]
    else:
        if following is not None:
            ordered = _beyond(ordered, order, following, forward=True)
        rows = list(ordered[: size + 1])
        has_previous, has_next = following is not None, len(rows) > size
        rows = rows[:size]
    return DecisionPage(
        decisions=rows,
        count=min(count, COUNT_CAP),
        more_than_count=count > COUNT_CAP,
        newer=_cursor_of(rows[0], order) if rows and has_previous else None,
        older=_cursor_of(rows[-1], order) if rows and has_next else None,
        sort=sort,
    )


def _beyond(queryset: QuerySet[Decision], order: Sort, cursor: tuple[Any, int], *, forward: bool) -> QuerySet:
    """Rows strictly after (``forward``) or before the cursor in the list's order, by the API's
    keyset condition (console.core.paging), read in the direction of travel."""
    towards_smaller = "-" if order.descending == forward else ""
    keyset = Keyset("ledger.refusals", f"{towards_smaller}{order.field}", f"{towards_smaller}pk")
    return queryset.filter(keyset.after(list(cursor)))


def _cursor_of(decision: Decision, order: Sort = SORTS[DEFAULT_SORT]) -> str:
    """``<microseconds since 1970 UTC>.<id>`` for dates, ``<score>_<id>`` for scores (the exact
    float, as repr writes it): exact, and safe in a URL."""
    if order.field == "occurred_at":
        return f"{(decision.occurred_at - _EPOCH) // timedelta(microseconds=1)}.{decision.pk}"
    return f"{decision.gate_score!r}_{decision.pk}"


def _parse_cursor(value: str, order: Sort) -> tuple[Any, int] | None:
    try:
        if order.field == "occurred_at":
            micros, pk = value.split(".")
            return _EPOCH + timedelta(microseconds=int(micros)), int(pk)
        score, pk = value.rsplit("_", 1)
        number = float(score)
        return (number, int(pk)) if math.isfinite(number) else None
    except (ValueError, OverflowError):
        return None


def route_decision_total(route_id: int) -> int:
    """Decisions the route holds, from the counters the database keeps (RouteDayCount): a few rows
    per day, where counting the decisions reads an index entry (and, right after a burst of
    ingest, a heap page) per decision."""
    total = RouteDayCount.objects.filter(route_id=route_id).aggregate(total=Sum("decisions"))["total"]
    return total or 0


def route_daily_counts(user, *, days: int = 14) -> list[dict[str, Any]]:
    """Per readable route: decisions and refusals in all and per day over the last `days` days,
    read from the counters the database keeps per route, UTC day and outcome (RouteDayCount)."""
    today = timezone.now().date()
    routes = list(
        readable_routes(user).annotate(
            total=Coalesce(Sum("day_counts__decisions"), 0),
            refused=Coalesce(Sum("day_counts__decisions", filter=Q(day_counts__outcome=Outcome.REFUSED)), 0),
        )
    )
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
            {"day": day, "total": counts.get(day, {}).get("total", 0), "refused": counts.get(day, {}).get("refused", 0)}
            for day in days_list
        ]
        peak = max((d["total"] for d in daily), default=0) or 1
        for d in daily:
            d["total_pct"] = round(100 * d["total"] / peak)
            d["refused_pct"] = round(100 * d["refused"] / peak)
        result.append({"route": route, "total": route.total, "refused": route.refused, "daily": daily})
    return result
