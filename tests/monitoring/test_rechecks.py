"""Release rechecks: opened once per new combination of versions, with the policy marked, the owner
told and a sample planned; closed by the owner, audited."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from django.db import connections
from rest_framework.test import APIClient

from audit.models import AuditEvent
from console.governance.models import PolicyVersion
from console.monitoring.models import Recheck
from console.notify.models import Notification
from grading.models import GradingPlan
from tests.analysis.populations import decision_records
from tests.monitoring.conftest import VERSIONS, post_day

NEW_MODEL = dict(VERSIONS, model="gen-2026-12")


def test_traffic_on_the_signed_versions_opens_nothing(signed, integrator):
    post_day(integrator, days_ago=2, scores=[0.3, 0.7, 0.9], jobs=True)
    assert not Recheck.objects.exists()
    assert PolicyVersion.objects.get(pk=signed.pk).status == "active"


def test_a_new_model_opens_one_recheck_marks_the_policy_tells_the_owner_and_plans_a_sample(signed, integrator):
    post_day(integrator, days_ago=1, scores=[0.3, 0.7, 0.9], versions=NEW_MODEL, jobs=True)
    post_day(integrator, days_ago=0, scores=[0.2, 0.8], versions=NEW_MODEL, jobs=True)
    recheck = Recheck.objects.get()
    assert recheck.versions == NEW_MODEL and recheck.status == "open"
    assert PolicyVersion.objects.get(pk=signed.pk).status == "needs_recheck"
    mail = Notification.objects.get(subject__contains="Recheck opened")
    assert mail.recipient == signed.owner.email and mail.channel == "email"
    assert f"/routes/it-support/rechecks/{recheck.pk}/" in mail.body
    bands = recheck.plan["bands"]
    assert [b["measures"] for b in bands] == ["false_abstention", "wrong_served"]
    assert bands[0]["high"] == signed.cutoff and bands[1]["target"] == 385  # 1.96^2 * 0.25 / 0.05^2
    plan = GradingPlan.objects.get(route=signed.route)
    assert [(s["low"], s["high"], s["target"]) for s in plan.strata] == [
        (b["low"], b["high"], b["target"]) for b in bands
    ]
    opened = AuditEvent.objects.get(action="recheck_opened")
    assert opened.payload["policy_status"] == {"old": "active", "new": "needs_recheck"}
    assert AuditEvent.objects.filter(action="policy_needs_recheck").count() == 1


def test_each_new_combination_opens_its_own_recheck(signed, integrator):
    post_day(integrator, days_ago=1, scores=[0.3], versions=NEW_MODEL, jobs=True)
    post_day(integrator, days_ago=1, scores=[0.3], versions=dict(VERSIONS, corpus="snap-2026-12-01"), jobs=True)
    post_day(integrator, days_ago=0, scores=[0.4], versions=NEW_MODEL, jobs=True)
    assert Recheck.objects.count() == 2


def test_a_route_without_a_signed_policy_opens_no_recheck(integrator, signing_window):
    post_day(integrator, days_ago=1, scores=[0.3], versions=NEW_MODEL, jobs=True)
    assert not Recheck.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_ingest_opens_the_recheck_exactly_once(route, owner, reviewer, integrator):
    from tests.monitoring.conftest import sign_policy

    rng = np.random.default_rng(1)
    post_day(integrator, days_ago=5, scores=np.round(rng.beta(4, 2, 120), 3), correct=rng.random(120) < 0.7)
    policy = sign_policy(route, owner.user, reviewer.user)
    batches = [decision_records([0.2, 0.5, 0.8], versions=NEW_MODEL) for _ in range(6)]
    barrier = threading.Barrier(len(batches))
    statuses: list = [None] * len(batches)

    def run(index: int) -> None:
        try:
            client = APIClient()
            client.force_authenticate(integrator.user)
            barrier.wait()
            statuses[index] = client.post("/api/v1/decisions", {"decisions": batches[index]}, format="json").status_code
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(batches))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert statuses == [201] * len(batches)
    assert Recheck.objects.filter(policy=policy).count() == 1
    assert AuditEvent.objects.filter(action="recheck_opened").count() == 1
    assert Notification.objects.filter(subject__contains="Recheck opened").count() == 1
    assert PolicyVersion.objects.get(pk=policy.pk).status == "needs_recheck"


def test_the_owner_accepts_unchanged_with_a_note_and_the_policy_is_active_again(signed, integrator, owner, grader):
    post_day(integrator, days_ago=1, scores=[0.3, 0.7], versions=NEW_MODEL, jobs=True)
    recheck = Recheck.objects.get()
    from tests.monitoring.conftest import client_for

    body = {"resolution": "accepted", "note": "x"}
    # A grader does not read the route's policy (404); an integrator reads it but may not close (403).
    assert client_for(grader.user).post(f"/api/v1/rechecks/{recheck.pk}/close", body, format="json").status_code == 404
    assert integrator.post(f"/api/v1/rechecks/{recheck.pk}/close", body, format="json").status_code == 403
    no_note = owner.post(f"/api/v1/rechecks/{recheck.pk}/close", {"resolution": "accepted"}, format="json")
    assert no_note.status_code == 400
    response = owner.post(
        f"/api/v1/rechecks/{recheck.pk}/close",
        {"resolution": "accepted", "note": "Tokenizer-only upgrade."},
        format="json",
    )
    assert response.status_code == 200, response.json()
    assert response.json()["status"] == "closed" and response.json()["resolution"] == "accepted"
    assert PolicyVersion.objects.get(pk=signed.pk).status == "active"
    closed = AuditEvent.objects.get(action="recheck_closed")
    assert closed.payload["note"] == "Tokenizer-only upgrade." and closed.actor.endswith("/owner")
    again = owner.post(
        f"/api/v1/rechecks/{recheck.pk}/close", {"resolution": "accepted", "note": "again"}, format="json"
    )
    assert again.status_code == 409


def test_closing_by_a_new_signature_names_the_version(signed, integrator, owner, reviewer, route):
    from tests.monitoring.conftest import sign_policy

    post_day(integrator, days_ago=1, scores=[0.3, 0.7], versions=NEW_MODEL, jobs=True)
    recheck = Recheck.objects.get()
    assert (
        owner.post(
            f"/api/v1/rechecks/{recheck.pk}/close", {"resolution": "signed", "policy_version": signed.pk}, format="json"
        ).status_code
        == 400
    )  # signed before it opened
    newer = sign_policy(route, owner.user, reviewer.user, cutoff=0.55)
    # The signature itself closes the superseded version's recheck, naming the new version.
    closed = owner.get(f"/api/v1/rechecks/{recheck.pk}").json()
    assert (closed["status"], closed["resolution"], closed["new_policy"]) == ("closed", "signed", newer.pk)
    response = owner.post(
        f"/api/v1/rechecks/{recheck.pk}/close", {"resolution": "signed", "policy_version": newer.pk}, format="json"
    )
    assert response.status_code == 409
    assert PolicyVersion.objects.get(pk=signed.pk).status == "superseded"


def test_the_owner_resizes_the_recheck_sample_and_the_grading_plan_follows(signed, integrator, owner, grader, client):
    post_day(integrator, days_ago=1, scores=[0.3, 0.7], versions=NEW_MODEL, jobs=True)
    recheck = Recheck.objects.get()
    url = f"/routes/it-support/rechecks/{recheck.pk}/plan/"
    client.force_login(owner.user)
    page = client.get(f"/routes/it-support/rechecks/{recheck.pk}/").content.decode()
    assert "Sized for ±5 points" in page and 'id="plan-form"' in page
    assert client.post(url, {"half_width_points": "10"}).status_code == 302
    recheck.refresh_from_db()
    assert recheck.plan["half_width"] == pytest.approx(0.10)
    assert recheck.plan["bands"][1]["target"] == 97  # 1.96^2 * 0.25 / 0.10^2 = 96.04, rounded up
    plan = GradingPlan.objects.get(route=signed.route)
    assert [s["target"] for s in plan.strata] == [b["target"] for b in recheck.plan["bands"]]
    adjusted = AuditEvent.objects.get(action="recheck_plan_adjusted")
    assert adjusted.payload["plan"]["old"]["half_width"] == pytest.approx(0.05)
    assert adjusted.payload["plan"]["new"]["half_width"] == pytest.approx(0.10)
    for bad in ("0", "nan", "80", "five"):
        client.post(url, {"half_width_points": bad})
    recheck.refresh_from_db()
    assert recheck.plan["half_width"] == pytest.approx(0.10)  # refused, not applied
    client.force_login(grader.user)
    assert client.post(url, {"half_width_points": "20"}).status_code == 404


def test_a_closed_recheck_keeps_its_sample(signed, integrator, owner):
    from audit.services import Actor
    from console.core.errors import Conflict
    from console.monitoring.services.rechecks import recheck_close, recheck_plan_adjust

    post_day(integrator, days_ago=1, scores=[0.3, 0.7], versions=NEW_MODEL, jobs=True)
    recheck = Recheck.objects.get()
    actor = Actor.system("tests")
    recheck_close(actor=actor, user=owner.user, recheck=recheck, resolution="accepted", note="fine")
    with pytest.raises(Conflict):
        recheck_plan_adjust(actor=actor, user=owner.user, recheck=recheck, half_width=0.1)
