"""The operating-point and middle-band tables, against the seed's definitions and statsmodels."""

import json
import math

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

from console.stats.intervals import proportion_interval, weighted_proportion_interval
from console.stats.operating_points import (
    TIE_POLICY,
    band_table,
    operating_points,
    operating_points_document,
    served_counts_from_scores,
)

CUTOFFS = [0.5, 0.7, 0.85, 0.9, 0.95]


def seed_rows(scores, correct, cutoffs):
    """The per-cutoff definitions of a census table, written out again for comparison."""
    rows = []
    for cutoff in cutoffs:
        refused = scores < cutoff
        served = np.logical_not(refused)
        rows.append(
            {
                "abstention_rate": float(np.mean(refused)),
                "false_abstention_rate": float(np.mean(correct[refused])) if refused.any() else 0.0,
                "correct_withheld": 1000.0 * float(np.mean(refused & correct)),
                "wrong_served": 1000.0 * float(np.mean(served & ~correct)),
            }
        )
    return rows


def census(n=2000, seed=0):
    """Scores on a 0.01 grid (so ties with the cutoffs occur) and correctness rising with score."""
    rng = np.random.default_rng(seed)
    scores = np.round(rng.beta(4, 2, n), 2)
    correct = rng.random(n) < 0.25 + 0.7 * scores
    return scores, correct


def census_table(scores, correct, cutoffs=CUTOFFS, **options):
    return operating_points(
        population_size=scores.size,
        served_counts=served_counts_from_scores(scores, cutoffs),
        graded_scores=scores,
        graded_correct=correct,
        cutoffs=cutoffs,
        **options,
    )


def seed_worked_census():
    """1,000 questions whose withheld column is the seed's: 15, 99, 176 and 365 per 1,000.

    Bands: below 0.5, 70 items (15 correct); [0.5, 0.85) 220 (84); [0.85, 0.9) 120 (77);
    [0.9, 0.95) 220 (189); at or above 0.95, 370 (345). 710 correct overall: accuracy 71%.
    """
    bands = [(0.30, 70, 15), (0.60, 220, 84), (0.87, 120, 77), (0.92, 220, 189), (0.97, 370, 345)]
    scores, correct = [], []
    for score, count, right in bands:
        scores += [score] * count
        correct += [True] * right + [False] * (count - right)
    return np.array(scores), np.array(correct)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_census_rows_equal_the_seed_definition(seed):
    scores, correct = census(seed=seed)
    rows = census_table(scores, correct)
    for row, expected in zip(rows[1:], seed_rows(scores, correct, CUTOFFS), strict=True):
        assert row.abstention_rate.value == pytest.approx(expected["abstention_rate"], abs=1e-9)
        if row.graded_refused:
            assert row.false_abstention_rate.value == pytest.approx(expected["false_abstention_rate"], abs=1e-9)
        else:
            assert row.false_abstention_rate is None
        assert row.correct_withheld_per_1000.value == pytest.approx(expected["correct_withheld"], abs=1e-9)
        assert row.wrong_served_per_1000.value == pytest.approx(expected["wrong_served"], abs=1e-9)


def test_correct_withheld_is_a_thousand_times_the_share_refused_and_correct():
    scores, correct = census(seed=3)
    for row in census_table(scores, correct)[1:]:
        refused = scores < row.cutoff
        assert row.correct_withheld_per_1000.value == pytest.approx(1000 * np.mean(refused & correct), abs=1e-9)


def test_no_gate_row_comes_first_and_refuses_nothing():
    scores, correct = census(seed=4)
    no_gate = census_table(scores, correct)[0]
    assert no_gate.cutoff is None
    assert no_gate.refused == 0 and no_gate.served == scores.size
    assert no_gate.abstention_rate.value == 0.0
    assert no_gate.false_abstention_rate is None
    assert no_gate.graded_refused == 0
    assert no_gate.correct_withheld_per_1000.as_dict() == {"value": 0.0, "low": 0.0, "high": 0.0}
    assert no_gate.wrong_served_per_1000.value == pytest.approx(1000 * np.mean(~correct))
    assert no_gate.exchange_rate is None


