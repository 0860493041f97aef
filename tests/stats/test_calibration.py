"""Calibration and failure prediction, checked against scikit-learn, hand examples and the
worked comparison of docs/statistics.md section 6 (verbalized vs agreement scores, 1,000 items)."""

import json
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from sklearn.isotonic import IsotonicRegression
from sklearn.metrics import brier_score_loss, roc_auc_score

from console.stats.calibration import (
    auroc,
    brier_decomposition,
    calibration_by_segment,
    calibration_report,
    expected_calibration_error,
    reliability_bins,
    risk_coverage,
)

SIX_DECIMALS = 5e-7


def build_buckets(buckets: list[tuple[int, float, int]]) -> tuple[np.ndarray, np.ndarray]:
    """Items from (size, score, number correct) buckets, as the seed states its data."""
    scores: list[float] = []
    correct: list[bool] = []
    for size, score, n_correct in buckets:
        scores += [score] * size
        correct += [True] * n_correct + [False] * (size - n_correct)
    return np.array(scores), np.array(correct)


# The worked example of docs/statistics.md section 6: the same 1,000 answers (738 correct), two confidence signals.
VERBALIZED = build_buckets([(300, 0.90, 210), (400, 0.95, 300), (300, 1.00, 228)])
AGREEMENT = build_buckets([(350, 1.0, 329), (200, 7 / 8, 168), (180, 6 / 8, 126), (150, 5 / 8, 75), (120, 3 / 8, 40)])

tied_scores = st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.7, 0.9, 1.0])
labelled_items = st.lists(
    st.tuples(st.one_of(tied_scores, st.floats(0.0, 1.0)), st.booleans()),
    min_size=1,
    max_size=60,
)
bin_choices = st.one_of(
    st.integers(1, 25),
    st.lists(st.floats(0.001, 0.999), min_size=0, max_size=6, unique=True).map(
        lambda inner: [0.0, *sorted(inner), 1.0]
    ),
)


def split(items: list[tuple[float, bool]]) -> tuple[np.ndarray, np.ndarray]:
    return np.array([s for s, _ in items], dtype=float), np.array([c for _, c in items])


# --------------------------------------------------------------------------- AUROC


@given(labelled_items)
def test_auroc_matches_sklearn_including_ties(items):
    scores, correct = split(items)
    assume(correct.any() and not correct.all())
    assert auroc(scores, correct) == pytest.approx(roc_auc_score(correct, scores), abs=1e-12)


def test_auroc_counts_a_tied_pair_as_half_a_win():
    # Pairs (correct, wrong): (0.8, 0.8) tie, (0.8, 0.2) win, (0.5, 0.8) loss, (0.5, 0.2) win.
    assert auroc([0.8, 0.5, 0.8, 0.2], [True, True, False, False]) == pytest.approx(2.5 / 4)


def test_auroc_is_undefined_when_only_one_class_is_present():
    assert auroc([0.2, 0.9], [True, True]) is None
    assert auroc([0.2, 0.9], [0, 0]) is None
    assert auroc([], []) is None


def test_a_constant_score_has_auroc_one_half():
    assert auroc([0.7] * 5, [1, 0, 1, 1, 0]) == 0.5


# --------------------------------------------------------------------------- bins and ECE


def test_bins_are_left_closed_and_the_last_bin_also_holds_a_score_of_one():
    bins = reliability_bins([0.0, 0.0999, 0.1, 0.3, 0.9, 1.0], [1, 1, 0, 1, 0, 1], bins=10)
    assert [b["count"] for b in bins] == [2, 1, 0, 1, 0, 0, 0, 0, 0, 2]
    assert (bins[1]["low"], bins[1]["high"]) == (0.1, 0.2)
    assert (bins[9]["low"], bins[9]["high"]) == (0.9, 1.0)
    assert bins[9]["mean_score"] == pytest.approx(0.95)
    assert bins[9]["accuracy"] == 0.5


