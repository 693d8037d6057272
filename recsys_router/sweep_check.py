"""Held-out nAUC of a budget sweep, and a paired comparison of two routers' nAUC with a
bootstrap standard error.

:func:`held_out_nauc` scores one router's cost-quality trade-off on held-out queries (the
objective of ``evaluate --auto N --auto-objective nauc``). :func:`paired_nauc` compares two
score predictions that share the same predicted costs (a learned router, and the baseline the
safe fallback would hand its queries to, which keeps the router's cost predictions), on the
same queries: nAUC is a property of a whole curve, not a mean over queries, so its standard
error comes from resampling the queries (the paired bootstrap: both curves are recomputed on
each resample, and the SE is the standard deviation of the resampled differences).

Reference: Efron & Tibshirani, "An Introduction to the Bootstrap", 1993, chapter 6 (the
bootstrap standard error); nAUC as in ORBIT's code (:func:`recsys_router.metrics.orbit.nauc_code`).
"""

from __future__ import annotations

import math

import numpy as np

from .candidate_masks import mask_predictions
from .data import RoutingData
from .hyperparams import check_number
from .metrics.base import best_single
from .metrics.orbit import budget_choices, budget_grid, nauc_code, pareto_front

__all__ = ["has_costs", "held_out_nauc", "paired_nauc", "N_BOOT", "MAX_BOOT"]

#: bootstrap resamples of :func:`paired_nauc` by default
N_BOOT = 200
#: most resamples :func:`paired_nauc` accepts
MAX_BOOT = 10_000


def has_costs(data: RoutingData) -> bool:
    """Whether ``data`` has a finite cost on every observed (query, LLM) cell (at least one),
    and not the same cost on all of them.

    Costs that are equal everywhere (every LLM free, say) cannot change a choice: every
    budget sweep is one point and its nAUC is 0 for every router, so callers that judge or
    tune by the sweep (the safe fallback's verdict, ``--auto``'s objective, the cost-aware
    wrapper's penalty) treat such data as data without costs.

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> d = make_synthetic(20, 3, 2, seed=0)
    >>> bare = d.subset(); bare.costs = None
    >>> free = d.subset(); free.costs = np.zeros_like(d.costs)
    >>> has_costs(d), has_costs(bare), has_costs(free)
    (True, False, False)
    """
    if data.costs is None:
        return False
    obs = ~np.isnan(data.scores)
    c = np.asarray(data.costs, np.float64)[obs]
    return bool(c.size) and bool(np.isfinite(c).all()) and bool(c.max() > c.min())


def _rows(scores, costs, where: str):
    s = np.asarray(scores, np.float64)
    obs = ~np.isnan(s)
    rows = obs.any(axis=1)
    if not rows.any():
        raise ValueError(f"{where}: no held-out query has an observed score")
    s, o = s[rows], obs[rows]
    c = np.where(o, np.asarray(costs, np.float64)[rows], np.nan)
    if not np.isfinite(c[o]).all():
        raise ValueError(f"{where}: every observed cell needs a finite cost")
    return rows, s, o, c


def _curve_cells(score_rows, pred_costs, s, o, c, max_budgets: int) -> list:
    """Per query and budget, the realised score and cost of the sweep's choice, for each of
    ``score_rows`` (predicted score matrices swept with the same ``pred_costs``: the costs'
    masking and budget grid are computed once)."""
    _, pc = mask_predictions(score_rows[0], pred_costs, o)
    grid = budget_grid(pc, max_budgets)
    r = np.arange(len(s))[:, None]
    out = []
    for p in score_rows:
        ch = budget_choices(mask_predictions(p, None, o)[0], pc, grid, tie_break="cheapest")
        out.append((s[r, ch], c[r, ch]))
    return out


def _nauc(quality: np.ndarray, cost: np.ndarray, best_cost: float) -> float:
    return float(nauc_code(pareto_front(cost, quality), best_cost, quality[-1]))


def held_out_nauc(pred_scores: np.ndarray, pred_costs: np.ndarray, scores: np.ndarray,
                  costs: np.ndarray, max_budgets: int = 100) -> float:
    """ORBIT's nAUC (code variant, higher is better) of a router's budget sweep on held-out
    queries, each routed among its observed LLMs.

    Per budget ``C`` of :func:`~recsys_router.metrics.orbit.budget_grid` (the router's own
    predicted costs), query ``i`` takes the LLM of highest predicted score among its observed
    LLMs of predicted cost ``<= C`` (its cheapest predicted when none fits); the curve point
    is ``(mean_i c[i, ch_i], mean_i s[i, ch_i])``. ``nAUC = nauc_code(pareto_front(curve),
    cost of the best single LLM, quality at the largest budget)``, the best single LLM being
    the one of highest mean observed score on these queries. Queries without an observed LLM
    are left out.

    Parameters
    ----------
    pred_scores, pred_costs : ndarray (n, L)
        The router's predictions.
    scores, costs : ndarray (n, L)
        True scores (NaN = unobserved) and costs (finite where a score is observed).
    max_budgets : int

    Returns
    -------
    float

    Example
    -------
    Two queries, a cheap LLM right on the first and a dear one right on both; a router that
    predicts the truth takes the cheap one at budget 1, (cost 1, quality 0.5), and at budget 3
    the cheap one on the first query (a tie, cheapest kept) and the dear one on the second,
    (2, 1.0); with the best single LLM's point (3, 1.0) and costs divided by 3, the area is
    (1/3) * 0.75 + (1/3) * 1.0:

    >>> s = np.array([[1., 1.], [0., 1.]]); c = np.array([[1., 3.], [1., 3.]])
    >>> round(held_out_nauc(s, c, s, c), 6)
    0.583333
    """
    rows, s, o, c = _rows(scores, costs, "held_out_nauc")
    [(cs, cc)] = _curve_cells([np.asarray(pred_scores, np.float64)[rows]],
                              np.asarray(pred_costs, np.float64)[rows], s, o, c, max_budgets)
    return _nauc(cs.mean(axis=0), cc.mean(axis=0), best_single(s, c).cost)


