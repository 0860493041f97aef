"""The operating-point table and the middle-band table (docs/statistics.md, "The operating-point table").

Two instruments feed every row, and they are passed in separately because they come from
different places:

* the **population**: every ingested decision of the route in the window. Only its size and, per
  cutoff, how many scores clear the cutoff are needed, so the caller can compute them with SQL
  aggregates over a million rows (``served_counts``) or hand in the sorted scores;
* the **graded sample**: items with a final label, their gate scores, whether the answer that
  would have been served is correct, and optionally inverse inclusion probabilities and strata.

Tie policy: an item is served when ``score >= cutoff`` (``TIE_POLICY``).

A table whose refused half comes from a shadow sample of refusals and whose served half comes
from a separate graded set does not close: its wrong-served column cannot be rebuilt from the
abstention and false-abstention rates. Here both halves of every row come from one population
and one graded sample. With a census (every item graded, no weights) each row is the plain
per-cutoff share of refused, of correct among refused and of wrong among served, and
``wrong_served(no gate) - wrong_served(t)`` equals the wrong answers among the refused.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from console.stats.intervals import (
    Interval,
    IntervalMethod,
    proportion_interval,
    weighted_proportion_interval,
)

TIE_POLICY = "serve_if_score_gte_cutoff"
EXCHANGE_RATE_INTERVAL: IntervalMethod = "clopper_pearson"


def _finite_scores(name: str, scores: ArrayLike) -> NDArray[np.float64]:
    """``scores`` as a 1-D float array, rejecting NaN and infinities.

    A NaN compares false with every cutoff (both ``score < t`` and ``score >= t`` are false),
    and a sort puts it last, so the population count would call it served while a mask would
    call it neither. A score that is not a number has no side of the cutoff: the population and
    the graded sample are validated the same way, so one bad score fails loudly wherever it
    enters.
    """
    values = np.asarray(scores, dtype=float)
    if values.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional")
    if not np.all(np.isfinite(values)):
        bad = int(np.count_nonzero(~np.isfinite(values)))
        raise ValueError(f"{name} must be finite: {bad} of {values.size} are NaN or infinite")
    return values


def served_counts_from_scores(
    scores: ArrayLike, cutoffs: Sequence[float], *, presorted: bool = False
) -> NDArray[np.int64]:
    """Number of scores ``>= t`` for each cutoff ``t`` (tie policy: a score equal to the cutoff
    is served).

    ``len(scores) - searchsorted(sorted_scores, t, side="left")``; O(m log n) once sorted.
    Pass ``presorted=True`` when the scores are already ascending to skip the sort.
    """
    values = _finite_scores("scores", scores)
    if not presorted:
        values = np.sort(values)
    thresholds = np.asarray(cutoffs, dtype=float)
    return (values.shape[0] - np.searchsorted(values, thresholds, side="left")).astype(np.int64)


@dataclass(frozen=True)
class Band:
    """Graded items with ``lower <= score < upper`` (``lower`` None means no lower edge)."""

    lower: float | None
    upper: float
    graded: int
    correct: int
    wrong: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class OperatingPointRow:
    """One row of the operating-point table. ``cutoff`` None is the no-gate row."""

    cutoff: float | None
    refused: int
    served: int
    abstention_rate: Interval
    false_abstention_rate: Interval | None
    graded_refused: int
    graded_served: int
    correct_withheld_per_1000: Interval | None
    wrong_served_per_1000: Interval | None
    exchange_rate: Interval | None
    band: Band | None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready dict in the shape of the operating-points API response.

        Intervals become ``{"value", "low", "high"}``; a missing estimate is ``null``. Inside
        ``exchange_rate`` a ``null`` ``value``/``high`` means unbounded (the band has no wrong
        answer), while ``exchange_rate: null`` means there is no band (no-gate row) or no graded
        item in it.
        """

        def interval(value: Interval | None) -> dict[str, float | None] | None:
            return None if value is None else value.as_dict()

        return {
            "cutoff": self.cutoff,
            "refused": self.refused,
            "served": self.served,
            "abstention_rate": self.abstention_rate.as_dict(),
            "false_abstention_rate": interval(self.false_abstention_rate),
            "graded_refused": self.graded_refused,
            "graded_served": self.graded_served,
            "correct_withheld_per_1000": interval(self.correct_withheld_per_1000),
            "wrong_served_per_1000": interval(self.wrong_served_per_1000),
            "exchange_rate": interval(self.exchange_rate),
            "band": None if self.band is None else self.band.as_dict(),
        }


