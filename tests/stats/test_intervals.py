"""Interval functions checked against statsmodels and scipy, and against textbook formulas."""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from statsmodels.regression.linear_model import WLS
from statsmodels.stats.proportion import proportion_confint

from console.stats.intervals import (
    Interval,
    hajek_estimate,
    one_sided_upper_clopper_pearson,
    proportion_interval,
    weighted_proportion_interval,
)

STATSMODELS_NAME = {
    "wilson": "wilson",
    "clopper_pearson": "beta",
    "jeffreys": "jeffreys",
    "agresti_coull": "agresti_coull",
}
CASES = [(0, 1), (0, 10), (1, 10), (5, 10), (10, 10), (3, 76), (136, 400), (399, 400), (7, 12000)]


@pytest.mark.parametrize("method", sorted(STATSMODELS_NAME))
@pytest.mark.parametrize("confidence", [0.8, 0.95, 0.99])
@pytest.mark.parametrize(("successes", "n"), CASES)
def test_every_method_matches_statsmodels_proportion_confint(method, confidence, successes, n):
    interval = proportion_interval(successes, n, confidence=confidence, method=method)
    low, high = proportion_confint(successes, n, alpha=1 - confidence, method=STATSMODELS_NAME[method])
    if method == "jeffreys" and successes == 0:
        low = 0.0  # Brown, Cai & DasGupta's boundary modification, which statsmodels omits
    if method == "jeffreys" and successes == n:
        high = 1.0
    assert interval.value == pytest.approx(successes / n, abs=1e-15)
    assert interval.low == pytest.approx(low, abs=1e-12)
    assert interval.high == pytest.approx(high, abs=1e-12)


def test_jeffreys_interval_contains_the_estimate_at_the_boundaries():
    assert proportion_interval(0, 20, method="jeffreys").low == 0.0
    assert proportion_interval(20, 20, method="jeffreys").high == 1.0


@given(
    n=st.integers(min_value=1, max_value=5000),
    fraction=st.floats(min_value=0, max_value=1),
    method=st.sampled_from(sorted(STATSMODELS_NAME)),
)
@settings(max_examples=200, deadline=None)
def test_intervals_stay_in_unit_range_and_contain_the_estimate(n, fraction, method):
    successes = round(fraction * n)
    interval = proportion_interval(successes, n, method=method)
    assert 0.0 <= interval.low <= interval.value <= interval.high <= 1.0


@given(
    n=st.integers(min_value=1, max_value=2000),
    fraction=st.floats(min_value=0, max_value=1),
    method=st.sampled_from(sorted(STATSMODELS_NAME)),
)
@settings(max_examples=100, deadline=None)
def test_intervals_are_symmetric_under_swapping_successes_and_failures(n, fraction, method):
    successes = round(fraction * n)
    direct = proportion_interval(n - successes, n, method=method)
    mirrored = proportion_interval(successes, n, method=method).complement()
    assert mirrored.low == pytest.approx(direct.low, abs=1e-12)
    assert mirrored.high == pytest.approx(direct.high, abs=1e-12)


def test_wilson_reproduces_the_seed_figure_of_about_four_point_six_points_at_400_refusals():
    interval = proportion_interval(136, 400)
    assert interval.value == pytest.approx(0.34)
    assert (interval.high - interval.low) / 2 == pytest.approx(0.046, abs=0.0005)


def test_no_observations_give_an_undefined_interval_that_serialises_as_nulls():
    interval = proportion_interval(0, 0)
    assert not interval.is_defined
    assert interval.as_dict() == {"value": None, "low": None, "high": None}


def test_as_dict_is_json_ready_and_maps_infinity_to_null():
    payload = Interval(2.0, 1.5, math.inf).as_dict()
    assert payload == {"value": 2.0, "low": 1.5, "high": None}
    json.dumps(payload, allow_nan=False)


def test_bad_inputs_are_rejected():
    with pytest.raises(ValueError):
        proportion_interval(11, 10)
    with pytest.raises(ValueError):
        proportion_interval(1, 10, confidence=1.0)
    with pytest.raises(ValueError):
        proportion_interval(1, 10, method="wald")


@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
@pytest.mark.parametrize(("k", "n"), [(0, 1), (0, 30), (3, 76), (27, 412), (50, 100), (99, 100)])
def test_one_sided_clopper_pearson_matches_scipy_binomtest(confidence, k, n):
    reference = stats.binomtest(k, n, 0.5, alternative="less").proportion_ci(
        confidence_level=confidence, method="exact"
    )
    assert one_sided_upper_clopper_pearson(k, n, confidence) == pytest.approx(reference.high, abs=1e-12)


def test_one_sided_upper_bound_is_one_without_data_or_without_failures():
    assert one_sided_upper_clopper_pearson(0, 0, 0.95) == 1.0
    assert one_sided_upper_clopper_pearson(5, 5, 0.95) == 1.0


@pytest.mark.parametrize("method", sorted(STATSMODELS_NAME))
def test_equal_weights_reduce_exactly_to_the_unweighted_interval(method):
    rng = np.random.default_rng(1)
    outcome = rng.random(300) < 0.3
    interval = weighted_proportion_interval(outcome, np.full(300, 2.5), method=method)
    assert interval == proportion_interval(int(outcome.sum()), 300, method=method)


