"""Route health (API, dashboard, monitoring page) against SQL references, and its access rules."""

from __future__ import annotations

import numpy as np
import pytest
from django.db import connection

from audit.services import Actor
from console.monitoring.models import Alarm, DailyAggregate
from console.monitoring.services.alarms import monitor_run
from console.stats.intervals import proportion_interval
from tests.monitoring.conftest import day_start, post_day

ACTOR = Actor.system("tests")


@pytest.fixture(scope="module")
def window_policy():
    """The window's world signs the policy on the window that ends 11 days ago, once for the module."""
    return {"filters": {"to": day_start(11).date().isoformat()}}


@pytest.fixture
def watched(window_signed):
    return window_signed


def _sql_rate(where: str, cutoff: float) -> tuple[int, int]:
    with connection.cursor() as cursor:
        cursor.execute(
            f"""SELECT count(*) FILTER (WHERE d.gate_score < %s), count(*) FROM ledger_decision d
                            JOIN ledger_route r ON r.id = d.route_id WHERE r.slug = 'it-support' AND {where}""",
            [cutoff],
        )
        return cursor.fetchone()


def test_the_health_figures_match_sql_references(watched, integrator, reviewer):
    rng = np.random.default_rng(5)
    for d in (9, 6, 3, 0):
        post_day(integrator, days_ago=d, scores=np.round(rng.beta(3, 2, 150), 3))
    health = reviewer.get("/api/v1/routes/it-support/health").json()
    today = _sql_rate("(d.occurred_at AT TIME ZONE 'UTC')::date = (now() AT TIME ZONE 'UTC')::date", 0.6)
    week = _sql_rate("(d.occurred_at AT TIME ZONE 'UTC')::date > (now() AT TIME ZONE 'UTC')::date - 7", 0.6)
    for key, (refused, n) in (("today", today), ("last_7_days", week)):
        figure = health["abstention"][key]
        assert (figure["refused"], figure["n"]) == (refused, n) and n > 0
        expected = proportion_interval(refused, n)
        assert figure["value"] == pytest.approx(refused / n)
        assert (figure["low"], figure["high"]) == pytest.approx((expected.low, expected.high))
    assert health["policy"] == {
        "id": watched.pk,
        "version": 1,
        "cutoff": 0.6,
        "status": "active",
        "owner": "owner",
        "since": watched.signed_at.isoformat(),
    }
    assert health["abstention"]["signed"] == watched.evidence_document["chosen_row"]["abstention_rate"]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM grading_finallabel l JOIN ledger_decision d ON d.id = l.decision_id "
            "WHERE l.decided_at >= (now() AT TIME ZONE 'UTC')::date - 6"
        )
        assert health["labels_last_7_days"] == cursor.fetchone()[0]
    assert health["rechecks_open"] == 0 and health["alarms_open"] == []


def test_the_stored_aggregates_match_a_sql_reference(watched, integrator):
    rng = np.random.default_rng(6)
    post_day(integrator, days_ago=2, scores=np.round(rng.random(300), 4))
    monitor_run(actor=ACTOR)
    row = DailyAggregate.objects.get(route=watched.route, day=day_start(2).date())
    refused, n = _sql_rate(f"(d.occurred_at AT TIME ZONE 'UTC')::date = '{day_start(2).date()}'", 0.6)
    assert (row.refused_at_cutoff, row.n) == (refused, n)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT width_bucket(gate_score, 0, 1, 1000) - 1, count(*) FROM ledger_decision "
            "WHERE (occurred_at AT TIME ZONE 'UTC')::date = %s GROUP BY 1",
            [day_start(2).date()],
        )
        reference = [0] * 1000
        for score_bin, count in cursor.fetchall():
            reference[min(score_bin, 999)] += count
    assert row.histogram == reference


