"""Reads of monitoring: the recheck comparison and diagnosis, alarms, stale evidence and route health."""

from __future__ import annotations

import json
from datetime import date, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, Max, Min, Q, QuerySet, Sum
from django.utils import timezone

from console.accounts import permissions
from console.accounts.models import Route
from console.analysis.params import OperatingPointsQuery, Window
from console.analysis.reports import operating_points_report
from console.analysis.selectors import population_served_counts
from console.core.errors import NotFound
from console.core.replica import replica_reads
from console.governance.models import IN_FORCE, PolicyVersion
from console.governance.selectors import decisions_not_following_policy
from console.ledger.hooks import route_figures
from console.ledger.models import Decision, RouteScoreCount
from console.monitoring.models import (
    SCORE_BINS,
    Alarm,
    AlarmKind,
    AlarmStatus,
    DailyAggregate,
    Recheck,
    RecheckStatus,
    RouteMonitoring,
)
from console.monitoring.services.aggregates import CUTOFF_TOLERANCE
from console.stats.drift import total_variation_distance
from console.stats.intervals import Interval, proportion_interval
from console.stats.recheck import (
    RateComparison,
    compare_intervals,
    compare_rates,
    decompose_rate_change,
    diagnose_recheck,
)

STALE_SEGMENT_TV = 0.15
CURRENT_TRAFFIC_DAYS = 7


# --------------------------------------------------------------------------- access


def route_for_monitoring_reader(user, slug: str) -> Route:
    # Every role that reads a route's monitoring reads its decisions, so a route the user may not
    # read is a 404 like any other refusal.
    return permissions.route_for(user, slug, allowed=permissions.can_read_monitoring)


def get_recheck_for_user(user, pk: int) -> Recheck:
    recheck = Recheck.objects.select_related("route", "policy", "policy__owner", "closed_by").filter(pk=pk).first()
    if recheck is None or not permissions.can_read_monitoring(user, recheck.route):
        raise NotFound("No such recheck.")
    return recheck


def get_alarm_for_user(user, pk: int) -> Alarm:
    alarm = Alarm.objects.select_related("route", "policy", "acknowledged_by").filter(pk=pk).first()
    if alarm is None or not permissions.can_read_monitoring(user, alarm.route):
        raise NotFound("No such alarm.")
    return alarm


def policy_in_force(route: Route) -> PolicyVersion | None:
    return PolicyVersion.objects.filter(route=route, status__in=IN_FORCE).select_related("owner", "route").first()


# --------------------------------------------------------------------------- recheck comparison


def _window_decisions(policy: PolicyVersion) -> QuerySet[Decision]:
    """The decisions the signed evidence was computed on: its window, up to the signature, and in the
    ledger by then (a decision logged later with an earlier date was not read)."""
    filters = policy.filters or {}
    decisions = Decision.objects.filter(
        route_id=policy.route_id, occurred_at__lte=policy.signed_at, ingested_at__lte=policy.signed_at
    )
    if filters.get("from"):
        decisions = decisions.filter(occurred_at__date__gte=filters["from"])
    if filters.get("to"):
        decisions = decisions.filter(occurred_at__date__lte=filters["to"])
    for key, value in (filters.get("versions") or {}).items():
        decisions = decisions.filter(versions__contains={key: value})
    for key, value in (filters.get("segments") or {}).items():
        decisions = decisions.filter(segments__contains={key: value})
    return decisions


def _counts(decisions: QuerySet[Decision], cutoff: float) -> dict[str, int]:
    """Census counts at the cutoff: decisions, refusals, and refusals with no supporting passage
    among those whose span check ran."""
    below = Q(gate_score__lt=cutoff)
    return decisions.aggregate(
        n=Count("pk"),
        refused=Count("pk", filter=below),
        no_support=Count("pk", filter=below & Q(support__no_supporting_passage=True)),
        checked_refused=Count("pk", filter=below & Q(support__isnull=False)),
    )


