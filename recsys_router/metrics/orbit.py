"""ORBIT budget-sweep metrics: nAUC, Peak Score, QNC / rQNC and RCI.

Reference: Lai, Hu, Ye, "RouteJudge: An Open Platform for Reproducible and
Preference-Aware LLM Routing" (ORBIT toolbox), arXiv:2606.18774; code
LAMDA-Model-Reuse/ORBIT @ d33cb0b, ``methods/base.py``.

The sweep follows ORBIT's code: budgets are the unique predicted costs (100 linearly
spaced quantiles of them when there are more); for each budget ``C`` every query gets the
highest predicted score among LLMs with predicted cost ``<= C``; the curve point is
(mean true cost, mean true score). Where ORBIT's code and paper differ both are given:

* nAUC (code): the Pareto front plus the point (best single LLM's mean cost, quality at
  the largest budget), sorted by cost, costs divided by the largest cost, trapezoid area
  from the cheapest point. nAUC (paper, eq. B.3): trapezoid area of the front divided by
  ``x_T - x_1``.
* QNC (code) searches the front plus that appended point; the front-only value is also
  reported.
* RCI (code): a query counts when its chosen LLM is not among its best, or is among the
  LLMs of highest *mean test* cost while a best LLM outside them exists. RCI (per query,
  the issue's definition): chosen LLM scores below the query's best, or costs more than
  the cheapest of the query's best LLMs. Both in :mod:`.rci`, which also takes what each
  decision paid (a cascade pays every LLM it tried).

Tie-breaks: ``tie_break="cheapest"`` (default) is :func:`recsys_router.policies.budget_policy`
(cheapest predicted cost among equal predicted scores; the cheapest LLM when none fits);
``tie_break="first"`` is ORBIT's code for learned routers (lowest column index; column 0
when none fits); ``tie_break="random"`` (seeded; cheapest when none fits) is what ORBIT's
oracle does among equally good LLMs.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..errors import DataValidationError
from .base import DIRECTIONS, as_matrix, best_single, finite_curve, metric, reaches
# RCI lives in its own module (it also takes the decisions' paid costs); re-exported here
from .rci import rci

__all__ = ["BudgetCurve", "QNC", "budget_grid", "budget_choices", "budget_sweep", "pareto_front",
           "nauc_code", "nauc_paper", "peak_score", "qnc", "rci", "orbit_metrics"]

_TIE_BREAKS = ("cheapest", "first", "random")
_CHUNK_CELLS = 4_000_000  # bool cells per block of the (queries x LLMs x budgets) comparison


class BudgetCurve(NamedTuple):
    """Result of :func:`budget_sweep`: one entry per budget (ascending)."""
    budgets: np.ndarray
    costs: np.ndarray
    qualities: np.ndarray
    last_choices: np.ndarray


class QNC(NamedTuple):
    """Quality-neutral cost: ``qnc`` (NaN when unreached), ``rqnc = qnc / best cost``, ``reached``."""
    qnc: float
    rqnc: float
    reached: bool


def budget_grid(pred_costs: np.ndarray, max_budgets: int = 100) -> np.ndarray:
    """ORBIT's budgets: the sorted unique predicted costs, or ``max_budgets`` quantiles of them
    (``np.quantile(unique, linspace(0, 1, max_budgets))``) when there are more.

    Example
    -------
    >>> budget_grid(np.array([[0.2, 0.1], [0.2, 0.3]])).tolist()
    [0.1, 0.2, 0.3]
    >>> budget_grid(np.arange(10.).reshape(5, 2), max_budgets=3).tolist()
    [0.0, 4.5, 9.0]
    """
    pc = as_matrix(pred_costs, "pred_costs")
    u = np.unique(pc)
    if max_budgets < 1:
        raise ValueError(f"max_budgets must be >= 1, got {max_budgets}")
    return np.quantile(u, np.linspace(0.0, 1.0, max_budgets)) if u.size > max_budgets else u


def _prepare(pred_scores, pred_costs, tie_break, seed=0):
    if tie_break not in _TIE_BREAKS:
        raise ValueError(f"tie_break must be one of {_TIE_BREAKS}, got {tie_break!r}")
    ps = as_matrix(pred_scores, "pred_scores")
    pc = as_matrix(pred_costs, "pred_costs", ps.shape)
    n, m = ps.shape
    cols = np.broadcast_to(np.arange(m), (n, m))
    if tie_break == "random":   # uniform among equal predicted scores (one draw per query x LLM)
        keys = (cols, np.random.default_rng(seed).random((n, m)), -ps)
    else:
        keys = (cols, pc, -ps) if tie_break == "cheapest" else (cols, -ps)
    by_pref = np.lexsort(keys, axis=-1)          # by_pref[i, 0] = most preferred column
    rank = np.empty((n, m), dtype=np.int64)      # higher = preferred (unique per row)
    np.put_along_axis(rank, by_pref, np.arange(m - 1, -1, -1)[None, :], axis=1)
    col_of_rank = by_pref[:, ::-1]               # col_of_rank[i, r] = column with rank r
    by_cost = np.lexsort((cols, pc), axis=-1)    # cheapest predicted cost first
    sorted_cost = np.take_along_axis(pc, by_cost, axis=1)
    prefix_best = np.maximum.accumulate(np.take_along_axis(rank, by_cost, axis=1), axis=1)
    fallback = np.zeros(n, dtype=np.int64) if tie_break == "first" else by_cost[:, 0]
    return sorted_cost, prefix_best, col_of_rank, fallback


def _budgets(budgets, sort: bool) -> np.ndarray:
    """Given budgets as a float vector (sorted ascending when ``sort``): at least one, none
    NaN (``inf`` is a budget every known cost fits, as in ``budget_policy``)."""
    b = np.atleast_1d(np.asarray(budgets, dtype=np.float64))
    if b.size == 0:
        raise DataValidationError("budgets is empty; expected at least one budget", column="budgets")
    if np.isnan(b).any():
        i = int(np.flatnonzero(np.isnan(b))[0])
        raise DataValidationError(f"budgets[{i}] is nan; expected a number (a cost cap)",
                                  column="budgets")
    return np.sort(b) if sort else b


def _choices_block(sorted_cost, prefix_best, col_of_rank, fallback, budgets):
    n_fit = (sorted_cost[:, :, None] <= budgets[None, None, :]).sum(axis=1)   # (n, B)
    best_rank = np.take_along_axis(prefix_best, np.maximum(n_fit - 1, 0), axis=1)
    ch = np.take_along_axis(col_of_rank, best_rank, axis=1)
    return np.where(n_fit > 0, ch, fallback[:, None])


def budget_choices(pred_scores: np.ndarray, pred_costs: np.ndarray, budgets, *,
                   tie_break: str = "cheapest", seed: int = 0) -> np.ndarray:
    """Chosen column per (query, budget): the best predicted score among LLMs whose predicted
    cost is ``<= C``; computed for all budgets at once (prefix maxima over LLMs sorted by
    predicted cost). With ``tie_break="cheapest"`` each column equals
    ``budget_policy(pred_scores, pred_costs, C)``. ``budgets`` must hold at least one budget
    and no NaN (a ``DataValidationError`` naming ``budgets``); their order is kept.

    Returns
    -------
    ndarray of int, shape (n_queries, n_budgets)

    Example
    -------
    >>> s = np.array([[0.5, 0.9], [0.5, 0.9]]); c = np.array([[0.1, 1.0], [0.1, 0.2]])
    >>> budget_choices(s, c, [0.05, 0.5]).tolist()
    [[0, 0], [0, 1]]
    """
    b = _budgets(budgets, sort=False)
    prep = _prepare(pred_scores, pred_costs, tie_break, seed)
    n, m = prep[0].shape
    step = max(1, _CHUNK_CELLS // max(1, m * b.size))   # bounds the (rows x LLMs x budgets) mask
    if n <= step:
        return _choices_block(*prep, b)
    out = np.empty((n, b.size), dtype=np.int64)
    for lo in range(0, n, step):
        out[lo:lo + step] = _choices_block(*(p[lo:lo + step] for p in prep), b)
    return out


def budget_sweep(pred_scores: np.ndarray, pred_costs: np.ndarray, scores: np.ndarray,
                 costs: np.ndarray, budgets=None, *, max_budgets: int = 100,
                 tie_break: str = "cheapest", seed: int = 0) -> BudgetCurve:
    """ORBIT's budget sweep: per budget ``C``, curve point
    ``(mean_i c[i, ch_i(C)], mean_i s[i, ch_i(C)])`` with ``ch_i(C)`` from :func:`budget_choices`.

    Parameters
    ----------
    pred_scores, pred_costs : ndarray, shape (n_queries, n_llms)
        The router's predictions (for an oracle, pass the true matrices).
    scores, costs : ndarray, shape (n_queries, n_llms)
        True scores and costs.
    budgets : array-like, optional
        Default :func:`budget_grid` of ``pred_costs``; sorted ascending either way. Given
        budgets must be at least one and none NaN (a NaN would sort last and pass for the
        largest budget): else a :class:`~recsys_router.errors.DataValidationError` naming
        ``budgets``. ``inf`` is accepted (every known cost fits).
    max_budgets : int
        Passed to :func:`budget_grid`.
    tie_break : {"cheapest", "first", "random"}
        See the module docstring.
    seed : int
        Seed of the ``"random"`` tie-break.

    Returns
    -------
    BudgetCurve
        ``budgets``, ``costs``, ``qualities`` (each shape (B,)) and ``last_choices`` (the
        choices at the largest budget, shape (n_queries,)).

    Example
    -------
    >>> s = np.array([[1., 0.], [0., 1.]]); c = np.array([[1., 3.], [1., 3.]])
    >>> cv = budget_sweep(s, c, s, c)
    >>> cv.budgets.tolist(), cv.costs.tolist(), cv.qualities.tolist()
    ([1.0, 3.0], [1.0, 2.0], [0.5, 1.0])
    """
    s = as_matrix(scores, "scores")
    c = as_matrix(costs, "costs", s.shape, nonnegative=True)
    prep = _prepare(pred_scores, pred_costs, tie_break, seed)
    if prep[0].shape != s.shape:
        raise ValueError(f"pred_scores has shape {prep[0].shape}, expected {s.shape} like scores")
    b = budget_grid(pred_costs, max_budgets) if budgets is None else _budgets(budgets, sort=True)
    n, m = s.shape
    step = max(1, _CHUNK_CELLS // max(1, m * b.size))
    tot_c = np.zeros(b.size)
    tot_s = np.zeros(b.size)
    last = np.empty(n, dtype=np.int64)
    for lo in range(0, n, step):  # blocks of queries bound memory; each block is vectorised
        sl = slice(lo, lo + step)
        ch = _choices_block(*(p[sl] for p in prep), b)
        r = np.arange(ch.shape[0])[:, None]
        tot_c += c[sl][r, ch].sum(axis=0)
        tot_s += s[sl][r, ch].sum(axis=0)
        last[sl] = ch[:, -1]
    return BudgetCurve(b, tot_c / n, tot_s / n, last)


def pareto_front(costs, qualities) -> np.ndarray:
    """ORBIT's Pareto front: points sorted by cost (stable), kept while quality strictly rises.

    Every point must be finite: a NaN or infinite cost or quality raises
    :class:`~recsys_router.errors.DataValidationError` (a ``ValueError``) naming the argument
    and index, rather than dropping the point (which could leave an empty front).

    Returns
    -------
    ndarray, shape (k, 2)
        ``(cost, quality)`` rows; ``k >= 1``.

    Example
    -------
    >>> pareto_front([3., 1., 2., 4.], [0.5, 0.4, 0.4, 0.7]).tolist()
    [[1.0, 0.4], [3.0, 0.5], [4.0, 0.7]]
    """
    x = np.asarray(costs, dtype=np.float64).ravel()
    y = np.asarray(qualities, dtype=np.float64).ravel()
    if x.shape != y.shape or x.size == 0:
        raise ValueError(f"costs and qualities must be non-empty and of equal length, got "
                         f"{x.shape} and {y.shape}")
    finite_curve(x, "costs")
    finite_curve(y, "qualities")
    o = np.argsort(x, kind="stable")
    x, y = x[o], y[o]
    prev_best = np.concatenate([[-np.inf], np.maximum.accumulate(y)[:-1]])
    keep = y > prev_best
    return np.column_stack([x[keep], y[keep]])


def _trapezoid(pts: np.ndarray) -> float:
    return float(np.trapezoid(pts[:, 1], pts[:, 0])) if len(pts) > 1 else 0.0


@metric("nauc", "higher")
def nauc_code(front: np.ndarray, best_cost: float, last_quality: float) -> float:
    """nAUC as ORBIT's code computes it.

    Points ``P = front + [(best_cost, last_quality)]`` sorted by cost ``x`` (stable); with
    ``x'_k = x_k / max_k x_k`` (unchanged when the max is 0):
    ``nAUC = sum_k (x'_k - x'_{k-1}) * (y_k + y_{k-1}) / 2``, starting at the cheapest point.

    Parameters
    ----------
    front : ndarray, shape (k, 2)
        Pareto front (see :func:`pareto_front`).
    best_cost : float
        Mean test cost of the best single LLM.
    last_quality : float
        Quality of the largest-budget point of the curve.

    Example
    -------
    >>> nauc_code(np.array([[1., 0.5], [2., 1.0]]), 4.0, 1.0)
    0.6875
    """
    pts = np.vstack([np.asarray(front, dtype=np.float64).reshape(-1, 2), [[best_cost, last_quality]]])
    pts = pts[np.argsort(pts[:, 0], kind="stable")]
    mx = pts[:, 0].max()
    if mx > 0:
        pts = np.column_stack([pts[:, 0] / mx, pts[:, 1]])
    return _trapezoid(pts)


@metric("nauc_paper", "higher")
def nauc_paper(front: np.ndarray) -> float:
    """nAUC as in ORBIT's paper (eq. B.3): ``(1/(x_T - x_1)) * sum_k (x_k - x_{k-1}) (y_k + y_{k-1}) / 2``
    over the front sorted by cost; NaN (undefined, like a zero width) when the front has a
    single cost or no point at all. A non-finite front row raises
    :class:`~recsys_router.errors.DataValidationError` (a ``ValueError``).

    Example
    -------
    >>> nauc_paper(np.array([[1., 0.5], [3., 1.0]]))
    0.75
    >>> nauc_paper(np.empty((0, 2)))
    nan
    """
    pts = np.asarray(front, dtype=np.float64).reshape(-1, 2)
    if not np.isfinite(pts).all():
        i = int(np.flatnonzero(~np.isfinite(pts).all(axis=1))[0])
        raise DataValidationError(f"front row {i} is {pts[i].tolist()}; expected finite "
                                  f"(cost, quality)", column="front")
    if len(pts) == 0:
        return float("nan")
    pts = pts[np.argsort(pts[:, 0], kind="stable")]
    width = pts[-1, 0] - pts[0, 0]
    return float(_trapezoid(pts) / width) if width > 0 else float("nan")


@metric("peak", "higher")
def peak_score(qualities) -> float:
    """Peak Score: ``max_k y_k`` over the curve.

    Example
    -------
    >>> peak_score([0.2, 0.9, 0.5])
    0.9
    """
    return float(np.max(np.asarray(qualities, dtype=np.float64)))


@metric("qnc", "lower")
def qnc(points: np.ndarray, best_quality: float, best_cost: float) -> QNC:
    """Quality-neutral cost: ``QNC = min { x_k : y_k >= q_best }`` over ``points``;
    ``rQNC = QNC / c_best``. NaN and ``reached=False`` when no point reaches ``q_best``.
    "Reaches" allows float rounding of the means (:func:`~recsys_router.metrics.base.reaches`).
    A free best single LLM (``c_best = 0``) gives ``rQNC = 1`` when the router also reaches
    its quality at cost 0 (no dearer than that LLM) and ``inf`` when only at a positive cost;
    NaN stays reserved for "not reached", which is how reports read it.

    Example
    -------
    >>> qnc(np.array([[1., 0.5], [2., 0.8], [3., 0.9]]), 0.8, 4.0)
    QNC(qnc=2.0, rqnc=0.5, reached=True)
    >>> qnc(np.array([[0., 0.8]]), 0.8, 0.0).rqnc, qnc(np.array([[0.5, 0.8]]), 0.8, 0.0).rqnc
    (1.0, inf)
    """
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    ok = reaches(pts[:, 1], best_quality)
    if not ok.any():
        return QNC(float("nan"), float("nan"), False)
    q = float(pts[ok, 0].min())
    if best_cost > 0:
        return QNC(q, q / best_cost, True)
    return QNC(q, 1.0 if q <= 0 else float("inf"), True)


DIRECTIONS["rqnc"] = "lower"
def orbit_metrics(pred_scores: np.ndarray, pred_costs: np.ndarray, scores: np.ndarray,
                  costs: np.ndarray, *, budgets=None, max_budgets: int = 100,
                  tie_break: str = "cheapest", seed: int = 0) -> dict:
    """Every ORBIT number for one router (code and paper variants).

    Parameters
    ----------
    pred_scores, pred_costs, scores, costs, budgets, max_budgets, tie_break, seed
        As in :func:`budget_sweep`.

    Returns
    -------
    dict
        ``nauc`` (code), ``nauc_paper``, ``peak``, ``qnc``/``rqnc``/``qnc_reached`` (code:
        front plus appended point), ``qnc_front``/``rqnc_front``/``qnc_front_reached``,
        ``rci`` (ORBIT code), ``rci_per_query`` (issue definition), ``quality_at_max_budget``,
        ``cost_at_max_budget``, ``best_single_index``/``_quality``/``_cost``, ``curve``
        (:class:`BudgetCurve`) and ``front`` ((k, 2) array).

    Example
    -------
    >>> s = np.array([[1., 0.], [0., 1.], [0., 1.]]); c = np.array([[1., 3.]] * 3)
    >>> r = orbit_metrics(s, c, s, c)
    >>> r["front"].tolist(), r["nauc"], r["rqnc"], r["rci"]
    ([[1.0, 0.3333333333333333], [2.3333333333333335, 1.0]], 0.5185185185185185, 0.7777777777777778, 0.0)
    """
    s = as_matrix(scores, "scores")
    c = as_matrix(costs, "costs", s.shape, nonnegative=True)
    curve = budget_sweep(pred_scores, pred_costs, s, c, budgets, max_budgets=max_budgets,
                         tie_break=tie_break, seed=seed)
    front = pareto_front(curve.costs, curve.qualities)
    bs = best_single(s, c)
    last_q, last_c = float(curve.qualities[-1]), float(curve.costs[-1])
    code_pts = np.vstack([front, [[bs.cost, last_q]]])
    q_code, q_front = qnc(code_pts, bs.quality, bs.cost), qnc(front, bs.quality, bs.cost)
    return {
        "nauc": nauc_code(front, bs.cost, last_q), "nauc_paper": nauc_paper(front),
        "peak": peak_score(code_pts[:, 1]),
        "qnc": q_code.qnc, "rqnc": q_code.rqnc, "qnc_reached": q_code.reached,
        "qnc_front": q_front.qnc, "rqnc_front": q_front.rqnc, "qnc_front_reached": q_front.reached,
        "rci": rci(s, c, curve.last_choices, variant="orbit_code"),
        "rci_per_query": rci(s, c, curve.last_choices, variant="per_query"),
        "quality_at_max_budget": last_q, "cost_at_max_budget": last_c,
        "best_single_index": bs.index, "best_single_quality": bs.quality, "best_single_cost": bs.cost,
        "curve": curve, "front": front,
    }
