"""The blindness probe against planted styles, scikit-learn and scipy's bootstrap."""

import random

import numpy as np
import pytest
from scipy.stats import bootstrap
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold, cross_val_predict

from console.stats.blindness import (
    SEED,
    GraderView,
    blindness_probe,
    bootstrap_auroc_interval,
    feature_table,
    grader_view_features,
    opening,
    probe_model,
)
from console.stats.calibration import auroc

WORDS = (
    "open settings security choose reset portal badge number client install share recycle bin days "
    "password expire page laptop request device manager approve holiday travel receipt"
).split()
PASSAGES = (
    "Open Settings and choose Reset. You will be asked to sign in again.",
    "The VPN client is installed from the portal.  Sign in with your badge number.",
)


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 14))).capitalize() + "."


def same_generator(n: int, refused_share: float, seed: int = 3) -> tuple[list[GraderView], list[bool]]:
    rng = random.Random(seed)
    views = [GraderView("How do I reset it?", sentence(rng), PASSAGES) for _ in range(n)]
    return views, [rng.random() < refused_share for _ in range(n)]


def test_shape_features_count_verbatim_sentences_and_passage_words():
    view = GraderView("q", "You will be asked to SIGN in again. Call the desk.", PASSAGES)
    features = grader_view_features(view)
    assert features["verbatim_sentence_share"] == 0.5
    # Of "you will be asked to sign in again call the desk" all but "call" and "desk" occur there.
    assert features["passage_word_share"] == pytest.approx(9 / 11)
    assert features["sentences"] == 2
    assert features["log_words"] == pytest.approx(np.log1p(11))


def test_white_space_runs_do_not_hide_a_copied_sentence():
    view = GraderView("q", "The VPN client is installed\nfrom the portal. Sign in with your badge number.", PASSAGES)
    assert grader_view_features(view)["verbatim_sentence_share"] == 1.0


def test_an_empty_answer_has_zero_shares_rather_than_an_error():
    features = grader_view_features(GraderView("q", "", ()))
    assert features == {"verbatim_sentence_share": 0.0, "passage_word_share": 0.0, "log_words": 0.0, "sentences": 0.0}


def test_the_opening_is_the_first_two_words_case_folded():
    assert opening("I believe you can reset it.") == "i believe"
    assert opening("Yes") == "yes"


def test_a_telltale_prefix_on_refused_answers_is_found_and_warned_about():
    rng = random.Random(1)
    views, refused = [], []
    for _ in range(400):
        is_refused = rng.random() < 0.3
        answer = ("I believe you can " if is_refused else "") + sentence(rng)
        views.append(GraderView("How do I reset it?", answer, PASSAGES))
        refused.append(is_refused)
    probe = blindness_probe(views, refused)
    assert probe.enough
    assert probe.auroc.value > 0.97
    assert probe.auroc.low > 0.9
    assert probe.warning
    assert probe.features[0].name == 'the answer opens with "i believe"'
    assert probe.features[0].leans == "refused"


def test_refused_answers_copied_from_the_passages_are_found_by_the_verbatim_share():
    rng = random.Random(2)
    copied = [s for p in PASSAGES for s in p.split(".  ") if s]
    views, refused = [], []
    for _ in range(300):
        is_refused = rng.random() < 0.4
        answer = rng.choice(PASSAGES).split(". ")[0] + "." if is_refused else sentence(rng)
        views.append(GraderView("q", answer, PASSAGES))
        refused.append(is_refused)
    probe = blindness_probe(views, refused)
    assert copied and probe.warning and probe.auroc.value > 0.95
    names = [f.name for f in probe.features]
    assert "share of the answer's sentences copied verbatim from the passages" in names


def test_answers_from_the_same_generator_read_near_chance_without_a_warning():
    views, refused = same_generator(500, 0.3)
    probe = blindness_probe(views, refused)
    assert probe.enough
    assert abs(probe.auroc.value - 0.5) < 0.1
    assert probe.auroc.low < 0.5 < probe.auroc.high
    assert not probe.warning


def test_the_reading_is_sklearns_auroc_of_sklearns_out_of_fold_probabilities():
    views, refused = same_generator(300, 0.4, seed=5)
    rng = random.Random(9)
    views = [
        GraderView(v.question, ("Sure. " if r and rng.random() < 0.5 else "") + v.answer, v.passages)
        for v, r in zip(views, refused, strict=True)
    ]
    probe = blindness_probe(views, refused)
    reference = cross_val_predict(
        probe_model(SEED),
        feature_table(views),
        np.array(refused),
        cv=StratifiedKFold(5, shuffle=True, random_state=SEED),
        method="predict_proba",
    )[:, 1]
    np.testing.assert_allclose(probe.out_of_fold, reference)
    assert probe.auroc.value == pytest.approx(roc_auc_score(refused, probe.out_of_fold), abs=1e-12)
    assert 0.6 < probe.auroc.value < 1


def test_the_same_inputs_give_the_same_reading():
    views, refused = same_generator(200, 0.5, seed=4)
    assert blindness_probe(views, refused).as_dict() == blindness_probe(views, refused).as_dict()


def test_the_bootstrap_interval_agrees_with_scipys_percentile_bootstrap_of_two_samples():
    rng = np.random.default_rng(0)
    refused = rng.random(400) < 0.3
    scores = rng.normal(size=400) + 0.6 * refused
    ours = bootstrap_auroc_interval(scores, refused, resamples=4000, seed=1)

    def two_sample_auroc(refused_scores, served_scores):
        both = np.concatenate([refused_scores, served_scores])
        return auroc(both, np.arange(len(both)) < len(refused_scores))

    theirs = bootstrap(
        (scores[refused], scores[~refused]),
        two_sample_auroc,
        paired=False,
        vectorized=False,
        n_resamples=4000,
        method="percentile",
        confidence_level=0.95,
        random_state=2,
    )
    assert ours.value == pytest.approx(roc_auc_score(refused, scores), abs=1e-12)
    assert ours.low == pytest.approx(theirs.confidence_interval.low, abs=0.01)
    assert ours.high == pytest.approx(theirs.confidence_interval.high, abs=0.01)


def test_too_few_items_of_a_class_give_no_reading_and_no_warning():
    views, _ = same_generator(100, 0.5)
    refused = [i < 12 for i in range(100)]
    probe = blindness_probe(views, refused)
    assert not probe.enough and not probe.warning and probe.features == []
    document = probe.as_dict()
    assert document["auroc"] is None and document["n"] == 100 and document["refused"] == 12


def test_a_mismatched_origin_is_refused():
    views, _ = same_generator(10, 0.5)
    with pytest.raises(ValueError):
        blindness_probe(views, [True] * 9)
