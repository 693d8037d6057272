"""``evaluate`` with RouterEval's sized candidate pools: a pool size the data cannot form is
refused before any router is fitted, and a safe-fallback router's result on a sized pool is
the one it would have fitted on the pool's LLMs alone."""

from __future__ import annotations

import numpy as np
import pytest

from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.errors import DataValidationError
from recsys_router.evaluation import EvalConfig, evaluate
from recsys_router.evaluation import runner


@pytest.fixture
def no_fit(monkeypatch):
    """Fails the test if any fold's routers are fitted."""
    fitted = []

    def refuse(fold, *a, **k):
        fitted.append(fold.fold)
        raise AssertionError(f"fold {fold.fold}'s routers fitted before the pools were checked")
    monkeypatch.setattr(runner, "_fit_fold", refuse)
    return fitted


def test_pool_larger_than_the_data_is_refused_before_any_fit(no_fit):
    d = make_synthetic(120, 30, seed=0)
    with pytest.raises(ValueError, match="pool size 50 exceeds the 30 LLMs"):
        evaluate(d, EvalConfig(["best-single", "linearr"], protocols=["routereval"],
                               pools=[3, 50, "all"], seed=0), progress=False)
    assert no_fit == []


def test_pool_larger_than_the_qualifying_llms_is_refused_before_any_fit(no_fit):
    d = make_synthetic(120, 30, seed=0)
    d.scores[:, 0] = 0.0        # mean 0: outside (0.1, 0.9], so 29 of the 30 LLMs qualify
    with pytest.raises(DataValidationError, match=r"only 29 of 30 LLMs .* m=30"):
        evaluate(d, EvalConfig(["best-single", "linearr"], protocols=["routereval"],
                               pools=[3, 30, "all"], seed=0), progress=False)
    assert no_fit == []


def _group(result, group):
    """The candidate LLMs of ``group`` in ``result`` (its reference LLM rows)."""
    dec = result.decisions
    rows = dec[dec.router.str.startswith("LLM:") & (dec.group == group)]
    return sorted(set(rows.router.str[4:]))


def _mu_o(result, router, group=None):
    m = result.metrics.query("router == @router and metric == 'mu_o'")
    if group is not None:
        m = m[m.group == group]
    return float(m["value"].iloc[0])


@pytest.mark.parametrize("m", [3, 5])
def test_fallback_on_a_sized_pool_equals_a_fit_on_the_pool_alone(m):
    # the reviewer's case: 30 LLMs, the strong-to-weak groups of 3 and 5; linearr's per-LLM
    # fit does not depend on the other LLMs, so cutting the data to the group and fitting
    # there must give the same choices, the safe fallback's verdict included (on main the
    # verdict was taken over all 30 LLMs: 0.9500 against 0.9750 for m=3, 1.0 against 0.975
    # for m=5)
    d = make_synthetic(400, 30, seed=0)
    group = "strong-to-weak"
    sized = evaluate(d, EvalConfig(["linearr"], protocols=["routereval"], pools=[m],
                                   groups=[group], seed=0), progress=False)
    names = _group(sized, group)
    assert len(names) == m
    alone = evaluate(d.subset(llms=names), EvalConfig(["linearr"], protocols=["routereval"],
                                                      pools=["all"], seed=0), progress=False)
    assert _mu_o(sized, "linearr", group) == _mu_o(alone, "linearr")
    a = sized.decisions.query("router == 'linearr'").sort_values("query_id")
    b = alone.decisions.query("router == 'linearr'").sort_values("query_id")
    assert a.query_id.tolist() == b.query_id.tolist()
    assert a.llm.tolist() == b.llm.tolist()
    assert any("safe fallback on pool" in n for n in sized.notes)


def test_pool_record_and_scores_equal_the_fallback_fitted_on_the_pool():
    from recsys_router.fallback import SafeFallbackRouter
    from recsys_router.fallback_pools import PoolPredictions, pool_record
    from recsys_router.registry import make_router

    d = make_synthetic(400, 30, seed=0)
    train, test = d.subset(np.arange(300)), d.subset(np.arange(300, 400))
    full = SafeFallbackRouter(make_router("linearr")).keep_inner_predictions().fit(train)
    pools = PoolPredictions(full, test)
    differs = 0
    for cols in ([2, 4, 17], [0, 10, 13, 20, 28], [29, 3]):
        own = SafeFallbackRouter(make_router("linearr")).fit(train.subset(llms=cols))
        differs += own.fallback_["tasks"] != full.fallback_["tasks"]
        rec = pool_record(full, cols)
        for key in ("default", "tasks", "top", "verdict_metric"):
            assert rec.get(key) == own.fallback_.get(key), key
        scores, _, rec2 = pools(cols)
        assert rec2["tasks"] == own.fallback_["tasks"]
        expect = own.predict_scores(test.subset(llms=cols))
        np.testing.assert_allclose(scores, expect, rtol=1e-9, atol=1e-9)
        assert (scores.argmax(axis=1) == expect.argmax(axis=1)).all()
    assert differs      # the all-LLM verdict is not the pools' (the case is a real test)
    # the whole pool is the fit's own record, and its served scores are predict_scores'
    everything = list(range(30))
    assert pool_record(full, everything) is full.fallback_
    np.testing.assert_array_equal(pools(everything)[0], full.predict_scores(test))


def test_pool_record_needs_the_kept_predictions():
    from recsys_router.fallback import SafeFallbackRouter
    from recsys_router.fallback_pools import pool_record
    from recsys_router.registry import make_router

    d = make_synthetic(200, 6, seed=0)
    r = SafeFallbackRouter(make_router("linearr")).fit(d)
    with pytest.raises(ValueError, match="keep_inner_predictions"):
        pool_record(r, [0, 1, 2])
