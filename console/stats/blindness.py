"""Blindness probe: can the origin of an answer (served, or written for a refused question) be told
from what a grader sees?

The false-abstention rate is estimated from blind grades of the answers the gate withheld. If the
withheld answers look different from the served ones (another generator, a telltale opening, text
copied verbatim from the passages), a grader learns which items were refused, and a grader who
knows an item was refused tends to mark it harshly: the rate comes out too low. This module asks
a classifier to make that guess, from the grader's view only.

Method. Each item becomes one row of features (`grader_view_features` plus the answer's words):

* TF-IDF of the answer's words and word pairs (sublinear term frequency, words in at least two
  answers);
* the answer's opening: its first two words, as one token ("opens with 'i believe'");
* shape: share of the answer's sentences found verbatim (case and spacing aside) in the passages
  shown, share of its words found anywhere in those passages, its length in words (log scale) and
  its number of sentences.

Features that compare the answer with the question (does it address what was asked?) are left out
on purpose: a gate that works refuses mostly wrong answers, so relevance predicts the origin even
when blinding holds. The passage-support features stay because a copied or paraphrased style shows
there; a reviewer reading the strongest features can tell style from substance.

A logistic regression (scikit-learn, L2, C = 1, liblinear) is fitted in stratified K-fold cross-validation
(shuffled with a fixed seed); every item gets a probability of "refused" from the model that did
not see it (`sklearn.model_selection.cross_val_predict`). The AUROC of those out-of-fold
probabilities against the origin is the probe's reading: 0.5 means graders cannot tell from the
answer's form, 1 means they can without fail. AUROC is the Mann-Whitney form with ties counted 1/2
(`console.stats.calibration.auroc`, equal to `sklearn.metrics.roc_auc_score`).

Interval: percentile bootstrap (Efron & Tibshirani 1993, ch. 13) over items, resampling served and
refused items separately so each resample keeps both classes and their counts, `resamples` times
with a fixed seed. It is conditional on the fitted folds (the models are not refitted per
resample), so it reflects the sampling of items, not the variability of fitting; cheap and stable
enough to flag a leak. The warning is raised when the interval's lower end is above 0.6: the
probe then tells the origin better than chance with confidence, by a margin a person would notice.

Degenerate inputs answer without a figure rather than fail: fewer than `MIN_PER_CLASS` items of
either origin (a single origin included) is `TOO_FEW_ITEMS`; features that take one value over all
items (identical answers, answers of numbers, punctuation or emoji only) is `NO_VARIATION`, since
out-of-fold probabilities would then differ only by each fold's class balance. A text with no term
to keep (every opening different, as in an "Option N is under ..." template) adds no column
(`console.stats._optional_text`). A reading is told in three states (`probe_sign`): no sign (the
interval includes 0.5), a weak sign (it excludes 0.5, the lower end not above 0.6), the warning.

Strongest features: the model refitted on all items; each coefficient is multiplied by its
feature's standard deviation over the items (the standardized coefficient, comparable across word
and shape features); the largest in absolute value are named in words with the side they lean to.

The method, its choices and the demo's readings: docs/statistics.md, "Blindness probe".
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import ArrayLike

from console.stats.calibration import auroc as mann_whitney_auroc
from console.stats.intervals import Interval

# scikit-learn is imported inside the functions that use it: only the blindness probe needs it, and
# every other process (web workers serving other pages, the job workers) stays without it (bench/memory.py).
if TYPE_CHECKING:
    from sklearn.pipeline import Pipeline

MIN_PER_CLASS = 20
WARNING_LOW = 0.6
FOLDS = 5
RESAMPLES = 2000
SEED = 20261130
TOP_FEATURES = 5

_WORD = re.compile(r"\w+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_SPACE = re.compile(r"\s+")

SHAPE_FEATURES = {
    "verbatim_sentence_share": "share of the answer's sentences copied verbatim from the passages",
    "passage_word_share": "share of the answer's words found in the passages",
    "log_words": "length of the answer (words)",
    "sentences": "number of sentences in the answer",
}


@dataclass(frozen=True)
class GraderView:
    """What a grader sees of one item (the question, the answer under review, the passages)."""

    question: str
    answer: str
    passages: tuple[str, ...] = ()


def _normalised(text: str) -> str:
    return _SPACE.sub(" ", text.casefold()).strip()


def answer_sentences(answer: str) -> list[str]:
    """Sentences of an answer: split after ., ! or ? followed by white space; empty pieces dropped."""
    return [s for s in (piece.strip() for piece in _SENTENCE_END.split(answer.strip())) if s]


def opening(answer: str, words: int = 2) -> str:
    """The answer's first `words` words, case-folded and joined by one space."""
    return " ".join(_WORD.findall(answer.casefold())[:words])


