"""Reads behind the statistics: who may see a route, the population as SQL aggregates, and the
graded sample as numpy arrays.

The population is never loaded row by row: the served count at every cutoff comes from the score
bins the ingest triggers keep (console.ledger.models.RouteScoreTotal and RouteScoreCount), with
only a bin that straddles a cutoff counted from its rows through one ``width_bucket`` aggregate
(PostgreSQL compares each score with the sorted cutoffs exactly, so the tie policy
``score >= cutoff`` holds bit for bit). The graded sample comes from the final labels, which carry
a copy of their decision's route, score and time, as triggers keep them packed per route, UTC day and
sample group (grading.LabelSample).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, fields
from datetime import date, datetime, timedelta

import numpy as np
from django.contrib.postgres.aggregates.mixins import OrderableAggMixin
from django.contrib.postgres.fields import ArrayField
from django.db.models import (
    Aggregate,
    BinaryField,
    Count,
    F,
    FloatField,
    Func,
    IntegerField,
    Max,
    Min,
    Q,
    QuerySet,
    Sum,
    Value,
)
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast
from numpy.typing import NDArray

from console.accounts import permissions
from console.accounts.models import Route
from console.analysis.params import Window
from console.core.replica import read_alias, read_connection
from console.ledger.models import Decision, DecisionProfile, RouteScoreCount, RouteScoreTotal
from console.ledger.selectors import start_of_day
from grading.models import FinalLabel, LabelMethod, LabelSample

IMPORTED_STRATUM = "imported"


def route_for_reader(user, slug: str) -> Route:
    """The route if the user may read its decisions: 403 for a user who reads no decisions at
    all (graders), 404 for a route that does not exist or that the user may not see."""
    return permissions.route_for(
        user,
        slug,
        allowed=permissions.can_read_stats,
        refused="Your role does not allow reading decisions or their statistics.",
    )


def data_version(route: Route) -> str:
    """A string that changes whenever the route's decisions or final labels change (one query of
    three index probes).

    Decisions are insert-only. Their part is the newest decision id of the route together with
    the newest audit event about the route: every ingest (and every label import) writes one in
    its transaction, under the audit chain's lock, so its sequence number follows commit order
    and also moves when a batch with lower ids commits after a later one. The labels' part is the
    newest revision among the labels of the route's decisions (their copy of the route, kept by a
    trigger): every insert or update of a label stamps a new one, drawn under the same lock, so it
    too follows commit order (grading migration 0006). Documents stored under one version are
    never served under another (see `console.analysis.reports`).

    Not covered: an in-place edit of a grading item's stratum or inclusion probability (they are
    fixed when the item enters the pool), and a label deleted by hand in SQL (the application never
    deletes one; archiving a month writes an event about the route).
    """
    return _remembered(("version", route.pk, read_alias()), lambda: _data_version(route))


def _data_version(route: Route) -> str:
    with read_connection().cursor() as cursor:
        cursor.execute(
            """
            SELECT (SELECT max(id) FROM ledger_decision WHERE route_id = %s),
                   (SELECT max(seq) FROM audit_auditevent
                     WHERE object_type = 'route' AND object_id IN (%s, %s)),
                   (SELECT max(revision) FROM grading_finallabel WHERE decision_route_id = %s)
            """,
            [route.pk, str(route.pk), route.slug, route.pk],
        )
        newest, audit_seq, label_revision = cursor.fetchone()
    return f"d{newest or 0}.a{audit_seq or 0}.l{label_revision or 0}"


def _decisions(route: Route, window: Window) -> QuerySet[Decision]:
    return window.decision_filters().apply(Decision.objects.filter(route=route))


def population_served_counts(route: Route, window: Window, cutoffs: list[float]) -> tuple[int, list[int]]:
    """Decisions in the window and, per cutoff (in the order given), how many score ``>= cutoff``.

    Read from the score counts the database keeps per route, day, versions, segments and score bin
    (RouteScoreCount): a bin whose scores all lie on one side of every cutoff counts whole; only
    the rows of a bin that straddles a cutoff are counted one by one. Exactly what
    `population_served_counts_from_rows` returns, in time that grows with the bins, not the rows.
    """
    if not _score_counts_answer(window):
        return population_served_counts_from_rows(route, window, cutoffs)
    bins = list(
        _score_counts(route, window)
        .values("score_bin")
        .annotate(n=Sum("decisions"), low=Min("score_low"), high=Max("score_high"))
        .filter(n__gt=0)
        .order_by()
        .values_list("n", "low", "high")
    )
    if not bins:
        return 0, [0 for _ in cutoffs]
    counts, low, high = (np.array(column) for column in zip(*bins, strict=True))
    edges = np.array(sorted(set(cutoffs)), dtype=float)
    # A bin straddles a cutoff when some of its scores lie below it and some at or above it.
    straddles = ((low[:, None] < edges) & (edges <= high[:, None])).any(axis=1)
    whole = ~straddles
    # A whole bin counts as served at an edge when its lowest score is: then every score of it is.
    served = {float(edge): int(counts[whole & (low >= edge)].sum()) for edge in edges}
    if straddles.any():
        in_straddling_bins = Q()
        for bin_low, bin_high in zip(low[straddles].tolist(), high[straddles].tolist(), strict=True):
            in_straddling_bins |= Q(gate_score__gte=bin_low, gate_score__lte=bin_high)
        _, row_counts = _served_counts(_decisions(route, window).filter(in_straddling_bins), edges.tolist())
        for edge, count in zip(edges.tolist(), row_counts, strict=True):
            served[edge] += count
    return int(counts.sum()), [served[cutoff] for cutoff in cutoffs]


def _score_counts_answer(window: Window) -> bool:
    """The score counts hold every field the window filters on: dates (UTC days), versions and
    segments. A window that learns another filter reads the rows until the counts hold it too."""
    return {f.name for f in fields(Window)} == {"date_from", "date_to", "versions", "segments"}


def _score_counts(route: Route, window: Window) -> QuerySet[RouteScoreCount] | QuerySet[RouteScoreTotal]:
    """The score bins of the window: the route's totals when nothing is filtered, else the counts
    per day and profile under the same conditions `DecisionFilters` puts on decisions, on the
    same values (UTC day of occurred_at, JSON containment of versions and segments)."""
    if window == Window():
        return RouteScoreTotal.objects.filter(route=route)
    queryset = RouteScoreCount.objects.filter(route=route)
    if window.date_from:
        queryset = queryset.filter(day__gte=window.date_from)
    if window.date_to:
        queryset = queryset.filter(day__lte=window.date_to)
    if window.versions or window.segments:
        profiles = DecisionProfile.objects.filter(route=route)
        if window.versions:
            profiles = profiles.filter(versions__contains=dict(window.versions))
        if window.segments:
            profiles = profiles.filter(segments__contains=dict(window.segments))
        queryset = queryset.filter(profile__in=profiles.values("pk"))
    return queryset


def population_served_counts_as_of(
    route: Route, window: Window, cutoffs: list[float], as_of: datetime
) -> tuple[int, list[int]]:
    """`population_served_counts` over the decisions ingested at or before ``as_of`` only: a policy's
    frozen evidence. Read from the rows, since the score counts hold every decision ingested so far."""
    return _served_counts(_decisions(route, window).filter(ingested_at__lte=as_of), cutoffs)


def population_served_counts_from_rows(route: Route, window: Window, cutoffs: list[float]) -> tuple[int, list[int]]:
    """`population_served_counts` from the decisions themselves: the reference the score counts
    are tested against, and the way for windows the counts cannot answer."""
    return _served_counts(_decisions(route, window), cutoffs)


def _served_counts(decisions: QuerySet[Decision], cutoffs: list[float]) -> tuple[int, list[int]]:
    """One query: ``width_bucket(gate_score, sorted cutoffs)`` puts a score in bucket ``i`` when
    ``edge[i-1] <= score < edge[i]``; served at ``edge[j]`` is the sum of buckets above ``j``.
    """
    edges = sorted(set(cutoffs))
    if not edges:
        return decisions.count(), []
    bucket = Func(
        F("gate_score"),
        Cast(Value(edges), ArrayField(FloatField())),
        function="width_bucket",
        output_field=IntegerField(),
    )
    counts = np.zeros(len(edges) + 1, dtype=np.int64)
    for index, count in (
        decisions.annotate(bucket=bucket).values("bucket").annotate(n=Count("*")).order_by().values_list("bucket", "n")
    ):
        counts[index] = count
    at_or_above = np.cumsum(counts[::-1])[::-1]  # at_or_above[i]: scores in bucket i or higher
    served = {edge: int(at_or_above[i + 1]) for i, edge in enumerate(edges)}
    return int(counts.sum()), [served[cutoff] for cutoff in cutoffs]


@dataclass(frozen=True)
class GradedSample:
    """Labelled decisions of a window: the arrays the statistics read.

    Blind console grades carry their pool item's stratum and inclusion probability (the route's
    grading plan). Imported labels were not drawn by that plan: they count with inclusion
    probability 1 in a stratum of their own, "imported". The estimate is Hájek-weighted only
    when inclusion probabilities differ; otherwise every labelled decision counts the same
    (census or simple random sample; docs/statistics.md).
    """

    scores: NDArray[np.float64]
    correct: NDArray[np.bool_]
    inclusion_probability: NDArray[np.float64]
    strata: NDArray[np.object_]
    imported: NDArray[np.bool_]
    sources: tuple[str, ...]
    methods: NDArray[np.object_]
    groups: NDArray[np.object_] | None = None
    # Labels per method, when the reader knew them already (packed groups): `label_counts` then
    # need not count 20,000 names.
    method_counts: dict[str, int] | None = None

    @property
    def size(self) -> int:
        return int(self.scores.shape[0])

    @property
    def uniform(self) -> bool:
        """Every labelled decision had the same chance of being graded."""
        p = self.inclusion_probability
        return p.size == 0 or bool(np.all(p == p[0]))

    @property
    def estimator(self) -> str:
        return "proportion" if self.uniform else "hajek"

    def weights_and_strata(self) -> tuple[NDArray[np.float64] | None, NDArray[np.object_] | None]:
        if self.uniform:
            return None, None
        return 1.0 / self.inclusion_probability, self.strata

    def label_counts(self) -> dict[str, object]:
        """Which labels are imported graded sets and which are blind console grades."""
        imported = int(np.count_nonzero(self.imported))
        # A Counter over the few distinct names: numpy's unique first copied every label's name
        # into a fixed-width string array and sorted it.
        by_method = self.method_counts if self.method_counts is not None else Counter(self.methods.tolist())
        return {
            "imported": imported,
            "blind": self.size - imported,
            "imported_sources": list(self.sources),
            "by_method": {str(name): by_method[name] for name in sorted(by_method, key=str)},
        }


_shared: ContextVar[dict | None] = ContextVar("shared_policy_reads", default=None)


@contextmanager
def shared_reads() -> Iterator[None]:
    """Within the block the data version of a route and the graded sample of a window are read
    once: a page shows several documents computed from the same decisions and labels."""
    token = _shared.set({})
    try:
        yield
    finally:
        _shared.reset(token)


def _remembered(key: tuple, read):
    shared = _shared.get()
    if shared is None:
        return read()
    if key not in shared:
        shared[key] = read()
    return shared[key]


def graded_sample(route: Route, window: Window, *, group_by: tuple[str, str] | None = None) -> GradedSample:
    """One query over the labelled decisions of the window (none inside `shared_reads` when the
    same window was read before).

    ``group_by`` (``("segment", "language")``) adds each decision's value of that segment or
    version, as text ("" when the decision has none).
    """
    return _remembered(
        ("graded", route.pk, window, group_by, read_alias()), lambda: _graded_sample(route, window, group_by)
    )


def _graded_sample(route: Route, window: Window, group_by: tuple[str, str] | None) -> GradedSample:
    if group_by is None and _labels_answer(window):
        return _sample_from_labels(route, window)
    return graded_sample_from_decisions(route, window, group_by)


class _Joined(OrderableAggMixin, Aggregate):
    """Byte strings joined in the given order: a sample group's packed days into one."""

    function = "string_agg"
    template = "%(function)s(%(expressions)s, ''::bytea %(order_by)s)"
    output_field = BinaryField()


