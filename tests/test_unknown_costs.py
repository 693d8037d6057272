"""An LLM with no recorded cost is never predicted cheaper than an LLM whose cost is known:
it gets the dearest known cost (so a small budget or ``wtp = 0`` does not hand it every
query), and predictions stay finite; without any known cost they stay 0."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recsys_router.datamodules._datasets import QueryListDataset
from recsys_router.data import RoutingData
from recsys_router.models.cost_aware import CostAwareRouter
from recsys_router.policies import fill_unknown_costs
from recsys_router.registry import make_router

NAN = np.nan
# three LLMs on four queries; "c" is the best and has no recorded cost
SCORES = [[0.2, 0.5, 0.9], [0.4, 0.3, 0.8], [0.1, 0.6, 0.7], [0.3, 0.2, 0.9]]
COSTS = [[1.0, 3.0, NAN], [3.0, 5.0, NAN], [1.0, 3.0, NAN], [3.0, 5.0, NAN]]


def _data(costs=COSTS) -> RoutingData:
    queries = pd.DataFrame({"query_id": [f"q{i}" for i in range(4)],
                            "text": [f"q{i} text" for i in range(4)]})
    return RoutingData(queries, ["a", "b", "c"],
                       np.array(SCORES, np.float32), np.array(costs, np.float32))


def test_fill_unknown_costs_by_hand():
    assert fill_unknown_costs(np.array([2.0, NAN, 4.0, NAN])).tolist() == [2.0, 4.0, 4.0, 4.0]
    rows = fill_unknown_costs(np.array([[1.0, NAN], [NAN, NAN]]))
    assert rows.tolist() == [[1.0, 1.0], [0.0, 0.0]]          # no known cost: 0, as before
    # a column declared unknown is filled whatever it holds
    assert fill_unknown_costs(np.array([[1.0, 9.0, 2.0]]),
                              np.array([True, False, True])).tolist() == [[1.0, 2.0, 2.0]]


@pytest.mark.parametrize("name", ["best-single", "knn", "linearr"])
def test_an_unpriced_llm_costs_the_dearest_known_mean(name):
    d = _data()
    params = {"k": 2, "encoder": "hashing"} if name == "knn" else (
        {"encoder": "hashing"} if name == "linearr" else {})
    r = make_router(name, **params).fit(d)
    # by hand: mean costs a = (1+3+1+3)/4 = 2, b = (3+5+3+5)/4 = 4, c unknown -> 4
    np.testing.assert_allclose(r.predict_costs(d), np.tile([2.0, 4.0, 4.0], (4, 1)))
    assert set(r.route(d, wtp=0.0)) == {"a"}          # the cheapest known LLM
    assert set(r.route(d, budget=2.5)) == {"a"}       # only a fits; c is not free
    assert np.isnan(r.llm_mean_costs()[2])            # reported as unknown, not as a price


def test_without_any_known_cost_predictions_stay_zero():
    r = make_router("best-single").fit(_data(np.full((4, 3), NAN)))
    assert r.predict_costs(_data()).tolist() == [[0.0] * 3] * 4


def test_an_added_llm_dearer_than_every_fitted_one_prices_the_unknown_one():
    d = _data()
    r = make_router("best-single").fit(d)
    r.add_llm("d", {"q0 text": 0.5, "q1 text": 0.5}, {"q0 text": 7.0, "q1 text": 9.0})
    # a 2, b 4, c unknown, d = mean probe cost 8: c gets the dearest known cost, 8
    np.testing.assert_allclose(r.predict_costs(r_data := _with_d(d))[0], [2.0, 4.0, 8.0, 8.0])
    assert np.isnan(r.llm_mean_costs()[2]) and r.llm_mean_costs()[3] == 8.0
    assert "c" not in set(r.route(r_data, budget=5.0))


def _with_d(d: RoutingData) -> RoutingData:
    col = np.full((d.n_queries, 1), NAN, np.float32)
    return RoutingData(d.queries, d.llm_names + ["d"], np.hstack([d.scores, col]),
                       np.hstack([d.costs, col]))


def test_cost_aware_ridge_prices_an_unpriced_llm_at_the_dearest_prediction():
    d = _data()
    r = CostAwareRouter("best-single", penalty=0.0, cost_model="ridge", encoder="hashing").fit(d)
    c = r.predict_costs(d)
    assert np.isfinite(c).all()
    np.testing.assert_allclose(c[:, 2], c[:, :2].max(axis=1))
    mean = CostAwareRouter("best-single", penalty=0.0).fit(d)
    np.testing.assert_allclose(mean.predict_costs(d)[0], [2.0, 4.0, 4.0])


def test_the_training_target_of_an_unpriced_cell_is_not_free():
    ds = QueryListDataset(np.zeros((4, 2), np.float32), np.array(SCORES, np.float32),
                          np.zeros((4, 3), np.float32), np.array(COSTS, np.float32))
    assert ds.arrays["cost"][:, 2].tolist() == [3.0, 5.0, 3.0, 5.0]


def test_orbit_leaves_a_budget_that_paid_no_known_cost_off_the_front():
    """The best LLM's costs all unknown: a budget at which every query takes it paid no known
    cost (a NaN point). The front once dropped such points silently inside ``pareto_front``;
    when that began refusing them, ``evaluate --protocol orbit`` stopped on this data."""
    from recsys_router import EvalConfig, evaluate
    from recsys_router.datasets.synthetic import make_synthetic
    d = make_synthetic(120, 3, 2, seed=0)
    c = d.costs.copy()
    c[:, int(np.nanargmax(np.nanmean(d.scores, axis=0)))] = np.nan
    res = evaluate(RoutingData(d.queries, d.llms, d.scores, c), EvalConfig(
        routers=["best-single", "oracle"], protocols=["orbit"], fallback=False), progress=False)
    cu = res.curves
    nan_points = 0
    for router in ("best-single", "oracle"):
        pts = cu[(cu.router == router) & (cu.curve == "budget")][["x", "y"]].to_numpy()
        front = cu[(cu.router == router) & (cu.curve == "pareto")][["x", "y"]].to_numpy()
        known = pts[np.isfinite(pts).all(axis=1)]
        nan_points += len(pts) - len(known)
        want, best = [], -np.inf                            # the front, by a plain loop
        for x, y in sorted(map(tuple, known), key=lambda p: p[0]):
            if y > best:
                want.append((x, y))
                best = y
        assert [tuple(p) for p in front] == want
    assert nan_points > 0                                   # the case this test is about


def test_routerbench_leaves_points_of_unknown_cost_off_the_hulls():
    """The same data stopped the RouterBench protocol ('points row 46 is [nan, 0.75]'): a
    setting that paid no known cost, and the LLM with no known cost, are left off the hulls."""
    from recsys_router import EvalConfig, evaluate
    from recsys_router.datasets.synthetic import make_synthetic
    from recsys_router.metrics import routerbench as rb
    d = make_synthetic(120, 3, 2, seed=0)
    c = d.costs.copy()
    c[:, int(np.nanargmax(np.nanmean(d.scores, axis=0)))] = np.nan
    res = evaluate(RoutingData(d.queries, d.llms, d.scores, c), EvalConfig(
        routers=["best-single", "oracle"], protocols=["routerbench"], fallback=False),
        progress=False)
    cu, m = res.curves, res.metrics
    nan_points = 0
    for router in ("best-single", "oracle"):
        pts = cu[(cu.router == router) & (cu.curve == "points")][["x", "y"]].to_numpy()
        hull = cu[(cu.router == router) & (cu.curve == "ndch")][["x", "y"]].to_numpy()
        nan_points += int(np.isnan(pts).any(axis=1).sum())
        np.testing.assert_array_equal(hull, rb.ndch(pts[np.isfinite(pts).all(axis=1)]))
        assert np.isfinite(m[(m.router == router) & (m.metric == "aiq")]["value"]).all()
    assert nan_points > 0                                   # the case this test is about
    llm = cu[cu.router.str.startswith("LLM:")][["x", "y"]].to_numpy()
    assert np.isnan(llm).any()
    zero = cu[(cu.router == "zero (LLM hull)") & (cu.curve == "ndch")][["x", "y"]].to_numpy()
    np.testing.assert_array_equal(zero, rb.ndch(llm[np.isfinite(llm).all(axis=1)]))
