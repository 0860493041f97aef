"""The daily drift monitor and its alarms.

Per route with a policy in force, the days after signing are compared with the signing window
(the evidence's date window, up to the signature; see `signing_window`), all at the signed
cutoff, from the stored daily aggregates. A day is *outside* for a kind when:

- abstention: the day's refusal rate at the signed cutoff is outside the 3-sigma binomial limits
  around the window's rate (p-chart), or the two-sided binomial CUSUM (p1 = 1.5 p0 up, p0 / 1.5
  down, h = ln 1000) is above its decision interval and rose that day (docs/statistics.md,
  "Monitoring"): once the day's own count points back to p0 the day is inside, even while the
  slowly falling statistic is still above h;
- scores: PSI over ten bins >= 0.25 (a major shift) and the two-sample KS p-value < 0.01, the day
  against the window;
- segment_mix: total variation of the segment mix against the window > 0.15 and Pearson's
  chi-square test of one mix p < 0.01 (a day of few decisions moves its mix by chance);
- no_support: the share of refusals with no supporting passage outside its 3-sigma limits around
  the window's share (floored at 1 / (window refusals + 1), so a window without any does not turn
  every later one into an alarm).

An alarm opens on the first outside day after the last alarm of its kind closed, at most one open
per route and kind; it closes by itself once the 3 latest days with traffic after its last outside
day are all inside, or when an owner or reviewer acknowledges it with a note (then only a later
outside day opens a new one). Every open, acknowledgement and close is audited, and each opening
is sent through the policy's escalation channel.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from typing import Any

import numpy as np
from django.db import IntegrityError, transaction
from django.db.models import Max
from django.urls import reverse
from django.utils import timezone

from audit.models import Action
from audit.services import Actor, audit_record
from console.accounts import permissions
from console.accounts.models import Route
from console.core.errors import Conflict, Forbidden, InvalidInput
from console.governance.models import IN_FORCE, PolicyVersion
from console.ledger.models import Decision
from console.monitoring.models import Alarm, AlarmKind, AlarmStatus, DailyAggregate
from console.monitoring.notices import notify_escalation
from console.monitoring.selectors import alarm_figures_text
from console.monitoring.services.aggregates import aggregates_refresh
from console.stats.drift import (
    Cusum,
    control_chart,
    ks_two_sample_from_counts,
    mix_homogeneity_test,
    psi_from_counts,
    total_variation_distance,
    two_sided_bernoulli_cusum,
)

DAYS_INSIDE_TO_CLOSE = 3
NOTE_MAX = 4000
PSI_MAJOR = 0.25
KS_P_VALUE = 0.01
SEGMENT_TV = 0.15
SEGMENT_P_VALUE = 0.01
CUSUM_RISE = 1.5


@dataclass
class Series:
    """The monitor's reading of one kind: per day after signing, outside or not, with figures."""

    days: list[date] = field(default_factory=list)
    outside: list[bool] = field(default_factory=list)
    detail: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Reading:
    policy: PolicyVersion
    window: tuple[date | None, date]
    baseline: dict[str, Any]
    series: dict[str, Series]
    chart: dict[str, Any]


def _rising_signal(cusum: Cusum) -> np.ndarray:
    """Days the CUSUM is above its decision interval *and* rose that day: the statistic is not reset
    and falls back slowly after a shift, so a day whose own evidence points back to p0 counts as
    inside; otherwise an alarm could never close 3 days after the rate came back."""
    previous = np.concatenate([[0.0], cusum.statistic[:-1]])
    return cusum.signal & (cusum.statistic > previous)


