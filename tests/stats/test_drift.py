"""Drift statistics against scipy's binomial, KS and entropy functions and hand-worked days."""

import math

import numpy as np
import pytest
from scipy import stats
from scipy.spatial.distance import cityblock

from console.stats.drift import (
    DEFAULT_CUSUM_INTERVAL,
    bernoulli_cusum,
    binomial_control_limits,
    control_chart,
    histogram,
    ks_two_sample,
    ks_two_sample_from_counts,
    mix_homogeneity_test,
    population_stability_index,
    psi_from_counts,
    total_variation_distance,
    two_sided_bernoulli_cusum,
)

# --------------------------------------------------------------------------- p-chart


def test_control_limits_are_three_binomial_standard_deviations_around_the_baseline():
    sizes = np.array([50, 120, 400, 1000, 7])
    lower, upper = binomial_control_limits(0.2, sizes)
    distribution = stats.binom(sizes, 0.2)
    expected_low = np.clip((distribution.mean() - 3 * distribution.std()) / sizes, 0, 1)
    expected_high = np.clip((distribution.mean() + 3 * distribution.std()) / sizes, 0, 1)
    np.testing.assert_allclose(lower, expected_low, rtol=1e-12)
    np.testing.assert_allclose(upper, expected_high, rtol=1e-12)


def test_control_limits_are_clipped_to_the_unit_interval():
    lower, upper = binomial_control_limits(0.01, [10])
    assert lower[0] == 0.0 and 0.01 < upper[0] < 1
    lower, upper = binomial_control_limits(0.99, [10])
    assert upper[0] == 1.0


def test_a_day_is_flagged_only_outside_its_own_limits():
    # p0 = 0.12; n = 100 gives limits 0.12 -/+ 3 * 0.0325 = [0.0225, 0.2175].
    chart = control_chart([10, 22, 21, 2, 0, 3], [100, 100, 100, 100, 0, 10], baseline=0.12)
    assert chart.lower[0] == pytest.approx(0.12 - 3 * math.sqrt(0.12 * 0.88 / 100))
    assert chart.outside.tolist() == [False, True, False, True, False, False]
    assert math.isnan(chart.rate[4]) and math.isnan(chart.upper[4])
    # A small day has wide limits: 3 of 10 is inside [0, 0.428].
    assert chart.upper[5] == pytest.approx(0.12 + 3 * math.sqrt(0.12 * 0.88 / 10))
    document = chart.as_dict()
    assert document["rate"][4] is None and document["outside"][1] is True


def test_a_rate_exactly_on_a_limit_is_inside():
    lower, upper = binomial_control_limits(0.5, [100], sigmas=2.0)
    assert upper[0] == 0.6
    assert not control_chart([60], [100], baseline=0.5, sigmas=2.0).outside[0]
    assert control_chart([61], [100], baseline=0.5, sigmas=2.0).outside[0]


@pytest.mark.parametrize(
    "refused, n",
    [([5], [4]), ([-1], [10]), ([1.5], [10]), ([1, 2], [10]), ([math.nan], [10])],
)
def test_impossible_daily_counts_are_rejected(refused, n):
    with pytest.raises(ValueError):
        control_chart(refused, n, baseline=0.1)


# --------------------------------------------------------------------------- CUSUM


def reference_cusum(refused, n, p0, p1):
    """Page's recursion written out with scipy's binomial log-probabilities as the increment."""
    level, path = 0.0, []
    for x, m in zip(refused, n, strict=True):
        level = max(0.0, level + stats.binom.logpmf(x, m, p1) - stats.binom.logpmf(x, m, p0))
        path.append(level)
    return np.array(path)


def test_cusum_matches_a_direct_loop_over_scipys_binomial_likelihood_ratio():
    rng = np.random.default_rng(7)
    n = rng.integers(0, 400, size=120)
    p = np.where(np.arange(120) < 80, 0.1, 0.14)
    refused = rng.binomial(n, p)
    for p1 in (0.15, 0.05):
        result = bernoulli_cusum(refused, n, p0=0.1, p1=p1)
        np.testing.assert_allclose(result.statistic, reference_cusum(refused, n, 0.1, p1), atol=1e-9)
        assert result.signal.tolist() == (result.statistic > DEFAULT_CUSUM_INTERVAL).tolist()


