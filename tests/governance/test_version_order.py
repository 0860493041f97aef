"""Signing a draft older than the version in force is a roll-back, refused unless asked for."""

from __future__ import annotations

import pytest
from django.test import Client

from audit.models import AuditEvent
from console.governance.models import PolicyVersion
from tests.governance.conftest import draft_body

pytestmark = pytest.mark.django_db


def _sign(owner, policy: dict, **extra):
    return owner.post(
        f"/api/v1/policies/{policy['id']}/sign", {"evidence_sha256": policy["evidence_sha256"], **extra}, format="json"
    )


@pytest.fixture
def v2_in_force_v1_waiting(draft, reviewer, owner):
    """v1 drafted, then v2 drafted and signed: v1 is a draft older than the version in force."""
    second = reviewer.post("/api/v1/routes/it-support/policies", draft_body(cutoff=0.9), format="json").json()
    assert _sign(owner, second).status_code == 200
    return draft, second


def _statuses() -> dict[int, str]:
    return dict(PolicyVersion.objects.values_list("version", "status"))


def test_signing_a_draft_older_than_the_version_in_force_is_409_and_signs_nothing(v2_in_force_v1_waiting, owner):
    v1, v2 = v2_in_force_v1_waiting
    response = _sign(owner, v1)
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "older_than_in_force"
    [detail] = error["details"]
    assert detail["field"] == "roll_back" and detail["code"] == "older_than_in_force"
    assert detail["in_force"] == {"id": v2["id"], "version": 2, "cutoff": 0.9}
    assert detail["draft"]["version"] == 1
    assert _statuses() == {1: "draft", 2: "active"}
    assert not AuditEvent.objects.filter(action="policy_rolled_back").exists()
    assert _sign(owner, v1, roll_back=False).status_code == 409


def test_an_explicit_roll_back_signs_the_older_draft_and_is_audited_as_a_roll_back(v2_in_force_v1_waiting, owner):
    v1, v2 = v2_in_force_v1_waiting
    signed_before = AuditEvent.objects.filter(action="policy_signed").count()
    response = _sign(owner, v1, roll_back=True)
    assert response.status_code == 200 and response.json()["status"] == "active"
    assert _statuses() == {1: "active", 2: "superseded"}
    event = AuditEvent.objects.get(action="policy_rolled_back")
    assert event.object_id == str(v1["id"]) and event.payload["rolled_back_from"] == {"id": v2["id"], "version": 2}
    assert event.payload["evidence_sha256"] == v1["evidence_sha256"]
    assert AuditEvent.objects.filter(action="policy_signed").count() == signed_before  # its own action
    superseded = AuditEvent.objects.filter(action="policy_superseded", object_id=str(v2["id"])).get()
    assert superseded.payload["by_version"] == 1


def test_roll_back_must_be_true_or_false(v2_in_force_v1_waiting, owner):
    v1, _ = v2_in_force_v1_waiting
    response = _sign(owner, v1, roll_back="yes")
    assert response.status_code == 400 and response.json()["error"]["details"][0]["field"] == "roll_back"
    assert _statuses() == {1: "draft", 2: "active"}


def test_a_draft_made_after_the_signature_needs_no_roll_back(v2_in_force_v1_waiting, reviewer, owner):
    third = reviewer.post("/api/v1/routes/it-support/policies", draft_body(cutoff=0.8), format="json").json()
    assert _sign(owner, third).status_code == 200
    assert _statuses() == {1: "draft", 2: "superseded", 3: "active"}
    assert not AuditEvent.objects.filter(action="policy_rolled_back").exists()


def test_the_browser_asks_for_a_separate_confirmation_that_names_both_versions(v2_in_force_v1_waiting, owner):
    v1, _ = v2_in_force_v1_waiting
    page = Client()
    page.force_login(owner.user)
    url = f"/policies/{v1['id']}/sign/"
    shown = page.get(url).content.decode()
    assert 'id="older-than-in-force"' in shown and "drafted before version 2 in force" in shown
    form = {"evidence_sha256": v1["evidence_sha256"], "read_evidence": "yes", "password": "pw-12345678"}
    confirm = page.post(url, form)
    html = confirm.content.decode()
    assert confirm.status_code == 409 and 'id="roll-back-form"' in html
    assert "Roll back from version 2 to version 1?" in html
    assert '<td class="num">0.9</td><td class="num">0.85</td>' in html  # both cutoffs side by side
    assert _statuses() == {1: "draft", 2: "active"}
    wrong = page.post(url, form | {"roll_back": "yes", "password": "wrong"})
    assert wrong.status_code == 400 and 'id="roll-back-form"' in wrong.content.decode()
    assert _statuses() == {1: "draft", 2: "active"}
    done = page.post(url, form | {"roll_back": "yes"})
    assert done.status_code == 302 and done["Location"] == "/routes/it-support/policy/"
    assert _statuses() == {1: "active", 2: "superseded"}
    assert AuditEvent.objects.filter(action="policy_rolled_back", object_id=str(v1["id"])).count() == 1
    assert "in place of version 2" in page.get("/routes/it-support/policy/").content.decode()