def test_equal_weights_reduce_to_the_unweighted_interval_through_the_general_formula_too():
    rng = np.random.default_rng(2)
    outcome = rng.random(250) < 0.4
    estimate = hajek_estimate(outcome, np.full(250, 7.0))
    assert estimate.value == pytest.approx(outcome.mean(), abs=1e-15)
    assert estimate.effective_n == pytest.approx(250, abs=1e-9)


def test_equal_weights_over_a_domain_reduce_exactly_to_the_subset_proportion():
    rng = np.random.default_rng(3)
    outcome = rng.random(500) < 0.35
    domain = rng.random(500) < 0.4
    interval = weighted_proportion_interval(outcome, np.ones(500), domain=domain)
    assert interval == proportion_interval(int(outcome[domain].sum()), int(domain.sum()))
    estimate = hajek_estimate(outcome, np.ones(500), domain=domain)
    assert estimate.effective_n == pytest.approx(domain.sum(), rel=1e-12)


def test_unstratified_variance_equals_the_hc1_sandwich_variance_of_weighted_least_squares():
    rng = np.random.default_rng(4)
    outcome = (rng.random(400) < 0.3).astype(float)
    weights = rng.uniform(1, 20, 400)
    fit = WLS(outcome, np.ones((400, 1)), weights=weights).fit(cov_type="HC1")
    estimate = hajek_estimate(outcome, weights)
    assert estimate.value == pytest.approx(fit.params[0], rel=1e-12)
    assert estimate.variance == pytest.approx(fit.cov_params()[0, 0], rel=1e-10)


def test_stratified_variance_equals_cochrans_formula_for_stratified_random_sampling():
    # Cochran (1977) ch. 5: v = sum_h W_h^2 s_h^2 / n_h with W_h = N_h / N.
    rng = np.random.default_rng(5)
    population = np.array([50_000, 20_000, 5_000])
    sample = np.array([120, 90, 60])
    shares = np.array([0.1, 0.35, 0.7])
    labels = np.repeat(np.arange(3), sample)
    outcome = (rng.random(labels.size) < shares[labels]).astype(float)
    weights = (population / sample)[labels]
    stratum_weights = population / population.sum()
    variance = 0.0
    for h in range(3):
        variance += stratum_weights[h] ** 2 * outcome[labels == h].var(ddof=1) / sample[h]
    expected_value = sum(stratum_weights[h] * outcome[labels == h].mean() for h in range(3))
    estimate = hajek_estimate(outcome, weights, strata=labels)
    assert estimate.value == pytest.approx(expected_value, rel=1e-12)
    assert estimate.variance == pytest.approx(variance, rel=1e-10)


def test_weighted_interval_uses_the_korn_graubard_effective_sample_size():
    rng = np.random.default_rng(6)
    labels = np.repeat([0, 1, 2], [150, 100, 50])
    outcome = rng.random(300) < np.array([0.2, 0.4, 0.8])[labels]
    weights = np.array([10.0, 3.0, 1.0])[labels]
    estimate = hajek_estimate(outcome, weights, strata=labels)
    p, n = estimate.value, 300
    deff = estimate.variance / ((n / (n - 1)) * p * (1 - p) / n)
    df_factor = (stats.t.isf(0.025, n - 1) / stats.t.isf(0.025, n - 3)) ** 2
    expected_n = n / max(deff, 1.0) * df_factor
    assert estimate.effective_n == pytest.approx(expected_n, rel=1e-12)
    interval = weighted_proportion_interval(outcome, weights, strata=labels, method="clopper_pearson")
    low, high = proportion_confint(p * expected_n, expected_n, method="beta")
    assert interval.value == pytest.approx(p, rel=1e-12)
    assert (interval.low, interval.high) == pytest.approx((low, high), abs=1e-10)


def test_unequal_weights_widen_the_interval():
    rng = np.random.default_rng(7)
    outcome = rng.random(400) < 0.3
    weights = np.where(rng.random(400) < 0.5, 1.0, 25.0)
    plain = proportion_interval(int(outcome.sum()), 400)
    weighted = weighted_proportion_interval(outcome, weights)
    assert weighted.high - weighted.low > plain.high - plain.low


def test_effective_sample_size_never_exceeds_the_graded_count():
    labels = np.repeat([0, 1], 50)
    outcome = labels.astype(bool)  # strata separate the outcome perfectly: zero variance
    estimate = hajek_estimate(outcome, np.ones(100), strata=labels)
    assert estimate.variance == pytest.approx(0.0, abs=1e-20)
    assert estimate.effective_n <= 100


def test_an_empty_domain_gives_an_undefined_weighted_interval():
    interval = weighted_proportion_interval(np.array([1, 0]), np.array([1.0, 2.0]), domain=np.array([False, False]))
    assert not interval.is_defined


def test_weights_must_be_positive():
    with pytest.raises(ValueError):
        weighted_proportion_interval(np.array([1, 0]), np.array([1.0, 0.0]))


def test_strata_may_be_names_or_any_integer_codes():
    rng = np.random.default_rng(8)
    codes = rng.integers(0, 4, 300)
    outcome = rng.random(300) < 0.4
    weights = np.array([1.0, 2.0, 5.0, 9.0])[codes]
    by_code = weighted_proportion_interval(outcome, weights, strata=codes)
    names = np.array(["low", "mid", "high", "top"])[codes]
    assert weighted_proportion_interval(outcome, weights, strata=names) == by_code
    sparse = codes * 1_000_003 + 7
    assert weighted_proportion_interval(outcome, weights, strata=sparse) == by_code
