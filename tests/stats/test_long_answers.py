"""Long-answer statistics, against statsmodels, scipy, scoringrules and the worked figures of the
abstention chapter's section 11.6 ("Long-form calibration: 80 % of what?"), as docs/statistics.md
section 12 reproduces them."""

import math

import numpy as np
import pytest
import scoringrules
import statsmodels.api as sm
from scipy import stats
from sklearn.metrics import brier_score_loss
from statsmodels.stats.proportion import proportion_confint

from console.stats.intervals import hajek_estimate, weighted_proportion_interval
from console.stats.long_answers import (
    all_supported_probability,
    answer_support,
    answer_utility,
    claim_count_scenarios,
    crps_from_cdf,
    crps_from_quantiles,
    effective_functional,
    frechet_bounds,
    full_support_by_claim_count,
    functional_mismatch,
    long_cost_threshold,
    long_operating_points,
    long_operating_points_document,
    per_claim_support_needed,
    precision_recall_at_k,
    ratio_estimate,
    support_calibration,
    support_reliability_bins,
)
from console.stats.operating_points import served_counts_from_scores
from console.stats.policy_math import cost_threshold

TAU = 13 / 14  # c_w = 20, c_a = 0.5: (20 - 0.5) / 21


def chapter_day():
    """The chapter's day: 350 briefs of 12 verifiable claims, 4,200 claims, 210 unsupported; 189 briefs
    fully supported and 161 with at least one unsupported claim (112 with one, 49 with two)."""
    unsupported = np.array([0] * 189 + [1] * 112 + [2] * 49)
    verifiable = np.full(350, 12)
    scores = np.linspace(0.951, 0.999, 350)  # a mean-support score clearing tau everywhere
    return scores, verifiable - unsupported, verifiable


def census(n=3000, seed=7):
    """Answers of 8 to 15 claims, per-claim support rising with the score, scores on a 0.01 grid."""
    rng = np.random.default_rng(seed)
    scores = np.round(rng.beta(5, 2, n), 2)
    verifiable = rng.integers(8, 16, n)
    verifiable[:25] = 0  # every claim unverifiable: no support fraction
    supported = rng.binomial(verifiable, 0.8 + 0.19 * scores)
    return scores, supported, verifiable


def table(scores, supported, verifiable, cutoffs, **options):
    return long_operating_points(
        population_size=scores.size,
        served_counts=served_counts_from_scores(scores, cutoffs),
        cutoffs=cutoffs,
        graded_scores=scores,
        claims_supported=supported,
        claims_verifiable=verifiable,
        **options,
    )


# --------------------------------------------------------------------------- the chapter's figures


def test_an_all_or_nothing_target_of_13_over_14_needs_per_claim_support_0_993843366_at_12_claims():
    assert cost_threshold(20, 0.5) == pytest.approx(TAU, abs=1e-15)
    assert per_claim_support_needed(TAU, 12) == pytest.approx(0.993843366, abs=5e-10)
    assert per_claim_support_needed(TAU, 30) == pytest.approx(0.997532783, abs=5e-10)
    assert per_claim_support_needed(TAU, 4) == pytest.approx(0.9816436, abs=5e-8)


def test_twelve_claims_at_0_95_are_all_supported_54_percent_of_the_time():
    assert round(all_supported_probability(0.95, 12), 6) == 0.540360
    assert round(all_supported_probability(0.94, 12), 3) == 0.476
    assert round(all_supported_probability(0.94, 40), 3) == 0.084
    # About 189 of 350 briefs fully supported, 161 (46 %) with at least one unsupported claim.
    fully = round(350 * all_supported_probability(0.95, 12))
    assert (fully, 350 - fully, round((350 - fully) / 350, 2)) == (189, 161, 0.46)


def test_4200_claims_at_the_needed_support_carry_25_8579_unsupported_an_8_121_fold_reduction():
    needed = per_claim_support_needed(19.5 / 21, 12)
    expected_unsupported = 4200 * (1 - needed)
    assert expected_unsupported == pytest.approx(25.8579, abs=5e-5)
    assert 4200 * (1 - 0.95) == pytest.approx(210)
    assert 210 / expected_unsupported == pytest.approx(8.121, abs=5e-4)


