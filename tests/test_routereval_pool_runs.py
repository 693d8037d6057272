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