def signing_window(policy: PolicyVersion) -> tuple[date | None, date]:
    """The days the signed evidence read: from its `from` date to the earliest of its `to` date, the
    day of the signature and the last day with a decision that was in the ledger at the signature.

    The last bound matters when decisions are logged late: days filled only after signing (a
    back-fill, a replay of yesterday's traffic) were never part of the evidence, so they are
    watched against it instead of being folded into its baseline. One query on the (route,
    occurred_at) index, read backwards from the signature."""
    filters = policy.filters or {}
    signed_day = policy.signed_at.astimezone(UTC).date()
    start = date.fromisoformat(filters["from"]) if filters.get("from") else None
    ends = [signed_day]
    if filters.get("to"):
        ends.append(date.fromisoformat(filters["to"]))
    present = Decision.objects.filter(
        route_id=policy.route_id, occurred_at__lte=policy.signed_at, ingested_at__lte=policy.signed_at
    )
    if start is not None:
        present = present.filter(occurred_at__gte=datetime.combine(start, time.min, tzinfo=UTC))
    last = present.aggregate(last=Max("occurred_at"))["last"]
    if last is not None:
        ends.append(last.astimezone(UTC).date())
    return start, min(ends)


def _ten_bins(histogram: np.ndarray) -> np.ndarray:
    return histogram.reshape(10, -1).sum(axis=1)


def monitor_read(
    policy: PolicyVersion, aggregates: list[DailyAggregate], *, today: date, window: tuple[date | None, date]
) -> Reading | None:
    """Every kind's daily reading, pure over the aggregates and the signing window (no queries)."""
    start, end = window
    window = [a for a in aggregates if (start is None or a.day >= start) and a.day <= end]
    after = [a for a in aggregates if end < a.day <= today and a.n > 0]
    base_n = sum(a.n for a in window)
    if base_n == 0:
        return None
    base_refused = sum(a.refused_at_cutoff for a in window)
    base_no_support = sum(a.no_support_refused for a in window)
    base_hist = np.sum([a.histogram for a in window], axis=0)
    base_segments: dict[str, float] = {}
    for a in window:
        for key, count in a.segments.items():
            base_segments[key] = base_segments.get(key, 0) + count
    p0 = base_refused / base_n
    days = [a.day for a in after]
    n = np.array([a.n for a in after], dtype=float)
    refused = np.array([a.refused_at_cutoff for a in after], dtype=float)
    series = {kind: Series(days=list(days)) for kind in AlarmKind.values}
    chart = control_chart(refused, n, baseline=p0) if after else None
    cusum_signal = np.zeros(len(after), dtype=bool)
    if after and 0 < p0 < 1:
        rise = min(CUSUM_RISE * p0, (1 + p0) / 2)
        cusum = two_sided_bernoulli_cusum(refused, n, p0=p0, p1_up=rise, p1_down=p0 / CUSUM_RISE)
        cusum_signal = _rising_signal(cusum.up) | _rising_signal(cusum.down)
    q0 = max(base_no_support / base_refused, 1 / (base_refused + 1)) if base_refused else None
    ns_refused = np.array([a.refused_at_cutoff for a in after], dtype=float)
    ns_count = np.array([a.no_support_refused for a in after], dtype=float)
    ns_chart = control_chart(ns_count, ns_refused, baseline=q0) if after and q0 is not None else None
    ten_base = _ten_bins(base_hist)
    for i, a in enumerate(after):
        series["abstention"].outside.append(bool(chart.outside[i] or cusum_signal[i]))
        series["abstention"].detail.append(
            {
                "day": a.day.isoformat(),
                "n": a.n,
                "refused": a.refused_at_cutoff,
                "rate": float(chart.rate[i]),
                "baseline": p0,
                "lower": float(chart.lower[i]),
                "upper": float(chart.upper[i]),
                "cusum_signal": bool(cusum_signal[i]),
            }
        )
        day_hist = np.asarray(a.histogram)
        psi = psi_from_counts(ten_base, _ten_bins(day_hist))
        ks = ks_two_sample_from_counts(base_hist, day_hist)
        series["scores"].outside.append(psi >= PSI_MAJOR and ks.p_value < KS_P_VALUE)
        series["scores"].detail.append(
            {"day": a.day.isoformat(), "psi": psi, "ks_statistic": ks.statistic, "ks_p_value": ks.p_value}
        )
        tv, mix_p = 0.0, 1.0
        if base_segments and a.segments:
            tv = total_variation_distance(base_segments, a.segments)
            mix_p = mix_homogeneity_test(base_segments, a.segments).p_value if tv > SEGMENT_TV else 1.0
        series["segment_mix"].outside.append(tv > SEGMENT_TV and mix_p < SEGMENT_P_VALUE)
        series["segment_mix"].detail.append({"day": a.day.isoformat(), "total_variation": tv, "chi2_p_value": mix_p})
        if ns_chart is not None and a.refused_at_cutoff:
            series["no_support"].outside.append(bool(ns_chart.outside[i]))
            series["no_support"].detail.append(
                {
                    "day": a.day.isoformat(),
                    "share": float(ns_chart.rate[i]),
                    "baseline": q0,
                    "upper": float(ns_chart.upper[i]),
                }
            )
        else:
            series["no_support"].outside.append(False)
            series["no_support"].detail.append({"day": a.day.isoformat(), "share": None})
    baseline = {
        "n": base_n,
        "refused": base_refused,
        "abstention_rate": p0,
        "no_support_share": q0,
        "window": {"from": start.isoformat() if start else None, "to": end.isoformat()},
    }
    chart_data = {
        "days": [d.isoformat() for d in days],
        "n": n.tolist(),
        "refused": refused.tolist(),
        "lower": chart.lower.tolist() if chart else [],
        "upper": chart.upper.tolist() if chart else [],
        "baseline": p0,
        "base_histogram": ten_base.tolist(),
    }
    return Reading(policy=policy, window=(start, end), baseline=baseline, series=series, chart=chart_data)


