"""Long answers: support fractions, the functional a score names, and the long-answer operating points.

A long answer is decomposed into ``n`` verifiable atomic claims, ``k`` of them supported; its
support fraction is ``S = k / n`` (docs/statistics.md, "Long answers"; FActScore, Min et al. 2023;
VeriScore, Song, Kim & Iyyer 2024, which leaves unverifiable claims out of ``n``). A score
between 0 and 1 is then ambiguous: it may estimate the expected support ``E[S]`` or the chance
that every claim is supported ``Pr(S = 1)``, and the harm model of the route decides which one
the gate must read (the abstention chapter behind the console, section 11.6, "Long-form
calibration: 80 % of what?").

Inputs are aligned one-dimensional arrays per graded answer: its gate score, the number of
supported claims and the number of verifiable claims (supported + unsupported), and optionally
its inverse inclusion probability and stratum, exactly as the short operating-point table takes
them (``console/stats/operating_points.py``). An answer with no verifiable claim has no support
fraction: it is left out of every figure over ``S`` and counts 0 unsupported claims.

Tie policy, as everywhere in the console: an item is served when ``score >= cutoff``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from console.stats.calibration import Bins, _bin_edges, _bin_index, brier_decomposition
from console.stats.intervals import Interval, IntervalMethod, proportion_interval, weighted_proportion_interval
from console.stats.operating_points import TIE_POLICY, _finite_scores, _population_counts, _sorted_cutoffs
from console.stats.policy_math import cost_threshold

HarmModel = Literal["proportional", "all_or_nothing", "at_least"]
Functional = Literal["expected_support", "p_fully_supported", "p_support_at_least"]
HARM_MODELS: tuple[str, ...] = ("proportional", "all_or_nothing", "at_least")
FUNCTIONALS: tuple[str, ...] = ("expected_support", "p_fully_supported", "p_support_at_least")
FUNCTIONAL_OF_HARM_MODEL: dict[str, str] = {
    "proportional": "expected_support",
    "all_or_nothing": "p_fully_supported",
    "at_least": "p_support_at_least",
}
"""The one summary of the distribution of ``S`` that each harm model's utility reads."""

LINEARISED_INTERVAL = "linearised_ratio_normal"
"""Name of the interval used for fractional figures (means of ``S``, claims per 1,000, utility)."""


# --------------------------------------------------------------------------- the chapter's algebra


def all_supported_probability(p: float, n: int) -> float:
    """``Pr(S = 1) = p ** n`` for ``n`` claims each supported with probability ``p``, independently.

    Source: section 11.6 of the abstention chapter, "Length amplifies the difference": under
    independence ``E[S]`` stays ``p`` for every ``n`` while ``Pr(S = 1)`` decays as ``p^n``
    (``0.95 ** 12 = 0.540360``, ``0.94 ** 40 = 0.084``).
    """
    _check_probability("p", p)
    _check_claim_count(n)
    return float(p) ** int(n)


def per_claim_support_needed(tau: float, n: int) -> float:
    """The per-claim support ``p = tau ** (1 / n)`` that an all-or-nothing target ``Pr(S = 1) >= tau``
    needs for ``n`` independent claims.

    Source: section 11.6, "An all-or-nothing gate requires ``p >= tau^(1/n)``": with
    ``tau = 13/14`` (``c_w = 20``, ``c_a = 0.5``), ``n = 12`` needs ``p >= 0.993843366``,
    ``n = 30`` needs ``0.997532783`` and ``n = 4`` needs ``0.9816436``. Valid only under the
    independence model; see :func:`frechet_bounds` for what dependence allows.
    """
    _check_probability("tau", tau)
    _check_claim_count(n)
    return float(tau) ** (1.0 / int(n))


def frechet_bounds(p: float, n: int) -> tuple[float, float]:
    """Bounds on ``Pr(S = 1)`` when each of ``n`` claims has marginal support ``p`` and nothing is
    assumed about their dependence: ``(max(0, 1 - n (1 - p)), p)``.

    Source: section 11.6 (``max(0, np - (n - 1)) <= Pr(S = 1) <= p``, the Fréchet bounds on the
    probability of an intersection; the lower one is Boole's inequality on the complements).
    Claims that share evidence can be dependent, and pairwise positive correlation alone does
    not guarantee ``Pr(S = 1) >= p^n``.
    """
    _check_probability("p", p)
    _check_claim_count(n)
    return max(0.0, 1.0 - int(n) * (1.0 - float(p))), float(p)


def answer_support(supported: ArrayLike, verifiable: ArrayLike) -> NDArray[np.float64]:
    """Support fraction ``S = k / n`` of each answer: ``k`` supported of ``n`` verifiable claims.

    ``n`` counts supported and unsupported claims; unverifiable ones are left out, as VeriScore
    does (Song, Kim & Iyyer 2024). ``S`` is NaN for an answer with no verifiable claim, which
    has no support fraction (callers leave it out of every mean over ``S``).
    """
    k, n = _claim_counts(supported, verifiable)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, k / np.where(n > 0, n, 1), np.nan)