def test_the_chapters_day_shows_expected_support_0_95_beside_full_support_0_54_and_600_unsupported_per_1000():
    scores, supported, verifiable = chapter_day()
    assert int(verifiable.sum()) == 4200 and int((verifiable - supported).sum()) == 210
    no_gate, mean_support_gate = table(scores, supported, verifiable, [TAU], c_w=20, c_a=0.5)
    for row in (no_gate, mean_support_gate):
        assert row.graded_served == 350  # a mean-support gate at tau refuses nothing
        assert row.expected_support.value == pytest.approx(0.95)
        assert row.claim_support_rate.value == pytest.approx(0.95)
        assert row.p_fully_supported.value == pytest.approx(189 / 350)
        assert 1 - row.p_fully_supported.value == pytest.approx(0.46)
        assert row.unsupported_claims_per_1000.value == pytest.approx(1000 * 210 / 350)
    # Under all-or-nothing harm, shipping all 350 is worth 189 - 20 * 161 = -3031 briefs, 2,856 below
    # refusing them all (-175).
    utility = mean_support_gate.utility_per_1000.value * 350 / 1000
    assert utility == pytest.approx(189 - 20 * 161)
    assert utility + 0.5 * 350 == pytest.approx(-2856)


def test_under_proportional_harm_the_same_day_is_worth_157_5_more_than_refusing_everything():
    scores, supported, verifiable = chapter_day()
    _, row = table(scores, supported, verifiable, [TAU], harm_model="proportional", c_w=20, c_a=0.5)
    assert (row.utility_per_1000.value + 1000 * 0.5) * 350 / 1000 == pytest.approx(350 * (0.95 - 20 * 0.05 + 0.5))
    assert 350 * (0.95 - 20 * 0.05 + 0.5) == pytest.approx(157.5)
    # With the unrounded p^12 the chapter's all-or-nothing figure is 350 (p^12 - 20 (1 - p^12) + 0.5).
    p12 = all_supported_probability(0.95, 12)
    assert 350 * (p12 - 20 * (1 - p12) + 0.5) == pytest.approx(-2853.35, abs=0.01)


def test_both_harm_models_give_the_same_threshold_but_read_different_statistics_under_it():
    proportional = long_cost_threshold(20, 0.5, harm_model="proportional", claims=12)
    all_or_nothing = long_cost_threshold(20, 0.5, harm_model="all_or_nothing", claims=12)
    assert proportional.tau == all_or_nothing.tau == pytest.approx(TAU)
    assert (proportional.functional, all_or_nothing.functional) == ("expected_support", "p_fully_supported")
    assert proportional.support_needed is None
    assert all_or_nothing.support_needed == pytest.approx(0.993843366, abs=5e-10)
    assert long_cost_threshold(20, 0.5, harm_model="at_least").functional == "p_support_at_least"
    # The chapter's day: E[S] = 0.95 clears tau, Pr(S = 1) = 0.540360 does not.
    assert 0.95 >= proportional.tau and all_supported_probability(0.95, 12) < all_or_nothing.tau


def test_a_supported_two_claim_hedge_has_precision_1_recall_0_167_and_f1_0_286_at_k_12():
    result = precision_recall_at_k([2], [2], [12])
    assert result.precision[0] == 1.0
    assert round(result.recall[0], 3) == 0.167
    assert result.f1[0] == pytest.approx(2 * (1 / 6) / (1 + 1 / 6))
    assert round(result.f1[0], 3) == 0.286


def test_three_forecasts_with_mean_0_8_differ_by_16_8_units_under_all_or_nothing_harm_at_c_w_20():
    # Figure 11.6: the same scalar 0.80, the mass at S = 1 running from 0.80 down to zero.
    atoms = np.array([0.0, 0.8, 1.0])
    forecasts = {"two_point": [0.2, 0.0, 0.8], "all_at_0_8": [0.0, 1.0, 0.0], "mixed": [0.1, 0.5, 0.4]}
    values = {}
    for name, mass in forecasts.items():
        assert np.dot(atoms, mass) == pytest.approx(0.8)
        proportional = answer_utility(atoms, harm_model="proportional", c_w=20)
        all_or_nothing = answer_utility(atoms, harm_model="all_or_nothing", c_w=20)
        assert np.dot(proportional, mass) == pytest.approx(0.8 - 20 * 0.2)
        values[name] = float(np.dot(all_or_nothing, mass))
    assert max(values.values()) - min(values.values()) == pytest.approx(16.8)


