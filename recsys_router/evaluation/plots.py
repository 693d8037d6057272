"""PNG plots of an evaluation: each protocol's own plots (from its record) and the
RouterEval scaling plot of ``recsys-router scaling``."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .figures import plain_text, pyplot, save_figure
from .protocols import registered_protocols

__all__ = ["write_plots", "plot_scaling"]


def write_plots(result, folder: Path) -> list[str]:
    """Write every plot the protocols' records draw from ``result`` (a protocol that was not
    run draws nothing); returns the file names."""
    folder = Path(folder)
    made = []
    with plain_text():  # LLM names come from data files: never parsed as mathtext
        for proto in registered_protocols():
            for name, fn in proto.plots:
                if fn(result, folder / name):
                    made.append(name)
    return made


def plot_scaling(table: pd.DataFrame, path: Path, title: str) -> None:
    """RouterEval figure-2 style plot: mean test score of r_o(p) against pool size m."""
    with plain_text():  # the title names the dataset
        plt = pyplot()
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
        save_figure(fig, path)
