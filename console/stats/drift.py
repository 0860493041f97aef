"""Drift statistics for a signed cutoff: control limits, CUSUM, PSI, KS and total variation.

A signed cutoff is a statement about a score distribution and holds only while that
distribution holds. These functions compare the days after signing with the signing window;
they are pure and read counts, so the monitor can feed them day counters and stored score
histograms instead of every decision. Formulas, sources and the decision rules are collected in
docs/statistics.md, "Monitoring".

Conventions: a day with no traffic has no rate (NaN) and never raises a flag; every input is
validated and a bad one raises ``ValueError`` naming it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

# scipy is imported inside the functions that use it, so a process that never runs a test
# (beat, the pool and verification workers) does not carry it in memory (bench/memory.py).

DEFAULT_SIGMAS = 3.0
DEFAULT_CUSUM_INTERVAL = math.log(1000.0)
"""``h = ln 1000``: by Lorden's bound the in-control average run length is at least 1000 days."""
PSI_EPSILON = 1e-4
DEFAULT_PSI_EDGES: tuple[float, ...] = tuple(i / 10 for i in range(11))
"""Ten equal-width bins on [0, 1], the calibration bins."""


def _counts(name: str, values: ArrayLike) -> NDArray[np.float64]:
    array = np.asarray(values, dtype=float)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional")
    if not np.all(np.isfinite(array)) or np.any(array < 0) or np.any(array != np.round(array)):
        raise ValueError(f"{name} must hold non-negative whole counts")
    return array