@dataclass(frozen=True)
class PrecisionRecall:
    """VeriScore's claim precision, recall against the target count ``K``, and their F1, per answer."""

    precision: NDArray[np.float64]
    recall: NDArray[np.float64]
    f1: NDArray[np.float64]


def precision_recall_at_k(supported: ArrayLike, verifiable: ArrayLike, expected_claims: ArrayLike) -> PrecisionRecall:
    """``precision = k / n``, ``recall = min(1, k / K)`` and ``F1@K = 2 P R / (P + R)`` per answer.

    Source: VeriScore (Song, Kim & Iyyer 2024, "VeriScore: evaluating the factuality of verifiable
    claims in long-form text", section 3), after FActScore's precision (Min et al. 2023); section
    11.6 of the chapter: "a supported two-claim hedge has precision 1.000 but recall
    2/12 = 0.167". Precision alone rewards a short hedged answer; recall keeps the omitted claims
    visible. NaN where ``n = 0`` (precision) or ``K`` is unknown (``K`` NaN or ``<= 0``: recall and
    F1); F1 is 0 when both are 0.
    """
    k, n = _claim_counts(supported, verifiable)
    target = np.asarray(expected_claims, dtype=float)
    if target.shape != k.shape:
        raise ValueError("expected_claims must give one target per answer (NaN where unknown)")
    precision = answer_support(k, n)
    known = np.isfinite(target) & (target > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        recall = np.where(known, np.minimum(1.0, k / np.where(known, target, 1.0)), np.nan)
        total = precision + recall
        f1 = np.where(total > 0, 2.0 * precision * recall / np.where(total > 0, total, 1.0), 0.0)
    f1 = np.where(np.isnan(precision) | np.isnan(recall), np.nan, f1)
    return PrecisionRecall(precision, recall, f1)


def answer_utility(
    support: ArrayLike, *, harm_model: HarmModel, c_w: float, support_threshold: float | None = None
) -> NDArray[np.float64]:
    """What serving each answer is worth, in units of one fully correct answer.

    Section 11.6, "The cost model selects the functional":

    * ``proportional``: ``S - c_w (1 - S)``; its expectation reads only ``E[S]``;
    * ``all_or_nothing``: ``1`` when ``S = 1``, else ``-c_w``; reads only ``Pr(S = 1)``;
    * ``at_least``: ``1`` when ``S >= s0``, else ``-c_w``; reads only ``Pr(S >= s0)``.

    A refused answer is worth ``-c_a`` under every model. NaN where ``S`` is NaN.
    """
    if not (math.isfinite(c_w) and c_w >= 0):
        raise ValueError(f"c_w must be finite and non-negative, got {c_w!r}")
    s = np.asarray(support, dtype=float)
    if harm_model == "proportional":
        return s - c_w * (1.0 - s)
    event = _event(s, _functional_for(harm_model), support_threshold)
    return np.where(np.isnan(s), np.nan, np.where(event, 1.0, -c_w))


@dataclass(frozen=True)
class LongCostThreshold:
    """The cost threshold of a long route: the same ``tau``, read against the harm model's summary."""

    tau: float
    harm_model: str
    functional: str
    claims: int | None
    support_needed: float | None
    """``tau ** (1/n)`` under all-or-nothing harm with ``n`` claims (None otherwise)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "tau": self.tau,
            "harm_model": self.harm_model,
            "functional": self.functional,
            "claims": self.claims,
            "support_needed": self.support_needed,
        }


def long_cost_threshold(
    c_w: float, c_a: float, *, harm_model: HarmModel, claims: int | None = None
) -> LongCostThreshold:
    """Serve a long answer when the harm model's summary reaches ``tau = (c_w - c_a) / (1 + c_w)``.

    Proportional harm: expected value ``E[S] - c_w (1 - E[S])`` against ``-c_a``, so serve when
    ``E[S] >= tau``. All-or-nothing: ``Pr(S = 1) - c_w (1 - Pr(S = 1))``, serve when
    ``Pr(S = 1) >= tau``; at-least: the same with ``Pr(S >= s0)``. Section 11.6: "Both produce the
    same numeric threshold. The identical algebra is the trap. The statistic under the threshold
    differs." Under all-or-nothing harm and ``claims = n``, the per-claim support that reaches
    ``tau`` under independence is ``tau ** (1/n)`` (:func:`per_claim_support_needed`).
    """
    tau = cost_threshold(c_w, c_a)
    functional = _functional_for(harm_model)
    needed = None
    if claims is not None and harm_model == "all_or_nothing":
        needed = per_claim_support_needed(tau, claims)
    return LongCostThreshold(tau, harm_model, functional, claims, needed)


def effective_functional(declared: str, harm_model: str) -> str:
    """The functional the figures read: the one the gate declares, else the harm model's own."""
    if declared:
        if declared not in FUNCTIONALS:
            raise ValueError(f"unknown functional {declared!r}; use one of {FUNCTIONALS}")
        return declared
    return _functional_for(harm_model)


def functional_mismatch(declared: str, harm_model: str) -> bool:
    """True when a declared gate functional is not the summary the harm model's utility reads.

    ``expected_support`` under ``all_or_nothing`` or ``at_least``, and ``p_fully_supported``
    under ``proportional``, are mismatches (docs/statistics.md, "Which summary of S: the
    functional"). An unspecified functional is not one. ``p_support_at_least`` under
    ``all_or_nothing`` is not flagged: with ``s0 = 1`` it is the same event.
    """
    if not declared:
        return False
    if harm_model == "proportional":
        return declared == "p_fully_supported"
    return declared == "expected_support"


# --------------------------------------------------------------------------- estimation


@dataclass(frozen=True)
class RatioEstimate:
    """A Hájek ratio ``sum(w y) / sum(w x)`` over a domain and its linearised variance."""

    value: float
    variance: float
    n: int
    """Answers in the domain (the clusters the ratio is averaged over)."""

    def interval(self, *, confidence: float = 0.95, bounds: tuple[float, float] | None = (0.0, 1.0)) -> Interval:
        """``value ± z sqrt(variance)``, clipped to ``bounds`` (None: no clipping)."""
        from scipy import stats

        if self.n == 0 or math.isnan(self.value):
            return Interval.undefined()
        if not 0.0 < confidence < 1.0:
            raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence!r}")
        half = float(stats.norm.isf((1.0 - confidence) / 2.0)) * math.sqrt(max(self.variance, 0.0))
        low, high = self.value - half, self.value + half
        if bounds is not None:
            low, high = max(low, bounds[0]), min(high, bounds[1])
        return Interval(self.value, low, high)


