"""The demo shows a release recheck and a drift alarm on IT support."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from console.governance.models import PolicyVersion
from console.monitoring.models import Alarm, Recheck
from console.monitoring.selectors import recheck_report


@pytest.mark.django_db
def test_the_demo_has_an_open_recheck_after_a_model_upgrade_and_a_drift_alarm(tmp_path, settings):
    settings.DATA_DIR = tmp_path
    call_command("load_demo", decisions=300)
    recheck = Recheck.objects.get(route__slug="it-support")
    assert recheck.status == "open" and recheck.versions["model"] == "gen-2026-12"
    assert recheck.plan["bands"][0]["target"] > 0
    assert (
        PolicyVersion.objects.get(route__slug="it-support", status__in=["active", "needs_recheck"]).status
        == "needs_recheck"
    )
    report = recheck_report(recheck)
    assert report["abstention"]["difference"]["low"] > 0  # visibly higher abstention on the new model
    assert Alarm.objects.filter(route__slug="it-support", kind="abstention", status="open").count() == 1
