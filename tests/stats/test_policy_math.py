"""Cost threshold, citation-adjusted cost, the exchange-rate questions and the row they pick."""

import math

import numpy as np
import pytest

from console.stats.intervals import Interval
from console.stats.operating_points import OperatingPointRow, operating_points
from console.stats.policy_math import (
    ExchangeRateBisection,
    break_even_wrong_cost,
    citation_adjusted_cost,
    cost_threshold,
    cost_threshold_problem,
    policy_value,
    question_text,
    recommended_row,
    validate_costs,
)


def test_cost_threshold_reproduces_the_seed_figures():
    assert cost_threshold(2, 0.5) == pytest.approx(0.5)
    assert cost_threshold(200, 0.5) == pytest.approx(0.992537, abs=1e-6)
    assert cost_threshold(20, 0.5) == pytest.approx(0.928571, abs=1e-6)


def test_cost_threshold_is_where_answering_and_refusing_are_worth_the_same():
    for c_w, c_a in [(2, 0.5), (20, 0.5), (7, 3)]:
        tau = cost_threshold(c_w, c_a)
        assert tau - (1 - tau) * c_w == pytest.approx(-c_a)


@pytest.mark.parametrize("c_w, c_a", [(0.5, 2), (3, 3), (0, 0), (0, 0.5)])
def test_a_refusal_as_dear_as_a_wrong_answer_is_rejected_with_the_reason(c_w, c_a):
    # The case printed tau = -0.33 for c_a > c_w; tau must stay in (0, 1).
    problem = cost_threshold_problem(c_w, c_a)
    assert problem is not None and "c_a" in problem and "(0, 1)" in problem
    with pytest.raises(ValueError, match="answering always beats refusing"):
        cost_threshold(c_w, c_a)
    with pytest.raises(ValueError, match="answering always beats refusing"):
        validate_costs(c_w, c_a)


@pytest.mark.parametrize("c_w, c_a", [(-1, 0.5), (2, -0.1), (math.inf, 0.5), (2, math.nan)])
def test_negative_or_non_finite_costs_are_named_in_the_reason(c_w, c_a):
    problem = cost_threshold_problem(c_w, c_a)
    assert problem is not None and ("negative" in problem or "finite" in problem)


def test_every_accepted_cost_pair_gives_a_threshold_strictly_inside_the_unit_interval():
    rng = np.random.default_rng(4)
    for c_w, c_a in rng.uniform(0, 50, size=(500, 2)):
        if cost_threshold_problem(c_w, c_a) is None:
            assert 0 < cost_threshold(c_w, c_a) < 1
        else:
            assert not 0 < (c_w - c_a) / (1 + c_w) < 1


def test_citation_adjusted_cost_reproduces_the_seed_figures():
    effective = citation_adjusted_cost(20, 0.2, 0.6)
    assert effective == pytest.approx(8.12)
    assert cost_threshold(effective, 0.5) == pytest.approx(7.62 / 9.12)
    assert cost_threshold(effective, 0.5) == pytest.approx(0.835526, abs=1e-6)


def test_a_citation_nobody_can_open_changes_nothing():
    assert citation_adjusted_cost(20, 0.2, 0.0) == 20


def test_break_even_costs_reproduce_the_seeds_intersections():
    precision = 0.8 * 0.81 / (0.8 * 0.81 + 0.2 * 0.19)
    assert precision == pytest.approx(0.944606, abs=1e-6)
    bare = break_even_wrong_cost(precision, 0.5)
    assert bare == pytest.approx(26.0789, abs=1e-4)
    # The cited intersection: the original c_w whose citation-adjusted cost is that break-even.
    cited = (bare - 0.6 * 0.2) / (1 - 0.6)
    assert cited == pytest.approx(64.8974, abs=1e-4)
    assert citation_adjusted_cost(cited, 0.2, 0.6) == pytest.approx(bare)


def test_policy_value_reproduces_the_seeds_traffic_economics():
    assert policy_value(correct_served=2208, wrong_served=92, refused=2700, c_w=20, c_a=0.5) == (pytest.approx(-982))
    assert policy_value(correct_served=3440, wrong_served=260, refused=1300, c_w=8.12, c_a=0.5) == pytest.approx(678.8)
    assert policy_value(correct_served=4057, wrong_served=943, refused=0, c_w=20, c_a=0.5) == (pytest.approx(-14803))
    assert policy_value(correct_served=4057, wrong_served=943, refused=0, c_w=8.12, c_a=0.5) == pytest.approx(-3600.16)