@dataclass(frozen=True)
class _GradedSample:
    scores: NDArray[np.float64]
    correct: NDArray[np.bool_]
    weights: NDArray[np.float64] | None
    strata: NDArray[Any] | None
    confidence: float
    method: IntervalMethod

    def share(self, outcome: NDArray[np.bool_], domain: NDArray[np.bool_], method: IntervalMethod) -> Interval:
        """Share of ``outcome`` among graded items in ``domain``; Hájek-weighted when the sample
        carries weights or strata, a plain binomial proportion otherwise."""
        if self.weights is None and self.strata is None:
            return proportion_interval(
                int(np.count_nonzero(outcome & domain)),
                int(np.count_nonzero(domain)),
                confidence=self.confidence,
                method=method,
            )
        weights = self.weights if self.weights is not None else np.ones_like(self.scores)
        return weighted_proportion_interval(
            outcome,
            weights,
            strata=self.strata,
            domain=domain,
            confidence=self.confidence,
            method=method,
        )


def _graded_sample(
    graded_scores: ArrayLike,
    graded_correct: ArrayLike,
    graded_weights: ArrayLike | None,
    graded_strata: ArrayLike | None,
    confidence: float,
    method: IntervalMethod,
) -> _GradedSample:
    scores = _finite_scores("graded_scores", graded_scores)
    correct_raw = np.asarray(graded_correct)
    if correct_raw.shape != scores.shape:
        raise ValueError("graded_scores and graded_correct must be 1-D arrays of equal length")
    if correct_raw.dtype != bool and not np.all((correct_raw == 0) | (correct_raw == 1)):
        raise ValueError("graded_correct must be boolean (or 0/1)")
    weights = None
    if graded_weights is not None:
        weights = np.asarray(graded_weights, dtype=float)
        if weights.shape != scores.shape:
            raise ValueError("graded_weights must align with graded_scores")
    strata = None
    if graded_strata is not None:
        labels = np.asarray(graded_strata)
        if labels.shape != scores.shape:
            raise ValueError("graded_strata must align with graded_scores")
        # Encode once as 0..H-1 so each of the table's many weighted shares skips the sort.
        strata = np.unique(labels, return_inverse=True)[1].astype(np.intp)
    return _GradedSample(scores, correct_raw.astype(bool), weights, strata, confidence, method)


def _population_counts(
    population_size: int,
    population_scores_sorted: ArrayLike | None,
    served_counts: Sequence[int] | None,
    cutoffs: NDArray[np.float64],
) -> NDArray[np.int64]:
    if population_size <= 0:
        raise ValueError("population_size must be positive: there is no table without traffic")
    if (population_scores_sorted is None) == (served_counts is None):
        raise ValueError("pass exactly one of population_scores_sorted and served_counts")
    if population_scores_sorted is not None:
        scores = _finite_scores("population_scores_sorted", population_scores_sorted)
        if scores.shape[0] != population_size:
            raise ValueError("population_scores_sorted must hold population_size scores")
        if np.any(scores[1:] < scores[:-1]):
            raise ValueError("population_scores_sorted must be in ascending order")
        return served_counts_from_scores(scores, cutoffs, presorted=True)
    counts = np.asarray(served_counts, dtype=np.int64)
    if counts.shape != cutoffs.shape:
        raise ValueError("served_counts must align with cutoffs")
    if np.any(counts < 0) or np.any(counts > population_size):
        raise ValueError("served_counts must lie in [0, population_size]")
    return counts


