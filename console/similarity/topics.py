"""Clustering of question vectors and the top terms of each cluster; pure numpy/scikit-learn."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# scikit-learn is imported inside the functions that use it (bench/memory.py: memory at rest).

# Fewer refusals than this form no group: the smallest cluster HDBSCAN is asked for has 3 members.
MIN_REFUSALS = 3


@dataclass
class Clusters:
    labels: np.ndarray  # cluster of each row, -1 for none
    centres: np.ndarray  # unit vectors, one row per cluster
    sampled: int


def normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


def cosine_distances(unit: np.ndarray) -> np.ndarray:
    """1 - cos between every pair of unit rows, exactly symmetric with a zero diagonal, as HDBSCAN
    demands of a precomputed matrix.

    The rows are multiplied by their own transpose from one array: numpy then calls BLAS's
    symmetric product (syrk), which computes one triangle and mirrors it. Two copies of the same
    rows go through the general product instead, whose blocks can round the two halves
    differently (by 4e-7 with OpenBLAS on an AMD EPYC), and HDBSCAN then refuses the matrix.
    """
    similarity = unit @ unit.T
    distances = np.clip(1.0 - similarity, 0.0, 2.0).astype(np.float64)
    np.fill_diagonal(distances, 0.0)
    return distances


def _one_group(unit: np.ndarray, min_size: int, one_group_min: float | None) -> np.ndarray | None:
    """Labels (0 or -1) making one group of the rows within `one_group_min` cosine of their mean
    direction, when they are at least `min_size` and every row with a direction is among them;
    None otherwise. Rows without a direction (zero vectors) stay out."""
    if one_group_min is None:
        return None
    directed = np.linalg.norm(unit, axis=1) > 0
    if directed.sum() < min_size:
        return None
    centre = normalise(unit[directed].mean(axis=0, keepdims=True))[0]
    close = directed & (unit @ centre >= one_group_min)
    if close.sum() != directed.sum():
        return None
    return np.where(close, 0, -1).astype(np.int64)


def cluster(
    vectors: np.ndarray,
    *,
    sample_max: int = 5_000,
    min_cluster_size: int | None = None,
    seed: int = 0,
    one_group_min: float | None = None,
) -> Clusters:
    """HDBSCAN over cosine distance on a random sample of at most `sample_max` unit vectors; every other row joins its
    nearest centre when it is at least as close as the farthest sampled member of that cluster,
    otherwise it stays unclustered.

    HDBSCAN (Campello, Moulavi and Sander 2013; scikit-learn's implementation) needs no number of
    clusters and leaves diffuse points as noise, which is what a long tail of one-off refusals is.
    It never names the whole sample as one cluster (scikit-learn's `allow_single_cluster` is off,
    and turned on it also makes groups of random points): when it finds none and every sampled
    row with a direction lies within `one_group_min` cosine of their mean direction (the same
    question asked again and again), those rows are one group. Zero vectors (questions the
    embedder cannot place) join no group.
    """
    from sklearn.cluster import HDBSCAN

    unit = normalise(vectors)
    n = len(unit)
    rng = np.random.default_rng(seed)
    sample = np.sort(rng.choice(n, size=sample_max, replace=False)) if n > sample_max else np.arange(n)
    labels = np.full(n, -1, dtype=np.int64)
    if len(sample) < MIN_REFUSALS:
        return Clusters(labels, np.zeros((0, unit.shape[1]), dtype=np.float32), len(sample))
    size = min_cluster_size or max(5, len(sample) // 200)
    # A precomputed cosine-distance matrix: tree searches degrade to brute force in hundreds of
    # dimensions, and 5,000 x 5,000 distances are one matrix product (200 MB at most).
    distances = cosine_distances(unit[sample])
    model = HDBSCAN(
        min_cluster_size=min(size, len(sample)), min_samples=min(5, len(sample)), metric="precomputed", copy=False
    )
    sample_labels = model.fit_predict(distances)
    del distances
    ids = sorted(set(sample_labels.tolist()) - {-1})
    if not ids:
        whole = _one_group(unit[sample], min(size, len(sample)), one_group_min)
        if whole is None:
            return Clusters(labels, np.zeros((0, unit.shape[1]), dtype=np.float32), len(sample))
        sample_labels, ids = whole, [0]
    remap = {old: new for new, old in enumerate(ids)}
    sample_labels = np.array([remap.get(label, -1) for label in sample_labels.tolist()], dtype=np.int64)
    members = unit[sample]
    centres = normalise(np.stack([members[sample_labels == c].mean(axis=0) for c in range(len(ids))]))
    floors = np.zeros(len(ids))
    for c in range(len(ids)):
        inside = np.flatnonzero(sample_labels == c)
        similarity = members[inside] @ centres[c]
        # HDBSCAN's excess-of-mass selection can keep a few far points attached to a tight group;
        # a member far below the group's typical closeness (median minus 6 interquartile-halves)
        # leaves it, and the centre is taken again without it.
        median, lower = np.percentile(similarity, [50, 25])
        outliers = inside[similarity < median - 6 * max(median - lower, 1e-3)]
        sample_labels[outliers] = -1
        kept = members[sample_labels == c]
        centres[c] = normalise(kept.mean(axis=0, keepdims=True))[0]
        floors[c] = (kept @ centres[c]).min()
    labels[sample] = sample_labels
    rest = np.setdiff1d(np.arange(n), sample, assume_unique=True)
    for start in range(0, len(rest), 20_000):
        chunk = rest[start : start + 20_000]
        similarity = unit[chunk] @ centres.T
        nearest = similarity.argmax(axis=1)
        close = similarity[np.arange(len(chunk)), nearest] >= floors[nearest]
        labels[chunk[close]] = nearest[close]
    return Clusters(labels, centres, len(sample))


def representatives(
    vectors: np.ndarray, labels: np.ndarray, centres: np.ndarray, cluster_id: int, count: int = 5
) -> np.ndarray:
    """Row indices of the `count` members nearest the cluster's centre, nearest first."""
    members = np.flatnonzero(labels == cluster_id)
    similarity = normalise(vectors[members]) @ centres[cluster_id]
    return members[np.argsort(-similarity, kind="stable")[:count]]


def class_tfidf_terms(
    documents: list[str], labels: np.ndarray, cluster_ids: list[int], count: int = 8
) -> dict[int, list[str]]:
    """Top terms per cluster by class-based TF-IDF (Grootendorst 2022, BERTopic):

        c-TF-IDF(t, c) = tf(t, c) / |c| * log(1 + A / f(t))

    where tf(t, c) counts term t in the documents of cluster c, |c| is the cluster's word count,
    A the average word count per cluster and f(t) the count of t over all clusters. A term scores
    high when it is frequent in this cluster and rare elsewhere. Unclustered rows count as one
    more class, so words common to every refusal do not win.
    """
    from sklearn.feature_extraction.text import CountVectorizer

    classes = cluster_ids + [-1]
    joined = [" ".join(documents[i] for i in np.flatnonzero(labels == c)) for c in classes]
    vectorizer = CountVectorizer(stop_words="english", ngram_range=(1, 2), token_pattern=r"(?u)\b[a-zA-Z][\w-]+\b")
    try:
        counts = vectorizer.fit_transform(joined).toarray().astype(np.float64)
    except ValueError:  # nothing but stop words
        return {c: [] for c in cluster_ids}
    words_per_class = counts.sum(axis=1, keepdims=True)
    tf = np.divide(counts, words_per_class, out=np.zeros_like(counts), where=words_per_class > 0)
    average = counts.sum() / max(1, (words_per_class > 0).sum())
    idf = np.log(1 + average / np.maximum(counts.sum(axis=0), 1))
    scores = tf * idf
    vocabulary = vectorizer.get_feature_names_out()
    result = {}
    for row, cluster_id in enumerate(cluster_ids):
        top = np.argsort(-scores[row], kind="stable")[:count]
        result[cluster_id] = [str(vocabulary[i]) for i in top if scores[row, i] > 0]
    return result
