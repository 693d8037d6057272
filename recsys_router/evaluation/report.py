"""Markdown report of an evaluation: the leaderboard, each protocol's own section (from its
record) and the notes of what was skipped or adapted."""

from __future__ import annotations

import pandas as pd

from ..markdown import md_line, md_text
from .protocols import registered_protocols
from .tables import lookup, markdown_table, router_names, summary_fold

__all__ = ["leaderboard", "markdown_table", "render_report", "leaderboard_columns"]


def leaderboard_columns() -> list[tuple[str, str, str]]:
    """(protocol, metric, column title) of the leaderboard, in protocol order.

    Example
    -------
    >>> leaderboard_columns()[:2]
    [('routereval', 'mu_o', 'mu_o'), ('routereval', 'v_r', 'V_R')]
    """
    return [(p.name, m, t) for p in registered_protocols() for m, t in p.leaderboard]


def leaderboard(metrics: pd.DataFrame, timings: pd.DataFrame | None = None,
                pool: str | None = None, group: str | None = None,
                truth_routers=()) -> pd.DataFrame:
    """One row per router with the headline numbers of each protocol.

    Uses pool ``"all"`` (group ``"all"``) when evaluated, else the first pool's group mean;
    fold means when there are several folds. Sorted by each protocol's first column in
    protocol order (mu_o, then AIQ, then nAUC, then APGR).

    Returns
    -------
    pandas.DataFrame
        Columns ``router`` then the titles of :func:`leaderboard_columns` present, then
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
    mean, _ = summary_fold(sel)
    get = lookup(mean, None)
    cols = [(p, m, t) for p, m, t in leaderboard_columns()
            if ((mean["protocol"] == p) & (mean["metric"] == m)).any()]
    rows = []
    for r in router_names(sel):
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
    order = [p.leaderboard[0][1] for p in registered_protocols() if p.leaderboard]
    order = [c for c in dict.fromkeys(order) if c in lb.columns]
    if order:
        lb = lb.sort_values(order, ascending=False, na_position="last", kind="stable")
    return lb.reset_index(drop=True)


def render_report(result, leaderboard_df: pd.DataFrame, plots: list[str]) -> str:
    """The whole ``report.md`` text for an :class:`~recsys_router.evaluation.config.EvalResult`."""
    cfg, m = result.config, result.metrics
    sim = " (SIMULATED data)" if result.simulated else ""
    lines = [f"# Routing evaluation: {md_text(result.dataset)}{sim}", ""]  # a name from the data
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
              f"pools: {', '.join(str(p) for p in cfg.pools)}" +
              (f" (groups: {cfg.group_method})" if any(p != "all" for p in cfg.pools) else ""),
              "- every number below is recomputable from `decisions.parquet` "
              "(`recsys_router.evaluation.metrics_from_decisions`)", ""]
    if result.notes:
        # notes quote LLM and router names from the data: plain text, one line each
        lines += ["## Notes", ""] + [f"- {md_line(n)}" for n in result.notes] + [""]
    lines += ["## Leaderboard", "", markdown_table(leaderboard_df), ""]
    pools = list(dict.fromkeys(m["pool"])) if len(m) else []
    for proto in registered_protocols():
        if proto.report is None:
            continue
        for pool in pools:
            section = proto.report(m, pool, result.timings)
            if section:
                heading, table = section
                lines += [f"## {heading}", "", table, ""]
    if plots:
        lines += ["## Plots", ""] + [f"![{p}]({p})" for p in plots] + [""]
    return "\n".join(lines)