def test_cusum_worked_example():
    # p0 = 0.1, p1 = 0.2, 100 decisions a day; ln 2 = 0.693147, ln(0.8/0.9) = -0.117783.
    # W = 10 ln2 + 90 ln(8/9) = -3.66900 -> S = 0
    # W = 20 ln2 + 80 ln(8/9) =  4.44030 -> S = 4.44030
    # W = 30 ln2 + 70 ln(8/9) = 12.54960 -> S = 16.98990 > ln 1000 = 6.90776: signal
    # W =  5 ln2 + 95 ln(8/9) = -7.72366 -> S =  9.26624, still above h
    result = bernoulli_cusum([10, 20, 30, 5], [100] * 4, p0=0.1, p1=0.2)
    np.testing.assert_allclose(result.statistic, [0.0, 4.44030, 16.98990, 9.26624], atol=1e-4)
    assert result.signal.tolist() == [False, False, True, True]
    assert result.first_signal == 2


def test_an_in_control_route_rarely_signals_with_the_default_interval():
    # Lorden's bound: in-control average run length >= e^h = 1000 days.
    rng = np.random.default_rng(11)
    n = np.full(365, 2000)
    signalled = sum(
        bernoulli_cusum(rng.binomial(n, 0.1), n, p0=0.1, p1=0.12).first_signal is not None for _ in range(40)
    )
    assert signalled <= 4


def test_two_sided_cusum_sees_a_fall_as_well_as_a_rise():
    n = [500] * 10
    falling = [50] * 5 + [20] * 5
    result = two_sided_bernoulli_cusum(falling, n, p0=0.1, p1_up=0.15, p1_down=0.06)
    assert result.up.first_signal is None
    assert result.down.first_signal == 5
    assert result.signal[5:].all() and not result.signal[:5].any()


def test_cusum_rejects_a_shift_to_the_same_rate():
    with pytest.raises(ValueError):
        bernoulli_cusum([1], [10], p0=0.1, p1=0.1)
    with pytest.raises(ValueError):
        two_sided_bernoulli_cusum([1], [10], p0=0.1, p1_up=0.05, p1_down=0.2)


# --------------------------------------------------------------------------- PSI


def test_psi_is_the_symmetrised_kullback_leibler_divergence_of_scipy():
    expected = np.array([120, 300, 250, 200, 130])
    actual = np.array([80, 260, 300, 220, 140])
    e, a = expected / expected.sum(), actual / actual.sum()
    reference = stats.entropy(a, e) + stats.entropy(e, a)
    assert psi_from_counts(expected, actual) == pytest.approx(reference, rel=1e-12)


def test_psi_floors_empty_bins_at_epsilon():
    expected = [0, 50, 50, 0]
    actual = [10, 40, 50, 0]
    e = [1e-4, 0.5, 0.5, 1e-4]
    a = [0.1, 0.4, 0.5, 1e-4]
    direct = sum((ai - ei) * math.log(ai / ei) for ai, ei in zip(a, e, strict=True))
    assert psi_from_counts(expected, actual) == pytest.approx(direct, rel=1e-12)
    assert psi_from_counts(expected, actual, epsilon=1e-3) < psi_from_counts(expected, actual)


def test_psi_of_two_samples_bins_them_on_fixed_edges():
    rng = np.random.default_rng(3)
    before = rng.beta(5, 2, size=4000)
    after = rng.beta(4, 2, size=3000)
    edges = np.linspace(0, 1, 11)
    e = np.histogram(before, edges)[0]
    a = np.histogram(after, edges)[0]
    assert histogram(before, edges).tolist() == e.tolist()
    assert population_stability_index(before, after) == pytest.approx(psi_from_counts(e, a))
    assert population_stability_index(before, before) == 0.0


def test_histogram_keeps_a_score_of_one_and_rejects_scores_off_the_grid():
    assert histogram([0.0, 0.1, 1.0], [0, 0.1, 0.5, 1]).tolist() == [1, 1, 1]
    with pytest.raises(ValueError):
        histogram([1.2], [0, 1])


# --------------------------------------------------------------------------- KS


