"""Nearest-neighbour routers: RouterBench's kNN and RouterEval's PRkNN.

References
----------
- Hu et al., "RouterBench: A Benchmark for Multi-LLM Routing System", arXiv:2403.12031
  (2024): kNN router, cosine distance on query embeddings, predicted score of an LLM =
  mean score of the ``k`` nearest training queries; ``k`` swept over {5, 10, 40}
  (``configs/evaluate_routers.yaml``).
- Huang et al., "RouterEval", arXiv:2503.10657 (2025): PRkNN baseline
  (``router/PRKnn-knn/knn.py``): the same estimator with ``k = 5`` (``test_router.py``)
  and cosine distance (``NearestNeighbors(metric='cosine')``).
"""

from __future__ import annotations

import numpy as np

from recsys_router.router import Router

from ._common import TextEmbeddingMixin, safe_llm_means

__all__ = ["KNNRouter", "PRKnnRouter", "knn_indices"]

_METRICS = ("cosine", "euclidean")
_CHUNK = 1024


def knn_indices(x_query: np.ndarray, x_train: np.ndarray, k: int, metric: str) -> np.ndarray:
    """Indices of the ``k`` nearest training rows for each query row.

    Distances are rounded to 10 decimals before a stable sort, so exact ties (common with
    sparse text features) go to the lower training index and a query gets the same
    neighbours alone or in a batch.

    Example
    -------
    >>> knn_indices(np.array([[1., 0.]]), np.array([[0., 1.], [2., 0.], [1., .1]]), 2,
    ...             "cosine").tolist()
    [[1, 2]]
    """
    if metric not in _METRICS:
        raise ValueError(f"metric must be one of {_METRICS}, got {metric!r}")
    q = np.asarray(x_query, dtype=np.float64)
    t = np.asarray(x_train, dtype=np.float64)
    if metric == "cosine":
        q = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-12)
        t = t / np.maximum(np.linalg.norm(t, axis=1, keepdims=True), 1e-12)
    else:
        tn = (t ** 2).sum(axis=1)
    out = np.empty((q.shape[0], k), dtype=np.int64)
    for s in range(0, q.shape[0], _CHUNK):
        qb = q[s:s + _CHUNK]
        if metric == "cosine":
            d = 1.0 - qb @ t.T
        else:
            d = np.sqrt(np.maximum((qb ** 2).sum(axis=1)[:, None] + tn[None, :] - 2.0 * qb @ t.T, 0.0))
        out[s:s + _CHUNK] = np.argsort(np.round(d, 10), axis=1, kind="stable")[:, :k]
    return out


class KNNRouter(TextEmbeddingMixin, Router):
    """kNN router (RouterBench): mean score of the ``k`` nearest training queries per LLM.

    Unobserved neighbour scores are skipped; an LLM that none of the ``k`` neighbours has
    a score for falls back to its mean train score. Training queries without any observed
    score are not used as neighbours.

    Parameters
    ----------
    k : int
        Number of neighbours (RouterBench sweeps 5, 10, 40; default 10).
    metric : {"cosine", "euclidean"}
        Distance between query embeddings.
    encoder : str or Encoder
        Query encoder name for :func:`recsys_router.encoders.get_encoder`, or an encoder.

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> d = make_synthetic(80, 3, 2, seed=0)
    >>> KNNRouter(k=5).fit(d).predict_scores(d).shape
    (80, 3)
    """

    def __init__(self, k: int = 10, metric: str = "cosine", encoder="hashing"):
        self.k = k
        self.metric = metric
        self.encoder = encoder

    def _fit(self, train, val):
        if int(self.k) < 1:
            raise ValueError(f"k must be >= 1, got {self.k!r}")
        if self.metric not in _METRICS:
            raise ValueError(f"metric must be one of {_METRICS}, got {self.metric!r}")
        x = self._fit_encoder(train)
        keep = train.observed.any(axis=1)
        if not keep.any():
            raise ValueError("kNN: no training query has an observed score")
        self.x_train_ = x[keep]
        self.y_train_ = train.scores[keep].astype(np.float64)
        self.fallback_ = safe_llm_means(train.scores)
        self.k_ = min(int(self.k), int(keep.sum()))

    def neighbours(self, data) -> np.ndarray:
        """Training-row indices (of the kept rows) of each query's ``k`` neighbours."""
        self._check_fitted()
        return knn_indices(self._embed(data), self.x_train_, self.k_, self.metric)

    def _predict_scores(self, data):
        idx = self.neighbours(data)
        out = np.empty((data.n_queries, self.y_train_.shape[1]))
        for s in range(0, data.n_queries, _CHUNK):  # bounded (chunk, k, n_llms) memory
            y = self.y_train_[idx[s:s + _CHUNK]]
            ok = ~np.isnan(y)
            cnt = ok.sum(axis=1)
            tot = np.where(ok, y, 0.0).sum(axis=1)
            out[s:s + _CHUNK] = np.where(cnt > 0, tot / np.maximum(cnt, 1), self.fallback_[None, :])
        return out


class PRKnnRouter(KNNRouter):
    """RouterEval's PRkNN baseline: :class:`KNNRouter` with ``k = 5``.

    RouterEval's released script uses cosine distance; pass ``metric="euclidean"`` for
    Euclidean neighbours.

    Parameters
    ----------
    k : int
        Number of neighbours (RouterEval: 5).
    metric : {"cosine", "euclidean"}
        Distance between query embeddings (RouterEval code: cosine).
    encoder : str or Encoder
        Query encoder.
    """

    def __init__(self, k: int = 5, metric: str = "cosine", encoder="hashing"):
        self.k = k
        self.metric = metric
        self.encoder = encoder
