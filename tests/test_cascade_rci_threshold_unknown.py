"""The cascade's paid costs reach ORBIT's RCI and RouteLLM's threshold decisions, and a
cascade query whose tried LLM has no known cost is left unpaid (NaN) like any router's.

The tiny case (as in test_cascade_paid_costs): LLM a costs 1 and is right on even queries
only, b costs 10 and is always right; the cascade (threshold 1) tries a, then b where a was
wrong: it pays 1 on even queries and 1 + 10 = 11 on odd ones.
"""

import numpy as np
import pandas as pd
import pytest

from recsys_router.data import RoutingData
from recsys_router.evaluation.runner import EvalConfig, evaluate
from recsys_router.metrics.orbit import rci
from recsys_router.models.baselines import BestSingleRouter
from recsys_router.models.baselines.cascade import CascadeRouter


def _data(n=40):
    s = np.column_stack([(np.arange(n) % 2 == 0).astype(float), np.ones(n)])
    c = np.tile([1.0, 10.0], (n, 1))
    split = np.where(np.arange(n) < n // 2, "train", "test")
    q = pd.DataFrame({"query_id": [f"q{i}" for i in range(n)], "split": split,
                      "text": [f"question {i} is {'even' if i % 2 == 0 else 'odd'}" for i in range(n)]})
    return RoutingData(q, ["a", "b"], s, c)


@pytest.fixture(scope="module")
def result():
    return evaluate(_data(), EvalConfig(routers=["cascade", "oracle", "best-single", "knn"],
                                        protocols=["orbit", "routellm"], split_column="split",
                                        fallback=False, encoder="hashing"), progress=False)


def _metric(res, protocol, router, metric):
    m = res.metrics
    return m[(m.protocol == protocol) & (m.router == router) & (m.metric == metric)
             & (m.fold == "0")]["value"].item()


def test_cascade_rci_counts_what_it_paid(result):
    # largest budget: even queries end on a (a best LLM, paid 1 = its cost); odd queries on
    # b, the only best LLM, but paid 11 > 10: b's cost alone would have bought that answer.
    # per query: 11 > cheapest best (10) on the 10 odd queries -> 0.5 (was 0.0);
    # ORBIT code: b is the dearest LLM but the only best (fine), paid 11 > 10 -> 0.5 (was 0.0)
    assert _metric(result, "orbit", "cascade", "rci_per_query") == 0.5
    assert _metric(result, "orbit", "cascade", "rci") == 0.5
    assert _metric(result, "orbit", "oracle", "rci") == 0.0


def test_rci_of_ordinary_routers_is_unchanged(result):
    """For routers paying their chosen LLM's cost, RCI from the decisions equals RCI from the
    chosen LLMs' costs (the computation before paid costs were read)."""
    dec = result.decisions[result.decisions.protocol == "orbit"].copy()
    dec["query_id"] = dec.query_id.astype(str)
    ref = dec[dec.router.astype(str).str.startswith("LLM:")]
    qids = ref[ref.llm == "a"].query_id.astype(str).tolist()
    S = np.column_stack([ref[ref.llm == x].set_index("query_id").loc[qids, "score"] for x in "ab"])
    C = np.column_stack([ref[ref.llm == x].set_index("query_id").loc[qids, "cost"] for x in "ab"])
    assert "knn" in set(dec.router.astype(str))
    for router in ("oracle", "best-single", "knn"):
        rows = dec[dec.router == router]
        last = rows[rows.setting_value == rows.setting_value.max()].set_index("query_id")
        ch = (last.loc[qids, "llm"].astype(str) == "b").to_numpy().astype(int)
        for variant, name in (("orbit_code", "rci"), ("per_query", "rci_per_query")):
            assert _metric(result, "orbit", router, name) == rci(S, C, ch, variant=variant)


def test_rci_paid_by_hand():
    s = np.array([[1., 1.], [0., 1.], [0., 1.]])
    c = np.array([[1., 10.], [1., 10.], [1., 10.]])
    ch = np.array([0, 1, 1])
    # default (paid = chosen cost): every query fine in both variants
    assert rci(s, c, ch) == 0.0 and rci(s, c, ch, variant="orbit_code") == 0.0
    # query 2 paid 11 for b's answer (a tried first): routed badly; an unknown paid cost is not
    paid = np.array([1.0, np.nan, 11.0])
    assert rci(s, c, ch, paid=paid) == pytest.approx(1 / 3)
    assert rci(s, c, ch, variant="orbit_code", paid=paid) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="one cost per query"):
        rci(s, c, ch, paid=np.ones(2))
    with pytest.raises(ValueError, match="finite and >= 0"):
        rci(s, c, ch, paid=np.array([1.0, -1.0, 1.0]))