def _sorted_cutoffs(
    cutoffs: Sequence[float], served_counts: Sequence[int] | None
) -> tuple[NDArray[np.float64], Sequence[int] | None]:
    values = np.asarray(cutoffs, dtype=float)
    if values.ndim != 1 or not np.all(np.isfinite(values)):
        raise ValueError("cutoffs must be a sequence of finite numbers")
    if np.unique(values).shape != values.shape:
        raise ValueError("cutoffs must be distinct")
    order = np.argsort(values, kind="stable")
    if served_counts is not None:
        counts = np.asarray(served_counts)
        if counts.shape != values.shape:
            raise ValueError("served_counts must align with cutoffs")
        served_counts = counts[order].tolist()
    return values[order], served_counts


def _per_1000(window_share: float, share: Interval, count_in_window: int) -> Interval | None:
    """``1000 * window_share * share``; exactly 0 when the window has none of these items and
    None when it has some but none of them were graded."""
    if count_in_window == 0:
        return Interval.exact(0.0)
    if not share.is_defined:
        return None
    return share.scaled(1000.0 * window_share)


def _odds(interval: Interval) -> Interval:
    """Map a share interval ``[L, U]`` to odds ``[L/(1-L), U/(1-U)]`` (monotone, so exact)."""

    def odds(p: float) -> float:
        return math.inf if p >= 1.0 else p / (1.0 - p)

    return Interval(odds(interval.value), odds(interval.low), odds(interval.high))


def operating_points(
    *,
    population_size: int,
    cutoffs: Sequence[float],
    graded_scores: ArrayLike,
    graded_correct: ArrayLike,
    served_counts: Sequence[int] | None = None,
    population_scores_sorted: ArrayLike | None = None,
    graded_weights: ArrayLike | None = None,
    graded_strata: ArrayLike | None = None,
    confidence: float = 0.95,
    method: IntervalMethod = "wilson",
) -> list[OperatingPointRow]:
    """The operating-point table: the no-gate row, then one row per cutoff in ascending order.

    Inputs: ``population_size`` ``N`` and, per cutoff, the population count served ``S(t)``
    (``served_counts``, aligned with ``cutoffs``; or ``population_scores_sorted`` to derive it);
    the graded sample's scores, correctness, and optional inverse-inclusion weights and strata.
    ``cutoffs`` may come in any order but must be distinct.

    Per row, with ``R = N - S`` (docs/statistics.md, "The operating-point table"):

    * ``abstention_rate``: value ``R/N``, exact on the window; interval = binomial interval of
      ``method`` at ``(R, N)``, read as the rate on future traffic like this window.
    * ``false_abstention_rate`` (FAR): share correct among graded items with ``score < t``;
      Hájek-weighted when weights or strata are given (:func:`weighted_proportion_interval`),
      plain proportion otherwise. None when no graded item is refused.
    * ``correct_withheld_per_1000 = 1000 (R/N) FAR``, interval ``1000 (R/N) [FAR_L, FAR_U]``.
      The window's shares are exact; the interval reflects grading uncertainty only.
      Exactly 0 when ``R = 0``; None when ``R > 0`` and nothing refused was graded.
    * ``wrong_served_per_1000 = 1000 (S/N) W`` with ``W`` the share wrong among graded served,
      interval likewise; the no-gate row is 1000 times the share wrong among all graded.
    * ``exchange_rate`` vs the previous row: over the band ``[previous cutoff, t)`` (no lower
      edge after the no-gate row), ``p`` = share correct among graded band items and the rate
      is the band's odds ``p/(1-p)`` = extra correct withheld per extra wrong removed, with
      interval ``[L/(1-L), U/(1-U)]`` from the band's Clopper–Pearson interval at
      ``confidence`` (an exact interval, so the odds interval is exact too; Korn–Graubard
      effective n when weighted). ``high`` (and ``value`` when ``p = 1``) is ``inf`` when the band has
      no wrong item. None when the band has no graded item. ``band`` carries its raw counts.
    """
    sorted_cutoffs, aligned_counts = _sorted_cutoffs(cutoffs, served_counts)
    served = _population_counts(population_size, population_scores_sorted, aligned_counts, sorted_cutoffs)
    if np.any(np.diff(served) > 0):
        raise ValueError("served_counts must not increase as the cutoff rises")
    sample = _graded_sample(graded_scores, graded_correct, graded_weights, graded_strata, confidence, method)
    n = float(population_size)
    everything = np.ones(sample.scores.shape, dtype=bool)
    wrong = ~sample.correct

    rows = [
        OperatingPointRow(
            cutoff=None,
            refused=0,
            served=population_size,
            abstention_rate=proportion_interval(0, population_size, confidence=confidence, method=method),
            false_abstention_rate=None,
            graded_refused=0,
            graded_served=int(sample.scores.shape[0]),
            correct_withheld_per_1000=Interval.exact(0.0),
            wrong_served_per_1000=_per_1000(1.0, sample.share(wrong, everything, method), population_size),
            exchange_rate=None,
            band=None,
        )
    ]
    previous_cutoff: float | None = None
    for cutoff, served_count in zip(sorted_cutoffs.tolist(), served.tolist(), strict=True):
        refused_count = population_size - served_count
        graded_refused = sample.scores < cutoff
        graded_served = ~graded_refused
        far = sample.share(sample.correct, graded_refused, method)
        wrong_share = sample.share(wrong, graded_served, method)

        in_band = graded_refused.copy()
        if previous_cutoff is not None:
            in_band &= sample.scores >= previous_cutoff
        band_correct = int(np.count_nonzero(in_band & sample.correct))
        band_graded = int(np.count_nonzero(in_band))
        band_share = sample.share(sample.correct, in_band, EXCHANGE_RATE_INTERVAL)

        rows.append(
            OperatingPointRow(
                cutoff=cutoff,
                refused=refused_count,
                served=served_count,
                abstention_rate=proportion_interval(
                    refused_count, population_size, confidence=confidence, method=method
                ),
                false_abstention_rate=far if far.is_defined else None,
                graded_refused=int(np.count_nonzero(graded_refused)),
                graded_served=int(np.count_nonzero(graded_served)),
                correct_withheld_per_1000=_per_1000(refused_count / n, far, refused_count),
                wrong_served_per_1000=_per_1000(served_count / n, wrong_share, served_count),
                exchange_rate=_odds(band_share) if band_share.is_defined else None,
                band=Band(
                    lower=previous_cutoff,
                    upper=cutoff,
                    graded=band_graded,
                    correct=band_correct,
                    wrong=band_graded - band_correct,
                ),
            )
        )
        previous_cutoff = cutoff
    return rows


