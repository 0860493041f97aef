"""Agreement over claims clustered in answers: the kappa is statsmodels' Fleiss kappa, and the cluster
bootstrap interval is recomputed here by a plain loop over resampled answers."""

import numpy as np
import pytest
from statsmodels.stats.inter_rater import fleiss_kappa as statsmodels_fleiss_kappa

from console.stats.agreement import CLAIM_VERDICTS, clustered_fleiss_kappa, fleiss_kappa, verdict_counts


def _graded_claims(answers: int, claims_per_answer: int, seed: int, *, clustered: bool):
    """Two graders per claim. Clustered: whether the graders agree is decided once per answer
    (some answers are hard for both), so claims of one answer move together."""
    rng = np.random.default_rng(seed)
    verdicts, clusters = [], []
    for answer in range(answers):
        agree_answer = rng.random() < 0.7
        for _ in range(claims_per_answer):
            first = CLAIM_VERDICTS[rng.choice(3, p=[0.7, 0.2, 0.1])]
            agree = agree_answer if clustered else rng.random() < 0.7
            second = first if agree else CLAIM_VERDICTS[rng.choice(3)]
            verdicts.append([first, second])
            clusters.append(answer)
    return verdict_counts(verdicts, CLAIM_VERDICTS), clusters


def test_the_kappa_over_claims_is_statsmodels_fleiss_kappa():
    counts, clusters = _graded_claims(40, 6, seed=1, clustered=True)
    result = clustered_fleiss_kappa(counts, clusters)
    assert result["value"] == pytest.approx(statsmodels_fleiss_kappa(counts), abs=1e-12)
    assert result["n"] == 240 and result["low"] < result["value"] < result["high"]


def test_the_interval_is_the_percentile_bootstrap_over_answers_recomputed_by_a_plain_loop():
    counts, clusters = _graded_claims(30, 5, seed=2, clustered=True)
    result = clustered_fleiss_kappa(counts, clusters, resamples=400, seed=7)
    clusters = np.asarray(clusters)
    rng = np.random.default_rng(7)
    weights = rng.multinomial(30, np.full(30, 1 / 30), size=400)  # the same draws, in the same order
    kappas = []
    for draw in weights:
        rows = np.concatenate([np.repeat(np.flatnonzero(clusters == a), times) for a, times in enumerate(draw)])
        kappas.append(statsmodels_fleiss_kappa(counts[rows]))
    low, high = np.quantile(kappas, [0.025, 0.975])
    assert result["low"] == pytest.approx(low, abs=1e-9) and result["high"] == pytest.approx(high, abs=1e-9)
    assert result["se"] == pytest.approx(np.std(kappas, ddof=1), abs=1e-9)


def test_with_one_claim_per_answer_the_bootstrap_agrees_with_the_linearised_interval():
    counts, clusters = _graded_claims(400, 1, seed=3, clustered=False)
    bootstrap = clustered_fleiss_kappa(counts, clusters, resamples=4000)
    linearised = fleiss_kappa(counts)
    assert bootstrap["high"] - bootstrap["low"] == pytest.approx(linearised["high"] - linearised["low"], rel=0.15)


def test_claims_that_move_together_widen_the_interval_beyond_the_one_that_treats_them_as_independent():
    counts, clusters = _graded_claims(40, 12, seed=4, clustered=True)
    bootstrap = clustered_fleiss_kappa(counts, clusters)
    independent = fleiss_kappa(counts)
    assert bootstrap["high"] - bootstrap["low"] > 1.5 * (independent["high"] - independent["low"])


def test_the_same_grades_give_the_same_interval_and_one_answer_gives_none():
    counts, clusters = _graded_claims(20, 4, seed=5, clustered=True)
    assert clustered_fleiss_kappa(counts, clusters) == clustered_fleiss_kappa(counts, clusters)
    single = clustered_fleiss_kappa(counts[:4], [0, 0, 0, 0])
    assert single["low"] is None and single["high"] is None
    with pytest.raises(ValueError):
        clustered_fleiss_kappa(counts, clusters[:-1])
