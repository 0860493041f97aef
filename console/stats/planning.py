"""Sample-size planner: how many grades a decision needs (docs/statistics.md, "Sample-size planner").

A false-abstention rate of 34% measured on 400 graded refusals carries a 95% interval of about
±4.6 points: enough to tell a cutoff of 0.85 from 0.9, not 0.85 from 0.87. Sizing the sample
against the decision at hand avoids grading hundreds of answers to resolve a difference the
sample cannot see. The planners below size the sample for the two decisions the table supports: reading one row to a
given precision, and telling two cutoffs apart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from console.stats.intervals import IntervalMethod, proportion_interval

# scipy is imported inside the functions that use it, so a process that never computes an interval
# (beat, the pool and verification workers) does not carry it in memory (bench/memory.py).

# Products like 3.8415 * 0.2244 / 0.0021 land a hair above an integer in floating point;
# rounding up from there would ask for one grade nobody needs.
_CEIL_TOLERANCE = 1e-9


def _ceil(value: float) -> int:
    return int(math.ceil(value - _CEIL_TOLERANCE))


def _z_two_sided(confidence: float) -> float:
    from scipy import stats

    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence!r}")
    return float(stats.norm.isf((1.0 - confidence) / 2.0))


def _check_share(name: str, p: float) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {p!r}")


def _check_design_effect(design_effect: float) -> None:
    if not (math.isfinite(design_effect) and design_effect > 0):
        raise ValueError(f"design_effect must be positive, got {design_effect!r}")


def grades_for_half_width(p: float, half_width: float, confidence: float = 0.95, design_effect: float = 1.0) -> int:
    """Graded items needed so a share near ``p`` has a two-sided interval of ``± half_width``.

    ``n = ceil(z^2 p (1 - p) / h^2 * deff)`` with ``z = Phi^-1(1 - (1 - confidence)/2)``: the
    normal-approximation (Wald) half-width solved for ``n`` (Cochran 1977, eq. 4.2), inflated
    by the design effect (Kish 1965) when the sample is weighted. Use ``p = 0.5`` when nothing
    is known: it is the worst case. For the rows' false-abstention rate, ``n`` counts graded
    *refused* items. Check: ``p = 0.34, h = 0.046`` gives 408, in line with the 400 refusals above.
    """
    _check_share("p", p)
    _check_design_effect(design_effect)
    if not 0.0 < half_width < 1.0:
        raise ValueError(f"half_width must lie in (0, 1), got {half_width!r}")
    z = _z_two_sided(confidence)
    return max(_ceil(z * z * p * (1.0 - p) / (half_width * half_width) * design_effect), 1)


def half_width_for_grades(p: float, n: float, confidence: float = 0.95, design_effect: float = 1.0) -> float:
    """The inverse of :func:`grades_for_half_width`: ``h = z sqrt(p (1 - p) deff / n)``.

    Check: ``p = 0.34, n = 400`` gives 0.0464, the "about ±4.6 points" above. This is a
    planning figure; the half-width beside a row is :func:`half_width_of_interval`.
    """
    _check_share("p", p)
    _check_design_effect(design_effect)
    if not n > 0:
        raise ValueError(f"n must be positive, got {n!r}")
    z = _z_two_sided(confidence)
    return z * math.sqrt(p * (1.0 - p) * design_effect / n)


def half_width_of_interval(k: float, n: float, *, method: IntervalMethod = "wilson", confidence: float = 0.95) -> float:
    """Half the width of the interval the table shows for ``k`` of ``n``: ``(high - low) / 2``
    of :func:`console.stats.intervals.proportion_interval` with the same ``method`` and
    ``confidence``.

    This, not :func:`half_width_for_grades`, is the "half-width now" beside a row: the Wald
    figure ``z sqrt(p (1 - p) / n)`` is 0 at ``p = 0`` or ``1`` whatever ``n`` is, so 2 of 2
    correct would read "±0.0, target met" while the table shows the Wilson interval
    [0.342, 1] (half-width 0.329). Wilson and the other intervals here are not symmetric about
    ``k / n``, so half the width is the honest single figure. ``k`` may be fractional (an
    effective count). Raises ``ValueError`` for ``n <= 0``: no grades, no interval. For a row
    of a weighted table, read :attr:`Interval.half_width` of the row's own interval, which
    carries the Korn–Graubard effective n.
    """
    if not n > 0:
        raise ValueError(f"n must be positive, got {n!r}")
    return proportion_interval(k, n, confidence=confidence, method=method).half_width


def grades_for_interval_half_width(
    p: float,
    half_width: float,
    *,
    method: IntervalMethod = "wilson",
    confidence: float = 0.95,
    max_n: int = 100_000_000,
) -> int:
    """Smallest ``n`` whose displayed interval at share ``p`` is no wider than ``± half_width``:
    the least ``n`` with ``half_width_of_interval(p n, n) <= half_width``.

    The counterpart of :func:`grades_for_half_width` for the interval the table actually
    shows. Away from 0 and 1 the two agree within a few grades; at ``p`` in {0, 1} the Wald
    formula asks for 1 grade, while Wilson needs ``n >= z^2 (1 - 2h) / (2h)`` (from
    ``low = n / (n + z^2) >= 1 - 2h``), 35 for ``h = 0.05`` at 95%. The half-width shrinks as
    ``n`` grows at fixed ``p``, so the answer is found by doubling and then bisection.
    """
    _check_share("p", p)
    if not 0.0 < half_width < 1.0:
        raise ValueError(f"half_width must lie in (0, 1), got {half_width!r}")

    def fits(n: int) -> bool:
        return half_width_of_interval(p * n, n, method=method, confidence=confidence) <= half_width

    high = 1
    while not fits(high):
        high *= 2
        if high > max_n:
            raise ValueError(f"no n up to {max_n} reaches ±{half_width:g} at p = {p:g}")
    low = high // 2  # fits(low) is false (or low == 0)
    while high - low > 1:
        middle = (low + high) // 2
        if fits(middle):
            high = middle
        else:
            low = middle
    return high


@dataclass(frozen=True)
class SeparationPlan:
    """Grades needed to tell two nested cutoffs apart (see :func:`grades_to_separate_cutoffs`)."""

    below: int
    """Graded items needed with ``score < lower cutoff`` (refused at both cutoffs)."""
    band: int
    """Graded items needed with ``lower cutoff <= score < upper cutoff``."""
    total: int
    effect_size: float
    """Cohen's h = |2 asin sqrt(p_band) - 2 asin sqrt(p_below)|."""
    below_exact: float
    """Unrounded requirement for ``below``; statsmodels' ``NormalIndPower`` ``nobs1``."""


