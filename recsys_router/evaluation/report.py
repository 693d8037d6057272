"""Markdown tables of an evaluation: leaderboard, RouterEval-, RouterBench-, ORBIT- and
RouteLLM-style tables, and the notes of what was skipped or adapted."""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["leaderboard", "markdown_table", "render_report", "LEADERBOARD_COLUMNS"]

#: (protocol, metric, column title) of the leaderboard, in order
LEADERBOARD_COLUMNS = [
    ("routereval", "mu_o", "mu_o"), ("routereval", "v_r", "V_R"), ("routereval", "v_b", "V_B"),
    ("routereval", "e_p", "E_p"),
    ("routerbench", "aiq", "AIQ"), ("orbit", "nauc", "nAUC"), ("orbit", "peak", "Peak"),
    ("orbit", "rqnc", "rQNC"), ("orbit", "rci", "RCI"), ("routellm", "apgr", "APGR"),
    ("routellm", "cpt50", "CPT(50%)"),
]
_ORBIT = [("nauc", "nAUC (code)"), ("nauc_paper", "nAUC (paper)"), ("peak", "Peak"),
          ("rqnc", "QNC / best cost"), ("rci", "RCI (code)"), ("rci_per_query", "RCI (per query)"),
          ("quality_at_max_budget", "quality at max budget")]
_ROUTERBENCH = [("aiq", "AIQ"), ("max_quality", "max quality"),
                ("cost_at_max_quality", "cost at max quality")]
_ROUTELLM = [("apgr", "APGR"), ("cpt50", "CPT(50%)"), ("cpt80", "CPT(80%)")]
_ROUTEREVAL = [("mu_o", "mu_o"), ("v_r", "V_R"), ("v_b", "V_B"), ("e_p", "E_p")]


def _num(x: float) -> str:
    return f"{x:.4g}" if abs(x) < 1e-3 and x != 0 else f"{x:.4f}"


def _fmt(mean: float, std: float | None = None) -> str:
    if mean is None or not np.isfinite(mean):
        return "-"
    s = _num(mean)
    if std is not None and np.isfinite(std):
        s += f" ± {_num(std)}"
    return s