def operating_points_document(
    rows: Sequence[OperatingPointRow],
    *,
    population_size: int,
    graded: int,
    confidence: float,
    method: IntervalMethod,
) -> dict[str, Any]:
    """The body of the operating-points response, minus ``route`` (the caller adds it with any
    filters). Names the interval methods and tie policy, as every statistical output does."""
    return {
        "population": population_size,
        "graded": graded,
        "confidence": confidence,
        "interval": method,
        "exchange_rate_interval": EXCHANGE_RATE_INTERVAL,
        "tie_policy": TIE_POLICY,
        "rows": [row.as_dict() for row in rows],
    }


@dataclass(frozen=True)
class BandSegment:
    """One of the three treatments of a middle-band policy.

    ``share`` is the population share given this treatment (exact value, binomial interval).
    ``wrong_rate`` is the share of graded items in the segment whose answer is wrong: for the
    two served segments the residual error, for the refused segment the share rightly refused
    (its complement is the false-abstention rate). Per-1000 figures are ``1000 * share`` times
    the wrong or correct rate, as in the operating-point table.
    """

    name: str
    lower: float | None
    upper: float | None
    count: int
    share: Interval
    graded: int
    wrong_rate: Interval | None
    wrong_per_1000: Interval | None
    correct_per_1000: Interval | None

    def as_dict(self) -> dict[str, Any]:
        def interval(value: Interval | None) -> dict[str, float | None] | None:
            return None if value is None else value.as_dict()

        return {
            "name": self.name,
            "lower": self.lower,
            "upper": self.upper,
            "count": self.count,
            "share": self.share.as_dict(),
            "graded": self.graded,
            "wrong_rate": interval(self.wrong_rate),
            "wrong_per_1000": interval(self.wrong_per_1000),
            "correct_per_1000": interval(self.correct_per_1000),
        }