def _sample_from_labels(route: Route, window: Window) -> GradedSample:
    """The labels grouped by what they share (method, source, stratum, inclusion probability),
    each group's scores and verdicts as two arrays: a handful of rows instead of one per label.

    The labels come packed per UTC day and group (grading.LabelSample, kept by triggers on the
    labels), so the query joins a few byte strings per day of the window; grouping and packing
    the window's labels on every read took four times as long. A group's labels are in day order,
    then label id order: the statistics do not depend on it, but the arrays are the same every read."""
    groups = list(
        _label_samples(route, window)
        .values("method", "source", "item_inclusion_probability", "item_stratum")
        .annotate(scores=_Joined("scores", order_by="day"), correct=_Joined("correct", order_by="day"))
        .order_by("method", "source", "item_inclusion_probability", "item_stratum")
        .values_list("scores", "correct", "method", "source", "item_inclusion_probability", "item_stratum")
    )
    if not groups:
        return _sample_from_rows([], None)
    scores = [np.frombuffer(bytes(group[0]), dtype=">f8") for group in groups]
    sizes = [len(group_scores) for group_scores in scores]
    # `_sample_from_columns` applies its rules (imported labels, missing probabilities) to one row
    # per group, and each group's results are repeated for its labels: the rules run on a handful
    # of values instead of 20,000. Its scores and verdicts are placeholders, replaced below.
    placeholders = [np.zeros(len(groups)), np.zeros(len(groups), dtype=bool)]
    per_group = _sample_from_columns([*placeholders, *([group[k] for group in groups] for k in range(2, 6))], None)
    return GradedSample(
        scores=np.concatenate(scores).astype(float),
        correct=np.concatenate([np.frombuffer(bytes(group[1]), dtype=np.uint8) for group in groups]).astype(bool),
        inclusion_probability=np.repeat(per_group.inclusion_probability, sizes),
        strata=np.repeat(per_group.strata, sizes),
        imported=np.repeat(per_group.imported, sizes),
        sources=per_group.sources,
        methods=np.repeat(per_group.methods, sizes),
        method_counts=_sizes_by(per_group.methods, sizes),
    )


