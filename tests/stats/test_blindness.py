"""The blindness probe against planted styles, scikit-learn and scipy's bootstrap."""

import random

import numpy as np
import pytest
from scipy.stats import bootstrap
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import StratifiedKFold, cross_val_predict

from console.stats.blindness import (
    NO_VARIATION,
    SEED,
    SHAPE_FEATURES,
    TOO_FEW_ITEMS,
    GraderView,
    blindness_probe,
    bootstrap_auroc_interval,
    feature_table,
    grader_view_features,
    opening,
    probe_model,
    probe_sign,
)
from console.stats.calibration import auroc
from console.stats.intervals import Interval

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


@pytest.mark.parametrize(
    "interval, sign",
    [
        (Interval(0.55, 0.45, 0.65), "none"),
        (Interval(0.60, 0.50, 0.70), "none"),  # an end at 0.5 still includes it
        (Interval(0.58, 0.52, 0.64), "weak"),
        (Interval(0.70, 0.60, 0.80), "weak"),  # the warning needs a lower end above 0.6
        (Interval(0.38, 0.30, 0.46), "weak"),  # below chance: the interval excludes 0.5 too
        (Interval(0.80, 0.61, 0.90), "warning"),
        (Interval.undefined(), None),
    ],
)
def test_the_reading_has_three_states_and_no_sign_needs_the_interval_to_include_chance(interval, sign):
    assert probe_sign(interval) == sign


def test_the_text_columns_are_scikit_learns_vectorizers_whenever_they_keep_a_term():
    """The wrapper that tolerates an empty vocabulary changes nothing when there is one."""
    from sklearn.compose import ColumnTransformer
    from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
    from sklearn.preprocessing import StandardScaler

    views, _ = same_generator(120, 0.5, seed=6)
    table = feature_table(views)
    plain = ColumnTransformer(
        [
            ("answer", TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True, max_features=20_000), 0),
            ("opening", CountVectorizer(analyzer=lambda t: [t] if t else [], binary=True, min_df=2), 1),
            ("shape", StandardScaler(), list(range(2, 2 + len(SHAPE_FEATURES)))),
        ]
    )
    ours = probe_model(SEED).named_steps["features"]
    np.testing.assert_allclose(ours.fit_transform(table).toarray(), plain.fit_transform(table).toarray())
    assert list(ours.get_feature_names_out()) == list(plain.get_feature_names_out())


def _views(answers: list[str]) -> list[GraderView]:
    return [GraderView("Where is the export?", a, PASSAGES) for a in answers]


def test_answers_sharing_one_template_give_a_reading_without_openings_or_an_error():
    answers = [f"Option {i} is under Settings > Billing > Export." for i in range(60)]
    probe = blindness_probe(_views(answers), [i >= 30 for i in range(60)])
    assert probe.reason is None and probe.auroc.is_defined
    assert not any("opens with" in f.name for f in probe.features)


@pytest.mark.parametrize(
    "answers",
    [
        pytest.param(["Open Settings and choose Reset."] * 60, id="identical"),
        pytest.param(["\U0001f600", "\U0001f44d"] * 30, id="emoji only"),
        pytest.param(["?"] * 60, id="punctuation only"),
        pytest.param([""] * 60, id="empty"),
    ],
)
def test_items_that_all_look_alike_give_no_figure_and_say_why(answers):
    probe = blindness_probe(_views(answers), [i % 2 == 0 for i in range(60)])
    assert probe.reason == NO_VARIATION and probe.enough
    assert not probe.auroc.is_defined and not probe.warning and probe.features == []
    document = probe.as_dict()
    assert document["auroc"] is None and document["sign"] is None and document["reason"] == NO_VARIATION


def test_numbers_only_answers_give_a_reading_or_say_why_not():
    probe = blindness_probe(_views([str(i) for i in range(60)]), [i >= 30 for i in range(60)])
    assert probe.reason in (None, NO_VARIATION)
    assert probe.auroc.is_defined == (probe.reason is None)


def test_a_single_origin_gives_no_figure():
    views, _ = same_generator(60, 0.5)
    probe = blindness_probe(views, [True] * 60)
    assert probe.reason == TOO_FEW_ITEMS and not probe.enough and probe.as_dict()["auroc"] is None
