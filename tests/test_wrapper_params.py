"""Wrapper routers refuse bad parameters at the start of fit, naming the parameter, before
any wrapped router is fitted: the safe fallback's z / min_task_queries / enabled,
task-residual's alpha / alphas, cost-aware's cost_model."""

from __future__ import annotations

import numpy as np
import pytest

from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.fallback import SafeFallbackRouter
from recsys_router.models.baselines import BestSingleRouter


class NeverFit(BestSingleRouter):
    """Fails loudly if a wrapper fits it: a parameter error must come first."""

    def _fit(self, train, val):
        raise AssertionError("the wrapped router was fitted before the parameter check")


@pytest.fixture(scope="module")
def data():
    return make_synthetic(120, 3, 2, seed=0)


@pytest.mark.parametrize("kw,message", [
    ({"z": float("nan")}, r"z must be a finite number >= 0, got nan"),
    ({"z": float("inf")}, r"z must be a finite number >= 0, got inf"),
    ({"z": "abc"}, r"z must be a finite number >= 0, got 'abc'"),
    ({"z": -3.0}, r"z must be a finite number >= 0, got -3.0"),
    ({"z": True}, r"z must be a finite number >= 0, got True"),
    ({"min_task_queries": -5}, r"min_task_queries must be an integer >= 0, got -5"),
    ({"min_task_queries": 2.7}, r"min_task_queries must be an integer >= 0, got 2.7"),
    ({"min_task_queries": "x"}, r"min_task_queries must be an integer >= 0, got 'x'"),
    ({"enabled": "no"}, r"enabled must be True or False, got 'no'"),
    ({"enabled": 0}, r"enabled must be True or False, got 0"),
    ({"enabled": False, "z": -1}, r"z must be a finite number >= 0"),
])
def test_fallback_refuses_bad_parameters_before_any_fit(data, kw, message):
    with pytest.raises(ValueError, match=message):
        SafeFallbackRouter(NeverFit(), **kw).fit(data)


def test_fallback_still_accepts_good_values(data):
    r = SafeFallbackRouter(BestSingleRouter(), z=0, min_task_queries=0, enabled=False).fit(data)
    assert r.fallback_["enabled"] is False


def _no_wrapped_fit(monkeypatch):
    """Any wrapped router built by name fails if fitted."""
    import recsys_router.router_spec as spec
    monkeypatch.setattr(spec, "resolve_router", lambda *a, **k: (NeverFit(), True))


@pytest.mark.parametrize("kw,message", [
    ({"alpha": True}, r"alpha \(or 'auto'\) must be a finite number >= 0, got True"),
    ({"alpha": "0.5"}, r"alpha \(or 'auto'\) must be a finite number >= 0, got '0.5'"),
    ({"alpha": "abc"}, r"alpha \(or 'auto'\) must be a finite number >= 0, got 'abc'"),
    ({"alpha": -1}, r"alpha \(or 'auto'\) must be a finite number >= 0, got -1"),
    ({"alphas": ["a"]}, r"alphas\[0\] must be a finite number >= 0, got 'a'"),
    ({"alphas": [0.5, float("nan")]}, r"alphas\[1\] must be a finite number >= 0, got nan"),
    ({"alphas": [False]}, r"alphas\[0\] must be a finite number >= 0, got False"),
    ({"alphas": "0.5"}, r"alphas must be a list \(or 1-d array\) of 1 to 1000 numbers >= 0"),
    ({"alphas": []}, r"alphas must be a list \(or 1-d array\) of 1 to 1000 numbers >= 0"),
    ({"alpha": 0.5, "alphas": ["a"]}, r"alphas\[0\] must be"),   # checked even if unused
    ({"alphas": np.zeros((2, 2))}, r"alphas must be a list \(or 1-d array\)"),
    ({"alphas": np.array([0.5, -1.0])}, r"alphas\[1\] must be a finite number >= 0, got -1"),
])
def test_task_residual_refuses_bad_alpha_before_any_fit(data, monkeypatch, kw, message):
    from recsys_router.models.task_residual import TaskResidualRouter
    _no_wrapped_fit(monkeypatch)
    with pytest.raises(ValueError, match=message):
        TaskResidualRouter("best-single", **kw).fit(data)


@pytest.mark.parametrize("cost_model", ["bogus", None, 3, ["mean"]])
def test_cost_aware_refuses_a_bad_cost_model_before_fitting_the_wrapped_router(
        data, monkeypatch, cost_model):
    from recsys_router.models.cost_aware import CostAwareRouter
    _no_wrapped_fit(monkeypatch)
    with pytest.raises(ValueError, match="cost_model must be 'mean' or 'ridge'"):
        CostAwareRouter("best-single", penalty=0.1, cost_model=cost_model).fit(data)


def test_good_alpha_values_still_fit(data):
    from recsys_router.models.task_residual import TaskResidualRouter
    assert TaskResidualRouter("best-single", alpha=1).fit(data).alpha_ == 1.0
    r = TaskResidualRouter("best-single", alphas=(0, 0.5)).fit(data)
    assert r.alpha_ in (0.0, 0.5)


def test_task_residual_takes_a_numpy_grid_of_alphas(data):
    """``alphas=np.linspace(...)`` (a sequence of floats, as documented) picks from the same
    grid as the equal list."""
    from recsys_router.models.task_residual import TaskResidualRouter
    grid = np.linspace(0.0, 1.0, 5)
    a = TaskResidualRouter("best-single", alpha="auto", alphas=grid, seed=0).fit(data)
    b = TaskResidualRouter("best-single", alpha="auto", alphas=grid.tolist(), seed=0).fit(data)
    assert a.alpha_ == b.alpha_ and a.alpha_ in grid.tolist()
    assert a.val_scores_ == b.val_scores_