def grader_view_features(view: GraderView) -> dict[str, float]:
    """The shape features of one item (names and meanings in `SHAPE_FEATURES`).

    * verbatim_sentence_share = (sentences of the answer that occur, case-folded and with runs of
      white space made one space, inside some passage) / (sentences of the answer); 0 for an
      empty answer;
    * passage_word_share = (word tokens of the answer whose case-folded form occurs as a word in
      some passage) / (word tokens of the answer); 0 for an answer without words;
    * log_words = ln(1 + word tokens of the answer);
    * sentences = number of sentences (`answer_sentences`).
    """
    passages = [_normalised(p) for p in view.passages]
    sentences = answer_sentences(view.answer)
    verbatim = sum(any(_normalised(s) in p for p in passages) for s in sentences)
    words = _WORD.findall(view.answer.casefold())
    passage_words = {w for p in passages for w in _WORD.findall(p)}
    return {
        "verbatim_sentence_share": verbatim / len(sentences) if sentences else 0.0,
        "passage_word_share": sum(w in passage_words for w in words) / len(words) if words else 0.0,
        "log_words": math.log1p(len(words)),
        "sentences": float(len(sentences)),
    }


def feature_table(views: Sequence[GraderView]) -> np.ndarray:
    """One row per item: the answer, its opening, then the shape features in `SHAPE_FEATURES` order.

    An object array, so the model's column transformer can hand text columns to the vectorizers
    and the numeric ones to the scaler.
    """
    table = np.empty((len(views), 2 + len(SHAPE_FEATURES)), dtype=object)
    for row, view in enumerate(views):
        shape = grader_view_features(view)
        table[row, 0] = view.answer
        table[row, 1] = opening(view.answer)
        table[row, 2:] = [shape[name] for name in SHAPE_FEATURES]
    return table


def _whole_text(text: str) -> list[str]:
    return [text] if text else []


def probe_model(seed: int = SEED) -> Pipeline:
    """The classifier: TF-IDF of the answer + opening + scaled shape features -> logistic regression."""
    from sklearn.compose import ColumnTransformer
    from sklearn.feature_extraction.text import CountVectorizer, TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    from console.stats._optional_text import OptionalText

    # Either text may have no term to keep (answers of numbers or emoji only; openings that are all
    # different, as in "Option 7 is under ..."): it then adds no column instead of failing.
    words = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True, max_features=20_000)
    # The opening as one token: CountVectorizer with a whole-string analyzer.
    openings = CountVectorizer(analyzer=_whole_text, binary=True, min_df=2)
    features = ColumnTransformer(
        [
            ("answer", OptionalText(words), 0),
            ("opening", OptionalText(openings), 1),
            ("shape", StandardScaler(), list(range(2, 2 + len(SHAPE_FEATURES)))),
        ]
    )
    return Pipeline(
        [
            ("features", features),
            ("model", LogisticRegression(C=1.0, solver="liblinear", max_iter=2000, random_state=seed)),
        ]
    )


@dataclass(frozen=True)
class Feature:
    """One of the strongest features: what it is in words, its standardized weight, where it leans."""

    name: str
    weight: float
    leans: str  # "refused" (more common in answers written for refused questions) or "served"

    def as_dict(self) -> dict[str, object]:
        return {"feature": self.name, "weight": round(self.weight, 4), "leans": self.leans}


# Why a probe gives no figure (`BlindnessProbe.reason`); None when it gives one.
TOO_FEW_ITEMS = "too_few_items"  # fewer than MIN_PER_CLASS of either origin (one origin only included)
NO_VARIATION = "no_variation"  # every item has the same features: nothing to tell the origins by

# What a reading says (`probe_sign`).
SIGN_NONE = "none"
SIGN_WEAK = "weak"
SIGN_WARNING = "warning"


