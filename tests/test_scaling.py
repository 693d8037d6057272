"""RouterEval scaling-up experiment: r_o(p) against pool size (library and CLI)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recsys_router.cli import main
from recsys_router.data import RoutingData
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.evaluation import pool_sizes, scaling_curve


@pytest.fixture(scope="module")
def data():
    return make_synthetic(300, 9, 3, seed=5, with_text=False)


def test_monotone_in_p_and_ro1_is_the_oracle(data):
    ps = [0.0, 0.25, 0.5, 0.75, 1.0]
    table, subsets = scaling_curve(data, ps, range(1, 10), subsets=20, seed=0, return_subsets=True)
    S = data.scores.astype(np.float64)
    for m, g in table.groupby("m"):
        v = g.sort_values("p")["mean_score"].to_numpy()
        assert np.all(np.diff(v) >= -1e-12), m
        # independent: oracle = mean over the drawn subsets of mean_i max_j s_ij;
        # p = 0 is the mean over subsets of the subset's average score
        oracle = np.mean([S[:, cols].max(axis=1).mean() for cols in subsets[m]])
        rand = np.mean([S[:, cols].mean() for cols in subsets[m]])
        assert g[g.p == 1.0]["mean_score"].iloc[0] == pytest.approx(oracle)
        assert g[g.p == 0.0]["mean_score"].iloc[0] == pytest.approx(rand)
        assert g[g.p == 0.5]["mean_score"].iloc[0] == pytest.approx((oracle + rand) / 2)
    # m = 1: every p gives the same single-LLM score; the whole pool is one subset
    one = table[table.m == 1]["mean_score"].to_numpy()
    assert np.allclose(one, one[0])
    assert len(subsets[9]) == 1 and table[table.m == 9]["n_subsets"].iloc[0] == 1
    # the oracle curve rises with m
    o = table[table.p == 1.0].sort_values("m")["mean_score"].to_numpy()
    assert np.all(np.diff(o) >= -1e-9)


def test_hand_computed_tiny_case():
    d = RoutingData(["a", "b"], ["x", "y", "z"], [[1, 0, 0], [0, 0, 1]])
    t = scaling_curve(d, [0.0, 1.0], [3], subsets=5)
    # whole pool: oracle = 1, mean of all cells = 2/6
    assert t["mean_score"].tolist() == pytest.approx([1 / 3, 1.0])


def test_missing_scores_and_bad_input():
    d = RoutingData(["a", "b"], ["x", "y"], [[1, np.nan], [0, 1]])
    t = scaling_curve(d, [1.0], [2], subsets=1)
    assert t["n_queries_mean"].iloc[0] == 1 and t["mean_score"].iloc[0] == 1.0
    with pytest.raises(ValueError, match="p values"):
        scaling_curve(d, [1.5], [1])
    with pytest.raises(ValueError, match="outside 1..2"):
        scaling_curve(d, [0.5], [3])
    assert pool_sizes(4) == [1, 2, 3, 4]
    assert pool_sizes(100, "log", 3) == [1, 10, 100]


def test_cli_writes_csv_and_png(tmp_path, capsys):
    out = tmp_path / "sc"
    rc = main(["scaling", "--data", "synthetic", "--p", "0,0.5,1", "--max-m", "4", "--subsets", "10",
               "--seed", "1", "--out", str(out)])
    assert rc == 0
    t = pd.read_csv(out / "scaling.csv")
    assert sorted(t["m"].unique()) == [1, 2, 3, 4] and sorted(t["p"].unique()) == [0.0, 0.5, 1.0]
    for _, g in t.groupby("m"):
        assert np.all(np.diff(g.sort_values("p")["mean_score"].to_numpy()) >= -1e-12)
    assert (out / "scaling.png").stat().st_size > 0
    assert "scaling.csv" in capsys.readouterr().out
