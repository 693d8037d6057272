"""Helpers shared by the baseline routers: NaN-aware statistics, best-LLM labels,
batch-invariant seeded randomness and the text-embedding step.

None of these read ground truth of the data being routed unless a router says so
(``uses_ground_truth``); they only summarise the training matrix.
"""

from __future__ import annotations

import copy
import hashlib

import numpy as np
import pandas as pd

from recsys_router.data import RoutingData
from recsys_router.errors import DataValidationError
from recsys_router.inner_validation import group_means
from recsys_router.state import Part, StateError

__all__ = ["nan_col_means", "safe_llm_means", "masked_group_means", "best_llm_labels", "query_uniforms",
           "TextEmbeddingMixin", "tie_cost_order"]

_MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def nan_col_means(scores: np.ndarray, fallback: float = 0.0) -> np.ndarray:
    """Per-column mean of the observed (non-NaN) cells; ``fallback`` for empty columns.

    Example
    -------
    >>> nan_col_means(np.array([[1.0, np.nan], [0.0, np.nan]])).tolist()
    [0.5, 0.0]
    """
    s = np.asarray(scores, dtype=np.float64)
    ok = ~np.isnan(s)
    n = ok.sum(axis=0)
    tot = np.where(ok, s, 0.0).sum(axis=0)
    return np.divide(tot, n, out=np.full(s.shape[1], float(fallback)), where=n > 0)


def safe_llm_means(scores: np.ndarray) -> np.ndarray:
    """Per-LLM mean observed score; an LLM never observed gets ``min(means) - 1`` so that
    it ranks last (0.0 when nothing at all is observed).

    Example
    -------
    >>> safe_llm_means(np.array([[1.0, np.nan], [0.0, np.nan]])).tolist()
    [0.5, -0.5]
    """
    m = nan_col_means(scores, fallback=np.nan)
    low = float(np.nanmin(m)) - 1.0 if np.isfinite(m).any() else 0.0
    return np.where(np.isnan(m), low, m)


def masked_group_means(scores: np.ndarray, groups: np.ndarray, n_groups: int,
                       fallback: np.ndarray) -> np.ndarray:
    """Mean observed score per (group, LLM); ``fallback[j]`` where a group never saw LLM j.

    Parameters
    ----------
    scores : ndarray, shape (n, n_llms)
        Scores with NaN for unobserved cells.
    groups : ndarray of int, shape (n,)
        Group id in ``[0, n_groups)`` per row.
    n_groups : int
        Number of groups.
    fallback : ndarray, shape (n_llms,)
        Value used for empty (group, LLM) cells.

    Returns
    -------
    ndarray, shape (n_groups, n_llms)

    Notes
    -----
    Computed by :func:`recsys_router.inner_validation.group_means`: time O(n x n_llms) and
    memory O((n + n_groups) x n_llms), so labels that are unique per row cost no more than
    a handful of groups.

    Example
    -------
    >>> masked_group_means(np.array([[1.0, np.nan], [0.0, 2.0], [3.0, np.nan]]),
    ...                    np.array([0, 0, 1]), 2, np.array([9.0, 9.0])).tolist()
    [[0.5, 2.0], [3.0, 9.0]]
    """
    return group_means(scores, groups, n_groups, fallback)


def tie_cost_order(mean_costs: np.ndarray | None, n_llms: int) -> np.ndarray:
    """Rank of each LLM by mean cost (cheapest = 0; unknown costs last, then column order)."""
    if mean_costs is None:
        return np.arange(n_llms)
    c = np.nan_to_num(np.asarray(mean_costs, dtype=np.float64), nan=np.inf)
    order = np.lexsort((np.arange(n_llms), c))
    rank = np.empty(n_llms, dtype=np.int64)
    rank[order] = np.arange(n_llms)
    return rank


def best_llm_labels(scores: np.ndarray, mean_costs: np.ndarray | None,
                    tie_rank: np.ndarray | None = None) -> np.ndarray:
    """Index of the best LLM per query (highest observed score, cheapest mean cost on ties).

    Queries without any observed score get label ``-1``. ``tie_rank`` (lower wins)
    replaces the cheapest-first order among tied LLMs when given.

    Example
    -------
    >>> best_llm_labels(np.array([[1., 1., 0.], [np.nan, np.nan, np.nan]]),
    ...                 np.array([3., 1., 2.])).tolist()
    [1, -1]
    """
    s = np.asarray(scores, dtype=np.float64)
    v = np.where(np.isnan(s), -np.inf, s)
    best = v.max(axis=1, keepdims=True)
    tied = (v == best) & np.isfinite(v)
    rank = (tie_cost_order(mean_costs, s.shape[1]) if tie_rank is None
            else np.asarray(tie_rank)).astype(np.float64)
    key = np.where(tied, rank[None, :], np.inf)
    lab = key.argmin(axis=1)
    lab[~tied.any(axis=1)] = -1
    return lab


