"""Certified cutoff: fixed-sequence testing of the wrong-answer rate (docs/statistics.md, "Certified cutoff").

For each cutoff ``t`` the null hypothesis is "the wrong-answer rate among served answers
exceeds alpha". Cutoffs are tested in an order fixed before the grades are seen (the grid from
high to low), each at level ``delta``, and testing stops at the first one that is not rejected.
Fixed-sequence testing controls the family-wise error at ``delta`` without any correction,
which is the construction of Learn then Test (Angelopoulos, Bates, Candès, Jordan & Lei 2021,
"Learn then Test: Calibrating Predictive Algorithms to Achieve Risk Control", section on
fixed-sequence testing). The per-cutoff test is the exact binomial test, equivalently the
one-sided Clopper–Pearson bound (Clopper & Pearson 1934).

The risk certified is the **wrong-answer rate among served answers** (not wrong served per
query); the graded items must be a uniform sample of the traffic (no weights).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from console.stats.intervals import one_sided_upper_clopper_pearson

# scipy is imported inside the functions that use it, so a process that never computes an interval
# (beat, the pool and verification workers) does not carry it in memory (bench/memory.py).

RISK = "wrong-answer rate among served answers"
DEFAULT_GRID: tuple[float, ...] = tuple(round(i * 0.01, 2) for i in range(100))
"""0.00, 0.01, ..., 0.99, fixed before any grade is read."""

# alpha * n / 2 is computed in floating point; without the nudge 0.1 * 20 / 2 could floor to 0.
_FLOOR_TOLERANCE = 1e-9

StepOutcome = Literal["skipped_small_sample", "certified", "failed"]


def n_start(alpha: float, delta: float, *, max_n: int = 10_000_000) -> int:
    """Smallest graded-served count ``n`` at which ``floor(alpha n / 2)`` wrong answers would
    certify: the first ``n`` with ``P(Bin(n, alpha) <= floor(alpha n / 2)) <= delta``.

    Cutoffs with fewer graded served items are skipped, not failed. Because the rule looks at
    counts and never at labels, the sequence of tested cutoffs is fixed before the grades are
    read, which keeps the fixed-sequence guarantee. For alpha = 0.1,
    delta = 0.05 it is 76. The search scans ``n`` upward (the criterion is not monotone in ``n``
    because of the floor) and raises if no ``n <= max_n`` qualifies.
    """
    from scipy import stats

    _check_levels(alpha, delta)
    chunk = 4096
    for first in range(1, max_n + 1, chunk):
        ns = np.arange(first, min(first + chunk, max_n + 1))
        ks = np.floor(alpha * ns / 2 + _FLOOR_TOLERANCE)
        hits = np.flatnonzero(stats.binom.cdf(ks, ns, alpha) <= delta)
        if hits.size:
            return int(ns[hits[0]])
    raise ValueError(f"no sample size up to {max_n} can certify alpha={alpha}, delta={delta}")


def _check_levels(alpha: float, delta: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be strictly between 0 and 1, got {alpha!r}")
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be strictly between 0 and 1, got {delta!r}")


@dataclass(frozen=True)
class CertificationStep:
    """One grid cutoff as the scan met it. ``p_value = P(Bin(n, alpha) <= k)``."""

    cutoff: float
    graded_served: int
    wrong_served: int
    outcome: StepOutcome
    p_value: float | None = None
    upper_bound: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Certification:
    """Result of :func:`certify_cutoff`.

    When ``certified``, ``cutoff`` is the lowest grid cutoff reached by the scan and
    ``upper_bound`` its one-sided Clopper–Pearson bound at ``1 - delta``. Otherwise those are
    None and ``reason_code`` / ``reason`` say why: ``"sample_too_small"`` (no grid cutoff has
    ``n_start`` graded served items) or ``"first_cutoff_fails"`` (the first tested cutoff's
    bound exceeds alpha). ``steps`` lists every grid cutoff the scan looked at, in scan order.
    """

    certified: bool
    cutoff: float | None
    upper_bound: float | None
    graded_served: int | None
    wrong_served: int | None
    alpha: float
    delta: float
    n_start: int
    reason_code: str | None
    reason: str | None
    steps: tuple[CertificationStep, ...] = field(default=())
    risk: str = RISK
    interval: str = "clopper_pearson_one_sided"

    @property
    def confidence(self) -> float:
        return 1.0 - self.delta

    def statement(self, *, route: str, window: str, versions: str) -> str:
        """The sentence shown to the owner: "at cutoff t the wrong-answer
        rate is at most a with 1-d confidence, on <route, window, versions>"."""
        scope = f"on {route}, {window}, {versions}"
        if not self.certified:
            return f"No cutoff is certified {scope}: {self.reason}"
        return (
            f"At cutoff {self.cutoff:g} the {self.risk} is at most {self.alpha:g} with "
            f"{self.confidence:.0%} confidence {scope} (one-sided Clopper–Pearson upper bound "
            f"{self.upper_bound:.3f}; {self.wrong_served} wrong of {self.graded_served} graded "
            f"served answers)."
        )

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields of the certified-cutoff response (the caller adds ``statement``)."""
        return {
            "certified": self.certified,
            "cutoff": self.cutoff,
            "upper_bound": self.upper_bound,
            "graded_served": self.graded_served,
            "wrong_served": self.wrong_served,
            "alpha": self.alpha,
            "delta": self.delta,
            "n_start": self.n_start,
            "risk": self.risk,
            "interval": self.interval,
            "reason_code": self.reason_code,
            "reason": self.reason,
            "steps": [step.as_dict() for step in self.steps],
        }


def certify_cutoff(
    *,
    graded_scores: ArrayLike,
    graded_correct: ArrayLike,
    alpha: float,
    delta: float,
    grid: Sequence[float] | None = None,
) -> Certification:
    """Lowest grid cutoff whose wrong-answer rate among served is certified ``<= alpha`` with
    confidence ``1 - delta`` (docs/statistics.md, "Certified cutoff").

    Scan the grid (default 0.00..0.99) from high to low. At cutoff ``t`` let ``n`` be the graded
    items with ``score >= t`` and ``k`` the wrong ones among them. Skip ``t`` while
    ``n < n_start(alpha, delta)``; certify it when ``P(Bin(n, alpha) <= k) <= delta``
    (equivalently ``Beta^-1(1 - delta; k + 1, n - k) <= alpha``); stop at the first failure.
    The answer is the last certified cutoff, with its bound. ``graded_scores`` must come from a
    uniform certification sample.
    """
    from scipy import stats

    _check_levels(alpha, delta)
    scores = np.asarray(graded_scores, dtype=float)
    labels = np.asarray(graded_correct)
    if scores.ndim != 1 or labels.shape != scores.shape:
        raise ValueError("graded_scores and graded_correct must be 1-D arrays of equal length")
    # A cast to bool would read 2 or NaN as "correct" and certify on labels nobody gave.
    if labels.dtype != bool and not np.all((labels == 0) | (labels == 1)):
        raise ValueError("graded_correct must be boolean (or 0/1); got other values")
    correct = labels.astype(bool)
    if not np.all(np.isfinite(scores)):
        raise ValueError("graded_scores must be finite")
    cutoffs = np.asarray(DEFAULT_GRID if grid is None else grid, dtype=float)
    if cutoffs.ndim != 1 or cutoffs.size == 0 or not np.all(np.isfinite(cutoffs)):
        raise ValueError("grid must be a non-empty sequence of finite cutoffs")
    descending = np.unique(cutoffs)[::-1]

    minimum = n_start(alpha, delta)
    order = np.argsort(scores, kind="stable")
    sorted_scores = scores[order]
    wrong_cumulative_from_top = np.concatenate([np.cumsum((~correct[order])[::-1])[::-1], [0]])

    steps: list[CertificationStep] = []
    best: CertificationStep | None = None
    for cutoff in descending.tolist():
        first_served = int(np.searchsorted(sorted_scores, cutoff, side="left"))
        n = int(sorted_scores.shape[0] - first_served)
        k = int(wrong_cumulative_from_top[first_served])
        if n < minimum:
            steps.append(CertificationStep(cutoff, n, k, "skipped_small_sample"))
            continue
        p_value = float(stats.binom.cdf(k, n, alpha))
        bound = one_sided_upper_clopper_pearson(k, n, 1.0 - delta)
        passed = p_value <= delta
        step = CertificationStep(cutoff, n, k, "certified" if passed else "failed", p_value, bound)
        steps.append(step)
        if not passed:
            break
        best = step

    common = {"alpha": alpha, "delta": delta, "n_start": minimum, "steps": tuple(steps)}
    if best is not None:
        return Certification(
            certified=True,
            cutoff=best.cutoff,
            upper_bound=best.upper_bound,
            graded_served=best.graded_served,
            wrong_served=best.wrong_served,
            reason_code=None,
            reason=None,
            **common,
        )
    tested = [step for step in steps if step.outcome == "failed"]
    if not tested:
        lowest = steps[-1]
        reason_code = "sample_too_small"
        # The lowest cutoff serves the most: if it lacks answers, every other cutoff lacks more.
        reason = (
            f"too few graded answers to test any cutoff. At alpha={alpha:g} and delta={delta:g} a "
            f"cutoff can be tested only with at least {minimum} graded served answers; the lowest "
            f"cutoff on the grid ({lowest.cutoff:g}), which serves the most, has {lowest.graded_served}. "
            f"Grade more answers or allow a larger alpha."
        )
    else:
        first = tested[0]
        reason_code = "first_cutoff_fails"
        reason = (
            f"the first tested cutoff {first.cutoff:g} has {first.wrong_served} wrong of "
            f"{first.graded_served} graded served answers; its upper bound "
            f"{first.upper_bound:.3f} exceeds alpha={alpha:g}, and the scan stops there."
        )
    return Certification(
        certified=False,
        cutoff=None,
        upper_bound=None,
        graded_served=None,
        wrong_served=None,
        reason_code=reason_code,
        reason=reason,
        **common,
    )
