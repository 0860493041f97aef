"""A change of a route's answer settings is a change of its statistics: the stored documents of the
route (console/analysis/cache.py) are keyed by its data version, which the settings' audit event
moves, so the next request reads the new harm model rather than a document stored under the old."""

import numpy as np
import pytest

from console.analysis.selectors import data_version
from tests.analysis.populations import decision_records, label_claims, post_decisions
from tests.factories import set_answer_settings

pytestmark = pytest.mark.django_db
OPERATING_POINTS = "/api/v1/routes/it-support/operating-points?cutoffs=0.8"


def _long_day(route, integrator) -> None:
    set_answer_settings(route, answer_form="long", harm_model="all_or_nothing", gate_functional="expected_support")
    rng = np.random.default_rng(5)
    ids = post_decisions(integrator, decision_records(np.round(rng.uniform(0.5, 1.0, 60), 2)))
    label_claims(ids, np.where(np.arange(60) % 2, 12, 11), np.full(60, 12))


def test_a_new_harm_model_is_read_by_the_next_operating_points_request(route, owner, integrator):
    _long_day(route, integrator)
    before = owner.get(OPERATING_POINTS).json()
    assert before["harm_model"] == "all_or_nothing" and before["functional_mismatch"] is True
    assert owner.get(OPERATING_POINTS).json()["computed_at"] == before["computed_at"]  # served from the store
    version = data_version(route)
    set_answer_settings(route, harm_model="proportional")
    assert data_version(route) != version
    after = owner.get(OPERATING_POINTS).json()
    assert after["data_version"] != before["data_version"]
    assert after["harm_model"] == "proportional" and after["functional"] == "expected_support"
    assert after["functional_mismatch"] is False
    # Utility under proportional harm credits a partly supported answer: it changes with the model.
    gate = [r for r in after["rows"] if r["cutoff"] == 0.8][0]
    old = [r for r in before["rows"] if r["cutoff"] == 0.8][0]
    assert gate["utility_per_1000"]["value"] != old["utility_per_1000"]["value"]


def test_a_new_support_threshold_adds_its_column_at_once(route, owner, integrator):
    _long_day(route, integrator)
    assert "p_support_at_least" not in owner.get(OPERATING_POINTS).json()["rows"][1]
    set_answer_settings(route, harm_model="at_least", support_threshold=0.95)
    body = owner.get(OPERATING_POINTS).json()
    assert body["harm_model"] == "at_least" and body["support_threshold"] == 0.95
    # Half the answers have every claim supported, the other half 11 of 12 (S = 0.917 < s0).
    assert body["rows"][1]["p_support_at_least"] == body["rows"][1]["p_fully_supported"]