def test_the_scenario_table_keeps_expected_support_at_p_while_full_support_decays_as_p_to_the_n():
    rows = claim_count_scenarios(0.95, [1, 4, 12, 30], tau=TAU)
    assert [row["expected_support"] for row in rows] == [0.95] * 4
    assert [row["independence"] for row in rows] == pytest.approx([0.95, 0.95**4, 0.95**12, 0.95**30])
    assert rows[2]["support_needed"] == pytest.approx(0.993843366, abs=5e-10)
    assert rows[2]["frechet_low"] == pytest.approx(0.4) and rows[2]["frechet_high"] == 0.95
    assert rows[3]["frechet_low"] == 0.0


# --------------------------------------------------------------------------- the algebra


def test_frechet_bounds_hold_every_joint_distribution_and_are_reached():
    assert frechet_bounds(0.95, 12) == (pytest.approx(0.4), 0.95)
    # Comonotone claims reach the upper bound; claims failing on disjoint answers reach the lower one.
    rng = np.random.default_rng(3)
    comonotone = np.repeat(rng.random(100_000)[:, None] < 0.95, 12, axis=1)
    assert comonotone.all(axis=1).mean() == pytest.approx(comonotone.mean())
    disjoint = np.ones((100, 12), dtype=bool)
    for claim in range(12):
        disjoint[5 * claim : 5 * claim + 5, claim] = False  # 5 % failures per claim, never together
    assert disjoint.mean(axis=0) == pytest.approx(np.full(12, 0.95))
    assert disjoint.all(axis=1).mean() == pytest.approx(frechet_bounds(0.95, 12)[0])


@pytest.mark.parametrize("bad", [(1.2, 3), (-0.1, 3), (0.5, 0), (0.5, 2.5), (math.nan, 3)])
def test_the_algebra_refuses_a_probability_outside_0_1_and_a_claim_count_below_one(bad):
    p, n = bad
    for function in (all_supported_probability, per_claim_support_needed, frechet_bounds):
        with pytest.raises(ValueError):
            function(p, n)


def test_an_answer_without_a_verifiable_claim_has_no_support_fraction():
    support = answer_support([3, 0, 2], [4, 0, 2])
    assert support[0] == 0.75 and math.isnan(support[1]) and support[2] == 1.0
    with pytest.raises(ValueError):
        answer_support([5], [4])


def test_utility_reads_exactly_one_summary_per_harm_model():
    s = np.array([1.0, 0.9, 0.5, np.nan])
    assert answer_utility(s, harm_model="proportional", c_w=4)[:3] == pytest.approx([1.0, 0.5, -1.5])
    assert answer_utility(s, harm_model="all_or_nothing", c_w=4)[:3].tolist() == [1.0, -4.0, -4.0]
    assert answer_utility(s, harm_model="at_least", c_w=4, support_threshold=0.9)[:3].tolist() == [1.0, 1.0, -4.0]
    assert math.isnan(answer_utility(s, harm_model="all_or_nothing", c_w=4)[3])


def test_a_mean_support_score_under_all_or_nothing_harm_is_a_mismatch_and_unspecified_is_not():
    assert functional_mismatch("expected_support", "all_or_nothing")
    assert functional_mismatch("expected_support", "at_least")
    assert functional_mismatch("p_fully_supported", "proportional")
    assert not functional_mismatch("", "all_or_nothing")
    assert not functional_mismatch("p_fully_supported", "all_or_nothing")
    assert not functional_mismatch("expected_support", "proportional")
    assert effective_functional("", "proportional") == "expected_support"
    assert effective_functional("", "at_least") == "p_support_at_least"
    assert effective_functional("expected_support", "all_or_nothing") == "expected_support"


# --------------------------------------------------------------------------- the ratio estimator


