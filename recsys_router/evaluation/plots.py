"""PNG plots of an evaluation (matplotlib, Agg backend): the cost-quality plane with each
router's NDCH and the LLM points, ORBIT budget curves, the chosen-LLM distribution and
RouteLLM's quality vs share of strong calls."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["write_plots", "plot_scaling"]

_LINES = ("-", "--", ":", "-.")  # a new line style after every 10 colours


def _plt():
    import matplotlib  # noqa: PLC0415 (heavy import, only when plotting)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    return plt


def _save(fig, path: Path) -> None:
    """Lay out, write as PNG and close (so long sweeps do not pile up open figures)."""
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _plt().close(fig)


def _xscale(ax, x: pd.Series) -> None:
    """Log cost axis when costs are positive and span more than 50x."""
    if len(x) and (x > 0).all() and x.max() / x.min() > 50:
        ax.set_xscale("log")


def _first_block(df: pd.DataFrame) -> pd.DataFrame:
    """Rows of the pool 'all' (else the first pool/group) and the first fold."""
    if df.empty:
        return df
    pool = "all" if (df["pool"] == "all").any() else df["pool"].iloc[0]
    sub = df[df["pool"] == pool]
    sub = sub[sub["group"] == sub["group"].iloc[0]]
    return sub[sub["fold"].astype(str) == str(sub["fold"].iloc[0])]


def _title(base: str, sub: pd.DataFrame, simulated: bool) -> str:
    r = sub.iloc[0]
    t = f"{base}: {r['dataset']}, pool {r['pool']}" + ("" if r["group"] == "all" else f" ({r['group']})")
    return t + (" [SIMULATED]" if simulated else "")


def _cost_quality(curves: pd.DataFrame, path: Path, simulated: bool) -> bool:
    plt = _plt()
    sub = _first_block(curves[curves["protocol"] == "routerbench"])
    if sub.empty:
        return False
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
            dict(marker=".", ls=_LINES[(k // 10) % len(_LINES)])
        ax.plot(h["x"], h["y"], label=router, **style)
    _xscale(ax, sub["x"])
    ax.set_xlabel("mean cost per query")
    ax.set_ylabel("mean quality")
    ax.set_title(_title("Cost-quality (NDCH per router)", sub, simulated))
    ax.legend(fontsize=7, ncol=2)
    _save(fig, path)
    return True


def _budget_curves(curves: pd.DataFrame, path: Path, simulated: bool) -> bool:
    plt = _plt()
    sub = _first_block(curves[(curves["protocol"] == "orbit") & (curves["curve"] == "budget")])
    if sub.empty:
        return False
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for k, (router, c) in enumerate(sub.groupby("router", sort=False)):
        c = c.sort_values("setting_value")
        ax.plot(c["x"], c["y"], marker=".", ls=_LINES[(k // 10) % len(_LINES)], label=router)
    _xscale(ax, sub["x"])
    ax.set_xlabel("mean cost per query (at each budget)")
    ax.set_ylabel("mean quality")
    ax.set_title(_title("ORBIT budget curves", sub, simulated))
    ax.legend(fontsize=7, ncol=2)
    _save(fig, path)
    return True


def _chosen_distribution(decisions: pd.DataFrame, path: Path, simulated: bool) -> bool:
    plt = _plt()
    sub = _first_block(decisions[(decisions["protocol"] == "routereval")
                                 & ~decisions["router"].str.startswith("LLM:")])
    if sub.empty:
        return False
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
    ax.set_title(_title("Chosen-LLM distribution", sub, simulated))
    ax.legend(fontsize=6, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.12))
    _save(fig, path)
    return True


def _routellm(curves: pd.DataFrame, path: Path, simulated: bool) -> bool:
    plt = _plt()
    sub = _first_block(curves[curves["protocol"] == "routellm"])
    if sub.empty:
        return False
    fig, ax = plt.subplots(figsize=(7, 5))
    for k, (router, c) in enumerate(sub.groupby("router", sort=False)):
        c = c.sort_values("x")
        ax.plot(100 * c["x"], c["y"], marker=".", ls=_LINES[(k // 10) % len(_LINES)], label=router)
    ax.set_xlabel("% calls to the strong LLM")
    ax.set_ylabel("mean quality")
    ax.set_title(_title("RouteLLM threshold sweep", sub, simulated))
    ax.legend(fontsize=7, ncol=2)
    _save(fig, path)
    return True


def write_plots(result, folder: Path) -> list[str]:
    """Write every plot that the evaluated protocols allow; returns the file names."""
    folder = Path(folder)
    made = []
    for name, fn, arg in (("cost_quality.png", _cost_quality, result.curves),
                          ("orbit_budget_curves.png", _budget_curves, result.curves),
                          ("chosen_llm_distribution.png", _chosen_distribution, result.decisions),
                          ("routellm_threshold.png", _routellm, result.curves)):
        if fn(arg, folder / name, result.simulated):
            made.append(name)
    return made


def plot_scaling(table: pd.DataFrame, path: Path, title: str) -> None:
    """RouterEval figure-2 style plot: mean test score of r_o(p) against pool size m."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 5))
    for p, c in table.groupby("p", sort=True):
        c = c.sort_values("m")
        ax.plot(c["m"], c["mean_score"], marker=".", label=f"r_o(p={p:g})")
        ax.fill_between(c["m"], c["mean_score"] - c["std_score"], c["mean_score"] + c["std_score"],
                        alpha=0.15)
    if table["m"].max() / max(table["m"].min(), 1) > 20:
        ax.set_xscale("log")
    ax.set_xlabel("number of candidate LLMs m")
    ax.set_ylabel("mean test score (expected over r_o's coin)")
    ax.set_title(title)
    ax.legend(fontsize=8)
    _save(fig, path)
