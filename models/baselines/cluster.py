"""C-RoBERTa: cluster the query embeddings, route each cluster to its best LLM.

Reference
---------
Huang et al., "RouterEval", arXiv:2503.10657 (2025), C-RoBERTa-cluster baseline
(``router/C-RoBERTa-cluster/cluster.py``): KMeans with ``K = 3`` clusters
(``random_state = seed``) on RoBERTa query embeddings; each cluster is sent to the LLM
with the highest mean train score in it; routing probabilities use inverse distances to
the cluster centres. Here the embeddings come from the configured encoder.
"""

from __future__ import annotations

import numpy as np

from recsys_router.hyperparams import check_number, check_seed
from recsys_router.router import Router
from recsys_router.state import Arr

from ._common import TextEmbeddingMixin, best_llm_labels, masked_group_means, safe_llm_means

__all__ = ["ClusterRouter"]


class ClusterRouter(TextEmbeddingMixin, Router):
    """KMeans-cluster router (RouterEval C-RoBERTa).

    Predicted scores of a query are its cluster's per-LLM mean train scores (the LLM's
    overall mean where the cluster never observed it), so argmax routing sends a cluster
    to its best LLM (cheapest mean cost on ties).

    Parameters
    ----------
    n_clusters : int
        Number of KMeans clusters (RouterEval: 3).
    n_init : int
        KMeans restarts (scikit-learn's long-standing default of 10).
    max_iter : int
        KMeans iterations per restart.
    seed : int
        KMeans ``random_state`` (RouterEval: 0).
    encoder : str or Encoder
        Query encoder.

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> d = make_synthetic(90, 3, 3, seed=0)
    >>> ClusterRouter().fit(d).cluster_best_.shape
    (3,)
    """

    cheap_fit = True      # fits in seconds: the safe fallback's 5 inner folds
    _state_ = {"centres_": Arr("float64", ("k", "dim")),
               "cluster_means_": Arr("float64", ("k", "n_llms")),
               "cluster_best_": Arr("int64", ("k",), index_of="n_llms"),
               "cluster_sizes_": Arr("int64", ("k",))}

    def __init__(self, n_clusters: int = 3, n_init: int = 10, max_iter: int = 300, seed: int = 0,
                 encoder="hashing"):
        self.n_clusters = n_clusters
        self.n_init = n_init
        self.max_iter = max_iter
        self.seed = seed
        self.encoder = encoder

    def _fit(self, train, val):
        from sklearn.cluster import KMeans
        check_seed(self.seed)
        x = self._fit_encoder(train)
        k = check_number(self.n_clusters, "n_clusters", low=1, integer=True)
        if train.n_queries < k:
            raise ValueError(f"ClusterRouter: {train.n_queries} training queries but n_clusters={k}")
        km = KMeans(n_clusters=k, n_init=int(self.n_init), max_iter=int(self.max_iter),
                    random_state=int(self.seed)).fit(x)
        #: the fitted centres (the only KMeans state prediction needs) and train assignments
        self.centres_ = np.asarray(km.cluster_centers_, dtype=np.float64)
        self.train_labels_ = labels = np.asarray(km.labels_, dtype=np.int64)
        self.cluster_means_ = masked_group_means(train.scores, labels, k, safe_llm_means(train.scores))
        self.cluster_best_ = best_llm_labels(self.cluster_means_, self.mean_costs_)
        self.cluster_sizes_ = np.bincount(labels, minlength=k).astype(np.int64)

    def _distances(self, x: np.ndarray) -> np.ndarray:
        """Euclidean distance of each row of ``x`` to each centre, shape (n, k)."""
        c = self.centres_
        d2 = (x ** 2).sum(axis=1)[:, None] - 2.0 * x @ c.T + (c ** 2).sum(axis=1)[None, :]
        return np.sqrt(np.maximum(d2, 0.0))

    def predict_clusters(self, data) -> np.ndarray:
        """Cluster id per query (the nearest centre)."""
        self._check_fitted()
        return self._distances(self._embed(data)).argmin(axis=1)

    def _predict_scores(self, data):
        return self.cluster_means_[self.predict_clusters(data)]

    def _selection_probs(self, data):
        """RouterEval's soft assignment: inverse distance to each centre, summed per best LLM."""
        self._check_fitted()
        self._check_llms(data)
        d = self._distances(self._embed(data))  # Euclidean distance to each centre
        w = 1.0 / (d + 1e-10)
        w /= w.sum(axis=1, keepdims=True)
        probs = np.zeros((data.n_queries, data.n_llms))
        for c, j in enumerate(self.cluster_best_):
            probs[:, j] += w[:, c]
        return probs
