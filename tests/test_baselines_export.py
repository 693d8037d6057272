"""Every baseline survives export_router / load_router with identical decisions."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from recsys_router.datasets.synthetic import make_synthetic
from recsys_router import export
from recsys_router.registry import make_router


FAST = {"mlpr": {"epochs": 3}, "mlc": {"epochs": 2}, "c-roberta": {"n_init": 2}}
NAMES = ["random", "oracle", "r_o", "best-single", "zero", "cascade", "knn", "prknn", "c-roberta",
         "svm", "linearr", "mlpr", "mlc"]


@pytest.fixture(scope="module")
def split():
    return make_synthetic(160, 4, 3, seed=5).split((0.75, 0.25), seed=0)


@pytest.mark.parametrize("name", NAMES)
def test_export_round_trip(name, split, tmp_path):
    r = make_router(name, **FAST.get(name, {})).fit(split["train"])
    export.export_router(r, tmp_path / "art", train_data=split["train"])
    back = export.load_router(tmp_path / "art").router
    test = split["test"]
    assert type(back) is type(r) and back.get_params() == r.get_params()
    np.testing.assert_allclose(back.predict_scores(test), r.predict_scores(test))
    budget = float(np.median(r.mean_costs_))
    assert list(back.route(test, budget=budget)) == list(r.route(test, budget=budget))
