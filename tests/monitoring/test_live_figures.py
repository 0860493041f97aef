"""Right after signing, before the daily monitor's first reading, the monitoring page shows live
figures from the ledger's counters; alarm figures and the policy history are labelled values."""

from __future__ import annotations

import re

import numpy as np
import pytest
from django.test import Client

from audit.services import Actor
from console.monitoring import selectors
from console.monitoring.models import DailyAggregate
from console.monitoring.services import alarms
from console.monitoring.services.alarms import monitor_run
from console.notify.models import Notification
from tests.monitoring.conftest import day_start, earlier_today, post_day, sign_policy

ACTOR = Actor.system("tests")
# A data structure's repr in a page (escaped or not), or a key of an alarm's detail.
REPR = re.compile(r"\{'|\{&#x27;|&#x27;: |'\w+': |\bks_p_value\b|\bcusum_signal\b")


def _page(user, url: str = "/routes/it-support/monitoring/") -> str:
    page = Client()
    page.force_login(user)
    response = page.get(url)
    assert response.status_code == 200
    return response.content.decode()


def test_right_after_signing_the_page_shows_the_live_figures_and_no_command(
    route, owner, reviewer, integrator, signing_window
):
    rng = np.random.default_rng(11)
    for days_ago in (5, 3, 1, 0):
        # Today's decisions before now: the evidence signed now reads through today, at any hour.
        at = earlier_today() if days_ago == 0 else None
        post_day(integrator, days_ago=days_ago, scores=np.round(rng.beta(4, 2, 80), 3), at=at)
    sign_policy(route, owner.user, reviewer.user)
    html = _page(owner.user)
    assert "manage.py" not in html and "No decisions in the last 7 days" not in html
    assert 'id="live-figures"' in html and '<svg class="monitor-scores"' in html
    health = reviewer.get("/api/v1/routes/it-support/health").json()["abstention"]["last_7_days"]
    assert health["n"] == 320
    assert f"{health['refused']} of 320 decisions" in html
    assert "No day after the signing window yet" in html
    monitor_run(actor=ACTOR)  # the first daily reading replaces the live figures
    after = _page(owner.user)
    assert 'id="live-figures"' not in after and '<svg class="monitor-scores"' in after


def test_the_live_rows_equal_what_the_daily_monitor_folds(route, owner, reviewer, integrator, signing_window):
    policy = sign_policy(route, owner.user, reviewer.user, filters={"to": day_start(11).date().isoformat()})
    rng = np.random.default_rng(12)
    for days_ago in range(9, 0, -1):
        post_day(integrator, days_ago=days_ago, scores=np.round(rng.random(60), 4).tolist() + [0.6, 0.5999, 1.0, 0.0])
    today = day_start(0).date()
    window = alarms.signing_window(policy)
    window_row, days = selectors.live_aggregates(route, policy.cutoff, window=window, today=today)
    assert 'id="live-figures"' in _page(owner.user) and '<svg class="monitor-abstention"' in _page(owner.user)
    monitor_run(actor=ACTOR)
    stored = {a.day: a for a in DailyAggregate.objects.filter(route=route)}
    assert [row.day for row in days] == [day_start(d).date() for d in range(9, 0, -1)]
    for row in days:
        folded = stored[row.day]
        assert (row.n, row.refused_at_cutoff, row.histogram) == (folded.n, folded.refused_at_cutoff, folded.histogram)
    in_window = [a for a in stored.values() if a.day <= window[1]]
    assert window_row.n == sum(a.n for a in in_window)
    assert window_row.refused_at_cutoff == sum(a.refused_at_cutoff for a in in_window)
    assert window_row.histogram == np.sum([a.histogram for a in in_window], axis=0).tolist()


def test_alarm_figures_are_labelled_values_on_the_page_and_in_the_notice(watched_with_alarm, owner):
    html = _page(owner.user)
    section = html[html.index('id="alarms"') :]
    assert "<dt>Abstention rate</dt>" in section and "<dt>Upper limit</dt>" in section
    assert "<dt>CUSUM above its limit and rising</dt>" in section
    assert not REPR.search(section), REPR.search(section)
    notices = Notification.objects.filter(subject__contains="Drift alarm")
    assert any("Abstention rate: " in notice.body for notice in notices)
    assert notices and not any(REPR.search(notice.body) for notice in notices)


def test_the_policy_history_says_what_changed_in_words(route, owner, reviewer, signing_window):
    sign_policy(route, owner.user, reviewer.user)
    sign_policy(route, owner.user, reviewer.user, cutoff=0.65, filters={"from": day_start(20).date().isoformat()})
    html = _page(owner.user, "/routes/it-support/policy/")
    history = html[html.index('id="history"') :]
    assert f'Evidence window: <span class="muted">all decisions</span> → from {day_start(20).date()}' in history
    assert 'Cutoff: <span class="muted">0.6</span> → 0.65' in history
    assert not REPR.search(history), REPR.search(history)


@pytest.fixture
def watched_with_alarm(route, owner, reviewer, integrator, signing_window):
    policy = sign_policy(route, owner.user, reviewer.user, filters={"to": day_start(11).date().isoformat()})
    for days_ago in range(6, 0, -1):
        post_day(integrator, days_ago=days_ago, scores=[0.3] * 150 + [0.9] * 50)
    monitor_run(actor=ACTOR)
    return policy
