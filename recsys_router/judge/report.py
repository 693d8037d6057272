"""RouteJudge reports: Markdown/CSV tables and PNG plots (matplotlib, Agg backend).

Files written to ``out_dir``:

* ``leaderboard.{csv,md}``: per router votes, participation, PrefScore, WinRate, Elo with
  bootstrap interval (with ``n_boot=0``: the record-order Elo, in the table and the plot),
  Bradley-Terry rating, selection entropy, mean cost, Pareto flag;
* ``h2h.{csv,md}`` (every router; the heatmap and ``report.md`` show the first
  :data:`H2H_PLOT_MAX` by Elo), ``mcnemar.csv``, ``agreement.csv`` (raw agreement and Cohen's kappa),
  ``task_pref_score.csv``, ``task_win_rate.csv``, ``selection.csv`` (vote shares);
* ``leaderboard_elo.png``, ``h2h_heatmap.png``, ``selection_distribution.png``,
  ``cost_vs_pref_score.png``;
* ``report.md`` tying them together.

Router and LLM names come from the records (untrusted): every label is drawn as plain text,
never parsed as mathtext, and written into the Markdown tables escaped
(:func:`recsys_router.markdown.md_table`, the evaluation report's table writer too), so a
name cannot add a table column, a heading, a link or an image. In the CSV files a name that
a spreadsheet would run as a formula (``=``, ``+``, ``-``, ``@``, tab, carriage return
first) starts with a single quote (:func:`csv_safe`). The files are written into a
temporary folder beside ``out_dir`` first; only when all of them are written do they move
into ``out_dir`` (renamed into place when it does not exist yet, else moved in file by file,
each replacing its old version; :mod:`recsys_router.judge.publish`), so a failed report
leaves ``out_dir`` as it was.
"""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from ..atomic import temp_dir  # noqa: E402
from ..evaluation.figures import plain_text  # noqa: E402
from ..markdown import md_table  # noqa: E402
from .metrics import (agreement, cohen_kappa, h2h_matrix, leaderboard, mcnemar, mean_consensus,  # noqa: E402
                      routers_of, task_pref_scores, task_win_rates)
from .rating import bradley_terry, elo_bootstrap  # noqa: E402
from .publish import StagedReport  # noqa: E402
from .records import JudgeRecord  # noqa: E402

__all__ = ["H2H_PLOT_MAX", "H2H_LABEL_MAX", "StagedReport", "csv_safe", "full_leaderboard", "selection_table",
           "stage_report", "write_report"]

#: the head-to-head heatmap (and its Markdown table in ``report.md``) shows at most this many
#: routers, the first by Elo; ``h2h.csv`` and ``h2h.md`` keep every router
H2H_PLOT_MAX = 30
#: heatmap cells carry their value as text only up to this many routers
H2H_LABEL_MAX = 15


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _cell(v):
    return "'" + v if isinstance(v, str) and v.startswith(_FORMULA_START) else v


