"""The safe fallback's verdict by nAUC on data with costs (``verdict_metric="nauc"``).

By default (``verdict_metric="mu_o"``) the safe fallback compares a router with the baselines
by the realised score of each one's top choice per held-out query. On data with costs a
router's value lies in its budget sweep, and a router tuned for nAUC (``evaluate --auto N
--auto-objective nauc``) can trade some top-choice score for a better curve; judged by mu_o,
it is then sent to a baseline whose curve is worse. With ``verdict_metric="nauc"`` the
verdict compares the curves instead:

* the router's curve: its predicted scores and predicted costs, swept over budgets on the
  held-out training queries (each routed among its observed LLMs);
* the baseline's curve: what the fallback would serve on those queries, the baseline's
  predicted scores (mean inner-train score per LLM, overall or per task) with the router's
  predicted costs (:meth:`SafeFallbackRouter.predict_costs` always returns the router's);
* the baseline is the one the mu_o comparison chose (``best-single`` unless ``task-best``
  beats it beyond the noise), so the fallback's substitute is the same under either metric.

The two nAUCs, their difference ``d`` and its paired bootstrap SE come from
:func:`recsys_router.sweep_check.paired_nauc`. The verdict falls back when
``d < -verdict_z * SE`` (``verdict_z`` resolves to ``z`` on priced data: keep unless the
router loses beyond the noise). A task with at least ``min_task_queries`` held-out queries
departs from the verdict when its own nAUC comparison (against its own better baseline)
shows the opposite beyond ``z`` SE; smaller tasks follow the verdict. The check of the top
choice (``top_z``) still runs afterwards on the queries the router keeps: nAUC judges the
curve, the top-choice check its no-budget end.

``"auto"`` is ``"nauc"`` where every observed training cell has a finite cost, else
``"mu_o"``; ``"nauc"`` on data without costs is refused before any fit.
"""

from __future__ import annotations

import numpy as np

from .data import RoutingData
from .inner_validation import group_rows
from .sweep_check import has_costs, paired_nauc

__all__ = ["VERDICT_METRICS", "resolve_verdict_metric", "decide_by_nauc", "nauc_text"]

#: accepted ``SafeFallbackRouter(verdict_metric=)`` values
VERDICT_METRICS = ("mu_o", "nauc", "auto")


def resolve_verdict_metric(metric, train: RoutingData | None) -> str:
    """``verdict_metric`` checked and resolved on the training data (``auto`` -> ``nauc``
    where every observed cell has a finite cost, else ``mu_o``).

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> d = make_synthetic(20, 3, 2, seed=0)
    >>> resolve_verdict_metric("auto", d), resolve_verdict_metric("mu_o", d)
    ('nauc', 'mu_o')
    """
    if not isinstance(metric, str) or metric not in VERDICT_METRICS:
        raise ValueError(f"verdict_metric must be one of {list(VERDICT_METRICS)}, "
                         f"got {str(metric)[:80]!r}")
    if metric == "mu_o" or train is None:
        return "mu_o" if metric != "nauc" else "nauc"
    costs = has_costs(train)
    if metric == "nauc" and not costs:
        raise ValueError("verdict_metric='nauc' needs a finite cost on every observed training "
                         "cell, not the same on all of them; this training data has none, some "
                         "missing or one cost everywhere, so every budget sweep is one point "
                         "(use 'mu_o' or 'auto')")
    return "nauc" if costs else "mu_o"


def nauc_text(r: dict, baseline: str, where: str, decision: str, z: float,
              z_keep: float) -> str:
    """A nAUC comparison in words."""
    head = (f"on {where}, nAUC router {r['router']:.4f} vs {baseline} {r['baseline']:.4f}: "
            f"router - {baseline} = {r['diff']:+.4f} (bootstrap SE {r['se']:.4f}, "
            f"{r['n_boot']} resamples, n {r['n']})")
    if decision == "router" and r["diff"] > z * r["se"] and r["se"] > 0:
        how = f"the router beats {baseline} by more than {z:g} SE"
    elif decision == "router":
        how = ("within the noise: the router is kept" if z_keep > 0 else
               "the router is kept")
    else:
        how = (f"{baseline} beats the router by more than {z_keep:g} SE" if z_keep > 0 else
               f"the router does not lead {baseline} by {max(-z_keep, 0):g} SE")
    return f"{head}: {how}"


def _compare(preds: dict, rows: np.ndarray | slice, baseline: str, seed: int) -> dict | None:
    truth = preds["truth"][rows]
    if not (~np.isnan(truth)).any():
        return None
    return paired_nauc(preds["router"][rows], preds[baseline][rows], preds["costs"][rows],
                       truth, preds["truth_costs"][rows], seed=seed)


def decide_by_nauc(fb: dict, preds: dict, keys: np.ndarray, z: float, verdict_z: float,
                   seed: int) -> None:
    """Replace the mu_o verdict and task decisions in the fallback record ``fb`` by nAUC ones.

    ``preds``: per held-out query (rows aligned with ``keys``), ``router`` (predicted scores),
    ``costs`` (the router's predicted costs), ``best-single`` and ``task-best`` (the baselines'
    predicted scores), ``truth`` and ``truth_costs``. The mu_o records stay under ``means``
    and ``overall``; the nAUC comparisons are added as their ``nauc`` entries and the
    decisions follow them (module docstring).
    """
    overall = fb.get("overall") or {}
    if not overall:
        return
    base = overall["baseline"]
    r = _compare(preds, slice(None), base, seed)
    if r is None:
        return
    default = base if r["diff"] < -verdict_z * r["se"] else "router"
    overall["mu_o_decision"], overall["decision"] = overall["decision"], default
    overall["nauc"] = r
    overall["why"] = nauc_text(r, base, "all held-out queries", default, z, verdict_z)
    fb["default"], fb["verdict_metric"] = default, "nauc"
    task_rows = dict(zip(*group_rows(keys)))
    for i, (t, m) in enumerate(sorted(fb.get("means", {}).items())):
        m["departs"] = False
        if m.get("pooled"):
            m["decision"] = default
            m["why"] = (f"{m['n']} < {fb['min_task_queries']} held-out queries: follows the "
                        f"all-queries verdict ({default})")
            fb["tasks"][t] = default
            continue
        rt = _compare(preds, task_rows[t], m["baseline"], seed + 1 + i)
        if rt is None:
            m["decision"] = fb["tasks"][t] = default
            continue
        m["nauc"] = rt
        if default == "router":
            m["departs"] = rt["diff"] < -z * rt["se"]
        else:
            m["departs"] = rt["diff"] > z * rt["se"] and rt["se"] > 0
        keep = (default == "router") != m["departs"]
        m["decision"] = "router" if keep else m["baseline"]
        m["why"] = (nauc_text(rt, m["baseline"], "its own held-out queries", m["decision"], z, z)
                    if m["departs"] else
                    f"no significant nAUC evidence of its own against the all-queries verdict "
                    f"({default}): router - {m['baseline']} = {rt['diff']:+.4f} "
                    f"(bootstrap SE {rt['se']:.4f}, n {rt['n']})")
        fb["tasks"][t] = m["decision"]
