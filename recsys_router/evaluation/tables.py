"""Markdown table helpers shared by the report and the protocols' report sections."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..markdown import md_table

__all__ = ["markdown_table", "fmt", "summary_fold", "lookup", "router_names", "metric_table",
           "UNREACHED_METRICS", "pool_section"]

#: metrics whose NaN means "the target was never reached" (shown as such in the report; a
#: mean over folds or groups is NaN when any of them never reached it)
UNREACHED_METRICS = ("rqnc", "qnc", "rqnc_front", "qnc_front", "cpt50", "cpt80")


def _num(x: float) -> str:
    return f"{x:.4g}" if abs(x) < 1e-3 and x != 0 else f"{x:.4f}"


def fmt(mean: float, std: float | None = None) -> str:
    """A number with 4 decimals (``-`` for NaN), ``± std`` when given.

    Example
    -------
    >>> fmt(0.5, 0.25), fmt(float("nan"))
    ('0.5000 ± 0.2500', '-')
    """
    if mean is None or not np.isfinite(mean):
        return "-"
    s = _num(mean)
    if std is not None and np.isfinite(std):
        s += f" ± {_num(std)}"
    return s


def summary_fold(metrics: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """Rows to show: the fold mean (and std) when there are folds, else the single fold."""
    if (metrics["fold"] == "mean").any():
        return metrics[metrics["fold"] == "mean"], metrics[metrics["fold"] == "std"]
    return metrics, None


def lookup(mean: pd.DataFrame, std: pd.DataFrame | None):
    """``get(protocol, pool, group, router, metric) -> (mean, std or None)`` over metric rows."""
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


def router_names(metrics: pd.DataFrame) -> list[str]:
    """Routers of the metric rows in first-seen order, without the ``LLM:`` reference rows."""
    return [r for r in dict.fromkeys(metrics["router"]) if not str(r).startswith("LLM:")]


def markdown_table(df: pd.DataFrame) -> str:
    """Render a DataFrame as a GitHub markdown table (numbers with 4 decimals, a ``... s``
    seconds column with 3); names are escaped (:func:`recsys_router.markdown.md_table`), so a
    router or LLM name from the data cannot add a column, a row, HTML or a heading.

    Example
    -------
    >>> print(markdown_table(pd.DataFrame({"router": ["a|b"], "x": [0.5]})))
    | router | x |
    |---|---|
    | a\\|b | 0.5000 |
    """
    return md_table(df, _cell_number)


def _cell_number(column, v: float) -> str:
    if str(column).endswith(" s"):
        return f"{v:.3f}" if np.isfinite(v) else "-"
    return fmt(v)


def metric_table(metrics: pd.DataFrame, protocol: str, pool: str, group: str, spec,
                 timings: pd.DataFrame | None = None) -> str | None:
    """One row per router, one column per ``(metric, title)`` of ``spec`` (mean ± std over
    folds), optionally with fit/predict seconds; None when the protocol has no rows there."""
    sel = metrics[(metrics["protocol"] == protocol) & (metrics["pool"] == pool)
                  & (metrics["group"] == group)]
    if sel.empty:
        return None
    mean, std = summary_fold(sel)
    get = lookup(mean, std)
    rows = []
    for r in router_names(sel):
        row = {"router": r}
        for m, title in spec:
            mean_v, std_v = get(protocol, pool, group, r, m)
            cells = sel[(sel["router"] == r) & (sel["metric"] == m)]
            unreached = m in UNREACHED_METRICS and not np.isfinite(mean_v) and len(cells) > 0
            row[title] = _unreached(cells) if unreached else fmt(mean_v, std_v)
        rows.append(row)
    df = pd.DataFrame(rows)
    if timings is not None and len(timings):
        t = timings.groupby("router")[["fit_s", "predict_s"]].mean()
        df["fit s"] = [f"{t['fit_s'].get(r, np.nan):.2f}" for r in df["router"]]
        df["predict s"] = [f"{t['predict_s'].get(r, np.nan):.3f}" for r in df["router"]]
    return markdown_table(df)


def _unreached(cells: pd.DataFrame) -> str:
    """``not reached``, or ``not reached in k of n folds`` when some folds reached it."""
    per_fold = cells.loc[~cells["fold"].isin(["mean", "std"]), "value"].to_numpy(dtype=float)
    missed = int((~np.isfinite(per_fold)).sum())
    if 0 < missed < len(per_fold):
        return f"not reached in {missed} of {len(per_fold)} folds"
    return "not reached"


def pool_section(metrics, protocol: str, pool: str, spec, title: str, timings=None):
    """``(heading, table)`` of a protocol on one pool (group mean for sized pools), or None."""
    group = "all" if pool == "all" else "mean"
    t = metric_table(metrics, protocol, pool, group, spec, timings)
    if t is None:
        return None
    return f"{title}, pool {pool}" + ("" if pool == "all" else " (group mean)"), t