def ratio_estimate(
    numerator: ArrayLike,
    denominator: ArrayLike | None = None,
    *,
    weights: ArrayLike | None = None,
    strata: ArrayLike | None = None,
    domain: ArrayLike | None = None,
) -> RatioEstimate:
    """Ratio estimator over clusters and its Taylor-linearised variance under a stratified design.

    Each answer ``i`` is one cluster (its claims are not independent of one another), with a
    total ``y_i`` (for example its supported claims ``k_i``) and a size ``x_i`` (its verifiable
    claims ``n_i``; 1 for a mean over answers), inverse inclusion probability ``w_i`` and domain
    membership ``d_i`` (for example "served at this cutoff"):

        R = sum(w d y) / sum(w d x)
        z_i = w_i d_i (y_i - R x_i) / sum(w d x)
        v = sum_h n_h / (n_h - 1) sum_{i in h} (z_i - zbar_h)^2

    Source: Cochran (1977), *Sampling Techniques*, 6.11 and 6.13 (the ratio estimator and its
    variance for cluster totals), in the stratified with-replacement form survey software uses
    (the same as ``console.stats.intervals.hajek_estimate``, which is the special case
    ``x = 1``, ``y`` in {0, 1}). Units outside the domain contribute ``z = 0`` (the domain
    estimator), and a stratum with one unit contributes ``z_i^2``. With one stratum and equal
    weights ``v`` is the cluster-robust (CR1) variance of the claim-level mean clustered by answer,
    which is how the tests check it against statsmodels.
    """
    y = np.asarray(numerator, dtype=float)
    if y.ndim != 1:
        raise ValueError("numerator must be one-dimensional")
    x = np.ones_like(y) if denominator is None else np.asarray(denominator, dtype=float)
    w = np.ones_like(y) if weights is None else np.asarray(weights, dtype=float)
    d = np.ones(y.shape, dtype=bool) if domain is None else np.asarray(domain, dtype=bool)
    if not (x.shape == w.shape == d.shape == y.shape):
        raise ValueError("numerator, denominator, weights and domain must align")
    if not (np.all(np.isfinite(w)) and np.all(w > 0)):
        raise ValueError("weights must be finite and positive (inverse inclusion probabilities)")
    labels = np.zeros(y.shape, dtype=np.intp)
    if strata is not None:
        raw = np.asarray(strata)
        if raw.shape != y.shape:
            raise ValueError("strata must align with the answers")
        if np.issubdtype(raw.dtype, np.integer) and (raw.size == 0 or (raw.min() >= 0 and raw.max() < raw.size)):
            # Codes 0..H-1 (as the table encodes them once) index the strata directly: no sort per call.
            labels = raw.astype(np.intp)
        else:
            labels = np.unique(raw, return_inverse=True)[1].astype(np.intp).reshape(y.shape)
    wd = np.where(d, w, 0.0)
    # Sums of products, not np.dot: a BLAS dot on a busy machine waits for its threads (75 ms
    # instead of 0.1 ms for 20,000 answers on two shared cores).
    total = float(np.sum(wd * x))
    n_domain = int(np.count_nonzero(d))
    if n_domain == 0 or total <= 0.0:
        return RatioEstimate(math.nan, math.nan, n_domain)
    ratio = float(np.sum(wd * np.where(d, y, 0.0)) / total)
    z = wd * (np.where(d, y, 0.0) - ratio * x) / total
    per_stratum_n = np.bincount(labels).astype(float)
    per_stratum_sum = np.bincount(labels, weights=z)
    per_stratum_mean = per_stratum_sum / np.maximum(per_stratum_n, 1.0)
    squares = np.bincount(labels, weights=(z - per_stratum_mean[labels]) ** 2)
    several = per_stratum_n > 1
    variance = float(
        np.sum(squares[several] * per_stratum_n[several] / (per_stratum_n[several] - 1.0))
        + np.sum(per_stratum_sum[per_stratum_n == 1] ** 2)
    )
    return RatioEstimate(ratio, variance, n_domain)


