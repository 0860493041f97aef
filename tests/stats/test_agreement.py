"""Agreement between graders, checked against scikit-learn, statsmodels and hand examples."""

import math

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from scipy.stats import norm
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import aggregate_raters
from statsmodels.stats.inter_rater import cohens_kappa as statsmodels_cohens_kappa
from statsmodels.stats.inter_rater import fleiss_kappa as statsmodels_fleiss_kappa

from console.stats.agreement import (
    VERDICTS,
    cohen_kappa,
    fleiss_kappa,
    gwet_ac1,
    rater_accuracy_on_gold,
    verdict_counts,
)

verdict = st.sampled_from(VERDICTS)
verdict_pairs = st.lists(st.tuples(verdict, verdict), min_size=2, max_size=80)

# Three graders, four items, two categories (correct, incorrect). Worked by hand:
#   per-item agreement P_i = 1, 1/3, 1, 1            -> p_o = 5/6
#   prevalence pi = (2/3, 1/3)
#   Fleiss: p_e = 4/9 + 1/9 = 5/9                    -> kappa = (5/6 - 5/9) / (4/9) = 5/8
#   AC1 (q = 2): p_e = 2 * (2/3)(1/3) = 4/9          -> AC1 = (5/6 - 4/9) / (5/9) = 7/10
#   AC1 (q = 3, unused "unsure"): p_e = 2/9          -> AC1 = (5/6 - 2/9) / (7/9) = 11/14
HAND_COUNTS = np.array([[3, 0], [2, 1], [0, 3], [3, 0]])


def z(confidence: float) -> float:
    return float(norm.ppf(0.5 + confidence / 2))


# --------------------------------------------------------------------------- Cohen


@pytest.mark.filterwarnings("ignore::UserWarning")
@given(verdict_pairs)
def test_cohen_kappa_matches_sklearn(pairs):
    a, b = zip(*pairs, strict=True)
    expected = cohen_kappa_score(a, b)
    assume(not math.isnan(expected))
    assert cohen_kappa(a, b)["value"] == pytest.approx(expected, abs=1e-12)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@given(verdict_pairs)
def test_cohen_kappa_standard_error_is_the_fleiss_cohen_everitt_one_of_statsmodels(pairs):
    a, b = zip(*pairs, strict=True)
    result = cohen_kappa(a, b)
    assume(result["value"] is not None)
    categories = sorted(set(a) | set(b))
    table = np.zeros((len(categories), len(categories)))
    for x, y in pairs:
        table[categories.index(x), categories.index(y)] += 1
    reference = statsmodels_cohens_kappa(table)
    # Rounding can leave the variance a hair either side of zero (e.g. when one grader is
    # constant, kappa is identically 0 and so is its variance); statsmodels then reports NaN,
    # and a square root turns a 1e-18 residue into 1e-9. Compare variances.
    assert result["se"] ** 2 == pytest.approx(max(reference.var_kappa, 0.0), abs=1e-13)


def test_cohen_kappa_interval_is_value_plus_or_minus_z_se_and_names_its_method():
    a = ["correct"] * 40 + ["incorrect"] * 20 + ["unsure"] * 5
    b = ["correct"] * 35 + ["incorrect"] * 25 + ["correct"] * 3 + ["unsure"] * 2
    result = cohen_kappa(a, b, confidence=0.9)
    assert result["n"] == 65
    assert result["confidence"] == 0.9
    assert "Fleiss, Cohen & Everitt (1969)" in result["interval"]
    assert result["low"] == pytest.approx(result["value"] - z(0.9) * result["se"])
    assert result["high"] == pytest.approx(result["value"] + z(0.9) * result["se"])


def test_cohen_kappa_is_undefined_when_both_graders_use_one_and_the_same_category():
    result = cohen_kappa(["correct"] * 5, ["correct"] * 5)
    assert (result["value"], result["low"], result["high"], result["se"]) == (None,) * 4


def test_cohen_kappa_of_no_items_is_undefined():
    assert cohen_kappa([], [])["value"] is None


def test_cohen_kappa_needs_the_same_items_from_both_graders():
    with pytest.raises(ValueError):
        cohen_kappa(["correct"], ["correct", "unsure"])


def test_unsure_is_its_own_category_in_agreement():
    # Both unsure is agreement; unsure against correct is a disagreement.
    both_unsure = cohen_kappa(["correct", "incorrect", "unsure"], ["correct", "incorrect", "unsure"])
    assert both_unsure["value"] == pytest.approx(1.0)
    split = cohen_kappa(["correct", "incorrect", "unsure"], ["correct", "incorrect", "correct"])
    assert split["value"] < 1.0
    # p_o = 2/3; margins a = (1/3, 1/3, 1/3), b = (2/3, 1/3, 0): p_e = 1/3 -> kappa = 1/2.
    assert split["value"] == pytest.approx(0.5)


