"""RouterBench protocol: willingness-to-pay sweep, each router's non-decreasing convex hull
(NDCH) on the cost-quality plane and AIQ on the cost domain shared by all routers.

Reference: Hu et al., "RouterBench: A Benchmark for Multi-LLM Routing System", arXiv:2403.12031.
"""

from __future__ import annotations

import numpy as np

from ...metrics import routerbench as rb
from ...metrics.routereval import mu_o
from ...policies import wtp_policy
from ..figures import finish_plot, first_block, line_style, log_cost_axis, pyplot
from ..tables import pool_section
from ._base import Protocol, Sweep, mean_paid, curve_row, metric_row, register_protocol

__all__ = ["ROUTERBENCH", "LLM_HULL", "wtp_settings"]

#: router label of RouterBench's Zero router drawn from the LLMs' own points
LLM_HULL = "zero (LLM hull)"

_TABLE = (("aiq", "AIQ"), ("max_quality", "max quality"),
          ("cost_at_max_quality", "cost at max quality"))


def wtp_settings(scores, costs, n: int = 100):
    """RouterBench's willingness-to-pay sweep over :func:`~recsys_router.metrics.routerbench.default_lambdas`.

    Example
    -------
    >>> name, pts = wtp_settings(np.array([[0.5, 0.9]]), np.array([[0.1, 1.0]]), n=3)
    >>> name, pts[0][1].tolist(), pts[-1][1].tolist()
    ('wtp', [0], [1])
    """
    lam = rb.default_lambdas(scores, costs, n=n)
    return "wtp", [(float(w), wtp_policy(scores, costs, float(w))) for w in lam]


def _sweep(pred, view) -> Sweep:
    return Sweep(*wtp_settings(pred.scores, pred.costs, view.config.n_wtp))


def _known(pts: np.ndarray) -> np.ndarray | None:
    """The points of known cost, or None: a setting whose decisions paid no known cost (every
    chosen LLM's cost unknown in the test data) or an LLM with no known cost has no place on
    the cost axis and is left out of the hulls, as such queries are left out of mean costs."""
    known = pts[np.isfinite(pts).all(axis=1)]
    return known if len(known) else None


def _metrics(b, ctx):
    """Per-lambda points, NDCH and AIQ on the domain shared by all routers of the block."""
    ms, cs, hulls = [], [], {}
    for router, runs in b.runs.items():
        pts = np.array([(mean_paid(b, router, k), mu_o(b.scores, ch))
                        for k, (_, _, ch, _) in enumerate(runs)])
        for (setting, value, _, _), (x, y) in zip(runs, pts):
            cs.append(curve_row(router, "points", setting, value, x, y))
        hulls[router] = _known(pts)
    lp = rb.llm_points(b.scores, b.costs)
    for name, (x, y) in zip(b.llms, lp):
        cs.append(curve_row("LLM:" + name, "points", "single", np.nan, x, y))
    hulls[LLM_HULL] = _known(lp)   # the Zero router: the NDCH of the LLMs' own points
    missing = [r for r, h in hulls.items() if h is None]
    for router in missing:   # no setting paid a known cost: no hull, no AIQ
        del hulls[router]
        ms += [metric_row(router, m, np.nan) for m in ("aiq", "aiq_code", "max_quality",
                                                       "cost_at_max_quality")]
    hulls = {r: rb.ndch(p) for r, p in hulls.items()}
    if not hulls:
        return ms, cs
    domain = rb.shared_domain(list(hulls.values()))
    # RouterBench's code formula, over the same hulls (undefined when every cost is 0)
    dearest = max(float(h[:, 0].max()) for h in hulls.values())
    code = rb.aiq_code(list(hulls.values())) if dearest > 0 else np.full(len(hulls), np.nan)
    for (router, h), aiq_code in zip(hulls.items(), code):
        for k, (x, y) in enumerate(h):
            cs.append(curve_row(router, "ndch", "vertex", k, x, y))
        ms.append(metric_row(router, "aiq", rb.aiq(h, domain)))
        ms.append(metric_row(router, "aiq_code", aiq_code))
        ms.append(metric_row(router, "max_quality", h[:, 1].max()))
        ms.append(metric_row(router, "cost_at_max_quality", h[-1, 0]))
    for router in hulls:
        ms.append(metric_row(router, "aiq_domain_min", domain[0]))
        ms.append(metric_row(router, "aiq_domain_max", domain[1]))
    return ms, cs


def _report(metrics, pool, timings=None):
    return pool_section(metrics, "routerbench", pool, _TABLE, "RouterBench (willingness-to-pay "
                        "sweep, NDCH, AIQ on the shared cost domain)")


def _cost_quality(result, path) -> bool:
    """The cost-quality plane: single LLM points and each router's NDCH."""
    curves = result.curves
    sub = first_block(curves[curves["protocol"] == "routerbench"])
    if sub.empty:
        return False
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 5.5))
    llm = sub[(sub["curve"] == "points") & sub["router"].str.startswith("LLM:")]
    ax.scatter(llm["x"], llm["y"], marker="s", color="black", zorder=3, label="single LLMs")
    for _, r in llm.iterrows():
        ax.annotate(r["router"][4:].split("/")[-1][:18], (r["x"], r["y"]), fontsize=7,
                    xytext=(3, 3), textcoords="offset points")
    hulls = sub[sub["curve"] == "ndch"]
    for k, (router, h) in enumerate(hulls.groupby("router", sort=False)):
        h = h.sort_values("x")
        style = dict(ls="--", color="grey") if router.startswith("zero (LLM") else \
            dict(marker=".", ls=line_style(k))
        ax.plot(h["x"], h["y"], label=router, **style)
    log_cost_axis(ax, sub["x"])
    return finish_plot(fig, ax, path, xlabel="mean cost per query",
                       title="Cost-quality (NDCH per router)", sub=sub, simulated=result.simulated)


ROUTERBENCH = register_protocol(Protocol(
    "routerbench", sweep=_sweep, metrics=_metrics, rank=20, needs_costs=True,
    leaderboard=(("aiq", "AIQ"),), report=_report, plots=(("cost_quality.png", _cost_quality),),
    description="willingness-to-pay sweep; NDCH and AIQ (RouterBench)"))
