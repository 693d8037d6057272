"""The safe fallback's baselines as predicted scores, and the promotion of a baseline's LLM
to the top of a router's predictions.

Used by :mod:`recsys_router.fallback`; pure numpy functions of the training data's scores.
"""

from __future__ import annotations

import numpy as np

from .data import RoutingData
from .inner_validation import group_means, task_keys

__all__ = ["baseline_means", "baseline_scores", "baseline_scores_for", "promote_top", "TOP_MARGIN"]

#: how far above a row's best prediction :func:`promote_top` puts the baseline's LLM, relative
#: to the row's largest absolute prediction (at least 1)
TOP_MARGIN = 1e-6


def _means(scores: np.ndarray) -> np.ndarray:
    ok = ~np.isnan(scores)
    n = ok.sum(axis=0)
    m = np.divide(np.where(ok, scores, 0.0).sum(axis=0), n, out=np.full(scores.shape[1], np.nan),
                  where=n > 0)
    low = np.nanmin(m) - 1.0 if np.isfinite(m).any() else 0.0
    return np.where(np.isnan(m), low, m)


def promote_top(pred: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Each row's column ``cols[i]`` raised just above the row's best prediction.

    ``pred[i, cols[i]] = max_j pred[i, j] + TOP_MARGIN * max(1, max_j |pred[i, j]|)`` (NaN
    predictions ignored); every other cell is unchanged. The argmax of the row is then
    ``cols[i]``, and a choice among LLMs that excludes it (a budget below its cost, a pool
    without it) is the original prediction's.

    Parameters
    ----------
    pred : ndarray (n, L)
        Predicted scores (not changed).
    cols : ndarray of int (n,)
        The column to put on top, per row.

    Returns
    -------
    ndarray (n, L)
        A float64 copy.

    Example
    -------
    >>> promote_top(np.array([[0.2, 0.9, 0.5]]), np.array([2])).argmax(axis=1).tolist()
    [2]
    """
    out = np.array(pred, dtype=np.float64, copy=True)
    if out.size == 0:
        return out
    finite = np.where(np.isfinite(out), out, np.nan)
    ok = ~np.isnan(finite).all(axis=1)
    top = np.where(ok, np.nanmax(np.where(ok[:, None], finite, 0.0), axis=1), 0.0)
    scale = np.maximum(1.0, np.nanmax(np.where(ok[:, None], np.abs(finite), 0.0), axis=1))
    rows = np.arange(len(out))
    out[rows, np.asarray(cols, dtype=np.int64)] = top + TOP_MARGIN * scale
    return out


def baseline_means(data: RoutingData) -> tuple[np.ndarray, list[str], np.ndarray]:
    """``(overall, tasks, per_task)``: each LLM's mean observed score (``best-single``'s
    predicted row), the task names and one row of per-task means per task (``task-best``'s
    rows; an LLM a task never saw keeps its overall mean).

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> overall, tasks, per_task = baseline_means(make_synthetic(60, 3, 2, seed=0))
    >>> overall.shape, tasks, per_task.shape
    ((3,), ['topic_0', 'topic_1'], (2, 3))
    """
    s = data.scores.astype(np.float64)
    overall = _means(s)
    keys = task_keys(data.tasks)
    labels, inverse = (np.unique(keys, return_inverse=True) if len(keys)
                       else (np.array([], dtype=object), np.array([], dtype=np.int64)))
    labels, inverse = labels.tolist(), np.asarray(inverse, dtype=np.int64).reshape(-1)
    named = [i for i, t in enumerate(labels) if t != ""]      # "" (no task) sorts first
    per_task = group_means(s, inverse, len(labels), overall)[named]
    return overall, [labels[i] for i in named], per_task.reshape(len(named), len(overall))


def baseline_scores(means: tuple, data: RoutingData, which: str) -> np.ndarray:
    """Predicted scores of ``best-single`` or ``task-best`` for ``data``'s queries from
    :func:`baseline_means`' ``means`` (every row the overall means; with ``task-best`` a
    known task's row its task's means)."""
    return baseline_scores_for(means, task_keys(data.tasks), which)


def baseline_scores_for(means: tuple, keys: np.ndarray, which: str) -> np.ndarray:
    """:func:`baseline_scores` for queries given by their task keys
    (:func:`~recsys_router.inner_validation.task_keys`)."""
    overall, tasks, per_task = means
    out = np.broadcast_to(overall, (len(keys), len(overall))).copy()
    if which == "task-best" and len(tasks):
        index = {t: i for i, t in enumerate(tasks)}
        rows = np.array([index.get(t, -1) for t in keys], dtype=np.int64)
        known = rows >= 0
        out[known] = per_task[rows[known]]
    return out