def test_routellm_thresholds_pay_the_cascade_chain(result):
    """RouteLLM pair: strong b, weak a. The cascade's win score is +1 on odd queries (it ended
    on b), -1 on even ones (a); its thresholds give all-b, its own verdict, and all-a. Each
    decision pays the chain that gave the verdict (even 1, odd 11) plus the chosen LLM where
    the chain did not try it: all-b (1 + 10 + 11 * 1) / 2 = 11, own (1 + 11) / 2 = 6,
    all-a (1 + 11) / 2 = 6 (the chosen LLMs' costs gave 10, 5.5 and 1)."""
    dec = result.decisions
    rows = dec[(dec.protocol == "routellm") & (dec.router == "cascade")]
    got = {}
    for _, g in rows.groupby("setting_value"):
        got[tuple(sorted(set(g.llm.astype(str))))] = got.get(tuple(sorted(set(g.llm.astype(str)))),
                                                            []) + [g.cost.mean()]
    assert got[("b",)] == [11.0]
    assert got[("a",)] == [6.0]
    assert set(got[("a", "b")]) == {6.0}
    odd = rows.query_id.astype(str).str[1:].astype(int) % 2 == 1
    mixed = rows[rows.setting_value == 0.0]
    assert mixed.llm[odd].astype(str).unique().tolist() == ["b"]
    # ordinary routers still pay their chosen LLM's cost at each threshold
    bs = dec[(dec.protocol == "routellm") & (dec.router == "best-single")]
    assert (bs.cost == np.where(bs.llm.astype(str) == "b", 10.0, 1.0)).all()


def _unknown_data():
    # train: a right on even queries (chain a -> b); test: q20 a accepted with a's cost
    # unknown, q21 a rejected with a's cost unknown, q22 a rejected with b's cost unknown,
    # q23 a accepted with b's cost unknown (b never tried)
    n_train = 20
    s = np.vstack([np.column_stack([(np.arange(n_train) % 2 == 0), np.ones(n_train)]),
                   [[1, 1], [0, 1], [0, 1], [1, 1]]]).astype(float)
    c = np.tile([1.0, 10.0], (n_train + 4, 1))
    c[n_train, 0] = c[n_train + 1, 0] = c[n_train + 2, 1] = c[n_train + 3, 1] = np.nan
    q = pd.DataFrame({"query_id": [f"q{i}" for i in range(n_train + 4)],
                      "split": ["train"] * n_train + ["test"] * 4})
    return RoutingData(q, ["a", "b"], s, c)


def test_cascade_leaves_unknown_costs_unpaid():
    d = _unknown_data()
    r = CascadeRouter(threshold=1.0).fit(d.subset(np.arange(20)))
    test = d.subset(np.arange(20, 24))
    ch, paid = r.decide(test)
    # was the mean train cost charged: [1, 1 + 10, 1 + 10, 1]
    assert ch.tolist() == [0, 1, 1, 0]
    assert np.isnan(paid[:3]).all() and paid[3] == 1.0
    # the cap checks still use a's mean train cost (1): under budget 5, b (1 + 10) never fits
    ch5, paid5 = r.decide(test, budget=5.0)
    assert ch5.tolist() == [0, 0, 0, 0] and np.isnan(paid5[:2]).all() and paid5[2:].tolist() == [1.0, 1.0]
    # the same rule as an ordinary router's: an unknown chosen cell pays NaN
    bs_ch, bs_paid = BestSingleRouter().fit(d.subset(np.arange(20))).decide(test)
    assert bs_ch.tolist() == [1] * 4 and np.isnan(bs_paid[2:]).all() and bs_paid[:2].tolist() == [10.0] * 2


def test_evaluate_leaves_the_cascades_unknown_costs_out():
    res = evaluate(_unknown_data(), EvalConfig(routers=["cascade"], protocols=["routereval"],
                                               split_column="split", fallback=False),
                   progress=False)
    # only q23 has a known paid cost (1.0); q20-q22 are left out of the mean
    assert _metric(res, "routereval", "cascade", "mean_cost") == 1.0


def test_calibration_still_charges_the_cascade_its_estimates(tmp_path):
    """Calibration charges an unknown cost its estimate, for the cascade as for every router."""
    from recsys_router.export.artifact import export_router
    from recsys_router.export.calibrate import calibrate_artifact
    d = _unknown_data()
    train, test = d.subset(np.arange(20)), d.subset(np.arange(20, 24))
    export_router(CascadeRouter(threshold=1.0).fit(train), tmp_path / "cas", train_data=train)
    res = calibrate_artifact(tmp_path / "cas", test, policy="budget", target_cost=100.0)
    # no cap: paid with a's estimate 1 where unknown: q20 1, q21 11, q22 1 + 10 (b's
    # estimate), q23 1 -> mean 6
    assert res["achieved"] == pytest.approx(6.0) and res["cost_source"] == "mixed"