@dataclass(frozen=True)
class LongAnswerRow:
    """The long-answer half of one operating-point row (``cutoff`` None: the no-gate row).

    Shares are over graded *served* answers; ``false_abstention_rate`` is over graded *refused*
    ones; the per-1,000 figures are per 1,000 decisions of the window, like the short table's.
    ``graded_served_verifiable`` counts the graded served answers with at least one verifiable
    claim: those E[S], Pr(S = 1) and Pr(S >= s0) are read over (``graded_served`` counts them all).
    """

    cutoff: float | None
    graded_served: int
    graded_served_verifiable: int
    graded_refused: int
    expected_support: Interval
    p_fully_supported: Interval
    p_support_at_least: Interval | None
    claim_support_rate: Interval
    unsupported_claims_per_1000: Interval
    false_abstention_rate: Interval | None
    utility_per_1000: Interval | None

    def as_dict(self) -> dict[str, Any]:
        """The fields a long route's operating-point row adds; intervals as ``{"value","low","high"}``.

        The false-abstention rate under the functional is ``functional_false_abstention_rate``, beside
        the short table's ``false_abstention_rate`` (the share fully supported among the refused, which
        the correct-withheld column is built on)."""

        def interval(value: Interval | None) -> dict[str, float | None] | None:
            return None if value is None else value.as_dict()

        document: dict[str, Any] = {
            "graded_served_verifiable": self.graded_served_verifiable,
            "expected_support": self.expected_support.as_dict(),
            "p_fully_supported": self.p_fully_supported.as_dict(),
            "claim_support_rate": self.claim_support_rate.as_dict(),
            "unsupported_claims_per_1000": self.unsupported_claims_per_1000.as_dict(),
            "functional_false_abstention_rate": interval(self.false_abstention_rate),
            "utility_per_1000": interval(self.utility_per_1000),
        }
        if self.p_support_at_least is not None:
            document["p_support_at_least"] = self.p_support_at_least.as_dict()
        return document


def long_operating_points(
    *,
    population_size: int,
    cutoffs: Sequence[float],
    graded_scores: ArrayLike,
    claims_supported: ArrayLike,
    claims_verifiable: ArrayLike,
    served_counts: Sequence[int] | None = None,
    population_scores_sorted: ArrayLike | None = None,
    graded_weights: ArrayLike | None = None,
    graded_strata: ArrayLike | None = None,
    harm_model: HarmModel = "all_or_nothing",
    functional: str = "",
    support_threshold: float | None = None,
    c_w: float | None = None,
    c_a: float | None = None,
    confidence: float = 0.95,
    method: IntervalMethod = "wilson",
) -> list[LongAnswerRow]:
    """The long-answer figures of the operating-point table: the no-gate row, then one row per
    cutoff in ascending order (the rows of :func:`console.stats.operating_points.operating_points`).

    Per row, over graded answers with ``score >= t`` (served) and a support fraction
    (docs/statistics.md, "Long answers"):

    * ``expected_support``: Hájek mean of ``S`` (:func:`ratio_estimate` with ``x = 1``), normal
      interval on the linearised variance, clipped to [0, 1];
    * ``p_fully_supported``, ``p_support_at_least`` (when ``support_threshold`` ``s0`` is given):
      shares of answers with ``S = 1`` and ``S >= s0``, with the interval of ``method`` exactly as
      the short table (Korn–Graubard effective n when weighted);
    * ``claim_support_rate``: supported claims over verifiable claims, the cluster ratio estimator
      (claims clustered within answers);
    * ``unsupported_claims_per_1000 = 1000 (S(t)/N) U`` with ``U`` the Hájek mean of unsupported
      claims per served answer (every graded served answer; one with no verifiable claim counts
      0), interval from the linearised variance of ``U``;
    * ``false_abstention_rate`` under the functional (the declared one, else the harm model's):
      over graded refused answers, the mean of ``S`` (``expected_support``) or the share with
      ``S = 1`` / ``S >= s0``. None on the no-gate row and when nothing graded is refused;
    * ``utility_per_1000 = 1000 [(S(t)/N) mean u(S) - (R(t)/N) c_a]`` with ``u`` of
      :func:`answer_utility` under ``harm_model``; only when ``c_w`` and ``c_a`` are given.
      Relative to refusing everything it is ``utility + 1000 c_a``.

    The window's served share ``S(t)/N`` is exact, so intervals reflect grading uncertainty only.
    """
    if harm_model not in HARM_MODELS:
        raise ValueError(f"unknown harm model {harm_model!r}; use one of {HARM_MODELS}")
    if harm_model == "at_least" and support_threshold is None:
        raise ValueError("the at_least harm model needs a support threshold s0")
    if support_threshold is not None:
        _check_probability("support_threshold", support_threshold)
    read = effective_functional(functional, harm_model)
    if read == "p_support_at_least" and support_threshold is None:
        raise ValueError("the p_support_at_least functional needs a support threshold s0")
    if (c_w is None) != (c_a is None):
        raise ValueError("pass both c_w and c_a, or neither")
    sorted_cutoffs, aligned_counts = _sorted_cutoffs(cutoffs, served_counts)
    served = _population_counts(population_size, population_scores_sorted, aligned_counts, sorted_cutoffs)
    if np.any(np.diff(served) > 0):
        raise ValueError("served_counts must not increase as the cutoff rises")
    sample = _LongSample.build(
        graded_scores, claims_supported, claims_verifiable, graded_weights, graded_strata, confidence, method
    )
    utility = None
    if c_w is not None and c_a is not None:
        if not (math.isfinite(c_a) and c_a >= 0):
            raise ValueError(f"c_a must be finite and non-negative, got {c_a!r}")
        utility = answer_utility(sample.support, harm_model=harm_model, c_w=c_w, support_threshold=support_threshold)

    rows = [sample.row(None, 1.0, population_size, 0, read, support_threshold, utility, c_a)]
    for cutoff, served_count in zip(sorted_cutoffs.tolist(), served.tolist(), strict=True):
        rows.append(
            sample.row(cutoff, served_count / population_size, served_count, population_size - served_count,
                       read, support_threshold, utility, c_a)
        )  # fmt: skip
    return rows