def test_census_table_closes():
    scores, correct = census(seed=5)
    rows = census_table(scores, correct)
    wrong_without_gate = rows[0].wrong_served_per_1000.value
    for row in rows[1:]:
        refused_share = row.refused / scores.size
        wrong_refused = 1000 * refused_share * (1 - row.false_abstention_rate.value)
        assert wrong_without_gate - row.wrong_served_per_1000.value == pytest.approx(wrong_refused, abs=1e-9)
    for previous, row in zip(rows[1:], rows[2:], strict=False):
        extra_withheld = row.correct_withheld_per_1000.value - previous.correct_withheld_per_1000.value
        wrong_removed = previous.wrong_served_per_1000.value - row.wrong_served_per_1000.value
        assert row.exchange_rate.value == pytest.approx(extra_withheld / wrong_removed, rel=1e-9)


def test_intervals_equal_statsmodels_for_a_census():
    scores, correct = census(seed=6)
    n = scores.size
    for row in census_table(scores, correct, confidence=0.9)[1:]:
        refused = scores < row.cutoff
        low, high = proportion_confint(row.refused, n, alpha=0.1, method="wilson")
        assert (row.abstention_rate.low, row.abstention_rate.high) == pytest.approx((low, high))
        k, m = int(np.sum(correct & refused)), int(np.sum(refused))
        low, high = proportion_confint(k, m, alpha=0.1, method="wilson")
        far = row.false_abstention_rate
        assert (far.low, far.high) == pytest.approx((low, high), abs=1e-12)
        scale = 1000 * row.refused / n
        withheld = row.correct_withheld_per_1000
        assert (withheld.low, withheld.high) == pytest.approx((scale * low, scale * high))
        wrong = int(np.sum(~correct & ~refused))
        low, high = proportion_confint(wrong, n - m, alpha=0.1, method="wilson")
        scale = 1000 * row.served / n
        served = row.wrong_served_per_1000
        assert (served.low, served.high) == pytest.approx((scale * low, scale * high))


def test_exchange_rate_interval_is_the_odds_of_the_bands_clopper_pearson_interval():
    scores, correct = census(seed=7)
    rows = census_table(scores, correct)
    lower = -math.inf
    for row in rows[1:]:
        band = (scores >= lower) & (scores < row.cutoff)
        k, m = int(np.sum(correct & band)), int(np.sum(band))
        low, high = proportion_confint(k, m, alpha=0.05, method="beta")
        assert row.band.graded == m and row.band.correct == k and row.band.wrong == m - k
        assert row.exchange_rate.value == pytest.approx(k / (m - k))
        assert row.exchange_rate.low == pytest.approx(low / (1 - low))
        assert row.exchange_rate.high == pytest.approx(high / (1 - high))
        lower = row.cutoff


def test_seed_figure_400_refusals_34_percent_correct_has_about_a_four_point_six_interval():
    # One month: 3,000 decisions, 1,000 refused at 0.85; 400 of the refusals were graded.
    graded_scores = np.concatenate([np.full(400, 0.5), np.full(600, 0.95)])
    graded_correct = np.concatenate([np.arange(400) < 136, np.arange(600) < 500])
    row = operating_points(
        population_size=3000,
        served_counts=[2000],
        graded_scores=graded_scores,
        graded_correct=graded_correct,
        cutoffs=[0.85],
    )[1]
    far = row.false_abstention_rate
    assert row.graded_refused == 400
    assert far.value == pytest.approx(0.34)
    assert (far.high - far.low) / 2 == pytest.approx(0.046, abs=0.0005)


def test_seed_worked_withheld_column_is_abstention_rate_times_false_abstention_rate():
    scores, correct = seed_worked_census()
    rows = census_table(scores, correct, cutoffs=[0.5, 0.85, 0.9, 0.95])
    assert rows[0].wrong_served_per_1000.value == pytest.approx(290)
    by_cutoff = {row.cutoff: row for row in rows[1:]}
    assert by_cutoff[0.5].abstention_rate.value == pytest.approx(0.07)
    assert by_cutoff[0.5].false_abstention_rate.value == pytest.approx(0.21, abs=0.005)
    withheld = [by_cutoff[t].correct_withheld_per_1000.value for t in (0.5, 0.85, 0.9, 0.95)]
    assert withheld == pytest.approx([15, 99, 176, 365])
    # "Going from 0.85 to 0.9 withholds 77 correct answers ... from 0.9 to 0.95 withholds 189".
    assert withheld[2] - withheld[1] == pytest.approx(77)
    assert withheld[3] - withheld[2] == pytest.approx(189)


