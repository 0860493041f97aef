"""Confidence intervals for proportions, plain and survey-weighted.

Every table in the console reports a share with an interval. This module is the one place that
turns counts (or weighted indicators) into an :class:`Interval`; the operating-point table, the
middle-band table and the certified cutoff all call it.

Conventions (docs/statistics.md, "Conventions"):

* Wilson is the display default; Clopper–Pearson is used for anything called certified. The
  method and confidence level are parameters, and callers name them in their output.
* ``value`` is always the point estimate (``successes / n``, or the Hájek ratio for weighted
  data), never the centre of the interval: the Agresti–Coull and Wilson intervals are centred
  elsewhere.
* With no observations (``n == 0``) nothing is known: the result is
  ``Interval(nan, nan, nan)``, which :meth:`Interval.as_dict` serialises as three ``null``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

# scipy is imported inside the functions that use it, so a process that never computes an interval
# (beat, the pool and verification workers) does not carry it in memory (bench/memory.py).

IntervalMethod = Literal["wilson", "clopper_pearson", "jeffreys", "agresti_coull"]
INTERVAL_METHODS: tuple[str, ...] = ("wilson", "clopper_pearson", "jeffreys", "agresti_coull")


def _json_number(x: float) -> float | None:
    """JSON has no NaN or infinity; both become ``null`` (see :meth:`Interval.as_dict`)."""
    return float(x) if math.isfinite(x) else None


@dataclass(frozen=True)
class Interval:
    """A point estimate with a two-sided interval ``[low, high]``.

    ``nan`` in every field means "no data"; ``high == inf`` means "unbounded above" (for
    example an exchange rate over a band with no wrong answer).
    """

    value: float
    low: float
    high: float

    @classmethod
    def undefined(cls) -> Interval:
        return cls(math.nan, math.nan, math.nan)

    @classmethod
    def exact(cls, value: float) -> Interval:
        """A quantity known without sampling error (for example 0 withheld when none refused)."""
        return cls(value, value, value)

    @property
    def is_defined(self) -> bool:
        return not math.isnan(self.value)

    @property
    def half_width(self) -> float:
        """``(high - low) / 2``: the "±" figure of an interval that need not be symmetric about
        ``value`` (Wilson, Jeffreys, weighted). NaN when undefined, inf when unbounded."""
        return (self.high - self.low) / 2.0

    def scaled(self, factor: float) -> Interval:
        """Multiply every field by a known, non-negative constant (e.g. ``1000 * R / N``)."""
        if factor < 0 or not math.isfinite(factor):
            raise ValueError(f"scale factor must be finite and non-negative, got {factor!r}")
        return Interval(self.value * factor, self.low * factor, self.high * factor)

    def complement(self) -> Interval:
        """The interval for ``1 - p``; exact for every method here (each is symmetric under
        swapping successes and failures)."""
        return Interval(1.0 - self.value, 1.0 - self.high, 1.0 - self.low)

    def as_dict(self) -> dict[str, float | None]:
        """``{"value", "low", "high"}``, the shape of every interval in the API; NaN and infinities become
        ``None`` because JSON cannot carry them."""
        return {
            "value": _json_number(self.value),
            "low": _json_number(self.low),
            "high": _json_number(self.high),
        }


def _alpha(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence!r}")
    return 1.0 - confidence


def proportion_interval(
    successes: float,
    n: float,
    *,
    confidence: float = 0.95,
    method: IntervalMethod = "wilson",
) -> Interval:
    """Two-sided interval for a binomial proportion ``p = successes / n``.

    With ``z = Phi^-1(1 - alpha/2)`` and ``alpha = 1 - confidence``:

    * ``"wilson"`` (Wilson 1927, JASA 22:209):
      ``(p + z^2/2n  ±  z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)``.
    * ``"clopper_pearson"`` (Clopper & Pearson 1934, Biometrika 26:404), exact/central:
      ``low = Beta^-1(alpha/2; x, n-x+1)`` (0 when x = 0),
      ``high = Beta^-1(1-alpha/2; x+1, n-x)`` (1 when x = n).
    * ``"jeffreys"`` (Brown, Cai & DasGupta 2001, Stat. Sci. 16:101): equal-tailed quantiles of
      ``Beta(x + 1/2, n - x + 1/2)``, with their boundary modification ``low = 0`` at x = 0
      and ``high = 1`` at x = n so the interval always contains the estimate (statsmodels
      omits this modification; the two agree for 0 < x < n).
    * ``"agresti_coull"`` (Agresti & Coull 1998, Am. Stat. 52:119): Wald interval around
      ``p~ = (x + z^2/2)/(n + z^2)`` with ``n~ = n + z^2``, clipped to [0, 1].

    ``successes`` and ``n`` may be fractional: the weighted interval passes an effective
    count (Korn & Graubard 1998). ``n == 0`` returns ``Interval(nan, nan, nan)``.
    """
    from scipy import stats

    alpha = _alpha(confidence)
    if not (math.isfinite(n) and n >= 0):
        raise ValueError(f"n must be finite and non-negative, got {n!r}")
    if not (math.isfinite(successes) and 0 <= successes <= n):
        raise ValueError(f"successes must lie in [0, n], got {successes!r} of {n!r}")
    if n == 0:
        return Interval.undefined()
    x = float(successes)
    n = float(n)
    p = x / n
    if method == "wilson":
        z = stats.norm.isf(alpha / 2)
        z2 = z * z
        denominator = 1.0 + z2 / n
        centre = (p + z2 / (2.0 * n)) / denominator
        half = z * math.sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / denominator
        # The bounds are exactly 0 at x = 0 and 1 at x = n; rounding would put them an ulp off.
        low = 0.0 if x == 0 else centre - half
        high = 1.0 if x == n else centre + half
    elif method == "clopper_pearson":
        low = 0.0 if x == 0 else stats.beta.ppf(alpha / 2, x, n - x + 1.0)
        high = 1.0 if x == n else stats.beta.isf(alpha / 2, x + 1.0, n - x)
    elif method == "jeffreys":
        low = 0.0 if x == 0 else stats.beta.ppf(alpha / 2, x + 0.5, n - x + 0.5)
        high = 1.0 if x == n else stats.beta.isf(alpha / 2, x + 0.5, n - x + 0.5)
    elif method == "agresti_coull":
        z = stats.norm.isf(alpha / 2)
        n_tilde = n + z * z
        p_tilde = (x + z * z / 2.0) / n_tilde
        half = z * math.sqrt(p_tilde * (1.0 - p_tilde) / n_tilde)
        low, high = p_tilde - half, p_tilde + half
    else:
        raise ValueError(f"unknown interval method {method!r}; use one of {INTERVAL_METHODS}")
    return Interval(p, min(max(float(low), 0.0), 1.0), min(max(float(high), 0.0), 1.0))


def one_sided_upper_clopper_pearson(k: int, n: int, confidence: float = 0.95) -> float:
    """Exact one-sided upper confidence bound for a binomial proportion.

    ``U = Beta^-1(confidence; k + 1, n - k)`` (Clopper & Pearson 1934), with ``U = 1`` when
    ``k == n`` and when ``n == 0`` (no data bounds nothing). By the beta–binomial identity,
    ``U <= a`` exactly when ``P(Bin(n, a) <= k) <= 1 - confidence``, which is the test the
    certified cutoff uses (docs/statistics.md, "Certified cutoff").
    """
    from scipy import stats

    alpha = _alpha(confidence)
    if n < 0 or not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k!r}, n={n!r}")
    if n == 0 or k == n:
        return 1.0
    return float(stats.beta.isf(alpha, k + 1, n - k))


def _as_1d(name: str, values: ArrayLike) -> NDArray:
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {array.shape}")
    return array


@dataclass(frozen=True)
class _WeightedSample:
    outcome: NDArray[np.float64]
    weight: NDArray[np.float64]
    in_domain: NDArray[np.bool_]
    stratum: NDArray[np.intp]
    n_strata: int


def _weighted_sample(
    indicator: ArrayLike,
    weights: ArrayLike,
    strata: ArrayLike | None,
    domain: ArrayLike | None,
) -> _WeightedSample:
    y = _as_1d("indicator", indicator).astype(float)
    w = _as_1d("weights", weights).astype(float)
    n = y.shape[0]
    if w.shape[0] != n:
        raise ValueError("indicator and weights must have the same length")
    if not np.all((y == 0.0) | (y == 1.0)):
        raise ValueError("indicator must contain only 0/1 (or booleans)")
    if not (np.all(np.isfinite(w)) and np.all(w > 0)):
        raise ValueError("weights must be finite and positive (inverse inclusion probabilities)")
    d = np.ones(n, dtype=bool) if domain is None else _as_1d("domain", domain).astype(bool)
    if d.shape[0] != n:
        raise ValueError("domain must have the same length as indicator")
    if strata is None:
        return _WeightedSample(y, w, d, np.zeros(n, dtype=np.intp), 1)
    strata_array = _as_1d("strata", strata)
    if strata_array.shape[0] != n:
        raise ValueError("strata must have the same length as indicator")
    if n == 0:
        return _WeightedSample(y, w, d, np.zeros(0, dtype=np.intp), 0)
    if np.issubdtype(strata_array.dtype, np.integer) and strata_array.min() >= 0 and strata_array.max() < n:
        # Small non-negative integer codes index the strata directly (empty codes are skipped
        # when counting), which avoids a sort per call when a table re-uses the same codes.
        labels = strata_array.astype(np.intp)
        n_strata = int(np.count_nonzero(np.bincount(labels)))
        return _WeightedSample(y, w, d, labels, n_strata)
    _, labels = np.unique(strata_array, return_inverse=True)
    return _WeightedSample(y, w, d, labels.astype(np.intp), int(labels.max()) + 1)


@dataclass(frozen=True)
class HajekEstimate:
    """A weighted share and the design-based numbers behind its interval."""

    value: float
    variance: float
    n: int
    """Sample units in the domain (graded items that count towards this share)."""
    effective_n: float
    """Korn–Graubard effective sample size (see :func:`hajek_estimate`)."""
    strata: int


def hajek_estimate(
    indicator: ArrayLike,
    weights: ArrayLike,
    *,
    strata: ArrayLike | None = None,
    domain: ArrayLike | None = None,
    confidence: float = 0.95,
) -> HajekEstimate:
    """Hájek ratio estimate of a share, its linearisation variance and effective sample size.

    Estimate (Hájek 1971): ``p = sum(w d y) / sum(w d)`` over sample units ``i`` with inverse
    inclusion probability ``w_i``, 0/1 outcome ``y_i`` and domain membership ``d_i`` (for
    example "refused at this cutoff"; the whole sample when ``domain`` is None).

    Variance: Taylor linearisation of the ratio, with linearised values
    ``z_i = w_i d_i (y_i - p) / sum(w d)`` (units outside the domain contribute ``z_i = 0``,
    which is the standard domain estimator and accounts for the random size of the domain
    inside each stratum), and the stratified with-replacement variance
    ``v = sum_h n_h/(n_h - 1) sum_{i in h} (z_i - zbar_h)^2`` (Cochran 1977, ch. 5 and 6;
    the estimator survey software uses for a stratified design without finite population
    correction). A stratum with a single unit has no within-stratum spread; it contributes
    ``z_i^2`` (its deviation from the overall mean, which is 0): the "adjust" convention for
    lonely units.

    Effective sample size (Korn & Graubard 1998, Survey Methodology 24:193; Kish 1965 design
    effect): ``n_eff = n_d / deff`` with ``deff = v / v_srs``, where
    ``v_srs = n/(n-1) * p(1-p)/n_d`` is what the same estimator gives for an equal-weight,
    unstratified sample with the same domain count ``n_d``. For a whole-sample share this is
    ``n_eff = (n/(n-1)) p(1-p)/v``, i.e. Korn–Graubard's ``p(1-p)/v`` with the ``n/(n-1)``
    factor that makes equal weights give ``n_eff = n`` exactly. Then Korn & Graubard's
    degrees-of-freedom adjustment multiplies ``n_eff`` by ``(t_{n-1} / t_{n-H})^2`` (quantiles
    at ``1 - alpha/2``, ``H`` strata), which is 1 without strata.

    Decisions where the sources leave a choice:

    * ``deff`` is floored at 1 (``n_eff <= n_d``): the interval never claims more information
      than the number of graded items. This also covers ``p`` in {0, 1} and a zero variance
      estimate, where ``p(1-p)/v`` is undefined.
    * No finite population correction: the intervals describe future traffic like this window,
      not the finite window itself.
    """
    sample = _weighted_sample(indicator, weights, strata, domain)
    return _hajek(sample, _alpha(confidence))


def _hajek(sample: _WeightedSample, alpha: float) -> HajekEstimate:
    from scipy import stats

    y, d, labels, n_strata = sample.outcome, sample.in_domain, sample.stratum, sample.n_strata
    n = y.shape[0]
    n_domain = int(d.sum())
    if n_domain == 0:
        return HajekEstimate(math.nan, math.nan, 0, 0.0, n_strata)
    wd = np.where(d, sample.weight, 0.0)
    total_weight = wd.sum()
    p = float((wd * y).sum() / total_weight)

    z = wd * (y - p) / total_weight
    per_stratum_n = np.bincount(labels).astype(float)
    per_stratum_sum = np.bincount(labels, weights=z)
    per_stratum_mean = per_stratum_sum / np.maximum(per_stratum_n, 1.0)
    squares = np.bincount(labels, weights=(z - per_stratum_mean[labels]) ** 2)
    several = per_stratum_n > 1
    variance = float(
        np.sum(squares[several] * per_stratum_n[several] / (per_stratum_n[several] - 1.0))
        + np.sum(per_stratum_sum[per_stratum_n == 1] ** 2)
    )

    effective_n = float(n_domain)
    if n > 1 and 0.0 < p < 1.0 and variance > 0.0:
        srs_variance = (n / (n - 1.0)) * p * (1.0 - p) / n_domain
        effective_n = n_domain / max(variance / srs_variance, 1.0)
    if n_strata > 1 and n > 1:
        degrees_of_freedom = max(n - n_strata, 1)
        ratio = stats.t.isf(alpha / 2, n - 1) / stats.t.isf(alpha / 2, degrees_of_freedom)
        effective_n *= float(ratio) ** 2
    return HajekEstimate(p, variance, n_domain, effective_n, n_strata)


def weighted_proportion_interval(
    indicator: ArrayLike,
    weights: ArrayLike,
    *,
    strata: ArrayLike | None = None,
    domain: ArrayLike | None = None,
    confidence: float = 0.95,
    method: IntervalMethod = "wilson",
) -> Interval:
    """Hájek-weighted share with a Korn–Graubard effective-n interval.

    ``value = sum(w d y) / sum(w d)``; the interval is :func:`proportion_interval` of the chosen
    method at ``(value * n_eff, n_eff)``, with ``n_eff`` from :func:`hajek_estimate` (Korn &
    Graubard 1998). Without strata and with equal weights over the domain the design effect is
    1 and the result is *exactly* ``proportion_interval(sum(y[d]), n_d)`` (that case is routed
    there directly so it is bit-identical, not merely close). An empty domain gives
    ``Interval(nan, nan, nan)``.
    """
    sample = _weighted_sample(indicator, weights, strata, domain)
    domain_weights = sample.weight[sample.in_domain]
    if strata is None and domain_weights.size and np.all(domain_weights == domain_weights[0]):
        outcomes = sample.outcome[sample.in_domain]
        return proportion_interval(float(outcomes.sum()), float(outcomes.size), confidence=confidence, method=method)
    estimate = _hajek(sample, _alpha(confidence))
    if estimate.n == 0:
        return Interval.undefined()
    n_eff = estimate.effective_n
    successes = min(max(estimate.value * n_eff, 0.0), n_eff)
    interval = proportion_interval(successes, n_eff, confidence=confidence, method=method)
    return Interval(estimate.value, interval.low, interval.high)


def newcombe_difference_interval(
    successes_a: float,
    n_a: float,
    successes_b: float,
    n_b: float,
    *,
    confidence: float = 0.95,
) -> Interval:
    """Newcombe's hybrid score interval for ``p_a - p_b`` of two independent proportions.

    Newcombe (1998), "Interval estimation for the difference between independent proportions:
    comparison of eleven methods", Statistics in Medicine 17:873, method 10: the
    :func:`difference_of_intervals` of the two Wilson score intervals at ``confidence``. It keeps
    the Wilson intervals' good coverage near 0 and 1, where the Wald difference interval
    collapses, and it stays inside [-1, 1]. Reference: statsmodels
    ``confint_proportions_2indep(..., compare="diff", method="newcomb")``. ``value`` is ``d``;
    when either group has no observation the difference is unknown: ``Interval(nan, nan, nan)``.
    """
    return difference_of_intervals(
        proportion_interval(successes_a, n_a, confidence=confidence, method="wilson"),
        proportion_interval(successes_b, n_b, confidence=confidence, method="wilson"),
    )


def difference_of_intervals(a: Interval, b: Interval) -> Interval:
    """Interval for ``p_a - p_b`` from an interval for each of two independent shares.

    With ``d = p_a - p_b`` (Zou & Donner 2008, "Construction of confidence limits about effect
    measures: a general approach", Statistics in Medicine 27:1693, the MOVER; Newcombe's method
    10 is this with Wilson intervals)::

        low  = d - sqrt((p_a - l_a)^2 + (u_b - p_b)^2)
        high = d + sqrt((u_a - p_a)^2 + (p_b - l_b)^2)

    The two intervals may come from different estimators, for example a Hájek-weighted share
    with its Korn–Graubard effective-n Wilson interval against a plain Wilson interval, which
    is how a stratified graded sample is compared with another one. Undefined when either is.
    """
    if not (a.is_defined and b.is_defined):
        return Interval.undefined()
    difference = a.value - b.value
    low = difference - math.hypot(a.value - a.low, b.high - b.value)
    high = difference + math.hypot(a.high - a.value, b.value - b.low)
    return Interval(difference, max(low, -1.0), min(high, 1.0))
