"""RouterEval protocol on a 300-LLM pool: every metric equals a plain recomputation.

The per-LLM reference metrics are computed in one pass (``column_means``) and the candidate
groups by an incremental search; here each number is recomputed from the test scores and the
routers' choices with plain loops (one LLM, one query at a time), and the staged pipeline of
``benchmarks/bench_scale.py`` is checked to give ``evaluate``'s metrics.
"""

from __future__ import annotations

import importlib.util
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.evaluation import EvalConfig, evaluate
from recsys_router.evaluation.protocols.routereval import column_means
from recsys_router.evaluation.splits import make_folds, resolve_pools
from recsys_router.metrics.routereval import mu_o

ROOT = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_scale", ROOT / "benchmarks" / "bench_scale.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def run():
    data = make_synthetic(150, 300, 6, seed=4, specialisation=1.0)
    cfg = EvalConfig(["best-single", "oracle", "random"], protocols=["routereval"],
                     pools=[3, 5, 100, "all"], seed=2)
    return data, cfg, evaluate(data, cfg, progress=False)


def _value(metrics, pool, group, router, metric):
    sel = metrics[(metrics["pool"] == pool) & (metrics["group"] == group)
                  & (metrics["router"] == router) & (metrics["metric"] == metric)]
    assert len(sel) == 1, (pool, group, router, metric)
    return float(sel["value"].iloc[0])


def test_metrics_match_plain_loops_on_300_llms(run):
    data, cfg, res = run
    fold = make_folds(data, seed=cfg.seed)[0]
    test = fold.test
    pools = resolve_pools(fold.train, cfg.pools, seed=cfg.seed, notes=[])
    # RouterEval's region max(300 // 5, 100) = 100 fits the qualifying LLMs: all three groups
    assert [(p, g) for p, g, _ in pools if p == "100"] == \
        [("100", "all-strong"), ("100", "all-weak"), ("100", "strong-to-weak")]
    dec = res.decisions
    for pool, group, names in pools:
        S = test.scores[:, test.llm_index(names)].astype(np.float64)
        n, m = S.shape
        means = [sum(S[i, j] for i in range(n)) / n for j in range(m)]
        for j, name in enumerate(names):
            assert _value(res.metrics, pool, group, "LLM:" + name, "mu_o") == pytest.approx(means[j], abs=1e-12)
        oracle = sum(max(S[i]) for i in range(n)) / n
        assert _value(res.metrics, pool, group, "LLM:oracle-bound", "mu_o") == pytest.approx(oracle)
        sub = dec[(dec["pool"] == pool) & (dec["group"] == group)]
        for router in ("best-single", "oracle", "random"):
            rows = sub[sub["router"] == router].set_index("query_id").loc[test.query_ids]
            picks = [names.index(x) for x in rows["llm"]]
            got = sum(S[i, picks[i]] for i in range(n)) / n
            counts = Counter(picks)
            ent = -sum(c / n * math.log2(c / n) for c in counts.values())
            assert _value(res.metrics, pool, group, router, "mu_o") == pytest.approx(got)
            assert _value(res.metrics, pool, group, router, "v_b") == pytest.approx(got / max(means))
            assert _value(res.metrics, pool, group, router, "e_p") == pytest.approx(ent, abs=1e-12)


def test_column_means_equal_per_llm_mu_o_bit_for_bit():
    rng = np.random.default_rng(0)
    v = rng.random((501, 37)) * 1e-3
    v[rng.random(v.shape) < 0.1] = np.nan
    v[:, 5] = np.nan
    want = [mu_o(v, np.full(501, j)) for j in range(37)]
    np.testing.assert_array_equal(column_means(v), np.array(want))
    with pytest.raises(ValueError, match="infinite"):
        column_means(np.array([[1.0, np.inf]]))


def test_bench_stages_give_evaluates_metrics(run):
    data, cfg, res = run
    bench = _bench()
    _, metrics, _ = bench.staged_evaluate(data, cfg, bench.Stages(verbose=False))
    key = ["pool", "group", "router", "metric"]
    a = res.metrics.sort_values(key).reset_index(drop=True)
    b = metrics.sort_values(key).reset_index(drop=True)
    assert a[key].equals(b[key])
    np.testing.assert_array_equal(a["value"].to_numpy(), b["value"].to_numpy())


def test_sized_pool_too_large_for_top_and_bottom_groups_is_an_error_without_notes():
    from recsys_router.data import RoutingData  # noqa: PLC0415
    rng = np.random.default_rng(0)
    s = (rng.random((60, 20)) < np.linspace(0.3, 0.7, 20)).astype(float)
    s = np.hstack([s, np.ones((60, 100))])        # 120 LLMs, the 100 perfect ones never qualify
    train = RoutingData([f"q{i}" for i in range(60)], [f"l{j}" for j in range(120)], s)
    # region max(120 // 5, 3) = 24 > the 20 qualifying LLMs
    with pytest.raises(Exception, match="= 24 LLMs is larger than the 20 qualifying LLMs"):
        resolve_pools(train, [3])
    notes: list[str] = []
    got = resolve_pools(train, [3], notes=notes)
    assert [g for _, g, _ in got] == ["strong-to-weak"] and len(notes) == 1
    assert notes[0].startswith("pool 3: group(s) all-strong, all-weak skipped: ")
    # oracle-best regions (max(ceil(0.2 x 20), 3) = 4 of the qualifying LLMs) always fit
    notes = []
    got = resolve_pools(train, [3], notes=notes, method="oracle-best")
    assert [g for _, g, _ in got] == ["all-strong", "all-weak", "strong-to-weak"] and not notes
    small = make_synthetic(60, 30, 3, seed=0)     # 30 LLMs, m = 10: formed by both methods
    for method in ("routereval", "oracle-best"):
        assert len(resolve_pools(small, [10], method=method)) == 3


def test_knn_chunked_neighbour_blocks_match_a_plain_loop(monkeypatch):
    from recsys_router.models.baselines import neighbours  # noqa: PLC0415
    data = make_synthetic(120, 40, 4, seed=3)
    s = data.scores.copy()
    s[np.random.default_rng(0).random(s.shape) < 0.2] = np.nan
    s[:, 7] = np.nan
    data.scores[:] = s
    whole = neighbours.KNNRouter(seed=1).fit(data)
    monkeypatch.setattr(neighbours, "_rows_per_chunk", lambda k, n, cells=0: 1)
    chunked = neighbours.KNNRouter(seed=1).fit(data)
    assert chunked.k_ == whole.k_ and chunked.k_scores_ == whole.k_scores_
    got = chunked.predict_scores(data)
    np.testing.assert_array_equal(got, whole.predict_scores(data))
    idx = chunked.neighbours(data)
    y = chunked.y_train_
    for i in range(data.n_queries):            # plain loop: mean observed neighbour score
        for j in range(data.n_llms):
            vals = [y[t, j] for t in idx[i] if not np.isnan(y[t, j])]
            want = sum(vals) / len(vals) if vals else chunked.llm_means_[j]
            assert got[i, j] == pytest.approx(want, abs=1e-12)
