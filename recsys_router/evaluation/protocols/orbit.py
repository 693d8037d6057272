"""ORBIT protocol: budget sweep over each router's own predicted costs; nAUC, Peak, QNC/rQNC
and RCI against the best single LLM.

Reference: Lai, Hu, Ye, "RouteJudge: An Open Platform for Reproducible and Preference-Aware
LLM Routing" (ORBIT toolbox), arXiv:2606.18774; where its code and paper differ both are given.
"""

from __future__ import annotations

import numpy as np

from ...metrics import orbit as ob
from ...metrics.base import best_single
from ...metrics.routereval import mu_o
from ..figures import first_block, router_curves
from ..tables import pool_section
from ._base import Protocol, Sweep, mean_paid, curve_row, metric_row, register_protocol

__all__ = ["ORBIT", "budget_settings"]

_TABLE = (("nauc", "nAUC (code)"), ("nauc_paper", "nAUC (paper)"), ("peak", "Peak"),
          ("rqnc", "QNC / best cost"), ("rci", "RCI (code)"), ("rci_per_query", "RCI (per query)"),
          ("quality_at_max_budget", "quality at max budget"))


def budget_settings(scores, costs, max_points: int = 100):
    """ORBIT's budget sweep over the router's own predicted costs (cheapest on ties).

    Example
    -------
    >>> s = np.array([[0.5, 0.9]]); c = np.array([[0.1, 1.0]])
    >>> [(b, ch.tolist()) for b, ch in budget_settings(s, c)[1]]
    [(0.1, [0]), (1.0, [1])]
    """
    b = ob.budget_grid(costs, max_points)
    ch = ob.budget_choices(scores, costs, b, tie_break="cheapest")
    return "budget", [(float(v), ch[:, k]) for k, v in enumerate(b)]


def _sweep(pred, view) -> Sweep:
    return Sweep(*budget_settings(pred.scores, pred.costs, view.config.max_budgets))


def _metrics(b, ctx):
    """ORBIT's curve, Pareto front, nAUC (code and paper), Peak, QNC/rQNC, RCI (both; from the
    largest budget's choices and what those decisions paid)."""
    ms, cs = [], []
    bs = best_single(b.scores, b.costs)
    for router, runs in b.runs.items():
        pts = np.array([(mean_paid(b, router, k), mu_o(b.scores, ch))
                        for k, (_, _, ch, _) in enumerate(runs)])
        for (setting, value, _, _), (x, y) in zip(runs, pts):
            cs.append(curve_row(router, "budget", setting, value, x, y))
        # a budget whose decisions paid no known cost (every chosen LLM's cost unknown in the
        # test data) has no point on the cost axis: left out of the front, as from the mean costs
        known = np.isfinite(pts).all(axis=1)
        front = ob.pareto_front(pts[known, 0], pts[known, 1]) if known.any() else np.empty((0, 2))
        for k, (x, y) in enumerate(front):
            cs.append(curve_row(router, "pareto", "vertex", k, x, y))
        last_q = pts[-1, 1]
        code_pts = np.vstack([front, [[bs.cost, last_q]]])
        q_code, q_front = ob.qnc(code_pts, bs.quality, bs.cost), ob.qnc(front, bs.quality, bs.cost)
        last_ch = runs[-1][2]
        # what the largest budget's decisions paid (a cascade: every LLM it tried)
        paid = b.paid[router][-1] if b.paid is not None and router in b.paid else None
        vals = {"nauc": ob.nauc_code(front, bs.cost, last_q), "nauc_paper": ob.nauc_paper(front),
                "peak": ob.peak_score(code_pts[:, 1]), "qnc": q_code.qnc, "rqnc": q_code.rqnc,
                "qnc_front": q_front.qnc, "rqnc_front": q_front.rqnc,
                "rci": ob.rci(b.scores, b.costs, last_ch, variant="orbit_code", paid=paid),
                "rci_per_query": ob.rci(b.scores, b.costs, last_ch, variant="per_query",
                                        paid=paid),
                "quality_at_max_budget": last_q, "cost_at_max_budget": pts[-1, 0],
                "best_single_quality": bs.quality, "best_single_cost": bs.cost}
        ms += [metric_row(router, k, v) for k, v in vals.items()]
    return ms, cs


def _report(metrics, pool, timings=None):
    return pool_section(metrics, "orbit", pool, _TABLE, "ORBIT (budget sweep; QNC as a ratio to "
                        "the best single LLM's cost)", timings)


def _budget_curves(result, path) -> bool:
    """Mean quality against mean cost at each budget, one line per router."""
    curves = result.curves
    sub = first_block(curves[(curves["protocol"] == "orbit") & (curves["curve"] == "budget")])
    return router_curves(sub, path, sort_by="setting_value", log_x=True,
                         xlabel="mean cost per query (at each budget)",
                         title="ORBIT budget curves", simulated=result.simulated)


ORBIT = register_protocol(Protocol(
    "orbit", sweep=_sweep, metrics=_metrics, rank=30, needs_costs=True,
    leaderboard=(("nauc", "nAUC"), ("peak", "Peak"), ("rqnc", "rQNC"), ("rci", "RCI")),
    report=_report, plots=(("orbit_budget_curves.png", _budget_curves),),
    description="budget sweep; nAUC, Peak, QNC, RCI (ORBIT)"))
