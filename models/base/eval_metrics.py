"""Routing metrics of a validation/test epoch, from the project's metric functions.

``mu_o``, ``V_B`` and ``E_p`` come from :mod:`recsys_router.metrics.routereval` and AIQ
from :mod:`recsys_router.metrics.routerbench`; this module only decides which queries
count (those with every score observed, as RouterEval and ORBIT do) and how a choice is
made (argmax of the predicted score, cheaper predicted cost on ties).
"""

from __future__ import annotations

import numpy as np

from recsys_router.policies import argmax_policy, fill_unknown_costs

__all__ = ["epoch_metrics"]


def epoch_metrics(pred: np.ndarray, scores: np.ndarray, costs: np.ndarray | None = None,
                  pred_costs: np.ndarray | None = None) -> dict[str, float]:
    """Routing metrics of predicted scores on a set of queries.

    Parameters
    ----------
    pred : ndarray (n, L)
        Predicted scores.
    scores : ndarray (n, L)
        True scores (NaN = unobserved; such queries are left out).
    costs : ndarray (n, L), optional
        True costs; AIQ is computed only when given.
    pred_costs : ndarray (L,) or (n, L), optional
        Predicted costs (default: the mean true cost of each LLM over these queries).

    Returns
    -------
    dict
        ``mu_o``, ``v_b``, ``e_p`` (bits) and, with costs, ``aiq``. When no query has every
        score observed (sparse data), only ``mu_o`` and ``e_p`` with the choice restricted
        to each query's observed LLMs; empty when nothing is observed.

    Example
    -------
    >>> s = np.array([[1., 0.], [0., 1.], [1., 0.]])
    >>> m = epoch_metrics(s, s)
    >>> round(m["mu_o"], 3), round(m["v_b"], 3), round(m["e_p"], 3)
    (1.0, 1.5, 0.918)
    """
    from recsys_router.metrics.base import complete_rows
    from recsys_router.metrics.routereval import mu_o, selection_entropy, v_b

    ok = complete_rows(scores, costs)
    if not ok.any():
        return _sparse_metrics(pred, scores)
    p, s = np.asarray(pred, np.float64)[ok], np.asarray(scores, np.float64)[ok]
    c = None if costs is None else np.asarray(costs, np.float64)[ok]
    if pred_costs is None and c is not None:
        pc = np.broadcast_to(c.mean(axis=0), s.shape)
    elif pred_costs is not None:
        pc = np.broadcast_to(np.asarray(pred_costs, np.float64), np.asarray(pred).shape)[ok]
    else:
        pc = None
    choice = argmax_policy(p, pc)
    out = {"mu_o": mu_o(s, choice), "v_b": v_b(s, choice), "e_p": selection_entropy(choice, s.shape[1])}
    if c is not None:
        from recsys_router.metrics.routerbench import routerbench_metrics
        out["aiq"] = float(routerbench_metrics(p, fill_unknown_costs(pc), s, c)["aiq"])
    return out


def _sparse_metrics(pred: np.ndarray, scores: np.ndarray) -> dict[str, float]:
    """mu_o and E_p of choices restricted to each query's observed LLMs.

    Example
    -------
    >>> s = np.array([[1., np.nan], [np.nan, 0.]])
    >>> _sparse_metrics(np.array([[0.1, 0.9], [0.9, 0.1]]), s)
    {'mu_o': 0.5, 'e_p': 1.0}
    """
    from recsys_router.metrics.routereval import selection_entropy

    s = np.asarray(scores, np.float64)
    obs = ~np.isnan(s)
    rows = obs.any(axis=1)
    if not rows.any():
        return {}
    masked = np.where(obs, np.asarray(pred, np.float64), -np.inf)[rows]
    choice = masked.argmax(axis=1)
    picked = s[rows][np.arange(len(choice)), choice]
    return {"mu_o": float(picked.mean()), "e_p": selection_entropy(choice, s.shape[1])}
