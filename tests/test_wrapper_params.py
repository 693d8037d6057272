"""Wrapper routers refuse bad parameters at the start of fit, naming the parameter, before
any wrapped router is fitted: the safe fallback's z / min_task_queries / enabled,
task-residual's alpha / alphas, cost-aware's cost_model."""

from __future__ import annotations

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
