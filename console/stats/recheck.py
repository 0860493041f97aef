"""Release recheck: before/after comparisons, the per-segment decomposition of a change in the
abstention rate, and the diagnosis in words.

When the model, retriever, corpus or gate version changes, the signed evidence ("before") is
compared with the new versions' traffic ("after") at the same cutoff. Each movement has a
signature (docs/statistics.md, "Release recheck"): abstention up with false abstention flat is
a move of the score distribution, both up is a gate that separates worse, a change carried by
one segment points at that segment, and more refusals with no supporting passage is a retrieval
problem in an abstention costume.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from console.stats.intervals import Interval, difference_of_intervals, newcombe_difference_interval, proportion_interval

Pattern = Literal["location_shift", "separation_worse", "segment", "retrieval", "none"]
PATTERNS: tuple[str, ...] = ("retrieval", "segment", "separation_worse", "location_shift", "none")
"""The patterns in the order :func:`diagnose_recheck` tests them (its precedence)."""
SEGMENT_SHARE = 0.6


@dataclass(frozen=True)
class RateComparison:
    """A share before and after, each with its interval (Wilson, or the Korn–Graubard Wilson
    interval of a weighted share), and ``after - before`` with Newcombe's hybrid score interval
    built from those two intervals."""

    before: Interval
    after: Interval
    difference: Interval

    @property
    def rose(self) -> bool:
        """The difference interval lies wholly above 0."""
        return self.difference.is_defined and self.difference.low > 0.0

    @property
    def fell(self) -> bool:
        return self.difference.is_defined and self.difference.high < 0.0

    @property
    def flat(self) -> bool:
        """The difference interval covers 0: no change the samples can see."""
        return self.difference.is_defined and self.difference.low <= 0.0 <= self.difference.high


def compare_rates(
    successes_before: int,
    n_before: int,
    successes_after: int,
    n_after: int,
    *,
    confidence: float = 0.95,
) -> RateComparison:
    """Both shares with Wilson intervals and the difference ``after - before`` with
    :func:`console.stats.intervals.newcombe_difference_interval` (Newcombe 1998, method 10)."""
    return RateComparison(
        before=proportion_interval(successes_before, n_before, confidence=confidence),
        after=proportion_interval(successes_after, n_after, confidence=confidence),
        difference=newcombe_difference_interval(
            successes_after, n_after, successes_before, n_before, confidence=confidence
        ),
    )


def compare_intervals(before: Interval, after: Interval) -> RateComparison:
    """Two shares already estimated, each with its own interval (for example Hájek-weighted
    shares of stratified graded samples, or the signed evidence's figures as signed), and the
    difference ``after - before`` by :func:`console.stats.intervals.difference_of_intervals`.
    With two Wilson intervals of counts this is :func:`compare_rates` exactly."""
    return RateComparison(before=before, after=after, difference=difference_of_intervals(after, before))


@dataclass(frozen=True)
class SegmentContribution:
    """One segment's part in the change of an overall rate (see :func:`decompose_rate_change`)."""

    segment: str
    share_before: float
    share_after: float
    rate_before: float | None
    rate_after: float | None
    mix_effect: float
    rate_effect: float

    @property
    def total(self) -> float:
        return self.mix_effect + self.rate_effect


def decompose_rate_change(
    before: Mapping[str, tuple[int, int]], after: Mapping[str, tuple[int, int]]
) -> list[SegmentContribution]:
    """Split the change of an overall rate into per-segment mix and rate effects, exactly.

    Segment ``s`` has ``(events, decisions)`` in each period; its traffic share is
    ``w_s = decisions_s / sum decisions`` and its rate ``r_s = events_s / decisions_s``, so the
    overall rate is ``R = sum_s w_s r_s``. With ``A`` before and ``B`` after, the symmetric
    (Kitagawa 1955, "Components of a difference between two rates", JASA 50:1168; Das Gupta
    1993) decomposition is::

        mix_s  = (w_Bs - w_As) (r_As + r_Bs) / 2      the segment's traffic share moved
        rate_s = (r_Bs - r_As) (w_As + w_Bs) / 2      the rate inside the segment moved

    and ``mix_s + rate_s = w_Bs r_Bs - w_As r_As``, so the contributions add up to
    ``R_B - R_A`` exactly, with no interaction term left over. A segment absent from one period
    has share 0 there and takes the other period's rate (it then multiplies 0), so a new
    segment contributes ``w_B r_B``, all of it mix. Returned largest ``|total|`` first, ties by
    segment name.
    """
    if not before or not after:
        raise ValueError("both periods need at least one segment")
    for name, period in (("before", before), ("after", after)):
        for segment, (events, decisions) in period.items():
            if decisions < 0 or not 0 <= events <= decisions:
                raise ValueError(f"{name}[{segment!r}]: need 0 <= events <= decisions")
    total_before = sum(decisions for _, decisions in before.values())
    total_after = sum(decisions for _, decisions in after.values())
    if total_before == 0 or total_after == 0:
        raise ValueError("both periods need at least one decision")

    def rate(period: Mapping[str, tuple[int, int]], segment: str) -> float | None:
        events, decisions = period.get(segment, (0, 0))
        return events / decisions if decisions else None

    contributions = []
    for segment in sorted(set(before) | set(after)):
        w_a = before.get(segment, (0, 0))[1] / total_before
        w_b = after.get(segment, (0, 0))[1] / total_after
        r_a, r_b = rate(before, segment), rate(after, segment)
        # A segment without decisions in a period has weight 0 there; borrow the other rate.
        # (A segment listed with 0 decisions in both periods contributes nothing.)
        rate_a = r_a if r_a is not None else (r_b if r_b is not None else 0.0)
        rate_b = r_b if r_b is not None else rate_a
        contributions.append(
            SegmentContribution(
                segment=segment,
                share_before=w_a,
                share_after=w_b,
                rate_before=r_a,
                rate_after=r_b,
                mix_effect=(w_b - w_a) * (rate_a + rate_b) / 2.0,
                rate_effect=(rate_b - rate_a) * (w_a + w_b) / 2.0,
            )
        )
    contributions.sort(key=lambda c: (-abs(c.total), c.segment))
    return contributions


@dataclass(frozen=True)
class Diagnosis:
    pattern: Pattern
    text: str
    segment: str | None = None

    def as_dict(self) -> dict[str, str]:
        return {"pattern": self.pattern, "text": self.text}


def _points(value: float) -> str:
    return f"{100.0 * value:+.1f}"


def _percent(value: float) -> str:
    return f"{100.0 * value:.1f}%"


def _figures(comparison: RateComparison) -> str:
    d = comparison.difference
    return (
        f"{_percent(comparison.before.value)} to {_percent(comparison.after.value)}, "
        f"{_points(d.value)} points, interval {_points(d.low)} to {_points(d.high)}"
    )


def _change(name: str, comparison: RateComparison) -> str:
    d = comparison.difference
    return (
        f"{name} went from {_percent(comparison.before.value)} to {_percent(comparison.after.value)} "
        f"({_points(d.value)} points, interval {_points(d.low)} to {_points(d.high)})"
    )


def diagnose_recheck(
    *,
    abstention: RateComparison,
    false_abstention: RateComparison | None,
    no_support: RateComparison | None,
    contributions: Sequence[SegmentContribution] = (),
    segment_share: float = SEGMENT_SHARE,
) -> Diagnosis:
    """Name the pattern of a recheck, with one sentence of text.

    Inputs, each "after minus before" at the signed cutoff: ``abstention`` (census: refused of
    all decisions), ``false_abstention`` (graded: correct of graded refused; None while nothing
    refused on the new versions is graded), ``no_support`` (refusals with no supporting
    passage, of all refusals; None when unknown) and the per-segment ``contributions`` of
    :func:`decompose_rate_change` to the abstention change. "Rose" means the difference's
    Newcombe interval lies wholly above 0, "flat" that it covers 0.

    Rules, tested in this order; the first that holds wins:

    0. ``none`` unless the abstention rate rose: there is nothing to explain.
    1. ``retrieval`` when the no-support share rose. Checked first because it is a cause
       upstream of the gate that also looks like each later pattern (more empty retrievals
       push scores down, often in one segment), and because moving the cutoff cannot fix it.
    2. ``segment`` when one segment's contribution is at least ``segment_share`` (60%) of the
       change and larger than that segment's average traffic share ``(w_A + w_B)/2`` (so a
       segment that is 70% of traffic does not "explain" 70% of a uniform rise), with at least
       two segments present. Checked before the gate-wide patterns because a gate-wide reading
       of a one-segment change would send the owner to the wrong component.
    3. ``separation_worse`` when the false-abstention rate rose too: the gate now refuses
       more answers that are correct, so it ranks worse.
    4. ``location_shift`` when the false-abstention rate is flat: more refusals with the same
       share correct among them, the score distribution moved as a whole.
    5. ``none`` otherwise (false abstention not yet graded, or it fell), with a sentence saying
       which.
    """
    if not 0.0 < segment_share <= 1.0:
        raise ValueError("segment_share must lie in (0, 1]")
    if not abstention.difference.is_defined:
        return Diagnosis("none", "The abstention rate cannot be compared: one side has no decisions.")
    abstention_text = _change("Abstention", abstention)
    if not abstention.rose:
        return Diagnosis("none", f"{abstention_text}: no rise to explain.")

    if no_support is not None and no_support.rose:
        return Diagnosis(
            "retrieval",
            f"{abstention_text}, and {_change('the share of refusals with no supporting passage', no_support)}: "
            "a retrieval problem in an abstention costume; moving the cutoff cannot fix it.",
        )

    # The contributions add up to the change exactly (decompose_rate_change), so this is the
    # abstention change whenever they were computed from the same counts.
    change = sum(c.total for c in contributions)
    present = [c for c in contributions if c.share_before > 0 or c.share_after > 0]
    if len(present) >= 2 and change > 0:
        top = max(present, key=lambda c: c.total)
        share = top.total / change
        if share >= segment_share and share > (top.share_before + top.share_after) / 2.0:
            return Diagnosis(
                "segment",
                f"{abstention_text}; segment {top.segment} carries {share:.0%} of the rise with "
                f"{(top.share_before + top.share_after) / 2.0:.0%} of the traffic: look at that segment first.",
                segment=top.segment,
            )

    if false_abstention is None or not false_abstention.difference.is_defined:
        return Diagnosis(
            "none",
            f"{abstention_text}; the false-abstention rate on the new versions is not graded yet, "
            "so a score shift cannot be told from a worse gate.",
        )
    far_text = _change("false abstention", false_abstention)
    if false_abstention.rose:
        return Diagnosis(
            "separation_worse",
            f"{abstention_text} and {far_text}: the gate separates right from wrong answers worse.",
        )
    if false_abstention.flat:
        return Diagnosis(
            "location_shift",
            f"{abstention_text} while false abstention stayed flat ({_figures(false_abstention)}): "
            "the score distribution moved; the cutoff needs re-reading, not the gate.",
        )
    return Diagnosis(
        "none",
        f"{abstention_text} while {far_text}: the extra refusals are mostly wrong answers, "
        "so the answers got worse rather than the gate.",
    )
