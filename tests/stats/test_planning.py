"""The sample-size planner against the seed's figures and statsmodels' power calculations."""

import math

import numpy as np
import pytest
from statsmodels.stats.power import NormalIndPower
from statsmodels.stats.proportion import proportion_confint, proportion_effectsize

from console.stats.intervals import proportion_interval
from console.stats.operating_points import operating_points
from console.stats.planning import (
    grades_for_half_width,
    grades_for_interval_half_width,
    grades_to_separate_cutoffs,
    half_width_for_grades,
    half_width_of_interval,
)


def test_400_grades_at_34_percent_give_the_seeds_four_point_six_points():
    assert half_width_for_grades(0.34, 400) == pytest.approx(0.046, abs=0.0005)


def test_four_point_six_points_at_34_percent_need_about_400_grades():
    assert grades_for_half_width(0.34, 0.046) == 408
    assert grades_for_half_width(0.34, 0.0464) == 401


def test_planned_sample_delivers_the_half_width_asked_for():
    for p, h in [(0.34, 0.046), (0.5, 0.03), (0.1, 0.02), (0.9, 0.05)]:
        n = grades_for_half_width(p, h)
        assert half_width_for_grades(p, n) <= h
        assert half_width_for_grades(p, n - 1) > h
        # The displayed Wilson interval at that size is as tight, to within a few tenths of a point.
        wilson = proportion_interval(p * n, n)
        assert (wilson.high - wilson.low) / 2 == pytest.approx(h, abs=0.003)


def test_grades_for_half_width_is_the_textbook_formula():
    z = 1.959963984540054
    assert grades_for_half_width(0.5, 0.05) == math.ceil(z**2 * 0.25 / 0.05**2)
    assert grades_for_half_width(0.5, 0.05, confidence=0.9) == 271


def test_design_effect_multiplies_the_sample_size():
    assert grades_for_half_width(0.34, 0.046, design_effect=2.0) == math.ceil(
        2 * 1.959963984540054**2 * 0.34 * 0.66 / 0.046**2
    )


@pytest.mark.parametrize(
    ("p_below", "p_band", "ratio", "alpha", "power"),
    [
        (0.34, 0.43, 1.0, 0.05, 0.8),
        (0.34, 0.43, 0.5, 0.05, 0.9),
        (0.21, 0.34, 3.0, 0.01, 0.8),
        (0.58, 0.9, 0.2, 0.05, 0.8),
    ],
)
def test_separating_two_cutoffs_matches_statsmodels_normal_ind_power(p_below, p_band, ratio, alpha, power):
    plan = grades_to_separate_cutoffs(
        p_below=p_below, p_band=p_band, band_to_below_ratio=ratio, alpha=alpha, power=power
    )
    effect_size = abs(proportion_effectsize(p_band, p_below))
    assert plan.effect_size == pytest.approx(effect_size, rel=1e-12)
    nobs1 = NormalIndPower().solve_power(effect_size=effect_size, alpha=alpha, power=power, ratio=ratio)
    assert plan.below_exact == pytest.approx(nobs1, rel=1e-4)
    achieved = NormalIndPower().power(effect_size, plan.below, alpha, ratio=plan.band / plan.below)
    assert achieved >= power
    assert plan.total == plan.below + plan.band


def test_one_sided_separation_matches_statsmodels():
    plan = grades_to_separate_cutoffs(p_below=0.34, p_band=0.43, alternative="one-sided")
    effect_size = abs(proportion_effectsize(0.43, 0.34))
    nobs1 = NormalIndPower().solve_power(
        effect_size=effect_size, alpha=0.05, power=0.8, ratio=1.0, alternative="larger"
    )
    assert plan.below_exact == pytest.approx(nobs1, rel=1e-9)


def test_closer_cutoffs_need_more_grades():
    far_apart = grades_to_separate_cutoffs(p_below=0.34, p_band=0.50)
    close = grades_to_separate_cutoffs(p_below=0.34, p_band=0.38)
    assert close.total > far_apart.total


