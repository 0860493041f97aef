"""Ingest of a long answer's claims, its K and its gate's functional (issue 31)."""

import pytest

from console.ledger.claims import answer_claims, claim_citations, effective_functional
from console.ledger.models import MAX_CLAIM_CHARS, MAX_CLAIMS, Decision
from console.ledger.selectors import answer_settings
from tests.factories import long_record, record, served_record, set_answer_settings

URL = "/api/v1/decisions"
# The chapter's example answer: twelve claims (section 11.6).
TWELVE = [f"Step {n} of the reset is documented." for n in range(1, 13)]


def post(client, records):
    return client.post(URL, {"decisions": records}, format="json")


def fields_of(response) -> list[tuple[str, str]]:
    return [(d["field"], d["code"]) for d in response.json()["error"]["details"]]


def test_claims_k_and_the_functional_are_stored_as_sent(integrator):
    sent = long_record(TWELVE, expected_claims=14)
    sent["gate"] = {**sent["gate"], "functional": "expected_support"}
    assert post(integrator, [sent]).status_code == 201
    decision = Decision.objects.get(request_id=sent["request_id"])
    assert decision.claims == [{"text": text, "citations": ["kb/mfa#2"]} for text in TWELVE]
    assert decision.expected_claims == 14 and decision.gate_functional == "expected_support"
    assert answer_claims(decision) == TWELVE
    assert claim_citations(decision) == [["kb/mfa#2"]] * 12


def test_a_decision_without_claims_offers_the_span_verifiers_units(integrator):
    sent = served_record(claim="Open Settings. Choose Security.\nPress Reset.", served_answer="x")
    post(integrator, [sent])
    decision = Decision.objects.get(request_id=sent["request_id"])
    assert decision.claims is None and decision.gate_functional == ""
    assert answer_claims(decision) == ["Open Settings.", "Choose Security.", "Press Reset."]
    assert claim_citations(decision) == [[], [], []]


def test_citations_may_be_left_out_and_are_stored_as_empty_lists(integrator):
    sent = record(claims=[{"text": "Open Settings."}, {"text": "Choose Reset.", "citations": None}])
    assert post(integrator, [sent]).status_code == 201
    assert Decision.objects.get(request_id=sent["request_id"]).claims == [
        {"text": "Open Settings.", "citations": []},
        {"text": "Choose Reset.", "citations": []},
    ]


def test_a_citation_of_a_passage_the_decision_did_not_log_is_400(integrator):
    sent = long_record(["Open Settings.", "Choose Reset."], citations=[["kb/mfa#2"], ["kb/elsewhere#9"]])
    response = post(integrator, [sent])
    assert response.status_code == 400
    assert fields_of(response) == [("claims[1].citations[0]", "unknown_passage")]
    assert not Decision.objects.exists()


@pytest.mark.parametrize(
    ("claims", "field", "code"),
    [
        ([{"text": "ok", "source": "x"}], "claims[0].source", "unknown_field"),
        ([{"text": ""}], "claims[0].text", None),
        ([{"text": "x" * (MAX_CLAIM_CHARS + 1)}], "claims[0].text", None),
        ([{"text": "ok"}] * (MAX_CLAIMS + 1), "claims", None),
        ([], "claims", None),
        ("one claim", "claims", None),
        ([{"text": "ok", "citations": "kb/mfa#2"}], "claims[0].citations", None),
    ],
)
def test_bad_claims_are_reported_by_field(integrator, claims, field, code):
    response = post(integrator, [record(claims=claims)])
    assert response.status_code == 400
    assert [f for f, _ in fields_of(response)] == [field]
    if code:
        assert fields_of(response)[0][1] == code


def test_the_limits_themselves_are_accepted(integrator):
    sent = record(claims=[{"text": "y" * MAX_CLAIM_CHARS}] * MAX_CLAIMS)
    assert post(integrator, [sent]).status_code == 201


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "12", 1001])
def test_expected_claims_must_be_a_positive_whole_number(integrator, value):
    response = post(integrator, [record(expected_claims=value)])
    assert fields_of(response)[0][0] == "expected_claims"


def test_an_unknown_functional_and_an_unknown_gate_field_are_400(integrator):
    sent = record(gate={"name": "nli", "score": 0.5, "cutoff": 0.8, "functional": "mean", "kind": "x"})
    assert sorted(f for f, _ in fields_of(post(integrator, [sent]))) == ["gate.functional", "gate.kind"]


def test_a_replay_with_other_claims_is_a_conflict_and_the_same_claims_are_unchanged(integrator):
    sent = long_record(["Open Settings.", "Choose Reset."])
    post(integrator, [sent])
    assert post(integrator, [sent]).json() == {"created": 0, "unchanged": 1}
    changed = {**sent, "claims": [{"text": "Open Settings."}]}
    assert post(integrator, [changed]).status_code == 409


def test_a_short_decision_hashes_as_it_did_before_claims_existed(integrator):
    from console.ledger.validation import validate_batch

    # The hash of the sample record, computed before issue 31: replays of old decisions stay unchanged.
    items, _ = validate_batch([record(request_id="q-hash")])
    assert items[0].content_hash == "5c402ac8306d7d546b0f64d21f259b8d31fa9494d56714bdc8ce22969faf813d"


def test_the_functional_is_the_decisions_own_else_the_routes(integrator, route):
    set_answer_settings(route, answer_form="long", gate_functional="p_fully_supported")
    own = long_record(["A."], gate={"name": "nli", "score": 0.9, "cutoff": 0.8, "functional": "expected_support"})
    inherited = long_record(["A."])
    post(integrator, [own, inherited])
    settings = answer_settings(route)
    by_request = {d.request_id: d for d in Decision.objects.all()}
    assert effective_functional(by_request[own["request_id"]], settings) == "expected_support"
    assert effective_functional(by_request[inherited["request_id"]], settings) == "p_fully_supported"


def test_ingest_of_long_answers_adds_no_query_per_decision(integrator, django_assert_max_num_queries):
    post(integrator, [long_record(["A."])])  # the month's partition and the passages exist
    with django_assert_max_num_queries(40) as few:
        post(integrator, [long_record(["A."])])
    with django_assert_max_num_queries(len(few.captured_queries)):
        post(integrator, [long_record(TWELVE) for _ in range(50)])