@dataclass(frozen=True)
class BandTable:
    """A policy ``(band_lower, cutoff)``: serve at or above ``cutoff``, serve with the evidence
    shown in ``[band_lower, cutoff)``, refuse below ``band_lower`` (docs/statistics.md, "Middle band")."""

    band_lower: float
    cutoff: float
    served: BandSegment
    served_with_evidence: BandSegment
    refused: BandSegment

    def as_dict(self) -> dict[str, Any]:
        return {
            "band_lower": self.band_lower,
            "cutoff": self.cutoff,
            "tie_policy": TIE_POLICY,
            "segments": [
                self.served.as_dict(),
                self.served_with_evidence.as_dict(),
                self.refused.as_dict(),
            ],
        }


def band_table(
    *,
    band_lower: float,
    cutoff: float,
    population_size: int,
    graded_scores: ArrayLike,
    graded_correct: ArrayLike,
    served_counts: Sequence[int] | None = None,
    population_scores_sorted: ArrayLike | None = None,
    graded_weights: ArrayLike | None = None,
    graded_strata: ArrayLike | None = None,
    confidence: float = 0.95,
    method: IntervalMethod = "wilson",
) -> BandTable:
    """The three shares of a middle-band policy and the error in each.

    ``served_counts`` is ``(S(band_lower), S(cutoff))``: population items with score at or
    above each edge. Segments: served ``score >= cutoff`` (``S(cutoff)``), served with evidence
    ``band_lower <= score < cutoff`` (``S(band_lower) - S(cutoff)``), refused
    ``score < band_lower`` (``N - S(band_lower)``). Each share is exact on the window with the
    binomial interval of ``method``; the wrong rate in each is estimated on the graded items in
    the segment exactly as the operating-point table does (Hájek-weighted when weights or
    strata are given). ``band_lower == cutoff`` is the plain cutoff policy (empty middle band).
    """
    if not (math.isfinite(band_lower) and math.isfinite(cutoff)):
        raise ValueError("band_lower and cutoff must be finite")
    if band_lower > cutoff:
        raise ValueError("band_lower must not exceed cutoff")
    edges = np.array([band_lower, cutoff], dtype=float)
    counts = _population_counts(population_size, population_scores_sorted, served_counts, edges)
    at_or_above_lower, at_or_above_cutoff = (int(c) for c in counts)
    if at_or_above_cutoff > at_or_above_lower:
        raise ValueError("served_counts must not increase as the cutoff rises")
    sample = _graded_sample(graded_scores, graded_correct, graded_weights, graded_strata, confidence, method)
    scores = sample.scores
    wrong = ~sample.correct

    def segment(
        name: str, lower: float | None, upper: float | None, count: int, graded: NDArray[np.bool_]
    ) -> BandSegment:
        share = count / population_size
        wrong_rate = sample.share(wrong, graded, method)
        correct_rate = wrong_rate.complement() if wrong_rate.is_defined else wrong_rate
        return BandSegment(
            name=name,
            lower=lower,
            upper=upper,
            count=count,
            share=proportion_interval(count, population_size, confidence=confidence, method=method),
            graded=int(np.count_nonzero(graded)),
            wrong_rate=wrong_rate if wrong_rate.is_defined else None,
            wrong_per_1000=_per_1000(share, wrong_rate, count),
            correct_per_1000=_per_1000(share, correct_rate, count),
        )

    return BandTable(
        band_lower=band_lower,
        cutoff=cutoff,
        served=segment("served", cutoff, None, at_or_above_cutoff, scores >= cutoff),
        served_with_evidence=segment(
            "served_with_evidence",
            band_lower,
            cutoff,
            at_or_above_lower - at_or_above_cutoff,
            (scores >= band_lower) & (scores < cutoff),
        ),
        refused=segment("refused", None, band_lower, population_size - at_or_above_lower, scores < band_lower),
    )