def _segment_counts(decisions: QuerySet[Decision], cutoff: float) -> dict[str, tuple[int, int]]:
    rows = decisions.values("segments").annotate(n=Count("pk"), refused=Count("pk", filter=Q(gate_score__lt=cutoff)))
    out: dict[str, tuple[int, int]] = {}
    for row in rows.order_by():
        label = segment_label(row["segments"])
        refused, n = out.get(label, (0, 0))
        out[label] = (refused + row["refused"], n + row["n"])
    return out


def _comparison(c: RateComparison | None) -> dict[str, Any] | None:
    if c is None:
        return None
    return {"before": c.before.as_dict(), "after": c.after.as_dict(), "difference": c.difference.as_dict()}


def _interval(figure: dict[str, Any] | None) -> Interval | None:
    """An interval of an operating-point row (``{"value", "low", "high"}``), None when absent."""
    if not figure or figure.get("value") is None or figure.get("low") is None or figure.get("high") is None:
        return None
    return Interval(figure["value"], figure["low"], figure["high"])


def _wrong_served_share(row: dict[str, Any]) -> Interval | None:
    """The share wrong among graded served items, read back from the row's wrong-served-per-1000,
    which is that share (and its interval) times the exact ``1000 S/N``."""
    per_1000 = _interval(row.get("wrong_served_per_1000"))
    if per_1000 is None or not row.get("served") or not row.get("graded_served"):
        return None
    return per_1000.scaled((row["refused"] + row["served"]) / (1000.0 * row["served"]))


def _operating_row(route: Route, window: Window, cutoff: float, *, confidence: float, interval: str):
    """The operating-point row at ``cutoff`` as the table computes it: census abstention, and the
    graded shares Hájek-weighted when the sample's inclusion probabilities differ."""
    query = OperatingPointsQuery(window=window, cutoffs=(cutoff,), confidence=confidence, interval=interval)
    rows = operating_points_report(route, query).data.get("rows") or []
    return next((row for row in rows if row["cutoff"] is not None), None)