def _daily(refused: ArrayLike, n: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    x = _counts("refused", refused)
    m = _counts("n", n)
    if x.shape != m.shape:
        raise ValueError("refused and n must give one count per day each")
    if np.any(x > m):
        raise ValueError("refused must not exceed n on any day")
    return x, m


def _check_rate(name: str, p: float, *, open_interval: bool = False) -> None:
    inside = 0.0 < p < 1.0 if open_interval else 0.0 <= p <= 1.0
    if not (isinstance(p, int | float) and inside):
        bounds = "(0, 1)" if open_interval else "[0, 1]"
        raise ValueError(f"{name} must lie in {bounds}, got {p!r}")


# --------------------------------------------------------------------------- p-chart


@dataclass(frozen=True)
class ControlChart:
    """Per day: the observed rate, the control limits and whether the rate falls outside them."""

    baseline: float
    sigmas: float
    rate: NDArray[np.float64]
    lower: NDArray[np.float64]
    upper: NDArray[np.float64]
    outside: NDArray[np.bool_]

    def as_dict(self) -> dict[str, object]:
        def numbers(values: NDArray[np.float64]) -> list[float | None]:
            return [float(v) if math.isfinite(v) else None for v in values]

        return {
            "baseline": self.baseline,
            "sigmas": self.sigmas,
            "rate": numbers(self.rate),
            "lower": numbers(self.lower),
            "upper": numbers(self.upper),
            "outside": [bool(v) for v in self.outside],
        }


def binomial_control_limits(
    baseline: float, n: ArrayLike, *, sigmas: float = DEFAULT_SIGMAS
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Shewhart p-chart limits for a daily rate with a known baseline and varying daily ``n``.

    ``lower_t = max(0, p0 - k sqrt(p0 (1 - p0) / n_t))``,
    ``upper_t = min(1, p0 + k sqrt(p0 (1 - p0) / n_t))`` with ``k = sigmas`` (3 by default):
    the mean plus or minus ``k`` standard deviations of ``Bin(n_t, p0) / n_t`` (Shewhart 1931;
    Montgomery, "Introduction to Statistical Quality Control", the p chart with variable sample
    size). ``p0`` is the baseline from the signing window (its refused over its decisions).
    A day with ``n_t = 0`` has NaN limits.
    """
    _check_rate("baseline", baseline)
    if not (math.isfinite(sigmas) and sigmas > 0):
        raise ValueError(f"sigmas must be positive, got {sigmas!r}")
    sizes = _counts("n", n)
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = np.where(sizes > 0, sigmas * np.sqrt(baseline * (1.0 - baseline) / sizes), np.nan)
    return np.clip(baseline - spread, 0.0, 1.0), np.clip(baseline + spread, 0.0, 1.0)


def control_chart(refused: ArrayLike, n: ArrayLike, *, baseline: float, sigmas: float = DEFAULT_SIGMAS) -> ControlChart:
    """The day's abstention rate ``x_t / n_t`` against :func:`binomial_control_limits`.

    A day is flagged when its rate lies strictly outside ``[lower_t, upper_t]``; a rate on a
    limit is inside. With ``p0 = 0`` (or 1) the limits collapse to ``p0`` and any day away
    from it is flagged, which is the honest reading of a baseline that never refused. Days with
    no traffic have a NaN rate and are never flagged.
    """
    x, m = _daily(refused, n)
    lower, upper = binomial_control_limits(baseline, m, sigmas=sigmas)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(m > 0, x / np.where(m > 0, m, 1.0), np.nan)
    outside = (m > 0) & ((rate < lower) | (rate > upper))
    return ControlChart(baseline, sigmas, rate, lower, upper, outside)


# --------------------------------------------------------------------------- CUSUM


@dataclass(frozen=True)
class Cusum:
    """A one-sided binomial CUSUM path: statistic ``S_t`` per day and the days with ``S_t > h``."""

    p0: float
    p1: float
    h: float
    statistic: NDArray[np.float64]
    signal: NDArray[np.bool_]

    @property
    def first_signal(self) -> int | None:
        """Index of the first day with ``S_t > h``, or None."""
        days = np.flatnonzero(self.signal)
        return int(days[0]) if days.size else None


def bernoulli_cusum(
    refused: ArrayLike,
    n: ArrayLike,
    *,
    p0: float,
    p1: float,
    h: float = DEFAULT_CUSUM_INTERVAL,
) -> Cusum:
    """One-sided log-likelihood-ratio CUSUM for a shift of the refusal rate from ``p0`` to ``p1``.

    Each decision is a Bernoulli trial (refused or not). Day ``t`` brings ``x_t`` refusals of
    ``n_t`` decisions, whose log-likelihood ratio of ``p1`` against ``p0`` is::

        W_t = x_t ln(p1 / p0) + (n_t - x_t) ln((1 - p1) / (1 - p0))
        S_0 = 0,   S_t = max(0, S_{t-1} + W_t),   signal on day t when S_t > h

    This is Page's (1954, Biometrika 41:100) CUSUM with the binomial likelihood ratio of each
    day's count as increment (the binomial CUSUM; Gan 1993, J. Applied Statistics 20:445):
    ``W_t = ln Bin(x_t; n_t, p1) - ln Bin(x_t; n_t, p0)``, the binomial coefficients cancel.
    ``W_t`` is also the sum of the day's per-decision Bernoulli increments of Reynolds &
    Stoumbos (1999, J. Quality Technology 31:87); here the clamp at 0 is applied once a day,
    at the day's end, because the day is the unit the monitor reads. ``p1 > p0`` watches for a rise,
    ``p1 < p0`` for a fall. The statistic is not reset after a signal: it shows how long the
    evidence of a shift persists, and it returns below ``h`` only after enough in-control days.

    Choosing ``h``: Lorden (1971, Ann. Math. Statist. 42:1897) bounds the in-control average
    run length of this CUSUM below by ``e^h``; the default ``h = ln 1000 ~ 6.91`` means at
    least 1000 in-control days, on average, before a false signal, whatever the daily volume
    (the likelihood ratio is a mean-one martingale under ``p0`` for unequal ``n_t`` too).
    """
    _check_rate("p0", p0, open_interval=True)
    _check_rate("p1", p1, open_interval=True)
    if p1 == p0:
        raise ValueError("p1 must differ from p0: the CUSUM watches for a shift between them")
    if not (math.isfinite(h) and h > 0):
        raise ValueError(f"h must be positive, got {h!r}")
    x, m = _daily(refused, n)
    increments = x * math.log(p1 / p0) + (m - x) * math.log((1.0 - p1) / (1.0 - p0))
    statistic = np.empty_like(increments)
    level = 0.0
    # A running max(0, .) has no closed vectorised form worth its obscurity; days are few.
    for day, increment in enumerate(increments.tolist()):
        level = max(0.0, level + increment)
        statistic[day] = level
    return Cusum(p0, p1, h, statistic, statistic > h)


@dataclass(frozen=True)
class TwoSidedCusum:
    up: Cusum
    down: Cusum

    @property
    def signal(self) -> NDArray[np.bool_]:
        return self.up.signal | self.down.signal


def two_sided_bernoulli_cusum(
    refused: ArrayLike,
    n: ArrayLike,
    *,
    p0: float,
    p1_up: float,
    p1_down: float,
    h: float = DEFAULT_CUSUM_INTERVAL,
) -> TwoSidedCusum:
    """Two one-sided :func:`bernoulli_cusum` paths run side by side, one for a rise to
    ``p1_up > p0`` and one for a fall to ``p1_down < p0``; a day signals when either does.
    Each side keeps Lorden's bound, so the pair's in-control run length is at least
    ``e^h / 2``."""
    if not p1_down < p0 < p1_up:
        raise ValueError("need p1_down < p0 < p1_up")
    return TwoSidedCusum(
        up=bernoulli_cusum(refused, n, p0=p0, p1=p1_up, h=h),
        down=bernoulli_cusum(refused, n, p0=p0, p1=p1_down, h=h),
    )


# --------------------------------------------------------------------------- distributions


def psi_from_counts(expected_counts: ArrayLike, actual_counts: ArrayLike, *, epsilon: float = PSI_EPSILON) -> float:
    """Population Stability Index between two histograms on the same bins.

    With bin shares ``e_i = E_i / sum E`` (reference, the signing window) and
    ``a_i = A_i / sum A`` (now)::

        PSI = sum_i (a_i - e_i) ln(a_i / e_i)

    which is the symmetrised Kullback–Leibler divergence ``KL(a || e) + KL(e || a)`` (Lin,
    "Divergence measures based on the Shannon entropy", 1991; Yurdakul 2018, "Statistical
    properties of the population stability index"; Siddiqi 2006 for the usual reading:
    below 0.1 stable, 0.1-0.25 some shift, above 0.25 a major shift). An empty bin would make
    the logarithm infinite, so every share below ``epsilon`` (default 1e-4) is raised to
    ``epsilon`` before the sum, without renormalising; a bin empty on both sides then
    contributes exactly 0. Both histograms need at least one item.
    """
    expected = _counts("expected_counts", expected_counts)
    actual = _counts("actual_counts", actual_counts)
    if expected.shape != actual.shape or expected.size == 0:
        raise ValueError("both histograms need the same, non-empty list of bins")
    if expected.sum() == 0 or actual.sum() == 0:
        raise ValueError("both histograms need at least one item")
    if not 0.0 < epsilon < 1.0:
        raise ValueError(f"epsilon must lie in (0, 1), got {epsilon!r}")
    e = np.maximum(expected / expected.sum(), epsilon)
    a = np.maximum(actual / actual.sum(), epsilon)
    return float(np.sum((a - e) * np.log(a / e)))


def histogram(scores: ArrayLike, edges: ArrayLike) -> NDArray[np.int64]:
    """Counts of ``scores`` in bins ``[e_0, e_1), ..., [e_{k-1}, e_k]`` (left-closed, the last
    also closed), the convention of the calibration bins. Scores outside ``[e_0, e_k]`` or not
    finite are rejected rather than dropped."""
    values = np.asarray(scores, dtype=float)
    bins = np.asarray(edges, dtype=float)
    if bins.ndim != 1 or bins.size < 2 or np.any(np.diff(bins) <= 0) or not np.all(np.isfinite(bins)):
        raise ValueError("edges must be at least two finite, strictly increasing numbers")
    if values.ndim != 1 or not np.all(np.isfinite(values)):
        raise ValueError("scores must be a one-dimensional array of finite numbers")
    if values.size and (values.min() < bins[0] or values.max() > bins[-1]):
        raise ValueError(f"scores must lie within [{bins[0]:g}, {bins[-1]:g}]")
    index = np.minimum(np.searchsorted(bins, values, side="right") - 1, bins.size - 2)
    return np.bincount(index, minlength=bins.size - 1).astype(np.int64)


def population_stability_index(
    expected_scores: ArrayLike,
    actual_scores: ArrayLike,
    *,
    edges: ArrayLike = DEFAULT_PSI_EDGES,
    epsilon: float = PSI_EPSILON,
) -> float:
    """:func:`psi_from_counts` of the two samples' :func:`histogram` over fixed ``edges``
    (default ten equal-width bins on [0, 1]). The bins are fixed in advance, not quantiles of
    either sample, so the figure for one day is comparable with the next."""
    return psi_from_counts(histogram(expected_scores, edges), histogram(actual_scores, edges), epsilon=epsilon)


@dataclass(frozen=True)
class KSResult:
    statistic: float
    p_value: float
    method: str


def ks_two_sample(sample_a: ArrayLike, sample_b: ArrayLike) -> KSResult:
    """Two-sample Kolmogorov–Smirnov test, two-sided: ``D = sup_x |F_a(x) - F_b(x)|`` with its
    p-value, exactly as ``scipy.stats.ks_2samp(sample_a, sample_b)`` gives them (exact
    distribution for samples up to 10,000, Smirnov's asymptotic one beyond)."""
    from scipy import stats

    a = np.asarray(sample_a, dtype=float)
    b = np.asarray(sample_b, dtype=float)
    if a.ndim != 1 or b.ndim != 1 or a.size == 0 or b.size == 0:
        raise ValueError("both samples must be non-empty one-dimensional arrays")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError("both samples must be finite")
    result = stats.ks_2samp(a, b)
    return KSResult(float(result.statistic), float(result.pvalue), "scipy.stats.ks_2samp")


def ks_two_sample_from_counts(counts_a: ArrayLike, counts_b: ArrayLike) -> KSResult:
    """Two-sample KS test from two histograms of counts on one shared grid of bins.

    The console keeps score counts per 0.001 bin, so the scores are known only to their bin.
    With cumulative shares ``F_a(j) = sum_{i <= j} A_i / sum A`` (and ``F_b`` likewise)::

        D = max_j |F_a(j) - F_b(j)|

    which is exactly the statistic ``scipy.stats.ks_2samp`` gives on the expanded data (every
    item placed at its bin's value): the empirical distribution functions only change at bin
    values, where they equal these cumulative shares. The p-value is Smirnov's asymptotic one,
    as scipy computes it with ``method="asymp"``: ``P = kstwo.sf(D, round(m n / (m + n)))`` for
    sample sizes ``m`` and ``n`` (the one-sample Kolmogorov distribution at the effective size;
    Hodges 1958). The data are binned, so many items tie; with ties the KS p-value is
    conservative (too large), so a flag from it is not a false alarm of the binning.
    """
    from scipy import stats

    a = _counts("counts_a", counts_a)
    b = _counts("counts_b", counts_b)
    if a.shape != b.shape or a.size == 0:
        raise ValueError("both histograms need the same, non-empty grid of bins")
    m, n = float(a.sum()), float(b.sum())
    if m == 0 or n == 0:
        raise ValueError("both histograms need at least one item")
    statistic = float(np.max(np.abs(np.cumsum(a) / m - np.cumsum(b) / n)))
    effective_n = round(m * n / (m + n))
    p_value = float(np.clip(stats.kstwo.sf(statistic, effective_n), 0.0, 1.0))
    return KSResult(statistic, p_value, "asymptotic, kstwo at n = mn/(m+n)")


def total_variation_distance(counts_a: Mapping[str, float], counts_b: Mapping[str, float]) -> float:
    """Total variation distance between two categorical distributions given as counts.

    ``TV = (1/2) sum_k |a_k / sum a - b_k / sum b|`` over the union of categories (a category
    missing from one side counts 0 there); equivalently the largest difference in the share of
    any set of categories (Levin, Peres & Wilmer, "Markov Chains and Mixing Times", prop. 4.2).
    0 for the same mix, 1 for disjoint ones. Used for the segment mix of traffic against the
    signing window and of the graded sample against current traffic.
    """
    categories = sorted(set(counts_a) | set(counts_b))
    a = _counts("counts_a", [counts_a.get(k, 0) for k in categories])
    b = _counts("counts_b", [counts_b.get(k, 0) for k in categories])
    if a.sum() == 0 or b.sum() == 0:
        raise ValueError("both distributions need at least one item")
    return float(0.5 * np.sum(np.abs(a / a.sum() - b / b.sum())))


@dataclass(frozen=True)
class ChiSquareResult:
    statistic: float
    degrees_of_freedom: int
    p_value: float


def mix_homogeneity_test(counts_a: Mapping[str, float], counts_b: Mapping[str, float]) -> ChiSquareResult:
    """Pearson's chi-square test that two samples of categories come from one mix.

    Over the categories seen on either side (``k`` of them), with ``O`` the 2 x k table of
    counts and ``E_ij = row_i col_j / total`` its expected counts under one shared mix::

        X^2 = sum (O_ij - E_ij)^2 / E_ij,   df = k - 1,   p = P(chi^2_df >= X^2)

    (Pearson 1900; no continuity correction): ``scipy.stats.chi2_contingency(table,
    correction=False)``. It says whether a day's segment mix differs from the signing window's
    by more than a day of that size would by chance: with few decisions a day, a total
    variation of 0.15 is often only noise. One category only gives ``X^2 = 0``, ``p = 1``.
    """
    from scipy import stats

    categories = sorted(set(counts_a) | set(counts_b))
    a = _counts("counts_a", [counts_a.get(k, 0) for k in categories])
    b = _counts("counts_b", [counts_b.get(k, 0) for k in categories])
    if a.sum() == 0 or b.sum() == 0:
        raise ValueError("both distributions need at least one item")
    seen = (a + b) > 0
    table = np.vstack([a[seen], b[seen]])
    if table.shape[1] < 2:
        return ChiSquareResult(0.0, 0, 1.0)
    expected = table.sum(axis=1, keepdims=True) * table.sum(axis=0, keepdims=True) / table.sum()
    statistic = float(np.sum((table - expected) ** 2 / expected))
    df = table.shape[1] - 1
    return ChiSquareResult(statistic, df, float(stats.chi2.sf(statistic, df)))