def test_an_item_scoring_exactly_the_cutoff_is_served():
    assert TIE_POLICY == "serve_if_score_gte_cutoff"
    scores = np.array([0.2, 0.5, 0.5, 0.9])
    assert served_counts_from_scores(scores, [0.5, 0.51, 0.9, 0.95]).tolist() == [3, 1, 1, 0]
    row = operating_points(
        population_size=4,
        population_scores_sorted=scores,
        graded_scores=scores,
        graded_correct=np.array([True, True, False, True]),
        cutoffs=[0.5],
    )[1]
    assert (row.refused, row.served, row.graded_refused, row.graded_served) == (1, 3, 1, 3)


def test_population_counts_from_sql_match_counts_from_sorted_scores():
    scores, correct = census(seed=8)
    from_counts = census_table(scores, correct)
    from_scores = operating_points(
        population_size=scores.size,
        population_scores_sorted=np.sort(scores),
        graded_scores=scores,
        graded_correct=correct,
        cutoffs=CUTOFFS,
    )
    assert [row.as_dict() for row in from_counts] == [row.as_dict() for row in from_scores]


def test_cutoffs_in_any_order_give_ascending_rows_with_their_own_counts():
    scores, correct = census(seed=9)
    shuffled = [0.9, 0.5, 0.95, 0.7, 0.85]
    rows = census_table(scores, correct, cutoffs=shuffled)
    assert [row.cutoff for row in rows] == [None, *sorted(shuffled)]
    in_order = census_table(scores, correct)
    assert [row.as_dict() for row in rows] == [row.as_dict() for row in in_order]


def test_duplicate_cutoffs_and_rising_served_counts_are_rejected():
    scores, correct = census(seed=10)
    with pytest.raises(ValueError):
        census_table(scores, correct, cutoffs=[0.5, 0.5])
    with pytest.raises(ValueError):
        operating_points(
            population_size=100,
            served_counts=[10, 20],
            graded_scores=scores,
            graded_correct=correct,
            cutoffs=[0.5, 0.7],
        )


def test_rows_without_graded_refusals_report_no_false_abstention_rate():
    row = operating_points(
        population_size=1000,
        served_counts=[900],
        graded_scores=np.array([0.8, 0.9, 0.95]),
        graded_correct=np.array([True, False, True]),
        cutoffs=[0.6],
    )[1]
    assert row.refused == 100 and row.graded_refused == 0
    assert row.false_abstention_rate is None
    assert row.correct_withheld_per_1000 is None
    assert row.exchange_rate is None
    assert row.as_dict()["exchange_rate"] is None


def test_a_band_without_wrong_answers_has_an_unbounded_exchange_rate():
    row = operating_points(
        population_size=10,
        served_counts=[7],
        graded_scores=np.array([0.1, 0.2, 0.3, 0.8]),
        graded_correct=np.array([True, True, True, False]),
        cutoffs=[0.5],
    )[1]
    assert math.isinf(row.exchange_rate.value) and math.isinf(row.exchange_rate.high)
    low = proportion_confint(3, 3, method="beta")[0]
    assert row.exchange_rate.low == pytest.approx(low / (1 - low))
    assert row.as_dict()["exchange_rate"] == {
        "value": None,
        "low": pytest.approx(low / (1 - low)),
        "high": None,
    }


def test_weighted_false_abstention_rate_is_the_hajek_estimate_over_the_refused_domain():
    rng = np.random.default_rng(11)
    scores = rng.random(600)
    correct = rng.random(600) < scores
    strata = (scores >= 0.7).astype(int)
    weights = np.where(strata == 1, 2.0, 8.0)
    row = operating_points(
        population_size=50_000,
        served_counts=[20_000],
        graded_scores=scores,
        graded_correct=correct,
        graded_weights=weights,
        graded_strata=strata,
        cutoffs=[0.6],
    )[1]
    expected = weighted_proportion_interval(correct, weights, strata=strata, domain=scores < 0.6)
    assert row.false_abstention_rate == expected
    refused = scores < 0.6
    assert expected.value == pytest.approx(np.average(correct[refused], weights=weights[refused]))


def test_equal_weights_give_the_same_table_as_no_weights():
    scores, correct = census(seed=12)
    plain = census_table(scores, correct)
    weighted = census_table(scores, correct, graded_weights=np.full(scores.size, 3.0))
    assert [row.as_dict() for row in plain] == [row.as_dict() for row in weighted]


def test_method_and_confidence_reach_every_interval():
    scores, correct = census(seed=13)
    row = census_table(scores, correct, confidence=0.99, method="jeffreys")[2]
    expected = proportion_interval(row.refused, scores.size, confidence=0.99, method="jeffreys")
    assert row.abstention_rate == expected


