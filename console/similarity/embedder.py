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
import struct
import zlib
from typing import TYPE_CHECKING

import numpy as np

# scikit-learn and joblib are imported inside the functions that use them, so web and worker
# processes that never fit or load an embedder do not carry them in memory (bench/memory.py).
if TYPE_CHECKING:
    from sklearn.pipeline import Pipeline

DIMENSION = 256
# Caps on the vocabulary keep a stored model a few MB (components x features, 12 bits each as stored).
WORD_FEATURES = 20_000
CHAR_FEATURES = 30_000


def _vectorizers():
    """TF-IDF of words and word pairs, and of character 3- to 5-grams within words."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    words = TfidfVectorizer(
        analyzer="word", ngram_range=(1, 2), sublinear_tf=True, min_df=1, max_features=WORD_FEATURES, dtype=np.float32
    )
    chars = TfidfVectorizer(
        analyzer="char_wb",
        ngram_range=(3, 5),
        sublinear_tf=True,
        min_df=1,
        max_features=CHAR_FEATURES,
        dtype=np.float32,
    )
    return words, chars


def preload() -> None:
    """Import what fitting, loading and applying a model needs. A worker that consumes the
    similarity queue calls it before forking its pool (console/similarity/tasks.py), so each child
    shares the imports instead of paying them on its first embedding job: seconds of CPU at a
    lowered priority on a busy machine (18.7 s measured), again whenever a grown child is replaced,
    while that batch's vectors and every batch behind it wait."""
    import joblib  # noqa: F401
    import sklearn.decomposition  # noqa: F401
    import sklearn.feature_extraction.text  # noqa: F401
    import sklearn.pipeline  # noqa: F401


def fit(questions: list[str], *, dimension: int = DIMENSION, seed: int = 0) -> Pipeline:
    """Fit the TF-IDF + SVD pipeline on a route's questions (at least 2)."""
    from sklearn.decomposition import TruncatedSVD
    from sklearn.pipeline import FeatureUnion, Pipeline

    if len(questions) < 2:
        raise ValueError("the built-in embedder needs at least 2 questions")
    words, chars = _vectorizers()
    features = FeatureUnion([("words", words), ("chars", chars)])
    try:
        matrix = features.fit_transform(questions)
    except ValueError:
        # No word at all (questions of digits, punctuation or emoji only: a word here is two word
        # characters or more): the character pieces alone still tell such questions apart.
        features = FeatureUnion([("chars", chars)])
        matrix = features.fit_transform(questions)
    components = max(1, min(dimension, matrix.shape[0] - 1, matrix.shape[1] - 1))
    svd = TruncatedSVD(n_components=components, algorithm="randomized", n_iter=3, random_state=seed)
    if matrix.shape[1] < 2:
        # One feature in all (every question is the same piece, such as "?"): TruncatedSVD needs
        # two, and the projection onto the only axis is the axis itself.
        svd.components_ = np.ones((1, 1), dtype=np.float32)
        svd.n_features_in_ = 1
    else:
        with np.errstate(divide="ignore", invalid="ignore"):  # identical questions: explained variance 0/0
            svd.fit(matrix)
    # Stored in 12 bits (see `dumps`); rounded here already so that the vectors made with the model
    # in hand equal those made later with the stored one.
    svd.components_ = _dequantized(*_quantized(svd.components_))
    return Pipeline([("features", features), ("svd", svd)])


def components(model: Pipeline) -> int:
    return int(model.named_steps["svd"].n_components)


# Questions transformed at a time. Each row's vector depends on its question alone; the n-gram
# counts of 5,000 questions at once held tens of MB of Python objects for a moment, and an
# after-ingest job's worker peaked past the size at which its process is replaced, taking the model
# it keeps between jobs with it (bench/README.md, "The model kept between jobs").
TRANSFORM_SLICE = 1_000


def transform(model: Pipeline, questions: list[str], *, dimension: int = DIMENSION) -> np.ndarray:
    """Unit vectors of `dimension` float32 numbers, one row per question (a zero row when a
    question shares nothing with the fitted vocabulary)."""
    out = np.zeros((len(questions), dimension), dtype=np.float32)
    for start in range(0, len(questions), TRANSFORM_SLICE):
        reduced = np.asarray(model.transform(questions[start : start + TRANSFORM_SLICE]), dtype=np.float32)
        out[start : start + len(reduced), : reduced.shape[1]] = reduced
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out