@replica_reads()
def recheck_report(recheck: Recheck) -> dict[str, Any]:
    """Signed evidence against the new versions at the signed cutoff: abstention (census), false
    abstention and wrong served (graded so far), no-support share, each with Newcombe's difference
    interval; the per-segment decomposition; the sample's progress; the diagnosis.

    The "before" figures of abstention, false abstention and wrong served are the signed evidence's
    row at the cutoff, as signed (Hájek-weighted when its graded sample was stratified); the "after"
    figures are the same row computed on the new versions' traffic, with the evidence's confidence
    and interval method. The no-support share and the segment decomposition are census counts of
    the signing window's decisions, which the evidence does not record."""
    policy, cutoff = recheck.policy, recheck.policy.cutoff
    evidence = policy.evidence_document
    confidence = evidence.get("confidence") or policy.confidence
    method = evidence.get("interval") or policy.interval
    before_set = _window_decisions(policy)
    after_set = Decision.objects.filter(route_id=recheck.route_id, versions__contains=recheck.versions)
    before, after = _counts(before_set, cutoff), _counts(after_set, cutoff)
    signed_row = evidence.get("chosen_row") or {}
    if signed_row:
        before |= {"n": signed_row["refused"] + signed_row["served"], "refused": signed_row["refused"]}
    new_window = Window(versions=tuple(sorted(recheck.versions.items())))
    new_row = _operating_row(recheck.route, new_window, cutoff, confidence=confidence, interval=method) or {}
    for counts, row in ((before, signed_row), (after, new_row)):
        counts |= {"graded_refused": row.get("graded_refused", 0), "graded_served": row.get("graded_served", 0)}

    abstention = None
    if before["n"] and after["n"]:
        signed_abstention = _interval(signed_row.get("abstention_rate")) or proportion_interval(
            before["refused"], before["n"], confidence=confidence, method=method
        )
        abstention = compare_intervals(
            signed_abstention,
            proportion_interval(after["refused"], after["n"], confidence=confidence, method=method),
        )
    far = _both(_interval(signed_row.get("false_abstention_rate")), _interval(new_row.get("false_abstention_rate")))
    wrong = _both(_wrong_served_share(signed_row), _wrong_served_share(new_row))
    no_support = (
        compare_rates(before["no_support"], before["checked_refused"], after["no_support"], after["checked_refused"])
        if before["checked_refused"] and after["checked_refused"]
        else None
    )
    contributions = []
    if abstention is not None:
        contributions = decompose_rate_change(_segment_counts(before_set, cutoff), _segment_counts(after_set, cutoff))
        diagnosis = diagnose_recheck(
            abstention=abstention, false_abstention=far, no_support=no_support, contributions=contributions
        ).as_dict()
    else:
        diagnosis = {"pattern": "none", "text": "No decisions on one side yet: nothing to compare."}
    bands = (recheck.plan or {}).get("bands", [])
    graded_by_measure = {"false_abstention": after["graded_refused"], "wrong_served": after["graded_served"]}
    progress = [
        {
            "low": band["low"],
            "high": band["high"],
            "target": band["target"],
            "measures": band["measures"],
            "graded": graded_by_measure.get(band["measures"], 0),
        }
        for band in bands
    ]
    return {
        "cutoff": cutoff,
        "confidence": confidence,
        "interval": method,
        "before": before,
        "after": after,
        "abstention": _comparison(abstention),
        "false_abstention": _comparison(far),
        "wrong_served": _comparison(wrong),
        "no_support": _comparison(no_support),
        "segments": [
            {
                "segment": c.segment,
                "share_before": c.share_before,
                "share_after": c.share_after,
                "rate_before": c.rate_before,
                "rate_after": c.rate_after,
                "mix_effect": c.mix_effect,
                "rate_effect": c.rate_effect,
                "total": c.total,
            }
            for c in contributions[:10]
        ],
        "progress": progress,
        "diagnosis": diagnosis,
    }


def _both(before: Interval | None, after: Interval | None) -> RateComparison | None:
    return compare_intervals(before, after) if before is not None and after is not None else None


def recheck_as_dict(recheck: Recheck, *, report: dict[str, Any] | None = None) -> dict[str, Any]:
    report = report if report is not None else recheck_report(recheck)
    return {
        "id": recheck.pk,
        "route": recheck.route.slug,
        "policy": {"id": recheck.policy_id, "version": recheck.policy.version},
        "status": recheck.status,
        "versions": recheck.versions,
        "opened_at": recheck.opened_at.isoformat(),
        "closed_at": recheck.closed_at.isoformat() if recheck.closed_at else None,
        "resolution": recheck.resolution or None,
        "note": recheck.note,
        "new_policy": recheck.new_policy_id,
        "plan": recheck.plan,
        "diagnosis": report["diagnosis"],
        "comparison": report,
    }


def route_rechecks(route: Route) -> QuerySet[Recheck]:
    return Recheck.objects.filter(route=route).select_related("route", "policy", "policy__owner")


# --------------------------------------------------------------------------- alarms


def route_alarms(route: Route) -> QuerySet[Alarm]:
    return Alarm.objects.filter(route=route).select_related("route", "acknowledged_by")


def alarm_as_dict(alarm: Alarm) -> dict[str, Any]:
    return {
        "id": alarm.pk,
        "route": alarm.route.slug,
        "kind": alarm.kind,
        "status": alarm.status,
        "opened_at": alarm.opened_at.isoformat(),
        "first_day": alarm.first_day.isoformat(),
        "last_flagged_day": alarm.last_flagged_day.isoformat(),
        "through_day": alarm.through_day.isoformat(),
        "detail": alarm.detail,
        "closed_at": alarm.closed_at.isoformat() if alarm.closed_at else None,
        "closed_reason": alarm.closed_reason or None,
        "note": alarm.note,
        "acknowledged_by": alarm.acknowledged_by.get_username() if alarm.acknowledged_by else None,
    }


