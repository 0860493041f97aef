"""A text vectorizer that reads "no words" as "no columns" instead of failing.

scikit-learn's vectorizers raise ValueError when no term survives (answers made only of numbers,
emoji or punctuation, or terms that each occur once while `min_df` asks for two: a template such as
"Option 7 is under Settings" gives every answer its own opening). For the blindness probe that
is a finding, not an error: the text carries nothing to tell items apart, so it adds no feature.
Kept in its own module because it imports scikit-learn, which only the probe loads.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse
from sklearn.base import BaseEstimator, TransformerMixin, clone


class OptionalText(TransformerMixin, BaseEstimator):
    """Wraps a vectorizer; with an empty vocabulary it transforms any texts to zero columns."""

    def __init__(self, vectorizer):
        self.vectorizer = vectorizer

    def fit(self, texts, y=None):
        self.fitted_ = clone(self.vectorizer)
        try:
            self.fitted_.fit(texts)
        except ValueError:
            # The vectorizers raise ValueError only for an empty vocabulary ("empty vocabulary",
            # "After pruning, no terms remain") on a list of strings, which is all the probe passes.
            self.fitted_ = None
        return self

    def transform(self, texts):
        if self.fitted_ is None:
            return sparse.csr_matrix((len(texts), 0), dtype=np.float64)
        return self.fitted_.transform(texts)

    def get_feature_names_out(self, input_features=None):
        if self.fitted_ is None:
            return np.array([], dtype=object)
        return self.fitted_.get_feature_names_out()