# The stored form: MAGIC, the length of the joblib-serialised pipeline (its SVD components left
# out), that pipeline, then the components (see `_pack`). Models stored before it are a bare
# joblib file with float16 components (float32 before that), and load as they were stored, so the
# vectors made with them still match.
MAGIC = b"ARC-SVD12\n"
_LEVELS = 2047  # each component's numbers become integers in [-2047, 2047]: 12 bits with the sign
# zlib's default. Level 9 spent 12 s of a refit's CPU on the high bytes of a 256 x 23,721 model
# (6 MB a plane) for 1% of the model's bytes: 1.02 MB against 1.09 at 6, in 0.4 s (bench/README.md).
_DEFLATE_LEVEL = 6


def _quantized(components: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row (component) as integers in [-_LEVELS, _LEVELS] and its float32 scale: a row's own
    scale keeps its small numbers as fine as its large ones allow."""
    scale = (np.abs(components).max(axis=1) / _LEVELS).astype(np.float32)
    scale[scale == 0] = 1
    levels = np.rint(components / scale[:, None]).astype(np.int16)
    return levels, scale


def _dequantized(levels: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Each row's levels times its scale, in float32. Levels already in float32 (an unpacked model's,
    `_unpack`) are scaled in place rather than copied: the same products, one array fewer."""
    components = levels.astype(np.float32, copy=False)
    components *= scale[:, None]
    return components


def _pack(components: np.ndarray) -> bytes:
    """The components in 12 bits: shape and scales, then the low and the high byte of every
    offset level, each plane deflated on its own. The high bytes hold 4 bits and deflate to a
    fraction of their size; mixed with the nearly random low bytes they would not."""
    levels, scale = _quantized(components)
    offset = (levels.astype(np.int32) + _LEVELS).astype(np.uint16)
    low = zlib.compress((offset & 0xFF).astype(np.uint8).tobytes(), _DEFLATE_LEVEL)
    high = zlib.compress((offset >> 8).astype(np.uint8).tobytes(), _DEFLATE_LEVEL)
    rows, columns = components.shape
    return struct.pack("<IIQ", rows, columns, len(low)) + scale.astype("<f4").tobytes() + low + high


def _unpack(data: memoryview) -> np.ndarray:
    rows, columns, low_size = struct.unpack_from("<IIQ", data)
    at = struct.calcsize("<IIQ")
    scale = np.frombuffer(data[at : at + 4 * rows], dtype="<f4").astype(np.float32)
    at += 4 * rows
    low = np.frombuffer(zlib.decompress(data[at : at + low_size]), dtype=np.uint8)
    high = np.frombuffer(zlib.decompress(data[at + low_size :]), dtype=np.uint8)
    # The levels are built in one float32 array (a level is a whole number below 2^12, exact in
    # float32) and scaled in it: each step of integer arithmetic made an array of its own, and an
    # after-ingest job's worker unpacking a 256 x 23,721 model peaked about 110 MB above where it
    # started (bench/README.md, "The model kept between jobs"), past the size at which its process is
    # replaced.
    levels = high.astype(np.float32)
    levels *= 256
    levels += low
    levels -= _LEVELS
    return _dequantized(levels.reshape(rows, columns), scale)


def dumps(model: Pipeline) -> bytes:
    """The model with its SVD components in 12 bits each: they are nearly all of its bytes
    (components x features), and 12 bits leave the neighbours as they were. Measured on
    bench/storage.py's 20,000 questions (bench/README.md): 5.9 MB instead of 10.4 in float16; of
    each question's ten nearest under float32 components, 0.1% change, against 0.07% for storing
    the vectors themselves in half precision, as the console does."""
    import joblib

    svd = model.named_steps["svd"]
    full = svd.components_
    svd.components_ = None
    try:
        buffer = io.BytesIO()
        joblib.dump(model, buffer, compress=3)
    finally:
        svd.components_ = full
    pipeline = buffer.getvalue()
    return MAGIC + struct.pack("<Q", len(pipeline)) + pipeline + _pack(full)


def loads(data: bytes) -> Pipeline:
    import joblib

    data = memoryview(bytes(data))
    if data[: len(MAGIC)] != MAGIC:
        model = joblib.load(io.BytesIO(data))
        svd = model.named_steps["svd"]
        svd.components_ = svd.components_.astype(np.float32)  # float16 as stored (float32 before)
        return model
    at = len(MAGIC)
    (size,) = struct.unpack_from("<Q", data, at)
    at += 8
    model = joblib.load(io.BytesIO(data[at : at + size]))
    model.named_steps["svd"].components_ = _unpack(data[at + size :])
    return model
