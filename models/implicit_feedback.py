"""Interaction matrices of the implicit ALS / BPR routers, from full matrices or logged feedback.

References
----------
* Hu, Koren & Volinsky, "Collaborative Filtering for Implicit Feedback Datasets", ICDM 2008
  (confidence-weighted ALS).
* Rendle et al., "BPR: Bayesian Personalized Ranking from Implicit Feedback", UAI 2009.
* Schnabel et al., "Recommendations as Treatments: Debiasing Learning and Evaluation",
  ICML 2016 (IPS / SNIPS training).
* Wang et al., "Doubly Robust Joint Learning for Recommendation on Data Missing Not at
  Random", ICML 2019 (DR training).

What each logged-feedback loss means for the implicit family
-------------------------------------------------------------
A log reveals one LLM ``a_i`` per query with outcome ``y_i`` and propensity ``p_i``; the
importance weight is ``w_i = 1 / max(p_i, clip)``. Scores are scaled to [0, 1] (``s``) and a
cell is *positive* by the rule of :func:`confidence_matrix` (with one observed cell per query:
its scaled outcome is > 0).

``naive``
    The log as a sparse matrix: the positive logged cell has confidence ``1 + alpha * s``
    (ALS) or is one uniformly sampled positive (BPR); everything else is an implicit zero.
``ips``
    ALS: the evidence of each positive logged cell is importance weighted, confidence
    ``1 + alpha * w_i * s_i`` (failures and unlogged cells stay implicit zeros of confidence 1,
    as in ``naive``). BPR (``implicit`` ignores confidence values and samples positives
    uniformly from the stored entries): query ``i``'s positive is stored ``m_i`` times, ``m_i``
    a seeded stochastic rounding of ``w_i`` (``E[m_i] = w_i``), so an epoch draws ``sum w``
    samples in proportion to ``w``: its expected update is ``sum_i w_i grad_i``, the IPS
    gradient. ``implicit`` draws negatives from the same entries, so negatives are drawn by
    importance-weighted popularity too.
``snips``
    The same with the weights self-normalised over the log, ``w_i * n / sum_k w_k`` (mean 1):
    both solvers see the whole log in one objective, where ``sum w l / sum w`` is the IPS loss
    with these weights. (ALS: confidence ``1 + alpha * w'_i * s_i``; BPR: the same sampling
    distribution as ``ips`` and epochs of ``n`` samples.)
``dr``
    Doubly robust pseudo-targets for every cell
    (:func:`recsys_router.feedback.logged.logged_arrays`: a ridge reward model's prediction
    plus the importance-weighted residual on the logged cell), clipped to the score range
    [0, 1], are treated as a full score matrix: the positive rule and the confidence
    ``1 + alpha * s`` apply to every cell, as for a benchmark matrix.

The score calibration (per-LLM linear map of the factor model's raw output to the score
scale) is fitted on the logged cells weighted by ``w`` (``ips``/``snips``) or on the full
pseudo-target matrix (``dr``).
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from recsys_router.data import RoutingData
from recsys_router.feedback.logged import logged_arrays

__all__ = ["confidence_matrix", "scaled_scores", "logged_training", "per_column_linear",
           "stochastic_round"]


def scaled_scores(scores: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Scores min-max scaled to [0, 1] by ``(lo, hi)`` (all ones when ``hi <= lo``; NaN kept).

    Example
    -------
    >>> scaled_scores(np.array([[0.0, 2.0, np.nan]]), 0.0, 4.0).tolist()
    [[0.0, 0.5, nan]]
    """
    obs = ~np.isnan(scores)
    return np.where(obs, (scores - lo) / (hi - lo) if hi > lo else 1.0, np.nan)


def confidence_matrix(s: np.ndarray, alpha: float, weight: np.ndarray | None = None,
                      repeat: np.ndarray | None = None) -> sparse.csr_matrix:
    """Confidence matrix (queries x LLMs) of the positive cells of scaled scores ``s``.

    A cell is positive when its scaled score is > 0 and at least its query's mean observed
    scaled score; it stores ``1 + alpha * weight_i * s`` (``weight`` 1 by default). With
    ``repeat`` the positive cells of query ``i`` are stored ``repeat[i]`` times (duplicate
    entries, not summed: BPR's weighted sampling; a count of 0 leaves them out).

    Example
    -------
    >>> confidence_matrix(np.array([[1.0, 0.0], [np.nan, 0.5]]), 2.0, np.array([1.0, 3.0])).toarray().tolist()
    [[3.0, 0.0], [0.0, 4.0]]
    """
    obs = ~np.isnan(s)
    n = obs.sum(axis=1, keepdims=True)
    row_mean = np.divide(np.nansum(s, axis=1, keepdims=True), n, out=np.zeros_like(n, float),
                         where=n > 0)
    pos = obs & (np.nan_to_num(s) > 0) & (np.nan_to_num(s, nan=-1.0) >= row_mean - 1e-12)
    i, j = np.nonzero(pos)
    w = np.ones(len(s)) if weight is None else np.asarray(weight, np.float64)
    vals = (1.0 + alpha * w[i] * s[i, j]).astype(np.float32)
    if repeat is None:
        return sparse.csr_matrix((vals, (i, j)), shape=s.shape)
    k = np.asarray(repeat, np.int64)[i]
    i, j, vals = np.repeat(i, k), np.repeat(j, k), np.repeat(vals, k)
    indptr = np.concatenate([[0], np.cumsum(np.bincount(i, minlength=len(s)))])
    return sparse.csr_matrix((vals, j.astype(np.int32), indptr), shape=s.shape)


