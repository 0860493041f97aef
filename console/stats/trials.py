"""Figures of a candidate gate trial: a candidate's verdicts over graded items, several repeats each.

Definitions (docs/statistics.md, "Candidate gate trials"):

* An item's **verdict** is the majority of its judged repeats (a call that errored is not a verdict,
  and never an abstention). A tie goes to the more cautious verdict, in the order
  ``abstain > surface_conflict > answer_partially > answer``. Items whose calls all errored are left
  out of every figure.
* **unsafe full answers** = items answered in full (``answer``) among items labelled incorrect;
  **coverage** = items answered in full among items labelled correct; **partial** and **conflict**
  = items with verdict ``answer_partially`` / ``surface_conflict`` among all counted items;
  **stability** = items whose judged repeats all gave one verdict, among all counted items.
* Shares are Hájek-weighted by inverse inclusion probability, with strata, when the graded sample
  was drawn with unequal probabilities (the same estimator as the operating-point table,
  :func:`console.stats.intervals.weighted_proportion_interval`); ``count`` and ``n`` stay plain
  item counts. Intervals are Wilson at 95 % unless asked otherwise.
* The **paired difference** with the current gate is McNemar's exact test (the two-sided binomial
  test on the discordant pairs; McNemar 1947, Psychometrika 12:153; statsmodels
  ``mcnemar(exact=True)``) on "answered in full" versus "not", over the items both judged.
  It is unweighted: the test is on the paired counts of the sample.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from console.stats.intervals import IntervalMethod, weighted_proportion_interval

ANSWER = "answer"
PARTIAL = "answer_partially"
CONFLICT = "surface_conflict"
ABSTAIN = "abstain"
# Most cautious first: a tie between repeats is broken towards the earlier one.
VERDICTS_BY_CAUTION: tuple[str, ...] = (ABSTAIN, CONFLICT, PARTIAL, ANSWER)
VERDICTS: frozenset[str] = frozenset(VERDICTS_BY_CAUTION)


def majority_verdict(verdicts: Sequence[str | None]) -> str | None:
    """The most frequent verdict among the judged repeats (``None`` marks an errored call), ties
    to the most cautious; ``None`` when every call errored."""
    counts = Counter(v for v in verdicts if v is not None)
    if not counts:
        return None
    top = max(counts.values())
    return next(v for v in VERDICTS_BY_CAUTION if counts.get(v) == top)


def is_stable(verdicts: Sequence[str | None]) -> bool:
    """One verdict across every judged repeat (errored calls are no verdict and do not break it)."""
    return len({v for v in verdicts if v is not None}) == 1


@dataclass(frozen=True)
class Share:
    """A share with its interval: plain ``count`` of ``n`` items, weighted ``value`` when weighted."""

    count: int
    n: int
    value: float
    low: float
    high: float

    def as_dict(self) -> dict[str, Any]:
        def number(x: float) -> float | None:
            return float(x) if math.isfinite(x) else None

        return {
            "count": self.count,
            "n": self.n,
            "value": number(self.value),
            "low": number(self.low),
            "high": number(self.high),
        }


def share(
    indicator: ArrayLike,
    domain: ArrayLike,
    weights: ArrayLike | None = None,
    strata: ArrayLike | None = None,
    *,
    confidence: float = 0.95,
    method: IntervalMethod = "wilson",
) -> Share:
    """``indicator`` among ``domain`` items, with the operating points' interval (see the module docstring)."""
    y = np.asarray(indicator, dtype=bool)
    d = np.asarray(domain, dtype=bool)
    w = np.ones(y.shape[0]) if weights is None else np.asarray(weights, dtype=float)
    interval = weighted_proportion_interval(
        y.astype(float), w, strata=strata, domain=d.astype(float), confidence=confidence, method=method
    )
    return Share(int(np.count_nonzero(y & d)), int(np.count_nonzero(d)), interval.value, interval.low, interval.high)


def mcnemar_exact_p(candidate_answers: ArrayLike, current_answers: ArrayLike) -> float | None:
    """Two-sided exact McNemar p-value for paired yes/no outcomes: ``min(1, 2 P(X <= min(b, c)))``
    with ``X ~ Bin(b + c, 1/2)``, ``b``, ``c`` the discordant counts; ``None`` without items, 1.0
    without discordant pairs (the same as statsmodels)."""
    a = np.asarray(candidate_answers, dtype=bool)
    c_ = np.asarray(current_answers, dtype=bool)
    if a.size == 0:
        return None
    b = int(np.count_nonzero(a & ~c_))
    c = int(np.count_nonzero(~a & c_))
    if b + c == 0:
        return 1.0
    from scipy import stats  # imported here: processes that never run a trial do not load SciPy

    return float(min(1.0, 2.0 * stats.binom.cdf(min(b, c), b + c, 0.5)))


@dataclass(frozen=True)
class TrialFigures:
    items: int
    excluded_items: int
    verdicts: list[str | None]  # per input item, None when left out
    candidate: dict[str, Any]
    current: dict[str, Any]
    mcnemar_p: float | None
    confusion: dict[str, dict[str, int]]