def claim_rows(supported, verifiable, weights=None):
    """One row per verifiable claim: 1 when supported, its answer's id and weight."""
    outcome, cluster, weight = [], [], []
    for answer, (k, n) in enumerate(zip(supported, verifiable, strict=True)):
        outcome += [1.0] * int(k) + [0.0] * int(n - k)
        cluster += [answer] * int(n)
        weight += [1.0 if weights is None else float(weights[answer])] * int(n)
    return np.array(outcome), np.array(cluster), np.array(weight)


def test_the_claim_support_ratio_has_statsmodels_cluster_robust_variance_clustered_by_answer():
    _, supported, verifiable = census(400)
    # statsmodels sees only answers with a claim row; an answer without verifiable claims is no cluster.
    supported, verifiable = supported[verifiable > 0], verifiable[verifiable > 0]
    estimate = ratio_estimate(supported, verifiable)
    outcome, cluster, _ = claim_rows(supported, verifiable)
    fit = sm.OLS(outcome, np.ones((outcome.size, 1))).fit(cov_type="cluster", cov_kwds={"groups": cluster})
    assert estimate.value == pytest.approx(fit.params[0], rel=1e-12)
    assert estimate.variance == pytest.approx(fit.cov_params()[0, 0], rel=1e-10)
    # Ignoring the clustering would claim a different, wrong precision.
    assert estimate.variance != pytest.approx(outcome.var(ddof=1) / outcome.size, rel=1e-3)


def test_the_weighted_claim_support_ratio_matches_statsmodels_weighted_least_squares_clustered_by_answer():
    _, supported, verifiable = census(300, seed=11)
    supported, verifiable = supported[verifiable > 0], verifiable[verifiable > 0]
    weights = np.random.default_rng(5).choice([1.0, 2.5, 6.0], size=supported.size)
    estimate = ratio_estimate(supported, verifiable, weights=weights)
    outcome, cluster, weight = claim_rows(supported, verifiable, weights)
    fit = sm.WLS(outcome, np.ones((outcome.size, 1)), weights=weight).fit(
        cov_type="cluster", cov_kwds={"groups": cluster}
    )
    assert estimate.value == pytest.approx(fit.params[0], rel=1e-12)
    assert estimate.variance == pytest.approx(fit.cov_params()[0, 0], rel=1e-10)


def test_a_mean_over_answers_has_the_squared_standard_error_of_scipy():
    rng = np.random.default_rng(2)
    values = rng.random(200)
    estimate = ratio_estimate(values)
    assert estimate.value == pytest.approx(values.mean())
    assert estimate.variance == pytest.approx(stats.sem(values) ** 2, rel=1e-12)


def test_with_one_claim_per_answer_the_stratified_ratio_is_the_hajek_share_with_its_variance():
    rng = np.random.default_rng(9)
    outcome = rng.random(500) < 0.7
    weights = rng.choice([1.0, 3.0, 8.0], size=500)
    strata = rng.choice(["low", "mid", "high", "lonely"], p=[0.4, 0.4, 0.199, 0.001], size=500)
    strata[0] = "single"  # a stratum of one unit
    domain = rng.random(500) < 0.6
    estimate = ratio_estimate(outcome, np.ones(500), weights=weights, strata=strata, domain=domain)
    reference = hajek_estimate(outcome, weights, strata=strata, domain=domain)
    assert estimate.value == pytest.approx(reference.value, rel=1e-12)
    assert estimate.variance == pytest.approx(reference.variance, rel=1e-10)


def test_the_stratified_domain_variance_matches_the_textbook_formula_written_out_by_hand():
    rng = np.random.default_rng(4)
    _, supported, verifiable = census(240, seed=4)
    weights = rng.choice([1.0, 2.0, 5.0], size=240)
    strata = rng.integers(0, 3, 240)
    domain = rng.random(240) < 0.5
    estimate = ratio_estimate(supported, verifiable, weights=weights, strata=strata, domain=domain)
    ratio = sum(w * k for w, k, d in zip(weights, supported, domain, strict=True) if d) / sum(
        w * n for w, n, d in zip(weights, verifiable, domain, strict=True) if d
    )
    total = sum(w * n for w, n, d in zip(weights, verifiable, domain, strict=True) if d)
    variance = 0.0
    for h in range(3):
        units = [i for i in range(240) if strata[i] == h]
        z = [weights[i] * (supported[i] - ratio * verifiable[i]) / total if domain[i] else 0.0 for i in units]
        mean = sum(z) / len(z)
        variance += len(z) / (len(z) - 1) * sum((value - mean) ** 2 for value in z)
    assert estimate.value == pytest.approx(ratio, rel=1e-12)
    assert estimate.variance == pytest.approx(variance, rel=1e-10)


