"""One source of defaults per trainable model: the module signature, mirrored by
configs/models/*.yaml and by the registry router derived from it; the one generic
LightningRouter takes a module class, path or config and refuses anything else."""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from recsys_router.models.base import LightningRouter
from recsys_router.models.base.lightning_router import resolve_module_class
from recsys_router.models.losses import RoutingLoss
from recsys_router.registry import available_routers, router_factory

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[1]
MODEL_CONFIGS = sorted((ROOT / "configs" / "models").glob("*.yaml"))
LINKED = {"self", "n_llms", "embed_dim"}


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


def _signature_defaults(cls) -> dict:
    return {k: p.default for k, p in inspect.signature(cls.__init__).parameters.items()
            if k not in LINKED}


@pytest.mark.parametrize("cfg", MODEL_CONFIGS, ids=lambda p: p.stem)
def test_yaml_mirrors_the_module_signature(cfg):
    doc = yaml.safe_load(cfg.read_text())
    module_cls = resolve_module_class(doc["model"]["class_path"])
    defaults = _signature_defaults(module_cls)
    init = dict(doc["model"].get("init_args") or {})
    loss_cfg = init.pop("loss", None)
    # every module argument but the injected loss is written, with the signature's value
    assert set(init) == set(defaults) - {"loss"}, cfg.name
    for key, value in init.items():
        assert value == _plain(defaults[key]), f"{cfg.name}: {key}={value!r} but " \
                                               f"{module_cls.__name__} says {defaults[key]!r}"
    if loss_cfg is not None:
        loss_defaults = _signature_defaults(RoutingLoss)
        loss_args = dict(loss_cfg["init_args"])
        assert loss_args.pop("kind") == module_cls.default_loss
        for key, value in loss_args.items():
            assert value == loss_defaults[key], f"{cfg.name}: loss {key}"
    assert doc["trainer"]["max_epochs"] == module_cls.trainer_defaults["max_epochs"]
    # only what the YAML mirrors: a batch_size here was read by nothing (graph said 2048 while
    # recsys-router fit trained on data.batch_size)
    assert set(module_cls.trainer_defaults) == {"max_epochs"}, cfg.name


def _derived_routers():
    out = []
    for name in available_routers():
        fac = router_factory(name)
        if isinstance(fac, type) and issubclass(fac, LightningRouter):
            out.append((name, fac))
    return out


def test_the_derived_routers_are_the_cf_models():
    assert {n for n, _ in _derived_routers()} == {"mf", "two-tower", "mirt", "nirt", "graph"}


@pytest.mark.parametrize("name,cls", _derived_routers(), ids=lambda v: v if isinstance(v, str) else "")
def test_registry_router_defaults_are_the_module_defaults(name, cls):
    module_cls = cls._module_cls
    router = cls()
    params = router.get_params()
    for key, default in _signature_defaults(module_cls).items():
        if key == "loss":
            if module_cls.router_loss_options:
                assert params["loss"] == module_cls.default_loss
                for opt in ("wtp", "temperature", "ipw_clip", "logit_adjust", "entropy_weight"):
                    assert params[opt] == _signature_defaults(RoutingLoss)[opt]
            else:
                assert "loss" not in params
            continue
        if key == "seed":          # the module's seed is the router's
            assert params["seed"] == 0
            continue
        assert params[key] == default, f"{name}.{key}"
    # the training budget is scaled to the data at fit time (models/base/schedule.py)
    assert params["batch_size"] is None and params["max_epochs"] is None
    assert params["max_steps"] is None and params["val_fraction"] == 0.1
    # building the module passes exactly these values
    built = router.module_kwargs()
    assert built.get("dim", None) == params.get("dim", None)
    assert built["lr"] == params["lr"]


def test_generic_router_from_a_config_equals_the_registry_router(sim_split):
    from recsys_router.models.mf_module import MFRouter
    train, test = sim_split["train"], sim_split["test"]
    config = {"class_path": "recsys_router.models.mf_module.MFModule",
              "init_args": {"dim": 8, "loss": {"class_path": "recsys_router.models.losses.RoutingLoss",
                                               "init_args": {"kind": "bpr"}}}}
    generic = LightningRouter(config, encoder_options={"dim": 32}, max_epochs=2, seed=3)
    assert generic.resolved_mode() == "pairwise"
    assert generic.trainer_setting("batch_size") is None        # data-scaled at fit time
    flat = MFRouter(dim=8, loss="bpr", encoder_options={"dim": 32}, max_epochs=2, seed=3)
    got = generic.fit(train).predict_scores(test)
    want = flat.fit(train).predict_scores(test)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    # the class itself (not a path) works too, options overriding the config's
    by_class = LightningRouter(resolve_module_class(config["class_path"]), {"dim": 4})
    assert by_class.build_module(5, 32).net.llm_emb.weight.shape == (5, 4)
    with_config = LightningRouter(config, {"dim": 4}).build_module(5, 32)
    assert with_config.net.llm_emb.weight.shape == (5, 4) and with_config.loss_fn.kind == "bpr"


@pytest.mark.parametrize("spec", ["os:system", "builtins.eval", "subprocess:Popen",
                                  "recsys_router.models.losses:RoutingLoss",
                                  "recsys_router.models.mf_module:NoSuchThing", 42,
                                  {"init_args": {"dim": 3}}, int])
def test_module_spec_outside_the_models_is_refused(spec, monkeypatch):
    import importlib
    imported = []
    real = importlib.import_module
    monkeypatch.setattr(importlib, "import_module",
                        lambda name, *a: imported.append(name) or real(name, *a))
    router = LightningRouter(spec)
    with pytest.raises(ValueError, match="module|RouterModule|class_path"):
        router.module_class()
    assert not {"os", "builtins", "subprocess"} & set(imported)