def trial_figures(
    repeats: Sequence[Sequence[str | None]],
    correct: ArrayLike,
    current_answers: ArrayLike,
    *,
    citation_errors: int,
    inclusion_probability: ArrayLike | None = None,
    strata: ArrayLike | None = None,
    confidence: float = 0.95,
    method: IntervalMethod = "wilson",
) -> TrialFigures:
    """Candidate and current-gate figures over the same items.

    ``repeats[i]`` lists item i's verdicts by repeat (``None`` for an errored call); ``correct[i]``
    its label; ``current_answers[i]`` whether the current gate served it (score >= cutoff).
    Weights are ``1 / inclusion_probability`` (with ``strata``) only when the probabilities differ.
    """
    labels = np.asarray(correct, dtype=bool)
    current = np.asarray(current_answers, dtype=bool)
    verdicts = [majority_verdict(r) for r in repeats]
    counted = np.array([v is not None for v in verdicts], dtype=bool)
    stable = np.array(
        [is_stable(r) if v is not None else False for r, v in zip(repeats, verdicts, strict=True)], dtype=bool
    )
    weights = None
    strata_array = None
    if inclusion_probability is not None:
        p = np.asarray(inclusion_probability, dtype=float)
        if p.size and not np.all(p == p[0]):
            weights = 1.0 / p
            strata_array = None if strata is None else np.asarray(strata, dtype=object)
    verdict_array = np.array(["" if v is None else v for v in verdicts], dtype=object)

    def of(indicator: NDArray[np.bool_], domain: NDArray[np.bool_]) -> dict[str, Any]:
        return share(indicator, domain, weights, strata_array, confidence=confidence, method=method).as_dict()

    incorrect_domain = counted & ~labels
    correct_domain = counted & labels
    answered = verdict_array == ANSWER
    candidate = {
        "unsafe_full_answers": of(answered, incorrect_domain),
        "coverage": of(answered, correct_domain),
        "partial": of(verdict_array == PARTIAL, counted),
        "conflict": of(verdict_array == CONFLICT, counted),
        "abstain": of(verdict_array == ABSTAIN, counted),
        "stability": of(stable, counted),
        "citation_errors": int(citation_errors),
    }
    current_figures = {
        "unsafe_full_answers": of(current, incorrect_domain),
        "coverage": of(current, correct_domain),
        "abstain": of(~current, counted),
    }
    confusion = {
        verdict: {
            "correct": int(np.count_nonzero((verdict_array == verdict) & correct_domain)),
            "incorrect": int(np.count_nonzero((verdict_array == verdict) & incorrect_domain)),
        }
        for verdict in reversed(VERDICTS_BY_CAUTION)
    }
    return TrialFigures(
        items=int(np.count_nonzero(counted)),
        excluded_items=int(np.count_nonzero(~counted)),
        verdicts=verdicts,
        candidate=candidate,
        current=current_figures,
        mcnemar_p=mcnemar_exact_p(answered[counted], current[counted]),
        confusion=confusion,
    )


@dataclass(frozen=True)
class GateResult:
    name: str
    threshold: float | None
    value: float | None
    passed: bool

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "threshold": self.threshold, "value": self.value, "passed": self.passed}


def promotion_gates(gates: dict[str, float | None], figures: TrialFigures) -> list[GateResult]:
    """Each promotion gate with the number it was judged on. A number that is undefined (no item
    labelled incorrect, say) fails its gate: an unmeasured risk is not a passed one.

    * ``max_unsafe_upper``: upper interval bound of unsafe full answers <= threshold;
    * ``min_coverage``: coverage >= threshold; a null threshold means the current gate's coverage
      on the same items;
    * ``min_stability``: stability >= threshold;
    * ``max_citation_errors``: calls with a citation error <= threshold.
    A gate whose threshold is absent from ``gates`` is not applied.
    """
    candidate = figures.candidate
    results = []

    def check(name: str, threshold: float | None, value: float | None, passes) -> None:
        ok = threshold is not None and value is not None and passes(value, threshold)
        results.append(GateResult(name, threshold, value, bool(ok)))

    if "max_unsafe_upper" in gates:
        check(
            "max_unsafe_upper", gates["max_unsafe_upper"], candidate["unsafe_full_answers"]["high"], lambda v, t: v <= t
        )
    if "min_coverage" in gates:
        threshold = gates["min_coverage"]
        if threshold is None:
            threshold = figures.current["coverage"]["value"]
        check("min_coverage", threshold, candidate["coverage"]["value"], lambda v, t: v >= t)
    if "min_stability" in gates:
        check("min_stability", gates["min_stability"], candidate["stability"]["value"], lambda v, t: v >= t)
    if "max_citation_errors" in gates:
        check(
            "max_citation_errors",
            gates["max_citation_errors"],
            float(candidate["citation_errors"]),
            lambda v, t: v <= t,
        )
    return results