def _splitmix64(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = (x + np.uint64(0x9E3779B97F4A7C15)) & _MASK64
        z = ((z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & _MASK64
        z = ((z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & _MASK64
        return z ^ (z >> np.uint64(31))


def query_uniforms(query_ids, seed: int, n_cols: int, stream: int = 0) -> np.ndarray:
    """Seeded uniforms in [0, 1), shape (n_queries, n_cols), that depend only on
    ``(seed, stream, query_id, column)``.

    Routing a whole set or each query alone therefore gives the same random draws, and
    the same seed gives the same draws on every machine.

    Example
    -------
    >>> a = query_uniforms(["q1", "q2"], 0, 3)
    >>> bool(np.array_equal(a[1], query_uniforms(["q2"], 0, 3)[0]))
    True
    """
    keys = np.array([int.from_bytes(hashlib.blake2b(str(q).encode("utf-8"), digest_size=8).digest(),
                                    "little") for q in query_ids], dtype=np.uint64)
    base = _splitmix64(np.array([int(seed) & 0xFFFFFFFFFFFFFFFF], dtype=np.uint64))
    base = _splitmix64(base ^ np.uint64(int(stream) & 0xFFFFFFFFFFFFFFFF))
    h = _splitmix64(keys ^ base)
    cols = np.arange(n_cols, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z = _splitmix64((h[:, None] + cols[None, :] * np.uint64(0xD1B54A32D192ED03)) & _MASK64)
    return (z >> np.uint64(11)).astype(np.float64) / float(1 << 53)


class TextEmbeddingMixin:
    """Embedding step for routers that read query text.

    The router's ``encoder`` parameter is either an encoder name understood by
    :func:`recsys_router.encoders.get_encoder` (e.g. ``"hashing"``) or an encoder object
    with ``encode(texts, query_ids=None)``. :meth:`_fit_encoder` fixes the encoder in use
    as learned state (``fitted_encoder_``: the one the name builds, or the object passed;
    for an encoder that needs fitting, a copy fitted on the train texts), so
    ``set_params(encoder=...)`` after ``fit`` changes no prediction until the next ``fit``;
    a router rebuilt from an artifact gets the stored encoder there. :meth:`_embed` turns
    a :class:`RoutingData` into a float array, raising a clear error for missing text.
    """

    uses_text = True
    #: the encoder in use is stored as declared encoder state (see recsys_router.encoders.state)
    _state_ = {"encoder_": Part()}

    def _get_state(self):
        from recsys_router.encoders.state import save_encoder_part
        fields, arrays = super()._get_state()
        info, enc_arrays = save_encoder_part("encoder_", self.encoder_)
        return {**fields, **info}, {**arrays, **enc_arrays}

    @classmethod
    def _from_state(cls, params, fields, arrays):
        from recsys_router.encoders.state import load_encoder_part
        router = super()._from_state(params, fields, arrays)
        router.fitted_encoder_ = load_encoder_part("encoder_", fields, arrays, cls.__name__)
        return router

    @property
    def encoder_(self):
        """The encoder fixed at ``fit`` (``fitted_encoder_``); before the first fit, the one
        the ``encoder`` parameter names (built on each call, never kept)."""
        fitted = getattr(self, "fitted_encoder_", None)
        return fitted if fitted is not None else self._named_encoder()

    def _named_encoder(self):
        """The encoder the ``encoder`` parameter names: the object itself, or one built by
        :func:`~recsys_router.encoders.get_encoder` from the name."""
        if not isinstance(self.encoder, str):
            return self.encoder
        from recsys_router.encoders import get_encoder
        return get_encoder(self.encoder)

    def _check_embedding_dim(self, dim: int, what: str) -> None:
        """Refuse stored state (``what``, e.g. ``"x_train_"``) whose embedding width ``dim``
        is 0 or differs from the encoder's output width, where the encoder holds that width
        as data (no model is loaded to find it)."""
        known = vars(self.encoder_).get("dim", vars(self.encoder_).get("_dim"))
        if dim < 1 or (isinstance(known, int) and not isinstance(known, bool) and dim != known):
            raise StateError(f"{what}: embedding width {dim}, but the encoder outputs "
                             f"{known if isinstance(known, int) else 'at least 1'}")

    def _fit_encoder(self, train: RoutingData) -> np.ndarray:
        """Fix the encoder as learned state (fitted on ``train``'s texts when it learns from
        them) and return ``train``'s embeddings."""
        self.fitted_encoder_ = None
        enc = self._named_encoder()
        if getattr(enc, "needs_fit", False):
            if enc is self.encoder:  # never mutate a user-supplied hyperparameter
                enc = copy.deepcopy(enc)
            self._check_text(train)
            enc.fit(list(train.texts))
        self.fitted_encoder_ = enc
        return self._embed(train)

    @staticmethod
    def _check_text(data: RoutingData) -> None:
        texts = data.queries["text"]
        if len(texts) <= 64:  # a served request: plain Python beats pandas' per-call overhead
            missing = np.array([pd.isna(t) is True or str(t).strip() == "" for t in texts],
                               dtype=bool)
        else:
            missing = texts.isna().to_numpy() | (texts.astype(str).str.strip() == "").to_numpy()
        if missing.any():
            row = int(np.flatnonzero(missing)[0])
            raise DataValidationError(
                f"query {data.query_ids[row]!r} has no text ({int(missing.sum())} such queries); "
                "this router embeds query text, so every query needs a non-empty 'text'",
                source=data.source or data.name, row=row, column="text")

    def _embed(self, data: RoutingData) -> np.ndarray:
        enc = self.encoder_
        if getattr(enc, "needs_text", True):
            self._check_text(data)
        x = enc.encode(list(data.texts), query_ids=list(data.query_ids))
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[0] != data.n_queries:
            raise RuntimeError(f"encoder returned shape {x.shape}, expected ({data.n_queries}, dim)")
        return x
