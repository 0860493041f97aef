"""Rechecks and alarms of a version are closed, audited, when a signature takes it out of force."""

from __future__ import annotations

import pytest

from audit.models import AuditEvent
from audit.services import Actor
from console.governance.models import PolicyVersion
from console.monitoring.models import Alarm, Recheck
from console.monitoring.services.alarms import monitor_run
from tests.governance.conftest import draft_body
from tests.monitoring.conftest import VERSIONS, post_day

NEW_MODEL = dict(VERSIONS, model="gen-2026-12")


@pytest.fixture
def watched(signed, integrator):
    """v1 in force with an open recheck (a new model) and an open abstention alarm (days all refused)."""
    for days_ago in range(6, 0, -1):
        post_day(integrator, days_ago=days_ago, scores=[0.3] * 100, versions=NEW_MODEL, jobs=True)
    monitor_run(actor=Actor.system("tests"))
    assert Recheck.objects.filter(policy=signed, status="open").count() == 1
    assert Alarm.objects.filter(policy=signed, status="open", kind="abstention").exists()
    return signed


def _sign(owner, policy: dict, **extra):
    url, sha = f"/api/v1/policies/{policy['id']}/sign", policy["evidence_sha256"]
    response = owner.post(url, {"evidence_sha256": sha, **extra}, format="json")
    if response.status_code == 409 and response.json()["error"]["code"] == "evidence_changed":
        # Decisions arrived since the draft: sign the evidence as it reads now (not what this test is about).
        sha = response.json()["error"]["details"][0]["evidence_sha256"]
        response = owner.post(url, {"evidence_sha256": sha, **extra}, format="json")
    assert response.status_code == 200, response.json()
    return response.json()


def _left_open_on(policy_id: int) -> int:
    return (
        Recheck.objects.filter(policy_id=policy_id, status="open").count()
        + Alarm.objects.filter(policy_id=policy_id, status="open").count()
    )


def test_signing_a_new_version_closes_the_rechecks_and_alarms_of_the_one_it_supersedes(watched, reviewer, owner):
    new = reviewer.post("/api/v1/routes/it-support/policies", draft_body(cutoff=0.5), format="json").json()
    _sign(owner, new)
    assert PolicyVersion.objects.get(pk=watched.pk).status == "superseded"
    assert _left_open_on(watched.pk) == 0
    recheck = Recheck.objects.get(policy=watched)
    assert recheck.resolution == "signed" and recheck.new_policy_id == new["id"]
    assert recheck.closed_by.username == "owner" and "v1" in recheck.note and "v2" in recheck.note
    alarms = Alarm.objects.filter(policy=watched)
    assert alarms and all(a.closed_reason == "superseded" and "replaced by v2" in a.note for a in alarms)
    closed = AuditEvent.objects.filter(action="recheck_closed", object_id=str(recheck.pk)).get()
    assert closed.payload["reason"] == "superseded" and closed.payload["policy_version"] == {"old": 1, "new": 2}
    assert AuditEvent.objects.filter(action="alarm_closed", payload__reason="superseded").count() == alarms.count()
    # The monitoring page lists them as closed, the API as well.
    listed = reviewer.get("/api/v1/routes/it-support/alarms").json()["alarms"]
    assert {a["status"] for a in listed} == {"closed"}


def test_a_roll_back_closes_those_of_the_newer_version_it_replaces(signing_window, reviewer, owner, integrator):
    older = reviewer.post("/api/v1/routes/it-support/policies", draft_body(cutoff=0.6), format="json").json()
    newer = reviewer.post("/api/v1/routes/it-support/policies", draft_body(cutoff=0.65), format="json").json()
    _sign(owner, newer)
    post_day(integrator, days_ago=0, scores=[0.3] * 5, versions=NEW_MODEL, jobs=True)
    assert Recheck.objects.filter(policy_id=newer["id"], status="open").count() == 1
    _sign(owner, older, roll_back=True)
    assert _left_open_on(newer["id"]) == 0
    recheck = Recheck.objects.get(policy_id=newer["id"])
    assert recheck.new_policy_id == older["id"] and "rolled back to v1" in recheck.note
    assert AuditEvent.objects.filter(action="recheck_closed", object_id=str(recheck.pk)).count() == 1
