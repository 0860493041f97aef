"""A draft's evidence is a snapshot as of an instant: traffic and background jobs after it never
stop its owner from signing it, it can be derived again byte for byte, and the check names what
changed when a label it counts was written again."""

from __future__ import annotations

import hashlib
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from audit.models import AuditEvent
from console.governance import evidence as evidence_module
from console.governance.models import PolicyVersion
from grading.models import FinalLabel
from tests.analysis.populations import decision_records, label, post_decisions
from tests.factories import recent
from tests.governance.conftest import draft_body

pytestmark = pytest.mark.django_db


def _sign(owner, policy: dict):
    return owner.post(
        f"/api/v1/policies/{policy['id']}/sign", {"evidence_sha256": policy["evidence_sha256"]}, format="json"
    )


def _draft(reviewer, **overrides) -> dict:
    response = reviewer.post("/api/v1/routes/it-support/policies", draft_body(**overrides), format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def test_each_draft_signs_on_the_first_attempt_while_decisions_keep_arriving(reviewer, owner, integrator, graded):
    for round_number, cutoff in enumerate((0.8, 0.85, 0.9), start=1):
        post_decisions(integrator, decision_records([0.2, 0.75, 0.95]))
        policy = _draft(reviewer, cutoff=cutoff)
        post_decisions(integrator, decision_records([0.4, 0.88]))
        new_ids = post_decisions(integrator, decision_records([0.6]))
        label(new_ids[0], True)
        response = _sign(owner, policy)
        assert response.status_code == 200, (round_number, response.json())
        assert response.json()["status"] == "active"
        post_decisions(integrator, decision_records([0.1]))
    assert list(PolicyVersion.objects.order_by("version").values_list("status", flat=True)) == [
        "superseded",
        "superseded",
        "active",
    ]
    assert not AuditEvent.objects.filter(action="policy_evidence_refreshed").exists()


def test_background_jobs_between_draft_and_sign_do_not_stop_the_signature(reviewer, owner, integrator, graded, route):
    from console.analysis.tasks import stats_recompute, stats_refresh_stale
    from console.shadow.models import ShadowRun
    from console.shadow.tasks import shadow_run_execute, shadow_runs_sweep
    from grading.tasks import grading_pool_sweep

    policy = _draft(reviewer)
    post_decisions(integrator, decision_records([0.1, 0.2, 0.3]))
    shadow_runs_sweep()
    for run_id in ShadowRun.objects.values_list("pk", flat=True):
        shadow_run_execute(run_id)
    grading_pool_sweep()
    stats_recompute(route.pk)
    stats_refresh_stale()
    assert _sign(owner, policy).status_code == 200


def test_the_evidence_is_derived_again_byte_for_byte_from_its_as_of(reviewer, owner, integrator, graded, auditor):
    policy = _draft(reviewer, certification={"alpha": 0.1})
    stored = PolicyVersion.objects.get(pk=policy["id"])
    assert policy["as_of"] == policy["evidence"]["as_of"] == evidence_module.as_of_text(stored.evidence_as_of)
    # Later decisions, later labels, a refreshed statistics cache: none of it enters the snapshot.
    later = post_decisions(integrator, decision_records([0.05, 0.5, 0.97]))
    label(later[0], False)
    reviewer.get("/api/v1/routes/it-support/operating-points")
    again = evidence_module.recompute_stored(stored, as_of=stored.evidence_as_of)
    assert again.text == stored.evidence_text and again.sha256 == stored.evidence_sha256
    assert _sign(owner, policy).status_code == 200
    check = auditor.get(f"/api/v1/policies/{policy['id']}/evidence-check").json()
    assert check["matches"] is True and check["differences"] == [] and check["labels_changed_since"] == []
    assert check["recomputed_sha256"] == check["evidence_sha256"] == policy["evidence_sha256"]
    assert check["as_of"] == policy["as_of"]


def test_the_evidence_carries_nothing_of_the_moment_it_was_computed(draft):
    document = json.loads(draft["evidence_text"])
    assert "data_version" not in document and "computed_at" not in document["operating_points"]
    assert "data_version" not in json.dumps(document)
    assert document["graded_sample"]["labels"] == 300


def test_the_check_names_the_figures_and_the_label_changed_after_as_of(draft, auditor):
    decision_id = FinalLabel.objects.order_by("decision_id").values_list("decision_id", flat=True).first()
    was = FinalLabel.objects.get(decision_id=decision_id).correct
    FinalLabel.objects.filter(decision_id=decision_id).update(correct=not was)
    check = auditor.get(f"/api/v1/policies/{draft['id']}/evidence-check").json()
    assert check["matches"] is False and check["recomputed_sha256"] != check["evidence_sha256"]
    paths = {difference["path"] for difference in check["differences"]}
    assert "graded_sample.sha256" in paths
    assert any(path.startswith("operating_points.rows[") for path in paths)
    assert check["labels_changed_since"] == [
        {
            "decision_id": decision_id,
            "verdict_now": "incorrect" if was else "correct",
            "method": "imported",
            "source": "offline-eval",
            "decided_at": check["labels_changed_since"][0]["decided_at"],
        }
    ]
    # The stored evidence is untouched: what was read is still what signs.
    assert PolicyVersion.objects.get(pk=draft["id"]).evidence_sha256 == draft["evidence_sha256"]


def test_the_management_command_checks_a_version_or_a_route(draft):
    out = StringIO()
    call_command("policy_evidence_check", str(draft["id"]), stdout=out)
    assert "matches" in out.getvalue() and draft["evidence_sha256"] in out.getvalue()
    changed = FinalLabel.objects.order_by("decision_id").first()
    FinalLabel.objects.filter(pk=changed.pk).update(correct=not changed.correct)
    out = StringIO()
    with pytest.raises(CommandError, match="1 of 1 versions"):
        call_command("policy_evidence_check", "--route", "it-support", stdout=out)
    assert "DIFFERS" in out.getvalue() and "graded_sample.sha256" in out.getvalue()
    assert "written again after as_of" in out.getvalue()


def test_arrivals_since_as_of_are_counted_and_warned_about_above_the_threshold(draft, owner, integrator):
    url = f"/api/v1/policies/{draft['id']}"
    assert draft["arrived_since"] | {"as_of": None} == {
        "as_of": None,
        "decisions": 0,
        "final_labels": 0,
        "thresholds": {"decisions": 100, "final_labels": 30},  # floors: 100 decisions; 10% of 300 labels
        "warning": None,
    }
    ids = post_decisions(integrator, decision_records([0.5] * 99))
    for decision_id in ids[:29]:
        label(decision_id, True)
    since = owner.get(url).json()["arrived_since"]
    assert (since["decisions"], since["final_labels"], since["warning"]) == (99, 29, None)
    # The hundredth decision and the thirtieth label reach the thresholds.
    label(post_decisions(integrator, decision_records([0.5]))[0], False)
    body = owner.get(url).json()
    assert body["arrived_since"]["decisions"] == 100 and body["arrived_since"]["final_labels"] == 30
    codes = [warning["code"] for warning in body["warnings"]]
    assert codes.count("evidence_behind_traffic") == 1
    assert "evidence_behind_traffic" not in {w["code"] for w in body["evidence"]["warnings"]}
    assert body["evidence_sha256"] == draft["evidence_sha256"]
    assert _sign(owner, body).status_code == 200
    signed = AuditEvent.objects.get(action="policy_signed")
    assert signed.payload["arrived_since"] == {"decisions": 100, "final_labels": 30}
    assert signed.payload["as_of"] == draft["as_of"]
    assert "evidence_behind_traffic" in {w["code"] for w in signed.payload["warnings"]}


def test_arrivals_count_only_inside_the_evidence_window(reviewer, owner, integrator, graded):
    policy = _draft(reviewer, filters={"from": None, "to": "2026-11-01"})
    post_decisions(integrator, decision_records([0.5, 0.6], occurred_at=recent()))  # after the window's last day
    post_decisions(integrator, decision_records([0.7]))  # on its last day: counted
    assert owner.get(f"/api/v1/policies/{policy['id']}").json()["arrived_since"]["decisions"] == 1


def test_recomputing_is_deliberate_and_audited_and_the_old_hash_no_longer_signs(draft, owner, integrator, auditor):
    post_decisions(integrator, decision_records([0.3, 0.9]))
    assert auditor.post(f"/api/v1/policies/{draft['id']}/recompute-evidence").status_code == 403
    response = owner.post(f"/api/v1/policies/{draft['id']}/recompute-evidence")
    assert response.status_code == 200, response.json()
    fresh = response.json()
    assert fresh["as_of"] > draft["as_of"] and fresh["evidence_sha256"] != draft["evidence_sha256"]
    assert fresh["evidence"]["operating_points"]["population"] == 302
    assert fresh["arrived_since"]["decisions"] == 0
    assert hashlib.sha256(fresh["evidence_text"].encode()).hexdigest() == fresh["evidence_sha256"]
    event = AuditEvent.objects.get(action="policy_evidence_refreshed")
    assert event.object_id == str(draft["id"]) and event.actor.endswith("/owner") and event.route == "it-support"
    assert event.payload["evidence_sha256"] == {"old": draft["evidence_sha256"], "new": fresh["evidence_sha256"]}
    assert event.payload["as_of"] == {"old": draft["as_of"], "new": fresh["as_of"]}
    stale = _sign(owner, draft)
    assert stale.status_code == 409 and stale.json()["error"]["code"] == "evidence_changed"
    [detail] = stale.json()["error"]["details"]
    assert detail["field"] == "evidence_sha256" and detail["evidence_sha256"] == fresh["evidence_sha256"]
    assert _sign(owner, fresh).status_code == 200
    again = owner.post(f"/api/v1/policies/{draft['id']}/recompute-evidence")
    assert again.status_code == 409 and again.json()["error"]["code"] == "not_draft"
    check = auditor.get(f"/api/v1/policies/{draft['id']}/evidence-check").json()
    assert check["matches"] is True


def test_the_sign_page_shows_the_snapshot_its_arrivals_and_recomputes_on_request(draft, owner, integrator):
    page = Client()
    page.force_login(owner.user)
    url = f"/policies/{draft['id']}/sign/"
    post_decisions(integrator, decision_records([0.3, 0.9, 0.95]))
    shown = page.get(url).content.decode()
    assert draft["as_of"] in shown and 'id="decisions-since">3<' in shown
    assert "Recompute the evidence now" in shown
    done = page.post(f"/policies/{draft['id']}/recompute-evidence/")
    assert done.status_code == 302 and done["Location"] == url
    assert AuditEvent.objects.filter(action="policy_evidence_refreshed", object_id=str(draft["id"])).count() == 1
    stored = PolicyVersion.objects.get(pk=draft["id"])
    shown = page.get(url).content.decode()
    assert stored.evidence_sha256 in shown and 'id="decisions-since">0<' in shown
    form = {"evidence_sha256": stored.evidence_sha256, "read_evidence": "yes", "password": "pw-12345678"}
    assert page.post(url, form).status_code == 302
