"""Stale evidence: old labels or a graded sample whose segment mix is not today's traffic's, shown
on health, with a one-click refresh of the graded sample."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from django.utils import timezone

from audit.models import AuditEvent
from audit.services import Actor
from console.monitoring.services.alarms import monitor_run
from grading.models import FinalLabel, GradingPlan
from tests.monitoring.conftest import day_start, post_day, sign_policy


@pytest.fixture(scope="module")
def window_policy():
    """The window's world signs the policy on the window that ends 11 days ago, once for the module."""
    return {"filters": {"to": day_start(11).date().isoformat()}}


@pytest.fixture
def watched(window_signed):
    return window_signed


def test_fresh_labels_on_todays_mix_are_not_stale(watched, reviewer, integrator):
    post_day(integrator, days_ago=2, scores=np.linspace(0, 1, 100))
    monitor_run(actor=Actor.system("tests"))
    assert reviewer.get("/api/v1/routes/it-support/health").json()["evidence"]["stale"] is False


def test_a_new_segment_mix_makes_the_evidence_stale_and_the_refresh_sets_a_plan(watched, integrator, owner, client):
    post_day(integrator, days_ago=2, scores=np.linspace(0, 1, 400), segments={"query_type": "billing"})
    monitor_run(actor=Actor.system("tests"))
    evidence = owner.get("/api/v1/routes/it-support/health").json()["evidence"]
    assert evidence["stale"] and evidence["segment_tv"] > 0.15 and "segment mix" in evidence["reasons"][0]
    client.force_login(owner.user)
    assert "Refresh the graded sample" in client.get("/routes/it-support/monitoring/").content.decode()
    assert client.post("/routes/it-support/evidence/refresh/").status_code == 302
    plan = GradingPlan.objects.get(route=watched.route)
    assert [s["high"] for s in plan.strata][0] == watched.cutoff
    assert AuditEvent.objects.filter(action="evidence_refresh_requested").count() == 1


def test_labels_older_than_90_days_make_the_evidence_stale(watched, owner):
    FinalLabel.objects.update(decided_at=timezone.now() - timedelta(days=120))
    evidence = owner.get("/api/v1/routes/it-support/health").json()["evidence"]
    assert evidence["stale"] and "days old" in evidence["reasons"][0]


def test_the_label_age_limit_is_a_route_setting_the_owner_changes(watched, owner, grader, client):
    FinalLabel.objects.update(decided_at=timezone.now() - timedelta(days=120))
    client.force_login(owner.user)
    page = client.get("/routes/it-support/monitoring/").content.decode()
    assert 'id="label-age-form"' in page and 'value="90"' in page
    assert (
        client.post("/routes/it-support/monitoring/settings/", {"evidence_max_label_age_days": "150"}).status_code
        == 302
    )
    evidence = owner.get("/api/v1/routes/it-support/health").json()["evidence"]
    assert evidence["stale"] is False and evidence["max_label_age_days"] == 150
    changed = AuditEvent.objects.get(action="route_monitoring_changed")
    assert changed.payload == {"evidence_max_label_age_days": {"old": 90, "new": 150}}
    for bad in ("0", "-3", "ninety", "100000"):
        client.post("/routes/it-support/monitoring/settings/", {"evidence_max_label_age_days": bad})
    assert owner.get("/api/v1/routes/it-support/health").json()["evidence"]["max_label_age_days"] == 150
    assert AuditEvent.objects.filter(action="route_monitoring_changed").count() == 1
    client.post("/routes/it-support/monitoring/settings/", {"evidence_max_label_age_days": "100"})
    evidence = owner.get("/api/v1/routes/it-support/health").json()["evidence"]
    assert evidence["stale"] and "limit 100" in evidence["reasons"][0]
    client.force_login(grader.user)
    assert (
        client.post("/routes/it-support/monitoring/settings/", {"evidence_max_label_age_days": "9"}).status_code == 404
    )


@pytest.mark.django_db(transaction=True)
def test_refreshing_the_graded_sample_outside_a_test_transaction_sets_the_plan_with_its_events_once(
    route, owner, reviewer, integrator, client
):
    # The other tests run inside one transaction, which hid that the request's own event was
    # written outside the plan's: the page answered 500 and the plan changed without its event.
    rng = np.random.default_rng(5)
    post_day(integrator, days_ago=12, scores=np.round(rng.beta(4, 2, 120), 3), correct=rng.random(120) < 0.7)
    sign_policy(route, owner.user, reviewer.user)
    client.force_login(owner.user)
    before = AuditEvent.objects.count()
    assert client.post("/routes/it-support/evidence/refresh/").status_code == 302
    assert GradingPlan.objects.filter(route=route).exists()
    assert sorted(AuditEvent.objects.filter(seq__gt=before).values_list("action", flat=True)) == [
        "evidence_refresh_requested",
        "grading_plan_set",
    ]