def test_an_empty_domain_estimates_nothing():
    estimate = ratio_estimate([1.0, 2.0], [2.0, 2.0], domain=[False, False])
    assert estimate.n == 0 and not estimate.interval().is_defined


# --------------------------------------------------------------------------- the long operating-point table


def test_each_row_matches_a_plain_recomputation_of_its_definitions_on_a_census():
    scores, supported, verifiable = census()
    cutoffs = [0.5, 0.7, 0.85, 0.95]
    rows = table(
        scores, supported, verifiable, cutoffs, harm_model="at_least", support_threshold=0.9, c_w=5.0, c_a=0.25
    )
    z = stats.norm.isf(0.025)
    support = answer_support(supported, verifiable)
    measured = ~np.isnan(support)
    assert [row.cutoff for row in rows] == [None, *cutoffs]
    for row in rows:
        served = scores >= (row.cutoff if row.cutoff is not None else -np.inf)
        s = support[served & measured]
        assert row.graded_served == int(served.sum())
        assert row.expected_support.value == pytest.approx(s.mean())
        half = z * math.sqrt(scores.size / (scores.size - 1) * np.sum(((s - s.mean()) / s.size) ** 2))
        assert (row.expected_support.low, row.expected_support.high) == pytest.approx(
            (s.mean() - half, s.mean() + half)
        )
        full = int((s == 1).sum())
        assert (row.p_fully_supported.low, row.p_fully_supported.high) == pytest.approx(
            proportion_confint(full, s.size, alpha=0.05, method="wilson")
        )
        at_least = int((s >= 0.9).sum())
        assert row.p_support_at_least.value == pytest.approx(at_least / s.size)
        unsupported = (verifiable - supported)[served]
        share = served.mean()
        assert row.unsupported_claims_per_1000.value == pytest.approx(1000 * share * unsupported.mean())
        # The domain estimator: deviations inside the domain, n/(n - 1) over the whole sample.
        deviations = (unsupported - unsupported.mean()) / unsupported.size
        standard_error = math.sqrt(scores.size / (scores.size - 1) * np.sum(deviations**2))
        assert row.unsupported_claims_per_1000.high - row.unsupported_claims_per_1000.value == pytest.approx(
            1000 * share * z * standard_error
        )
        utility = np.where(s >= 0.9, 1.0, -5.0)
        assert row.utility_per_1000.value == pytest.approx(1000 * (share * utility.mean() - (1 - share) * 0.25))
        if row.cutoff is None:
            assert row.false_abstention_rate is None
        else:
            refused = support[~served & measured]
            assert row.false_abstention_rate.value == pytest.approx((refused >= 0.9).mean())


def test_the_false_abstention_rate_reads_the_declared_functional():
    scores, supported, verifiable = census()
    support = answer_support(supported, verifiable)
    refused = (scores < 0.8) & ~np.isnan(support)
    mean_reading = table(scores, supported, verifiable, [0.8], functional="expected_support")[1]
    full_reading = table(scores, supported, verifiable, [0.8])[1]
    assert mean_reading.false_abstention_rate.value == pytest.approx(support[refused].mean())
    assert full_reading.false_abstention_rate.value == pytest.approx((support[refused] == 1).mean())
    assert mean_reading.false_abstention_rate.value > 2 * full_reading.false_abstention_rate.value