def probe_sign(auroc: Interval) -> str | None:
    """The reading in three states (docs/statistics.md, "Blindness probe"):

    * "warning" when the interval's lower end is above `WARNING_LOW` (0.6);
    * "none" (no sign) only when the interval includes 0.5;
    * "weak" otherwise: the interval excludes 0.5 (above it, or below it: a model that guesses
      worse than chance out of fold) but stays under the warning line.

    None when there is no reading (an undefined interval).
    """
    if not auroc.is_defined:
        return None
    if auroc.low > WARNING_LOW:
        return SIGN_WARNING
    if auroc.low <= 0.5 <= auroc.high:
        return SIGN_NONE
    return SIGN_WEAK


@dataclass(frozen=True)
class BlindnessProbe:
    """The probe's reading. `auroc` is undefined when `reason` says why: `enough` false below
    `MIN_PER_CLASS` per class (`TOO_FEW_ITEMS`), or every item's features alike (`NO_VARIATION`)."""

    n_served: int
    n_refused: int
    enough: bool
    auroc: Interval
    warning: bool
    features: list[Feature]
    folds: int
    resamples: int
    confidence: float
    seed: int
    out_of_fold: np.ndarray = field(repr=False)  # probability of "refused", one per item, in input order
    reason: str | None = None

    @classmethod
    def without_reading(
        cls,
        n_served: int,
        n_refused: int,
        *,
        reason: str,
        folds: int = FOLDS,
        resamples: int = RESAMPLES,
        confidence: float = 0.95,
        seed: int = SEED,
    ) -> BlindnessProbe:
        """No figure, no warning, and the `reason` (TOO_FEW_ITEMS or NO_VARIATION)."""
        return cls(
            n_served,
            n_refused,
            reason != TOO_FEW_ITEMS,
            Interval.undefined(),
            False,
            [],
            folds,
            resamples,
            confidence,
            seed,
            np.full(n_served + n_refused, np.nan),
            reason,
        )

    @classmethod
    def too_few(
        cls,
        n_served: int,
        n_refused: int,
        *,
        folds: int = FOLDS,
        resamples: int = RESAMPLES,
        confidence: float = 0.95,
        seed: int = SEED,
    ) -> BlindnessProbe:
        """The answer when either origin has fewer than `MIN_PER_CLASS` items: no reading, no warning."""
        return cls.without_reading(
            n_served,
            n_refused,
            reason=TOO_FEW_ITEMS,
            folds=folds,
            resamples=resamples,
            confidence=confidence,
            seed=seed,
        )

    @property
    def n(self) -> int:
        return self.n_served + self.n_refused

    @property
    def sign(self) -> str | None:
        return probe_sign(self.auroc)

    def as_dict(self) -> dict[str, object]:
        return {
            "n": self.n,
            "served": self.n_served,
            "refused": self.n_refused,
            "enough": self.enough,
            "reason": self.reason,
            "auroc": self.auroc.as_dict() if self.auroc.is_defined else None,
            "sign": self.sign,
            "warning": self.warning,
            "features": [f.as_dict() for f in self.features],
            "method": {
                "model": "logistic regression on TF-IDF of the answer, its opening and shape features",
                "folds": self.folds,
                "interval": "percentile bootstrap, stratified by origin",
                "resamples": self.resamples,
                "confidence": self.confidence,
                "seed": self.seed,
                "warning_when_low_above": WARNING_LOW,
                "min_per_class": MIN_PER_CLASS,
            },
        }


def bootstrap_auroc_interval(
    probabilities: ArrayLike,
    refused: ArrayLike,
    *,
    resamples: int = RESAMPLES,
    confidence: float = 0.95,
    seed: int = SEED,
) -> Interval:
    """AUROC with a percentile bootstrap interval, resampling each class separately.

    Each resample draws n_refused refused and n_served served items with replacement; the interval
    is the (1-c)/2 and (1+c)/2 quantiles of the resampled AUROCs (numpy's default linear
    interpolation). Efron & Tibshirani (1993), An Introduction to the Bootstrap, ch. 13.
    """
    scores = np.asarray(probabilities, dtype=float)
    positive = np.asarray(refused, dtype=bool)
    value = mann_whitney_auroc(scores, positive)
    if value is None:
        return Interval.undefined()
    rng = np.random.default_rng(seed)
    refused_at, served_at = np.flatnonzero(positive), np.flatnonzero(~positive)
    replicates = np.empty(resamples)
    labels = np.concatenate([np.ones(len(refused_at), bool), np.zeros(len(served_at), bool)])
    for r in range(resamples):
        drawn = np.concatenate([rng.choice(refused_at, len(refused_at)), rng.choice(served_at, len(served_at))])
        replicates[r] = mann_whitney_auroc(scores[drawn], labels)
    tail = (1 - confidence) / 2
    low, high = np.quantile(replicates, [tail, 1 - tail])
    return Interval(value, float(low), float(high))