def test_empty_bins_have_no_mean_score_and_no_accuracy():
    bins = reliability_bins([0.05, 0.95], [0, 1], bins=4)
    assert bins[1] == {"low": 0.25, "high": 0.5, "count": 0, "mean_score": None, "accuracy": None}


def test_explicit_edges_give_left_closed_bins_with_those_edges():
    bins = reliability_bins([0.2, 0.5, 0.6, 1.0], [0, 1, 1, 1], bins=[0.0, 0.5, 1.0])
    assert [(b["low"], b["high"], b["count"]) for b in bins] == [(0.0, 0.5, 1), (0.5, 1.0, 3)]


@pytest.mark.parametrize("bad_bins", [0, -3, [0.0, 0.5], [0.1, 1.0], [0.0, 0.6, 0.4, 1.0]])
def test_bins_must_cover_the_unit_interval_with_increasing_edges(bad_bins):
    with pytest.raises(ValueError):
        reliability_bins([0.5], [1], bins=bad_bins)


@pytest.mark.parametrize("score", [-0.01, 1.01])
def test_scores_outside_the_unit_interval_cannot_be_binned(score):
    with pytest.raises(ValueError):
        expected_calibration_error([score, 0.5], [1, 0])


def test_ece_weights_each_bins_gap_by_its_share_of_items():
    # Bin [0.2, 0.3): 3 items, mean 0.2, accuracy 1/3 -> gap 2/15.
    # Bin [0.9, 1.0]: 1 item, mean 1.0, accuracy 0 -> gap 1.
    ece = expected_calibration_error([0.2, 0.2, 0.2, 1.0], [1, 0, 0, 0], bins=10)
    assert ece == pytest.approx(3 / 4 * 2 / 15 + 1 / 4 * 1)


def test_ece_with_one_bin_is_the_gap_between_mean_score_and_accuracy():
    scores, correct = AGREEMENT
    assert expected_calibration_error(scores, correct, bins=1) == pytest.approx(abs(scores.mean() - correct.mean()))


def test_ece_of_no_items_is_undefined():
    assert expected_calibration_error([], []) is None


# --------------------------------------------------------------------------- Brier


@given(labelled_items, bin_choices)
def test_brier_score_matches_sklearn(items, bins):
    scores, correct = split(items)
    parts = brier_decomposition(scores, correct, bins)
    assert parts["brier"] == pytest.approx(brier_score_loss(correct.astype(int), scores, labels=[0, 1]), abs=1e-12)


@settings(max_examples=300)
@given(labelled_items, bin_choices)
def test_brier_equals_rel_minus_res_plus_unc_plus_within_bin_terms(items, bins):
    scores, correct = split(items)
    p = brier_decomposition(scores, correct, bins)
    rebuilt = (
        p["reliability"] - p["resolution"] + p["uncertainty"] + p["within_bin_variance"] - p["within_bin_covariance"]
    )
    assert rebuilt == pytest.approx(p["brier"], abs=1e-12)
    assert p["reliability"] >= 0 and p["resolution"] >= 0 and p["within_bin_variance"] >= 0


def test_within_bin_terms_vanish_when_forecasts_are_constant_within_each_bin():
    scores, correct = AGREEMENT
    p = brier_decomposition(scores, correct, bins=10)
    assert p["within_bin_variance"] == 0.0
    assert p["within_bin_covariance"] == 0.0
    assert p["reliability"] - p["resolution"] + p["uncertainty"] == pytest.approx(p["brier"])


def test_brier_decomposition_of_no_items_is_undefined():
    assert brier_decomposition([], []) is None


