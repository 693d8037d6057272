"""Invalid hyperparameters are refused at fit time with one clear error naming the parameter
and its range (nothing silently truncated or trained on nonsense); valid edges still fit."""

from __future__ import annotations

import math

import pytest

from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.hyperparams import check_fraction, check_number
from recsys_router.registry import make_router

NAN = float("nan")
LIGHT = {"encoder_options": {"dim": 16}, "max_epochs": 1}
KNN = {"base": "knn", "base_params": {"k": 5}}


@pytest.fixture(scope="module")
def train():
    return make_synthetic(60, 3, 2, seed=0)


def test_check_number_by_hand():
    assert check_number(3, "k", low=1, integer=True) == 3
    assert check_number(0.0, "penalty", low=0) == 0.0
    assert check_number(None, "threshold", none=True) is None
    assert check_fraction(0.0, "val_fraction", zero=True) == 0.0
    for bad, msg in [(2.5, "k must be an integer >= 1, got 2.5"),
                     (True, "k must be an integer >= 1, got True"),
                     ("3", "k must be an integer >= 1, got '3'"),
                     (0, "k must be an integer >= 1, got 0")]:
        with pytest.raises(ValueError, match=f"^{msg}$"):
            check_number(bad, "k", low=1, integer=True)
    with pytest.raises(ValueError, match=r"^lr must be a finite number > 0, got 0$"):
        check_number(0, "lr", low=0, low_open=True)
    with pytest.raises(ValueError, match=r"in \(0, 1\), got 1"):
        check_fraction(1, "val_fraction")
    for x in (NAN, math.inf):
        with pytest.raises(ValueError, match="finite number"):
            check_number(x, "wtp")


@pytest.mark.parametrize("name, params, message", [
    ("graph", {**LIGHT, "k": 0}, "k must be an integer >= 1"),
    ("graph", {**LIGHT, "k": -3}, "k must be an integer >= 1"),
    ("graph", {**LIGHT, "cost_weight": NAN}, "cost_weight must be a finite number >= 0"),
    ("mirt", {**LIGHT, "dim": 0}, "dim must be an integer in \\[1, 65536\\]"),
    ("mlpr", {"hidden_size": 0, "epochs": 1}, "hidden_size must be an integer >= 1"),
    ("mlpr", {"n_hidden": -3, "epochs": 1}, "n_hidden must be an integer >= 0"),
    ("mlpr", {"epochs": 2.5}, "epochs must be an integer >= 1"),
    ("cascade", {"threshold": NAN}, "threshold .* must be a finite number"),
    ("cost-aware", {**KNN, "penalty": -5.0}, r"penalty \(or 'auto'\) must be a finite number >= 0"),
    ("cost-aware", {**KNN, "penalty": NAN}, r"penalty \(or 'auto'\) must be a finite number >= 0"),
    ("cost-aware", {**KNN, "val_fraction": -1.0}, r"val_fraction must be a finite number in \(0, 1\)"),
    ("task-residual", {**KNN, "alpha": 0.5, "val_fraction": 7.0}, "val_fraction must be"),
    ("bpr", {"learning_rate": -1.0, "iterations": 5}, "learning_rate must be a finite number > 0"),
    ("mlc", {"ratio": NAN, "epochs": 1}, r"ratio .* must be a finite number in \(0, 1\]"),
    ("mf", {**LIGHT, "patience": -3}, "patience must be an integer >= 1"),
    ("mf", {**LIGHT, "max_epochs": True}, "max_epochs must be an integer >= 1"),
    ("mf", {**LIGHT, "dropout": -0.5}, r"dropout must be a finite number in \[0, 1\)"),
    ("mf", {**LIGHT, "wtp": NAN}, "wtp must be a finite number >= 0"),
    ("mf", {**LIGHT, "lr": 0.0}, "lr must be a finite number > 0"),
    ("c-roberta", {"n_clusters": 2.7}, "n_clusters must be an integer >= 1, got 2.7"),
    ("knn", {"k": 2.5}, "k must be an integer >= 1 or None, got 2.5"),
    ("knn", {"k": 0}, "k must be an integer >= 1 or None, got 0"),
    ("prknn", {"k": True}, "k must be an integer >= 1 or None, got True"),
])
def test_invalid_hyperparameters_are_refused(train, name, params, message):
    with pytest.raises(ValueError, match=message):
        make_router(name, **params).fit(train)


@pytest.mark.parametrize("name, params", [
    ("cost-aware", {**KNN, "penalty": 0.0}),          # the edges of each range still fit
    ("mlpr", {"n_hidden": 0, "epochs": 1}),           # a linear model
    ("cascade", {"threshold": 0.5}),
    ("c-roberta", {"n_clusters": 1}),
    ("knn", {"k": 1}),
    ("knn", {"k": None}),
])
def test_valid_edges_fit(train, name, params):
    assert make_router(name, **params).fit(train).predict_scores(train).shape == (60, 3)


@pytest.mark.parametrize("module,kwargs,says", [
    ("mf_module.MFModule", {"dim": 10**9}, "dim must be an integer in [1, 65536], got 1000000000"),
    ("mf_module.MFModule", {"dim": 0}, "dim must be an integer in [1, 65536], got 0"),
    ("mf_module.MFModule", {"dim": NAN}, "dim must be an integer in [1, 65536], got nan"),
    ("mf_module.MFModule", {"hidden": [70000]},
     "hidden (each layer width) must be an integer in [1, 65536], got 70000"),
    ("two_tower_module.TwoTowerModule", {"id_dim": 0},
     "id_dim must be an integer in [1, 65536], got 0"),
    ("two_tower_module.TwoTowerModule", {"id_dim": -1},
     "id_dim must be an integer in [1, 65536], got -1"),
    ("two_tower_module.TwoTowerModule", {"dim": 10**9},
     "dim must be an integer in [1, 65536], got 1000000000"),
    ("irt_module.MIRTModule", {"dim": 10**9}, "dim must be an integer in [1, 65536], got 1000000000"),
    ("irt_module.NIRTModule", {"hidden": [0]},
     "hidden (each layer width) must be an integer in [1, 65536], got 0"),
    ("irt_module.NIRTModule", {"hidden": [8, NAN]},
     "hidden (each layer width) must be an integer in [1, 65536], got nan"),
    ("graph_module.GraphModule", {"hidden": 10**9},
     "hidden must be an integer in [1, 65536], got 1000000000"),
])
def test_a_layer_width_or_embedding_size_outside_1_to_65536_is_refused(module, kwargs, says):
    """Were silent (two_tower id_dim=0, NIRT hidden=[0] trained), a torch error (negative or
    NaN sizes) or an attempt to allocate gigabytes (10**9)."""
    import importlib
    from recsys_router.errors import ArgumentValueError
    path, name = module.rsplit(".", 1)
    cls = getattr(importlib.import_module(f"recsys_router.models.{path}"), name)
    with pytest.raises(ArgumentValueError) as info:
        cls(n_llms=4, embed_dim=8, **kwargs)
    assert str(info.value) == says


def test_the_largest_width_is_accepted():
    from recsys_router.hyperparams import MAX_WIDTH, check_width
    assert check_width(MAX_WIDTH, "dim") == 65536 and check_width(1, "dim") == 1
