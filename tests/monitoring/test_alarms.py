"""Drift alarms: the daily monitor opens one alarm per route and kind when a day leaves its limits,
closes it after 3 days back inside or on an acknowledgement, tells the escalation channel, audits."""

from __future__ import annotations

import numpy as np
import pytest
from django.core.management import call_command

from audit.models import AuditEvent
from audit.services import Actor
from console.monitoring.models import Alarm, DailyAggregate
from console.monitoring.services.alarms import monitor_run
from console.notify.models import Notification
from tests.monitoring.conftest import day_start, post_day, sign_policy

ACTOR = Actor.system("tests")


@pytest.fixture
def watched(route, owner, reviewer, signing_window):
    """The policy signed on the window that ends 11 days ago; the 10 days since are monitored."""
    return sign_policy(route, owner.user, reviewer.user, filters={"to": day_start(11).date().isoformat()})


def _stable_days(integrator, days_ago, seed=11):
    rng = np.random.default_rng(seed)
    for d in days_ago:
        post_day(integrator, days_ago=d, scores=np.round(rng.beta(4, 2, 200), 3))


def _shifted_days(integrator, days_ago, seed=12):
    """Scores 0.25 lower: about half the decisions fall below the cutoff instead of ~20%."""
    rng = np.random.default_rng(seed)
    for d in days_ago:
        post_day(integrator, days_ago=d, scores=np.clip(np.round(rng.beta(4, 2, 200) - 0.25, 3), 0, 1))


def test_a_stable_route_opens_no_alarm(watched, integrator):
    _stable_days(integrator, range(10, 0, -1))
    results = monitor_run(actor=ACTOR)
    assert results[0]["route"] == "it-support" and not results[0]["alarms"]
    assert not Alarm.objects.exists()
    assert DailyAggregate.objects.filter(route=watched.route).count() == 30  # 20 window days and 10 after


def test_a_shift_opens_one_alarm_per_kind_through_the_escalation_channel(watched, integrator):
    _stable_days(integrator, range(10, 3, -1))
    _shifted_days(integrator, [3, 2, 1])
    call_command("monitor_run", "--route", "it-support")
    call_command("monitor_run")  # a second run opens nothing more
    abstention = Alarm.objects.get(kind="abstention")
    assert abstention.status == "open" and abstention.first_day == day_start(3).date()
    assert abstention.detail["rate"] > abstention.detail["upper"]
    assert Alarm.objects.filter(kind="scores", status="open").count() == 1
    assert Alarm.objects.filter(kind="segment_mix").count() == 0
    sent = Notification.objects.filter(subject__contains="Drift alarm")
    assert sent.count() == Alarm.objects.count()
    assert {n.recipient for n in sent} == {"desk@example.org"} and {n.channel for n in sent} == {"email"}
    assert AuditEvent.objects.filter(action="alarm_opened").count() == Alarm.objects.count()


def test_a_webhook_escalation_channel_gets_a_webhook(route, owner, reviewer, signing_window, integrator):
    sign_policy(
        route,
        owner.user,
        reviewer.user,
        filters={"to": day_start(11).date().isoformat()},
        escalation={"contact": "On call", "channel": "https://hooks.example.org/desk", "response_hours": 4},
    )
    _shifted_days(integrator, [2, 1])
    monitor_run(actor=ACTOR)
    sent = Notification.objects.get(subject__icontains="abstention")
    assert sent.channel == "webhook" and sent.recipient == "https://hooks.example.org/desk"


def test_the_alarm_closes_after_three_days_back_inside(watched, integrator):
    _shifted_days(integrator, [8, 7])
    _stable_days(integrator, [6, 5, 4])
    monitor_run(actor=ACTOR, today=day_start(7).date())
    alarm = Alarm.objects.get(kind="abstention")
    assert alarm.status == "open"
    monitor_run(actor=ACTOR, today=day_start(5).date())  # two days inside: still open
    alarm.refresh_from_db()
    assert alarm.status == "open" and alarm.through_day == day_start(5).date()
    monitor_run(actor=ACTOR, today=day_start(4).date())
    alarm.refresh_from_db()
    assert alarm.status == "closed" and alarm.closed_reason == "inside_limits"
    closed = AuditEvent.objects.get(action="alarm_closed", object_id=str(alarm.pk))
    assert closed.payload["days_inside"] == [day_start(d).date().isoformat() for d in (6, 5, 4)]