@dataclass(frozen=True)
class _LongSample:
    scores: NDArray[np.float64]
    supported: NDArray[np.float64]
    verifiable: NDArray[np.float64]
    support: NDArray[np.float64]
    weights: NDArray[np.float64] | None
    strata: NDArray[np.intp] | None
    confidence: float
    method: IntervalMethod

    @classmethod
    def build(cls, scores, supported, verifiable, weights, strata, confidence, method) -> _LongSample:
        score_array = _finite_scores("graded_scores", scores)
        k, n = _claim_counts(supported, verifiable)
        if k.shape != score_array.shape:
            raise ValueError("graded_scores, claims_supported and claims_verifiable must align")
        weight_array = None
        if weights is not None:
            weight_array = np.asarray(weights, dtype=float)
            if weight_array.shape != score_array.shape:
                raise ValueError("graded_weights must align with graded_scores")
        strata_codes = None
        if strata is not None:
            labels = np.asarray(strata)
            if labels.shape != score_array.shape:
                raise ValueError("graded_strata must align with graded_scores")
            strata_codes = np.unique(labels, return_inverse=True)[1].astype(np.intp).reshape(score_array.shape)
        return cls(score_array, k, n, answer_support(k, n), weight_array, strata_codes, confidence, method)

    def ratio(self, numerator, domain, denominator=None) -> RatioEstimate:
        return ratio_estimate(numerator, denominator, weights=self.weights, strata=self.strata, domain=domain)

    def share(self, event: NDArray[np.bool_], domain: NDArray[np.bool_]) -> Interval:
        if self.weights is None and self.strata is None:
            return proportion_interval(
                int(np.count_nonzero(event & domain)),
                int(np.count_nonzero(domain)),
                confidence=self.confidence,
                method=self.method,
            )
        weights = self.weights if self.weights is not None else np.ones_like(self.scores)
        return weighted_proportion_interval(
            event, weights, strata=self.strata, domain=domain, confidence=self.confidence, method=self.method
        )

    def read(self, functional: str, domain, support_threshold: float | None) -> Interval:
        """The functional's estimate over the answers in ``domain`` that have a support fraction."""
        measured = domain & ~np.isnan(self.support)
        if functional == "expected_support":
            return self.ratio(np.nan_to_num(self.support), measured).interval(confidence=self.confidence)
        return self.share(_event(self.support, functional, support_threshold), measured)

    def row(self, cutoff, served_share, served_count, refused_count, functional, support_threshold, utility, c_a):
        served = np.ones(self.scores.shape, dtype=bool) if cutoff is None else self.scores >= cutoff
        refused = ~served
        measured = served & ~np.isnan(self.support)
        unsupported = self.ratio(self.verifiable - self.supported, served).interval(
            confidence=self.confidence, bounds=None
        )
        far = None
        if cutoff is not None and np.any(refused):
            candidate = self.read(functional, refused, support_threshold)
            far = candidate if candidate.is_defined else None
        value = None
        if utility is not None and c_a is not None:
            value = _utility_per_1000(
                self.ratio(np.nan_to_num(utility), measured).interval(confidence=self.confidence, bounds=None),
                served_share,
                served_count,
                refused_count,
                c_a,
            )
        return LongAnswerRow(
            cutoff=cutoff,
            graded_served=int(np.count_nonzero(served)),
            graded_served_verifiable=int(np.count_nonzero(measured)),
            graded_refused=int(np.count_nonzero(refused)),
            expected_support=self.read("expected_support", served, None),
            p_fully_supported=self.read("p_fully_supported", served, None),
            p_support_at_least=(
                None if support_threshold is None else self.read("p_support_at_least", served, support_threshold)
            ),
            claim_support_rate=self.ratio(self.supported, measured, self.verifiable).interval(
                confidence=self.confidence
            ),
            unsupported_claims_per_1000=(
                Interval.exact(0.0) if served_count == 0 else _scaled(unsupported, 1000.0 * served_share)
            ),
            false_abstention_rate=far,
            utility_per_1000=value,
        )