def _apply(*, actor: Actor, route: Route, policy: PolicyVersion, kind: str, series: Series) -> str | None:
    """Open or close this kind's alarm from its series; returns "opened", "closed" or None."""
    if not series.days:
        return None
    current = Alarm.objects.filter(route=route, kind=kind, status=AlarmStatus.OPEN).first()
    if current is None:
        barrier = (
            Alarm.objects.filter(route=route, kind=kind)
            .order_by("-through_day")
            .values_list("through_day", flat=True)
            .first()
        )
        flagged = [
            i
            for i, (day, out) in enumerate(zip(series.days, series.outside, strict=True))
            if out and (barrier is None or day > barrier)
        ]
        if not flagged:
            return None
        first, last = flagged[0], flagged[-1]
        try:
            with transaction.atomic():
                alarm = Alarm.objects.create(
                    route=route,
                    policy=policy,
                    kind=kind,
                    first_day=series.days[first],
                    last_flagged_day=series.days[last],
                    through_day=series.days[-1],
                    detail=series.detail[last],
                )
                audit_record(
                    actor=actor,
                    action=Action.ALARM_OPENED,
                    object_type="alarm",
                    object_id=alarm.pk,
                    route=route.slug,
                    payload={
                        "kind": kind,
                        "first_day": alarm.first_day.isoformat(),
                        "detail": alarm.detail,
                        "policy": policy.pk,
                    },
                )
                label = AlarmKind(kind).label
                notify_escalation(
                    policy=policy,
                    subject=f"[{route.slug}] Drift alarm: {label}",
                    body=(
                        f"The monitor found {label.lower()} outside its limits on route {route.slug} "
                        f"on {alarm.first_day.isoformat()} (policy v{policy.version}, cutoff "
                        f"{policy.cutoff:g}).\nFigures: {alarm_figures_text(alarm)}.\n"
                        f"Monitoring page: {reverse('route-monitoring', args=[route.slug])}"
                    ),
                )
        except IntegrityError:  # another run opened it first
            return None
        current, opened = alarm, "opened"
    else:
        opened = None
        flagged = [day for day, out in zip(series.days, series.outside, strict=True) if out]
        if flagged and flagged[-1] > current.last_flagged_day:
            current.last_flagged_day = flagged[-1]
            current.detail = series.detail[series.days.index(flagged[-1])]
        current.through_day = series.days[-1]
        current.save(update_fields=["last_flagged_day", "detail", "through_day"])
    inside_after = [day for day, out in zip(series.days, series.outside, strict=True) if day > current.last_flagged_day]
    if len(inside_after) >= DAYS_INSIDE_TO_CLOSE:
        with transaction.atomic():
            current.through_day = series.days[-1]
            alarm_closed_record(
                actor=actor,
                alarm=current,
                reason="inside_limits",
                context={"days_inside": [d.isoformat() for d in inside_after]},
            )
        return opened or "closed"
    return opened