def csv_safe(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``df`` whose text cells, index entries and column labels that a spreadsheet
    would run as a formula (starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage
    return) start with a single quote instead; numbers are left as they are.

    Example
    -------
    >>> print(csv_safe(pd.DataFrame({"router": ["=HYPERLINK(1)", "knn"], "x": [-1.0, 2.0]})).to_csv(index=False))
    router,x
    '=HYPERLINK(1),-1.0
    knn,2.0
    <BLANKLINE>
    """
    out = df.copy()
    out.columns = pd.Index([_cell(c) for c in df.columns], name=_cell(df.columns.name))
    if isinstance(df.index, pd.MultiIndex):
        out.index = pd.MultiIndex.from_tuples([tuple(_cell(v) for v in t) for t in df.index], names=df.index.names)
    else:
        out.index = pd.Index([_cell(v) for v in df.index], name=df.index.name)
    for k in range(out.shape[1]):
        dt = out.dtypes.iloc[k]
        if not (pd.api.types.is_numeric_dtype(dt) or pd.api.types.is_bool_dtype(dt)):
            out.isetitem(k, pd.Series([_cell(v) for v in out.iloc[:, k]], index=out.index, dtype=object))
    return out


def full_leaderboard(records: Sequence[JudgeRecord], *, n_boot: int = 200, seed: int = 0) -> pd.DataFrame:
    """Leaderboard with Elo (bootstrap interval) and Bradley-Terry, sorted by Elo median."""
    routers = routers_of(records)
    lb = leaderboard(records, routers).set_index("router")
    el = elo_bootstrap(records, routers, n_boot=n_boot, seed=seed)
    bt = bradley_terry(records, routers)
    out = pd.concat([lb, el, bt], axis=1).reset_index()
    key = "elo_median" if n_boot else "elo"
    return out.sort_values(key, ascending=False, kind="stable").reset_index(drop=True)


def selection_table(records: Sequence[JudgeRecord]) -> pd.DataFrame:
    """Share of each router's votes (rows) going to each LLM (columns)."""
    routers = routers_of(records)
    llms = list(dict.fromkeys(m for rec in records for m in rec.feasible))
    rows = {}
    for r in routers:
        c = Counter(rec.router_choices[r] for rec in records if r in rec.router_choices)
        tot = sum(c.values())
        rows[r] = [c[m] / tot if tot else np.nan for m in llms]
    return pd.DataFrame.from_dict(rows, orient="index", columns=llms).rename_axis("router")


def _md(df: pd.DataFrame, floatfmt: str = "{:.3f}", index: bool = False) -> str:
    """A Markdown table of ``df`` (:func:`~recsys_router.markdown.md_table`: names escaped),
    numbers formatted with ``floatfmt`` (NaN left empty)."""
    return md_table(df, lambda _c, v: "" if np.isnan(v) else floatfmt.format(v), index=index)


def _short(name: str, n: int = 22) -> str:
    name = str(name)
    return name if len(name) <= n else name[: n - 1] + "\u2026"


def _plot_elo(lb: pd.DataFrame, path: Path) -> None:
    """Elo per router: the bootstrap median with its interval, or the plain record-order
    ``elo`` (no bars) when there was no bootstrap (``n_boot=0``: the median is NaN)."""
    d = lb.iloc[::-1]
    fig, ax = plt.subplots(figsize=(7.5, 0.5 * len(d) + 1.6))
    y = np.arange(len(d))
    boot = not d["elo_median"].isna().all()
    if boot:
        mid = d["elo_median"].to_numpy(float)
        lo = np.maximum(mid - d["elo_lower"].to_numpy(float), 0)
        hi = np.maximum(d["elo_upper"].to_numpy(float) - mid, 0)
        ax.errorbar(mid, y, xerr=[lo, hi], fmt="o", color="tab:blue", ecolor="tab:gray", capsize=4)
    else:
        ax.errorbar(d["elo"].to_numpy(float), y, fmt="o", color="tab:blue")
    ax.set_yticks(y, [_short(r) for r in d["router"]])
    ax.axvline(1000, color="lightgray", lw=1, ls="--", zorder=0)
    ax.set_xlabel("Elo (bootstrap median, 95% interval)" if boot else "Elo (record order, no bootstrap)")
    ax.set_title("Router leaderboard")
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _plot_h2h(m: pd.DataFrame, path: Path) -> None:
    """Heatmap of the first :data:`H2H_PLOT_MAX` routers of ``m`` (sorted by Elo), with the
    values written in the cells up to :data:`H2H_LABEL_MAX` routers: the figure's size and
    drawing time stay bounded however many routers the records name."""
    total = len(m)
    m = m.iloc[:H2H_PLOT_MAX, :H2H_PLOT_MAX]
    n = len(m)
    fig, ax = plt.subplots(figsize=(1.0 * n + 3.0, 0.9 * n + 2.2))
    im = ax.imshow(m.to_numpy(float), cmap="RdBu", vmin=0, vmax=1)
    labels = [_short(r, 16) for r in m.index]
    ax.set_xticks(range(n), labels, rotation=40, ha="right")
    ax.set_yticks(range(n), labels)
    for i in range(n if n <= H2H_LABEL_MAX else 0):
        for j in range(n):
            v = m.iloc[i, j]
            if not np.isnan(v):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=9,
                        color="white" if abs(v - 0.5) > 0.3 else "black")
    ax.set_xlabel("opponent")
    ax.set_ylabel("router")
    ax.set_title("Head-to-head H2H(row, column)" + (f", first {n} of {total} by Elo" if n < total else ""))
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _plot_selection(sel: pd.DataFrame, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(9, 0.55 * len(sel) + 2.4))
    left = np.zeros(len(sel))
    cmap = plt.get_cmap("tab20")
    y = np.arange(len(sel))
    for k, m in enumerate(sel.columns):
        v = np.nan_to_num(sel[m].to_numpy(float))
        ax.barh(y, v, left=left, color=cmap(k % 20), label=_short(m, 28))
        left += v
    ax.set_yticks(y, [_short(r) for r in sel.index])
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("share of the router's choices")
    ax.set_title("Selection distribution per router")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=3, fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)


