"""Trial figures against references: statsmodels (Wilson, McNemar) and hand counts."""

import numpy as np
import pytest
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint

from console.stats.intervals import weighted_proportion_interval
from console.stats.trials import majority_verdict, mcnemar_exact_p, promotion_gates, trial_figures


def test_majority_breaks_ties_towards_the_more_cautious_verdict():
    assert majority_verdict(["answer", "answer", "abstain"]) == "answer"
    assert majority_verdict(["answer", "abstain"]) == "abstain"
    assert majority_verdict(["answer", "answer_partially"]) == "answer_partially"
    assert majority_verdict(["answer_partially", "surface_conflict", "answer"]) == "surface_conflict"
    assert majority_verdict(["answer", None, None]) == "answer"
    assert majority_verdict([None, None, None]) is None


def test_errored_calls_are_not_abstentions():
    assert majority_verdict(["answer", None, "answer"]) == "answer"


def test_figures_match_hand_counts_and_statsmodels_wilson():
    repeats = [
        ["answer"] * 3,  # incorrect, unsafe, stable
        ["answer", "abstain", "answer"],  # incorrect, unsafe, unstable
        ["abstain"] * 3,  # incorrect
        ["answer"] * 3,  # correct, covered
        ["answer_partially"] * 3,  # correct
        ["surface_conflict", "answer", "abstain"],  # correct, three-way tie -> abstain, unstable
        [None, None, None],  # left out
    ]
    correct = [False, False, False, True, True, True, True]
    current = [True, False, False, True, True, False, True]
    f = trial_figures(repeats, correct, current, citation_errors=2)
    assert f.items == 6 and f.excluded_items == 1
    unsafe = f.candidate["unsafe_full_answers"]
    assert (unsafe["count"], unsafe["n"]) == (2, 3)
    low, high = proportion_confint(2, 3, alpha=0.05, method="wilson")
    assert unsafe["low"] == pytest.approx(low) and unsafe["high"] == pytest.approx(high)
    assert (f.candidate["coverage"]["count"], f.candidate["coverage"]["n"]) == (1, 3)
    assert (f.candidate["partial"]["count"], f.candidate["partial"]["n"]) == (1, 6)
    assert f.candidate["conflict"]["count"] == 0
    assert (f.candidate["stability"]["count"], f.candidate["stability"]["n"]) == (4, 6)
    assert f.verdicts[5] == "abstain"
    assert (f.current["unsafe_full_answers"]["count"], f.current["coverage"]["count"]) == (1, 2)
    # Paired on the six counted items: candidate answers items 0, 1, 3; current 0, 3, 4.
    table = [[2, 1], [1, 2]]
    assert f.mcnemar_p == pytest.approx(mcnemar(table, exact=True).pvalue)
    assert f.confusion["answer"] == {"correct": 1, "incorrect": 2}


def test_mcnemar_matches_statsmodels_on_random_pairs():
    rng = np.random.default_rng(7)
    for _ in range(20):
        a = rng.random(40) < 0.5
        b = rng.random(40) < 0.4
        table = [[np.sum(a & b), np.sum(a & ~b)], [np.sum(~a & b), np.sum(~a & ~b)]]
        assert mcnemar_exact_p(a, b) == pytest.approx(mcnemar(table, exact=True).pvalue)
    assert mcnemar_exact_p([], []) is None


def test_unequal_inclusion_probabilities_weight_the_shares_like_the_operating_points():
    repeats = [["answer"]] * 3 + [["abstain"]] * 3
    correct = [True] * 6
    probability = [0.5, 0.5, 1.0, 1.0, 1.0, 0.25]
    strata = ["a", "a", "b", "b", "b", "c"]
    f = trial_figures(repeats, correct, [True] * 6, citation_errors=0, inclusion_probability=probability, strata=strata)
    expected = weighted_proportion_interval([1, 1, 1, 0, 0, 0], 1 / np.array(probability), strata=strata)
    coverage = f.candidate["coverage"]
    assert coverage["value"] == pytest.approx((2 + 2 + 1) / (2 + 2 + 1 + 1 + 1 + 4))
    assert coverage["low"] == pytest.approx(expected.low) and coverage["count"] == 3


def test_each_gate_shows_its_number_and_null_coverage_means_the_current_gates():
    repeats = [["answer"]] * 4 + [["abstain"]] * 4
    correct = [True, True, True, False, True, False, False, False]
    current = [True, True, False, False, True, True, False, False]
    f = trial_figures(repeats, correct, current, citation_errors=1)
    gates = {
        g.name: g
        for g in promotion_gates(
            {"max_unsafe_upper": 0.05, "min_coverage": None, "min_stability": 0.9, "max_citation_errors": 0}, f
        )
    }
    assert gates["max_unsafe_upper"].value == pytest.approx(f.candidate["unsafe_full_answers"]["high"])
    assert not gates["max_unsafe_upper"].passed
    assert gates["min_coverage"].threshold == pytest.approx(0.75) and gates["min_coverage"].passed
    assert gates["min_stability"].passed
    assert gates["max_citation_errors"].value == 1 and not gates["max_citation_errors"].passed


def test_an_unmeasured_figure_fails_its_gate():
    f = trial_figures([["answer"]], [True], [True], citation_errors=0)
    (gate,) = promotion_gates({"max_unsafe_upper": 0.05}, f)
    assert gate.value is None and not gate.passed
