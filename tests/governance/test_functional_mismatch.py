"""The trap of section 11.6, flagged where it bites (issue 31): a draft on a long route records the
harm model and the gate's functional, and a mean-support score under all-or-nothing harm carries a
blocking `functional_mismatch` warning with E[S] and Pr(S = 1) at the cutoff side by side."""

from __future__ import annotations

import pytest
from django.test import Client

from audit.models import AuditEvent
from console.governance.long_answers import is_mismatch
from console.governance.models import PolicyVersion
from tests.factories import ingest, long_record, recent, set_answer_settings
from tests.governance.conftest import draft_body

pytestmark = pytest.mark.django_db
POLICIES = "/api/v1/routes/it-support/policies"
CLAIMS = [f"Step {n} of the reset is documented." for n in range(1, 13)]


def _long_day(integrator, *, functional: str | None = None) -> None:
    """40 served answers of 12 claims, labelled: 21 fully supported, 19 with one unsupported claim,
    so E[S] = 461 / 480 = 0.960 while Pr(S = 1) = 21 / 40 = 0.525 (the chapter's shape: a mean near
    0.95 beside a full-support rate near a half)."""
    gate = {"name": "nli", "score": 0.9, "cutoff": 0.85} | ({"functional": functional} if functional else {})
    sent = [long_record(CLAIMS, gate=gate, occurred_at=recent()) for _ in range(40)]
    ingest(sent)
    labels = [
        {
            "route": "it-support",
            "request_id": r["request_id"],
            "source": "eval",
            "claims": [{"index": i, "verdict": _verdict(n, i)} for i in range(12)],
        }
        for n, r in enumerate(sent)
    ]
    assert integrator.post("/api/v1/labels", {"labels": labels}, format="json").status_code == 201


def _verdict(answer: int, claim: int) -> str:
    return "unsupported" if answer >= 21 and claim == 0 else "supported"


def _draft(reviewer) -> dict:
    response = reviewer.post(POLICIES, draft_body(), format="json")
    assert response.status_code == 201, response.content
    return response.json()


@pytest.mark.parametrize(
    ("harm_model", "functional", "mismatch"),
    [
        ("all_or_nothing", "expected_support", True),
        ("at_least", "expected_support", True),
        ("proportional", "p_fully_supported", True),
        ("all_or_nothing", "p_fully_supported", False),
        ("proportional", "expected_support", False),
        ("at_least", "p_support_at_least", False),
        ("all_or_nothing", "", False),
    ],
)
def test_which_functional_misreads_which_harm_model(harm_model, functional, mismatch):
    assert is_mismatch(harm_model, functional) is mismatch


def test_a_mean_support_gate_under_all_or_nothing_harm_carries_the_blocking_warning(route, reviewer, owner, integrator):
    set_answer_settings(route, answer_form="long", harm_model="all_or_nothing", gate_functional="expected_support")
    _long_day(integrator)
    draft = _draft(reviewer)
    [warning] = [w for w in draft["warnings"] if w["code"] == "functional_mismatch"]
    assert warning["level"] == "blocking"
    assert warning["expected_support"] == pytest.approx(461 / 480)
    assert warning["p_fully_supported"] == pytest.approx(0.525)
    assert "E[S] = 0.960" in warning["message"] and "Pr(S = 1) = 0.525" in warning["message"]
    recorded = draft["evidence"]["long_answers"]
    assert recorded["harm_model"] == "all_or_nothing" and recorded["gate_functional"] == "expected_support"
    assert recorded["mismatch"] is True and recorded["at_cutoff"]["graded_served_answers"] == 40


def test_the_decisions_own_functional_outranks_the_routes(route, reviewer, owner, integrator):
    set_answer_settings(route, answer_form="long", harm_model="all_or_nothing", gate_functional="p_fully_supported")
    _long_day(integrator, functional="expected_support")
    assert "functional_mismatch" in {w["code"] for w in _draft(reviewer)["warnings"]}


def test_a_matching_functional_carries_no_warning_and_unspecified_is_a_note(route, reviewer, owner, integrator):
    set_answer_settings(route, answer_form="long", harm_model="proportional", gate_functional="expected_support")
    _long_day(integrator)
    codes = {w["code"] for w in _draft(reviewer)["warnings"]}
    assert not codes & {"functional_mismatch", "functional_unspecified"}
    set_answer_settings(route, gate_functional="")
    [note] = [w for w in _draft(reviewer)["warnings"] if w["code"] == "functional_unspecified"]
    assert "level" not in note


def test_a_short_route_records_nothing_of_long_answers(route, reviewer, owner, integrator):
    _long_day(integrator, functional="expected_support")
    draft = _draft(reviewer)
    assert "long_answers" not in draft["evidence"]
    assert not {w["code"] for w in draft["warnings"]} & {"functional_mismatch", "functional_unspecified"}


@pytest.fixture
def mismatched(route, reviewer, owner, integrator) -> dict:
    set_answer_settings(route, answer_form="long", harm_model="all_or_nothing", gate_functional="expected_support")
    _long_day(integrator)
    return _draft(reviewer)


