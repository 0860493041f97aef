"""A long route's operating points and calibration over the API: the long-answer fields of each row
against an independent recomputation (numpy, statsmodels), and the chapter's day end to end."""

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats
from statsmodels.stats.proportion import proportion_confint

from grading.models import FinalLabel
from tests.analysis.populations import decision_records, label_claims, long_route, post_decisions

Z = stats.norm.isf(0.025)


def long_census(integrator, *, n=240, seed=3):
    """Answers of 8 to 15 claims; per-claim support rises with the gate score; two answers with no
    verifiable claim."""
    rng = np.random.default_rng(seed)
    scores = np.round(rng.beta(5, 2, n), 2)
    verifiable = rng.integers(8, 16, n)
    verifiable[:2] = 0
    supported = rng.binomial(verifiable, 0.85 + 0.14 * scores)
    ids = post_decisions(integrator, decision_records(scores))
    label_claims(ids, supported, verifiable)
    return scores, supported, verifiable


def get(client, path, query=""):
    response = client.get(f"/api/v1/routes/it-support/{path}{query}")
    assert response.status_code == 200, response.content
    return response.json()


def test_each_long_row_matches_an_independent_recomputation(owner, integrator):
    long_route(harm_model="at_least", support_threshold=0.9)
    scores, supported, verifiable = long_census(integrator)
    body = get(owner, "operating-points", "?cutoffs=0.6,0.8&c_w=10&c_a=1")
    assert (body["answer_form"], body["harm_model"], body["functional"]) == ("long", "at_least", "p_support_at_least")
    assert body["costs"] == {"c_w": 10.0, "c_a": 1.0, "tau": pytest.approx(9 / 11)}
    n = scores.size
    for row in body["rows"]:
        served = scores >= (row["cutoff"] if row["cutoff"] is not None else -1)
        measured = served & (verifiable > 0)
        s = supported[measured] / verifiable[measured]
        assert row["expected_support"]["value"] == pytest.approx(s.mean())
        # The domain estimator of docs/statistics.md: deviations inside the domain, n/(n - 1) over all.
        half = Z * np.sqrt(n / (n - 1) * np.sum(((s - s.mean()) / s.size) ** 2))
        assert row["expected_support"]["high"] == pytest.approx(min(1.0, s.mean() + half))
        full = int((s == 1).sum())
        low, high = proportion_confint(full, s.size, alpha=0.05, method="wilson")
        assert (row["p_fully_supported"]["low"], row["p_fully_supported"]["high"]) == pytest.approx((low, high))
        assert row["p_support_at_least"]["value"] == pytest.approx((s >= 0.9).mean())
        unsupported = (verifiable - supported)[served]
        assert row["unsupported_claims_per_1000"]["value"] == pytest.approx(1000 * unsupported.sum() / n)
        utility = np.where(s >= 0.9, 1.0, -10.0)
        # Answers without a support fraction are left out of the mean value of a served answer.
        expected = 1000 * (served.mean() * utility.mean() - (~served).mean() * 1.0)
        assert row["utility_per_1000"]["value"] == pytest.approx(expected)
        if row["cutoff"] is not None:
            refused = ~served & (verifiable > 0)
            far = (supported[refused] / verifiable[refused] >= 0.9).mean()
            assert row["functional_false_abstention_rate"]["value"] == pytest.approx(far)


def test_the_claim_support_rate_carries_the_cluster_robust_interval_of_statsmodels(owner, integrator):
    long_route()
    scores, supported, verifiable = long_census(integrator, seed=5)
    no_gate = get(owner, "operating-points", "?cutoffs=0.5")["rows"][0]
    keep = verifiable > 0
    outcome = np.concatenate(
        [[1.0] * k + [0.0] * (m - k) for k, m in zip(supported[keep], verifiable[keep], strict=True)]
    )
    cluster = np.repeat(np.arange(keep.sum()), verifiable[keep])
    fit = sm.OLS(outcome, np.ones((outcome.size, 1))).fit(cov_type="cluster", cov_kwds={"groups": cluster})
    # statsmodels counts the answers with claims as clusters; the console's domain estimator all answers.
    groups, answers = keep.sum(), scores.size
    variance = fit.cov_params()[0, 0] * (answers / (answers - 1)) / (groups / (groups - 1))
    assert no_gate["claim_support_rate"]["value"] == pytest.approx(fit.params[0])
    assert no_gate["claim_support_rate"]["high"] - no_gate["claim_support_rate"]["value"] == pytest.approx(
        Z * np.sqrt(variance)
    )


def test_the_chapters_day_shows_expected_support_0_95_beside_full_support_0_54(owner, integrator):
    # 350 briefs of 12 claims, 210 unsupported: 189 fully supported, 112 with one, 49 with two.
    long_route(gate_functional="expected_support", expected_claims=12)
    unsupported = np.array([0] * 189 + [1] * 112 + [2] * 49)
    ids = post_decisions(integrator, decision_records(np.full(350, 0.96)))
    label_claims(ids, 12 - unsupported, np.full(350, 12))
    body = get(owner, "operating-points", "?cutoffs=0.928571")
    gate = body["rows"][1]
    assert gate["refused"] == 0  # a mean-support score of 0.96 clears tau = 13/14
    assert gate["expected_support"]["value"] == pytest.approx(0.95)
    assert gate["p_fully_supported"]["value"] == pytest.approx(189 / 350)
    assert gate["unsupported_claims_per_1000"]["value"] == pytest.approx(600.0)
    assert gate["utility_per_1000"]["value"] * 0.35 == pytest.approx(189 - 20 * 161)
    assert body["functional_mismatch"] is True and body["declared_functional"] == "expected_support"
    (twelve,) = body["full_support_by_claims"]
    assert twelve["claims"] == 12 and twelve["support_needed"] == pytest.approx(0.993843366, abs=5e-10)
    assert twelve["independence"] == pytest.approx(0.95**12)
    # With K = 12 and n = 12, precision and recall agree answer by answer, and so does F1.
    assert body["precision_recall"] == {
        "answers_with_k": 350,
        "precision": pytest.approx(0.95),
        "recall": pytest.approx(0.95),
        "f1": pytest.approx(0.95),
    }


def test_a_short_route_has_no_long_fields(owner, integrator):
    scores = np.linspace(0.1, 0.9, 20)
    ids = post_decisions(integrator, decision_records(scores))
    FinalLabel.objects.bulk_create(
        FinalLabel(decision_id=i, correct=True, method="imported", source="offline-eval") for i in ids
    )
    body = get(owner, "operating-points", "?cutoffs=0.5")
    assert "answer_form" not in body and "expected_support" not in body["rows"][1]
    assert "long_answers" not in get(owner, "calibration")


def test_the_calibration_of_a_long_route_reads_the_score_against_each_functional(owner, integrator):
    long_route(harm_model="proportional")
    scores, supported, verifiable = long_census(integrator, seed=9)
    report = get(owner, "calibration")["long_answers"]
    keep = verifiable > 0
    s = supported[keep] / verifiable[keep]
    assert report["functional"] == "expected_support" and report["n"] == int(keep.sum())
    assert report["expected_support"]["quadratic_score"] == pytest.approx(np.mean((scores[keep] - s) ** 2))
    assert report["p_fully_supported"]["brier"] == pytest.approx(np.mean((scores[keep] - (s == 1)) ** 2))


def test_a_bad_cost_is_refused_with_its_name(owner):
    response = owner.get("/api/v1/routes/it-support/operating-points?c_w=-1")
    assert response.status_code == 400
    assert "c_w" in response.content.decode()