def _summary_fold(metrics: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """Rows to show: the fold mean (and std) when there are folds, else the single fold."""
    if (metrics["fold"] == "mean").any():
        return metrics[metrics["fold"] == "mean"], metrics[metrics["fold"] == "std"]
    return metrics, None


def _lookup(mean: pd.DataFrame, std: pd.DataFrame | None):
    key = ["protocol", "pool", "group", "router", "metric"]
    m = mean.set_index(key)["value"]
    m = m[~m.index.duplicated()]
    s = None
    if std is not None:
        s = std.set_index(key)["value"]
        s = s[~s.index.duplicated()]

    def get(*k):
        v = m.get(k, np.nan)
        return float(v), (float(s.get(k, np.nan)) if s is not None else None)
    return get


def _routers(metrics: pd.DataFrame) -> list[str]:
    return [r for r in dict.fromkeys(metrics["router"]) if not str(r).startswith("LLM:")]


def leaderboard(metrics: pd.DataFrame, timings: pd.DataFrame | None = None,
                pool: str | None = None, group: str | None = None,
                truth_routers=()) -> pd.DataFrame:
    """One row per router with the headline number of each protocol.

    Uses pool ``"all"`` (group ``"all"``) when evaluated, else the first pool's group mean;
    fold means when there are several folds. Sorted by mu_o, then AIQ, then nAUC.

    Returns
    -------
    pandas.DataFrame
        Columns ``router`` then the titles of :data:`LEADERBOARD_COLUMNS` present, then
        ``fit s`` and ``predict s`` (mean over folds) when ``timings`` is given, and
        ``reads truth`` ("yes" for ``truth_routers``: upper bounds reading test scores).
    """
    if metrics.empty:
        return pd.DataFrame(columns=["router"])
    if pool is None:
        pool = "all" if (metrics["pool"] == "all").any() else str(metrics["pool"].iloc[0])
    if group is None:
        group = "all" if pool == "all" else "mean"
    sel = metrics[(metrics["pool"] == pool) & (metrics["group"] == group)]
    mean, _ = _summary_fold(sel)
    get = _lookup(mean, None)
    cols = [(p, m, t) for p, m, t in LEADERBOARD_COLUMNS if ((mean["protocol"] == p)
                                                              & (mean["metric"] == m)).any()]
    rows = []
    for r in _routers(sel):
        row = {"router": r}
        for p, m, t in cols:
            row[t] = get(p, pool, group, r, m)[0]
        rows.append(row)
    lb = pd.DataFrame(rows)
    if timings is not None and len(timings) and len(lb):
        t = timings.groupby("router")[["fit_s", "predict_s"]].mean()
        lb["fit s"] = lb["router"].map(t["fit_s"])
        lb["predict s"] = lb["router"].map(t["predict_s"])
    if len(lb):
        lb["reads truth"] = ["yes" if r in set(truth_routers) else "" for r in lb["router"]]
    order = [c for c in ("mu_o", "AIQ", "nAUC", "APGR") if c in lb.columns]
    if order:
        lb = lb.sort_values(order, ascending=False, na_position="last", kind="stable")
    return lb.reset_index(drop=True)


def markdown_table(df: pd.DataFrame) -> str:
    """Render a DataFrame as a GitHub markdown table (numbers with 4 decimals).

    Example
    -------
    >>> print(markdown_table(pd.DataFrame({"router": ["a"], "x": [0.5]})))
    | router | x |
    |---|---|
    | a | 0.5000 |
    """
    head = "| " + " | ".join(str(c) for c in df.columns) + " |"
    sep = "|" + "---|" * len(df.columns)
    body = []
    secs = [str(c).endswith(" s") for c in df.columns]
    for _, r in df.iterrows():
        cells = [((f"{v:.3f}" if np.isfinite(v) else "-") if sec else _fmt(v))
                 if isinstance(v, (float, np.floating)) else str(v)
                 for v, sec in zip(r.tolist(), secs)]
        body.append("| " + " | ".join(cells) + " |")
    return "\n".join([head, sep, *body])


def _protocol_table(metrics, protocol, pool, group, spec, timings=None) -> str | None:
    sel = metrics[(metrics["protocol"] == protocol) & (metrics["pool"] == pool)
                  & (metrics["group"] == group)]
    if sel.empty:
        return None
    mean, std = _summary_fold(sel)
    get = _lookup(mean, std)
    rows = []
    for r in _routers(sel):
        row = {"router": r}
        for m, title in spec:
            mean_v, std_v = get(protocol, pool, group, r, m)
            unreached = m in ("rqnc", "qnc", "cpt50", "cpt80") and not np.isfinite(mean_v) and \
                ((sel["router"] == r) & (sel["metric"] == m)).any()
            row[title] = "not reached" if unreached else _fmt(mean_v, std_v)
        rows.append(row)
    df = pd.DataFrame(rows)
    if timings is not None and len(timings):
        t = timings.groupby("router")[["fit_s", "predict_s"]].mean()
        df["fit s"] = [f"{t['fit_s'].get(r, np.nan):.2f}" for r in df["router"]]
        df["predict s"] = [f"{t['predict_s'].get(r, np.nan):.3f}" for r in df["router"]]
    return markdown_table(df)


def _routereval_table(metrics: pd.DataFrame, pool: str) -> str | None:
    """RouterEval Table 1 style: one row per router, (mu_o, V_B, E_p) per candidate group."""
    sel = metrics[(metrics["protocol"] == "routereval") & (metrics["pool"] == pool)]
    if sel.empty:
        return None
    mean, std = _summary_fold(sel)
    get = _lookup(mean, std)
    groups = list(dict.fromkeys(sel["group"]))
    groups = [g for g in groups if g != "mean"] + (["mean"] if "mean" in groups else [])
    spec = [(k, t) for k, t in _ROUTEREVAL if (sel["metric"] == k).any()]
    rows = []
    for r in _routers(sel):
        row = {"router": r}
        for g in groups:
            for m, title in spec:
                row[f"{g} {title}" if len(groups) > 1 else title] = _fmt(*get("routereval", pool, g, r, m))
        rows.append(row)
    for ref in ("LLM:best", "LLM:oracle-bound"):
        row = {"router": ref.replace("LLM:", "") + " (reference)"}
        for g in groups:
            for m, title in spec:
                v = get("routereval", pool, g, ref, "mu_o")[0] if m == "mu_o" else np.nan
                row[f"{g} {title}" if len(groups) > 1 else title] = _fmt(v)
        rows.append(row)
    return markdown_table(pd.DataFrame(rows))


def render_report(result, leaderboard_df: pd.DataFrame, plots: list[str]) -> str:
    """The whole ``report.md`` text for an :class:`~recsys_router.evaluation.runner.EvalResult`."""
    cfg, m = result.config, result.metrics
    sim = " (SIMULATED data)" if result.simulated else ""
    lines = [f"# Routing evaluation: {result.dataset}{sim}", ""]
    if result.simulated:
        lines += ["**These numbers come from simulated data** (the built-in seeded simulator); "
                  "they say nothing about real LLMs.", ""]
    split = (f"split column `{cfg.split_column}`" if cfg.split_column else
             f"{cfg.folds} folds" if cfg.folds > 1 else
             f"random split {tuple(cfg.split or (0.8, 0.1, 0.1))}" +
             (f", OOD test tasks {list(cfg.ood_tasks)}" if cfg.ood_tasks else ""))
    lines += [f"- queries x LLMs: {result.info.get('n_queries')} x {result.info.get('n_llms')}; "
              f"{split}; seed {cfg.seed}; encoder {cfg.encoder or 'router default'}",
              f"- protocols run: {', '.join(result.info.get('protocols_run', [])) or 'none'}; "
              f"pools: {', '.join(str(p) for p in cfg.pools)}",
              "- every number below is recomputable from `decisions.parquet` "
              "(`recsys_router.evaluation.metrics_from_decisions`)", ""]
    if result.notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in result.notes] + [""]
    lines += ["## Leaderboard", "", markdown_table(leaderboard_df), ""]
    pools = list(dict.fromkeys(m["pool"])) if len(m) else []
    for pool in pools:
        t = _routereval_table(m, pool)
        if t:
            title = "whole pool" if pool == "all" else f"m = {pool} (candidate groups and their mean)"
            lines += [f"## RouterEval: {title}", "", t, ""]
    for proto, spec, title in (("routerbench", _ROUTERBENCH, "RouterBench (willingness-to-pay sweep, "
                                "NDCH, AIQ on the shared cost domain)"),
                               ("orbit", _ORBIT, "ORBIT (budget sweep; QNC as a ratio to the best "
                                "single LLM's cost)"),
                               ("routellm", _ROUTELLM, "RouteLLM (strong/weak threshold sweep)")):
        for pool in pools:
            group = "all" if pool == "all" else "mean"
            t = _protocol_table(m, proto, pool, group, spec,
                                result.timings if proto == "orbit" else None)
            if t:
                lines += [f"## {title}, pool {pool}" + ("" if pool == "all" else " (group mean)"),
                          "", t, ""]
    if plots:
        lines += ["## Plots", ""] + [f"![{p}]({p})" for p in plots] + [""]
    return "\n".join(lines)
