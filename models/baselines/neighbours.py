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

With ``k=None`` (the :class:`KNNRouter` default) ``k`` is chosen on an inner validation
split of the training queries: 20% of each task's queries (seeded) are held out, each
``k`` of :data:`K_GRID` (up to the inner-train size) predicts them from the other 80%,
and the ``k`` whose argmax choices reach the highest mean true score wins (the larger
``k`` on ties); the router is then fitted on all training queries with it.
"""

from __future__ import annotations

import numpy as np

from recsys_router.fallback import realised_scores, stratified_holdout
from recsys_router.hyperparams import check_number, check_seed
from recsys_router.router import Router
from recsys_router.state import FLOAT, INT, Arr, DictOf, Opt, StateError, number_keys

from ._common import TextEmbeddingMixin, safe_llm_means

__all__ = ["KNNRouter", "PRKnnRouter", "knn_indices", "K_GRID", "choose_k"]

_METRICS = ("cosine", "euclidean")
_CHUNK = 1024
#: candidate neighbourhood sizes for ``k=None``
K_GRID = (1, 2, 3, 5, 10, 20, 40, 80)
VAL_FRACTION = 0.2
MIN_VAL = 5


def _unit_rows(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (all-zero rows stay zero)."""
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def knn_indices(x_query: np.ndarray, x_train: np.ndarray, k: int, metric: str, *,
                train_prepared: np.ndarray | None = None) -> np.ndarray:
    """Indices of the ``k`` nearest training rows for each query row.

    ``train_prepared`` (optional) is ``_unit_rows(x_train)`` already computed (cosine
    only), so a fitted router normalises its training rows once, not per call.

    Distances are rounded to 10 decimals before a stable sort, so exact ties (common with
    sparse text features) go to the lower training index and a query gets the same
    neighbours alone or in a batch. Euclidean distances are computed on rows centred on the
    training mean, so vectors far from the origin keep their small gaps.

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
        q = _unit_rows(q)
        t = _unit_rows(t) if train_prepared is None else train_prepared
    else:  # centred on the training mean: |q|^2 + |t|^2 - 2 q.t cancels far from the origin
        centre = t.mean(axis=0) if len(t) else 0.0
        q, t = q - centre, t - centre
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


def _rows_per_chunk(k: int, n_llms: int, cells: int = 1 << 22) -> int:
    """Query rows per chunk so that a (rows, k, n_llms) neighbour block holds about ``cells``
    values (32 MiB of float64; at most ``_CHUNK`` rows)."""
    return int(max(1, min(_CHUNK, cells // max(1, k * n_llms))))


def _prefix_means(y: np.ndarray, ks, fallback: np.ndarray) -> list[np.ndarray]:
    """Mean observed score of the first ``k`` neighbours for each ``k`` in ``ks``.

    ``y`` is (n, kmax, L) neighbour scores with NaN = unobserved; an LLM none of the first
    ``k`` neighbours saw gets ``fallback``.
    """
    ok = ~np.isnan(y)
    tot = np.cumsum(np.where(ok, y, 0.0), axis=1)
    cnt = np.cumsum(ok, axis=1)
    return [np.where(cnt[:, k - 1] > 0, tot[:, k - 1] / np.maximum(cnt[:, k - 1], 1),
                     fallback[None, :]) for k in ks]


def choose_k(x: np.ndarray, scores: np.ndarray, tasks, metric: str, seed: int,
             grid=K_GRID) -> tuple[int, dict]:
    """``k`` with the best held-out routing score (see the module docstring).

    Parameters
    ----------
    x : ndarray (n, D)
        Training-query embeddings.
    scores : ndarray (n, L)
        Training scores, NaN = unobserved (every row has at least one observed cell).
    tasks : sequence
        Task label per query (stratifies the split).
    metric : str
    seed : int

    Returns
    -------
    (k, table)
        The chosen ``k`` and ``{k: mean realised held-out score}``.

    Example
    -------
    >>> x = np.repeat(np.eye(2), 15, axis=0) + 0.01 * np.arange(30)[:, None]
    >>> s = np.repeat(np.array([[1.0, 0.0], [0.0, 1.0]]), 15, axis=0)
    >>> k, table = choose_k(x, s, ["t"] * 30, "cosine", 0)
    >>> k, table[1]        # two clean clusters: every k routes perfectly, the largest wins
    (20, 1.0)
    """
    n = len(scores)
    tr, va = stratified_holdout(tasks, VAL_FRACTION, seed)
    ks = [k for k in grid if k <= len(tr)]
    if len(va) < MIN_VAL or not ks:
        k = min(10, n)
        return k, {}
    y_tr, y_va = scores[tr].astype(np.float64), scores[va].astype(np.float64)
    fallback = safe_llm_means(y_tr)
    idx = knn_indices(x[va], x[tr], max(ks), metric)
    realised: dict[int, list] = {k: [] for k in ks}
    step = _rows_per_chunk(max(ks), y_tr.shape[1])
    for s in range(0, len(va), step):  # bounded (chunk, k, n_llms) memory
        preds = _prefix_means(y_tr[idx[s:s + step]], ks, fallback)
        for k, p in zip(ks, preds):
            realised[k].append(realised_scores(p, y_va[s:s + step]))
    table = {k: float(np.nanmean(np.concatenate(realised[k]))) for k in ks}
    best = max(table.values())
    return max(k for k, v in table.items() if v >= best - 1e-12), table


class KNNRouter(TextEmbeddingMixin, Router):
    """kNN router (RouterBench): mean score of the ``k`` nearest training queries per LLM.

    Unobserved neighbour scores are skipped; an LLM that none of the ``k`` neighbours has
    a score for falls back to its mean train score. Training queries without any observed
    score are not used as neighbours.

    Parameters
    ----------
    k : int or None
        Number of neighbours (RouterBench sweeps 5, 10, 40). None (default): chosen from
        :data:`K_GRID` on an inner validation split of the training queries. A given ``k``
        larger than the training queries with an observed score is refused at fit (a
        ``ValueError`` naming both), as scikit-learn's ``NearestNeighbors`` refuses it.
    metric : {"cosine", "euclidean"}
        Distance between query embeddings.
    encoder : str or Encoder
        Query encoder name for :func:`recsys_router.encoders.get_encoder`, or an encoder.
    seed : int
        Seeds the inner split (``k=None``).

    Attributes
    ----------
    k_ : int
        The number of neighbours used.
    k_scores_ : dict
        ``{k: held-out mean score}`` of the inner search (empty when ``k`` was given).

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> d = make_synthetic(80, 3, 2, seed=0)
    >>> KNNRouter(k=5).fit(d).predict_scores(d).shape
    (80, 3)
    """

    cheap_fit = True      # fits in seconds: the safe fallback's 5 inner folds
    _state_ = {"x_train_": Arr("float64", ("n_train", "dim")),
               "y_train_": Arr("float64", ("n_train", "n_llms"), missing=True),
               "llm_means_": Arr("float64", ("n_llms",)), "k_": INT,
               "k_scores_": DictOf(Opt(FLOAT), 1000)}

    @classmethod
    def _check_stored_params(cls, params: dict, where: str) -> None:
        metric, k = params.get("metric", "cosine"), params.get("k")
        if metric not in _METRICS:
            raise StateError(f"{where}.params.metric: {str(metric)[:40]!r}, expected one of "
                             f"{list(_METRICS)}")
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise StateError(f"{where}.params.k: {k!r}, expected an integer >= 1 or null")

    @classmethod
    def _check_state(cls, fields: dict, headers: dict, dims: dict) -> dict:
        """The declared checks, then the sizes that bind the state together: at least one
        training row and ``1 <= k_ <= n_train`` (``k_`` sizes every prediction's
        neighbour array)."""
        out = super()._check_state(fields, headers, dims)
        n = dims.get("n_train", 0)
        if n < 1:
            raise StateError("x_train_: no training rows; a kNN router needs at least one")
        if not 1 <= out["k_"] <= n:
            raise StateError(f"k_: {out['k_']} neighbours, expected 1 <= k_ <= n_train={n}")
        return out

    @classmethod
    def _from_state(cls, params, fields, arrays):
        router = super()._from_state(params, fields, arrays)
        router._check_embedding_dim(router.x_train_.shape[1], "x_train_")
        router.k_scores_ = number_keys(router.k_scores_, int)
        return router

    def __init__(self, k: int | None = None, metric: str = "cosine", encoder="hashing",
                 seed: int = 0):
        self.k = k
        self.metric = metric
        self.encoder = encoder
        self.seed = seed

    def _freeze_params(self):
        if self.metric not in _METRICS:
            raise ValueError(f"metric must be one of {_METRICS}, got {self.metric!r}")
        self.metric_ = self.metric  # fixed at fit: set_params cannot change it

    def _fit(self, train, val):
        check_number(self.k, "k", low=1, integer=True, none=True)
        check_seed(self.seed)
        x = self._fit_encoder(train)
        keep = train.observed.any(axis=1)
        if not keep.any():
            raise ValueError("kNN: no training query has an observed score")
        self.x_train_ = x[keep]
        self.y_train_ = train.scores[keep].astype(np.float64)
        self.llm_means_ = safe_llm_means(train.scores)
        self.k_scores_ = {}
        n_rows = int(keep.sum())
        if self.k is None:  # the search keeps k <= the usable rows
            self.k_, self.k_scores_ = choose_k(self.x_train_, self.y_train_,
                                               np.asarray(train.tasks, dtype=object)[keep],
                                               self.metric_, int(self.seed))
        elif int(self.k) > n_rows:
            raise ValueError(f"{type(self).__name__}: k={self.k} neighbours but only {n_rows} "
                             f"training queries have an observed score ({train.n_queries} in "
                             f"{train.name!r}); pass k <= {n_rows}, or k=None to choose it")
        else:
            self.k_ = int(self.k)

    def neighbours(self, data) -> np.ndarray:
        """Training-row indices (of the kept rows) of each query's ``k`` neighbours."""
        self._check_fitted()
        unit = None
        if self.metric_ == "cosine":  # per fitted state, not per call
            cached = getattr(self, "_unit_train", None)
            if cached is None or cached[0] is not self.x_train_:
                cached = (self.x_train_, _unit_rows(np.asarray(self.x_train_, dtype=np.float64)))
                self._unit_train = cached
            unit = cached[1]
        return knn_indices(self._embed(data), self.x_train_, self.k_, self.metric_,
                           train_prepared=unit)

    def _predict_scores(self, data):
        idx = self.neighbours(data)
        out = np.empty((data.n_queries, self.y_train_.shape[1]))
        step = _rows_per_chunk(idx.shape[1], self.y_train_.shape[1])
        for s in range(0, data.n_queries, step):  # bounded (chunk, k, n_llms) memory
            y = self.y_train_[idx[s:s + step]]
            ok = ~np.isnan(y)
            cnt = ok.sum(axis=1)
            tot = np.where(ok, y, 0.0).sum(axis=1)
            out[s:s + step] = np.where(cnt > 0, tot / np.maximum(cnt, 1), self.llm_means_[None, :])
        return out


class PRKnnRouter(KNNRouter):
    """RouterEval's PRkNN baseline: :class:`KNNRouter` with ``k = 5``.

    RouterEval's released script uses cosine distance; pass ``metric="euclidean"`` for
    Euclidean neighbours.

    Parameters
    ----------
    k : int
        Number of neighbours (RouterEval: 5); at least that many training queries must
        have an observed score, else fit raises a ``ValueError``.
    metric : {"cosine", "euclidean"}
        Distance between query embeddings (RouterEval code: cosine).
    encoder : str or Encoder
        Query encoder.
    """

    def __init__(self, k: int = 5, metric: str = "cosine", encoder="hashing", seed: int = 0):
        super().__init__(k=k, metric=metric, encoder=encoder, seed=seed)
