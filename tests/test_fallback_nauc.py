"""The safe fallback's verdict by nAUC on data with costs (``verdict_metric``), and the paired
bootstrap comparison of two budget sweeps it rests on (``sweep_check.paired_nauc``)."""

import numpy as np
import pandas as pd
import pytest

from recsys_router.data import RoutingData
from recsys_router.export import export_router, load_router
from recsys_router.fallback import SafeFallbackRouter, fallback_summary
from recsys_router.router import Router
from recsys_router.sweep_check import held_out_nauc, paired_nauc

# query kinds by i % 20: X (0-9) c, b and a right; Y (10-15) b and a; Z1 (16-18) and Z2 (19)
# only a. Costs a 10, b 1, c 0.1.
_TRUTH = {"X": (1, 1, 1), "Y": (1, 1, 0), "Z1": (1, 0, 0), "Z2": (1, 0, 0)}
# the router knows X, Y and Z1 but takes b on Z2: top choice right on 95 %, a's on 100 %
_PRED = {"X": (0.95, 0.9, 1.0), "Y": (0.95, 1.0, 0.0), "Z1": (1.0, 0.0, 0.0),
         "Z2": (0.95, 1.0, 0.0)}


def _kind(i):
    r = i % 20
    return "X" if r < 10 else "Y" if r < 16 else "Z1" if r < 19 else "Z2"


class Peek(Router):
    """Predicts a fixed row per query kind (read from the query id); ``flip`` reverses it."""

    def __init__(self, flip=False, no_costs=False):
        self.flip = flip
        self.no_costs = no_costs

    def _fit(self, train, val):
        self.n_llms_ = train.n_llms

    def _predict_scores(self, data):
        rows = np.array([_PRED[_kind(int(q[1:]))] for q in data.queries["query_id"]], float)
        return 1.0 - rows if self.flip else rows

    def predict_costs(self, data):
        return None if self.no_costs else super().predict_costs(data)


def _data(n=200, tasks=None, costs=True):
    scores = np.array([_TRUTH[_kind(i)] for i in range(n)], dtype=np.float64)
    q = pd.DataFrame({"query_id": [f"q{i}" for i in range(n)], "text": [f"t{i}" for i in range(n)]})
    if tasks is not None:
        q["task"] = tasks
    c = np.tile([10.0, 1.0, 0.1], (n, 1)) if costs else None
    return RoutingData(q, pd.DataFrame({"name": ["a", "b", "c"]}), scores, c)


def test_paired_nauc_point_values_are_held_out_nauc():
    rng = np.random.default_rng(0)
    s = rng.random((60, 5)).round(1)
    s[rng.random(s.shape) < 0.2] = np.nan
    s[:, 0] = rng.random(60)                      # every query keeps an observed LLM
    c, pc = rng.random((60, 5)) * 3, rng.random((60, 5)) * 3
    p1, p2 = rng.random((60, 5)), rng.random((60, 5))
    r = paired_nauc(p1, p2, pc, s, c, n_boot=20, seed=3)
    assert r["router"] == pytest.approx(held_out_nauc(p1, pc, s, c))
    assert r["baseline"] == pytest.approx(held_out_nauc(p2, pc, s, c))
    assert r["diff"] == pytest.approx(r["router"] - r["baseline"]) and r["n"] == 60
    same = paired_nauc(p1, p1, pc, s, c, n_boot=20)
    assert same["diff"] == 0.0 and same["se"] == 0.0


def test_paired_nauc_se_matches_resampling_the_queries_by_hand():
    # predicted costs constant per LLM, so a resample's budget grid is the full set's and
    # each resample's difference is held_out_nauc on the resampled rows (a second
    # implementation); missing cells make the best single LLM change between resamples
    rng = np.random.default_rng(1)
    n = 40
    s = (rng.random((n, 4)) < [0.8, 0.6, 0.5, 0.3]).astype(float)
    s[rng.random(s.shape) < 0.25] = np.nan
    s[:, 1] = (rng.random(n) < 0.6).astype(float)
    c = rng.random((n, 4)) + [3.0, 1.0, 0.5, 0.1]
    pc = np.tile([3.5, 1.5, 1.0, 0.6], (n, 1))
    p1, p2 = s + rng.normal(0, 0.4, s.shape), rng.random((n, 4))
    p1, p2 = np.nan_to_num(p1, nan=0.5), p2
    got = paired_nauc(p1, p2, pc, s, c, n_boot=30, seed=7)
    counts = np.random.default_rng(7).multinomial(n, np.full(n, 1.0 / n), size=30)
    diffs = []
    for k in counts:
        idx = np.repeat(np.arange(n), k)
        diffs.append(held_out_nauc(p1[idx], pc[idx], s[idx], c[idx])
                     - held_out_nauc(p2[idx], pc[idx], s[idx], c[idx]))
    assert got["se"] == pytest.approx(np.std(diffs, ddof=1), rel=1e-9)
    assert got["se"] > 0