def test_signing_needs_the_warning_acknowledged_and_the_audit_event_records_it(mismatched, owner):
    url = f"/api/v1/policies/{mismatched['id']}/sign"
    refused = owner.post(url, {"evidence_sha256": mismatched["evidence_sha256"]}, format="json")
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "acknowledgement_required"
    assert refused.json()["error"]["details"][0]["warning"] == "functional_mismatch"
    assert PolicyVersion.objects.get(pk=mismatched["id"]).status == "draft"
    body = {"evidence_sha256": mismatched["evidence_sha256"], "acknowledge": ["functional_mismatch"]}
    assert owner.post(url, body, format="json").status_code == 200
    event = AuditEvent.objects.get(action="policy_signed")
    assert event.payload["acknowledged_warnings"] == ["functional_mismatch"]
    assert "functional_mismatch" in {w["code"] for w in event.payload["warnings"]}


def test_the_sign_page_shows_both_figures_and_asks_for_the_acknowledgement(mismatched, owner):
    page = Client()
    page.force_login(owner.user)
    url = f"/policies/{mismatched['id']}/sign/"
    shown = page.get(url).content.decode()
    assert 'id="warning-functional_mismatch"' in shown and 'name="acknowledge" value="functional_mismatch"' in shown
    assert 'id="mismatch-expected-support">0.960<' in shown and 'id="mismatch-p-fully-supported">0.525<' in shown
    form = {"evidence_sha256": mismatched["evidence_sha256"], "read_evidence": "yes", "password": "pw-12345678"}
    unticked = page.post(url, form)
    assert unticked.status_code == 400 and "acknowledge" in unticked.content.decode()
    assert PolicyVersion.objects.get(pk=mismatched["id"]).status == "draft"
    assert page.post(url, form | {"acknowledge": "functional_mismatch"}).status_code == 302
    assert PolicyVersion.objects.get(pk=mismatched["id"]).status == "active"


def test_the_route_policy_tells_the_gateway_the_functional_and_the_harm_model(mismatched, owner, integrator):
    body = {"evidence_sha256": mismatched["evidence_sha256"], "acknowledge": ["functional_mismatch"]}
    owner.post(f"/api/v1/policies/{mismatched['id']}/sign", body, format="json")
    policy = integrator.get("/api/v1/routes/it-support/policy").json()
    assert (policy["answer_form"], policy["harm_model"], policy["gate_functional"]) == (
        "long",
        "all_or_nothing",
        "expected_support",
    )
    assert policy["support_threshold"] is None


def test_the_warnings_figures_are_the_operating_points_figures_at_the_same_cutoff(route, reviewer, owner, integrator):
    """The warning reads the chosen operating-point row itself: its E[S], its Pr(S = 1) and its count
    of graded served answers with a verifiable claim, the answers those two are read over. Answers
    refused at the cutoff and answers with no verifiable claim are in the day, so a figure read off
    another set of answers would differ."""
    set_answer_settings(route, answer_form="long", harm_model="all_or_nothing", gate_functional="expected_support")
    _long_day(integrator)
    refused = [long_record(CLAIMS, gate={"name": "nli", "score": 0.6, "cutoff": 0.85}) for _ in range(6)]
    unverifiable = [long_record(CLAIMS, gate={"name": "nli", "score": 0.95, "cutoff": 0.85}) for _ in range(3)]
    refused = [r | {"outcome": "refused", "served_answer": None, "occurred_at": recent()} for r in refused]
    unverifiable = [r | {"occurred_at": recent()} for r in unverifiable]
    ingest(refused + unverifiable)
    labels = [
        {
            "route": "it-support",
            "request_id": r["request_id"],
            "source": "eval",
            "claims": [{"index": i, "verdict": verdict(i)} for i in range(12)],
        }
        for records, verdict in ((refused, lambda i: "unsupported"), (unverifiable, lambda i: "unverifiable"))
        for r in records
    ]
    assert integrator.post("/api/v1/labels", {"labels": labels}, format="json").status_code == 201
    draft = _draft(reviewer)
    [warning] = [w for w in draft["warnings"] if w["code"] == "functional_mismatch"]
    at_cutoff = draft["evidence"]["long_answers"]["at_cutoff"]
    table = owner.get("/api/v1/routes/it-support/operating-points?cutoffs=0.85").json()
    [row] = [r for r in table["rows"] if r["cutoff"] == 0.85]
    assert at_cutoff["figures_from"] == "operating_points"
    assert warning["expected_support"] == row["expected_support"]["value"] == at_cutoff["expected_support"]
    assert warning["p_fully_supported"] == row["p_fully_supported"]["value"] == at_cutoff["p_fully_supported"]
    assert at_cutoff["graded_served_answers"] == row["graded_served_verifiable"] == 40
    assert row["graded_served"] == 43
    assert draft["evidence"]["chosen_row"]["expected_support"] == row["expected_support"]