# The figures of an alarm (its `detail`, the monitor's reading of the latest day outside limits), in
# the order they are shown, with their labels and how each is written. A figure not named here is
# shown under its key with its value as text.
_FIGURES: dict[str, tuple[str, str]] = {
    "day": ("Day", "text"),
    "n": ("Decisions", "count"),
    "refused": ("Refused at the cutoff", "count"),
    "rate": ("Abstention rate", "share"),
    "share": ("Refusals with no supporting passage", "share"),
    "baseline": ("Signing window", "share"),
    "lower": ("Lower limit", "share"),
    "upper": ("Upper limit", "share"),
    "cusum_signal": ("CUSUM above its limit and rising", "yes_no"),
    "psi": ("Population stability index", "number"),
    "ks_statistic": ("Kolmogorov-Smirnov statistic", "number"),
    "ks_p_value": ("Kolmogorov-Smirnov p-value", "p_value"),
    "total_variation": ("Total variation of the segment mix", "number"),
    "chi2_p_value": ("Chi-square p-value", "p_value"),
}


def _figure_text(value: Any, style: str) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool) or style == "yes_no":
        return "yes" if value else "no"
    if isinstance(value, int | float) and style != "text":
        if style == "count":
            return f"{value:,.0f}"
        if style == "share":
            return f"{value:.3f}"
        if style == "p_value":
            return f"{value:.2g}" if value < 0.001 else f"{value:.3f}"
        return f"{value:.3g}"
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True)
    return str(value)


def alarm_figures(alarm: Alarm) -> list[dict[str, str]]:
    """The alarm's figures as labelled values (`{"label", "value"}`), for its page row and its notice."""
    detail = alarm.detail or {}
    keys = [key for key in _FIGURES if key in detail] + sorted(key for key in detail if key not in _FIGURES)
    figures = []
    for key in keys:
        label, style = _FIGURES.get(key, (key.replace("_", " ").capitalize(), "number"))
        if key == "baseline" and alarm.kind == AlarmKind.NO_SUPPORT:
            label = "Signing window share"
        elif key == "baseline":
            label = "Signing window rate"
        figures.append({"label": label, "value": _figure_text(detail[key], style)})
    return figures


CLOSED_REASONS = {
    "inside_limits": "back inside its limits",
    "acknowledged": "acknowledged",
    "superseded": "its policy version was superseded",
}


def alarm_closed_reason_text(alarm: Alarm) -> str:
    return CLOSED_REASONS.get(alarm.closed_reason, alarm.closed_reason.replace("_", " "))


def alarm_figures_text(alarm: Alarm) -> str:
    return "; ".join(f"{f['label']}: {f['value']}" for f in alarm_figures(alarm))


# --------------------------------------------------------------------------- live figures


def daily_reading_exists(policy: PolicyVersion) -> bool:
    """Whether the daily monitor has read the route since this version was signed: its aggregates
    are then counted at the signed cutoff. Until it has, the monitoring page reads the counters."""
    return DailyAggregate.objects.filter(
        route_id=policy.route_id,
        computed_at__gte=policy.signed_at,
        cutoff__gte=policy.cutoff - CUTOFF_TOLERANCE,
        cutoff__lte=policy.cutoff + CUTOFF_TOLERANCE,
    ).exists()


def _live_row(route: Route, cutoff: float, day: date, first: date | None, last: date, bins) -> DailyAggregate:
    histogram = [0] * SCORE_BINS
    for score_bin, n in bins:
        histogram[min(max(score_bin, 0), SCORE_BINS - 1)] += n
    n, [served] = population_served_counts(route, Window(date_from=first, date_to=last), [cutoff])
    return DailyAggregate(
        route=route, day=day, n=n, cutoff=cutoff, refused_at_cutoff=n - served, histogram=histogram, segments={}
    )