def stochastic_round(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Non-negative reals to integers with ``E[round(x)] = x`` (floor plus a Bernoulli draw).

    Example
    -------
    >>> stochastic_round(np.array([2.0, 3.0]), np.random.default_rng(0)).tolist()
    [2, 3]
    """
    base = np.floor(x)
    return (base + (rng.random(len(x)) < x - base)).astype(np.int64)


def logged_training(train: RoutingData, x: np.ndarray, loss: str, clip: float, model: str,
                    alpha: float, lo: float, hi: float, seed: int = 0) -> dict:
    """What an implicit router trains on for a logged-feedback loss (module docs).

    Parameters
    ----------
    train : RoutingData
        Logged feedback (one observed cell per query; a ``propensity`` column unless
        ``loss="naive"``).
    x : ndarray (n_queries, d)
        Query embeddings (the ``dr`` reward model's features).
    loss : {"naive", "ips", "snips", "dr"}
    clip : float
        Propensity clip.
    model : {"als", "bpr"}
    alpha : float
        Confidence slope.
    lo, hi : float
        Score range scaled to [0, 1].
    seed : int
        Seeds BPR's stochastic rounding.

    Returns
    -------
    dict
        ``matrix`` (CSR confidence matrix), ``weight`` (n,) the importance weight of each
        query's logged cell (ones for ``naive``/``dr``), ``calib_target`` (n, L) scores the
        calibration is fitted on (train scores; DR pseudo-targets on the data's scale for
        ``dr``) and ``calib_weight`` (n,) the calibration's row weights.
    """
    n = train.n_queries
    s = scaled_scores(train.scores.astype(np.float64), lo, hi)
    if loss == "dr":
        scaled = RoutingData(train.queries, train.llms, s.astype(np.float32), train.costs,
                             name=train.name, source=train.source)
        y = logged_arrays(scaled, x, "dr", clip, clip_targets=True)["y"].astype(np.float64)
        ones = np.ones(n)
        return {"matrix": confidence_matrix(y, alpha), "weight": ones,
                "calib_target": lo + y * (hi - lo),
                "calib_weight": ones}
    w = logged_arrays(train, x, loss, clip)["w"].astype(np.float64)
    if loss == "snips":
        w = w * n / w.sum()
    repeat = None
    if model == "bpr" and loss != "naive":
        repeat = stochastic_round(w, np.random.default_rng(seed))
    mat = confidence_matrix(s, alpha, None if model == "bpr" else w, repeat)
    return {"matrix": mat, "weight": w, "calib_target": train.scores, "calib_weight": w}


def per_column_linear(raw: np.ndarray, target: np.ndarray,
                      weight: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Weighted least squares ``target[:, j] ~ w_j * raw[:, j] + c_j`` over observed cells,
    with ``w_j >= 0`` (row weights ``weight``, 1 by default).

    Example
    -------
    >>> per_column_linear(np.array([[0.0], [1.0], [2.0]]), np.array([[1.0], [3.0], [5.0]]))
    (array([2.]), array([1.]))
    """
    n_col = raw.shape[1]
    w, c = np.ones(n_col), np.zeros(n_col)
    rw = np.ones(len(raw)) if weight is None else np.asarray(weight, np.float64)
    for j in range(n_col):
        ok = ~np.isnan(target[:, j])
        if ok.sum() < 2:
            continue
        x, y, v = raw[ok, j], target[ok, j].astype(np.float64), rw[ok]
        mx, my = np.average(x, weights=v), np.average(y, weights=v)
        vx = np.average((x - mx) ** 2, weights=v)
        # w >= 0 keeps the factor model's ranking; w = 0 falls back to the LLM's mean score
        w[j] = max(np.average((x - mx) * (y - my), weights=v) / vx, 0.0) if vx > 1e-12 else 0.0
        c[j] = my - w[j] * mx
    return w, c