def _plot_cost(lb: pd.DataFrame, path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7.5, 5))
    d = lb.dropna(subset=["mean_cost", "pref_score"])
    ax.scatter(d["mean_cost"], d["pref_score"], s=50, color="tab:blue", zorder=3)
    spots: dict[tuple, list[str]] = {}  # routers at the same point share one label
    for _, r in d.iterrows():
        spots.setdefault((round(r["mean_cost"], 12), round(r["pref_score"], 9)), []).append(_short(r["router"]))
    for (x, y), names in spots.items():
        ax.annotate(", ".join(names), (x, y), textcoords="offset points", xytext=(5, 4), fontsize=9)
    ax.margins(x=0.25, y=0.12)
    front = d[d["pareto"]].sort_values("mean_cost")
    if len(front):
        ax.scatter(front["mean_cost"], front["pref_score"], s=140, facecolors="none", edgecolors="tab:red",
                   linewidths=1.8, zorder=4, label="Pareto frontier (not dominated)")
        if len(front) > 1:
            ax.step(front["mean_cost"], front["pref_score"], where="post", color="tab:red", lw=1.2, zorder=2)
        ax.legend(loc="best")
    if len(d) and d["mean_cost"].min() >= 0:
        ax.set_xlim(left=0)
    ax.set_xlabel("mean cost of the chosen LLM (USD per query)")
    ax.set_ylabel("PrefScore")
    ax.set_title("Cost vs PrefScore")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_report(records: Sequence[JudgeRecord], out_dir: str | Path, *, n_boot: int = 200, seed: int = 0,
                 title: str = "RouteJudge report") -> dict[str, Path]:
    """Write every table and plot (see the module docstring) and return their paths.

    Example
    -------
    >>> write_report(JudgeStore("judge.db").records(), "report/")  # doctest: +SKIP
    """
    with stage_report(records, out_dir, n_boot=n_boot, seed=seed, title=title) as staged:
        return staged.publish()


def stage_report(records: Sequence[JudgeRecord], out_dir: str | Path, *, n_boot: int = 200, seed: int = 0,
                 title: str = "RouteJudge report") -> StagedReport:
    """Write every table and plot into a temporary folder beside ``out_dir`` (created with
    its parents) and return it unpublished (:class:`StagedReport`); a failure removes it and
    leaves ``out_dir`` as it was."""
    records = list(records)
    if not records:
        raise ValueError("no judged records to report on")
    final = Path(out_dir)
    if final.exists() and not final.is_dir():
        raise FileExistsError(f"{final}: exists and is not a folder; expected a folder for the report")
    final.absolute().parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_dir(final.absolute().parent, f".{final.name}.tmp-")
    try:
        with plain_text():  # names from the records: no mathtext
            names = _write_files(records, tmp, n_boot=n_boot, seed=seed, title=title)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return StagedReport(tmp, final, names)


def _h2h_section(h2h: pd.DataFrame) -> list[str]:
    """The H2H Markdown of ``report.md``: every router up to :data:`H2H_PLOT_MAX`, else the
    first ones by Elo and a note pointing to the full tables."""
    n = len(h2h)
    if n <= H2H_PLOT_MAX:
        return [_md(h2h, index=True), ""]
    top = h2h.iloc[:H2H_PLOT_MAX, :H2H_PLOT_MAX]
    return [f"The table and the plot show the first {H2H_PLOT_MAX} of the {n} routers by Elo; "
            "`h2h.csv` and `h2h.md` hold all of them.", "", _md(top, index=True), ""]