def alarm_closed_record(*, actor: Actor, alarm: Alarm, reason: str, context: dict[str, Any] | None = None) -> None:
    """Close an alarm locked and found open by the caller, with its audit event: the one way an
    alarm closes (days back inside the limits, an acknowledgement, a signature superseding its
    version). The caller sets any other field first; `context` adds what the event should say."""
    alarm.status, alarm.closed_at, alarm.closed_reason = AlarmStatus.CLOSED, timezone.now(), reason
    alarm.full_clean()
    alarm.save()
    audit_record(
        actor=actor,
        action=Action.ALARM_CLOSED,
        object_type="alarm",
        object_id=alarm.pk,
        route=alarm.route.slug,
        payload={
            "kind": alarm.kind,
            "reason": reason,
            "status": {"old": AlarmStatus.OPEN, "new": AlarmStatus.CLOSED},
            **(context or {}),
        },
    )


def monitor_route(*, actor: Actor, route: Route, today: date | None = None) -> dict[str, Any]:
    """Refresh the route's aggregates and open or close its alarms; what happened, per kind."""
    today = today or timezone.now().date()
    policy = PolicyVersion.objects.filter(route=route, status__in=IN_FORCE).select_related("route", "owner").first()
    if policy is None:
        return {"route": route.slug, "skipped": "no policy in force"}
    refreshed = aggregates_refresh(route=route, cutoff=policy.cutoff, today=today)
    aggregates = list(DailyAggregate.objects.filter(route=route, day__lte=today).order_by("day"))
    reading = monitor_read(policy, aggregates, today=today, window=signing_window(policy))
    if reading is None:
        return {"route": route.slug, "refreshed_days": refreshed, "skipped": "no decisions in the signing window"}
    changes = {
        kind: _apply(actor=actor, route=route, policy=policy, kind=kind, series=series)
        for kind, series in reading.series.items()
    }
    return {
        "route": route.slug,
        "refreshed_days": refreshed,
        "alarms": {kind: change for kind, change in changes.items() if change},
    }


def monitor_run(*, actor: Actor, route_slug: str | None = None, today: date | None = None) -> list[dict[str, Any]]:
    routes = Route.objects.filter(policies__status__in=IN_FORCE).distinct().order_by("slug")
    if route_slug:
        routes = routes.filter(slug=route_slug)
    return [monitor_route(actor=actor, route=route, today=today) for route in routes]


def alarm_acknowledge(*, actor: Actor, user, alarm: Alarm, note: str) -> Alarm:
    """Close an open alarm with the owner's or a reviewer's note; only a later outside day opens another."""
    if not permissions.can_acknowledge_alarm(user, alarm.route):
        raise Forbidden("Only the route's policy owner or a reviewer may acknowledge an alarm.")
    note = (note or "").strip()
    if not note:
        raise InvalidInput("Acknowledging an alarm needs a note.")
    if len(note) > NOTE_MAX or "\x00" in note:
        raise InvalidInput(f"The note must be text of at most {NOTE_MAX} characters.")
    with transaction.atomic(durable=True):
        locked = Alarm.objects.select_for_update().select_related("route").get(pk=alarm.pk)
        if locked.status != AlarmStatus.OPEN:
            raise Conflict("This alarm is already closed.", code="alarm_closed")
        audit_record(
            actor=actor,
            action=Action.ALARM_ACKNOWLEDGED,
            object_type="alarm",
            object_id=locked.pk,
            route=locked.route.slug,
            payload={"kind": locked.kind, "note": note, "status": {"old": AlarmStatus.OPEN, "new": AlarmStatus.CLOSED}},
        )
        locked.note, locked.acknowledged_by = note, user
        locked.through_day = max(locked.through_day, timezone.now().date())
        alarm_closed_record(actor=actor, alarm=locked, reason="acknowledged")
    return locked