def test_a_weighted_stratified_table_uses_hajek_ratios_and_korn_graubard_shares():
    scores, supported, verifiable = census(1200, seed=21)
    rng = np.random.default_rng(0)
    strata = np.where(scores < 0.6, "low", "high")
    weights = np.where(strata == "low", 4.0, 1.5) * rng.choice([1.0, 1.2], size=scores.size)
    population = np.sort(rng.beta(5, 2, 40_000))
    rows = long_operating_points(
        population_size=population.size,
        population_scores_sorted=population,
        cutoffs=[0.6, 0.9],
        graded_scores=scores,
        claims_supported=supported,
        claims_verifiable=verifiable,
        graded_weights=weights,
        graded_strata=strata,
    )
    support = answer_support(supported, verifiable)
    measured = ~np.isnan(support)
    for row in rows[1:]:
        served = scores >= row.cutoff
        mean = ratio_estimate(np.nan_to_num(support), weights=weights, strata=strata, domain=served & measured)
        assert row.expected_support.value == pytest.approx(mean.value)
        assert row.expected_support.high - row.expected_support.value == pytest.approx(
            stats.norm.isf(0.025) * math.sqrt(mean.variance)
        )
        reference = weighted_proportion_interval(support == 1, weights, strata=strata, domain=served & measured)
        assert row.p_fully_supported.as_dict() == reference.as_dict()
        share = np.count_nonzero(population >= row.cutoff) / population.size
        unsupported = ratio_estimate(verifiable - supported, weights=weights, strata=strata, domain=served)
        assert row.unsupported_claims_per_1000.value == pytest.approx(1000 * share * unsupported.value)


def test_nothing_served_means_no_unsupported_claims_and_the_refusal_cost_only():
    scores, supported, verifiable = census(200)
    row = table(scores, supported, verifiable, [1.01], c_w=20, c_a=0.5)[1]
    assert row.graded_served == 0
    assert row.unsupported_claims_per_1000.as_dict() == {"value": 0.0, "low": 0.0, "high": 0.0}
    assert row.utility_per_1000.value == pytest.approx(-500.0)
    assert row.expected_support.as_dict() == {"value": None, "low": None, "high": None}


def test_the_document_names_the_functional_and_carries_p_support_at_least_only_with_s0():
    scores, supported, verifiable = census(300)
    rows = table(scores, supported, verifiable, [0.7])
    document = long_operating_points_document(
        rows,
        harm_model="all_or_nothing",
        functional="p_fully_supported",
        declared_functional="expected_support",
        support_threshold=None,
        confidence=0.95,
    )
    assert document["functional_mismatch"] is True
    assert "p_support_at_least" not in document["rows"][1]
    assert set(document["rows"][1]) >= {"expected_support", "p_fully_supported", "unsupported_claims_per_1000"}
    assert set(document["rows"][1]["expected_support"]) == {"value", "low", "high"}


@pytest.mark.parametrize(
    "options",
    [
        {"harm_model": "at_least"},
        {"harm_model": "sometimes"},
        {"functional": "p_support_at_least"},
        {"functional": "median_support"},
        {"c_w": 20},
    ],
)
def test_the_table_refuses_incomplete_settings(options):
    scores, supported, verifiable = census(50)
    with pytest.raises(ValueError):
        table(scores, supported, verifiable, [0.5], **options)


# --------------------------------------------------------------------------- Pr(S = 1) by n


def test_the_claim_count_table_sets_observed_full_support_beside_independence_and_frechet():
    scores, supported, verifiable = census()
    rows = full_support_by_claim_count(supported, verifiable, tau=TAU)
    assert [row.claims for row in rows] == list(range(8, 16))
    assert sum(row.answers for row in rows) == int((verifiable > 0).sum())
    for row in rows:
        group = verifiable == row.claims
        p = supported[group].sum() / verifiable[group].sum()
        assert row.claim_support_rate.value == pytest.approx(p)
        assert row.p_fully_supported.value == pytest.approx((supported[group] == row.claims).mean())
        assert row.independence == pytest.approx(p**row.claims)
        assert (row.frechet_low, row.frechet_high) == pytest.approx((max(0.0, 1 - row.claims * (1 - p)), p))
        assert row.support_needed == pytest.approx(TAU ** (1 / row.claims))
        assert row.frechet_low <= row.p_fully_supported.value <= row.frechet_high


# --------------------------------------------------------------------------- calibration per functional