def test_perfect_agreement_has_a_degenerate_interval_at_one():
    result = cohen_kappa(["correct", "incorrect"] * 10, ["correct", "incorrect"] * 10)
    assert (result["value"], result["low"], result["high"]) == pytest.approx((1.0, 1.0, 1.0))


# --------------------------------------------------------------------------- Fleiss and AC1


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@given(
    st.integers(2, 6).flatmap(
        lambda raters: st.lists(st.lists(st.integers(0, 2), min_size=raters, max_size=raters), min_size=2, max_size=40)
    )
)
def test_fleiss_kappa_matches_statsmodels_when_every_item_has_the_same_graders(codes):
    counts, _ = aggregate_raters(np.array(codes), n_cat=3)
    expected = statsmodels_fleiss_kappa(counts)
    assume(np.isfinite(expected))
    assert fleiss_kappa(counts)["value"] == pytest.approx(expected, abs=1e-12)


def test_fleiss_kappa_worked_example():
    result = fleiss_kappa(HAND_COUNTS)
    assert result["value"] == pytest.approx(5 / 8)
    assert statsmodels_fleiss_kappa(HAND_COUNTS) == pytest.approx(5 / 8)
    # Influence u_i = [(P_i - p_o) - 2 (1 - kappa)(pe_i - p_e)] / (1 - p_e) with
    # pe_i = (2/3, 5/9, 1/3, 2/3): u = (3/16, -9/8, 3/4, 3/16); sum u^2 = 486/256.
    assert result["se"] == pytest.approx(math.sqrt(486 / 256 / (4 * 3)))
    assert "Gwet (2008)" in result["interval"]


def test_gwet_ac1_worked_example():
    result = gwet_ac1(HAND_COUNTS)
    assert result["value"] == pytest.approx(0.7)
    # pe_i = (1/3, 4/9, 2/3, 1/3); u = (0.42, -0.9, 0.06, 0.42); sum u^2 = 1.1664.
    assert result["se"] == pytest.approx(math.sqrt(1.1664 / (4 * 3)))
    assert result["low"] == pytest.approx(0.7 - z(0.95) * result["se"])
    assert result["high"] == 1.0  # 0.7 + 1.96 * 0.31 is clipped


def test_gwet_ac1_counts_an_unused_category_on_the_scale():
    with_unsure_column = np.column_stack([HAND_COUNTS, np.zeros(4, dtype=int)])
    assert gwet_ac1(with_unsure_column)["value"] == pytest.approx(11 / 14)
    assert fleiss_kappa(with_unsure_column)["value"] == pytest.approx(5 / 8)


def test_ac1_stays_high_when_prevalence_is_extreme_while_kappa_collapses():
    # 100 items, two graders: 95 both correct, 2 correct/incorrect, 3 incorrect/correct.
    pairs = [("correct", "correct")] * 95 + [("correct", "incorrect")] * 2 + [("incorrect", "correct")] * 3
    a, b = zip(*pairs, strict=True)
    kappa = cohen_kappa(a, b)["value"]
    # p_o = 0.95, p_e = 0.97 * 0.98 + 0.03 * 0.02 = 0.9512.
    assert kappa == pytest.approx((0.95 - 0.9512) / (1 - 0.9512))
    assert kappa < 0.0
    ac1 = gwet_ac1(verdict_counts(pairs, categories=("correct", "incorrect")))["value"]
    # pi = (0.975, 0.025): p_e = 2 * 0.975 * 0.025 = 0.04875.
    assert ac1 == pytest.approx((0.95 - 0.04875) / (1 - 0.04875))
    assert ac1 > 0.9


def test_for_two_graders_fleiss_kappa_is_scotts_pi():
    pairs = (
        [("correct", "correct")] * 30
        + [("correct", "incorrect")] * 6
        + [("incorrect", "incorrect")] * 10
        + [("incorrect", "correct")] * 4
    )
    # p_o = 40/50; pooled prevalence of correct = (36 + 34) / 100 = 0.7.
    scotts_pi = (0.8 - (0.7**2 + 0.3**2)) / (1 - (0.7**2 + 0.3**2))
    counts = verdict_counts(pairs, categories=("correct", "incorrect"))
    assert fleiss_kappa(counts)["value"] == pytest.approx(scotts_pi)