def test_ks_two_sample_is_scipys():
    rng = np.random.default_rng(5)
    a, b = rng.normal(size=300), rng.normal(0.2, size=250)
    result = stats.ks_2samp(a, b)
    ours = ks_two_sample(a, b)
    assert (ours.statistic, ours.p_value) == (result.statistic, result.pvalue)


@pytest.mark.parametrize("shift", [0, 20, 150])
def test_ks_from_histograms_equals_ks_2samp_on_the_expanded_data(shift):
    rng = np.random.default_rng(shift)
    grid = 1000  # 0.001 bins, as the console keeps them
    a = rng.integers(0, grid - shift, size=3000)
    b = rng.integers(shift, grid, size=2200)
    counts_a = np.bincount(a, minlength=grid)
    counts_b = np.bincount(b, minlength=grid)
    expanded_a = np.repeat(np.arange(grid) / grid, counts_a)
    expanded_b = np.repeat(np.arange(grid) / grid, counts_b)
    reference = stats.ks_2samp(expanded_a, expanded_b, method="asymp")
    ours = ks_two_sample_from_counts(counts_a, counts_b)
    assert ours.statistic == pytest.approx(reference.statistic, abs=1e-15)
    assert ours.statistic == pytest.approx(stats.ks_2samp(expanded_a, expanded_b).statistic, abs=1e-15)
    assert ours.p_value == pytest.approx(reference.pvalue, rel=1e-12, abs=1e-300)


def test_ks_from_histograms_needs_items_on_both_sides():
    with pytest.raises(ValueError):
        ks_two_sample_from_counts([0, 0], [1, 2])
    with pytest.raises(ValueError):
        ks_two_sample_from_counts([1, 2, 3], [1, 2])


# --------------------------------------------------------------------------- total variation


def test_total_variation_is_half_the_l1_distance_over_the_union_of_categories():
    a = {"billing": 30, "login": 50, "vpn": 20}
    b = {"billing": 10, "login": 50, "printing": 40}
    categories = sorted(set(a) | set(b))
    p = np.array([a.get(k, 0) for k in categories]) / 100
    q = np.array([b.get(k, 0) for k in categories]) / 100
    assert total_variation_distance(a, b) == pytest.approx(0.5 * cityblock(p, q))
    # By hand: |0.3-0.1| + |0.5-0.5| + |0-0.4| + |0.2-0| = 0.8, halved.
    assert total_variation_distance(a, b) == pytest.approx(0.4)


def test_total_variation_of_the_same_mix_is_zero_and_of_disjoint_mixes_one():
    assert total_variation_distance({"a": 2, "b": 6}, {"a": 1, "b": 3}) == 0.0
    assert total_variation_distance({"a": 5}, {"b": 5}) == 1.0
    with pytest.raises(ValueError):
        total_variation_distance({"a": 0}, {"a": 1})


# --------------------------------------------------------------------------- one mix, chi-square


@pytest.mark.parametrize(
    "a, b",
    [
        ({"billing": 30, "login": 50, "vpn": 20}, {"billing": 10, "login": 50, "printing": 40}),
        ({"a": 200, "b": 200, "c": 200}, {"a": 6, "b": 5, "c": 3}),
        ({"a": 90, "b": 10}, {"a": 70, "b": 30}),
        ({"a": 5, "b": 0, "c": 7}, {"a": 4, "b": 0, "c": 1}),
    ],
)
def test_the_mix_test_is_scipys_chi_square_of_the_contingency_table(a, b):
    categories = [k for k in sorted(set(a) | set(b)) if a.get(k, 0) + b.get(k, 0)]
    table = [[a.get(k, 0) for k in categories], [b.get(k, 0) for k in categories]]
    reference = stats.chi2_contingency(table, correction=False)
    ours = mix_homogeneity_test(a, b)
    assert ours.statistic == pytest.approx(reference.statistic, rel=1e-12)
    assert ours.degrees_of_freedom == reference.dof
    assert ours.p_value == pytest.approx(reference.pvalue, rel=1e-9)


def test_the_mix_test_of_one_category_finds_nothing_and_needs_items():
    assert mix_homogeneity_test({"a": 3}, {"a": 9}).p_value == 1.0
    with pytest.raises(ValueError):
        mix_homogeneity_test({"a": 0}, {"a": 1})