def test_an_acknowledged_alarm_closes_and_only_a_later_outside_day_opens_another(watched, integrator, owner):
    _shifted_days(integrator, [5, 4])
    monitor_run(actor=ACTOR, today=day_start(4).date())
    alarm = Alarm.objects.get(kind="abstention")
    assert integrator.post(f"/api/v1/alarms/{alarm.pk}/acknowledge", {"note": "x"}, format="json").status_code == 403
    assert owner.post(f"/api/v1/alarms/{alarm.pk}/acknowledge", {"note": ""}, format="json").status_code == 400
    response = owner.post(
        f"/api/v1/alarms/{alarm.pk}/acknowledge", {"note": "Known: the new model, recheck open."}, format="json"
    )
    assert response.status_code == 200 and response.json()["status"] == "closed"
    assert response.json()["closed_reason"] == "acknowledged" and response.json()["acknowledged_by"] == "owner"
    assert AuditEvent.objects.filter(action="alarm_acknowledged", object_id=str(alarm.pk)).count() == 1
    monitor_run(actor=ACTOR, today=day_start(4).date())
    assert Alarm.objects.filter(kind="abstention").count() == 1
    alarms = owner.get("/api/v1/routes/it-support/alarms").json()["alarms"]
    assert [a["id"] for a in alarms if a["kind"] == "abstention"] == [alarm.pk]


def test_aggregates_follow_late_decisions(watched, integrator):
    _stable_days(integrator, [6])
    monitor_run(actor=ACTOR)
    before = DailyAggregate.objects.get(route=watched.route, day=day_start(6).date())
    post_day(integrator, days_ago=6, scores=[0.1, 0.2])
    monitor_run(actor=ACTOR)
    after = DailyAggregate.objects.get(route=watched.route, day=day_start(6).date())
    assert after.n == before.n + 2 and after.refused_at_cutoff == before.refused_at_cutoff + 2
    assert sum(after.histogram) == after.n


def test_a_note_too_long_or_with_nul_is_refused_not_a_crash(watched, integrator, owner):
    _shifted_days(integrator, [2, 1])
    monitor_run(actor=ACTOR)
    alarm = Alarm.objects.get(kind="abstention")
    for note in ("x" * 4001, "a\x00b", 5):
        response = owner.post(f"/api/v1/alarms/{alarm.pk}/acknowledge", {"note": note}, format="json")
        assert response.status_code == 400 and response.json()["error"]["code"]
    alarm.refresh_from_db()
    assert alarm.status == "open"


def test_days_logged_after_signing_are_watched_not_taken_as_the_baseline(signed, integrator):
    """Signed with no date filter on the days 30 to 11 days ago; the last 10 days are logged only
    afterwards (a back-fill) with lower scores: they are after the evidence, so they alarm."""
    _shifted_days(integrator, range(10, 0, -1))
    results = monitor_run(actor=ACTOR)
    assert results[0]["alarms"].get("abstention") == "opened"
    alarm = Alarm.objects.get(kind="abstention", status="open")
    assert alarm.first_day == day_start(10).date()


def test_a_small_day_whose_mix_moved_by_chance_is_inside_and_a_real_move_is_outside():
    """Six equal segments in the window; a day of 20 decisions at 6/5/3/2/2/2 is 0.22 total
    variation away, which 20 draws from the window's mix give by chance (chi-square p ~ 0.5); a
    day of 300 at 200/20/20/20/20/20 is 0.5 away and no chance result."""
    from datetime import date, timedelta

    from console.governance.models import PolicyVersion
    from console.monitoring.services.alarms import monitor_read

    def aggregate(day: date, segment_counts: list[int]) -> DailyAggregate:
        n = sum(segment_counts)
        histogram = [0] * 1000
        histogram[700] = n
        return DailyAggregate(
            day=day,
            n=n,
            cutoff=0.6,
            refused_at_cutoff=round(0.3 * n),
            no_support_refused=0,
            histogram=histogram,
            segments={name: count for name, count in zip("abcdef", segment_counts, strict=True) if count},
        )

    first = date(2026, 11, 1)
    window = [aggregate(first + timedelta(days=i), [20] * 6) for i in range(10)]
    small = aggregate(first + timedelta(days=10), [6, 5, 3, 2, 2, 2])
    moved = aggregate(first + timedelta(days=11), [200, 20, 20, 20, 20, 20])
    reading = monitor_read(
        PolicyVersion(cutoff=0.6),
        [*window, small, moved],
        today=moved.day,
        window=(first, first + timedelta(days=9)),
    )
    mix = reading.series["segment_mix"]
    assert [d["total_variation"] for d in mix.detail] == pytest.approx([0.2167, 0.5], abs=1e-4)
    assert mix.outside == [False, True]
    assert mix.detail[0]["chi2_p_value"] > 0.3 and mix.detail[1]["chi2_p_value"] < 1e-6
