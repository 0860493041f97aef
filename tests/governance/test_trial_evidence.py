"""A passed candidate gate trial attached to a policy draft is part of the evidence as signed."""

import hashlib
import json

from console.trials.models import Trial
from tests.governance.conftest import draft_body
from tests.jobs_inline import run_jobs

LENIENT = {"max_unsafe_upper": 1.0, "min_coverage": 0.0, "min_stability": 0.0, "max_citation_errors": 100_000}
STRICT = {"max_unsafe_upper": 0.0, "min_coverage": 1.0, "min_stability": 1.0, "max_citation_errors": 0}


def _trial(client, gates) -> Trial:
    with run_jobs():  # the trial's calls run in this process
        response = client.post(
            "/api/v1/routes/it-support/gate-trials",
            {"name": "reference", "kind": "reference", "repeats": 1, "gates": gates},
            format="json",
        )
    assert response.status_code == 202, response.json()
    return Trial.objects.get(pk=response.json()["id"])


def test_a_passed_trial_is_stored_in_the_evidence_with_the_hash_of_its_result(reviewer, owner, graded):
    trial = _trial(reviewer, LENIENT)
    assert trial.passed
    response = reviewer.post("/api/v1/routes/it-support/policies", draft_body(trial=trial.pk), format="json")
    assert response.status_code == 201, response.json()
    policy = response.json()
    stored = json.loads(policy["evidence_text"])["trial"]
    assert stored == {
        "trial_id": trial.pk,
        "passed": True,
        "sha256": hashlib.sha256(trial.result_text.encode("utf-8")).hexdigest(),
    }
    assert hashlib.sha256(policy["evidence_text"].encode("utf-8")).hexdigest() == policy["evidence_sha256"]


def test_a_failed_unknown_or_foreign_trial_is_refused_naming_the_field(reviewer, owner, graded, other_route):
    failed = _trial(reviewer, STRICT)
    assert not failed.passed
    for trial_id in (failed.pk, 999_999, "seven"):
        response = reviewer.post("/api/v1/routes/it-support/policies", draft_body(trial=trial_id), format="json")
        assert response.status_code == 400
        assert "trial" in {d["field"] for d in response.json()["error"]["details"]}
