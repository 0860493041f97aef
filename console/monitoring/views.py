"""Pages of monitoring: a route's monitoring page (charts, alarms, rechecks) and a recheck's page."""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import urlencode

import numpy as np
from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from audit.services import Actor
from console.accounts import permissions
from console.core.errors import Conflict, InvalidInput, NotFound
from console.governance.models import PolicyVersion
from console.monitoring import charts, selectors
from console.monitoring.models import AlarmKind, DailyAggregate
from console.monitoring.services import alarms as alarm_services
from console.monitoring.services import evidence as evidence_services
from console.monitoring.services import rechecks as recheck_services


def route_monitoring(request, slug: str):
    route = selectors.route_for_monitoring_reader(request.user, slug)
    policy = selectors.policy_in_force(route)
    context = {
        "route": route,
        "policy": policy,
        "health": selectors.route_health(route),
        "rechecks": list(selectors.route_rechecks(route)[:20]),
        "alarms": list(selectors.route_alarms(route)[:20]),
        "can_respond": permissions.can_acknowledge_alarm(request.user, route),
    }
    for alarm in context["alarms"]:
        alarm.figures = selectors.alarm_figures(alarm)
        alarm.closed_reason_text = selectors.alarm_closed_reason_text(alarm)
    if policy is not None:
        context |= _charts(route, policy, context["alarms"])
    return render(request, "monitoring/route.html", context)


def _charts(route, policy, alarms) -> dict:
    """The charts from the daily monitor's aggregates, or, until its first reading since the
    signature, from the ledger's live counters (`live` says which, for the page to label)."""
    today = timezone.now().date()
    window = alarm_services.signing_window(policy)
    live = not selectors.daily_reading_exists(policy)
    if live:
        window_row, recent = selectors.live_aggregates(route, policy.cutoff, window=window, today=today)
        aggregates = ([window_row] if window_row else []) + [a for a in recent if a.day > window[1]]
    else:
        aggregates = recent = list(DailyAggregate.objects.filter(route=route).order_by("day"))
    context = {"live": live, "window_end": window[1]}
    reading = alarm_services.monitor_read(policy, aggregates, today=today, window=window)
    if reading is None:
        return context
    chart = reading.chart
    alarm_days = [a.first_day.isoformat() for a in alarms if a.kind == AlarmKind.ABSTENTION]
    rates = [r / n for r, n in zip(chart["refused"], chart["n"], strict=True)]
    context["abstention_svg"] = charts.abstention_chart(
        chart["days"], rates, chart["lower"], chart["upper"], chart["baseline"], alarm_days
    )
    week = [a.histogram for a in recent if a.day > today - timedelta(days=7)]
    if week:
        last_7 = np.sum(week, axis=0).reshape(10, -1).sum(axis=1).tolist()
        context["scores_svg"] = charts.histogram_chart(chart["base_histogram"], last_7)
    context["baseline"] = reading.baseline
    return context


def _recheck_for(request, slug: str, pk: int):
    recheck = selectors.get_recheck_for_user(request.user, pk)
    if recheck.route.slug != slug:
        raise NotFound("No such recheck.")
    return recheck


def recheck_detail(request, slug: str, pk: int):
    recheck = _recheck_for(request, slug, pk)
    report = selectors.recheck_report(recheck)
    policy = recheck.policy
    listed = ", ".join(f"{k} {v}" for k, v in recheck.versions.items())
    draft_link = (
        reverse("policy-draft", args=[slug])
        + "?"
        + urlencode(
            {
                "cutoff": policy.cutoff,
                "owner": policy.owner.get_username(),
                "rationale": f"Recheck {recheck.pk}: new versions {listed}",
                **{f"version.{k}": v for k, v in recheck.versions.items()},
            }
        )
    )
    newer = PolicyVersion.objects.filter(route=recheck.route, signed_at__gte=recheck.opened_at).order_by("-signed_at")
    return render(
        request,
        "monitoring/recheck.html",
        {
            "route": recheck.route,
            "recheck": recheck,
            "report": report,
            "policy": policy,
            "draft_link": draft_link,
            "newer": list(newer),
            "can_close": permissions.can_close_recheck(request.user, recheck.route),
            "can_plan": permissions.can_plan_recheck(request.user, recheck.route),
            "half_width_points": f"{100 * (recheck.plan or {}).get('half_width', 0):g}",
        },
    )


@require_POST
def recheck_close(request, slug: str, pk: int):
    recheck = _recheck_for(request, slug, pk)
    new_policy = None
    if request.POST.get("policy"):
        new_policy = PolicyVersion.objects.filter(pk=request.POST["policy"], route=recheck.route).first()
    try:
        recheck_services.recheck_close(
            actor=Actor.user(request.user),
            user=request.user,
            recheck=recheck,
            resolution=request.POST.get("resolution", ""),
            note=request.POST.get("note", ""),
            new_policy=new_policy,
        )
    except (InvalidInput, Conflict) as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, "Recheck closed.")
    return redirect("monitoring-recheck", slug=slug, pk=pk)


@require_POST
def recheck_plan_adjust(request, slug: str, pk: int):
    recheck = _recheck_for(request, slug, pk)
    try:
        points = float(request.POST.get("half_width_points", ""))
    except ValueError:
        messages.error(request, "Give the half-width in points, for example 5.")
        return redirect("monitoring-recheck", slug=slug, pk=pk)
    try:
        adjusted = recheck_services.recheck_plan_adjust(
            actor=Actor.user(request.user), user=request.user, recheck=recheck, half_width=points / 100
        )
    except (InvalidInput, Conflict) as exc:
        messages.error(request, exc.message)
    else:
        targets = ", ".join(str(band["target"]) for band in adjusted.plan["bands"])
        messages.success(request, f"Recheck sample resized for ±{points:g} points: {targets} graded items by band.")
    return redirect("monitoring-recheck", slug=slug, pk=pk)


@require_POST
def alarm_acknowledge(request, slug: str, pk: int):
    alarm = selectors.get_alarm_for_user(request.user, pk)
    if alarm.route.slug != slug:
        raise NotFound("No such alarm.")
    try:
        alarm_services.alarm_acknowledge(
            actor=Actor.user(request.user), user=request.user, alarm=alarm, note=request.POST.get("note", "")
        )
    except (InvalidInput, Conflict) as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, "Alarm acknowledged.")
    return redirect("route-monitoring", slug=slug)


@require_POST
def route_monitoring_settings(request, slug: str):
    route = selectors.route_for_monitoring_reader(request.user, slug)
    try:
        days = int(request.POST.get("evidence_max_label_age_days", ""))
    except ValueError:
        messages.error(request, "Give the label age limit as a whole number of days.")
        return redirect("route-monitoring", slug=slug)
    try:
        evidence_services.route_monitoring_set(
            actor=Actor.user(request.user), user=request.user, route=route, evidence_max_label_age_days=days
        )
    except InvalidInput as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"The evidence now counts as stale once its newest label is {days} days old.")
    return redirect("route-monitoring", slug=slug)


@require_POST
def evidence_refresh(request, slug: str):
    route = selectors.route_for_monitoring_reader(request.user, slug)
    try:
        plan = evidence_services.evidence_refresh_request(
            actor=Actor.user(request.user), user=request.user, route=route
        )
    except Conflict as exc:
        messages.error(request, exc.message)
    else:
        messages.success(
            request,
            "Grading plan set for current traffic: "
            + ", ".join(f"{b['target']} items in [{b['low']:g}, {b['high']:g})" for b in plan["bands"]),
        )
    return redirect("route-monitoring", slug=slug)