def test_binning_three_verbalized_levels_together_moves_resolution_into_within_bin_terms():
    # Seed 11.4: "arbitrary numerical binning can change reported resolution". With ten
    # equal-width bins the levels 0.90, 0.95 and 1.00 all fall in [0.9, 1.0].
    scores, correct = VERBALIZED
    coarse = brier_decomposition(scores, correct, bins=10)
    by_level = brier_decomposition(scores, correct, bins=[0.0, 0.925, 0.975, 1.0])
    assert coarse["brier"] == by_level["brier"] == pytest.approx(0.238)
    assert coarse["resolution"] == 0.0
    assert coarse["reliability"] == pytest.approx((0.95 - 0.738) ** 2)
    # Variance of the scores, 0.904 - 0.95^2, and twice their covariance with correctness.
    assert coarse["within_bin_variance"] == pytest.approx(0.0015)
    assert coarse["within_bin_covariance"] == pytest.approx(2 * (0.702 - 0.738 * 0.95))
    assert by_level["resolution"] == pytest.approx(0.000636)
    assert by_level["within_bin_variance"] == pytest.approx(0.0, abs=1e-15)


# --------------------------------------------------------------------------- risk-coverage


def test_risk_coverage_serves_every_item_at_or_above_each_distinct_cutoff():
    curve = risk_coverage([0.8, 0.3, 0.9, 0.8], [False, False, True, True])
    assert curve["points"] == [
        {"cutoff": 0.9, "coverage": 0.25, "risk": 0.0},
        {"cutoff": 0.8, "coverage": 0.75, "risk": pytest.approx(1 / 3)},
        {"cutoff": 0.3, "coverage": 1.0, "risk": 0.5},
    ]
    # Steps of width 1/4, 2/4, 1/4 carry risks 0, 1/3, 1/2: the tie group at 0.8 is one step.
    assert curve["aurc"] == pytest.approx(0.25 * 0 + 0.5 / 3 + 0.25 * 0.5)  # 7/24


def test_aurc_with_distinct_scores_is_the_mean_risk_over_the_n_coverage_levels():
    # Sorted by score the items are right, wrong, right, wrong: risks 0, 1/2, 1/3, 1/2.
    curve = risk_coverage([0.9, 0.8, 0.7, 0.6], [1, 0, 1, 0])
    assert curve["aurc"] == pytest.approx((0 + 1 / 2 + 1 / 3 + 1 / 2) / 4)


@given(st.lists(st.booleans(), min_size=1, max_size=40))
def test_aurc_equals_the_per_item_mean_of_selective_risk_for_distinct_scores(correct):
    correct = np.array(correct)
    scores = np.linspace(1.0, 0.0, len(correct))  # already sorted, all distinct
    wrong_so_far = np.cumsum(~correct)
    per_item_risk = wrong_so_far / np.arange(1, len(correct) + 1)
    assert risk_coverage(scores, correct)["aurc"] == pytest.approx(per_item_risk.mean())


def test_a_perfect_ranking_has_lower_aurc_than_a_reversed_one():
    correct = [1, 1, 1, 0, 0]
    good = risk_coverage([0.9, 0.8, 0.7, 0.2, 0.1], correct)["aurc"]
    bad = risk_coverage([0.1, 0.2, 0.3, 0.8, 0.9], correct)["aurc"]
    assert good < bad


def test_capping_curve_points_keeps_both_ends_and_leaves_aurc_unchanged():
    rng = np.random.default_rng(3)
    scores = rng.random(5000)
    correct = rng.random(5000) < scores
    full = risk_coverage(scores, correct)
    capped = risk_coverage(scores, correct, max_points=50)
    assert len(full["points"]) == 5000
    assert len(capped["points"]) == 50
    assert capped["aurc"] == full["aurc"]
    assert capped["points"][0] == full["points"][0]
    assert capped["points"][-1] == full["points"][-1]
    assert all(point in full["points"] for point in capped["points"])
    with pytest.raises(ValueError):
        risk_coverage(scores, correct, max_points=1)


def test_risk_coverage_of_no_items_is_empty():
    assert risk_coverage([], []) == {"points": [], "aurc": None}


