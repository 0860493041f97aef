"""Agreement between graders, and each grader's accuracy on gold items.

Verdicts are the strings ``"correct"``, ``"incorrect"`` and ``"unsure"`` (the grading scale).
How ``"unsure"`` is treated differs on purpose between the two questions asked here:

* Agreement (Cohen, Fleiss, Gwet): ``"unsure"`` is a category of its own. Two graders who
  both say "unsure" agree; one "unsure" against one "correct" is a disagreement. Dropping
  unsure verdicts would hide exactly the items graders find hard and inflate agreement.
* Accuracy on gold: ``"unsure"`` is no vote, as it is for final labels. It is
  left out of the accuracy and reported beside it as a count, so a grader who hedges on the
  hard items shows up as such instead of as more accurate.

Intervals are two-sided at ``confidence`` and every result names its method. Values that are
undefined (no items; chance agreement equal to 1) are ``None``, so results are JSON-ready.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

import numpy as np
from numpy.typing import ArrayLike

# scipy and statsmodels are imported inside the functions that use them, so a process that never computes an interval
# (beat, the pool and verification workers) does not carry them in memory (bench/memory.py).

VERDICTS: tuple[str, ...] = ("correct", "incorrect", "unsure")
"""The grading scale, in the column order used by :func:`verdict_counts`."""

COHEN_INTERVAL = "normal, large-sample SE of Fleiss, Cohen & Everitt (1969)"
MULTI_RATER_INTERVAL = "normal, linearization SE of Gwet (2008), items sampled, raters fixed"


class AgreementEstimate(TypedDict):
    value: float | None
    low: float | None
    high: float | None
    se: float | None
    n: int
    confidence: float
    interval: str


class Proportion(TypedDict):
    value: float
    low: float
    high: float


class GoldAccuracy(TypedDict):
    gold_items: int
    voted: int
    unsure: int
    agreed: int
    accuracy: Proportion | None
    confidence: float
    interval: str


def _check_confidence(confidence: float) -> None:
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must lie strictly between 0 and 1")


def _estimate(value: float | None, se: float | None, n: int, confidence: float, interval: str) -> AgreementEstimate:
    """Wrap a point estimate and its SE as value +/- z * SE, clipped to [-1, 1]."""
    from scipy.stats import norm

    low = high = None
    if value is not None and se is not None:
        z = float(norm.ppf(0.5 + confidence / 2.0))
        low = max(-1.0, value - z * se)
        high = min(1.0, value + z * se)
    return {
        "value": value,
        "low": low,
        "high": high,
        "se": se,
        "n": n,
        "confidence": confidence,
        "interval": interval,
    }


# --------------------------------------------------------------------------- two graders


def cohen_kappa(labels_a: Sequence[str], labels_b: Sequence[str], *, confidence: float = 0.95) -> AgreementEstimate:
    """Cohen's kappa for two graders who labelled the same items, with an interval.

    With p_ij the share of items graded i by the first grader and j by the second, row and
    column margins p_i. and p_.j (Cohen 1960):

        p_o = sum_i p_ii,    p_e = sum_i p_i. p_.i,    kappa = (p_o - p_e) / (1 - p_e)

    Interval: kappa +/- z * SE with the large-sample (non-null) standard error of Fleiss,
    Cohen & Everitt (1969), not Cohen's simpler sqrt(p_o (1 - p_o) / n) / (1 - p_e):

        Var = [ sum_i p_ii (1 - (p_i. + p_.i)(1 - kappa))^2
                + (1 - kappa)^2 sum_{i != j} p_ij (p_.i + p_j.)^2
                - (kappa - p_e (1 - kappa))^2 ] / (n (1 - p_e)^2)

    clipped to [-1, 1]. Asymptotic: treat intervals on a few dozen items, or near kappa = 1,
    as rough. Categories are the labels that occur; ``"unsure"`` is one of them (see module
    docstring). ``value`` is ``None`` when p_e = 1 (both graders used one and the same
    category throughout) or there are no items; with a single item ``value`` is given but
    ``se``, ``low`` and ``high`` are ``None``.
    """
    _check_confidence(confidence)
    if len(labels_a) != len(labels_b):
        raise ValueError("both graders must label the same items")
    n = len(labels_a)
    categories = sorted(set(labels_a) | set(labels_b))
    if n == 0:
        return _estimate(None, None, 0, confidence, COHEN_INTERVAL)
    position = {label: i for i, label in enumerate(categories)}
    table = np.zeros((len(categories), len(categories)))
    np.add.at(table, ([position[x] for x in labels_a], [position[y] for y in labels_b]), 1.0)
    p = table / n
    rows, cols = p.sum(axis=1), p.sum(axis=0)
    observed = float(np.trace(p))
    chance = float(np.dot(rows, cols))
    if chance >= 1.0:
        return _estimate(None, None, n, confidence, COHEN_INTERVAL)
    kappa = (observed - chance) / (1.0 - chance)
    if n < 2:
        # One item has no spread to estimate: the formula gives SE 0 and a zero-width interval
        # that claims certainty. No interval, as for Fleiss' kappa and AC1.
        return _estimate(float(kappa), None, n, confidence, COHEN_INTERVAL)

    diagonal = np.diag(p) * (1.0 - (rows + cols) * (1.0 - kappa)) ** 2
    off_diagonal = p * (cols[:, None] + rows[None, :]) ** 2
    np.fill_diagonal(off_diagonal, 0.0)
    variance = (diagonal.sum() + (1.0 - kappa) ** 2 * off_diagonal.sum() - (kappa - chance * (1.0 - kappa)) ** 2) / (
        n * (1.0 - chance) ** 2
    )
    se = float(np.sqrt(max(variance, 0.0)))
    return _estimate(float(kappa), se, n, confidence, COHEN_INTERVAL)


# --------------------------------------------------------------------------- many graders


def verdict_counts(verdicts_per_item: Sequence[Sequence[str]], categories: Sequence[str] = VERDICTS) -> np.ndarray:
    """Items x categories matrix: entry (i, k) = how many graders gave item i verdict k.

    Columns follow ``categories`` (default :data:`VERDICTS`, so ``"unsure"`` is its own
    column and a category nobody used still has one -- which matters for Gwet's AC1, whose
    chance term depends on the number of categories on the scale). Items may have different
    numbers of verdicts. An unknown verdict raises ``ValueError``.
    """
    position = {category: k for k, category in enumerate(categories)}
    if len(position) != len(categories):
        raise ValueError("categories must be distinct")
    counts = np.zeros((len(verdicts_per_item), len(categories)), dtype=np.int64)
    for i, verdicts in enumerate(verdicts_per_item):
        for verdict in verdicts:
            if verdict not in position:
                raise ValueError(f"item {i}: unknown verdict {verdict!r}")
            counts[i, position[verdict]] += 1
    return counts


def _rating_table(counts: ArrayLike) -> np.ndarray:
    table = np.asarray(counts, dtype=float)
    if table.ndim != 2 or table.shape[1] < 2:
        raise ValueError("counts must be an items x categories matrix with at least 2 columns")
    if np.any(table < 0) or np.any(table != np.round(table)):
        raise ValueError("counts must be non-negative integers")
    if np.any(table.sum(axis=1) < 2):
        raise ValueError("every item needs at least two verdicts; drop singly graded items")
    return table


def _multi_rater(counts: ArrayLike, confidence: float, method: str) -> AgreementEstimate:
    """Shared machinery of Fleiss' kappa and Gwet's AC1 (both of form (pa - pe)/(1 - pe))."""
    _check_confidence(confidence)
    table = _rating_table(counts)
    n, q = table.shape
    if n == 0:
        return _estimate(None, None, 0, confidence, MULTI_RATER_INTERVAL)
    raters = table.sum(axis=1)
    agreement_by_item = (table * (table - 1.0)).sum(axis=1) / (raters * (raters - 1.0))
    shares = table / raters[:, None]
    prevalence = shares.mean(axis=0)
    observed = float(agreement_by_item.mean())
    if method == "fleiss":
        chance = float(np.dot(prevalence, prevalence))
        chance_gradient = 2.0 * prevalence
    else:
        chance = float(np.dot(prevalence, 1.0 - prevalence) / (q - 1))
        chance_gradient = (1.0 - 2.0 * prevalence) / (q - 1)
    if chance >= 1.0:
        return _estimate(None, None, n, confidence, MULTI_RATER_INTERVAL)
    value = (observed - chance) / (1.0 - chance)
    if n < 2:
        return _estimate(float(value), None, n, confidence, MULTI_RATER_INTERVAL)
    # First-order (delta-method) influence of each item on the coefficient.
    influence = ((agreement_by_item - observed) - (1.0 - value) * ((shares - prevalence) @ chance_gradient)) / (
        1.0 - chance
    )
    se = float(np.sqrt(np.dot(influence, influence) / (n * (n - 1))))
    return _estimate(float(value), se, n, confidence, MULTI_RATER_INTERVAL)


def fleiss_kappa(counts: ArrayLike, *, confidence: float = 0.95) -> AgreementEstimate:
    """Fleiss' kappa for several graders per item, from an items x categories count matrix.

    With r_ik graders putting item i in category k, r_i = sum_k r_ik, n items (Fleiss 1971):

        P_i  = sum_k r_ik (r_ik - 1) / (r_i (r_i - 1))     agreement on item i
        pi_k = (1/n) sum_i r_ik / r_i                       prevalence of category k
        p_o  = (1/n) sum_i P_i,    p_e = sum_k pi_k^2,    kappa = (p_o - p_e) / (1 - p_e)

    With the same number of graders on every item this is exactly Fleiss (1971); items may
    also have different numbers (at least two each), as generalised by Gwet (2008).

    Interval: kappa +/- z * SE, clipped to [-1, 1], with the linearization variance of Gwet
    (2008), "Variance estimation of nominal-scale inter-rater reliability with random
    selection of raters" (items a random sample, graders fixed, no finite-population
    correction):

        Var = (1 / (n (n - 1))) sum_i u_i^2,
        u_i = [ (P_i - p_o) - 2 (1 - kappa) (sum_k pi_k r_ik / r_i - p_e) ] / (1 - p_e)

    Fleiss' own 1971 variance holds only under kappa = 0, so it serves tests of "no
    agreement", not intervals. ``value`` is ``None`` when p_e = 1 (every verdict in one
    category). Build ``counts`` with :func:`verdict_counts`.
    """
    return _multi_rater(counts, confidence, "fleiss")


def gwet_ac1(counts: ArrayLike, *, confidence: float = 0.95) -> AgreementEstimate:
    """Gwet's AC1 for two or more graders per item, from an items x categories count matrix.

    Same observed agreement p_o and prevalences pi_k as :func:`fleiss_kappa`; with q the
    number of categories on the scale (the number of columns of ``counts``), chance
    agreement is (Gwet 2008):

        p_e = (1 / (q - 1)) sum_k pi_k (1 - pi_k),    AC1 = (p_o - p_e) / (1 - p_e)

    Kappa's chance term sum_k pi_k^2 approaches 1 when nearly every verdict falls in one
    category, so kappa collapses even when graders almost always agree; AC1's chance term
    then approaches 0 and AC1 stays near p_o. Use it where prevalence is extreme (see
    docs/statistics.md, "Agreement between graders"). Note that AC1 depends on q: an unused
    category column still counts, which is why :func:`verdict_counts` always emits the full
    scale.

    Interval: AC1 +/- z * SE, clipped to [-1, 1], with Gwet's (2008) linearization variance
    (items sampled, graders fixed):

        Var = (1 / (n (n - 1))) sum_i u_i^2,
        u_i = [ (P_i - p_o) - 2 (1 - AC1) (pe_i - p_e) ] / (1 - p_e),
        pe_i = (1 / (q - 1)) sum_k (r_ik / r_i)(1 - pi_k)

    For two graders use rows of two verdicts each.
    """
    return _multi_rater(counts, confidence, "gwet")


# --------------------------------------------------------------------------- gold items


def rater_accuracy_on_gold(verdicts: Sequence[str], gold: Sequence[str], *, confidence: float = 0.95) -> GoldAccuracy:
    """One grader's accuracy on gold items, with a Wilson interval.

    ``verdicts[i]`` is the grader's verdict on gold item i and ``gold[i]`` its known label
    (``"correct"`` or ``"incorrect"``; an ``"unsure"`` gold label is an error). An
    ``"unsure"`` verdict is no vote: it is left out of the accuracy and counted in
    ``unsure``. With k verdicts matching gold among m votes:

        accuracy = k / m,   interval = Wilson (1927) score interval for k of m

    computed by statsmodels ``proportion_confint(method="wilson")``. ``accuracy`` is ``None``
    when the grader cast no vote. Returns ``{gold_items, voted, unsure, agreed, accuracy:
    {value, low, high} | None, confidence, interval: "wilson"}``.
    """
    from statsmodels.stats.proportion import proportion_confint

    _check_confidence(confidence)
    if len(verdicts) != len(gold):
        raise ValueError("one verdict per gold item")
    unknown = set(verdicts) - set(VERDICTS)
    if unknown:
        raise ValueError(f"unknown verdicts: {sorted(unknown)}")
    if set(gold) - {"correct", "incorrect"}:
        raise ValueError("gold labels must be 'correct' or 'incorrect'")
    votes = [(v, g) for v, g in zip(verdicts, gold, strict=True) if v != "unsure"]
    agreed = sum(v == g for v, g in votes)
    accuracy: Proportion | None = None
    if votes:
        low, high = proportion_confint(agreed, len(votes), alpha=1.0 - confidence, method="wilson")
        accuracy = {"value": agreed / len(votes), "low": float(low), "high": float(high)}
    return {
        "gold_items": len(gold),
        "voted": len(votes),
        "unsure": len(gold) - len(votes),
        "agreed": agreed,
        "accuracy": accuracy,
        "confidence": confidence,
        "interval": "wilson",
    }


# --------------------------------------------------------------------------- claims clustered in answers

CLAIM_VERDICTS: tuple[str, ...] = ("supported", "unsupported", "unverifiable")
"""The claim grading scale of long answers, in the column order of a claims x categories matrix."""

CLUSTER_INTERVAL = "percentile cluster bootstrap over answers (claims resampled with their answer)"


def clustered_fleiss_kappa(
    counts: ArrayLike,
    answers: Sequence[int],
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> AgreementEstimate:
    """Fleiss' kappa over claims, with an interval that treats the answers as the sampled units.

    ``counts`` is the claims x categories matrix (build it with :func:`verdict_counts` and
    :data:`CLAIM_VERDICTS`; ``"unverifiable"`` is a category here, as ``"unsure"`` is for
    answers: two graders who both find a claim unverifiable agree). ``answers[i]`` names the
    answer claim i belongs to. The coefficient is :func:`fleiss_kappa`'s, every claim one
    item (Fleiss 1971).

    Claims of one answer are not independent: the same graders read them together, against
    the same passages, so agreement on one says something about its neighbours. The
    linearised variance of :func:`fleiss_kappa` treats every claim as drawn on its own and
    reads too narrow when claims cluster. The interval here is the percentile bootstrap
    over clusters (Davison & Hinkley 1997, section 3.8; Field & Welsh 2007, "Bootstrapping
    clustered data"): each resample draws as many answers as were graded, with replacement,
    takes all their claims, and recomputes kappa; the interval is the resamples'
    (1 - confidence)/2 and (1 + confidence)/2 quantiles, clipped to [-1, 1]. ``se`` is the
    resamples' standard deviation. Resamples whose chance term is 1 (every verdict in one
    category) are left out. Fixed ``seed``: the same grades give the same interval.
    No interval with fewer than two answers.
    """
    _check_confidence(confidence)
    table = _rating_table(counts)
    clusters = np.asarray(answers)
    if clusters.shape != (table.shape[0],):
        raise ValueError("one answer per claim")
    point = fleiss_kappa(table, confidence=confidence)
    value = point["value"]
    _, cluster_index = np.unique(clusters, return_inverse=True)
    n_clusters = int(cluster_index.max()) + 1 if len(cluster_index) else 0
    if value is None or n_clusters < 2:
        return _estimate(value, None, table.shape[0], confidence, CLUSTER_INTERVAL)
    raters = table.sum(axis=1)
    agreement_by_claim = (table * (table - 1.0)).sum(axis=1) / (raters * (raters - 1.0))
    shares = table / raters[:, None]
    # Per answer: its claims' count, their agreement summed, their category shares summed. A
    # resample is then a vector of answer multiplicities, and kappa's parts are weighted sums.
    size = np.bincount(cluster_index, minlength=n_clusters).astype(float)
    agreement_sum = np.bincount(cluster_index, weights=agreement_by_claim, minlength=n_clusters)
    share_sum = np.stack(
        [np.bincount(cluster_index, weights=shares[:, k], minlength=n_clusters) for k in range(table.shape[1])],
        axis=1,
    )
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(n_clusters, np.full(n_clusters, 1.0 / n_clusters), size=resamples).astype(float)
    claims = weights @ size
    observed = (weights @ agreement_sum) / claims
    prevalence = (weights @ share_sum) / claims[:, None]
    chance = (prevalence**2).sum(axis=1)
    usable = chance < 1.0 - 1e-12
    kappas = (observed[usable] - chance[usable]) / (1.0 - chance[usable])
    if len(kappas) < 2:
        return _estimate(value, None, table.shape[0], confidence, CLUSTER_INTERVAL)
    low, high = np.quantile(kappas, [(1.0 - confidence) / 2.0, (1.0 + confidence) / 2.0])
    result = _estimate(value, float(np.std(kappas, ddof=1)), table.shape[0], confidence, CLUSTER_INTERVAL)
    result["low"] = max(-1.0, float(low))
    result["high"] = min(1.0, float(high))
    return result
