"""Matplotlib helpers shared by the protocols' plots (Agg backend, one layout and save)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

__all__ = ["pyplot", "plain_text", "save_figure", "log_cost_axis", "first_block", "plot_title", "LINE_STYLES",
           "line_style", "finish_plot", "router_curves"]

#: a new line style after every 10 colours
LINE_STYLES = ("-", "--", ":", "-.")


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (imported only when plotting)."""
    import matplotlib  # noqa: PLC0415 (heavy import, only when plotting)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415
    return plt


def plain_text():
    """Context in which matplotlib draws every label as plain text: no mathtext, so an LLM,
    router or dataset name such as ``r$\\foo$`` (from a data file, a log or judged records)
    is printed as written instead of failing to parse. Figures must be created *and saved*
    inside it (tick labels are made when drawing).

    Example
    -------
    >>> with plain_text():
    ...     fig, ax = pyplot().subplots()
    ...     _ = ax.set_title("r$\\\\foo$")
    ...     fig.canvas.draw()
    >>> pyplot().close(fig)
    """
    import matplotlib  # noqa: PLC0415
    return matplotlib.rc_context({"text.parse_math": False})


def save_figure(fig, path: Path) -> None:
    """Lay out, write as PNG and close (so long sweeps do not pile up open figures)."""
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    pyplot().close(fig)


def log_cost_axis(ax, x: pd.Series) -> None:
    """Log cost axis when costs are positive and span more than 50x."""
    if len(x) and (x > 0).all() and x.max() / x.min() > 50:
        ax.set_xscale("log")


def first_block(df: pd.DataFrame) -> pd.DataFrame:
    """Rows of the pool 'all' (else the first pool/group) and the first fold."""
    if df.empty:
        return df
    pool = "all" if (df["pool"] == "all").any() else df["pool"].iloc[0]
    sub = df[df["pool"] == pool]
    sub = sub[sub["group"] == sub["group"].iloc[0]]
    return sub[sub["fold"].astype(str) == str(sub["fold"].iloc[0])]


def plot_title(base: str, sub: pd.DataFrame, simulated: bool) -> str:
    """``base: dataset, pool P (group)`` plus a SIMULATED tag."""
    r = sub.iloc[0]
    t = f"{base}: {r['dataset']}, pool {r['pool']}" + ("" if r["group"] == "all" else f" ({r['group']})")
    return t + (" [SIMULATED]" if simulated else "")


def line_style(k: int) -> str:
    """Line style of the ``k``-th router (a new style after every 10 colours)."""
    return LINE_STYLES[(k // 10) % len(LINE_STYLES)]


def finish_plot(fig, ax, path: Path, *, xlabel: str, title: str, sub: pd.DataFrame,
                simulated: bool, ylabel: str = "mean quality") -> bool:
    """Label the axes, title (with dataset, pool and SIMULATED tag), legend; save and close."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(plot_title(title, sub, simulated))
    ax.legend(fontsize=7, ncol=2)
    save_figure(fig, path)
    return True


def router_curves(sub: pd.DataFrame, path: Path, *, sort_by: str, xlabel: str, title: str,
                  simulated: bool, x_factor: float = 1.0, log_x: bool = False,
                  figsize=(8, 5.5)) -> bool:
    """One line of curve points (``x``, ``y``) per router, points ordered by ``sort_by``;
    False (nothing written) when ``sub`` is empty."""
    if sub.empty:
        return False
    fig, ax = pyplot().subplots(figsize=figsize)
    for k, (router, c) in enumerate(sub.groupby("router", sort=False)):
        c = c.sort_values(sort_by)
        ax.plot(x_factor * c["x"], c["y"], marker=".", ls=line_style(k), label=router)
    if log_x:
        log_cost_axis(ax, sub["x"])
    return finish_plot(fig, ax, path, xlabel=xlabel, title=title, sub=sub, simulated=simulated)