@given(labelled_items)
def test_a_strictly_increasing_relabeling_preserves_auroc_and_risk_coverage_points(items):
    # Seed 11.4: recalibration by a monotone map cannot create (or destroy) separation.
    scores, correct = split(items)
    levels, rank = np.unique(scores, return_inverse=True)
    relabelled = np.sqrt((rank + 1) / (len(levels) + 1))  # strictly increasing in the levels
    before, after = risk_coverage(scores, correct), risk_coverage(relabelled, correct)
    assert auroc(scores, correct) == auroc(relabelled, correct)
    assert [(p["coverage"], p["risk"]) for p in before["points"]] == [
        (p["coverage"], p["risk"]) for p in after["points"]
    ]
    assert before["aurc"] == after["aurc"]


# --------------------------------------------------------------------------- worked example


def test_the_seed_examples_share_1000_answers_with_base_accuracy_0_738():
    for scores, correct in (VERBALIZED, AGREEMENT):
        assert len(scores) == 1000 and correct.sum() == 738
        uncertainty = brier_decomposition(scores, correct)["uncertainty"]
        assert uncertainty == pytest.approx(0.193356, abs=1e-12)


def test_seed_verbalized_levels_have_accuracies_0_700_0_750_0_760():
    scores, correct = VERBALIZED
    bins = reliability_bins(scores, correct, bins=[0.0, 0.925, 0.975, 1.0])
    assert [b["accuracy"] for b in bins] == pytest.approx([0.700, 0.750, 0.760])


def test_seed_verbalized_auroc_is_70320_wins_and_65316_ties_over_193356_pairs():
    scores, correct = VERBALIZED
    value = auroc(scores, correct)
    assert value * 193_356 == pytest.approx(70_320 + 65_316 / 2, abs=1e-6)
    assert value == pytest.approx(0.532582387, abs=5e-10)


def test_seed_agreement_signal_has_ece_0_06075_rel_0_00450708_res_0_04476933():
    scores, correct = AGREEMENT
    parts = brier_decomposition(scores, correct, bins=10)
    assert expected_calibration_error(scores, correct, bins=10) == pytest.approx(0.06075, abs=SIX_DECIMALS)
    assert parts["reliability"] == pytest.approx(0.00450708, abs=5e-9)
    assert parts["resolution"] == pytest.approx(0.04476933, abs=5e-9)


def test_seed_agreement_auroc_is_153888_over_193356():
    scores, correct = AGREEMENT
    assert auroc(scores, correct) == pytest.approx(153_888 / 193_356, abs=1e-15)
    assert auroc(scores, correct) == pytest.approx(0.795879, abs=SIX_DECIMALS)


def test_seed_isotonic_fit_zeroes_verbalized_ece_in_sample_and_keeps_its_auroc():
    scores, correct = VERBALIZED
    fitted = IsotonicRegression().fit_transform(scores, correct.astype(float))
    assert sorted(set(np.round(fitted, 12))) == pytest.approx([0.700, 0.750, 0.760])
    assert expected_calibration_error(fitted, correct) == pytest.approx(0.0, abs=1e-12)
    assert auroc(fitted, correct) == pytest.approx(0.532582, abs=SIX_DECIMALS)
    assert auroc(fitted, correct) == auroc(scores, correct)


def test_seed_groupwise_calibrated_brier_skill_is_res_over_unc():
    verbal = brier_decomposition(*VERBALIZED, bins=[0.0, 0.925, 0.975, 1.0])
    agree = brier_decomposition(*AGREEMENT, bins=10)
    assert 100 * verbal["resolution"] / verbal["uncertainty"] == pytest.approx(0.328927, abs=SIX_DECIMALS)
    assert 100 * agree["resolution"] / agree["uncertainty"] == pytest.approx(23.153837, abs=SIX_DECIMALS)


def test_seed_cost_cutoff_admits_700_raw_verbalized_none_fitted_and_350_agreement_at_0_94():
    cutoff = 19.5 / 21  # tau = (c_w - c_a) / (1 + c_w) at c_w = 20, c_a = 0.5
    scores, correct = VERBALIZED
    fitted = IsotonicRegression().fit_transform(scores, correct.astype(float))
    assert int((scores >= cutoff).sum()) == 700
    assert int((fitted >= cutoff).sum()) == 0
    top = risk_coverage(*AGREEMENT)["points"][0]
    assert top["cutoff"] == 1.0
    assert top["coverage"] == pytest.approx(0.35)
    assert 1 - top["risk"] == pytest.approx(0.94)


