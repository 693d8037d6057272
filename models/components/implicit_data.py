"""Data helpers of the ``implicit`` routers (``models/implicit_router.py``): the query
embeddings a fitted encoder gives, the confidence matrix of positive cells, and whether
``implicit``'s CUDA backend is usable.

Reference: Hu, Koren & Volinsky, "Collaborative Filtering for Implicit Feedback Datasets",
ICDM 2008 (confidence ``1 + alpha * s``).
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from recsys_router.data import RoutingData
from recsys_router.errors import DataValidationError

from ..implicit_feedback import confidence_matrix, scaled_scores

__all__ = ["gpu_available", "encode_queries", "interaction_matrix"]


def gpu_available() -> bool:
    """Whether ``implicit`` was built with CUDA and a device is visible."""
    try:
        import implicit.gpu  # noqa: PLC0415
        return bool(implicit.gpu.HAS_CUDA)
    except Exception:  # pragma: no cover - broken optional backend
        return False


def encode_queries(encoder, data: RoutingData) -> np.ndarray:
    """Embeddings of ``data``'s queries with a fitted encoder, as float64.

    ``encoder`` is an :class:`~recsys_router.encoders.Encoder` or any object with
    ``encode(texts, query_ids=None)`` (e.g. the evaluation runner's shared embeddings).

    Raises
    ------
    DataValidationError
        When the encoder reads text and a query has none (naming the first such row).
    """
    if hasattr(encoder, "encode_data"):
        return np.asarray(encoder.encode_data(data), dtype=np.float64)
    if getattr(encoder, "needs_text", True) and not data.has_text:
        row = int(np.flatnonzero(data.queries["text"].isna().to_numpy())[0])
        raise DataValidationError(f"query {data.query_ids[row]!r} has no query text; this router "
                                  "reads text to route new queries", source=data.source, row=row,
                                  column="text")
    texts = [t if isinstance(t, str) else "" for t in data.texts]
    return np.asarray(encoder.encode(texts, query_ids=data.query_ids), dtype=np.float64)


def interaction_matrix(train: RoutingData, alpha: float, lo: float | None = None,
                       hi: float | None = None) -> sparse.csr_matrix:
    """Confidence matrix (queries x LLMs) of positive cells, ``1 + alpha * s`` (module docs).

    Parameters
    ----------
    train : RoutingData
        Training interactions.
    alpha : float
        Confidence slope (>= 0).
    lo, hi : float, optional
        Score range used to scale to [0, 1]; default: min/max of the observed train scores.

    Returns
    -------
    scipy.sparse.csr_matrix of float32

    Example
    -------
    >>> d = RoutingData(["q1", "q2"], ["a", "b"], [[1, 0], [np.nan, 1]])
    >>> interaction_matrix(d, 2.0).toarray().tolist()
    [[3.0, 0.0], [0.0, 3.0]]
    """
    vals = train.scores[train.observed].astype(np.float64)
    lo = float(vals.min()) if lo is None else lo
    hi = float(vals.max()) if hi is None else hi
    return confidence_matrix(scaled_scores(train.scores.astype(np.float64), lo, hi), alpha)