@replica_reads()
def live_aggregates(
    route: Route, cutoff: float, *, window: tuple[date | None, date], today: date
) -> tuple[DailyAggregate | None, list[DailyAggregate]]:
    """Stand-ins for the daily aggregates, read from the counters the ledger keeps per route, UTC day
    and score bin (RouteScoreCount), for the monitoring page before the daily monitor's first reading
    of a newly signed version: the signing window as one row (dated its last day), and one row per
    day with decisions from the day after the window, or from 7 days ago if that is earlier, to
    today. Decisions and refusals at the cutoff are exact (`population_served_counts`, the
    operating points' own count); histograms have the monitor's 0.001 bins. Segment mixes and
    refusals without a supporting passage are left to the daily monitor (empty here), and decisions
    logged after the signature count in the window's days, which the monitor leaves out.
    Unsaved rows: a page never writes them."""
    start, end = window
    first = min(end + timedelta(days=1), today - timedelta(days=CURRENT_TRAFFIC_DAYS - 1))
    counts = RouteScoreCount.objects.filter(route=route)
    in_window = counts.filter(day__lte=end) if start is None else counts.filter(day__gte=start, day__lte=end)
    window_bins = list(
        in_window.values("score_bin").annotate(n=Sum("decisions")).order_by().values_list("score_bin", "n")
    )
    by_day: dict[date, list[tuple[int, int]]] = {}
    recent = counts.filter(day__gte=first, day__lte=today).values("day", "score_bin")
    recent = recent.annotate(n=Sum("decisions")).order_by()
    for day, score_bin, n in recent.values_list("day", "score_bin", "n"):
        if n:
            by_day.setdefault(day, []).append((score_bin, n))
    window_row = _live_row(route, cutoff, end, start, end, window_bins) if window_bins else None
    days = [_live_row(route, cutoff, day, day, day, bins) for day, bins in sorted(by_day.items())]
    return window_row, [row for row in days if row.n]


# --------------------------------------------------------------------------- stale evidence


def label_age_limit_days(route_id: int) -> int:
    """Days after which the evidence's newest label makes it stale: the route's setting, else the default."""
    limit = (
        RouteMonitoring.objects.filter(route_id=route_id).values_list("evidence_max_label_age_days", flat=True).first()
    )
    return limit if limit is not None else settings.EVIDENCE_MAX_LABEL_AGE_DAYS


def evidence_staleness(policy: PolicyVersion, *, today: date | None = None) -> dict[str, Any]:
    """Stale when the evidence's newest label is older than the route's limit, or when the graded
    sample's segment mix differs from current traffic (the last 7 days) by more than 0.15 total
    variation."""
    today = today or timezone.now().date()
    max_age = label_age_limit_days(policy.route_id)
    reasons = []
    graded = _window_decisions(policy).filter(final_label__isnull=False)
    ages = graded.aggregate(oldest=Min("final_label__decided_at"), newest=Max("final_label__decided_at"))
    if ages["newest"] is not None and (today - ages["newest"].date()).days > max_age:
        reasons.append(
            f"the newest label of the evidence is {(today - ages['newest'].date()).days} days old (limit {max_age})"
        )
    since = today - timedelta(days=CURRENT_TRAFFIC_DAYS)
    recent = DailyAggregate.objects.filter(route_id=policy.route_id, day__gt=since)
    traffic_mix: dict[str, float] = {}
    for segments in recent.values_list("segments", flat=True):
        for key, count in segments.items():
            label = segment_label(json.loads(key))
            traffic_mix[label] = traffic_mix.get(label, 0) + count
    graded_mix: dict[str, float] = {}
    for row in graded.values("segments").annotate(n=Count("pk")).order_by():
        label = segment_label(row["segments"])
        graded_mix[label] = graded_mix.get(label, 0) + row["n"]
    tv = total_variation_distance(graded_mix, traffic_mix) if graded_mix and traffic_mix else None
    if tv is not None and tv > STALE_SEGMENT_TV:
        reasons.append(
            f"the graded sample's segment mix differs from the last {CURRENT_TRAFFIC_DAYS} days of "
            f"traffic by {tv:.2f} total variation (limit {STALE_SEGMENT_TV})"
        )
    return {
        "stale": bool(reasons),
        "reasons": reasons,
        "segment_tv": tv,
        "newest_label": ages["newest"].isoformat() if ages["newest"] else None,
        "max_label_age_days": max_age,
    }