def test_seed_constant_score_at_the_base_rate_is_calibrated_and_useless_for_abstention():
    _, correct = AGREEMENT
    constant = np.full(len(correct), correct.mean())
    assert expected_calibration_error(constant, correct) == pytest.approx(0.0, abs=1e-12)
    assert auroc(constant, correct) == 0.5


# --------------------------------------------------------------------------- reports

DESIGN_KEYS = {
    "n", "auroc", "ece", "brier", "reliability", "resolution", "uncertainty",
    "bins", "risk_coverage", "aurc",
}  # fmt: skip


def test_calibration_report_has_the_design_keys_and_survives_strict_json():
    report = calibration_report(*AGREEMENT, bins=10)
    assert set(report) == DESIGN_KEYS | {"within_bin_variance", "within_bin_covariance"}
    assert json.loads(json.dumps(report, allow_nan=False)) == report
    assert report["n"] == 1000
    assert set(report["bins"][0]) == {"low", "high", "count", "mean_score", "accuracy"}
    assert set(report["risk_coverage"][0]) == {"cutoff", "coverage", "risk"}
    assert all(type(report[k]) is float for k in ("auroc", "ece", "brier", "aurc"))


def test_calibration_report_agrees_with_the_single_purpose_functions():
    scores, correct = VERBALIZED
    report = calibration_report(scores, correct, bins=10, max_points=2)
    parts = brier_decomposition(scores, correct, bins=10)
    assert report["auroc"] == auroc(scores, correct)
    assert report["ece"] == expected_calibration_error(scores, correct, bins=10)
    assert report["bins"] == reliability_bins(scores, correct, bins=10)
    assert {k: report[k] for k in parts} == parts
    assert report["aurc"] == risk_coverage(scores, correct)["aurc"]
    assert [p["cutoff"] for p in report["risk_coverage"]] == [1.0, 0.9]


def test_calibration_report_of_no_items_has_empty_bins_and_no_statistics():
    report = calibration_report([], [], bins=4)
    assert report["n"] == 0
    assert [b["count"] for b in report["bins"]] == [0, 0, 0, 0]
    assert report["risk_coverage"] == []
    for key in ("auroc", "ece", "brier", "reliability", "resolution", "uncertainty", "aurc"):
        assert report[key] is None


def test_calibration_by_segment_shows_errors_that_cancel_in_the_global_figure():
    # Seed 11.4: opposite segment errors can cancel in a global ECE.
    scores = [0.8] * 5 + [0.4] * 5
    correct = [1, 1, 1, 0, 0] * 2
    languages = ["en"] * 5 + ["de"] * 5
    assert expected_calibration_error(scores, correct, bins=1) == pytest.approx(0.0, abs=1e-12)
    by_language = calibration_by_segment(scores, correct, languages, bins=1)
    assert list(by_language) == ["de", "en"]
    assert by_language["en"]["ece"] == pytest.approx(0.2)
    assert by_language["de"]["ece"] == pytest.approx(0.2)
    assert by_language["en"] == calibration_report(scores[:5], correct[:5], bins=1)


def test_calibration_by_segment_needs_one_segment_per_item():
    with pytest.raises(ValueError):
        calibration_by_segment([0.1, 0.2], [0, 1], ["en"])


@pytest.mark.parametrize(
    ("scores", "correct"),
    [([0.1, 0.2], [1]), ([0.1, math.nan], [1, 0]), ([0.1, 0.2], [1, 2]), ([[0.1]], [[1]])],
)
def test_malformed_inputs_are_refused(scores, correct):
    with pytest.raises(ValueError):
        calibration_report(scores, correct)
