"""evaluate() charges the cascade for every LLM it tried (Router.decide), not only the last.

The tiny case: LLM a costs 1 and is right on even queries only, b costs 10 and is always
right. The cascade (threshold 1: a right answer is accepted) tries a, then b where a was
wrong: it pays 1 on even queries and 1 + 10 = 11 on odd ones, 6.0 on average, where charging
only the LLM used would give 0.5 * 1 + 0.5 * 10 = 5.5.
"""

import numpy as np
import pandas as pd
import pytest

from recsys_router.data import RoutingData
from recsys_router.evaluation.runner import EvalConfig, evaluate
from recsys_router.models.baselines import BestSingleRouter
from recsys_router.models.baselines.cascade import CascadeRouter


def _data(n=40):
    s = np.column_stack([(np.arange(n) % 2 == 0).astype(float), np.ones(n)])
    c = np.tile([1.0, 10.0], (n, 1))
    split = np.where(np.arange(n) < n // 2, "train", "test")
    q = pd.DataFrame({"query_id": [f"q{i}" for i in range(n)], "split": split})
    return RoutingData(q, ["a", "b"], s, c)


@pytest.fixture(scope="module")
def result():
    return evaluate(_data(), EvalConfig(routers=["cascade", "oracle", "best-single"],
                                        protocols=["routereval", "routerbench", "orbit"],
                                        split_column="split", fallback=False), progress=False)


def _metric(res, protocol, router, metric):
    m = res.metrics
    return m[(m.protocol == protocol) & (m.router == router) & (m.metric == metric)
             & (m.fold == "0")]["value"].item()


def test_cascade_unconstrained_decisions_pay_every_llm_tried(result):
    dec = result.decisions
    rows = dec[(dec.router == "cascade") & (dec.protocol == "routereval")]
    odd = rows.query_id.astype(str).str[1:].astype(int) % 2 == 1
    assert rows.cost[odd].tolist() == [11.0] * 10 and rows.cost[~odd].tolist() == [1.0] * 10
    assert _metric(result, "routereval", "cascade", "mean_cost") == pytest.approx(6.0)
    assert _metric(result, "routerbench", "cascade", "cost_at_max_quality") == pytest.approx(6.0)


def test_cascade_budget_sweep_is_its_own_cost_cap(result):
    cu = result.curves
    pts = cu[(cu.protocol == "orbit") & (cu.router == "cascade") & (cu.curve == "budget")]
    got = sorted(zip(pts.setting_value, pts.x, pts.y))
    # predicted cost of ending on a: 1, on b: 1 + 10; cap 1 tries a alone, cap 11 a then b
    assert got == [(1.0, 1.0, 0.5), (11.0, 6.0, 1.0)]
    assert _metric(result, "orbit", "cascade", "cost_at_max_budget") == pytest.approx(6.0)


def test_ordinary_routers_pay_the_chosen_llms_cost(result):
    # oracle: a on even queries (cost 1), b on odd (10); best-single: b everywhere
    assert _metric(result, "routereval", "oracle", "mean_cost") == pytest.approx(5.5)
    assert _metric(result, "orbit", "oracle", "cost_at_max_budget") == pytest.approx(5.5)
    assert _metric(result, "routereval", "best-single", "mean_cost") == pytest.approx(10.0)
    assert _metric(result, "routerbench", "best-single", "cost_at_max_quality") == pytest.approx(10.0)


def test_decide_default_and_cascade():
    d = _data()
    ch, paid = BestSingleRouter().fit(d).decide(d)
    assert ch.tolist() == [1] * 40 and paid.tolist() == [10.0] * 40
    r = CascadeRouter(threshold=1.0).fit(d)
    ch, paid = r.decide(d)
    assert paid.tolist() == [1.0, 11.0] * 20 and ch.tolist() == [0, 1] * 20
    assert r.decide(d, budget=5.0)[1].tolist() == [1.0] * 40       # b never fits under cap 5
    assert r.predict_costs(d)[0].tolist() == [1.0, 11.0]
    # wtp: lambda 20 is worth the cascade (predicted 11 vs 1), lambda 5 is not: a alone
    assert r.decide(d, wtp=20.0)[1].tolist() == [1.0, 11.0] * 20
    assert r.decide(d, wtp=5.0)[0].tolist() == [0] * 40


def test_cascade_skips_llms_a_sparse_test_query_lacks():
    """--missing mask (the default): an LLM without a result on a test query is not on its
    chain, so the cascade never ends on it (it did, scoring NaN and dropping out of mu_o, so
    it beat the oracle) and does not pay for it."""
    n_train, n_test = 20, 10
    s = np.zeros((n_train + n_test, 3))
    s[:n_train] = [[0, 0, 1]] * n_train           # train: chain a(1) -> b(3) -> c(10)
    s[n_train:n_train + 5] = [1, 1, 1]            # q20..q24: a accepted
    s[n_train + 5:] = [0, 0, np.nan]              # q25..q29: a, b rejected, c never run
    c = np.tile([1.0, 3.0, 10.0], (n_train + n_test, 1))
    q = pd.DataFrame({"query_id": [f"q{i}" for i in range(n_train + n_test)],
                      "split": ["train"] * n_train + ["test"] * n_test})
    res = evaluate(RoutingData(q, ["a", "b", "c"], s, c),
                   EvalConfig(routers=["cascade", "oracle"], protocols=["routereval"],
                              split_column="split", fallback=False), progress=False)
    dec = res.decisions[(res.decisions.router == "cascade")]
    late = dec.query_id.astype(str).str[1:].astype(int) >= n_train + 5
    assert dec.llm[late].astype(str).tolist() == ["b"] * 5   # ends on b, the last it has
    assert dec.cost[late].tolist() == [4.0] * 5               # a + b, nothing for c
    assert dec.score.notna().all()
    assert _metric(res, "routereval", "cascade", "mu_o") == pytest.approx(0.5)
    assert _metric(res, "routereval", "oracle", "mu_o") == pytest.approx(0.5)


def test_cascade_sweeps_and_calibration_reach_its_true_chain_totals(tmp_path):
    """Budget grids and calibration values come from each query's true running chain totals
    (they came from mean-cost totals: true totals above them were never swept, and a wtp cap
    of wtp * threshold beyond the one-hot breakpoints was never tried)."""
    from recsys_router.export.artifact import export_router
    from recsys_router.export.calibrate import calibrate_artifact
    n = 40
    s = np.column_stack([(np.arange(n) % 2 == 0).astype(float), np.ones(n)])
    c = np.column_stack([np.ones(n), np.where(np.arange(n) % 4 == 1, 30.0, 10.0)])
    d = RoutingData([f"q{i}" for i in range(n)], ["a", "b"], s, c)
    r = CascadeRouter(threshold=0.25).fit(d)
    # predicted costs: a's cost, then a + b's true cost on each query
    np.testing.assert_array_equal(r.predict_costs(d)[:, 1], 1.0 + c[:, 1])
    assert r.policy_values(d, "budget").tolist() == [1.0, 11.0, 31.0]
    # odd queries pay 1 + b: 10 of them 11, 10 of them 31 -> mean (20 + 110 + 310) / 40 = 11.0
    export_router(r, tmp_path / "cas", train_data=d)
    res = calibrate_artifact(tmp_path / "cas", d, policy="wtp", target_cost=11.0)
    assert res["achieved"] == pytest.approx(11.0)
    assert r.decide(d, wtp=res["value"])[1].mean() == pytest.approx(11.0)
    bud = calibrate_artifact(tmp_path / "cas", d, policy="budget", target_cost=11.0)
    assert bud["value"] == pytest.approx(31.0) and bud["achieved"] == pytest.approx(11.0)


def test_cascade_without_any_result_pays_nothing_known():
    """A query on which no candidate has a result gets no paid decision (NaN), not a free one."""
    d = RoutingData(["q1", "q2"], ["a", "b"], [[np.nan, np.nan], [0.0, 1.0]], [[1.0, 10.0]] * 2)
    r = CascadeRouter(threshold=1.0).fit(d)
    paid = r.decide(d)[1]
    assert np.isnan(paid[0]) and paid[1] == 11.0
    assert np.isnan(r.decide(d, candidates=["a"])[1][0])
    # a huge wtp with a threshold <= 0: a cap of 0 (first LLM only), not a NaN cap (wtp = inf,
    # which gave inf * 0, is refused as by every router)
    r0 = CascadeRouter(threshold=0.0).fit(d)
    assert r0.decide(d, wtp=1e300)[1][1] == 1.0


def test_routerbench_protocol_reports_routerbench_codes_aiq(result):
    """README promised ``aiq_code`` (RouterBench's own formula) and the protocol never wrote it.
    By hand: every hull starts at LLM a's (1, 0.5) (wtp near 0 takes the cheapest LLM) and ends
    at its router's best point; x_max = 10 (LLM b, the dearest point); each hull is extended
    to (10, its last quality) and its area divided by 10. oracle to (5.5, 1):
    (4.5 * 0.75 + 4.5) / 10; cascade to (6, 1): (5 * 0.75 + 4) / 10; best-single and the
    LLMs' hull to (10, 1): 9 * 0.75 / 10."""
    for router, want in (("oracle", 0.7875), ("cascade", 0.775), ("best-single", 0.675),
                         ("zero (LLM hull)", 0.675)):
        assert _metric(result, "routerbench", router, "aiq_code") == pytest.approx(want)


def test_running_costs_leave_out_llms_the_chain_skips():
    """Review CAL r3: the running totals summed every LLM of the chain, also one the chain
    skips on a query (no result there), so the ORBIT budget grid and ``policy_values`` were
    [1, 3, 7] and never tried cap 5, where the decisions differ. Chain a (1), b (2), c (4),
    by hand: q0 skips b, so its chain pays 1 then 1 + 4 = 5; q1 pays 1, 3, 7; q2 skips a, so
    it pays 2 then 6 (a holds 0, nothing paid when the chain passes it); q3 has no result at
    all and keeps the full chain's totals. At cap 5, q0 ends on c (5) and q1 on b (3)."""
    from recsys_router.metrics.orbit import budget_grid
    names = ["a", "b", "c"]
    tr = RoutingData(["t0", "t1"], names, [[0., 0., 1.]] * 2, [[1., 2., 4.]] * 2)
    r = CascadeRouter(threshold=1.0).fit(tr)
    nan = np.nan
    d = RoutingData(["q0", "q1", "q2", "q3"], names,
                    [[0., nan, 1.], [0., 0., 1.], [nan, 0., 1.], [nan, nan, nan]],
                    [[1., 2., 4.]] * 4)
    assert r.predict_costs(d).tolist() == [[1., 1., 5.], [1., 3., 7.], [0., 2., 6.],
                                           [1., 3., 7.]]
    two = d.subset(["q0", "q1"])
    assert r.policy_values(two, "budget").tolist() == [1., 3., 5., 7.]
    assert budget_grid(r.predict_costs(two)).tolist() == [1., 3., 5., 7.]
    ch, paid = r.decide(two, budget=5.0)
    assert ch.tolist() == [2, 1] and paid.tolist() == [5., 3.]
