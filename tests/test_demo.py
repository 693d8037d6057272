"""The first run shows the product: ``recsys-router demo`` puts the CF routers (mf, mirt,
two-tower) and task-best in its leaderboard, each with its own decisions."""

from __future__ import annotations

import pandas as pd
import torch

from recsys_router.cli import main
from recsys_router.cli.evaluate import DEMO_PARAMS, DEMO_ROUTERS
from recsys_router.registry import make_router

torch.set_num_threads(1)


def test_demo_routers_include_the_cf_routers_and_task_best():
    assert {"mf", "mirt", "two-tower", "task-best"} <= set(DEMO_ROUTERS)
    assert {"random", "oracle", "best-single", "knn", "zero"} <= set(DEMO_ROUTERS)
    for name, params in DEMO_PARAMS.items():     # every shortcut is a real parameter
        make_router(name, **params)


def test_demo_leaderboard_shows_mf_with_its_own_decisions(tmp_path, capsys):
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--n-queries", "200", "--routers",
                 "task-best,mf,best-single", "--no-progress", "--seed", "0"]) == 0
    text = capsys.readouterr().out
    assert "| mf |" in text and "| task-best |" in text
    d = pd.read_parquet(out / "decisions.parquet")
    d = d[(d.protocol == "routereval") & (d.pool == "all")]
    picks = d.pivot_table(index="query_id", columns="router", values="llm", aggfunc="first")
    # no safe fallback in the demo: mf's picks are its own, not the fallback's per-task ones
    assert (picks["mf"] != picks["task-best"]).any() and picks["mf"].nunique() > 1
    assert not any("safe fallback" in line for line in (out / "report.md").read_text().splitlines())