def grades_to_separate_cutoffs(
    *,
    p_below: float,
    p_band: float,
    band_to_below_ratio: float = 1.0,
    alpha: float = 0.05,
    power: float = 0.8,
    alternative: Literal["two-sided", "one-sided"] = "two-sided",
    design_effect: float = 1.0,
) -> SeparationPlan:
    """Graded items needed so the table can tell a lower cutoff ``t1`` from a higher ``t2``.

    Raising the cutoff from ``t1`` to ``t2`` refuses the band ``[t1, t2)`` on top of everything
    below ``t1``; the two false-abstention rates differ exactly when the band's share correct
    ``p_band`` differs from the share correct below ``t1``, ``p_below``. The refused sets are
    nested, so comparing them directly would reuse the same items; the band and the set below
    are disjoint, which makes the comparison a test of two independent proportions: compare the band between
    the cutoffs with the refused set below.

    Arcsine (Cohen's h) normal approximation (Cohen 1988, ch. 6), with
    ``h = |2 asin sqrt(p_band) - 2 asin sqrt(p_below)|`` and ``r = n_band / n_below``::

        n_below = (z_{1-a/2} + z_{power})^2 (1 + 1/r) / h^2 * deff,   n_band = r n_below

    (``z_{1-a}`` for a one-sided test). This is the closed form of statsmodels'
    ``NormalIndPower().solve_power(effect_size=h, alpha=a, power=power, ratio=r)`` without the
    far tail of the two-sided test, which changes ``n`` by less than one part in 10^4 at any
    power worth planning for. Both counts are rounded up. ``band_to_below_ratio`` is the
    allocation, e.g. the ratio of the two population counts for a uniform sample.
    """
    from scipy import stats

    _check_share("p_below", p_below)
    _check_share("p_band", p_band)
    _check_design_effect(design_effect)
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be strictly between 0 and 1, got {alpha!r}")
    if not 0.0 < power < 1.0:
        raise ValueError(f"power must be strictly between 0 and 1, got {power!r}")
    if not (math.isfinite(band_to_below_ratio) and band_to_below_ratio > 0):
        raise ValueError("band_to_below_ratio must be positive")
    effect_size = abs(2.0 * math.asin(math.sqrt(p_band)) - 2.0 * math.asin(math.sqrt(p_below)))
    if effect_size == 0.0:
        raise ValueError("p_band equals p_below: no sample size separates the two cutoffs")
    if alternative == "two-sided":
        z_alpha = float(stats.norm.isf(alpha / 2.0))
    elif alternative == "one-sided":
        z_alpha = float(stats.norm.isf(alpha))
    else:
        raise ValueError(f"alternative must be 'two-sided' or 'one-sided', got {alternative!r}")
    z_power = float(stats.norm.ppf(power))
    below_exact = (z_alpha + z_power) ** 2 * (1.0 + 1.0 / band_to_below_ratio) / effect_size**2 * design_effect
    below = _ceil(below_exact)
    band = _ceil(below_exact * band_to_below_ratio)
    return SeparationPlan(
        below=below,
        band=band,
        total=below + band,
        effect_size=effect_size,
        below_exact=below_exact,
    )
