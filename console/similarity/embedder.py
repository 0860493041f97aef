"""The built-in question embedder: TF-IDF over words and character n-grams, reduced with
truncated SVD (latent semantic analysis), for routes whose integrator sends no vectors.

It needs no downloaded weights and works offline. What it captures, honestly: questions that
share vocabulary (words, word pairs, word pieces, so "password"/"passwords" and small typos
still meet) and words that co-occur across the route's questions. It does not know that "sick
leave" and "time off when ill" mean the same unless the route's own questions join them; real
paraphrase needs a neural embedding, which the integrator can send as `question_embedding`
(README, "Similar refusals and corpus gaps").

Vectors are L2-normalised, so cosine similarity is a dot product, and padded with zeros to
`DIMENSION` when a small route allows fewer SVD components (zeros change no cosine).
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

import numpy as np

# scikit-learn and joblib are imported inside the functions that use them, so web and worker
# processes that never fit or load an embedder do not carry them in memory (bench/memory.py).
if TYPE_CHECKING:
    from sklearn.pipeline import Pipeline

DIMENSION = 256
# Caps on the vocabulary keep a stored model about ten MB (components x features, float16 as stored).
WORD_FEATURES = 20_000
CHAR_FEATURES = 30_000


def fit(questions: list[str], *, dimension: int = DIMENSION, seed: int = 0) -> Pipeline:
    """Fit the TF-IDF + SVD pipeline on a route's questions (at least 2)."""
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.pipeline import FeatureUnion, Pipeline

    if len(questions) < 2:
        raise ValueError("the built-in embedder needs at least 2 questions")
    features = FeatureUnion(
        [
            (
                "words",
                TfidfVectorizer(
                    analyzer="word",
                    ngram_range=(1, 2),
                    sublinear_tf=True,
                    min_df=1,
                    max_features=WORD_FEATURES,
                    dtype=np.float32,
                ),
            ),
            (
                "chars",
                TfidfVectorizer(
                    analyzer="char_wb",
                    ngram_range=(3, 5),
                    sublinear_tf=True,
                    min_df=1,
                    max_features=CHAR_FEATURES,
                    dtype=np.float32,
                ),
            ),
        ]
    )
    matrix = features.fit_transform(questions)
    components = max(1, min(dimension, matrix.shape[0] - 1, matrix.shape[1] - 1))
    svd = TruncatedSVD(n_components=components, algorithm="randomized", n_iter=3, random_state=seed)
    with np.errstate(divide="ignore", invalid="ignore"):  # identical questions: explained variance 0/0
        svd.fit(matrix)
    # Stored as float16 (see `dumps`); rounded here already so that the vectors made with the model
    # in hand equal those made later with the stored one.
    svd.components_ = svd.components_.astype(np.float16).astype(np.float32)
    return Pipeline([("features", features), ("svd", svd)])


def components(model: Pipeline) -> int:
    return int(model.named_steps["svd"].n_components)


def transform(model: Pipeline, questions: list[str], *, dimension: int = DIMENSION) -> np.ndarray:
    """Unit vectors of `dimension` float32 numbers, one row per question (a zero row when a
    question shares nothing with the fitted vocabulary)."""
    reduced = np.asarray(model.transform(questions), dtype=np.float32)
    out = np.zeros((len(questions), dimension), dtype=np.float32)
    out[:, : reduced.shape[1]] = reduced
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out


def dumps(model: Pipeline) -> bytes:
    """The model, joblib-serialised with its SVD components as float16: they are nearly all of
    its bytes (components x features), and half precision moves a unit vector's cosines by about
    1e-4, which leaves the neighbours as they were (bench/README.md, storage)."""
    import joblib

    svd = model.named_steps["svd"]
    full = svd.components_
    svd.components_ = full.astype(np.float16)
    try:
        buffer = io.BytesIO()
        joblib.dump(model, buffer, compress=3)
    finally:
        svd.components_ = full
    return buffer.getvalue()


def loads(data: bytes) -> Pipeline:
    import joblib

    model = joblib.load(io.BytesIO(bytes(data)))
    svd = model.named_steps["svd"]
    svd.components_ = svd.components_.astype(np.float32)  # float16 as stored (float32 before)
    return model