def test_a_small_persistent_rise_is_caught_by_the_cusum_inside_the_control_limits(watched, integrator):
    monitor_run(actor=ACTOR)  # folds the signing window
    window = DailyAggregate.objects.filter(route=watched.route, day__lte=day_start(11).date())
    p0 = sum(a.refused_at_cutoff for a in window) / sum(a.n for a in window)
    upper = p0 + 3 * (p0 * (1 - p0) / 200) ** 0.5
    refused = int(np.floor(upper * 200 - 1e-9))  # inside the 3-sigma limit every day
    for d in range(8, 0, -1):
        post_day(integrator, days_ago=d, scores=[0.3] * refused + [0.8] * (200 - refused))
    monitor_run(actor=ACTOR)
    alarm = Alarm.objects.get(kind="abstention")
    assert alarm.detail["rate"] <= alarm.detail["upper"] and alarm.detail["cusum_signal"]


def test_strangers_get_404_and_graders_cannot_read_health(watched, grader):
    assert grader.get("/api/v1/routes/it-support/health").status_code == 404
    assert grader.get("/api/v1/routes/it-support/alarms").status_code == 404


def test_the_dashboard_and_the_monitoring_page_show_the_figures_and_charts(watched, integrator, owner, client):
    rng = np.random.default_rng(8)
    for d in range(10, 0, -1):
        post_day(
            integrator, days_ago=d, scores=np.clip(np.round(rng.beta(4, 2, 200) - (0.25 if d < 3 else 0), 3), 0, 1)
        )
    monitor_run(actor=ACTOR)
    client.force_login(owner.user)
    dashboard = client.get("/").content.decode()
    assert 'id="health-it-support"' in dashboard and "cutoff <strong>0.6</strong>" in dashboard
    assert "/routes/it-support/monitoring/#alarms" in dashboard
    page = client.get("/routes/it-support/monitoring/")
    html = page.content.decode()
    assert page.status_code == 200
    assert '<svg class="monitor-abstention"' in html and '<svg class="monitor-scores"' in html
    assert "Abstention at the signed cutoff" in html and "Acknowledge" in html


def test_the_dashboard_links_failed_shadow_runs_and_labels_to_their_pages(route, owner, client):
    from html import unescape

    from console.ledger.models import Decision
    from console.shadow.models import ShadowRun
    from tests.factories import ingest, record

    ingest([record(question="shadow broke"), record(question="shadow fine")])
    broke = Decision.objects.get(question="shadow broke")
    ShadowRun.objects.create(decision=broke, pipeline="http", status="failed", error="HTTP 500")
    client.force_login(owner.user)
    dashboard = client.get("/").content.decode()
    link = "/refusals/?route=it-support&amp;shadow_failed=on"
    assert f'<a href="{link}">shadow runs failed 1</a>' in dashboard
    assert '<a href="/operating-points/?route=it-support">labels in 7 days 0</a>' in dashboard
    refusals = client.get(unescape(link)).content.decode()
    assert "shadow broke" in refusals and "shadow fine" not in refusals


def test_the_grading_backlog_links_to_the_queue_only_for_those_who_grade(route, owner, reviewer, client):
    client.force_login(owner.user)  # a policy owner may not open the grading queue (403)
    dashboard = client.get("/").content.decode()
    assert "grading backlog 0" in dashboard and "/grading/?route=it-support" not in dashboard
    client.force_login(reviewer.user)
    dashboard = client.get("/").content.decode()
    assert '<a href="/grading/?route=it-support">grading backlog 0</a>' in dashboard
    assert client.get("/grading/?route=it-support").status_code == 200


def test_health_counts_open_and_overdue_disputes(route, owner, integrator):
    from datetime import timedelta

    from django.utils import timezone

    from console.disputes.models import Dispute
    from tests.factories import ingest, record

    ids = ingest([record(), record(), record()])
    for decision_id in ids:
        response = owner.post(
            f"/api/v1/decisions/{decision_id}/disputes",
            {"kind": "other", "reason": "It was in the manual."},
            format="json",
        )
        assert response.status_code == 201, response.json()
    Dispute.objects.filter(decision_id=ids[0]).update(due_by=timezone.now() - timedelta(hours=1))
    Dispute.objects.filter(decision_id=ids[2]).update(status="withdrawn", resolved_at=timezone.now())
    health = owner.get("/api/v1/routes/it-support/health").json()
    assert (health["disputes_open"], health["disputes_overdue"]) == (2, 1)
    assert integrator.get("/api/v1/routes/it-support/health").json()["disputes_open"] == 2