def test_equal_shares_cannot_be_separated():
    with pytest.raises(ValueError):
        grades_to_separate_cutoffs(p_below=0.3, p_band=0.3)


def test_out_of_range_inputs_are_rejected():
    with pytest.raises(ValueError):
        grades_for_half_width(1.2, 0.05)
    with pytest.raises(ValueError):
        grades_for_half_width(0.3, 0.0)
    with pytest.raises(ValueError):
        half_width_for_grades(0.3, 0)


def test_half_width_now_is_the_displayed_wilson_interval_not_wald():
    # The issue: 2 of 2 read "±0.0%, target met" while the table showed 34.2-100.
    assert half_width_for_grades(1.0, 2) == 0.0
    shown = proportion_interval(2, 2)
    assert shown.low == pytest.approx(0.342, abs=0.001)
    assert half_width_of_interval(2, 2) == pytest.approx((1 - shown.low) / 2)
    assert half_width_of_interval(2, 2) > 0.3


@pytest.mark.parametrize("method", ["wilson", "clopper_pearson", "jeffreys", "agresti_coull"])
@pytest.mark.parametrize("k, n", [(0, 5), (3, 10), (34, 100), (100, 100), (136, 400)])
def test_half_width_of_interval_is_half_of_statsmodels_interval(method, k, n):
    statsmodels_method = {"clopper_pearson": "beta", "agresti_coull": "agresti_coull"}.get(method, method)
    low, high = proportion_confint(k, n, alpha=0.05, method=statsmodels_method)
    if method == "jeffreys":
        # Brown-Cai-DasGupta's boundary rule, which statsmodels omits (see intervals.py).
        low, high = (0.0 if k == 0 else low), (1.0 if k == n else high)
    assert half_width_of_interval(k, n, method=method) == pytest.approx((high - low) / 2, abs=1e-9)


def test_half_width_of_interval_equals_the_operating_point_rows_interval():
    rng = np.random.default_rng(12)
    scores = rng.uniform(size=300)
    correct = rng.uniform(size=300) < scores
    rows = operating_points(
        population_size=300,
        cutoffs=[0.3, 0.6],
        graded_scores=scores,
        graded_correct=correct,
        population_scores_sorted=np.sort(scores),
    )
    for row in rows[1:]:
        far = row.false_abstention_rate
        k = round(far.value * row.graded_refused)
        assert half_width_of_interval(k, row.graded_refused) == pytest.approx(far.half_width)


def test_a_weighted_rows_half_width_is_its_own_interval_not_the_unweighted_one():
    rng = np.random.default_rng(5)
    scores = rng.uniform(size=400)
    correct = rng.uniform(size=400) < scores
    weights = np.where(scores < 0.5, 1.0, 6.0)
    rows = operating_points(
        population_size=400,
        cutoffs=[0.7],
        graded_scores=scores,
        graded_correct=correct,
        graded_weights=weights,
        population_scores_sorted=np.sort(scores),
    )
    far = rows[1].false_abstention_rate
    assert far.half_width == pytest.approx((far.high - far.low) / 2)
    assert far.half_width > half_width_of_interval(far.value * rows[1].graded_refused, rows[1].graded_refused)


@pytest.mark.parametrize("p", [0.0, 0.02, 0.34, 0.5, 0.9, 1.0])
@pytest.mark.parametrize("h", [0.03, 0.05, 0.1])
def test_grades_for_interval_half_width_is_the_least_n_that_reaches_it(p, h):
    n = grades_for_interval_half_width(p, h)
    assert half_width_of_interval(p * n, n) <= h
    if n > 1:
        assert half_width_of_interval(p * (n - 1), n - 1) > h


def test_at_a_share_of_one_the_displayed_interval_needs_far_more_than_one_grade():
    assert grades_for_half_width(1.0, 0.05) == 1
    z2 = 1.959963984540054**2
    assert grades_for_interval_half_width(1.0, 0.05) == math.ceil(z2 * 0.9 / 0.1) == 35