def test_paired_nauc_refuses_bad_input():
    s = np.ones((4, 2)); c = np.ones((4, 2))
    for bad in (1, 0, True, 2.5, 10**6, "200"):
        with pytest.raises(ValueError, match="n_boot"):
            paired_nauc(s, s, c, s, c, n_boot=bad)
    c2 = c.copy(); c2[0, 0] = np.nan
    with pytest.raises(ValueError, match="finite cost"):
        paired_nauc(s, s, c, s, c2)
    with pytest.raises(ValueError, match="no held-out query"):
        paired_nauc(s, s, c, np.full_like(s, np.nan), c)


def test_a_router_whose_curve_wins_is_kept_by_nauc_and_sent_back_by_mu_o():
    d = _data()
    mu = SafeFallbackRouter(Peek(), inner_folds=5, seed=0, verdict_metric="mu_o").fit(d)
    # mu_o: 0.95 against a's 1.0, d = -1 on 10 of 200 queries: beyond 1.645 SE -> back
    assert mu.fallback_["default"] == "best-single" and mu.fallback_["verdict_metric"] == "mu_o"
    assert "nauc" not in mu.fallback_["overall"]
    r = SafeFallbackRouter(Peek(), inner_folds=5, seed=0, verdict_metric="nauc").fit(d)
    fb = r.fallback_
    # the default, "auto", is nauc on data with costs: the same record
    auto = SafeFallbackRouter(Peek(), inner_folds=5, seed=0).fit(d).fallback_
    assert auto["verdict_metric"] == "nauc" and auto["overall"] == fb["overall"]
    o = fb["overall"]
    # by hand, budgets 0.1, 1, 10 (costs / 10):
    # router (0.01, .5), (.0415, .8), (.19, .95) + best single (1, .95):
    #   .0315 * .65 + .1485 * .875 + .81 * .95 = .9199125
    # best-single's means (a 1 > b .8 > c .5) with the router's costs:
    #   (.01, .5), (.1, .8), (1, 1) + (1, 1): .09 * .65 + .9 * .9 = .8685
    assert o["nauc"]["router"] == pytest.approx(0.9199125)
    assert o["nauc"]["baseline"] == pytest.approx(0.8685)
    assert o["nauc"]["diff"] == pytest.approx(0.0514125) and o["nauc"]["se"] > 0
    assert (fb["default"], o["mu_o_decision"], fb["verdict_metric"]) == \
        ("router", "best-single", "nauc")
    assert "nAUC router 0.9199 vs best-single 0.8685" in o["why"]
    # the top choice (no budget) is still checked by mu_o and goes to best-single's LLM
    assert fb["top"] == "best-single"
    pred = r.predict_scores(d)
    assert (pred.argmax(axis=1) == 0).all()
    own = r.router_.predict_scores(d)
    assert np.array_equal(pred[:, 1:], own[:, 1:])
    assert "nAUC" in fallback_summary(fb)


def test_a_router_whose_curve_loses_falls_back_under_nauc():
    r = SafeFallbackRouter(Peek(flip=True), inner_folds=5, seed=0, verdict_metric="nauc")
    fb = r.fit(_data()).fallback_
    assert fb["overall"]["nauc"]["diff"] < -1.645 * fb["overall"]["nauc"]["se"]
    assert fb["default"] == "best-single"


