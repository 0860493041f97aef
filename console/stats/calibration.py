"""Calibration and failure prediction of a gate score against graded correctness.

Two properties of a confidence score are kept apart (docs/statistics.md, "Calibration and
failure prediction"):

* calibration -- do items scored about 0.8 turn out correct about 80% of the time?
  (reliability bins, expected calibration error, the reliability term of the Brier score);
* failure prediction -- do correct answers outrank wrong ones? (AUROC, the risk-coverage
  curve and its area). A gate spends this second property; recalibration cannot create it.

Inputs everywhere are two aligned one-dimensional arrays: ``scores`` (finite floats; in
[0, 1] wherever bins are involved) and ``correct`` (booleans or 0/1). Only items with a
correct/incorrect label belong here: an item whose final label is "unsure" carries no vote
and must be left out by the caller.

Tie policy, as everywhere in the console: an item is served when ``score >= cutoff``.

Undefined quantities are ``None`` rather than NaN (AUROC with one class absent, bin
statistics of an empty bin, anything computed over zero items), so reports are JSON-ready.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, TypedDict

import numpy as np
from numpy.typing import ArrayLike

Bins = int | Sequence[float]
"""Either a number of equal-width bins on [0, 1] or explicit edges ``0 = e0 < ... < ek = 1``."""


class ReliabilityBin(TypedDict):
    low: float
    high: float
    count: int
    mean_score: float | None
    accuracy: float | None


class BrierDecomposition(TypedDict):
    brier: float
    reliability: float
    resolution: float
    uncertainty: float
    within_bin_variance: float
    within_bin_covariance: float


class RiskCoveragePoint(TypedDict):
    cutoff: float
    coverage: float
    risk: float


class RiskCoverage(TypedDict):
    points: list[RiskCoveragePoint]
    aurc: float | None


class CalibrationReport(TypedDict):
    n: int
    auroc: float | None
    ece: float | None
    brier: float | None
    reliability: float | None
    resolution: float | None
    uncertainty: float | None
    within_bin_variance: float | None
    within_bin_covariance: float | None
    bins: list[ReliabilityBin]
    risk_coverage: list[RiskCoveragePoint]
    aurc: float | None


# --------------------------------------------------------------------------- input handling


def _as_arrays(scores: ArrayLike, correct: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    score_array = np.asarray(scores, dtype=float)
    correct_array = np.asarray(correct)
    if score_array.ndim != 1 or correct_array.ndim != 1:
        raise ValueError("scores and correct must be one-dimensional")
    if len(score_array) != len(correct_array):
        raise ValueError(f"scores and correct differ in length ({len(score_array)} != {len(correct_array)})")
    if not np.all(np.isfinite(score_array)):
        raise ValueError("scores must be finite")
    if correct_array.dtype != bool:
        if correct_array.size and not np.all((correct_array == 0) | (correct_array == 1)):
            raise ValueError("correct must hold booleans or 0/1")
        correct_array = correct_array.astype(bool)
    return score_array, correct_array


def _bin_edges(bins: Bins) -> np.ndarray:
    if isinstance(bins, bool):
        raise ValueError("bins must be a positive integer or a sequence of edges")
    if isinstance(bins, int | np.integer):
        if bins < 1:
            raise ValueError("bins must be at least 1")
        # i / bins, each correctly rounded, so a score written as 0.3 sits on the edge 0.3.
        return np.arange(bins + 1) / bins
    edges = np.asarray(bins, dtype=float)
    if edges.ndim != 1 or len(edges) < 2 or edges[0] != 0.0 or edges[-1] != 1.0 or np.any(np.diff(edges) <= 0):
        raise ValueError("bin edges must increase strictly from 0 to 1")
    return edges


def _bin_index(scores: np.ndarray, edges: np.ndarray) -> np.ndarray:
    if scores.size and (scores.min() < 0.0 or scores.max() > 1.0):
        raise ValueError("scores must lie in [0, 1] to be binned")
    index = np.searchsorted(edges, scores, side="right") - 1
    # Left-closed bins, except that the last one also holds its right edge (score 1.0).
    return np.minimum(index, len(edges) - 2)


def _float_or_none(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


# --------------------------------------------------------------------------- bins


class _BinStatistics(NamedTuple):
    edges: np.ndarray
    count: np.ndarray
    mean_score: np.ndarray  # NaN where the bin is empty
    accuracy: np.ndarray  # NaN where the bin is empty
    squared_score_deviation: float  # sum over items of (f - mean f of its bin)^2
    score_outcome_codeviation: float  # sum over items of (o - mean o)(f - mean f) in its bin


def _bin_statistics(scores: np.ndarray, correct: np.ndarray, bins: Bins) -> _BinStatistics:
    edges = _bin_edges(bins)
    size = len(edges) - 1
    index = _bin_index(scores, edges)
    outcome = correct.astype(float)
    count = np.bincount(index, minlength=size)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_score = np.bincount(index, weights=scores, minlength=size) / count
        accuracy = np.bincount(index, weights=outcome, minlength=size) / count
    score_deviation = scores - mean_score[index]
    outcome_deviation = outcome - accuracy[index]
    return _BinStatistics(
        edges=edges,
        count=count,
        mean_score=mean_score,
        accuracy=accuracy,
        squared_score_deviation=float(np.dot(score_deviation, score_deviation)),
        score_outcome_codeviation=float(np.dot(score_deviation, outcome_deviation)),
    )


def _bins_as_rows(stats: _BinStatistics) -> list[ReliabilityBin]:
    return [
        {
            "low": float(stats.edges[b]),
            "high": float(stats.edges[b + 1]),
            "count": int(stats.count[b]),
            "mean_score": _float_or_none(stats.mean_score[b]),
            "accuracy": _float_or_none(stats.accuracy[b]),
        }
        for b in range(len(stats.count))
    ]


def _ece(stats: _BinStatistics) -> float | None:
    n = int(stats.count.sum())
    if n == 0:
        return None
    filled = stats.count > 0
    gaps = np.abs(stats.accuracy[filled] - stats.mean_score[filled])
    return float(np.dot(stats.count[filled], gaps) / n)


def reliability_bins(scores: ArrayLike, correct: ArrayLike, bins: Bins = 10) -> list[ReliabilityBin]:
    """Reliability-diagram bins: for each bin its edges, item count, mean score and accuracy.

    With an integer ``bins = M`` the bins are equal-width on [0, 1]: bin b is
    ``[b/M, (b+1)/M)``, left-closed, except the last, ``[(M-1)/M, 1]``, which is closed so that
    a score of exactly 1.0 is counted. A sequence of edges
    ``0 = e0 < e1 < ... < ek = 1`` gives the same left-closed, last-closed bins with chosen
    edges, e.g. one bin per issued level of a discrete score.

    ``mean_score`` and ``accuracy`` are ``None`` for an empty bin. Every bin is returned, empty
    or not, in increasing order of score. Source: the binned reliability diagram of
    Naeini, Cooper & Hauskrecht (2015).
    """
    score_array, correct_array = _as_arrays(scores, correct)
    return _bins_as_rows(_bin_statistics(score_array, correct_array, bins))


def expected_calibration_error(scores: ArrayLike, correct: ArrayLike, bins: Bins = 10) -> float | None:
    """Expected calibration error over the bins of :func:`reliability_bins`.

        ECE = sum_b (n_b / n) * | acc(B_b) - conf(B_b) |

    where ``acc`` is the share correct and ``conf`` the mean score of the items in bin B_b;
    empty bins carry no weight (Naeini, Cooper & Hauskrecht 2015).
    With ``bins=1`` it is the absolute gap between mean score and accuracy, so opposite errors
    cancel -- which is why the console also reports it per segment. ``None`` for no items.
    """
    score_array, correct_array = _as_arrays(scores, correct)
    return _ece(_bin_statistics(score_array, correct_array, bins))


# --------------------------------------------------------------------------- Brier score


def _brier_decomposition(scores: np.ndarray, correct: np.ndarray, stats: _BinStatistics) -> BrierDecomposition | None:
    n = len(scores)
    if n == 0:
        return None
    outcome = correct.astype(float)
    base_rate = float(outcome.mean())
    filled = stats.count > 0
    weights = stats.count[filled] / n
    miscalibration = stats.mean_score[filled] - stats.accuracy[filled]
    spread = stats.accuracy[filled] - base_rate
    return {
        "brier": float(np.mean((scores - outcome) ** 2)),
        "reliability": float(np.dot(weights, miscalibration**2)),
        "resolution": float(np.dot(weights, spread**2)),
        "uncertainty": base_rate * (1.0 - base_rate),
        "within_bin_variance": stats.squared_score_deviation / n,
        "within_bin_covariance": 2.0 * stats.score_outcome_codeviation / n,
    }


def brier_decomposition(scores: ArrayLike, correct: ArrayLike, bins: Bins = 10) -> BrierDecomposition | None:
    """Brier score and its decomposition over the bins of :func:`reliability_bins`.

    With forecasts f_j, outcomes o_j in {0, 1}, n items, bins B_k holding n_k items with mean
    forecast fbar_k and share correct obar_k, and overall share correct obar:

        BS  = (1/n) sum_j (f_j - o_j)^2
        REL = (1/n) sum_k n_k (fbar_k - obar_k)^2                 reliability (Murphy 1973)
        RES = (1/n) sum_k n_k (obar_k - obar)^2                   resolution (Murphy 1973)
        UNC = obar (1 - obar)                                     uncertainty (Murphy 1973)
        WBV = (1/n) sum_k sum_{j in B_k} (f_j - fbar_k)^2          within-bin variance
        WBC = (2/n) sum_k sum_{j in B_k} (o_j - obar_k)(f_j - fbar_k)   within-bin covariance

        BS = REL - RES + UNC + WBV - WBC      (exact, up to floating-point rounding)

    Murphy's three-term form is exact only when the forecast is constant within each bin;
    the two extra components, which vanish in that case, are those of Stephenson, Coelho &
    Jolliffe (2008), "Two extra components in the Brier score decomposition".
    Arbitrary binning of a varying score changes the reported resolution; the extra terms make
    that visible instead of hiding it in a mismatch.

    Returns ``{brier, reliability, resolution, uncertainty, within_bin_variance,
    within_bin_covariance}`` (``within_bin_covariance`` includes the factor 2), or ``None``
    for no items.
    """
    score_array, correct_array = _as_arrays(scores, correct)
    stats = _bin_statistics(score_array, correct_array, bins)
    return _brier_decomposition(score_array, correct_array, stats)


# --------------------------------------------------------------------------- ranking


class _ScoreLevels(NamedTuple):
    values: np.ndarray  # distinct scores, ascending
    correct: np.ndarray  # correct items at each distinct score (int64)
    wrong: np.ndarray  # wrong items at each distinct score (int64)


def _score_levels(scores: np.ndarray, correct: np.ndarray) -> _ScoreLevels:
    values, inverse = np.unique(scores, return_inverse=True)
    return _ScoreLevels(
        values=values,
        correct=np.bincount(inverse[correct], minlength=len(values)).astype(np.int64),
        wrong=np.bincount(inverse[~correct], minlength=len(values)).astype(np.int64),
    )


def _auroc(levels: _ScoreLevels) -> float | None:
    positives = int(levels.correct.sum())
    negatives = int(levels.wrong.sum())
    if positives == 0 or negatives == 0:
        return None
    wrong_strictly_below = np.cumsum(levels.wrong) - levels.wrong
    wins = int(np.dot(levels.correct, wrong_strictly_below))
    ties = int(np.dot(levels.correct, levels.wrong))
    # Integer numerator and denominator, one rounding: exact to the last bit for any n here.
    return (2 * wins + ties) / (2 * positives * negatives)


def auroc(scores: ArrayLike, correct: ArrayLike) -> float | None:
    """Area under the ROC curve of the score as a predictor of a correct answer.

        AUROC = (W + T / 2) / (n_correct * n_wrong)

    over all (correct, wrong) pairs, where W counts pairs in which the correct item scores
    higher and T pairs with equal scores: the Mann-Whitney form with ties counted 1/2, which
    equals the trapezoidal area under the empirical ROC curve (Hanley & McNeil 1982). A
    constant score gives 0.5. ``None`` when either class is absent. Computed
    from counts per distinct score in O(n log n), so it is exact for ties.
    """
    score_array, correct_array = _as_arrays(scores, correct)
    return _auroc(_score_levels(score_array, correct_array))


def _curve_positions(length: int, max_points: int | None) -> np.ndarray:
    if max_points is None or length <= max_points:
        return np.arange(length)
    return np.unique(np.rint(np.linspace(0, length - 1, max_points)).astype(int))


def _risk_coverage(levels: _ScoreLevels, max_points: int | None) -> RiskCoverage:
    if max_points is not None and max_points < 2:
        raise ValueError("max_points must be at least 2 (the two ends of the curve)")
    n = int(levels.correct.sum() + levels.wrong.sum())
    if n == 0:
        return {"points": [], "aurc": None}
    # Highest cutoff first: coverage grows, each cutoff serves every item scored at or above.
    at_level = (levels.correct + levels.wrong)[::-1]
    served = np.cumsum(at_level)
    wrong_served = np.cumsum(levels.wrong[::-1])
    coverage = served / n
    risk = wrong_served / served
    aurc = float(np.dot(at_level / n, risk))
    keep = _curve_positions(len(served), max_points)
    points: list[RiskCoveragePoint] = [
        {"cutoff": float(c), "coverage": float(v), "risk": float(r)}
        for c, v, r in zip(levels.values[::-1][keep], coverage[keep], risk[keep], strict=True)
    ]
    return {"points": points, "aurc": aurc}


def risk_coverage(scores: ArrayLike, correct: ArrayLike, *, max_points: int | None = None) -> RiskCoverage:
    """Risk-coverage curve over every distinct score as a cutoff, and the area under it.

    For a cutoff t (serve when ``score >= t``):

        coverage(t) = #{score >= t} / n
        risk(t)     = #{score >= t and wrong} / #{score >= t}

    (selective risk of Geifman & El-Yaniv 2017, "Selective classification for deep neural
    networks"). Points run from the highest cutoff (lowest coverage) to the lowest score,
    whose coverage is 1.

    Integration convention for ``aurc``: risk is a step function of coverage that takes, on
    each coverage step (c_{i-1}, c_i], the value reached at its cutoff t_i:

        AURC = sum_i (c_i - c_{i-1}) * risk(t_i),    c_0 = 0.

    With distinct scores every step is one item wide and this is the mean of the selective
    risk over the n coverage levels 1/n, ..., n/n -- the empirical AURC of Geifman, Uziel &
    El-Yaniv (2019). Items with tied scores cannot be served separately under the tie policy,
    so a tie group's step carries the risk of the whole group (not an average over random
    tie-breaks). Lower is better.

    ``max_points`` (at least 2) thins the returned points to at most that many, evenly spaced
    along the list of distinct cutoffs and always keeping both ends; ``aurc`` is computed
    from the full curve either way. With no items: no points and ``aurc`` ``None``.
    """
    score_array, correct_array = _as_arrays(scores, correct)
    return _risk_coverage(_score_levels(score_array, correct_array), max_points)


# --------------------------------------------------------------------------- reports


def calibration_report(
    scores: ArrayLike, correct: ArrayLike, bins: Bins = 10, *, max_points: int | None = None
) -> CalibrationReport:
    """Everything the calibration endpoint shows, as JSON-ready values.

    Keys: ``n``, ``auroc``, ``ece``, ``brier``, ``reliability``, ``resolution``,
    ``uncertainty``, ``bins`` (see :func:`reliability_bins`), ``risk_coverage`` (the points
    of :func:`risk_coverage`, thinned to ``max_points`` if given), ``aurc`` (always from the
    full curve); plus ``within_bin_variance`` and
    ``within_bin_covariance`` so that
    ``brier == reliability - resolution + uncertainty + within_bin_variance
    - within_bin_covariance`` (see :func:`brier_decomposition`). Formulas and sources are in
    those functions. With no items, ``n`` is 0, every bin is empty and the statistics are
    ``None``.
    """
    score_array, correct_array = _as_arrays(scores, correct)
    stats = _bin_statistics(score_array, correct_array, bins)
    levels = _score_levels(score_array, correct_array)
    decomposition = _brier_decomposition(score_array, correct_array, stats)
    curve = _risk_coverage(levels, max_points)
    parts: dict[str, float | None] = (
        dict(decomposition) if decomposition else dict.fromkeys(BrierDecomposition.__annotations__)
    )
    return {
        "n": len(score_array),
        "auroc": _auroc(levels),
        "ece": _ece(stats),
        "brier": parts["brier"],
        "reliability": parts["reliability"],
        "resolution": parts["resolution"],
        "uncertainty": parts["uncertainty"],
        "within_bin_variance": parts["within_bin_variance"],
        "within_bin_covariance": parts["within_bin_covariance"],
        "bins": _bins_as_rows(stats),
        "risk_coverage": curve["points"],
        "aurc": curve["aurc"],
    }


def calibration_by_segment(
    scores: ArrayLike,
    correct: ArrayLike,
    segments: Sequence[str],
    bins: Bins = 10,
    *,
    max_points: int | None = None,
) -> dict[str, CalibrationReport]:
    """One :func:`calibration_report` per segment value, keyed by segment, in sorted order.

    ``segments[i]`` is the segment of item i (e.g. its ``language``). ECE is reported by
    query type, source and language because opposite errors in two segments
    cancel in the global figure. Only segments that occur are reported.
    """
    score_array, correct_array = _as_arrays(scores, correct)
    segment_array = np.asarray(segments, dtype=object)
    if segment_array.shape != score_array.shape:
        raise ValueError("segments must give one segment per item")
    return {
        segment: calibration_report(
            score_array[segment_array == segment],
            correct_array[segment_array == segment],
            bins,
            max_points=max_points,
        )
        for segment in sorted(set(segment_array.tolist()))
    }
