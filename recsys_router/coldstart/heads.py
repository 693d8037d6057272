"""Baseline onboarding of a new LLM for routers without a native ``add_llm``: kNN over probes.

A new LLM's predicted score on a query is a kernel-weighted mean of its probe scores on
the ``k`` probe queries nearest in the router's query embedding (cosine), shrunk toward
the probe mean: ``s(x) = (sum_i w_i y_i + alpha * ybar) / (sum_i w_i + alpha)`` with
``w_i = v_i * max(cos(x, p_i), 0)`` over the ``k`` nearest probes, ``v_i`` the probe
weights (mean 1; all 1 without weights) and ``ybar = sum_i v_i y_i / sum_i v_i``. Routers
that do not read text predict ``ybar`` for every query.

Reference: Hu et al., "RouterBench" (2024) kNN routers; Polo et al., "tinyBenchmarks"
(ICML 2024) for estimating an LLM's performance from a few anchor questions.
"""

from __future__ import annotations

import numpy as np

from recsys_router.data import RoutingData

__all__ = ["fit_probe_head", "predict_probe_head", "router_embed"]

_K = 10
_ALPHA = 1.0


def router_embed(router, data: RoutingData) -> np.ndarray | None:
    """Query embeddings with the router's own encoder (None for routers that read no text)."""
    if not getattr(router, "uses_text", False):
        return None
    enc = getattr(router, "encoder_", None)
    if enc is None:
        from recsys_router.encoders import get_encoder
        enc = get_encoder("hashing")
    return np.asarray(enc.encode_data(data), dtype=np.float64)


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def fit_probe_head(router, probes: RoutingData, weights: np.ndarray | None = None) -> dict:
    """Plain-data state of the kNN probe head of one new LLM.

    Parameters
    ----------
    router : Router
    probes : RoutingData
        One column: the new LLM's probe scores.
    weights : ndarray, optional
        Probe weights (validated, mean 1); None = equal.

    Returns
    -------
    dict
        ``scores`` (probe scores), ``mean`` (weighted), ``weights`` (only when some differ)
        and, for text routers, ``emb`` (unit probe embeddings).

    Example
    -------
    >>> d = RoutingData(["a", "b"], ["new"], [[1.0], [0.0]])
    >>> fit_probe_head(object(), d)["mean"], fit_probe_head(object(), d, np.array([1.5, 0.5]))["mean"]
    (0.5, 0.75)
    """
    y = probes.scores[:, 0].astype(np.float64)
    w = np.ones_like(y) if weights is None else np.asarray(weights, np.float64)
    head = {"scores": y, "mean": float(np.average(y, weights=w))}
    if not np.allclose(w, 1.0):
        head["weights"] = w
    emb = router_embed(router, probes)
    if emb is not None:
        head["emb"] = _unit(emb)
    return head


def predict_probe_head(router, head: dict, data: RoutingData) -> np.ndarray:
    """Predicted scores (n_queries,) of the new LLM from its probe head."""
    n = data.n_queries
    if "emb" not in head:
        return np.full(n, float(head["mean"]))
    x = _unit(router_embed(router, data))
    p = np.asarray(head["emb"], dtype=np.float64)
    y = np.asarray(head["scores"], dtype=np.float64)
    v = np.asarray(head.get("weights", np.ones_like(y)), dtype=np.float64)
    k = min(_K, len(y))
    sim = np.maximum(x @ p.T, 0.0)
    top = np.argpartition(-sim, k - 1, axis=1)[:, :k] if k < len(y) else np.tile(np.arange(len(y)), (n, 1))
    w = np.take_along_axis(sim, top, axis=1) * v[top]
    num = (w * y[top]).sum(axis=1) + _ALPHA * float(head["mean"])
    return num / (w.sum(axis=1) + _ALPHA)
