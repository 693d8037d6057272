"""The cost-aware wrapper router: contract, the penalty by hand, bad input."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest

from recsys_router.data import RoutingData
from recsys_router.models.cost_aware import PENALTY_GRID, CostAwareRouter
from recsys_router.registry import make_router
from recsys_router.sweep_check import held_out_nauc
from router_contract import RouterContract


class TestCostAwareContract(RouterContract):
    router_factory = staticmethod(lambda: make_router("cost-aware", base="knn",
                                                      base_params={"k": 5}, seed=1))


def test_registry_name_builds_the_wrapper():
    r = make_router("cost-aware", base="best-single", penalty=0.1)
    assert isinstance(r, CostAwareRouter) and (r.base, r.penalty) == ("best-single", 0.1)


def test_fixed_penalty_subtracts_the_scaled_mean_cost(sim_split):
    train, test = sim_split["train"], sim_split["test"]
    base = make_router("knn", k=5).fit(train)
    r = CostAwareRouter("knn", {"k": 5}, penalty=0.2).fit(train)
    # by hand: each LLM's mean train cost, scaled by the dearest LLM's
    mean_cost = np.nanmean(train.costs, axis=0)
    want = base.predict_scores(test) - 0.2 * mean_cost[None, :] / mean_cost.max()
    np.testing.assert_allclose(r.predict_scores(test), want, rtol=1e-6, atol=1e-7)  # float32 costs
    np.testing.assert_allclose(r.predict_costs(test)[0], mean_cost, rtol=1e-6)


def test_auto_penalty_is_the_best_held_out_nauc(sim_split):
    r = CostAwareRouter("best-single", penalty="auto", seed=0).fit(sim_split["train"])
    assert set(r.val_nauc_) == set(PENALTY_GRID)
    best = max(r.val_nauc_.values())
    # the first grid value reaching the best held-out nAUC is kept
    assert r.penalty_ == next(p for p in PENALTY_GRID if r.val_nauc_[p] > best - 1e-9)


@pytest.mark.parametrize("base", ["os:system", "subprocess.Popen", "../../etc/passwd", "x" * 500])
def test_hostile_base_name_is_refused_without_importing_it(sim_split, base):
    before = set(sys.modules)
    with pytest.raises((KeyError, ValueError), match="router"):
        CostAwareRouter(base, penalty=0.1).fit(sim_split["train"])
    assert not {"os.system", "subprocess"} & (set(sys.modules) - before)


def test_bad_cost_model_is_a_clear_error(sim_split):
    with pytest.raises(ValueError, match="cost_model must be 'mean' or 'ridge'"):
        CostAwareRouter("best-single", penalty=0.1, cost_model="magic").fit(sim_split["train"])


def _sparse(data, every_cost=True):
    """One unobserved score per query (no query fully observed)."""
    s, c = data.scores.copy(), data.costs.copy()
    s[np.arange(data.n_queries), np.arange(data.n_queries) % data.n_llms] = np.nan
    if not every_cost:
        c[:, 0] = np.nan                        # observed cells of LLM 0 without a cost
    return RoutingData(data.queries, data.llms, s, c)


def test_auto_penalty_on_a_sparse_matrix_scores_the_observed_cells(sim_small):
    train = _sparse(sim_small)
    r = CostAwareRouter("best-single", penalty="auto", seed=3).fit(train)
    assert "observed cells" in r.penalty_note_ and "only 0 fully observed" in r.penalty_note_
    # by hand at penalty 0: best-single fitted on the inner part, its held-out budget sweep
    # routed among each held-out query's observed LLMs
    perm = np.random.default_rng(3).permutation(train.n_queries)
    n_val = int(round(0.25 * train.n_queries))
    inner, held = train.subset(np.sort(perm[n_val:])), train.subset(np.sort(perm[:n_val]))
    P = np.broadcast_to(np.nanmean(inner.scores, axis=0), held.shape)
    C = np.broadcast_to(np.nanmean(inner.costs, axis=0), held.shape)
    assert r.val_nauc_[0.0] == pytest.approx(held_out_nauc(P, C, held.scores, held.costs))
    assert r.penalty_ == max(PENALTY_GRID, key=lambda p: (r.val_nauc_[p], -p))
    assert r.summary() == f"penalty {r.penalty_:g} ({r.penalty_note_})"


def test_auto_penalty_is_zero_when_the_held_out_part_cannot_be_scored(sim_small):
    r = CostAwareRouter("best-single", penalty="auto").fit(_sparse(sim_small, every_cost=False))
    assert r.penalty_ == 0.0 and r.val_nauc_ == {} and r.penalty_note_.startswith("0: 0 held-out")


def test_auto_penalty_on_complete_rows_says_so(sim_split):
    r = CostAwareRouter("best-single", penalty="auto", seed=0).fit(sim_split["train"])
    assert "with every score and cost observed" in r.penalty_note_
    assert CostAwareRouter("best-single", penalty=0.1).fit(sim_split["train"]).penalty_note_ == "fixed"


def test_ridge_costs_with_an_encoder_that_learns_from_text(sim_split, tmp_path):
    from recsys_router.encoders import get_encoder
    from recsys_router.export import export_router, load_router
    train, test = sim_split["train"], sim_split["test"]
    r = CostAwareRouter("best-single", penalty=0.1, cost_model="ridge", encoder="tfidf").fit(train)
    # by hand: a tfidf encoder fitted on the training texts, one log-cost ridge per LLM
    enc = get_encoder("tfidf").fit(list(train.texts))
    X = enc.encode(list(test.texts))
    coef, icpt, _ = r.cost_model_
    np.testing.assert_allclose(r.predict_costs(test), np.exp(X @ coef + icpt), rtol=1e-6)
    assert (r.predict_costs(test).std(axis=0) > 0).all()          # per-query costs
    given = get_encoder("tfidf")                 # an encoder object given is never fitted
    CostAwareRouter("best-single", penalty=0.1, cost_model="ridge", encoder=given).fit(train)
    assert given.fingerprint_ is None
    loaded = load_router(export_router(r, tmp_path / "ca", train_data=train)).router
    np.testing.assert_allclose(loaded.predict_costs(test), r.predict_costs(test), rtol=1e-9)


def _tiny(costs):
    """4 queries, 2 LLMs: ``a`` wins the even queries, ``b`` the odd ones."""
    s = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    return RoutingData([f"q{i}" for i in range(4)], ["a", "b"], s, costs)


@pytest.mark.parametrize("penalty", [0.1, "auto"])
def test_costs_all_unrecorded_route_as_the_wrapped_router(penalty):
    # every cost NaN: no cost unit to scale by, so the wrapper adds nothing (it predicted NaN
    # everywhere and sent every query to the first LLM)
    d = _tiny(np.full((4, 2), np.nan))
    r = CostAwareRouter("oracle", penalty=penalty).fit(d)
    np.testing.assert_array_equal(r.predict_scores(d), d.scores)
    assert r.route(d).tolist() == ["a", "b", "a", "b"]


def test_an_added_twin_gets_the_penalised_scores_of_its_original():
    # a: 0.8 at cost 1.0, b: 0.6 at cost 0.1; penalty 0.3 over the dearest mean cost 1.0
    # gives a 0.8 - 0.3 = 0.5 and b 0.6 - 0.03 = 0.57. A twin of a (same probe scores and
    # costs) must get a's 0.5, not its raw 0.8 (which took every query from b)
    s, c = np.tile([0.8, 0.6], (6, 1)), np.tile([1.0, 0.1], (6, 1))
    q = pd.DataFrame({"query_id": [f"q{i}" for i in range(6)],
                      "text": [f"question {i}" for i in range(6)]})
    d = RoutingData(q, ["a", "b"], s, c)
    r = CostAwareRouter("best-single", penalty=0.3).fit(d)
    probes = RoutingData(q.iloc[:3].reset_index(drop=True), ["a_twin"], s[:3, :1], c[:3, :1])
    r.add_llm("a_twin", probes)
    d3 = RoutingData(d.queries, ["a", "b", "a_twin"], np.hstack([s, s[:, :1]]),
                     np.hstack([c, c[:, :1]]))
    np.testing.assert_allclose(r.predict_scores(d3), np.tile([0.5, 0.57, 0.5], (6, 1)),
                               rtol=1e-6)
    assert set(r.route(d3).tolist()) == {"b"}
    r.remove_llm("a_twin")
    np.testing.assert_allclose(r.predict_scores(d), np.tile([0.5, 0.57], (6, 1)), rtol=1e-6)


def test_a_val_fraction_that_leaves_nothing_to_fit_on_is_named():
    # 45 priced training queries (>= 40, so the penalty is searched): round(0.99 * 45) = 45
    # held out, none left for the inner fit
    from recsys_router.datasets.synthetic import make_synthetic
    d = make_synthetic(120, 4, 3, seed=0).subset(np.arange(45))
    with pytest.raises(ValueError, match=r"^cost-aware: val_fraction=0\.99 holds out 45 of the "
                                         r"45 training queries and leaves none to fit on"):
        make_router("cost-aware", base="knn", val_fraction=0.99).fit(d)
