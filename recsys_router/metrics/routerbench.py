"""RouterBench metrics: cost-quality points, the non-decreasing convex hull and AIQ.

Reference: Hu et al., "RouterBench: A Benchmark for Multi-LLM Routing System",
arXiv:2403.12031; code withmartian/routerbench.

* Each LLM is a point ``(mean cost, mean quality)`` on the test set; a router gives one
  point per willingness to pay ``lambda`` (policy ``argmax_j lambda * P_hat - c_hat``).
* Mixing two routers at random traces the segment between their points (linear
  interpolation), so a router's attainable curve is the upper convex hull of its points.
  The non-decreasing convex hull (NDCH) keeps that hull from its cheapest point up to its
  highest-quality point.
* ``AIQ = 1/(c_max - c_min) * integral_{c_min}^{c_max} R~(c) dc`` where ``R~`` is the
  NDCH extended below its cheapest point by the segment to the null router ``(0, 0)`` and
  flat beyond its dearest point; ``[c_min, c_max]`` must be shared by all compared routers.
* The Zero router is the NDCH of the LLMs' own points (random mixing of single LLMs).

RouterBench's code (``evaluation/AIQ.py`` @ cc67d10) integrates differently: each hull gets
a last point ``(x_max, y_last)`` at the largest cost of all compared hulls, and
``AIQ = trapz(hull) / x_max`` - nothing is counted below a hull's cheapest point.
:func:`aiq_code` gives that variant (on the NDCH built here).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..errors import DataValidationError
from ..policies import wtp_policy
from .base import as_matrix, metric, observed_costs, observed_means

__all__ = ["llm_points", "wtp_sweep", "default_lambdas", "interpolate", "ndch", "ndch_indices",
           "HULL_TOLERANCE", "hull_value", "shared_domain", "aiq", "aiq_many", "aiq_code", "zero_router", "routerbench_metrics"]


#: relative tolerance below which a point counts as on a hull chord (rounding, not data)
HULL_TOLERANCE = 1e-12


def _points(points, name: str = "points") -> np.ndarray:
    p = np.asarray(points, dtype=np.float64)
    if p.ndim != 2 or p.shape[1] != 2 or p.shape[0] == 0:
        raise DataValidationError(f"{name} must be a non-empty (k, 2) array of (cost, quality) rows, "
                                  f"got shape {p.shape}", column=name)
    if not np.isfinite(p).all():
        i = int(np.flatnonzero(~np.isfinite(p).all(axis=1))[0])
        raise DataValidationError(f"{name} row {i} is {p[i].tolist()}; expected finite (cost, quality)",
                                  row=i, column=name)
    return p


def _hull(hull, name: str = "hull") -> np.ndarray:
    """``hull`` checked: finite (cost, quality) rows, cost strictly increasing (as ndch gives)."""
    h = _points(hull, name)
    bad = np.flatnonzero(np.diff(h[:, 0]) <= 0) + 1
    if len(bad):
        i = int(bad[0])
        raise DataValidationError(f"{name} row {i} has cost {float(h[i, 0])} after {float(h[i - 1, 0])} "
                                  f"in row {i - 1}; expected strictly increasing costs (see ndch)",
                                  row=i, column=name)
    return h


def llm_points(scores: np.ndarray, costs: np.ndarray) -> np.ndarray:
    """Each LLM's ``(mean cost, mean quality)`` on the test queries (both over the queries
    where its score was observed, when some score cells are NaN: a cost on an unobserved cell
    is ignored).

    Returns
    -------
    ndarray, shape (n_llms, 2)

    Example
    -------
    >>> llm_points(np.array([[1., 0.], [0., 0.]]), np.array([[2., 1.], [4., 1.]])).tolist()
    [[3.0, 0.5], [1.0, 0.0]]
    """
    s = as_matrix(scores, "scores", allow_nan=True)
    c = as_matrix(costs, "costs", s.shape, nonnegative=True, allow_nan=True)
    return np.column_stack([observed_means(observed_costs(s, c)), observed_means(s)])


def wtp_sweep(pred_scores: np.ndarray, pred_costs: np.ndarray, scores: np.ndarray,
              costs: np.ndarray, lambdas: Sequence[float], mask: np.ndarray | None = None) -> np.ndarray:
    """A router's points from a willingness-to-pay sweep.

    For each ``lambda`` the router picks ``argmax_j lambda * P_hat_ij - c_hat_ij`` per query
    (:func:`recsys_router.policies.wtp_policy`, cheapest on ties) and the point is
    ``(mean_i c[i, choice_i], mean_i s[i, choice_i])`` with the true costs and scores.

    Parameters
    ----------
    pred_scores, pred_costs : ndarray, shape (n_queries, n_llms)
        The router's predictions.
    scores, costs : ndarray, shape (n_queries, n_llms)
        True scores and costs.
    lambdas : sequence of float
        Willingness-to-pay values (>= 0).
    mask : ndarray of bool, shape (n_llms,), optional
        Allowed candidates.

    Returns
    -------
    ndarray, shape (len(lambdas), 2)
        ``(cost, quality)`` per lambda, in the order given.

    Example
    -------
    >>> ps = np.array([[0.9, 0.5], [0.2, 0.6]]); pc = np.array([[1., 0.1], [1., 0.1]])
    >>> wtp_sweep(ps, pc, ps, pc, [0.0, 100.0]).tolist()
    [[0.1, 0.55], [0.55, 0.75]]
    """
    s = as_matrix(scores, "scores")
    c = as_matrix(costs, "costs", s.shape, nonnegative=True)
    ps = as_matrix(pred_scores, "pred_scores", s.shape)
    pc = as_matrix(pred_costs, "pred_costs", s.shape)
    lam = np.asarray(lambdas, dtype=np.float64).ravel()
    if lam.size == 0:
        raise ValueError("lambdas must hold at least one willingness-to-pay value")
    rows = np.arange(s.shape[0])
    out = np.empty((lam.size, 2))
    for k, lmb in enumerate(lam):  # loop over lambdas; each step is vectorised over queries
        ch = wtp_policy(ps, pc, float(lmb), mask)
        out[k] = c[rows, ch].mean(), s[rows, ch].mean()
    return out


def default_lambdas(pred_scores: np.ndarray, pred_costs: np.ndarray, n: int = 100) -> np.ndarray:
    """A willingness-to-pay grid covering "always cheapest" to "always best predicted".

    ``0`` followed by ``n - 1`` log-spaced values from ``lo = 1e-3 * c_min / S`` to
    ``hi = 1e3 * max(C, c_min) / g``, where ``c_min`` is the smallest positive predicted cost,
    ``C`` the predicted cost span, ``S`` the predicted score span and ``g`` the smallest
    positive gap between distinct predicted scores. A decision between two LLMs of one row
    flips at ``lambda = cost gap / score gap``; every flip lies below ``hi``, and every flip
    between LLMs whose costs differ by at least ``1e-3 * c_min`` lies above ``lo``. Flips
    between LLMs whose predicted costs are closer than that happen between ``0`` and ``lo``
    and are not sampled (their operating points cost the same to within 0.1 % of the
    cheapest LLM). Like RouterBench's own fixed list of willingness-to-pay values, the grid
    samples the sweep; it does not enumerate every breakpoint.

    Example
    -------
    >>> lam = default_lambdas(np.array([[0.5, 0.9]]), np.array([[0.1, 1.0]]), n=5)
    >>> float(lam[0]), lam.size, bool(np.all(np.diff(lam) > 0))
    (0.0, 5, True)
    """
    ps = as_matrix(pred_scores, "pred_scores")
    pc = as_matrix(pred_costs, "pred_costs", ps.shape)
    if n < 2:
        raise ValueError(f"n must be >= 2, got {n}")
    cost_span = float(pc.max() - pc.min())
    sc = np.sort(np.unique(ps))
    gaps = np.diff(sc)
    min_gap = float(gaps[gaps > 0].min()) if (gaps > 0).any() else 1.0
    score_span = float(sc[-1] - sc[0]) or 1.0
    pos_costs = pc[pc > 0]
    small = float(pos_costs.min()) if pos_costs.size else 1.0
    lo = 1e-3 * small / score_span
    hi = 1e3 * max(cost_span, small) / min_gap
    return np.concatenate([[0.0], np.geomspace(lo, hi, n - 1)])


def interpolate(points: np.ndarray, x) -> np.ndarray:
    """Piecewise-linear curve through ``points`` (sorted by cost) evaluated at ``x``; NaN
    outside ``[min cost, max cost]``. Along a hull this is the quality reached by mixing
    the two neighbouring routers at random.

    Example
    -------
    >>> interpolate(np.array([[0., 0.], [2., 1.]]), [1.0, 3.0]).tolist()
    [0.5, nan]
    """
    p = _points(points)
    p = p[np.lexsort((p[:, 1], p[:, 0]))]
    x = np.asarray(x, dtype=np.float64)
    y = np.interp(x, p[:, 0], p[:, 1])
    return np.where((x < p[0, 0]) | (x > p[-1, 0]), np.nan, y)


def ndch_indices(points: np.ndarray) -> np.ndarray:
    """Row indices of the non-decreasing convex hull of ``points`` (see :func:`ndch`), in
    ascending cost: the one hull of the package (the zero router's too).

    Among points of equal cost only the best quality can be a vertex (the first row of the
    best quality, on exact ties).

    Example
    -------
    >>> ndch_indices(np.array([[1., .5], [2., .55], [3., .9], [4., .8]])).tolist()
    [0, 2]
    """
    p = _points(points)
    order = np.lexsort((np.arange(len(p)), -p[:, 1], p[:, 0]))
    # one point per cost: the best quality (first after the sort above)
    keep = np.ones(len(order), dtype=bool)
    keep[1:] = p[order[1:], 0] != p[order[:-1], 0]
    order = order[keep]
    hull: list[int] = []
    for k in order:  # loop over points (few), not over queries
        while len(hull) >= 2:
            o, a = p[hull[-2]], p[hull[-1]]
            u, v = a - o, p[k] - o
            cross = u[0] * v[1] - u[1] * v[0]
            # a on (up to rounding) or below the chord o -> p[k]: not an upper-hull vertex
            if cross >= -HULL_TOLERANCE * np.hypot(*u) * np.hypot(*v):
                hull.pop()
            else:
                break
        hull.append(int(k))
    top = int(np.argmax(p[hull, 1]))
    return np.asarray(hull[:top + 1], dtype=np.int64)


def ndch(points: np.ndarray) -> np.ndarray:
    """Non-decreasing convex hull: the upper convex hull of ``points`` from the cheapest
    point up to the highest-quality one.

    Built with Andrew's monotone chain (points sorted by cost, then quality descending, a
    vertex dropped whenever it is on or below the chord of its neighbours, up to a
    relative rounding tolerance of :data:`HULL_TOLERANCE`), then cut at
    the first vertex of maximal quality. Collinear middle points are dropped.

    Parameters
    ----------
    points : ndarray, shape (k, 2)
        ``(cost, quality)`` rows.

    Returns
    -------
    ndarray, shape (h, 2)
        Hull vertices, cost strictly increasing, quality strictly increasing.

    Example
    -------
    >>> ndch(np.array([[1., 0.2], [2., 0.3], [3., 0.9], [4., 0.8], [0.5, 0.1]])).tolist()
    [[0.5, 0.1], [3.0, 0.9]]
    """
    p = _points(points)
    return p[ndch_indices(p)]


def hull_value(hull: np.ndarray, x) -> np.ndarray:
    """Quality of an NDCH at cost(s) ``x``: linear towards the null router ``(0, 0)`` below its
    cheapest point, linear between vertices, flat beyond its dearest point.

    ``hull`` must be as :func:`ndch` gives it, costs strictly increasing: any other order
    raises a ``DataValidationError`` naming ``hull`` and the row (never sorted: use ndch).

    Example
    -------
    >>> hull_value(np.array([[2., 0.4], [4., 0.8]]), [1.0, 3.0, 5.0]).tolist()
    [0.2, 0.6000000000000001, 0.8]
    """
    h = _hull(hull)
    x = np.asarray(x, dtype=np.float64)
    y = np.interp(x, h[:, 0], h[:, 1])
    x0, y0 = h[0]
    below = y0 * np.clip(x, 0.0, None) / x0 if x0 > 0 else np.full_like(x, y0)
    return np.where(x < x0, below, y)


def shared_domain(hulls: Sequence[np.ndarray]) -> tuple[float, float]:
    """Cost range shared by routers: ``(min of cheapest costs, max of dearest costs)``.

    Example
    -------
    >>> shared_domain([np.array([[1., .1], [3., .5]]), np.array([[2., .2], [5., .6]])])
    (1.0, 5.0)
    """
    hs = [_points(h, "hull") for h in hulls]
    if not hs:
        raise ValueError("shared_domain needs at least one hull")
    return float(min(h[:, 0].min() for h in hs)), float(max(h[:, 0].max() for h in hs))


@metric("aiq", "higher")
def aiq(hull: np.ndarray, domain: tuple[float, float]) -> float:
    """Average improvement in quality over a cost domain:
    ``AIQ = 1/(c_max - c_min) * integral_{c_min}^{c_max} R~(c) dc`` with ``R~`` =
    :func:`hull_value` (exact trapezoid integration of the piecewise-linear curve).

    Parameters
    ----------
    hull : ndarray, shape (h, 2)
        An NDCH (see :func:`ndch`), costs strictly increasing (as in :func:`hull_value`).
    domain : tuple of float
        ``(c_min, c_max)`` shared by every compared router (see :func:`shared_domain`).
        When ``c_min == c_max`` the value at that cost is returned.

    Returns
    -------
    float

    Example
    -------
    >>> aiq(np.array([[2., 0.4], [4., 0.8]]), (0.0, 4.0))
    0.4
    """
    h = _hull(hull)
    lo, hi = float(domain[0]), float(domain[1])
    if not (np.isfinite(lo) and np.isfinite(hi)) or hi < lo or lo < 0:
        raise ValueError(f"domain must be (c_min, c_max) with 0 <= c_min <= c_max, got {domain!r}")
    if hi == lo:
        return float(hull_value(h, lo))
    xs = np.unique(np.concatenate([[lo, hi], h[:, 0][(h[:, 0] > lo) & (h[:, 0] < hi)]]))
    return float(np.trapezoid(hull_value(h, xs), xs) / (hi - lo))


def aiq_many(hulls: Sequence[np.ndarray], domain: tuple[float, float] | None = None) -> np.ndarray:
    """AIQ of several routers on one shared domain (default :func:`shared_domain` of them).

    Example
    -------
    >>> aiq_many([np.array([[1., .5]]), np.array([[2., 1.]])]).tolist()
    [0.5, 0.75]
    """
    hs = list(hulls)
    dom = shared_domain(hs) if domain is None else domain
    return np.array([aiq(h, dom) for h in hs])


@metric("aiq_code", "higher")
def aiq_code(hulls: Sequence[np.ndarray]) -> np.ndarray:
    """AIQ as RouterBench's code computes it, for routers compared together:
    ``x_max = max over hulls of the dearest cost``; each hull ``H`` gets the extra point
    ``(x_max, y_last(H))`` and ``AIQ(H) = trapz(H) / x_max``. Each hull must be an NDCH,
    costs strictly increasing (else refused naming ``hulls[k]`` and the row, as by
    :func:`hull_value`: the trapezoid rule runs along the rows as given).

    Example
    -------
    >>> aiq_code([np.array([[2., .4], [4., .8]]), np.array([[1., .5]])]).round(6).tolist()
    [0.3, 0.375]
    """
    hs = [_hull(h, f"hulls[{k}]") for k, h in enumerate(hulls)]
    if not hs:
        raise ValueError("aiq_code needs at least one hull")
    x_max = max(float(h[:, 0].max()) for h in hs)
    if x_max <= 0:
        raise ValueError(f"aiq_code needs a positive largest cost, got {x_max}")
    return np.array([np.trapezoid(np.append(h[:, 1], h[-1, 1]), np.append(h[:, 0], x_max)) / x_max
                     for h in hs])


def zero_router(scores: np.ndarray, costs: np.ndarray) -> np.ndarray:
    """RouterBench's Zero router: the NDCH of the LLMs' own ``(mean cost, mean quality)``.

    Example
    -------
    >>> zero_router(np.array([[1., 0., .6]]), np.array([[3., 1., 2.]])).tolist()
    [[1.0, 0.0], [2.0, 0.6], [3.0, 1.0]]
    """
    return ndch(llm_points(scores, costs))


def routerbench_metrics(pred_scores: np.ndarray, pred_costs: np.ndarray, scores: np.ndarray,
                        costs: np.ndarray, lambdas: Sequence[float] | None = None, *,
                        domain: tuple[float, float] | None = None) -> dict:
    """RouterBench numbers for one router, with the Zero router on the same domain.

    Parameters
    ----------
    pred_scores, pred_costs, scores, costs
        As in :func:`wtp_sweep`.
    lambdas : sequence of float, optional
        Default :func:`default_lambdas` (100 values).
    domain : (float, float), optional
        Shared AIQ domain; default the :func:`shared_domain` of this router's hull and the
        Zero router's. Give it explicitly when comparing several routers.

    Returns
    -------
    dict
        ``points`` (k, 2), ``hull``, ``aiq``, ``zero_hull``, ``zero_aiq``, ``aiq_code`` and
        ``zero_aiq_code`` (:func:`aiq_code` of the two hulls together; NaN when every cost
        is 0), ``llm_points``,
        ``domain``, ``lambdas``.

    Example
    -------
    >>> s = np.array([[1., 0.], [0., 1.]]); c = np.array([[1., 2.], [1., 2.]])
    >>> r = routerbench_metrics(s, c, s, c, [0.0, 10.0])
    >>> r["hull"].tolist(), r["aiq"], r["zero_aiq"]
    ([[1.0, 0.5], [1.5, 1.0]], 0.75, 0.5)
    """
    lam = default_lambdas(pred_scores, pred_costs) if lambdas is None else np.asarray(lambdas, float)
    pts = wtp_sweep(pred_scores, pred_costs, scores, costs, lam)
    hull = ndch(pts)
    lp = llm_points(scores, costs)
    zhull = ndch(lp)
    dom = shared_domain([hull, zhull]) if domain is None else (float(domain[0]), float(domain[1]))
    # AIQ as RouterBench's code computes it divides by the dearest cost: undefined (NaN) when
    # every LLM is free, where the paper's AIQ over the shared domain is still defined
    free = max(float(hull[:, 0].max()), float(zhull[:, 0].max())) <= 0
    code = np.full(2, np.nan) if free else aiq_code([hull, zhull])
    return {"points": pts, "hull": hull, "aiq": aiq(hull, dom), "zero_hull": zhull,
            "zero_aiq": aiq(zhull, dom), "aiq_code": float(code[0]), "zero_aiq_code": float(code[1]),
            "llm_points": lp, "domain": dom, "lambdas": lam}