def test_document_is_json_ready_and_names_its_methods():
    scores, correct = census(seed=14)
    rows = census_table(scores, correct)
    document = operating_points_document(
        rows, population_size=scores.size, graded=scores.size, confidence=0.95, method="wilson"
    )
    text = json.dumps(document, allow_nan=False)
    assert document["interval"] == "wilson"
    assert document["exchange_rate_interval"] == "clopper_pearson"
    assert document["tie_policy"] == TIE_POLICY
    first = json.loads(text)["rows"][0]
    assert first["cutoff"] is None and first["exchange_rate"] is None
    assert set(first["abstention_rate"]) == {"value", "low", "high"}


def test_middle_band_shares_add_up_and_each_segment_reports_its_error():
    scores, correct = census(seed=15)
    table = band_table(
        band_lower=0.4,
        cutoff=0.85,
        population_size=scores.size,
        population_scores_sorted=np.sort(scores),
        graded_scores=scores,
        graded_correct=correct,
    )
    segments = [table.served, table.served_with_evidence, table.refused]
    assert sum(segment.count for segment in segments) == scores.size
    assert sum(segment.share.value for segment in segments) == pytest.approx(1.0)
    middle = (scores >= 0.4) & (scores < 0.85)
    assert table.served_with_evidence.count == int(middle.sum())
    wrong_rate = table.served_with_evidence.wrong_rate
    assert wrong_rate.value == pytest.approx(np.mean(~correct[middle]))
    wrong_in_middle = int(np.sum(~correct[middle]))
    low, high = proportion_confint(wrong_in_middle, int(middle.sum()), method="wilson")
    assert (wrong_rate.low, wrong_rate.high) == (pytest.approx(low), pytest.approx(high))
    json.dumps(table.as_dict(), allow_nan=False)


def test_middle_band_table_agrees_with_the_operating_point_rows_at_its_edges():
    scores, correct = census(seed=16)
    table = band_table(
        band_lower=0.5,
        cutoff=0.9,
        population_size=scores.size,
        served_counts=served_counts_from_scores(scores, [0.5, 0.9]),
        graded_scores=scores,
        graded_correct=correct,
    )
    rows = {row.cutoff: row for row in census_table(scores, correct)[1:]}
    assert table.served.wrong_per_1000.value == pytest.approx(rows[0.9].wrong_served_per_1000.value)
    assert table.refused.correct_per_1000.value == pytest.approx(rows[0.5].correct_withheld_per_1000.value)
    assert table.refused.share == rows[0.5].abstention_rate


def test_a_band_lower_edge_equal_to_the_cutoff_leaves_the_middle_band_empty():
    scores, correct = census(seed=17)
    table = band_table(
        band_lower=0.8,
        cutoff=0.8,
        population_size=scores.size,
        population_scores_sorted=np.sort(scores),
        graded_scores=scores,
        graded_correct=correct,
    )
    assert table.served_with_evidence.count == 0
    assert table.served_with_evidence.wrong_rate is None
    assert table.served_with_evidence.wrong_per_1000.value == 0.0
    with pytest.raises(ValueError):
        band_table(
            band_lower=0.9,
            cutoff=0.8,
            population_size=scores.size,
            population_scores_sorted=np.sort(scores),
            graded_scores=scores,
            graded_correct=correct,
        )


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_population_score_that_is_not_a_number_is_rejected_like_a_graded_one(bad):
    # Sorting puts NaN last, where the served count used to call it served.
    graded = {"graded_scores": [0.2, 0.8], "graded_correct": [True, False]}
    with pytest.raises(ValueError, match="graded_scores must be finite"):
        operating_points(
            population_size=3,
            cutoffs=[0.5],
            graded_scores=[0.2, bad],
            graded_correct=[True, False],
            population_scores_sorted=[0.1, 0.2, 0.8],
        )
    with pytest.raises(ValueError, match="population_scores_sorted must be finite: 1 of 3"):
        operating_points(population_size=3, cutoffs=[0.5], population_scores_sorted=[0.2, 0.8, bad], **graded)
    with pytest.raises(ValueError, match="population_scores_sorted must be finite"):
        band_table(
            band_lower=0.4,
            cutoff=0.5,
            population_size=3,
            population_scores_sorted=[0.2, 0.8, bad],
            **graded,
        )
    with pytest.raises(ValueError, match="scores must be finite"):
        served_counts_from_scores([0.2, bad, 0.8], [0.5])
