"""RouterEval protocol: one argmax decision per query, scored by mu_o, V_R, V_B and E_p.

Reference: Huang et al., "RouterEval: A Comprehensive Benchmark for Routing LLMs to Explore
Model-level Scaling Up in LLMs", arXiv:2503.10657.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...metrics.base import best_single, entropy_bits
from ...metrics.routereval import REFERENCE_SCORES, mu_o, oracle_mean, routereval_metrics
from ...policies import argmax_policy
from ..figures import first_block, plot_title, pyplot, save_figure
from ..tables import fmt, lookup, markdown_table, router_names, summary_fold
from ._base import Protocol, Sweep, mean_paid, metric_row, register_protocol

__all__ = ["ROUTEREVAL", "argmax_settings", "column_means", "query_prob_entropy",
           "reference_benchmark"]

_SPEC = (("mu_o", "mu_o"), ("v_r", "V_R"), ("v_b", "V_B"), ("e_p", "E_p"))


def argmax_settings(scores, costs):
    """The single argmax operating point (``value`` NaN), cheapest predicted on ties.

    Example
    -------
    >>> name, pts = argmax_settings(np.array([[0.2, 0.9]]), None)
    >>> name, pts[0][1].tolist()
    ('argmax', [1])
    """
    return "argmax", [(np.nan, argmax_policy(scores, costs))]


def column_means(values: np.ndarray) -> np.ndarray:
    """``mu_o`` of every single LLM at once: per column, ``(1/n_j) sum_i v_ij`` over the
    ``n_j`` observed (non-NaN) cells; NaN for a column with none.

    One pass over the matrix (the per-LLM ``mu_o`` calls it replaces validated the whole
    matrix once per LLM: quadratic in the pool size). Each column is summed as a contiguous
    vector, as :func:`~recsys_router.metrics.routereval.mu_o` sums it, so the values agree
    to the last bit.

    Example
    -------
    >>> column_means(np.array([[1., np.nan], [0., 3.], [0.5, 5.]])).tolist()
    [0.5, 4.0]
    """
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 2 or np.isinf(v).any():
        raise ValueError(f"values must be a 2-D matrix without infinite cells, got shape {v.shape}")
    cols = np.ascontiguousarray(v.T)
    missing = np.isnan(cols)
    n = (~missing).sum(axis=1)
    out = cols.sum(axis=1) / np.maximum(n, 1)
    for j in np.flatnonzero(missing.any(axis=1)):
        x = cols[j][~missing[j]]
        out[j] = x.mean() if len(x) else np.nan
    return out


def query_prob_entropy(probs: np.ndarray) -> np.ndarray:
    """Per-query entropy (bits) of selection probabilities renormalised over the pool.

    Example
    -------
    >>> query_prob_entropy(np.array([[0.25, 0.25, 0.5], [1.0, 0.0, 0.0]])).tolist()
    [1.5, 0.0]
    """
    p = np.clip(np.asarray(probs, dtype=np.float64), 0.0, None)
    tot = p.sum(axis=1, keepdims=True)
    p = np.divide(p, tot, out=np.zeros_like(p), where=tot > 0)
    return entropy_bits(p, axis=1) + 0.0


def reference_benchmark(dataset: str) -> str | None:
    """RouterEval benchmark of a dataset named ``routereval-<benchmark>-...`` (for V_R).

    Example
    -------
    >>> reference_benchmark("routereval-gsm8k-easy-5-all_strong"), reference_benchmark("x")
    ('gsm8k', None)
    """
    parts = str(dataset).split("-")
    if len(parts) > 1 and parts[0] == "routereval":
        for k in range(len(parts), 1, -1):  # benchmark names may contain '-' (none do today)
            cand = "-".join(parts[1:k])
            if cand in REFERENCE_SCORES:
                return cand
    return None


def _sweep(pred, view) -> Sweep:
    ent = None if pred.probs is None else query_prob_entropy(pred.probs)
    setting, points = argmax_settings(pred.scores, pred.costs)
    return Sweep(setting, points, ent)


def _metrics(b, ctx):
    """mu_o, V_R (with a given reference score, or the paper's for RouterEval benchmarks),
    V_B, E_p, mean prob entropy, mean cost; single LLMs and the oracle bound."""
    S, ms, reference = b.scores, [], ctx.reference_score
    bench = None if reference is not None else reference_benchmark(ctx.dataset)
    if reference is not None:
        if not np.isfinite(reference) or reference <= 0:
            raise ValueError(f"reference score must be a positive number, got {reference!r}")
        ms.append(metric_row("LLM:reference", "reference_score", reference))
    quality = column_means(S)
    cost = None if b.costs is None else column_means(b.costs)
    for j, name in enumerate(b.llms):
        ms.append(metric_row("LLM:" + name, "mu_o", quality[j]))
        if cost is not None:
            ms.append(metric_row("LLM:" + name, "mean_cost", cost[j]))
    ms.append(metric_row("LLM:best", "mu_o", best_single(S).quality))
    ms.append(metric_row("LLM:oracle-bound", "mu_o", oracle_mean(S)))
    for router, runs in b.runs.items():
        _, _, ch, ent = runs[0]
        r = routereval_metrics(S, ch, benchmark=bench, reference=reference)
        has_ref = bench is not None or reference is not None
        for key in ("mu_o", "v_r", "v_b", "e_p") if has_ref else ("mu_o", "v_b", "e_p"):
            ms.append(metric_row(router, key, r[key]))
        if np.isfinite(ent).all():
            ms.append(metric_row(router, "prob_entropy", ent.mean()))
        if b.costs is not None:
            ms.append(metric_row(router, "mean_cost", mean_paid(b, router, 0)))
    return ms, []


def _report(metrics: pd.DataFrame, pool: str, timings=None):
    """RouterEval Table 1 style: one row per router, (mu_o, V_B, E_p) per candidate group."""
    sel = metrics[(metrics["protocol"] == "routereval") & (metrics["pool"] == pool)]
    if sel.empty:
        return None
    mean, std = summary_fold(sel)
    get = lookup(mean, std)
    groups = list(dict.fromkeys(sel["group"]))
    groups = [g for g in groups if g != "mean"] + (["mean"] if "mean" in groups else [])
    spec = [(k, t) for k, t in _SPEC if (sel["metric"] == k).any()]

    def col(g, title):
        return f"{g} {title}" if len(groups) > 1 else title
    rows = []
    for r in router_names(sel):
        rows.append({"router": r, **{col(g, t): fmt(*get("routereval", pool, g, r, m))
                                     for g in groups for m, t in spec}})
    for ref in ("LLM:best", "LLM:oracle-bound"):
        row = {"router": ref.replace("LLM:", "") + " (reference)"}
        for g in groups:
            for m, title in spec:
                v = get("routereval", pool, g, ref, "mu_o")[0] if m == "mu_o" else np.nan
                row[col(g, title)] = fmt(v)
        rows.append(row)
    title = "whole pool" if pool == "all" else f"m = {pool} (candidate groups and their mean)"
    return f"RouterEval: {title}", markdown_table(pd.DataFrame(rows))


def _chosen_distribution(result, path) -> bool:
    """Stacked bars: share of test queries each router sends to each LLM (argmax policy)."""
    decisions = result.decisions
    sub = first_block(decisions[(decisions["protocol"] == "routereval")
                                & ~decisions["router"].str.startswith("LLM:")])
    if sub.empty:
        return False
    plt = pyplot()
    share = pd.crosstab(sub["router"], sub["llm"], normalize="index")
    routers = list(dict.fromkeys(sub["router"]))
    share = share.reindex(routers)
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(routers) + 2))
    left = np.zeros(len(share))
    cmap = plt.get_cmap("tab20")
    for k, llm in enumerate(share.columns):
        ax.barh(share.index, share[llm], left=left, color=cmap(k % 20), label=llm.split("/")[-1][:22])
        left += share[llm].to_numpy()
    ax.set_xlabel("share of test queries (argmax policy)")
    ax.invert_yaxis()
    ax.set_title(plot_title("Chosen-LLM distribution", sub, result.simulated))
    ax.legend(fontsize=6, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.12))
    save_figure(fig, path)
    return True


ROUTEREVAL = register_protocol(Protocol(
    "routereval", sweep=_sweep, metrics=_metrics, rank=10, leaderboard=_SPEC, report=_report,
    plots=(("chosen_llm_distribution.png", _chosen_distribution),),
    description="argmax choice per query; mu_o, V_R, V_B, E_p (RouterEval)"))
