"""Names from data files, logs and routers are drawn as plain text in every plot: an LLM
called ``m$\\bar$`` (mathtext that does not parse) no longer aborts ``evaluate`` before its
plots, nor the coldstart and bandit plots."""

from __future__ import annotations

import numpy as np
import pandas as pd

from recsys_router.cli import main
from recsys_router.coldstart.protocol import plot_curves
from recsys_router.feedback.report import plot_regret

BAD = "m$\\bar$"


def test_evaluate_plots_with_a_mathtext_llm_name(tmp_path):
    rng = np.random.default_rng(0)
    rows = [{"query_id": f"q{i}", "model": m, "score": float(rng.random() < p), "cost": c,
             "query_text": f"question number {i}"}
            for i in range(60) for m, p, c in ((BAD, 0.7, 0.01), ("plain", 0.5, 0.001), ("$x^{$", 0.3, 0.002))]
    src = tmp_path / "d.csv"
    pd.DataFrame(rows).to_csv(src, index=False)
    out = tmp_path / "ev"
    assert main(["evaluate", "--data", str(src), "--routers", "best-single,random", "--protocol", "all",
                 "--no-fallback", "--seed", "0", "--out", str(out), "--no-progress"]) == 0
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert len(pngs) >= 3 and all((out / p).stat().st_size > 0 for p in pngs)
    assert BAD in set(pd.read_parquet(out / "decisions.parquet")["router"].astype(str).str.replace("LLM:", ""))


def test_coldstart_and_regret_plots_with_mathtext_names(tmp_path):
    summary = pd.DataFrame({"router": [BAD] * 4, "strategy": ["random"] * 4, "k": [5, 10, 5, 10],
                            "metric": ["score_mae"] * 2 + ["route_gap"] * 2, "mean": [0.3, 0.2, 0.1, 0.05],
                            "std": [0.01] * 4, "n": [2] * 4})
    assert plot_curves(summary, tmp_path / "c.png") and (tmp_path / "c.png").stat().st_size > 0
    runs = pd.DataFrame({"t": [1, 2, 3], "regret_policy": [0.0, 0.5, 1.0], "regret_best_fixed": [0.0, 0.2, 0.4]})
    plot_regret(runs, tmp_path / "r.png", f"online {BAD}")
    assert (tmp_path / "r.png").stat().st_size > 0