def simulated_gradings(items: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    truth = rng.choice(3, size=items, p=[0.6, 0.3, 0.1])
    gradings = []
    for item in range(items):
        graders = int(rng.integers(2, 5))
        gradings.append(
            [VERDICTS[truth[item]] if rng.random() < 0.75 else VERDICTS[rng.integers(3)] for _ in range(graders)]
        )
    return verdict_counts(gradings)


@pytest.mark.parametrize("coefficient", [fleiss_kappa, gwet_ac1])
def test_multi_rater_standard_errors_agree_with_the_jackknife(coefficient):
    counts = simulated_gradings(300, seed=7)
    n = len(counts)
    leave_one_out = np.array([coefficient(np.delete(counts, i, axis=0))["value"] for i in range(n)])
    jackknife_se = math.sqrt((n - 1) / n * ((leave_one_out - leave_one_out.mean()) ** 2).sum())
    assert coefficient(counts)["se"] == pytest.approx(jackknife_se, rel=0.05)


def test_fleiss_kappa_is_undefined_when_every_verdict_is_the_same():
    assert fleiss_kappa([[3, 0, 0], [3, 0, 0]])["value"] is None


def test_items_graded_once_are_refused():
    with pytest.raises(ValueError):
        fleiss_kappa([[2, 0, 0], [1, 0, 0]])
    with pytest.raises(ValueError):
        gwet_ac1([[2, 0, 0], [0, 1, 0]])


def test_count_matrices_must_be_non_negative_integers_with_two_categories():
    for bad in ([[1.5, 0.5]], [[3, -1]], [[2], [3]], [1, 2, 3]):
        with pytest.raises(ValueError):
            fleiss_kappa(bad)


# --------------------------------------------------------------------------- building counts


def test_verdict_counts_emits_the_full_scale_in_a_fixed_order():
    counts = verdict_counts([["correct", "correct", "unsure"], ["incorrect", "correct"]])
    assert counts.tolist() == [[2, 0, 1], [1, 1, 0]]


def test_verdict_counts_agrees_with_statsmodels_aggregate_raters_for_a_full_grid():
    rng = np.random.default_rng(11)
    codes = rng.integers(0, 3, size=(25, 4))
    expected, _ = aggregate_raters(codes, n_cat=3)
    gradings = [[VERDICTS[c] for c in row] for row in codes]
    assert verdict_counts(gradings).tolist() == expected.tolist()


def test_verdict_counts_refuses_an_unknown_verdict():
    with pytest.raises(ValueError, match="item 1"):
        verdict_counts([["correct"], ["maybe"]])


# --------------------------------------------------------------------------- gold


def wilson(k: int, n: int, confidence: float) -> tuple[float, float]:
    q = z(confidence)
    centre = (k + q * q / 2) / (n + q * q)
    half = q / (n + q * q) * math.sqrt(k * (n - k) / n + q * q / 4)
    return centre - half, centre + half


def test_accuracy_on_gold_leaves_unsure_out_and_counts_it_beside():
    gold = ["correct"] * 6 + ["incorrect"] * 6
    verdicts = ["correct"] * 5 + ["incorrect"] + ["incorrect"] * 3 + ["correct"] + ["unsure"] * 2
    result = rater_accuracy_on_gold(verdicts, gold)
    assert (result["gold_items"], result["voted"], result["unsure"], result["agreed"]) == (
        12,
        10,
        2,
        8,
    )
    assert result["accuracy"]["value"] == 0.8
    low, high = wilson(8, 10, 0.95)
    assert result["accuracy"]["low"] == pytest.approx(low)
    assert result["accuracy"]["high"] == pytest.approx(high)
    assert (result["interval"], result["confidence"]) == ("wilson", 0.95)


def test_a_grader_who_only_says_unsure_has_no_accuracy():
    result = rater_accuracy_on_gold(["unsure", "unsure"], ["correct", "incorrect"])
    assert result["accuracy"] is None
    assert result["unsure"] == 2


def test_gold_labels_must_be_correct_or_incorrect():
    with pytest.raises(ValueError):
        rater_accuracy_on_gold(["correct"], ["unsure"])
    with pytest.raises(ValueError):
        rater_accuracy_on_gold(["right"], ["correct"])


@pytest.mark.parametrize("a, b", [(["correct"], ["incorrect"]), (["correct"], ["unsure"])])
def test_cohen_kappa_of_a_single_item_has_no_interval(a, b):
    # One disagreed item used to report SE 0 and the interval [0, 0].
    result = cohen_kappa(a, b)
    assert result["n"] == 1
    assert result["value"] == 0.0
    assert result["se"] is None and result["low"] is None and result["high"] is None


def test_cohen_kappa_of_two_items_has_an_interval_again():
    result = cohen_kappa(["correct", "incorrect"], ["correct", "unsure"])
    assert result["se"] is not None and result["se"] > 0
    assert result["low"] < result["value"] < result["high"]
