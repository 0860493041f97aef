"""Release recheck statistics: Newcombe against statsmodels, the decomposition on a worked
example, and every diagnosis pattern on synthetic numbers."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from statsmodels.stats.proportion import confint_proportions_2indep

from console.stats.intervals import (
    Interval,
    difference_of_intervals,
    newcombe_difference_interval,
    proportion_interval,
)
from console.stats.recheck import (
    PATTERNS,
    compare_intervals,
    compare_rates,
    decompose_rate_change,
    diagnose_recheck,
)

# --------------------------------------------------------------------------- Newcombe


@pytest.mark.parametrize(
    "k_a, n_a, k_b, n_b",
    [(5, 20, 2, 30), (0, 10, 0, 12), (10, 10, 0, 5), (340, 1000, 300, 1000), (1, 1, 0, 1), (56, 70, 48, 80)],
)
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_newcombe_matches_statsmodels(k_a, n_a, k_b, n_b, confidence):
    low, high = confint_proportions_2indep(k_a, n_a, k_b, n_b, compare="diff", method="newcomb", alpha=1 - confidence)
    ours = newcombe_difference_interval(k_a, n_a, k_b, n_b, confidence=confidence)
    assert ours.value == pytest.approx(k_a / n_a - k_b / n_b)
    assert ours.low == pytest.approx(low, abs=1e-12)
    assert ours.high == pytest.approx(high, abs=1e-12)


@given(
    st.integers(1, 500).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
    st.integers(1, 500).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
)
def test_newcombe_matches_statsmodels_on_any_counts(a, b):
    low, high = confint_proportions_2indep(a[0], a[1], b[0], b[1], compare="diff", method="newcomb")
    ours = newcombe_difference_interval(a[0], a[1], b[0], b[1])
    assert ours.low == pytest.approx(low, abs=1e-10) and ours.high == pytest.approx(high, abs=1e-10)
    assert -1 <= ours.low <= ours.value <= ours.high <= 1


def test_newcombe_of_an_empty_group_is_undefined():
    assert not newcombe_difference_interval(0, 0, 3, 10).is_defined


def test_the_difference_of_two_given_intervals_on_a_worked_example():
    # d = 0.5 - 0.2 = 0.3; low = 0.3 - sqrt(0.1^2 + 0.15^2); high = 0.3 + sqrt(0.1^2 + 0.1^2)
    d = difference_of_intervals(Interval(0.5, 0.4, 0.6), Interval(0.2, 0.1, 0.35))
    assert d.value == pytest.approx(0.3)
    assert d.low == pytest.approx(0.3 - math.sqrt(0.0325)) and d.high == pytest.approx(0.3 + math.sqrt(0.02))
    assert not difference_of_intervals(Interval.undefined(), Interval(0.2, 0.1, 0.35)).is_defined


@given(
    st.integers(1, 300).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
    st.integers(1, 300).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
)
def test_comparing_two_wilson_intervals_is_comparing_the_counts(before, after):
    given_intervals = compare_intervals(proportion_interval(*before), proportion_interval(*after))
    counted = compare_rates(before[0], before[1], after[0], after[1])
    assert given_intervals == counted


def test_compare_rates_reads_rise_fall_and_flat_from_the_difference_interval():
    assert compare_rates(100, 1000, 200, 1000).rose
    assert compare_rates(200, 1000, 100, 1000).fell
    flat = compare_rates(100, 1000, 105, 1000)
    assert flat.flat and not flat.rose and not flat.fell
    assert flat.difference.value == pytest.approx(0.005)


# --------------------------------------------------------------------------- decomposition


def test_decomposition_worked_example():
    # Before: A 10 of 100 refused, B 40 of 100 -> 25%. After: A 15 of 100, B 120 of 300 -> 33.75%.
    # A: share 0.5 -> 0.25, rate 0.10 -> 0.15: mix -0.25 * 0.125 = -0.03125, rate 0.05 * 0.375 = 0.01875
    # B: share 0.5 -> 0.75, rate 0.40 -> 0.40: mix  0.25 * 0.4   =  0.1,     rate 0
    # Sum: -0.0125 + 0.1 = 0.0875 = 0.3375 - 0.25.
    parts = decompose_rate_change({"A": (10, 100), "B": (40, 100)}, {"A": (15, 100), "B": (120, 300)})
    assert [p.segment for p in parts] == ["B", "A"]
    b, a = parts
    assert (b.mix_effect, b.rate_effect) == (pytest.approx(0.1), pytest.approx(0.0))
    assert (a.mix_effect, a.rate_effect) == (pytest.approx(-0.03125), pytest.approx(0.01875))
    assert sum(p.total for p in parts) == pytest.approx(0.0875)


def test_a_new_segment_contributes_its_weighted_rate_as_mix():
    parts = decompose_rate_change({"A": (10, 100)}, {"A": (10, 100), "B": (50, 100)})
    new = next(p for p in parts if p.segment == "B")
    assert new.rate_before is None and new.share_before == 0
    assert new.mix_effect == pytest.approx(0.5 * 0.5) and new.rate_effect == 0
    assert sum(p.total for p in parts) == pytest.approx(60 / 200 - 0.1)


segment_counts = st.dictionaries(
    st.sampled_from(["a", "b", "c", "d"]),
    st.integers(1, 400).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))),
    min_size=1,
)


@given(segment_counts, segment_counts)
def test_contributions_add_up_to_the_change_exactly(before, after):
    def overall(counts):
        return sum(e for e, _ in counts.values()) / sum(d for _, d in counts.values())

    parts = decompose_rate_change(before, after)
    assert math.fsum(p.total for p in parts) == pytest.approx(overall(after) - overall(before), abs=1e-12)
    assert [abs(p.total) for p in parts] == sorted((abs(p.total) for p in parts), reverse=True)


# --------------------------------------------------------------------------- diagnosis

SEGMENTS_EVEN = {"login": (50, 500), "vpn": (50, 500)}


def diagnose(abstention, far=None, no_support=None, before=SEGMENTS_EVEN, after=None):
    """Synthetic recheck: counts as (events, n) before and after for each rate."""
    if after is None:
        # Spread the after-abstention evenly over the two segments (no segment pattern).
        k, n = abstention[1]
        after = {"login": (k // 2, n // 2), "vpn": (k - k // 2, n - n // 2)}
    return diagnose_recheck(
        abstention=compare_rates(*abstention[0], *abstention[1]),
        false_abstention=None if far is None else compare_rates(*far[0], *far[1]),
        no_support=None if no_support is None else compare_rates(*no_support[0], *no_support[1]),
        contributions=decompose_rate_change(before, after),
    )


def test_abstention_up_with_false_abstention_flat_is_a_location_shift():
    result = diagnose(((100, 1000), (200, 1000)), far=((68, 200), (70, 200)), no_support=((10, 100), (21, 200)))
    assert result.pattern == "location_shift"
    assert "10.0% to 20.0%" in result.text and "score distribution moved" in result.text


def test_both_up_is_a_gate_that_separates_worse():
    result = diagnose(((100, 1000), (200, 1000)), far=((60, 200), (120, 200)))
    assert result.pattern == "separation_worse"
    assert "separates" in result.text


def test_a_rise_carried_by_one_segment_names_that_segment():
    after = {"login": (50, 500), "vpn": (150, 500)}
    result = diagnose(((100, 1000), (200, 1000)), far=((60, 200), (120, 200)), after=after)
    assert result.pattern == "segment" and result.segment == "vpn"
    assert "vpn carries 100% of the rise with 50% of the traffic" in result.text


def test_a_big_segment_rising_like_the_rest_is_not_a_segment_pattern():
    # 80% of traffic and 80% of a uniform doubling: proportionate, so not "segment".
    before = {"big": (80, 800), "small": (20, 200)}
    after = {"big": (160, 800), "small": (40, 200)}
    result = diagnose(((100, 1000), (200, 1000)), far=((68, 200), (70, 200)), before=before, after=after)
    assert result.pattern == "location_shift"


def test_more_refusals_without_a_supporting_passage_is_retrieval_and_wins_over_the_rest():
    after = {"login": (50, 500), "vpn": (150, 500)}
    result = diagnose(
        ((100, 1000), (200, 1000)), far=((60, 200), (120, 200)), no_support=((10, 100), (90, 200)), after=after
    )
    assert result.pattern == "retrieval"
    assert "abstention costume" in result.text


def test_no_significant_rise_is_none():
    result = diagnose(((100, 1000), (104, 1000)), far=((60, 200), (120, 200)), no_support=((10, 100), (90, 200)))
    assert result.pattern == "none" and "no rise" in result.text


def test_a_rise_without_graded_refusals_on_the_new_versions_says_so():
    result = diagnose(((100, 1000), (200, 1000)))
    assert result.pattern == "none" and "not graded yet" in result.text


def test_a_rise_with_false_abstention_falling_is_not_blamed_on_the_gate():
    result = diagnose(((100, 1000), (200, 1000)), far=((120, 200), (40, 200)))
    assert result.pattern == "none" and "answers got worse" in result.text


def test_every_pattern_is_reachable_and_one_sentence():
    seen = set()
    cases = [
        diagnose(((100, 1000), (200, 1000)), far=((68, 200), (70, 200))),
        diagnose(((100, 1000), (200, 1000)), far=((60, 200), (120, 200))),
        diagnose(((100, 1000), (200, 1000)), after={"login": (50, 500), "vpn": (150, 500)}),
        diagnose(((100, 1000), (200, 1000)), no_support=((10, 100), (90, 200))),
        diagnose(((100, 1000), (100, 1000))),
    ]
    for result in cases:
        seen.add(result.pattern)
        assert result.text.endswith(".") and result.text.count(". ") == 0
        assert set(result.as_dict()) == {"pattern", "text"}
    assert seen == set(PATTERNS)
