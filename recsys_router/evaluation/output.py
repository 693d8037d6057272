"""Write an evaluation's files (atomically) and read its decisions back."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pandas as pd

from .io import atomic_dir, write_json
from .plots import write_plots
from .report import leaderboard, render_report

__all__ = ["write_results", "OUTPUT_FILES"]

#: files every evaluation writes (plots come on top, as the protocols allow)
OUTPUT_FILES = ("metrics.csv", "metrics.json", "decisions.parquet", "curves.csv", "timings.csv",
                "report.md")


def _config_dict(cfg) -> dict:
    d = dataclasses.asdict(cfg)
    d["routers"] = [r if isinstance(r, str) else repr(r) for r in cfg.routers]
    return d


def write_results(result, out: str | os.PathLike, *, plots: bool = True) -> tuple[Path, pd.DataFrame]:
    """Write ``metrics.csv``, ``metrics.json``, ``decisions.parquet``, ``curves.csv``,
    ``timings.csv``, ``report.md`` and PNG plots into ``out`` (replaced atomically).

    Parameters
    ----------
    result : EvalResult
    out : path
        Output folder.
    plots : bool
        Draw the PNG plots.

    Returns
    -------
    (Path, pandas.DataFrame)
        The folder and the leaderboard table.
    """
    lb = leaderboard(result.metrics, result.timings,
                     truth_routers=result.info.get("ground_truth_routers", ()))
    with atomic_dir(out) as tmp:
        result.metrics.to_csv(tmp / "metrics.csv", index=False)
        result.curves.to_csv(tmp / "curves.csv", index=False)
        result.timings.to_csv(tmp / "timings.csv", index=False)
        result.decisions.to_parquet(tmp / "decisions.parquet", index=False)
        made = write_plots(result, tmp) if plots else []
        write_json(tmp / "metrics.json", {
            "dataset": result.dataset, "simulated": result.simulated,
            "config": _config_dict(result.config), "info": result.info, "notes": result.notes,
            "leaderboard": lb.to_dict(orient="records"),
            "metrics": result.metrics.to_dict(orient="records"),
            "timings": result.timings.to_dict(orient="records"), "plots": made})
        (tmp / "report.md").write_text(render_report(result, lb, made) + "\n")
    return Path(out), lb
