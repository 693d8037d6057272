"""The cost-aware wrapper router: contract, the penalty by hand, bad input."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from recsys_router.models.cost_aware import PENALTY_GRID, CostAwareRouter
from recsys_router.registry import make_router
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