def _scaled(interval: Interval, factor: float) -> Interval:
    return interval.scaled(factor) if interval.is_defined else interval


def _utility_per_1000(
    mean_served: Interval, served_share: float, served_count: int, refused_count: int, c_a: float
) -> Interval | None:
    population = served_count + refused_count
    refusals = 1000.0 * c_a * refused_count / population
    if served_count == 0:
        return Interval.exact(-refusals)
    if not mean_served.is_defined:
        return None
    scaled = mean_served.scaled(1000.0 * served_share)
    return Interval(scaled.value - refusals, scaled.low - refusals, scaled.high - refusals)


def long_operating_points_document(rows: Sequence[LongAnswerRow], *, harm_model: str, functional: str,
                                   declared_functional: str, support_threshold: float | None,
                                   confidence: float) -> dict[str, Any]:  # fmt: skip
    """What a long route's operating-point document adds: the functional read, the methods, and the
    long-answer fields of each row (aligned with the short rows)."""
    return {
        "answer_form": "long",
        "harm_model": harm_model,
        "functional": functional,
        "declared_functional": declared_functional,
        "functional_mismatch": functional_mismatch(declared_functional, harm_model),
        "support_threshold": support_threshold,
        "long_interval": LINEARISED_INTERVAL,
        "confidence": confidence,
        "tie_policy": TIE_POLICY,
        "rows": [row.as_dict() for row in rows],
    }


# --------------------------------------------------------------------------- Pr(S = 1) by claim count


@dataclass(frozen=True)
class ClaimCountRow:
    """One row of the ``Pr(S = 1)``-by-``n`` table."""

    claims: int
    answers: int
    p_fully_supported: Interval
    claim_support_rate: Interval
    independence: float | None
    frechet_low: float | None
    frechet_high: float | None
    support_needed: float | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "claims": self.claims,
            "answers": self.answers,
            "p_fully_supported": self.p_fully_supported.as_dict(),
            "claim_support_rate": self.claim_support_rate.as_dict(),
            "independence": self.independence,
            "frechet_low": self.frechet_low,
            "frechet_high": self.frechet_high,
            "support_needed": self.support_needed,
        }


def full_support_by_claim_count(
    claims_supported: ArrayLike,
    claims_verifiable: ArrayLike,
    *,
    weights: ArrayLike | None = None,
    strata: ArrayLike | None = None,
    domain: ArrayLike | None = None,
    tau: float | None = None,
    confidence: float = 0.95,
    method: IntervalMethod = "wilson",
) -> list[ClaimCountRow]:
    """Observed ``Pr(S = 1)`` per claim count ``n`` beside what the per-claim support implies.

    For each ``n`` among the answers in ``domain`` (ascending): the share fully supported (interval
    of ``method``, Hájek-weighted when weighted), the per-claim support ``p_n`` of those answers
    (cluster ratio estimator), the independence prediction ``p_n ** n``
    (:func:`all_supported_probability`), the Fréchet bounds at ``p_n`` (:func:`frechet_bounds`),
    and, when the cost threshold ``tau`` is given, the per-claim support an all-or-nothing gate
    needs at that length, ``tau ** (1/n)`` (:func:`per_claim_support_needed`). An observed share
    outside the Fréchet bounds points at a labelling problem; one far below ``p_n ** n`` at
    negatively associated claims.
    """
    k, n = _claim_counts(claims_supported, claims_verifiable)
    d = np.ones(k.shape, dtype=bool) if domain is None else np.asarray(domain, dtype=bool)
    w = None if weights is None else np.asarray(weights, dtype=float)
    rows = []
    for count in np.unique(n[d & (n > 0)]).astype(int).tolist():
        group = d & (n == count)
        full = k == n
        if w is None and strata is None:
            share = proportion_interval(
                int(np.count_nonzero(full & group)), int(np.count_nonzero(group)), confidence=confidence, method=method
            )
        else:
            share = weighted_proportion_interval(
                full, w if w is not None else np.ones_like(k), strata=strata, domain=group,
                confidence=confidence, method=method,
            )  # fmt: skip
        per_claim = ratio_estimate(k, n, weights=w, strata=strata, domain=group).interval(confidence=confidence)
        p = per_claim.value
        bounds = frechet_bounds(p, count) if math.isfinite(p) else (None, None)
        rows.append(
            ClaimCountRow(
                claims=count,
                answers=int(np.count_nonzero(group)),
                p_fully_supported=share,
                claim_support_rate=per_claim,
                independence=all_supported_probability(p, count) if math.isfinite(p) else None,
                frechet_low=bounds[0],
                frechet_high=bounds[1],
                support_needed=None if tau is None else per_claim_support_needed(tau, count),
            )
        )
    return rows


