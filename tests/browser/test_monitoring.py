"""An owner reads route health on the dashboard, follows the alarm link to the monitoring page with
its charts, and acknowledges the alarm with a note."""

from datetime import timedelta

import numpy as np
import pytest

from audit.services import Actor
from console.monitoring.models import Alarm
from console.monitoring.services.alarms import monitor_run
from tests.analysis.populations import decision_records, label
from tests.factories import ingest, make_route, make_user
from tests.monitoring.conftest import day_start, iso, sign_policy

pytestmark = pytest.mark.django_db(transaction=True)


def _day(rng, days_ago: int, shift: float = 0.0, labelled: bool = False) -> None:
    scores = np.clip(np.round(rng.beta(4, 2, 60) - shift, 3), 0, 1)
    ids = ingest(decision_records(scores, occurred_at=iso(day_start(days_ago) + timedelta(hours=12))))
    if labelled:
        for decision_id, score in zip(ids, scores, strict=True):
            label(int(decision_id), bool(rng.random() < 0.2 + 0.7 * score))


def test_an_owner_follows_the_alarm_from_the_dashboard_and_acknowledges_it(sign_in, live_server):
    route = make_route("it-support", "IT support")
    owner = make_user("owner", "policy_owner", route)
    reviewer = make_user("rita", "reviewer", route)
    rng = np.random.default_rng(3)
    for d in range(15, 5, -1):
        _day(rng, d, labelled=True)
    sign_policy(route, owner, reviewer, filters={"to": day_start(6).date().isoformat()})
    for d in (5, 4, 3):
        _day(rng, d)
    for d in (2, 1):
        _day(rng, d, shift=0.3)
    monitor_run(actor=Actor.system("tests"))
    assert Alarm.objects.filter(kind="abstention", status="open").exists()

    page = sign_in("owner")
    page.goto(f"{live_server.url}/")
    panel = page.locator("#health-it-support")
    assert "cutoff 0.6" in panel.inner_text()
    panel.locator("a[href$='#alarms']").click()
    page.wait_for_selector("svg.monitor-abstention")
    assert page.locator("svg.monitor-scores").is_visible()
    row = page.locator("#alarms tr", has_text="Abstention at the signed cutoff")
    row.locator("input[name=note]").fill("New model, recheck under way.")
    row.locator("button:has-text('Acknowledge')").click()
    page.wait_for_selector("text=Alarm acknowledged.")
    assert "acknowledged" in page.locator("#alarms").inner_text()
    assert Alarm.objects.get(kind="abstention").closed_reason == "acknowledged"
