"""Trials from the outside: a stand-in candidate with planted verdicts over a graded route."""

from __future__ import annotations

import pytest
from django.test import Client
from rest_framework.test import APIClient
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint

from audit.models import AuditEvent
from console.trials import candidates
from console.trials.models import CallStatus, Candidate, Trial, TrialCall
from tests import factories
from tests.jobs_inline import run_jobs
from tests.trials.conftest import graded_items
from tests.trials.standin import StandInCandidate

A, P, C, X = "answer", "answer_partially", "surface_conflict", "abstain"


def _browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _client_of(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {factories.make_token(user)}")
    return client


def _start(client, body, slug="it-support"):
    with run_jobs():
        response = client.post(f"/api/v1/routes/{slug}/gate-trials", body, format="json")
    assert response.status_code == 202, response.json()
    return response.json()["id"]


def test_planted_verdicts_give_the_expected_counts_gates_and_call_count(route, reviewer, trial_body):
    # (label correct, gate score) with the candidate's three replies; logged cutoff 0.7.
    rows = [
        ((False, 0.9), [A, A, A]),  # unsafe full answer; current gate also serves it
        ((False, 0.5), [A, A, X]),  # unsafe (majority answer); current refuses
        ((False, 0.8), [X, X, X]),  # current serves (unsafe for the current gate)
        ((False, 0.2), [C, C, C]),
        ((True, 0.95), [A, A, A]),  # covered by both
        ((True, 0.75), [P, P, P]),  # current covers
        ((True, 0.4), [A, X, A]),  # covered by the candidate only
        ((True, 0.3), [A, P, C]),  # three-way tie -> surface_conflict (more cautious than partial)
        ((True, 0.85), [X, X, A]),  # current covers
        ((True, 0.72), [A, A, A]),  # both cover
    ]
    items = graded_items([spec for spec, _ in rows])
    plan = {item.request_id: replies for item, (_, replies) in zip(items, rows, strict=True)}
    with StandInCandidate(plan) as standin:
        trial_id = _start(reviewer, trial_body(standin.url))
        assert sum(standin.calls_per_request().values()) == 30
        assert set(standin.calls_per_request().values()) == {3}
        body = standin.bodies[0]
        assert set(body) == {"request_id", "question", "passages", "draft_answer"}
    doc = reviewer.get(f"/api/v1/gate-trials/{trial_id}").json()
    assert doc["status"] == "done" and doc["items"] == 10 and doc["repeats"] == 3
    assert doc["calls"] == {"made": 30, "errors": 0, "total": 30}
    cand = doc["candidate"]
    assert (cand["unsafe_full_answers"]["count"], cand["unsafe_full_answers"]["n"]) == (2, 4)
    low, high = proportion_confint(2, 4, method="wilson")
    assert cand["unsafe_full_answers"]["low"] == pytest.approx(low)
    assert cand["unsafe_full_answers"]["high"] == pytest.approx(high)
    assert (cand["coverage"]["count"], cand["coverage"]["n"]) == (3, 6)
    assert (cand["partial"]["count"], cand["partial"]["n"]) == (1, 10)
    assert (cand["conflict"]["count"], cand["conflict"]["n"]) == (2, 10)
    assert (cand["stability"]["count"], cand["stability"]["n"]) == (6, 10)
    assert cand["citation_errors"] == 0
    current = doc["current"]
    assert (current["unsafe_full_answers"]["count"], current["coverage"]["count"]) == (2, 4)
    assert current["cutoff"] is None and current["cutoff_source"] == "logged"
    # answer vs not, paired: candidate answers items 0,1,4,6,9; the current gate 0,2,4,5,8,9.
    b, c = 2, 3  # candidate only: 1, 6; current only: 2, 5, 8
    assert doc["mcnemar"]["p_value"] == pytest.approx(mcnemar([[3, b], [c, 2]], exact=True).pvalue)
    gates = {g["name"]: g for g in doc["gates"]}
    assert gates["max_unsafe_upper"]["value"] == pytest.approx(high) and not gates["max_unsafe_upper"]["passed"]
    assert gates["min_coverage"]["threshold"] == pytest.approx(4 / 6) and not gates["min_coverage"]["passed"]
    assert gates["min_stability"]["value"] == pytest.approx(0.6) and not gates["min_stability"]["passed"]
    assert gates["max_citation_errors"]["passed"]
    assert doc["passed"] is False
    assert len(doc["sha256"]) == 64
    actions = list(
        AuditEvent.objects.filter(object_type="trial", object_id=str(trial_id)).values_list("action", "route")
    )
    assert actions == [("trial_started", "it-support"), ("trial_finished", "it-support")]


def test_a_flaky_candidate_gives_the_expected_stability(route, reviewer, trial_body):
    items = graded_items([(True, 0.9)] * 8)
    flips = {0: [A, X, A, X], 1: [A, A, X], 2: [P, A, A, P]}
    plan = {item.request_id: flips.get(i, [A]) for i, item in enumerate(items)}
    with StandInCandidate(plan) as standin:
        trial_id = _start(reviewer, trial_body(standin.url, repeats=4))
    doc = reviewer.get(f"/api/v1/gate-trials/{trial_id}").json()
    assert doc["calls"]["made"] == 32
    assert (doc["candidate"]["stability"]["count"], doc["candidate"]["stability"]["n"]) == (5, 8)
    # Item 0 ties 2-2 between answer and abstain: it counts as abstain; item 2 ties answer/partial: partial.
    assert doc["candidate"]["coverage"]["count"] == 6
    assert doc["candidate"]["partial"]["count"] == 1


def test_errors_are_recorded_as_errors_never_as_abstentions(route, reviewer, trial_body):
    items = graded_items([(True, 0.9), (True, 0.9), (False, 0.9), (False, 0.9), (True, 0.9)])
    plan = {
        items[0].request_id: ["500", "malformed", "unknown"],  # every call errored: left out
        items[1].request_id: [A, "slow", A],  # one timeout; still a full answer
        items[2].request_id: ["cite-unknown", X, X],  # a citation error
        items[3].request_id: ["cite-unknown", "cite-unknown", A],
        items[4].request_id: [A, A, A],
    }
    with StandInCandidate(plan, slow_seconds=1.5) as standin:
        trial_id = _start(reviewer, trial_body(standin.url, timeout_s=0.3))
    doc = reviewer.get(f"/api/v1/gate-trials/{trial_id}").json()
    assert doc["calls"] == {"made": 15, "errors": 7, "total": 15}
    assert doc["items_judged"] == 4 and doc["items_all_errored"] == 1
    cand = doc["candidate"]
    assert cand["citation_errors"] == 3
    assert (cand["coverage"]["count"], cand["coverage"]["n"]) == (2, 2)
    assert (cand["unsafe_full_answers"]["count"], cand["unsafe_full_answers"]["n"]) == (1, 2)
    assert cand["abstain"]["count"] == 1  # only item 2's two real abstentions; no error became one
    assert (doc["current"]["coverage"]["n"], doc["current"]["unsafe_full_answers"]["n"]) == (2, 2)
    kinds = sorted(
        TrialCall.objects.filter(trial_id=trial_id, status=CallStatus.ERROR).values_list("error_kind", flat=True)
    )
    assert kinds == ["call"] * 4 + ["citation"] * 3
    page = _browser(reviewer.user).get(f"/trials/{trial_id}/")
    assert page.status_code == 200 and b"Cited passages that were not sent" in page.content


def test_the_signed_cutoff_is_the_one_the_current_gate_is_judged_at(route, reviewer, trial_body, monkeypatch):
    from console.trials import hooks

    graded_items([(True, 0.8), (True, 0.6), (False, 0.9)])
    monkeypatch.setattr(hooks, "_providers", [lambda r: (0.85, "policy v3")])
    with StandInCandidate({}) as standin:
        trial_id = _start(reviewer, trial_body(standin.url, repeats=1))
    current = reviewer.get(f"/api/v1/gate-trials/{trial_id}").json()["current"]
    assert current["cutoff"] == 0.85 and current["cutoff_source"] == "policy v3"
    assert current["coverage"]["count"] == 0 and current["unsafe_full_answers"]["count"] == 1


def test_headers_are_sent_but_stored_encrypted(route, reviewer, trial_body):
    graded_items([(True, 0.9)])
    with StandInCandidate({}) as standin:
        _start(reviewer, trial_body(standin.url, repeats=1, headers={"Authorization": "Bearer s3cret-token"}))
        assert standin.headers[0]["Authorization"] == "Bearer s3cret-token"
    stored = Candidate.objects.get(name="evaluator-v2")
    assert "s3cret" not in stored.headers_encrypted and stored.headers_encrypted
    assert not any("s3cret" in str(p) for p in AuditEvent.objects.values_list("payload", flat=True))


def test_bad_requests_are_400_listing_every_field(route, reviewer):
    graded_items([(True, 0.9)])
    response = reviewer.post(
        "/api/v1/routes/it-support/gate-trials",
        {"name": "", "url": "ftp://x", "repeats": 0, "gates": {"min_stability": 2}},
        format="json",
    )
    assert response.status_code == 400
    assert {d["field"] for d in response.json()["error"]["details"]} == {
        "name",
        "url",
        "repeats",
        "gates.min_stability",
    }


def test_the_reference_candidate_runs_in_process(route, reviewer):
    graded_items([(True, 0.9), (False, 0.3)])
    trial_id = _start(reviewer, {"name": "reference", "kind": "reference", "repeats": 2})
    doc = reviewer.get(f"/api/v1/gate-trials/{trial_id}").json()
    assert doc["status"] == "done" and doc["calls"] == {"made": 4, "errors": 0, "total": 4}
    assert doc["candidate"]["stability"]["count"] == 2  # deterministic


def test_a_finished_trial_gives_policy_evidence_the_hash_of_its_stored_result(route, reviewer):
    import hashlib

    from console.trials.models import Trial
    from console.trials.selectors import trial_evidence

    graded_items([(True, 0.9)])
    trial = Trial.objects.get(pk=_start(reviewer, {"name": "reference", "kind": "reference"}))
    evidence = trial_evidence(trial)
    assert evidence["trial_id"] == trial.pk
    assert evidence["sha256"] == hashlib.sha256(trial.result_text.encode("utf-8")).hexdigest()
    doc = reviewer.get(f"/api/v1/gate-trials/{trial.pk}").json()
    assert doc["sha256"] == evidence["sha256"]


def test_the_candidate_gets_the_logged_passages_in_rank_order_and_the_answer_under_review(route, reviewer, trial_body):
    from grading.models import GradingItem

    items = graded_items([(True, 0.9), (False, 0.3)], inclusion=[0.5, 1.0])
    GradingItem.objects.filter(decision_id=items[0].decision_id).update(own_answer="The answer graders judged.")
    with StandInCandidate({}) as standin:
        _start(reviewer, trial_body(standin.url, repeats=1))
        bodies = {b["request_id"]: b for b in standin.bodies}
    from console.ledger.models import Decision

    for item in items:
        logged = [
            {"id": link.passage.external_id, "text": link.passage.text}
            for link in Decision.objects.get(pk=item.decision_id).ranked_passages
        ]
        assert bodies[item.request_id]["passages"] == logged and logged
    assert bodies[items[0].request_id]["draft_answer"] == "The answer graders judged."


def test_a_stratified_sample_is_weighted_as_on_the_operating_points(route, reviewer, trial_body):
    import numpy as np

    from console.stats.intervals import weighted_proportion_interval

    specs = [(True, 0.9)] * 4
    probability = [0.2, 0.2, 1.0, 1.0]
    items = graded_items(specs, inclusion=probability)
    plan = {items[0].request_id: [A], items[1].request_id: [X], items[2].request_id: [A], items[3].request_id: [A]}
    with StandInCandidate(plan) as standin:
        trial_id = _start(reviewer, trial_body(standin.url, repeats=1))
    doc = reviewer.get(f"/api/v1/gate-trials/{trial_id}").json()
    assert doc["estimator"] == "hajek"
    coverage = doc["candidate"]["coverage"]
    assert (coverage["count"], coverage["n"]) == (3, 4)
    expected = weighted_proportion_interval(
        [1, 0, 1, 1], 1 / np.array(probability), strata=[f"s{p}" for p in probability]
    )
    assert coverage["value"] == pytest.approx((5 + 1 + 1) / (5 + 5 + 1 + 1))
    assert coverage["low"] == pytest.approx(expected.low) and coverage["high"] == pytest.approx(expected.high)


def test_a_subset_limits_the_items_by_segment_model_and_window(route, reviewer, trial_body):
    from console.ledger.models import Decision

    items = graded_items([(True, 0.9)] * 4)
    Decision.objects.filter(pk=items[0].decision_id).update(segments={"language": "de"})
    Decision.objects.filter(pk=items[1].decision_id).update(
        segments={"language": "de"}, versions={"model": "gen-2026-12"}
    )
    with StandInCandidate({}) as standin:
        trial_id = _start(reviewer, trial_body(standin.url, repeats=1, subset={"segment": {"language": "de"}}))
        assert reviewer.get(f"/api/v1/gate-trials/{trial_id}").json()["items"] == 2
        trial_id = _start(reviewer, trial_body(standin.url, repeats=1, subset={"model": "gen-2026-12"}))
        assert reviewer.get(f"/api/v1/gate-trials/{trial_id}").json()["items"] == 1
        response = reviewer.post(
            "/api/v1/routes/it-support/gate-trials",
            trial_body(standin.url, subset={"from": "2001-01-01", "to": "2001-01-02"}),
            format="json",
        )
    assert response.status_code == 400 and response.json()["error"]["code"] == "no_graded_items"


def test_a_header_can_come_from_the_environment_and_is_never_stored(route, trial_body, monkeypatch):
    monkeypatch.setenv("CANDIDATE_HEADER_GATE_TOKEN", "X-Gate-Key: from-env-123")
    graded_items([(True, 0.9)])
    admin = _client_of(factories.make_user("admin-1", "admin"))
    with StandInCandidate({}) as standin:
        _start(admin, trial_body(standin.url, repeats=1, headers_env="CANDIDATE_HEADER_GATE_TOKEN"))
        assert standin.headers[0]["X-Gate-Key"] == "from-env-123"
    stored = Candidate.objects.get(name="evaluator-v2")
    assert stored.headers_env == "CANDIDATE_HEADER_GATE_TOKEN" and stored.headers_encrypted == ""


def test_only_an_admin_may_name_a_header_variable(route, reviewer, owner, trial_body, monkeypatch):
    monkeypatch.setenv("CANDIDATE_HEADER_GATE_TOKEN", "X-Gate-Key: from-env-123")
    graded_items([(True, 0.9)])
    with StandInCandidate({}) as standin:
        for client in (reviewer, owner):
            response = client.post(
                "/api/v1/routes/it-support/gate-trials",
                trial_body(standin.url, repeats=1, headers_env="CANDIDATE_HEADER_GATE_TOKEN"),
                format="json",
            )
            assert response.status_code == 403, response.content
            assert response.json()["error"]["details"][0] == {
                "field": "headers_env",
                "code": "admin_only",
                "message": "Ask an admin to start this trial, or send the header itself.",
            }
        assert standin.headers == []
    assert not Candidate.objects.exists() and not Trial.objects.exists()


@pytest.mark.parametrize("name", ["DATABASE_URL", "SECRET_KEY", "CANDIDATE_HEADER_", "candidate_header_x"])
def test_headers_come_only_from_variables_named_candidate_header(route, reviewer, trial_body, name):
    graded_items([(True, 0.9)])
    response = reviewer.post(
        "/api/v1/routes/it-support/gate-trials", trial_body("http://127.0.0.1:9/", headers_env=name), format="json"
    )
    assert response.status_code == 400
    assert "headers_env" in {d["field"] for d in response.json()["error"]["details"]}


def test_a_variable_stored_under_another_name_is_never_read_at_call_time(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgres://console:secret@db/console")
    with pytest.raises(candidates.CallFailed, match="CANDIDATE_HEADER_"):
        candidates.headers_from_env("DATABASE_URL")
