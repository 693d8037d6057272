"""Reward models of the direct method (DM) and of doubly robust (DR) estimates and training.

A reward model predicts every LLM's outcome for every logged query from the one revealed
outcome per query. :func:`ridge_fit` / :func:`ridge_predict` are a per-LLM weighted ridge
regression on the query embeddings, around the LLM's weighted mean outcome shrunk towards
the pooled mean (``prior`` average observations' worth), clipped to the range of the
outcomes it was fitted on (``[lo, hi]``: a 0-10 judge score stays on 0-10, a pass rate in
[0, 1]):

``q_ij = clip(m_j + (x_i - c_j) . beta_j, lo, hi)``, ``beta_j = (X_j' W_j X_j + alpha I)^-1
X_j' W_j (y_j - m_j)`` with ``X_j`` the queries that logged LLM ``j`` centred at their
weighted mean ``c_j``.

Decision weights make it cheap to refit on a bootstrap resample (weight = how many times the
resample drew the decision, no copy of the data) and to cross-fit (weight 0 on the held-out
fold): :func:`ridge_refit` and :func:`crossfit` return the ``refit(weights) -> q`` callables
that :func:`recsys_router.feedback.ope.estimate_all` refits per resample.

References: Dudik, Langford & Li, "Doubly Robust Policy Evaluation and Learning", ICML 2011
(reward model of DM/DR); Chernozhukov et al., "Double/debiased machine learning for treatment
and structural parameters", Econometrics Journal 2018 (cross-fitting).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

__all__ = ["ridge_fit", "ridge_predict", "ridge_refit", "crossfit", "query_features", "ridge_reward",
           "mean_outcome_refit"]


def ridge_fit(x, action, y, w, n_llms: int, alpha: float = 10.0, prior: float = 10.0) -> dict:
    """Fit the per-LLM ridge reward model; decisions of weight 0 play no part.

    Parameters
    ----------
    x : array (n, d)
        Query embeddings of the logged decisions.
    action, y, w : arrays (n,)
        Logged LLM column, its outcome, and the decision's frequency weight (>= 0): a weight
        of k fits exactly as k copies of the decision would.
    n_llms : int
        Number of LLM columns; an LLM with no weighted decision predicts the pooled mean.
    alpha, prior : float
        Ridge penalty; weight (in decisions) of the pooled mean in each LLM's mean.

    Returns
    -------
    dict
        ``center`` (L, d), ``mean`` (L,), ``beta`` (L, d), and ``lo``, ``hi``: the range of
        the outcomes of weight > 0 (of all outcomes when no weight is), which predictions
        are clipped to.

    Example
    -------
    >>> m = ridge_fit(np.array([[0.0], [1.0]]), np.array([0, 0]), np.array([0.0, 1.0]),
    ...               np.ones(2), 2, alpha=1e-9, prior=0.0)
    >>> m["mean"].tolist(), m["beta"].round(3).tolist()
    ([0.5, 0.5], [[1.0], [0.0]])
    """
    x = np.asarray(x, np.float64)
    action, y, w = np.asarray(action), np.asarray(y, np.float64), np.asarray(w, np.float64)
    total = w.sum()
    seen = y[w > 0] if total > 0 else y
    lo, hi = (float(seen.min()), float(seen.max())) if len(seen) else (0.0, 1.0)
    pooled = float((w * y).sum() / total) if total > 0 else 0.5 * (lo + hi)
    d = x.shape[1]
    center, mean, beta = np.zeros((n_llms, d)), np.full(n_llms, pooled), np.zeros((n_llms, d))
    for j in range(n_llms):
        m = (action == j) & (w > 0)
        if not m.any():
            continue
        wj, yj, xj = w[m], y[m], x[m]
        center[j] = wj @ xj / wj.sum()
        mean[j] = ((wj * yj).sum() + prior * pooled) / (wj.sum() + prior)
        xc = xj - center[j]
        xw = xc * wj[:, None]
        beta[j] = np.linalg.solve(xw.T @ xc + alpha * np.eye(d), xw.T @ (yj - mean[j]))
    return {"center": center, "mean": mean, "beta": beta, "lo": lo, "hi": hi}


def ridge_predict(model: dict, x) -> np.ndarray:
    """Predicted outcome (n, L) of every LLM for the queries ``x``, clipped to the fitted
    outcomes' range ``[model["lo"], model["hi"]]``.

    Example
    -------
    >>> m = {"center": np.zeros((2, 1)), "mean": np.array([0.5, 0.2]), "beta": np.array([[1.0], [0.0]]),
    ...      "lo": 0.0, "hi": 1.0}
    >>> ridge_predict(m, np.array([[0.25], [2.0]])).tolist()
    [[0.75, 0.2], [1.0, 0.2]]
    """
    x = np.asarray(x, np.float64)
    q = model["mean"][None, :] + x @ model["beta"].T - (model["center"] * model["beta"]).sum(axis=1)
    return np.clip(q, model["lo"], model["hi"])


def ridge_refit(x, action, y, n_llms: int, **kw) -> Callable[[np.ndarray], np.ndarray]:
    """``refit(weights) -> q (n, L)``: the ridge reward model fitted with the given decision
    weights, predicting every logged decision.

    Example
    -------
    >>> f = ridge_refit(np.zeros((3, 1)), np.array([0, 0, 1]), np.array([1.0, 0.0, 1.0]), 2,
    ...                 prior=0.0)
    >>> f(np.array([1.0, 1.0, 1.0]))[0].tolist(), f(np.array([3.0, 0.0, 1.0]))[0].tolist()
    ([0.5, 1.0], [1.0, 1.0])
    """
    x = np.asarray(x, np.float64)
    return lambda weights: ridge_predict(ridge_fit(x, action, y, weights, n_llms, **kw), x)


def crossfit(refit: Callable[[np.ndarray], np.ndarray], n: int, folds: int = 2,
             seed: int = 0) -> Callable[[np.ndarray], np.ndarray]:
    """Cross-fitted version of ``refit``: the decisions are split into ``folds`` seeded random
    folds, and each fold's predictions come from the model fitted on the other folds (so no
    decision's own outcome is in the prediction DR subtracts from it). ``folds`` < 2 returns
    ``refit`` unchanged.

    Example
    -------
    >>> f = crossfit(lambda w: np.tile(w[:, None], (1, 2)), 4, folds=2)
    >>> f(np.ones(4)).sum(axis=1).tolist()   # each row fitted with its own weight zeroed
    [0.0, 0.0, 0.0, 0.0]
    """
    if folds < 2:
        return refit
    if n < folds:
        raise ValueError(f"cross-fitting needs at least {folds} decisions, got {n}")
    fold = np.random.default_rng(seed).permutation(n) % folds

    def fitted(weights):
        weights = np.asarray(weights, np.float64)
        q = None
        for k in range(folds):
            held = fold == k
            qk = refit(np.where(held, 0.0, weights))
            q = np.empty_like(qk) if q is None else q
            q[held] = qk[held]
        return q
    return fitted


def query_features(data, *, encoder: str = "hashing", dims: int = 64, task: bool = True,
                   **encoder_options) -> np.ndarray:
    """Reward-model features of ``data``'s queries: the ``dims`` leading principal components
    of the query embeddings (none when the data keeps no texts) and, with ``task`` and a
    ``task`` column, the task one-hot scaled to unit variance; a single zero column when there
    is neither (the model is then each LLM's mean outcome).

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> query_features(make_synthetic(30, 3, seed=0), dims=4).shape[0]
    30
    """
    import pandas as pd  # noqa: PLC0415

    from ..encoders import get_encoder  # noqa: PLC0415
    parts = []
    if any(isinstance(t, str) and t.strip() for t in data.texts):
        x = np.asarray(get_encoder(encoder, **encoder_options).encode_data(data), np.float64)
        x = x - x.mean(axis=0)
        k = min(int(dims), *x.shape)
        if k > 0:
            _, _, vt = np.linalg.svd(x, full_matrices=False)
            parts.append(x @ vt[:k].T)
    if task and "task" in data.queries.columns:
        oh = pd.get_dummies(data.queries["task"].astype(str)).to_numpy(np.float64)
        parts.append(oh / np.maximum(oh.std(axis=0), 1e-12))
    return np.hstack(parts) if parts else np.zeros((data.n_queries, 1))


def ridge_reward(x, action, y, n_llms: int, *, folds: int = 2, seed: int = 0,
                 alpha: float = 10.0, prior: float = 10.0) -> Callable[[np.ndarray], np.ndarray]:
    """The ``refit`` callable of DM/DR used by the benchmark and ``recsys-router ope``: the
    ridge reward model on ``x``, cross-fitted over ``folds`` folds (when the log has at least
    ``2 * folds`` decisions)."""
    n = len(y)
    return crossfit(ridge_refit(x, action, y, n_llms, alpha=alpha, prior=prior), n,
                    folds=folds if n >= 2 * folds else 1, seed=seed)


def mean_outcome_refit(y, action, propensity, n_llms: int) -> Callable[[np.ndarray], np.ndarray]:
    """``refit(weights) -> q (n, L)``: each LLM's importance-weighted mean logged outcome
    (weights ``weights / propensity`` over the decisions that chose it; an LLM no weighted
    decision chose gets the weighted mean over all), the same for every decision: the cost
    model of ``recsys-router ope``, refitted on each bootstrap resample so that DM/DR's cost
    intervals carry its noise.

    Example
    -------
    >>> f = mean_outcome_refit(np.array([1.0, 3.0, 10.0]), np.array([0, 0, 1]), np.full(3, 0.5), 3)
    >>> f(np.ones(3))[0].tolist(), f(np.array([2.0, 0.0, 1.0]))[0].tolist()
    ([2.0, 10.0, 4.666666666666667], [1.0, 10.0, 4.0])
    """
    y = np.asarray(y, np.float64)
    action = np.asarray(action)
    inv_p = 1.0 / np.asarray(propensity, np.float64)
    onehot = np.eye(n_llms)[action]                       # (n, L): the chosen LLM of each decision

    def refit(weights: np.ndarray) -> np.ndarray:
        w = np.asarray(weights, np.float64) * inv_p
        pooled = float(w @ y / w.sum()) if w.sum() > 0 else float(y.mean())
        tot, num = w @ onehot, (w * y) @ onehot
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(tot > 0, num / tot, pooled)
        return np.tile(mean, (len(y), 1))
    return refit