def segment_label(segments: dict[str, Any] | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted((segments or {}).items())) or "(no segment)"


# --------------------------------------------------------------------------- route health


def _rate(refused: int, n: int) -> dict[str, Any]:
    interval = proportion_interval(refused, n) if n else None
    return {
        "refused": refused,
        "n": n,
        "value": interval.value if interval else None,
        "low": interval.low if interval else None,
        "high": interval.high if interval else None,
    }


@replica_reads()
def route_health(route: Route, *, user=None, now=None) -> dict[str, Any]:
    """The figures of the dashboard and of GET /routes/{slug}/health, straight from the decisions
    (today and the last 7 days are small windows on the (route, occurred_at) index). With a `user`,
    also the figures upper apps register for what that user may see (disputes open and overdue)."""
    from console.shadow.models import ShadowRun, ShadowStatus
    from grading.models import FinalLabel, GradingItem, ItemStatus

    now = now or timezone.now()
    today = now.date()
    policy = policy_in_force(route)
    health: dict[str, Any] = {"route": route.slug, "policy": None}
    week_start = today - timedelta(days=6)
    health["grading_backlog"] = GradingItem.objects.filter(
        route=route, status__in=[ItemStatus.OPEN, ItemStatus.ADJUDICATION]
    ).count()
    # The label's trigger-kept copy of its decision's route: no join to the decisions (200 ms at
    # 10,000,000 of them, on the dashboard of every route).
    health["labels_last_7_days"] = FinalLabel.objects.filter(
        decision_route=route, decided_at__date__gte=week_start
    ).count()
    health["shadow_runs_failed"] = ShadowRun.objects.filter(decision__route=route, status=ShadowStatus.FAILED).count()
    health["decisions_not_following_policy"] = decisions_not_following_policy([route.pk]).get(route.pk, 0)
    health["rechecks_open"] = Recheck.objects.filter(route=route, status=RecheckStatus.OPEN).count()
    health["alarms_open"] = [
        {"id": a.pk, "kind": a.kind, "first_day": a.first_day.isoformat()}
        for a in Alarm.objects.filter(route=route, status=AlarmStatus.OPEN)
    ]
    if user is not None:
        health.update(route_figures(user, [route]).get(route.pk, {}))
    if policy is None:
        return health
    evidence = policy.evidence_document
    row = evidence.get("chosen_row") or {}
    cutoff = policy.cutoff
    recent = Decision.objects.filter(route=route, occurred_at__date__gte=week_start, occurred_at__date__lte=today)
    counts = recent.aggregate(
        n_today=Count("pk", filter=Q(occurred_at__date=today)),
        refused_today=Count("pk", filter=Q(occurred_at__date=today, gate_score__lt=cutoff)),
        n_week=Count("pk"),
        refused_week=Count("pk", filter=Q(gate_score__lt=cutoff)),
    )
    health["policy"] = {
        "id": policy.pk,
        "version": policy.version,
        "cutoff": cutoff,
        "status": policy.status,
        "owner": policy.owner.get_username(),
        "since": policy.signed_at.isoformat(),
    }
    health["abstention"] = {
        "signed": row.get("abstention_rate"),
        "today": _rate(counts["refused_today"], counts["n_today"]),
        "last_7_days": _rate(counts["refused_week"], counts["n_week"]),
    }
    health["false_abstention"] = row.get("false_abstention_rate")
    health["evidence"] = evidence_staleness(policy, today=today)
    return health