def test_a_score_calibrated_for_expected_support_is_badly_calibrated_for_full_support():
    rng = np.random.default_rng(12)
    p = rng.uniform(0.85, 1.0, 4000)
    verifiable = np.full(4000, 12)
    supported = rng.binomial(verifiable, p)
    report = support_calibration(p, supported, verifiable, functional="expected_support", support_threshold=0.9)
    s = supported / verifiable
    assert report["expected_support"]["calibration_error"] < 0.01
    assert report["expected_support"]["quadratic_score"] == pytest.approx(np.mean((p - s) ** 2))
    assert report["p_fully_supported"]["brier"] == pytest.approx(brier_score_loss(s == 1, p))
    assert report["p_fully_supported"]["reliability"] > 0.1
    assert report["p_support_at_least"]["brier"] == pytest.approx(brier_score_loss(s >= 0.9, p))


def test_support_reliability_bins_average_the_observed_fraction_per_score_bin():
    bins = support_reliability_bins([0.05, 0.15, 0.95, 1.0, 0.2], [0.0, 0.5, 1.0, 0.5, np.nan], bins=2)
    assert bins[0] == {"low": 0.0, "high": 0.5, "count": 2, "mean_score": pytest.approx(0.1), "mean_support": 0.25}
    assert bins[1]["count"] == 2 and bins[1]["mean_support"] == 0.75


def test_crps_of_a_forecast_cdf_on_a_grid_matches_scoringrules_weighted_ensemble():
    rng = np.random.default_rng(8)
    grid = np.arange(13) / 12
    mass = rng.dirichlet(np.full(13, 0.6), size=200)
    cdf = np.cumsum(mass, axis=1)
    cdf[:, -1] = 1.0
    observed = rng.integers(0, 13, 200) / 12
    observed[:20] = rng.random(20)  # off the grid too
    ours = crps_from_cdf(grid, cdf, observed)
    members = np.broadcast_to(grid, mass.shape)
    reference = scoringrules.crps_ensemble(observed, members, ens_w=mass, estimator="nrg", backend="numpy")
    assert ours == pytest.approx(np.asarray(reference), abs=1e-12)


def test_crps_from_quantiles_matches_scoringrules_crps_quantile():
    rng = np.random.default_rng(6)
    levels = np.array([0.05, 0.25, 0.5, 0.75, 0.95])
    quantiles = np.sort(rng.random((100, 5)), axis=1)
    observed = rng.random(100)
    reference = scoringrules.crps_quantile(observed, quantiles, levels, backend="numpy")
    assert crps_from_quantiles(levels, quantiles, observed) == pytest.approx(np.asarray(reference), abs=1e-12)


def test_for_a_bernoulli_forecast_crps_is_the_brier_score_but_not_for_fractional_support():
    f = np.array([0.0, 0.3, 0.9, 1.0])
    for outcome in (0.0, 1.0):
        crps = crps_from_cdf([0.0, 1.0], np.stack([1 - f, np.ones(4)], axis=1), np.full(4, outcome))
        assert crps == pytest.approx((f - outcome) ** 2)
    # Observed S = 0.75 under the same two-point forecast: the CRPS is not (f - s)^2.
    crps = crps_from_cdf([0.0, 1.0], np.stack([1 - f, np.ones(4)], axis=1), np.full(4, 0.75))
    assert crps == pytest.approx(0.75 * (1 - f) ** 2 + 0.25 * f**2)
    assert not np.allclose(crps, (f - 0.75) ** 2)


def test_the_crps_tells_apart_three_forecasts_with_the_same_mean():
    # Figure 11.6 again: all mean 0.8; observed a fully supported answer.
    grid = [0.0, 0.8, 1.0]
    cdfs = {"two_point": [0.2, 0.2, 1.0], "all_at_0_8": [0.0, 1.0, 1.0]}
    scores = {name: float(crps_from_cdf(grid, cdf, [1.0])[0]) for name, cdf in cdfs.items()}
    assert scores["two_point"] < scores["all_at_0_8"]
    assert scores["all_at_0_8"] == pytest.approx(0.2)  # (1 - 0.8) of CDF 1 before the observation


@pytest.mark.parametrize(
    "grid,cdf", [([0.0, 1.0], [0.6, 0.9]), ([1.0, 0.0], [0.5, 1.0]), ([0.0, 0.5, 1.0], [0.5, 0.2, 1.0])]
)
def test_crps_refuses_a_cdf_that_is_not_one(grid, cdf):
    with pytest.raises(ValueError):
        crps_from_cdf(grid, cdf, [0.5])