def claim_count_scenarios(p: float, claim_counts: Sequence[int], *, tau: float | None = None) -> list[dict[str, Any]]:
    """The chapter's scenario table for a marginal per-claim support ``p``: per ``n``, ``E[S] = p``,
    ``Pr(S = 1) = p^n`` under independence, the Fréchet bounds, and ``tau^(1/n)``. A scenario
    calculation, not a forecast (section 11.6)."""
    rows = []
    for count in claim_counts:
        low, high = frechet_bounds(p, count)
        rows.append(
            {
                "claims": int(count),
                "expected_support": float(p),
                "independence": all_supported_probability(p, count),
                "frechet_low": low,
                "frechet_high": high,
                "support_needed": None if tau is None else per_claim_support_needed(tau, count),
            }
        )
    return rows


# --------------------------------------------------------------------------- calibration per functional


def support_reliability_bins(scores: ArrayLike, support: ArrayLike, bins: Bins = 10) -> list[dict[str, Any]]:
    """Reliability bins of a score read as a forecast of ``S``: per bin the count, mean score and mean
    observed support (``None`` when empty).

    The bins are those of ``console.stats.calibration.reliability_bins`` (left-closed, the last
    closed); the outcome is the fraction ``S`` instead of a 0/1 label, so a score calibrated for
    ``E[S]`` lies on the diagonal here while it may sit far above the full-support diagonal.
    Answers with no support fraction (NaN) are left out.
    """
    score_array, s = _scores_and_support(scores, support)
    edges = _bin_edges(bins)
    index = _bin_index(score_array, edges)
    size = len(edges) - 1
    count = np.bincount(index, minlength=size)
    score_sum = np.bincount(index, weights=score_array, minlength=size)
    support_sum = np.bincount(index, weights=s, minlength=size)
    return [
        {
            "low": float(edges[b]),
            "high": float(edges[b + 1]),
            "count": int(count[b]),
            "mean_score": float(score_sum[b] / count[b]) if count[b] else None,
            "mean_support": float(support_sum[b] / count[b]) if count[b] else None,
        }
        for b in range(size)
    ]


def support_calibration(
    scores: ArrayLike,
    claims_supported: ArrayLike,
    claims_verifiable: ArrayLike,
    *,
    functional: str,
    support_threshold: float | None = None,
    bins: Bins = 10,
) -> dict[str, Any]:
    """The gate score as a forecast of each functional (docs/statistics.md, "Calibration per functional").

    * ``expected_support``: reliability bins against observed ``S``, the mean absolute gap
      weighted by bin count (ECE with a fractional outcome), and the quadratic score
      ``mean (f - S)^2``;
    * ``p_fully_supported``: Brier score of the event ``S = 1`` with its decomposition
      (``console.stats.calibration.brier_decomposition``);
    * ``p_support_at_least``: the same for ``S >= s0`` (when ``s0`` is given).

    Every block is computed whatever the declared functional, so the page can show what the score
    would be worth under the other reading; ``functional`` names the one the gate declares.
    Answers without a verifiable claim are left out.
    """
    score_array = np.asarray(scores, dtype=float)
    s = answer_support(claims_supported, claims_verifiable)
    if s.shape != score_array.shape:
        raise ValueError("scores must give one score per answer")
    measured = ~np.isnan(s)
    score_array, s = score_array[measured], s[measured]
    reliability = support_reliability_bins(score_array, s, bins)
    filled = [b for b in reliability if b["count"]]
    total = sum(b["count"] for b in filled)
    gap = sum(b["count"] * abs(b["mean_score"] - b["mean_support"]) for b in filled) / total if total else None
    document: dict[str, Any] = {
        "functional": functional,
        "n": int(s.size),
        "expected_support": {
            "bins": reliability,
            "calibration_error": gap,
            "quadratic_score": float(np.mean((score_array - s) ** 2)) if s.size else None,
            "mean_score": float(np.mean(score_array)) if s.size else None,
            "mean_support": float(np.mean(s)) if s.size else None,
        },
        "p_fully_supported": brier_decomposition(score_array, s == 1.0, bins),
    }
    if support_threshold is not None:
        document["p_support_at_least"] = brier_decomposition(score_array, s >= support_threshold, bins)
    return document


