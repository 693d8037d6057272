"""Per-query candidate masks: a test query with some LLMs unobserved is routed among the LLMs
observed on it, by the oracle and every router, under every protocol.

:func:`mask_predictions` makes every policy (argmax, willingness-to-pay, budget, threshold)
avoid the unobserved LLMs without changing the policies: an unobserved cell's predicted
score becomes one below the lowest predicted score of the query's observed LLMs, and its
predicted cost a hair (one part in a million, at least 1e-12) above the highest known (not
NaN) predicted cost among them. Such an LLM is then strictly worse than some observed one in
score and strictly dearer, so no policy picks it, even on ties, and the sweep grids (built
from predicted scores and costs) move by at most one score unit. Where no observed LLM of a
query has a known predicted cost, the masked cost stays NaN (unknown) like theirs, and the
policies choose on the scores, where the masked LLM is the worst.
"""

from __future__ import annotations

import numpy as np

__all__ = ["mask_predictions", "usable_rows", "reduced_pool_count"]


def mask_predictions(scores: np.ndarray, costs: np.ndarray | None,
                     observed: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """Predicted scores/costs with unobserved cells made unattractive (see the module doc).

    Parameters
    ----------
    scores : ndarray (n, m)
        Predicted scores.
    costs : ndarray (n, m) or None
        Predicted costs.
    observed : ndarray of bool (n, m)
        True where the query's true score for that LLM is known; every row needs one.

    Returns
    -------
    (scores, costs)
        Copies; unchanged when everything is observed.

    Example
    -------
    >>> s, c = mask_predictions(np.array([[0.9, 0.2, 0.5]]), np.array([[1.0, 3.0, 2.0]]),
    ...                         np.array([[False, True, True]]))
    >>> s.tolist(), c.tolist()
    ([[-0.8, 0.2, 0.5]], [[3.000003, 3.0, 2.0]])
    >>> mask_predictions(np.array([[0.9, 0.6, 0.5]]), np.array([[5.0, np.nan, 1.0]]),
    ...                  np.array([[False, True, True]]))[1].tolist()
    [[1.000001, nan, 1.0]]
    """
    obs = np.asarray(observed, dtype=bool)
    if not obs.any(axis=1).all():
        raise ValueError("every query needs at least one observed LLM to be routed")
    s = np.asarray(scores, dtype=np.float64).copy()
    if obs.all():
        return s, None if costs is None else np.asarray(costs, dtype=np.float64).copy()
    low = np.min(np.where(obs, s, np.inf), axis=1, keepdims=True) - 1.0
    s = np.where(obs, s, low)
    if costs is None:
        return s, None
    c = np.asarray(costs, dtype=np.float64)
    known = obs & np.isfinite(c)   # an unknown (NaN) predicted cost is no ceiling
    high = np.max(np.where(known, c, -np.inf), axis=1, keepdims=True)
    with np.errstate(invalid="ignore"):
        high = high + np.maximum(np.abs(high) * 1e-6, 1e-12)
    # a row without any known observed cost keeps the masked cost unknown too: a finite one
    # would make it the only LLM with a known cost there, which wtp and budget prefer
    high = np.where(np.isfinite(high), high, np.nan)
    return s, np.where(obs, c, high)


def usable_rows(observed: np.ndarray, ref_cols, pairwise: bool) -> np.ndarray:
    """Queries a protocol can score: one observed LLM at least, or (``pairwise``: a protocol
    choosing only between its reference LLMs, e.g. RouteLLM's strong/weak pair) every
    reference LLM observed.

    Example
    -------
    >>> obs = np.array([[True, False], [True, True], [False, False]])
    >>> usable_rows(obs, [0, 1], False).tolist(), usable_rows(obs, [0, 1], True).tolist()
    ([True, True, False], [False, True, False])
    """
    obs = np.asarray(observed, dtype=bool)
    if pairwise:
        return obs[:, list(ref_cols)].all(axis=1)
    return obs.any(axis=1)


def reduced_pool_count(observed: np.ndarray) -> int:
    """Queries with at least one but not every LLM observed.

    Example
    -------
    >>> reduced_pool_count(np.array([[True, False], [True, True], [False, False]]))
    1
    """
    obs = np.asarray(observed, dtype=bool)
    return int((obs.any(axis=1) & ~obs.all(axis=1)).sum())
