"""Search-space YAML: types, log scale, steps, conditional keys, list choices, errors naming the key;
every shipped configs/search file against the classes it tunes."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from recsys_router.errors import DataValidationError
from recsys_router.tuning.space import load_search_space, parse_search_space, set_dotted

ROOT = Path(__file__).resolve().parents[1]
SEARCH = ROOT / "configs" / "search"

SPACE = {
    "model.init_args.lr": {"type": "float", "low": 1e-4, "high": 1e-1, "log": True},
    "model.init_args.dim": {"type": "int", "low": 16, "high": 64, "step": 16},
    "model.init_args.hidden": {"type": "categorical", "choices": [[], [64], [128, 64]]},
    "model.init_args.loss.init_args.temperature": {
        "type": "float", "low": 0.1, "high": 1.0, "when": {"model.init_args.loss.init_args.kind": "utility"}},
    "model.init_args.loss.init_args.kind": {"type": "categorical", "choices": ["bce", "utility"]},
}


def _study_params(space, n=40, seed=0):
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    out = []
    for _ in range(n):
        trial = study.ask()
        out.append((space.suggest(trial), trial))
        study.tell(trial, 0.0)
    return out, study


def test_types_log_step_and_order():
    space = parse_search_space(SPACE, source="s.yaml")
    # the conditional key moves after the key it depends on; the rest keep file order
    assert space.keys == ["model.init_args.lr", "model.init_args.dim", "model.init_args.hidden",
                          "model.init_args.loss.init_args.kind", "model.init_args.loss.init_args.temperature"]
    samples, study = _study_params(space)
    dists = study.trials[0].distributions
    assert dists["model.init_args.lr"] == FloatDistribution(1e-4, 1e-1, log=True)
    assert dists["model.init_args.dim"] == IntDistribution(16, 64, step=16)
    assert dists["model.init_args.hidden"] == CategoricalDistribution(["[]", "[64]", "[128, 64]"])
    for values, _ in samples:
        assert 1e-4 <= values["model.init_args.lr"] <= 1e-1
        assert values["model.init_args.dim"] in (16, 32, 48, 64)
        assert values["model.init_args.hidden"] in ([], [64], [128, 64])  # decoded back to lists
    # log scale: with 40 uniform-in-log draws, clearly more than a third land below 1e-2
    # (uniform in log: 2/3 expected; uniform in value: ~9%)
    assert sum(v["model.init_args.lr"] < 1e-2 for v, _ in samples) > 40 / 3


def test_conditional_key_sampled_only_when_condition_holds():
    space = parse_search_space(SPACE)
    samples, _ = _study_params(space, n=30, seed=1)
    kinds = [v["model.init_args.loss.init_args.kind"] for v, _ in samples]
    assert set(kinds) == {"bce", "utility"}
    for values, trial in samples:
        has_t = "model.init_args.loss.init_args.temperature" in values
        assert has_t == (values["model.init_args.loss.init_args.kind"] == "utility")
        assert ("model.init_args.loss.init_args.temperature" in trial.params) == has_t


def test_when_with_a_list_of_values_and_fixed_trial():
    space = parse_search_space({
        "a": {"type": "categorical", "choices": ["x", "y", "z"]},
        "b": {"type": "int", "low": 1, "high": 3, "when": {"a": ["y", "z"]}}})
    assert space.suggest(optuna.trial.FixedTrial({"a": "x"})) == {"a": "x"}
    assert space.suggest(optuna.trial.FixedTrial({"a": "z", "b": 2})) == {"a": "z", "b": 2}


def test_to_args_and_set_dotted():
    args = parse_search_space(SPACE).to_args(
        {"model.init_args.lr": 0.001, "model.init_args.hidden": [128, 64],
         "model.init_args.loss.init_args.kind": "utility", "x.flag": True, "x.none": None})
    assert args == ["--model.init_args.lr=0.001", "--model.init_args.hidden=[128, 64]",
                    "--model.init_args.loss.init_args.kind=utility", "--x.flag=true", "--x.none=null"]
    cfg = {"params": {"k": 3}}
    set_dotted(cfg, "params.k", 7)
    set_dotted(cfg, "data.init_args.seed", 2)
    assert cfg == {"params": {"k": 7}, "data": {"init_args": {"seed": 2}}}


@pytest.mark.parametrize("key,spec,expect", [
    ("m.lr", {"type": "float", "low": 0.1, "high": 0.01}, "low must be < high"),
    ("m.lr", {"type": "float", "low": 0.0, "high": 1.0, "log": True}, "log scale needs low > 0"),
    ("m.lr", {"type": "float", "low": 1e-3, "high": 1.0, "log": "yes"}, "'log' must be true or false"),
    ("m.lr", {"type": "double", "low": 0, "high": 1}, "'type' must be one of"),
    ("m.lr", {"low": 0, "high": 1}, "'type' must be one of"),
    ("m.dim", {"type": "int", "low": 1.5, "high": 4}, "low must be an integer"),
    ("m.dim", {"type": "int", "low": 1}, "needs 'high'"),
    ("m.dim", {"type": "int", "low": 1, "high": 9, "step": 2, "log": True}, "cannot be combined"),
    ("m.dim", {"type": "int", "low": 1, "high": 9, "choices": [1]}, "unknown field(s) ['choices']"),
    ("m.kind", {"type": "categorical", "choices": []}, "non-empty list"),
    ("m.kind", {"type": "categorical", "choices": ["a", "a"]}, "duplicates"),
    ("m.kind", "bce", "expected a mapping"),
    ("m..kind", {"type": "categorical", "choices": ["a"]}, "dotted config paths"),
])
def test_bad_spec_names_file_and_key(tmp_path, key, spec, expect):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({key: spec}))
    with pytest.raises(DataValidationError) as err:
        load_search_space(path)
    msg = str(err.value)
    assert str(path) in msg and repr(key) in msg and expect in msg, msg


@pytest.mark.parametrize("when,expect", [
    ({"m.other": "a"}, "not in the search space"),
    ({"m.lr": 0.1}, "may only refer to categorical keys"),
    ({"m.kind": "nope"}, "is not one of its choices"),
    ({"m.t": "a"}, "refers to the key itself"),
])
def test_bad_when(when, expect):
    spec = {"m.kind": {"type": "categorical", "choices": ["a", "b"]},
            "m.lr": {"type": "float", "low": 0.1, "high": 1.0},
            "m.t": {"type": "float", "low": 0.1, "high": 1.0, "when": when}}
    with pytest.raises(DataValidationError, match=expect) as err:
        parse_search_space(spec, source="w.yaml")
    assert "'m.t'" in str(err.value) and "w.yaml" in str(err.value)


def test_cycle_and_empty_and_missing_file(tmp_path):
    spec = {"a": {"type": "categorical", "choices": [1, 2], "when": {"b": 1}},
            "b": {"type": "categorical", "choices": [1, 2], "when": {"a": 1}}}
    with pytest.raises(DataValidationError, match="cycle"):
        parse_search_space(spec)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    with pytest.raises(DataValidationError, match="non-empty mapping"):
        load_search_space(empty)
    with pytest.raises(FileNotFoundError, match="nope.yaml"):
        load_search_space(tmp_path / "nope.yaml")


def test_check_keys_suggests_close_key():
    space = parse_search_space({"params.kk": {"type": "int", "low": 1, "high": 5}}, source="k.yaml")
    with pytest.raises(DataValidationError, match="did you mean params.k"):
        space.check_keys({"params.k", "params.metric"}, "router knn")


# ---------------------------------------------------------------- shipped search files
def _init_params(class_path: str) -> set[str]:
    mod, _, name = class_path.rpartition(".")
    cls = getattr(importlib.import_module(mod), name)
    return {p for c in cls.__mro__ if c.__init__ is not object.__init__
            for p in inspect.signature(c.__init__).parameters if p != "self"}


def test_every_model_config_has_a_search_space_with_real_arguments():
    for model_cfg in sorted((ROOT / "configs" / "models").glob("*.yaml")):
        search = SEARCH / model_cfg.name
        assert search.is_file(), f"no search space for {model_cfg.name}"
        model = yaml.safe_load(model_cfg.read_text())["model"]
        space = load_search_space(search)
        for key in space.keys:
            parts = key.split(".")
            if parts[:4] == ["model", "init_args", "loss", "init_args"]:
                owner = model["init_args"]["loss"]["class_path"]
            else:
                assert parts[:2] == ["model", "init_args"] and len(parts) == 3, key
                owner = model["class_path"]
            assert parts[-1] in _init_params(owner), f"{search.name}: {key} is no argument of {owner}"


def test_router_search_spaces_match_registry_parameters():
    from recsys_router.registry import available_routers, router_class
    model_names = {p.stem for p in (ROOT / "configs" / "models").glob("*.yaml")}
    routers = [p for p in SEARCH.glob("*.yaml") if p.stem not in model_names]
    assert {"knn", "als", "bpr"} <= {p.stem for p in routers}
    for path in routers:
        assert path.stem in available_routers(), path.name
        valid = set(router_class(path.stem)._param_names())
        for key in load_search_space(path).keys:
            assert key.startswith("params.") and key[len("params."):] in valid, f"{path.name}: {key}"