def crps_from_cdf(grid: ArrayLike, cdf: ArrayLike, observed: ArrayLike) -> NDArray[np.float64]:
    """Continuous ranked probability score of a forecast CDF of ``S`` given on a grid.

    ``grid`` holds ascending points ``g_0 < ... < g_m``; ``cdf`` (one row per answer, or one row
    for all) holds ``F(g_j)``, non-decreasing and ending at 1; the forecast is the step CDF that
    takes ``F(g_j)`` on ``[g_j, g_{j+1})`` -- a distribution with atoms at the grid points, which
    is what a support fraction ``k/n`` has. Then, exactly,

        CRPS(F, s) = integral (F(x) - 1{x >= s})^2 dx

    (Matheson & Winkler 1976; Gneiting & Raftery 2007, eq. 20), integrated piece by piece. For a
    Bernoulli forecast (grid ``[0, 1]``, ``cdf = [1 - f, 1]``) and ``s`` in {0, 1} it is the Brier
    score ``(f - s)^2``; for a fractional ``s`` that identity does not hold (section 11.6). Checked
    against ``scoringrules.crps_ensemble`` with weighted members.
    """
    g = np.asarray(grid, dtype=float)
    if g.ndim != 1 or g.size < 1 or np.any(np.diff(g) <= 0) or not np.all(np.isfinite(g)):
        raise ValueError("grid must be finite and strictly ascending")
    y = np.atleast_1d(np.asarray(observed, dtype=float))
    f = np.asarray(cdf, dtype=float)
    f = np.broadcast_to(f, (y.size, g.size)) if f.ndim == 1 else f
    if f.shape != (y.size, g.size):
        raise ValueError("cdf must hold one value per grid point, per observation")
    if np.any(np.diff(f, axis=1) < 0) or np.any(f < 0) or not np.allclose(f[:, -1], 1.0):
        raise ValueError("cdf must be non-decreasing in [0, 1] and reach 1 at the last grid point")
    start, end = g[:-1], g[1:]
    length = end - start
    above = np.clip(end[None, :] - np.maximum(start[None, :], y[:, None]), 0.0, length[None, :])
    below = length[None, :] - above
    inside = np.sum(below * f[:, :-1] ** 2 + above * (1.0 - f[:, :-1]) ** 2, axis=1)
    return inside + np.maximum(g[0] - y, 0.0) + np.maximum(y - g[-1], 0.0)


def crps_from_quantiles(levels: ArrayLike, quantiles: ArrayLike, observed: ArrayLike) -> NDArray[np.float64]:
    """CRPS approximated from forecast quantiles: ``(2/M) sum_i rho_{a_i}(s - q_i)``.

    ``rho_a(u) = u (a - 1{u < 0})`` is the pinball (quantile) loss; the CRPS is the integral of
    twice the quantile score over ``a`` in (0, 1) (Laio & Tamea 2007; Gneiting & Ranjan 2011),
    here its average over the ``M`` levels given, which is what ``scoringrules.crps_quantile``
    computes. ``quantiles`` has one row per answer (or one row for all).
    """
    a = np.asarray(levels, dtype=float)
    if a.ndim != 1 or np.any((a <= 0) | (a >= 1)):
        raise ValueError("levels must lie strictly between 0 and 1")
    y = np.atleast_1d(np.asarray(observed, dtype=float))
    q = np.asarray(quantiles, dtype=float)
    q = np.broadcast_to(q, (y.size, a.size)) if q.ndim == 1 else q
    if q.shape != (y.size, a.size):
        raise ValueError("quantiles must hold one value per level, per observation")
    u = y[:, None] - q
    return 2.0 * np.mean(u * (a[None, :] - (u < 0)), axis=1)


# --------------------------------------------------------------------------- helpers


def _functional_for(harm_model: str) -> str:
    try:
        return FUNCTIONAL_OF_HARM_MODEL[harm_model]
    except KeyError:
        raise ValueError(f"unknown harm model {harm_model!r}; use one of {HARM_MODELS}") from None


def _event(support: NDArray[np.float64], functional: str, support_threshold: float | None) -> NDArray[np.bool_]:
    if functional == "p_fully_supported":
        return support == 1.0
    if functional == "p_support_at_least":
        if support_threshold is None:
            raise ValueError("p_support_at_least needs a support threshold s0")
        return support >= support_threshold
    raise ValueError(f"{functional!r} is not an event")


def _claim_counts(supported: ArrayLike, verifiable: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    k = np.asarray(supported, dtype=float)
    n = np.asarray(verifiable, dtype=float)
    if k.ndim != 1 or k.shape != n.shape:
        raise ValueError("supported and verifiable must be one-dimensional arrays of equal length")
    if not (np.all(np.isfinite(k)) and np.all(np.isfinite(n))) or np.any(k < 0) or np.any(k > n):
        raise ValueError("claim counts must satisfy 0 <= supported <= verifiable")
    return k, n


def _scores_and_support(scores: ArrayLike, support: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    score_array = np.asarray(scores, dtype=float)
    s = np.asarray(support, dtype=float)
    if score_array.ndim != 1 or score_array.shape != s.shape:
        raise ValueError("scores and support must be one-dimensional arrays of equal length")
    keep = ~np.isnan(s)
    return score_array[keep], s[keep]


def _check_probability(name: str, value: float) -> None:
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise ValueError(f"{name} must lie in [0, 1], got {value!r}")


def _check_claim_count(n: int) -> None:
    if int(n) != n or n < 1:
        raise ValueError(f"the claim count n must be a positive integer, got {n!r}")