def _feature_name(column: str) -> str:
    group, _, term = column.partition("__")
    if group == "answer":
        return f'the answer contains "{term}"'
    if group == "opening":
        return f'the answer opens with "{term}"'
    # ColumnTransformer names numeric columns x<index> of the whole table.
    index = int(term.removeprefix("x")) - 2
    return list(SHAPE_FEATURES.values())[index]


def _varies(transformed) -> bool:
    """Whether any feature column takes two values over the items (dense or sparse matrix)."""
    from scipy import sparse

    if transformed.shape[1] == 0:
        return False
    if sparse.issparse(transformed):
        spread = transformed.max(axis=0).toarray() - transformed.min(axis=0).toarray()
    else:
        spread = np.ptp(np.asarray(transformed, dtype=float), axis=0)
    return bool((np.abs(spread) > 1e-12).any())


def _strongest_features(model: Pipeline, transformed, top: int) -> list[Feature]:
    dense_mean = np.asarray(transformed.mean(axis=0)).ravel()
    squared = transformed.multiply(transformed) if hasattr(transformed, "multiply") else transformed**2
    spread = np.sqrt(np.maximum(np.asarray(squared.mean(axis=0)).ravel() - dense_mean**2, 0.0))
    weights = model.named_steps["model"].coef_.ravel() * spread
    names = model.named_steps["features"].get_feature_names_out()
    order = np.argsort(-np.abs(weights), kind="stable")[:top]
    return [
        Feature(_feature_name(str(names[i])), float(weights[i]), "refused" if weights[i] > 0 else "served")
        for i in order
        if weights[i] != 0
    ]


def blindness_probe(
    views: Sequence[GraderView],
    refused: ArrayLike,
    *,
    folds: int = FOLDS,
    resamples: int = RESAMPLES,
    confidence: float = 0.95,
    seed: int = SEED,
    top: int = TOP_FEATURES,
) -> BlindnessProbe:
    """How well the origin (`refused` true: the answer was written for a refused question) can be
    predicted from the grader's view; see the module docstring for the method."""
    origin = np.asarray(refused, dtype=bool)
    if origin.shape != (len(views),):
        raise ValueError(f"refused must have one entry per item ({len(views)}), got shape {origin.shape}")
    if not 0.5 <= confidence < 1:
        raise ValueError(f"confidence must lie in [0.5, 1), got {confidence!r}")
    n_refused = int(origin.sum())
    n_served = len(origin) - n_refused
    if min(n_refused, n_served) < max(MIN_PER_CLASS, folds):
        return BlindnessProbe.too_few(
            n_served, n_refused, folds=folds, resamples=resamples, confidence=confidence, seed=seed
        )
    table = feature_table(views)
    fitted = probe_model(seed).fit(table, origin)
    transformed = fitted.named_steps["features"].transform(table)
    if not _varies(transformed):
        # Every item looks the same to the model (identical answers, or answers whose only
        # difference is in characters no feature reads, such as emoji): out-of-fold probabilities
        # would differ only by each fold's class balance, a figure that means nothing.
        return BlindnessProbe.without_reading(
            n_served, n_refused, reason=NO_VARIATION, folds=folds, resamples=resamples, confidence=confidence, seed=seed
        )
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    probabilities = cross_val_predict(probe_model(seed), table, origin, cv=splitter, method="predict_proba")[:, 1]
    interval = bootstrap_auroc_interval(probabilities, origin, resamples=resamples, confidence=confidence, seed=seed)
    return BlindnessProbe(
        n_served,
        n_refused,
        True,
        interval,
        bool(interval.low > WARNING_LOW),
        _strongest_features(fitted, transformed, top),
        folds,
        resamples,
        confidence,
        seed,
        probabilities,
    )
