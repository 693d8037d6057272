"""Evaluation runner end to end on small simulated data: files, recomputation of every
number from the decisions alone (with independent hand-written formulas), folds, pools."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.evaluation import (EvalConfig, evaluate, metrics_from_decisions, write_results)

torch.set_num_threads(1)

ROUTERS = ["random", "oracle", "best-single", "r_o", "knn"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    data = make_synthetic(360, 12, 4, seed=3)
    cfg = EvalConfig(ROUTERS, pools=["all", 3], folds=2, encoder="hashing", p=0.5, seed=1)
    res = evaluate(data, cfg, progress=False)
    out = tmp_path_factory.mktemp("ev") / "out"
    write_results(res, out)
    return res, out


def test_writes_every_file(run):
    res, out = run
    for name in ("metrics.csv", "metrics.json", "decisions.parquet", "curves.csv", "timings.csv",
                 "report.md", "cost_quality.png", "orbit_budget_curves.png",
                 "chosen_llm_distribution.png", "routellm_threshold.png"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    m = pd.read_csv(out / "metrics.csv", dtype={"fold": str, "pool": str})
    assert list(m.columns) == ["dataset", "protocol", "pool", "group", "fold", "router", "metric",
                               "value"]
    d = pd.read_parquet(out / "decisions.parquet")
    for col in ("router", "setting", "setting_value", "query_id", "llm", "score", "cost", "pool",
                "group", "fold", "protocol"):
        assert col in d.columns
    assert set(d["setting"]) >= {"argmax", "wtp", "budget", "threshold", "single", "strong", "weak"}
    js = json.loads((out / "metrics.json").read_text())
    assert js["simulated"] is True and len(js["leaderboard"]) >= len(ROUTERS)
    report = (out / "report.md").read_text()
    assert "SIMULATED" in report and "## Leaderboard" in report and "RouterBench" in report
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".out.")]  # no temp dirs left


def test_metrics_csv_equals_recomputation_from_decisions(run):
    _, out = run
    m = pd.read_csv(out / "metrics.csv", dtype={"fold": str, "pool": str})
    d = pd.read_parquet(out / "decisions.parquet")
    m2, c2 = metrics_from_decisions(d)
    key = ["dataset", "protocol", "pool", "group", "fold", "router", "metric"]
    a = m.set_index(key)["value"].sort_index()
    b = m2.set_index(key)["value"].sort_index()
    assert a.index.equals(b.index)
    np.testing.assert_allclose(a.to_numpy(), b.to_numpy(), rtol=1e-9, equal_nan=True)
    c = pd.read_csv(out / "curves.csv", dtype={"fold": str, "pool": str})
    assert len(c) == len(c2)


def _read_decisions(out) -> pd.DataFrame:
    d = pd.read_parquet(out / "decisions.parquet")
    for col in d.select_dtypes("category").columns:
        d[col] = d[col].astype(str)
    return d


def _entropy(labels) -> float:
    p = pd.Series(labels).value_counts(normalize=True).to_numpy()
    return float(-(p * np.log2(p)).sum())


def _get(m, **kw) -> float:
    sel = m
    for k, v in kw.items():
        sel = sel[sel[k] == v]
    assert len(sel) == 1, kw
    return float(sel["value"].iloc[0])


def test_numbers_match_hand_formulas_on_decisions(run):
    """Independent formulas (no library metric code) on the raw decision rows."""
    _, out = run
    m = pd.read_csv(out / "metrics.csv", dtype={"fold": str, "pool": str})
    d = _read_decisions(out)
    curves = pd.read_csv(out / "curves.csv", dtype={"fold": str, "pool": str})
    checked = 0
    for (pool, group, fold), blk in d.groupby(["pool", "group", "fold"]):
        base = dict(pool=pool, group=group, fold=str(fold))
        rev = blk[blk.protocol == "routereval"]
        llm_means = rev[rev.router.str.startswith("LLM:")].groupby("llm")["score"].mean()
        for r in ROUTERS:
            label = "r_o(p=0.5)" if r == "r_o" else r
            rows = rev[rev.router == label]
            mu = rows["score"].mean()
            assert _get(m, protocol="routereval", router=label, metric="mu_o", **base) == \
                pytest.approx(mu)
            assert _get(m, protocol="routereval", router=label, metric="e_p", **base) == \
                pytest.approx(_entropy(rows["llm"]))
            assert _get(m, protocol="routereval", router=label, metric="v_b", **base) == \
                pytest.approx(mu / llm_means.max())
            # ORBIT curve points and Peak
            ob = blk[(blk.protocol == "orbit") & (blk.router == label)]
            pts = ob.groupby("setting_value")[["cost", "score"]].mean().sort_index()
            cv = curves[(curves.protocol == "orbit") & (curves.curve == "budget")
                        & (curves.router == label) & (curves.pool == pool) & (curves.group == group)
                        & (curves.fold == str(fold))].sort_values("setting_value")
            np.testing.assert_allclose(cv[["x", "y"]].to_numpy(), pts.to_numpy(), rtol=1e-9)
            # RouterBench points (one per willingness to pay)
            rb = blk[(blk.protocol == "routerbench") & (blk.router == label)]
            rpts = rb.groupby("setting_value")[["cost", "score"]].mean().sort_index()
            rc = curves[(curves.protocol == "routerbench") & (curves.curve == "points")
                        & (curves.router == label) & (curves.pool == pool)
                        & (curves.group == group) & (curves.fold == str(fold))]
            np.testing.assert_allclose(rc.sort_values("setting_value")[["x", "y"]].to_numpy(),
                                       rpts.to_numpy(), rtol=1e-9)
            # RouteLLM: APGR by a plain trapezoid over (share of strong calls, quality)
            rl = blk[blk.protocol == "routellm"]
            strong = rl[rl.setting == "strong"]["llm"].iloc[0]
            qs = rl[rl.setting == "strong"]["score"].mean()
            qw = rl[rl.setting == "weak"]["score"].mean()
            g = rl[rl.router == label].groupby("setting_value")
            frac = g["llm"].apply(lambda s: (s == strong).mean()).to_numpy()
            qual = g["score"].mean().to_numpy()
            o = np.argsort(frac, kind="stable")
            x, y = frac[o], qual[o]
            area = float(((x[1:] - x[:-1]) * (y[1:] + y[:-1]) / 2).sum())
            width = x[-1] - x[0]
            if qs > qw:
                expect = (area - qw * width) / ((qs - qw) * width)
                assert _get(m, protocol="routellm", router=label, metric="apgr", **base) == \
                    pytest.approx(expect)
            else:  # the pair inverted on the test queries: APGR undefined (NaN, shown as -)
                sel = m[(m["protocol"] == "routellm") & (m["router"] == label)
                        & (m["metric"] == "apgr")]
                sel = sel[(sel[list(base)] == pd.Series(base)).all(axis=1)]
                assert len(sel) == 1 and np.isnan(sel["value"].iloc[0])
            checked += 1
    assert checked == len(ROUTERS) * 2 * 4  # 2 folds x (whole pool + 3 groups)


def test_oracle_bounds_and_group_means(run):
    res, _ = run
    m = res.metrics
    per = m[(m.fold.isin(["0", "1"])) & (m.protocol == "routereval") & (m.metric == "mu_o")]
    for (pool, group, fold), g in per.groupby(["pool", "group", "fold"]):
        oracle = g[g.router == "oracle"]["value"].iloc[0]
        singles = g[g.router.str.startswith("LLM:") & ~g.router.isin(["LLM:oracle-bound"])]
        assert (oracle >= singles["value"] - 1e-12).all()
    # group mean rows = mean over the three candidate groups
    sized = m[(m.pool == "3") & (m.fold == "0") & (m.metric == "mu_o") & (m.protocol == "routereval")
              & (m.router == "knn")]
    groups = sized[sized.group != "mean"]
    assert set(groups.group) == {"all-strong", "all-weak", "strong-to-weak"}
    assert sized[sized.group == "mean"]["value"].iloc[0] == pytest.approx(groups["value"].mean())


def test_fold_mean_and_std_rows(run):
    res, _ = run
    m = res.metrics
    sel = m[(m.protocol == "orbit") & (m.pool == "all") & (m.router == "knn") & (m.metric == "nauc")]
    vals = sel.set_index("fold")["value"]
    assert set(vals.index) == {"0", "1", "mean", "std"}
    assert vals["mean"] == pytest.approx((vals["0"] + vals["1"]) / 2)
    assert vals["std"] == pytest.approx(abs(vals["0"] - vals["1"]) / np.sqrt(2))


def test_random_entropy_close_to_log2_m():
    data = make_synthetic(4000, 5, 3, seed=11, with_text=False)
    res = evaluate(data, EvalConfig(["random"], protocols=["routereval"], split=(0.5, 0.5)),
                   progress=False)
    e_p = _get(res.metrics, router="random", metric="e_p")
    assert abs(e_p - np.log2(5)) < 0.05


def test_no_costs_skips_cost_protocols_with_note(tmp_path):
    d = make_synthetic(200, 4, 2, seed=2, with_text=False)
    from recsys_router.data import RoutingData
    nocost = RoutingData(d.queries, d.llms, d.scores, None, name="nocost")
    res = evaluate(nocost, EvalConfig(["oracle", "best-single"]), progress=False)
    assert set(res.metrics["protocol"]) == {"routereval", "routellm"}
    write_results(res, tmp_path / "o", plots=False)
    report = (tmp_path / "o" / "report.md").read_text()
    assert "routerbench, orbit skipped" in report and "no costs" in report
    assert "second-best train mean" in report  # routellm pair chosen without costs


def test_output_folder_is_replaced_atomically(tmp_path):
    d = make_synthetic(120, 3, 2, seed=4, with_text=False)
    res = evaluate(d, EvalConfig(["oracle"], protocols=["routereval"]), progress=False)
    out = tmp_path / "res"
    out.mkdir()
    (out / "stale.txt").write_text("old")
    with pytest.raises(ValueError, match="not a recsys-router results folder"):
        write_results(res, out, plots=False)   # a folder of other files is never deleted
    assert sorted(p.name for p in out.iterdir()) == ["stale.txt"]
    (out / "stale.txt").unlink()
    write_results(res, out, plots=True)        # an empty folder is filled
    assert list(out.glob("*.png"))
    (out / "metrics.csv").write_text("old results")
    write_results(res, out, plots=False)       # an earlier results folder is replaced whole
    assert not list(out.glob("*.png")) and "router" in (out / "metrics.csv").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["res"]


def test_folds_ood_and_split_column():
    from recsys_router.evaluation import make_folds
    d = make_synthetic(90, 3, 3, seed=6, with_text=False)
    (f,) = make_folds(d, ood_tasks=["topic_0"], seed=0)
    assert set(f.test.tasks) == {"topic_0"} and "topic_0" not in set(f.train.tasks)
    assert f.train.n_queries + f.val.n_queries + f.test.n_queries == 90
    q = d.queries.copy()
    q["split"] = ["train"] * 60 + ["test"] * 30
    from recsys_router.data import RoutingData
    d2 = RoutingData(q, d.llms, d.scores, d.costs)
    (g,) = make_folds(d2, split_column="split")
    assert g.val is None and g.test.query_ids == d2.query_ids[60:]
    folds = make_folds(d, folds=3, seed=1)
    ids = sorted(sum((f.test.query_ids for f in folds), []))
    assert ids == sorted(d.query_ids)  # every query is tested exactly once
    with pytest.raises(ValueError, match="cannot be combined"):
        make_folds(d, folds=3, split_column="split")


def test_note_counts_test_queries_whose_text_is_a_train_text():
    # by hand: train texts {x, y, z}; test texts x, w, y, x -> 3 of 4 repeat a train text
    from recsys_router.data import RoutingData
    texts = ["x", "y", "z", "x", "w", "y", "x", "v"]
    split = ["train"] * 3 + ["test"] * 4 + ["val"]
    q = pd.DataFrame({"query_id": [f"q{i}" for i in range(8)], "text": texts, "split": split})
    scores = np.tile([[1.0, 0.0], [0.0, 1.0]], (4, 1))
    d = RoutingData(q, ["a", "b"], scores, np.ones((8, 2)), name="tiny")
    res = evaluate(d, EvalConfig(["oracle"], protocols=["routereval"], split_column="split",
                                 pools=["all"]), progress=False)
    assert "fold 0: 3 of 4 test queries have the same text as a train query" in res.notes
    q2 = q.assign(text=[f"t{i}" for i in range(8)])  # distinct texts: no such note
    res2 = evaluate(RoutingData(q2, ["a", "b"], scores, np.ones((8, 2))),
                    EvalConfig(["oracle"], protocols=["routereval"], split_column="split",
                               pools=["all"]), progress=False)
    assert not any("same text" in n for n in res2.notes)