def test_tasks_depart_on_their_own_nauc_evidence():
    # task "good": the 200 queries above; task "bad": 40 or 100 more on which the router
    # reverses its predictions. With 40 the router still wins overall and "bad" departs to
    # best-single; with 100 the verdict is best-single and "good" departs to the router.
    class Mixed(Peek):
        def _predict_scores(self, data):
            rows = super()._predict_scores(data)
            bad = np.array([int(q[1:]) >= 200 for q in data.queries["query_id"]])
            rows[bad] = 1.0 - rows[bad]
            return rows

    for n_bad, default, departs in ((40, "router", "bad"), (100, "best-single", "good")):
        d = _data(200 + n_bad, tasks=["good"] * 200 + ["bad"] * n_bad)
        fb = SafeFallbackRouter(Mixed(), inner_folds=5, seed=0, verdict_metric="nauc",
                                min_task_queries=30).fit(d).fallback_
        m = fb["means"]
        assert fb["default"] == default
        assert fb["tasks"] == {"bad": "best-single", "good": "router"}
        assert [t for t in m if m[t]["departs"]] == [departs]
        # "good" is the 200 queries of the hand-computed case: the same nAUCs
        assert m["good"]["nauc"]["diff"] == pytest.approx(0.0514125)
        assert m["bad"]["nauc"]["diff"] < -1.645 * m["bad"]["nauc"]["se"]
        assert f"1 task(s) depart from it on their own evidence: {departs} ->" in \
            fallback_summary(fb)


def test_verdict_metric_auto_no_costs_and_bad_values():
    no_costs = _data(costs=False)
    r = SafeFallbackRouter(Peek(), inner_folds=5, verdict_metric="auto").fit(no_costs)
    assert r.fallback_["verdict_metric"] == "mu_o"
    assert SafeFallbackRouter(Peek(), inner_folds=5, verdict_metric="auto").fit(
        _data()).fallback_["verdict_metric"] == "nauc"

    calls = []

    class Counting(Peek):
        def _fit(self, train, val):
            calls.append(1)
            super()._fit(train, val)

    with pytest.raises(ValueError, match="needs a finite cost"):
        SafeFallbackRouter(Counting(), verdict_metric="nauc").fit(no_costs)
    for bad in ("aiq", None, 1, "__import__('os')"):
        with pytest.raises(ValueError, match="verdict_metric"):
            SafeFallbackRouter(Counting(), verdict_metric=bad).fit(_data())
    assert calls == []                               # refused before any fit
    # a router without cost predictions keeps the mu_o verdict, and says why
    fb = SafeFallbackRouter(Peek(no_costs=True), inner_folds=5,
                            verdict_metric="nauc").fit(_data()).fallback_
    assert fb["verdict_metric"] == "mu_o (the router predicts no costs)"
    assert fb["default"] == "best-single"


def test_nauc_verdict_exports_and_routes_the_same(tmp_path):
    from recsys_router.registry import make_router
    d = _data()
    r = SafeFallbackRouter(make_router("knn", k=5, encoder="hashing"), inner_folds=5,
                           verdict_metric="nauc").fit(d)
    assert r.fallback_["verdict_metric"] == "nauc" and "nauc" in r.fallback_["overall"]
    loaded = load_router(export_router(r, tmp_path / "fb", train_data=d)).router
    assert loaded.verdict_metric == "nauc"
    assert loaded.fallback_["overall"]["nauc"] == r.fallback_["overall"]["nauc"]
    assert np.array_equal(loaded.predict_scores(d), r.predict_scores(d))


def test_wrappers_cli_and_bench_pass_the_verdict_metric(tmp_path, capsys):
    import argparse

    from benchmarks.bench_quality import run_config
    from recsys_router.cli import main
    from recsys_router.evaluation.wrappers import wrap_router
    from recsys_router.registry import make_router
    knn = make_router("knn")
    assert wrap_router(knn, "knn").verdict_metric == "auto"
    tuned = wrap_router(knn, "knn", auto=2, auto_objective="mu_o", fallback_metric="nauc")
    assert type(tuned.router).__name__ == "AutoTunedRouter" and tuned.verdict_metric == "nauc"
    assert tuned.router.inner_folds == "auto"
    assert wrap_router(knn, "knn", auto=2, auto_folds=3).router.inner_folds == 3
    assert wrap_router(knn, "knn", fallback_metric="mu_o").verdict_metric == "mu_o"
    with pytest.raises(ValueError, match="verdict_metric"):
        wrap_router(knn, "knn", fallback_metric="os:system")
    ns = argparse.Namespace(seed=0, no_fallback=False, no_top_check=False, auto=0,
                            auto_objective="mu_o", fallback_metric="nauc", auto_folds="auto")
    assert run_config(ns, ["knn"], {}, "hashing", protocols=["orbit"], folds=2,
                      seed=0).fallback_metric == "nauc"
    with pytest.raises(SystemExit):
        main(["evaluate", "--data", str(tmp_path / "none.csv"), "--fallback-metric", "aiq",
              "--seed", "0"])
    assert "invalid choice" in capsys.readouterr().err