def _resampled_best_cost(counts: np.ndarray, s: np.ndarray, o: np.ndarray,
                         c: np.ndarray) -> np.ndarray:
    """Per resample, the mean cost of :func:`best_single` on the resampled queries (the same
    choice and tie-breaks: higher mean observed score, then lower mean cost, then index)."""
    w = counts.astype(np.float64)
    den = w @ o
    with np.errstate(invalid="ignore", divide="ignore"):
        q = (w @ np.where(o, s, 0.0)) / den
        cost = (w @ np.where(o, c, 0.0)) / den
    q = np.where(den > 0, q, -np.inf)
    out = np.empty(len(w))
    idx = np.arange(s.shape[1])
    for b in range(len(w)):
        j = np.lexsort((idx, np.nan_to_num(cost[b], nan=np.inf), -q[b]))[0]
        out[b] = cost[b, j]
    return out


def paired_nauc(router_scores: np.ndarray, base_scores: np.ndarray, pred_costs: np.ndarray,
                scores: np.ndarray, costs: np.ndarray, *, n_boot: int = N_BOOT, seed: int = 0,
                max_budgets: int = 100) -> dict:
    """Held-out nAUC of two score predictions under the same predicted costs, their
    difference and its paired bootstrap standard error.

    ``router`` and ``baseline`` are :func:`held_out_nauc` of ``(router_scores, pred_costs)``
    and ``(base_scores, pred_costs)``; ``diff = router - baseline``. Each of ``n_boot``
    resamples draws the queries with replacement (seeded), recomputes both curves (their
    choices per query and budget are those of the full set, the budget grid being built from
    all queries' predicted costs) and the best single LLM's cost on the resample, and takes
    the difference; ``se`` is the standard deviation of those differences (``ddof=1``; 0
    when every resample gives the same difference).

    Parameters
    ----------
    router_scores, base_scores, pred_costs : ndarray (n, L)
        Predicted scores of the two routers and the predicted costs both are swept with.
    scores, costs : ndarray (n, L)
        True scores (NaN = unobserved) and costs.
    n_boot : int
        Resamples, 2 to :data:`MAX_BOOT`.
    seed : int
        Seeds the resampling.
    max_budgets : int
        As :func:`held_out_nauc`.

    Returns
    -------
    dict
        ``router``, ``baseline``, ``diff``, ``se`` (floats), ``n`` (queries with an observed
        LLM) and ``n_boot``.

    Example
    -------
    A router that predicts the truth against one that predicts the reverse order, both with
    the true costs:

    >>> s = np.array([[1., 1.], [0., 1.], [1., 0.], [0., 1.]]); c = np.tile([1., 3.], (4, 1))
    >>> r = paired_nauc(s, 1.0 - s, c, s, c, n_boot=50)
    >>> round(r["diff"], 4) == round(held_out_nauc(s, c, s, c) - held_out_nauc(1 - s, c, s, c), 4)
    True
    >>> r["se"] > 0
    True
    """
    n_boot = check_number(n_boot, "paired_nauc: n_boot", low=2, high=MAX_BOOT, integer=True)
    rows, s, o, c = _rows(scores, costs, "paired_nauc")
    pc = np.asarray(pred_costs, np.float64)[rows]
    cells = _curve_cells([np.asarray(p, np.float64)[rows] for p in (router_scores, base_scores)],
                         pc, s, o, c, max_budgets)
    best = best_single(s, c).cost
    point = [_nauc(cs.mean(axis=0), cc.mean(axis=0), best) for cs, cc in cells]
    n = len(s)
    counts = np.random.default_rng(seed).multinomial(n, np.full(n, 1.0 / n), size=int(n_boot))
    best_b = _resampled_best_cost(counts, s, o, c)
    curves = [(counts @ cs / n, counts @ cc / n) for cs, cc in cells]
    diffs = np.array([_nauc(curves[0][0][b], curves[0][1][b], best_b[b])
                      - _nauc(curves[1][0][b], curves[1][1][b], best_b[b])
                      for b in range(int(n_boot))])
    se = float(diffs.std(ddof=1))
    return {"router": point[0], "baseline": point[1], "diff": point[0] - point[1],
            "se": se if math.isfinite(se) and se > 1e-15 else 0.0, "n": int(n),
            "n_boot": int(n_boot)}