def _write_files(records, out: Path, *, n_boot: int, seed: int, title: str) -> list[str]:
    """Write every table, plot and ``report.md`` into ``out``; returns the file names."""
    routers = routers_of(records)
    lb = full_leaderboard(records, n_boot=n_boot, seed=seed)
    h2h = h2h_matrix(records, list(lb["router"]))
    sel = selection_table(records)
    pairs = [(a, b) for i, a in enumerate(routers) for b in routers[i + 1:]]
    mc = pd.DataFrame([{"router_i": a, "router_j": b, **mcnemar(records, a, b)} for a, b in pairs],
                      columns=["router_i", "router_j", "a", "b", "chi2", "p_value"])
    ag = pd.DataFrame([{"router_i": a, "router_j": b, "agreement": agreement(records, a, b),
                        "kappa": cohen_kappa(records, a, b)} for a, b in pairs],
                      columns=["router_i", "router_j", "agreement", "kappa"])
    tp, tw = task_pref_scores(records), task_win_rates(records)
    paths = {}
    for name, df, idx in [("leaderboard", lb, False), ("h2h", h2h, True), ("selection", sel, True),
                          ("mcnemar", mc, False), ("agreement", ag, False), ("task_pref_score", tp, True),
                          ("task_win_rate", tw, True)]:
        paths[f"{name}.csv"] = out / f"{name}.csv"
        csv_safe(df).to_csv(paths[f"{name}.csv"], index=idx)  # names from the records: no formulas
    elo = ["elo_median", "elo_lower", "elo_upper"] if n_boot else ["elo"]  # no bootstrap: plain Elo
    show = lb[["router", "n_voted", "participation", "pref_score", "win_rate", *elo, "bt", "entropy_norm",
               "mean_cost", "pareto"]]
    (out / "leaderboard.md").write_text(_md(show, floatfmt="{:.4g}") + "\n", encoding="utf-8")
    (out / "h2h.md").write_text(_md(h2h, index=True) + "\n", encoding="utf-8")
    paths["leaderboard.md"], paths["h2h.md"] = out / "leaderboard.md", out / "h2h.md"
    for name, fn, arg in [("leaderboard_elo.png", _plot_elo, lb), ("h2h_heatmap.png", _plot_h2h, h2h),
                          ("selection_distribution.png", _plot_selection, sel),
                          ("cost_vs_pref_score.png", _plot_cost, lb)]:
        fn(arg, out / name)
        paths[name] = out / name
    tasks = sorted({str(r.task) for r in records})
    body = [f"# {title}", "", f"{len(records)} judged records, {len(routers)} routers, {len(tasks)} task(s); "
            f"mean consensus strength {mean_consensus(records):.3f}. Elo: K=4, start 1000, "
            + (f"{n_boot} bootstrap replays (seed {seed})" if n_boot else "in record order, no bootstrap")
            + "; BT: Bradley-Terry MLE on the same games.", "",
            "## Leaderboard", "", _md(show, floatfmt="{:.4g}"), "", "![Elo](leaderboard_elo.png)", "",
            "## Head-to-head", "", *_h2h_section(h2h), "![H2H](h2h_heatmap.png)", "",
            "## McNemar tests", "", _md(mc, floatfmt="{:.4g}"), "",
            "## Agreement between routers", "", _md(ag), "",
            "## PrefScore by task", "", _md(tp, index=True), "",
            "## WinRate by task", "", _md(tw, index=True), "",
            "## Selection distribution", "", _md(sel, index=True), "", "![selection](selection_distribution.png)",
            "", "## Cost vs PrefScore", "", "![cost](cost_vs_pref_score.png)", ""]
    paths["report.md"] = out / "report.md"
    paths["report.md"].write_text("\n".join(body), encoding="utf-8")
    return list(paths)
