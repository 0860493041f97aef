"""Claim labels of long answers through `POST /api/v1/labels` (issue 31): a verdict per claim index,
every claim exactly once; the answer's S = k/n and its verdict follow."""

import pytest

from audit.models import AuditEvent
from grading.models import FinalClaimLabel, FinalLabel
from tests.factories import ingest, long_record, record

URL = "/api/v1/labels"
TWELVE = [f"Step {n} of the reset is documented." for n in range(1, 13)]


def _claims(verdicts: list[str]) -> list[dict]:
    return [{"index": i, "verdict": v} for i, v in enumerate(verdicts)]


def _post(client, *labels):
    return client.post(URL, {"labels": list(labels)}, format="json")


def _label(request_id: str, verdicts: list[str]) -> dict:
    return {"route": "it-support", "request_id": request_id, "source": "offline-eval", "claims": _claims(verdicts)}


@pytest.fixture
def twelve(route) -> tuple[int, str]:
    sent = long_record(TWELVE)
    [decision_id] = ingest([sent])
    return decision_id, sent["request_id"]


def test_eleven_of_twelve_claims_supported_is_not_fully_supported(twelve, integrator):
    decision_id, request_id = twelve
    response = _post(integrator, _label(request_id, ["supported"] * 11 + ["unsupported"]))
    assert response.status_code == 201, response.content
    label = FinalLabel.objects.get(decision_id=decision_id)
    assert (label.claims_supported, label.claims_verifiable, label.correct) == (11, 12, False)
    assert label.support == pytest.approx(11 / 12)
    assert list(label.claim_labels.order_by("index").values_list("verdict", flat=True))[-2:] == [
        "supported",
        "unsupported",
    ]


def test_unverifiable_claims_leave_n_and_the_rest_supported_is_correct(twelve, integrator):
    decision_id, request_id = twelve
    _post(integrator, _label(request_id, ["supported"] * 10 + ["unverifiable"] * 2))
    label = FinalLabel.objects.get(decision_id=decision_id)
    assert (label.claims_supported, label.claims_verifiable, label.correct, label.support) == (10, 10, True, 1.0)


def test_an_answer_with_no_verifiable_claim_is_not_correct(route, integrator):
    sent = long_record(["A.", "B."])
    [decision_id] = ingest([sent])
    _post(integrator, _label(sent["request_id"], ["unverifiable", "unverifiable"]))
    label = FinalLabel.objects.get(decision_id=decision_id)
    assert (label.claims_verifiable, label.correct, label.support) == (0, False, None)


def test_a_decision_without_sent_claims_is_labelled_by_its_claim_units(route, integrator):
    sent = record(claim="Open Settings. Choose Security. Press Reset.")
    [decision_id] = ingest([sent])
    assert _post(integrator, _label(sent["request_id"], ["supported"] * 3)).status_code == 201
    assert FinalLabel.objects.get(decision_id=decision_id).correct is True


def test_the_import_is_audited_like_other_imports_with_its_claim_count(twelve, integrator):
    decision_id, request_id = twelve
    _post(integrator, _label(request_id, ["supported"] * 12))
    event = AuditEvent.objects.get(action="labels_imported")
    assert event.payload["objects"] == {"decision": [decision_id]} and event.payload["claim_labels"] == 12


def test_a_missing_claim_is_400_naming_it_and_nothing_is_written(twelve, integrator):
    _, request_id = twelve
    response = _post(integrator, _label(request_id, ["supported"] * 11))
    assert response.status_code == 400
    [problem] = response.json()["error"]["details"]
    assert (problem["field"], problem["code"], problem["index"]) == ("claims", "missing_claims", 0)
    assert "11" in problem["message"]
    assert not FinalLabel.objects.exists() and not FinalClaimLabel.objects.exists()


def test_a_claim_the_answer_does_not_have_is_400(twelve, integrator):
    _, request_id = twelve
    label = _label(request_id, ["supported"] * 12)
    label["claims"].append({"index": 12, "verdict": "supported"})
    [problem] = _post(integrator, label).json()["error"]["details"]
    assert (problem["field"], problem["code"]) == ("claims[12].index", "unknown_claim")


@pytest.mark.parametrize(
    ("claims", "field"),
    [
        ([{"index": 0, "verdict": "supported"}, {"index": 0, "verdict": "supported"}], "claims[1].index"),
        ([{"index": -1, "verdict": "supported"}], "claims[0].index"),
        ([{"index": True, "verdict": "supported"}], "claims[0].index"),
        ([{"index": 0, "verdict": "correct"}], "claims[0].verdict"),
        ([{"index": 0, "verdict": "supported", "note": "x"}], "claims[0].note"),
        ([], "claims"),
        ("all supported", "claims"),
    ],
)
def test_bad_claim_verdicts_are_400_by_field(twelve, integrator, claims, field):
    _, request_id = twelve
    label = {"route": "it-support", "request_id": request_id, "source": "x", "claims": claims}
    response = _post(integrator, label)
    assert response.status_code == 400
    assert field in [d["field"] for d in response.json()["error"]["details"]]


def test_a_verdict_beside_claims_is_refused(twelve, integrator):
    _, request_id = twelve
    label = _label(request_id, ["supported"] * 12) | {"verdict": "correct"}
    assert [d["field"] for d in _post(integrator, label).json()["error"]["details"]] == ["verdict"]


def test_a_replay_is_unchanged_and_other_claim_verdicts_conflict(twelve, integrator):
    _, request_id = twelve
    verdicts = ["supported"] * 11 + ["unsupported"]
    _post(integrator, _label(request_id, verdicts))
    assert _post(integrator, _label(request_id, verdicts)).json() == {"created": 0, "unchanged": 1}
    assert _post(integrator, _label(request_id, ["unsupported"] + verdicts[1:])).status_code == 409


def test_claim_labels_and_answer_labels_mix_in_one_batch(twelve, integrator):
    decision_id, request_id = twelve
    short = record()
    [short_id] = ingest([short])
    response = _post(
        integrator,
        _label(request_id, ["supported"] * 12),
        {"route": "it-support", "request_id": short["request_id"], "verdict": "incorrect", "source": "eval"},
    )
    assert response.json() == {"created": 2, "unchanged": 0}
    assert FinalLabel.objects.get(decision_id=short_id).claims_verifiable is None
    assert FinalLabel.objects.get(decision_id=decision_id).correct is True


def test_the_chapters_day_of_350_answers_imports_as_4200_claims_with_210_unsupported(route, integrator):
    # Section 11.6: 350 answers of 12 claims a day at per-claim support 0.95 carry 210 unsupported
    # claims, and 161 answers (46 %) hold at least one: 112 answers with one, 49 with two.
    sent = [long_record(TWELVE) for _ in range(350)]
    ingest(sent)
    unsupported = [1] * 112 + [2] * 49 + [0] * 189
    labels = [
        _label(r["request_id"], ["unsupported"] * k + ["supported"] * (12 - k))
        for r, k in zip(sent, unsupported, strict=True)
    ]
    assert _post(integrator, *labels).json() == {"created": 350, "unchanged": 0}
    rows = FinalLabel.objects.values_list("claims_supported", "claims_verifiable", "correct")
    assert sum(n for _, n, _ in rows) == 4200 and sum(n - k for k, n, _ in rows) == 210
    assert sum(k for k, _, _ in rows) / 4200 == pytest.approx(0.95)
    assert sum(not correct for _, _, correct in rows) == 161
    assert FinalClaimLabel.objects.filter(verdict="unsupported").count() == 210
