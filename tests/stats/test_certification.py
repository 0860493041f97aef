"""The certified cutoff against an independent scan built on scipy's exact binomial test."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from console.stats.certification import DEFAULT_GRID, certify_cutoff, n_start


def reference_n_start(alpha, delta):
    n = 1
    while stats.binomtest(int(alpha * n / 2 + 1e-9), n, alpha, alternative="less").pvalue > delta:
        n += 1
    return n


def reference_certified_cutoff(scores, correct, grid, alpha, delta):
    """The certified-cutoff rule of docs/statistics.md, written independently: returns (cutoff, n, k) or None."""
    minimum = reference_n_start(alpha, delta)
    answer = None
    for cutoff in sorted(set(grid), reverse=True):
        served = scores >= cutoff
        n = int(served.sum())
        k = int((served & ~correct).sum())
        if n < minimum:
            continue
        if stats.binomtest(k, n, alpha, alternative="less").pvalue > delta:
            break
        answer = (cutoff, n, k)
    return answer


def graded_sample(n, seed, base_error=0.5):
    rng = np.random.default_rng(seed)
    scores = np.round(rng.random(n), 2)
    correct = rng.random(n) > base_error * (1 - scores) ** 2
    return scores, correct


def test_n_start_is_76_for_alpha_one_tenth_and_delta_five_hundredths():
    assert n_start(0.1, 0.05) == 76
    # 3 wrong of 76 certifies; no smaller n certifies with floor(alpha n / 2) wrong.
    assert stats.binom.cdf(3, 76, 0.1) <= 0.05
    assert all(stats.binom.cdf(int(0.1 * n / 2 + 1e-9), n, 0.1) > 0.05 for n in range(1, 76))


@pytest.mark.parametrize(("alpha", "delta"), [(0.05, 0.05), (0.1, 0.1), (0.2, 0.01), (0.02, 0.1)])
def test_n_start_matches_a_scan_with_scipy_binomtest(alpha, delta):
    assert n_start(alpha, delta) == reference_n_start(alpha, delta)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize(("alpha", "delta"), [(0.1, 0.05), (0.05, 0.1)])
def test_certified_cutoff_matches_the_independent_scan(seed, alpha, delta):
    scores, correct = graded_sample(1500, seed)
    result = certify_cutoff(graded_scores=scores, graded_correct=correct, alpha=alpha, delta=delta)
    expected = reference_certified_cutoff(scores, correct, DEFAULT_GRID, alpha, delta)
    assert expected is not None
    assert result.certified
    assert (result.cutoff, result.graded_served, result.wrong_served) == expected


@given(
    n=st.integers(min_value=0, max_value=600),
    seed=st.integers(min_value=0, max_value=10_000),
    base_error=st.floats(min_value=0.05, max_value=0.9),
)
@settings(max_examples=60, deadline=None)
def test_certified_cutoff_matches_the_independent_scan_on_random_samples(n, seed, base_error):
    scores, correct = graded_sample(n, seed, base_error)
    grid = [0.5, 0.6, 0.7, 0.8, 0.9]
    result = certify_cutoff(graded_scores=scores, graded_correct=correct, alpha=0.1, delta=0.05, grid=grid)
    expected = reference_certified_cutoff(scores, correct, grid, 0.1, 0.05)
    if expected is None:
        assert not result.certified and result.cutoff is None
    else:
        assert (result.cutoff, result.graded_served, result.wrong_served) == expected


def test_the_certified_bound_is_the_one_sided_clopper_pearson_bound_and_below_alpha():
    scores, correct = graded_sample(2000, seed=21)
    result = certify_cutoff(graded_scores=scores, graded_correct=correct, alpha=0.1, delta=0.05)
    reference = stats.binomtest(result.wrong_served, result.graded_served, 0.1, alternative="less")
    bound = reference.proportion_ci(confidence_level=0.95, method="exact").high
    assert result.upper_bound == pytest.approx(bound, abs=1e-12)
    assert result.upper_bound <= 0.1


def test_p_value_rule_and_clopper_pearson_rule_agree_on_every_tested_cutoff():
    scores, correct = graded_sample(3000, seed=22, base_error=0.9)
    result = certify_cutoff(graded_scores=scores, graded_correct=correct, alpha=0.1, delta=0.05)
    tested = [step for step in result.steps if step.p_value is not None]
    assert tested
    for step in tested:
        assert (step.p_value <= 0.05) == (step.upper_bound <= 0.1)


def test_the_scan_stops_at_the_first_failure_even_if_a_lower_cutoff_would_pass():
    # 0.9: 100 served, 2 wrong -> certifies. 0.8 adds 100 items with 30 wrong -> fails.
    # 0.7 adds 1,000 correct items: 0.7 alone would certify, but the scan never reaches it.
    scores = np.concatenate([np.full(100, 0.95), np.full(100, 0.85), np.full(1000, 0.75)])
    correct = np.concatenate([np.arange(100) >= 2, np.arange(100) >= 30, np.ones(1000, bool)])
    result = certify_cutoff(graded_scores=scores, graded_correct=correct, alpha=0.1, delta=0.05, grid=[0.7, 0.8, 0.9])
    assert result.certified and result.cutoff == 0.9
    assert [step.outcome for step in result.steps] == ["certified", "failed"]
    served_at_07 = scores >= 0.7
    wrong_at_07 = int((served_at_07 & ~correct).sum())
    assert stats.binom.cdf(wrong_at_07, int(served_at_07.sum()), 0.1) <= 0.05


def test_cutoffs_with_too_few_graded_served_answers_are_skipped_not_failed():
    # Half of the 10 answers above 0.9 are wrong: tested alone, 0.9 would fail and end the scan.
    scores = np.concatenate([np.full(10, 0.95), np.full(200, 0.85)])
    correct = np.concatenate([np.arange(10) >= 5, np.arange(200) >= 2])
    result = certify_cutoff(graded_scores=scores, graded_correct=correct, alpha=0.1, delta=0.05, grid=[0.8, 0.9])
    assert [step.outcome for step in result.steps] == ["skipped_small_sample", "certified"]
    assert result.cutoff == 0.8 and result.graded_served == 210 and result.wrong_served == 7


def test_too_small_a_sample_is_not_certified_and_says_so():
    scores, correct = graded_sample(60, seed=23)
    result = certify_cutoff(graded_scores=scores, graded_correct=correct, alpha=0.1, delta=0.05)
    assert not result.certified
    assert result.reason_code == "sample_too_small"
    assert result.reason.startswith("too few graded answers to test any cutoff.")
    assert "at least 76 graded served answers" in result.reason
    assert "the lowest cutoff on the grid (0), which serves the most, has 60." in result.reason
    assert all(step.outcome == "skipped_small_sample" for step in result.steps)


def test_a_failing_first_cutoff_is_not_certified_and_says_so():
    scores = np.full(300, 0.95)
    correct = np.arange(300) >= 60
    result = certify_cutoff(graded_scores=scores, graded_correct=correct, alpha=0.1, delta=0.05, grid=[0.5, 0.9])
    assert not result.certified and result.cutoff is None
    assert result.reason_code == "first_cutoff_fails"
    assert "0.9" in result.reason and "60 wrong of 300" in result.reason


def test_statement_names_cutoff_level_confidence_and_scope():
    scores, correct = graded_sample(2000, seed=24)
    result = certify_cutoff(graded_scores=scores, graded_correct=correct, alpha=0.1, delta=0.05)
    statement = result.statement(route="it-support", window="2026-11-01..2026-11-30", versions="gen-2026-10/nli-4")
    assert f"At cutoff {result.cutoff:g}" in statement
    assert "at most 0.1 with 95% confidence" in statement
    assert "wrong-answer rate among served answers" in statement
    assert "it-support" in statement and "nli-4" in statement


def test_as_dict_is_json_ready():
    scores, correct = graded_sample(500, seed=25)
    payload = certify_cutoff(graded_scores=scores, graded_correct=correct, alpha=0.1, delta=0.05).as_dict()
    json.dumps(payload, allow_nan=False)
    assert {
        "certified",
        "cutoff",
        "upper_bound",
        "graded_served",
        "wrong_served",
        "alpha",
        "delta",
        "n_start",
        "reason",
    } <= set(payload)


def test_default_grid_runs_from_zero_to_ninety_nine_hundredths():
    assert DEFAULT_GRID[0] == 0.0 and DEFAULT_GRID[-1] == 0.99 and len(DEFAULT_GRID) == 100


def test_invalid_levels_are_rejected():
    with pytest.raises(ValueError):
        n_start(0.0, 0.05)
    with pytest.raises(ValueError):
        certify_cutoff(graded_scores=[0.5], graded_correct=[True], alpha=0.1, delta=1.0)


@pytest.mark.parametrize("label", [2, np.nan, -1, 0.5])
def test_labels_other_than_correct_or_wrong_are_rejected_not_read_as_correct(label):
    scores = np.linspace(0.5, 0.99, 200)
    labels = np.ones(200)
    labels[7] = label
    with pytest.raises(ValueError, match="graded_correct must be boolean"):
        certify_cutoff(graded_scores=scores, graded_correct=labels, alpha=0.1, delta=0.05)


def test_zero_one_integers_and_booleans_certify_alike():
    scores = np.linspace(0.5, 0.99, 200)
    labels = (np.arange(200) % 25 != 0).astype(int)
    as_ints = certify_cutoff(graded_scores=scores, graded_correct=labels, alpha=0.1, delta=0.05)
    as_bools = certify_cutoff(graded_scores=scores, graded_correct=labels.astype(bool), alpha=0.1, delta=0.05)
    assert as_ints == as_bools