def _sizes_by(names: NDArray[np.object_], sizes: list[int]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name, size in zip(names.tolist(), sizes, strict=True):
        counts[name] = counts.get(name, 0) + size
    return counts


def _label_samples(route: Route, window: Window) -> QuerySet[LabelSample]:
    """The route's packed labels of the window's days (UTC days of the decisions' occurred_at, as
    the score counts are): one range of the unique constraint's index."""
    queryset = LabelSample.objects.filter(route=route)
    if window.date_from:
        queryset = queryset.filter(day__gte=window.date_from)
    if window.date_to:
        queryset = queryset.filter(day__lte=window.date_to)
    return queryset


def _labels_answer(window: Window) -> bool:
    """The packed labels (their decision's route, score and UTC day) answer a window of dates alone."""
    return not window.versions and not window.segments and _score_counts_answer(window)


def graded_sample_from_decisions(route: Route, window: Window, group_by: tuple[str, str] | None) -> GradedSample:
    """`graded_sample` read through the window's decisions: the reference the labels' copies are
    tested against, and the way for version and segment filters and for ``group_by``."""
    columns = [
        "gate_score",
        "final_label__correct",
        "final_label__method",
        "final_label__source",
        "final_label__item__inclusion_probability",
        "final_label__item__stratum",
    ]
    queryset = _decisions(route, window).filter(pk__in=FinalLabel.objects.values("decision_id"))
    if group_by:
        field = "segments" if group_by[0] == "segment" else "versions"
        queryset = queryset.annotate(group=KeyTextTransform(group_by[1], field))
        columns.append("group")
    return _sample_from_rows(list(queryset.values_list(*columns)), group_by)


def labelled_as_of(route: Route, window: Window, as_of: datetime) -> QuerySet[Decision]:
    """The window's decisions ingested at or before ``as_of`` whose final label was recorded by then.

    A join on the label (one per decision), not ``pk IN (labels ...)``: on tables the planner has
    no statistics for yet (fresh after a load, or written in the same transaction) the IN became a
    nested loop that read every label once per decision, minutes on a few thousand rows."""
    return _decisions(route, window).filter(ingested_at__lte=as_of, final_label__decided_at__lte=as_of)


def graded_sample_as_of(route: Route, window: Window, as_of: datetime) -> GradedSample:
    """`graded_sample` as it stood at ``as_of``: decisions ingested and labels recorded by then, in
    decision id order, so the same instant always gives the same arrays (and sums, bit for bit). A
    label rewritten after ``as_of`` is read as it is now: the table keeps no earlier value."""
    columns = [
        "gate_score",
        "final_label__correct",
        "final_label__method",
        "final_label__source",
        "final_label__item__inclusion_probability",
        "final_label__item__stratum",
    ]
    return _sample_from_rows(list(labelled_as_of(route, window, as_of).order_by("pk").values_list(*columns)), None)


def _sample_from_rows(rows: list[tuple], group_by: tuple[str, str] | None) -> GradedSample:
    if not rows:
        return _sample_from_columns(None, group_by)
    return _sample_from_columns(list(zip(*rows, strict=True)), group_by)


def _sample_from_columns(columns: list | None, group_by: tuple[str, str] | None) -> GradedSample:
    """The sample from its columns: score, correct, method, source, inclusion probability,
    stratum (and the group's value with ``group_by``); None for no labels."""
    if columns is None:
        empty = np.array([], dtype=object)
        return GradedSample(
            np.array([], dtype=float),
            np.array([], dtype=bool),
            np.array([], dtype=float),
            empty,
            np.array([], dtype=bool),
            (),
            empty,
            empty if group_by else None,
        )
    methods, sources, probability, strata = (np.asarray(columns[k], dtype=object) for k in range(2, 6))
    imported = methods == LabelMethod.IMPORTED
    # An imported set was not drawn by the route's grading plan, even when its decisions also
    # hold a pool item: its labels carry no inclusion probability of their own.
    probability = np.where(imported | np.equal(probability, None), 1.0, probability).astype(float)
    strata = np.where(imported | np.equal(strata, None), IMPORTED_STRATUM, strata)
    sources = tuple(sorted(set(sources[imported & (sources != "")].tolist())))
    groups = np.array(["" if g is None else g for g in columns[6]], dtype=object) if group_by else None
    return GradedSample(
        scores=np.array(columns[0], dtype=float),
        correct=np.array(columns[1], dtype=bool),
        inclusion_probability=probability,
        strata=strata,
        imported=imported,
        sources=sources,
        methods=methods,
        groups=groups,
    )


@dataclass(frozen=True)
class LongGradedSample:
    """The graded sample of a long route: labels that carry claim counts, with those counts and the
    decisions' target claim counts aligned with ``sample`` (docs/statistics.md, "Long answers")."""

    sample: GradedSample
    claims_supported: NDArray[np.float64]
    claims_verifiable: NDArray[np.float64]
    expected_claims: NDArray[np.float64]
    """K per answer: the decision's, else the route's; NaN when neither is known."""


_LONG_COLUMNS = [
    "gate_score",
    "final_label__correct",
    "final_label__method",
    "final_label__source",
    "final_label__item__inclusion_probability",
    "final_label__item__stratum",
    "final_label__claims_supported",
    "final_label__claims_verifiable",
    "expected_claims",
]


def long_graded_sample(
    route: Route, window: Window, *, route_expected_claims: int | None = None, as_of: datetime | None = None
) -> LongGradedSample:
    """The window's labelled decisions whose final label has claim counts, in decision id order
    (one query); with ``as_of``, those ingested and labelled by then. A label of the route's short
    days (no counts) has no support fraction and is left out."""

    def read() -> LongGradedSample:
        if as_of is None and _labels_answer(window):
            return _long_sample_from_labels(route, window, route_expected_claims)
        return long_graded_sample_from_decisions(route, window, route_expected_claims, as_of=as_of)

    if as_of is not None:
        return read()
    return _remembered(("long", route.pk, window, route_expected_claims, read_alias()), read)


def long_graded_sample_from_decisions(
    route: Route, window: Window, route_expected_claims: int | None, *, as_of: datetime | None = None
) -> LongGradedSample:
    """`long_graded_sample` read through the window's decisions: the reference the labels' copies
    are tested against, and the way for version and segment filters and for ``as_of``."""
    if as_of is None:
        queryset = _decisions(route, window).filter(final_label__claims_verifiable__isnull=False)
    else:
        queryset = labelled_as_of(route, window, as_of).filter(final_label__claims_verifiable__isnull=False)
    rows = list(queryset.order_by("pk").values_list(*_LONG_COLUMNS))
    columns = list(zip(*rows, strict=True)) if rows else None
    sample = _sample_from_columns(columns[:6] if columns else None, None)
    if columns is None:
        empty = np.array([], dtype=float)
        return LongGradedSample(sample, empty, empty, empty)
    fallback = np.nan if route_expected_claims is None else float(route_expected_claims)
    return LongGradedSample(
        sample=sample,
        claims_supported=np.array(columns[6], dtype=float),
        claims_verifiable=np.array(columns[7], dtype=float),
        expected_claims=np.array([fallback if k is None else float(k) for k in columns[8]], dtype=float),
    )


# One group's labels (method, source and the pool's stratum and probability), each column packed;
# NaN for a missing score and -1 for a missing K. One aggregation feeds every column the same rows in
# the same order, so no column is sorted: the reader orders them all by the packed decision ids.
_LONG_PACKED = """
SELECT method, source, item_inclusion_probability, item_stratum,
       string_agg(int8send(decision_id), ''::bytea),
       string_agg(float8send(coalesce(decision_score, 'NaN'::float8)), ''::bytea),
       string_agg(boolsend(correct), ''::bytea),
       string_agg(int4send(claims_supported::int4), ''::bytea),
       string_agg(int4send(claims_verifiable::int4), ''::bytea),
       string_agg(int4send(coalesce(decision_expected_claims, -1)::int4), ''::bytea)
  FROM grading_finallabel
 WHERE decision_route_id = %s AND claims_verifiable IS NOT NULL {dates}
 GROUP BY method, source, item_inclusion_probability, item_stratum
"""


def _long_sample_from_labels(route: Route, window: Window, route_expected_claims: int | None) -> LongGradedSample:
    """`long_graded_sample` read from the labels' copies of their decision's route, score, time and
    K (kept by triggers): a handful of packed rows from one table, where the three-table join over
    the month partitions took 150 ms for 20,000 answers. The same arrays, in decision id order."""
    # The window's days as the decisions' filters read them (UTC days of occurred_at).
    dates, params = "", [route.pk]
    if window.date_from:
        dates += " AND decision_occurred_at >= %s"
        params.append(start_of_day(window.date_from))
    if window.date_to and window.date_to < date.max:
        dates += " AND decision_occurred_at < %s"
        params.append(start_of_day(window.date_to + timedelta(days=1)))
    with read_connection().cursor() as cursor:
        cursor.execute(_LONG_PACKED.format(dates=dates), params)
        groups = cursor.fetchall()
    if not groups:
        empty = np.array([], dtype=float)
        return LongGradedSample(_sample_from_columns(None, None), empty, empty, empty)

    def unpacked(column: int, dtype: str) -> NDArray:
        return np.concatenate([np.frombuffer(bytes(group[column]), dtype=dtype) for group in groups])

    ids = unpacked(4, ">i8")
    sizes = [len(group[4]) // 8 for group in groups]
    # The group's rules (imported labels, missing probabilities) run once per group, as for the
    # short route's packed labels; its scores and verdicts are placeholders.
    placeholders = [np.zeros(len(groups)), np.zeros(len(groups), dtype=bool)]
    per_group = _sample_from_columns([*placeholders, *([group[k] for group in groups] for k in range(4))], None)
    order = np.argsort(ids, kind="stable")
    methods = np.repeat(per_group.methods, sizes)[order]
    sample = GradedSample(
        scores=unpacked(5, ">f8").astype(float)[order],
        correct=unpacked(6, np.uint8).astype(bool)[order],
        inclusion_probability=np.repeat(per_group.inclusion_probability, sizes)[order],
        strata=np.repeat(per_group.strata, sizes)[order],
        imported=np.repeat(per_group.imported, sizes)[order],
        sources=per_group.sources,
        methods=methods,
        method_counts=_sizes_by(per_group.methods, sizes),
    )
    expected = unpacked(9, ">i4").astype(float)[order]
    fallback = np.nan if route_expected_claims is None else float(route_expected_claims)
    return LongGradedSample(
        sample=sample,
        claims_supported=unpacked(7, ">i4").astype(float)[order],
        claims_verifiable=unpacked(8, ">i4").astype(float)[order],
        expected_claims=np.where(expected < 0, fallback, expected),
    )


@dataclass(frozen=True)
class GradedScope:
    """What the graded decisions of a window cover, for statements: dates and versions seen."""

    first_day: date | None
    last_day: date | None
    versions: dict[str, list[str]]


def graded_scope(route: Route, window: Window, *, as_of: datetime | None = None) -> GradedScope:
    """Dates and distinct versions among the window's labelled decisions (two small queries); with
    ``as_of``, among those ingested and labelled by then."""
    if as_of is None:
        queryset = _decisions(route, window).filter(pk__in=FinalLabel.objects.values("decision_id"))
    else:
        queryset = labelled_as_of(route, window, as_of)
    span = queryset.aggregate(first=Min("occurred_at"), last=Max("occurred_at"))
    seen: dict[str, set[str]] = {}
    for versions in queryset.order_by().values_list("versions", flat=True).distinct():
        for key, value in (versions or {}).items():
            seen.setdefault(key, set()).add(str(value))
    return GradedScope(
        first_day=span["first"].date() if span["first"] else None,
        last_day=span["last"].date() if span["last"] else None,
        versions={key: sorted(values) for key, values in sorted(seen.items())},
    )
