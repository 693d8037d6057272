"""The wrappers (safe fallback, ``--auto``) follow their pool after ``add_llm`` and
``remove_llm``: predicted costs have one column per pool LLM, so routing with a cost policy
works, fitted, and served from an exported artifact."""

import numpy as np
import pytest

from recsys_router.data import RoutingData
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.export import export_router, load_router
from recsys_router.fallback import SafeFallbackRouter
from recsys_router.registry import make_router
from recsys_router.tuning.inner import AutoTunedRouter

NEW_COST = 1e-7          # far below every synthetic LLM's mean cost


@pytest.fixture(scope="module")
def parts():
    p = make_synthetic(200, 4, 3, seed=1).split((0.8, 0.2), seed=0)
    return p["train"], p["test"]


def _wrappers():
    return {"fallback": lambda: SafeFallbackRouter(make_router("knn", k=5, encoder="hashing")),
            "auto": lambda: AutoTunedRouter("knn", {"k": 5, "encoder": "hashing"}, n_trials=1)}


def _with_new(data: RoutingData, name: str) -> RoutingData:
    col = np.ones((data.n_queries, 1), np.float32)
    return RoutingData(data.queries, data.llm_names + [name], np.hstack([data.scores, col]),
                       np.hstack([data.costs, col * NEW_COST]))


def _add_new(router, train):
    texts = [str(t) for t in train.texts[:20]]
    return router.add_llm("new", {t: 1.0 for t in texts}, {t: NEW_COST for t in texts})


@pytest.mark.parametrize("which", ["fallback", "auto"])
def test_added_llm_gets_its_cost_column_and_routes(which, parts):
    train, test = parts
    r = _add_new(_wrappers()[which]().fit(train), train)
    t2 = _with_new(test, "new")
    costs = r.predict_costs(t2)
    # by hand: each fitted LLM's mean training cost, then the new LLM's mean probe cost
    want = np.append(np.nanmean(train.costs.astype(np.float64), axis=0), NEW_COST)
    assert costs.shape == (test.n_queries, 5)
    np.testing.assert_allclose(costs, np.broadcast_to(want, costs.shape), rtol=1e-6)
    # wtp = 0 picks the cheapest LLM: the new one; a budget below every fitted LLM's cost too
    assert set(r.route(t2, wtp=0.0)) == {"new"}
    assert set(r.route(t2, budget=want[:4].min() / 2)) == {"new"}
    assert r.route(t2).shape == (test.n_queries,)


@pytest.mark.parametrize("which", ["fallback", "auto"])
def test_removed_fitted_llm_leaves_its_cost_column(which, parts):
    train, test = parts
    r = _wrappers()[which]().fit(train)
    gone = train.llm_names[0]
    r.remove_llm(gone)
    t3 = test.subset(llms=train.llm_names[1:])
    costs = r.predict_costs(t3)
    want = np.nanmean(train.costs.astype(np.float64), axis=0)[1:]
    np.testing.assert_allclose(costs, np.broadcast_to(want, costs.shape), rtol=1e-6)
    cheapest = train.llm_names[1 + int(want.argmin())]
    assert set(r.route(t3, wtp=0.0)) == {cheapest}
    assert gone not in set(r.route(t3))


@pytest.mark.parametrize("which", ["fallback", "auto"])
def test_exported_wrapper_with_an_added_llm_serves(which, parts, tmp_path):
    train, test = parts
    r = _add_new(_wrappers()[which]().fit(train), train)
    loaded = load_router(export_router(r, tmp_path / which, train_data=train))
    t2 = _with_new(test, "new")
    np.testing.assert_array_equal(loaded.router.predict_costs(t2), r.predict_costs(t2))
    assert (loaded.router.route(t2, wtp=0.0) == "new").all()
    assert loaded.route(["some new query text"])[0]["llm"] in r.llm_names_


def test_selection_probs_after_add_llm_is_none_not_an_error(parts):
    train, test = parts
    r = AutoTunedRouter("svm", {"encoder": "hashing"}, n_trials=0).fit(train)
    assert r.selection_probs(test).shape == (test.n_queries, 4)   # defined before the change
    _add_new(r, train)
    assert r.selection_probs(_with_new(test, "new")) is None