def test_negative_costs_and_probabilities_outside_the_unit_range_are_rejected():
    with pytest.raises(ValueError):
        cost_threshold(-1, 0.5)
    with pytest.raises(ValueError):
        citation_adjusted_cost(20, 0.2, 1.5)


def test_bisection_asks_10_then_100_then_30():
    state = ExchangeRateBisection()
    assert state.next_question == 10
    state = state.answer(True)
    assert state.next_question == 100
    state = state.answer(False)
    assert state.next_question == 30
    assert state.bracket == (10, 100)


def test_bisection_asks_3_after_a_no_to_10():
    assert ExchangeRateBisection.replay([False]).next_question == 3


def test_bisection_ends_after_a_fixed_number_of_answers_with_the_geometric_midpoint():
    state = ExchangeRateBisection.replay([True, False, False, False, True])
    assert [rate for rate, _ in state.answers] == [10, 100, 30, 20, 14]
    assert state.done and state.next_question is None
    assert state.bracket == (14, 20)
    assert state.r_star == pytest.approx(math.sqrt(14 * 20))
    with pytest.raises(ValueError):
        state.answer(True)


def test_every_answer_path_keeps_questions_inside_the_bracket_and_narrows_it():
    for path in range(32):
        answers = [bool(path >> bit & 1) for bit in range(5)]
        state = ExchangeRateBisection()
        for accepted in answers:
            lower, upper = state.bracket
            assert lower < state.next_question < upper
            state = state.answer(accepted)
        lower, upper = state.bracket
        assert 1 <= lower < state.r_star < upper <= 1000
        assert upper / lower < 1.45


def test_r_star_is_unknown_until_the_questions_are_answered():
    assert ExchangeRateBisection.replay([True, False]).r_star is None


def test_question_text_asks_about_refusals_per_wrong_answer():
    assert "30 extra refusals" in question_text(30)
    assert "one wrong answer" in question_text(30)


def row_with_rate(cutoff, rate):
    exchange = None if rate is None else Interval(rate, rate / 2, rate * 2)
    return OperatingPointRow(
        cutoff=cutoff,
        refused=0,
        served=1,
        abstention_rate=Interval.exact(0.0),
        false_abstention_rate=None,
        graded_refused=0,
        graded_served=0,
        correct_withheld_per_1000=None,
        wrong_served_per_1000=None,
        exchange_rate=exchange,
        band=None,
    )


def test_recommended_row_is_the_last_cutoff_whose_exchange_rate_is_within_r_star():
    rates = [(0.5, 0.2), (0.7, 0.6), (0.85, 1.0), (0.9, 2.1), (0.95, 5.7)]
    rows = [row_with_rate(None, None)] + [row_with_rate(t, r) for t, r in rates]
    assert recommended_row(rows, 3.0).cutoff == 0.9
    assert recommended_row(rows, 40.0).cutoff == 0.95
    assert recommended_row(rows, 2.1).cutoff == 0.9
    assert recommended_row(rows, 0.1).cutoff is None


def test_recommended_row_does_not_jump_over_a_step_the_owner_rejects():
    rows = [row_with_rate(None, None)] + [row_with_rate(t, r) for t, r in [(0.5, 0.2), (0.7, 4.0), (0.9, 0.0)]]
    assert recommended_row(rows, 3.0).cutoff == 0.5


def test_recommended_row_passes_through_bands_without_graded_items_only_towards_an_accepted_one():
    rows = [row_with_rate(None, None)] + [
        row_with_rate(t, r) for t, r in [(0.5, 0.2), (0.6, None), (0.7, 1.0), (0.8, None)]
    ]
    assert recommended_row(rows, 3.0).cutoff == 0.7


def test_recommended_row_never_withholds_correct_answers_for_no_wrong_ones():
    rows = [row_with_rate(None, None), row_with_rate(0.5, math.inf)]
    assert recommended_row(rows, 1000.0).cutoff is None


def test_recommended_row_on_a_real_table():
    rng = np.random.default_rng(0)
    scores = np.round(rng.random(3000), 2)
    correct = rng.random(3000) < 0.2 + 0.75 * scores
    cutoffs = [0.2, 0.4, 0.6, 0.8]
    rows = operating_points(
        population_size=3000,
        population_scores_sorted=np.sort(scores),
        graded_scores=scores,
        graded_correct=correct,
        cutoffs=cutoffs,
    )
    rates = [row.exchange_rate.value for row in rows[1:]]
    assert rates == sorted(rates)
    r_star = (rates[1] + rates[2]) / 2
    assert recommended_row(rows, r_star).cutoff == 0.4
