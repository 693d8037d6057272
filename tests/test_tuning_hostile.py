"""Hostile tuning inputs: search spaces that tune the data splits, non-finite or overflowing
float ranges, oversized spaces, and study names that would leave the default ``--out``
folder. Each is refused before any trial with one line naming what is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from recsys_router.cli import main
from recsys_router.tuning import TuningConfigError, tune
from recsys_router.tuning.objective import SPLIT_KEYS
from tuning_data import synthetic_data_config

ROOT = Path(__file__).resolve().parents[1]
MF = str(ROOT / "configs" / "models" / "mf.yaml")
SYNTHETIC = str(ROOT / "configs" / "data" / "synthetic.yaml")
KNN = ROOT / "configs" / "search" / "knn.yaml"


@pytest.fixture
def data_cfg(tmp_path):
    return synthetic_data_config(tmp_path / "data.yaml", dim=32, n_queries=200, n_llms=3, n_topics=2)


def _search(tmp_path, spec, name="s.yaml"):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(spec))
    return path


def _one_line_error(argv, capsys):
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err.strip()


SPLIT_CASES = [
    ("data.init_args.seed", {"type": "int", "low": 0, "high": 9}),
    ("data.init_args.split_ratios", {"type": "categorical", "choices": [[0.8, 0.1, 0.1], [0.6, 0.2, 0.2]]}),
    ("data.init_args.split_ratios.0", {"type": "float", "low": 0.5, "high": 0.9}),
    ("data.init_args.val_fraction", {"type": "float", "low": 0.1, "high": 0.3}),
    ("data.init_args.split_column", {"type": "categorical", "choices": ["split", "fold"]}),
    ("data.init_args.ood_tasks", {"type": "categorical", "choices": [["a"], ["b"]]}),
    ("data.init_args.carve_val", {"type": "categorical", "choices": [True, False]}),
    ("data.init_args.dataset", {"type": "categorical", "choices": ["synthetic", "cruxeval"]}),
    ("data.init_args.dataset_options.seed", {"type": "int", "low": 0, "high": 9}),
    ("data.seed", {"type": "int", "low": 0, "high": 9}),
    ("data.init_args", {"type": "categorical", "choices": [{"seed": 1}, {"seed": 2}]}),
    ("data.class_path", {"type": "categorical", "choices": ["a.B", "c.D"]}),
]


@pytest.mark.parametrize("key, spec", SPLIT_CASES, ids=[k for k, _ in SPLIT_CASES])
def test_router_search_space_may_not_tune_the_splits(tmp_path, data_cfg, capsys, key, spec):
    search = _search(tmp_path, {"params.k": {"type": "int", "low": 1, "high": 9}, key: spec})
    out = tmp_path / "out"
    err = _one_line_error(["tune", "--router", "knn", "-c", str(data_cfg), "--search", str(search),
                           "--n-trials", "2", "--out", str(out), "--no-plots", "--no-progress"],
                          capsys)
    assert f"search space key {key!r} ({search}) changes the data splits" in err
    assert not out.exists()


@pytest.mark.parametrize("arg", ["seed", "split_ratios", "val_fraction", "carve_val",
                                 "group_method"])
def test_lightning_search_space_may_not_tune_the_splits(tmp_path, arg):
    search = _search(tmp_path, {"model.init_args.lr": {"type": "float", "low": 1e-4, "high": 1e-2},
                                f"data.init_args.{arg}": {"type": "categorical", "choices": [0, 1]}})
    with pytest.raises(TuningConfigError, match=f"'data.init_args.{arg}' .* changes the data splits"):
        tune([MF, SYNTHETIC], search, metric="val/mu_o", out_dir=tmp_path / "o", n_trials=1,
             progress=False, plots=False)
    assert not (tmp_path / "o").exists()


def test_split_keys_cover_the_routing_data_modules_split_arguments():
    import inspect

    from recsys_router.datamodules.routing_datamodule import RoutingDataModule
    params = inspect.signature(RoutingDataModule.__init__).parameters
    split_defining = {"dataset", "data_dir", "dataset_options", "split_ratios", "split_column",
                      "val_fraction", "ood_tasks", "seed", "carve_val", "candidates",
                      "candidate_group", "pool_size", "group_method"}
    assert split_defining <= set(params) and split_defining <= set(SPLIT_KEYS)


def test_data_keys_that_keep_the_splits_are_still_allowed(tmp_path, data_cfg):
    """``batch_size`` does not change which queries are in val: tuning it still runs."""
    search = _search(tmp_path, {"params.k": {"type": "int", "low": 1, "high": 9},
                                "data.init_args.batch_size": {"type": "int", "low": 8, "high": 64}})
    res = tune([data_cfg], search, router="knn", n_trials=1, out_dir=tmp_path / "o",
               progress=False, plots=False)
    assert res.n_run == 1 and "data.init_args.batch_size" in res.study.trials[0].params


def _float_space_refused(tmp_path, bounds: dict, expect: str) -> None:
    """A search file whose float parameter ``params.x`` has ``bounds`` is refused in one line
    naming the file, the parameter and ``expect``."""
    from recsys_router.errors import DataValidationError
    from recsys_router.tuning.space import load_search_space
    path = _search(tmp_path, {"params.x": {"type": "float", **bounds}})
    with pytest.raises(DataValidationError) as err:
        load_search_space(path)
    msg = str(err.value)
    assert expect in msg and "'params.x'" in msg and str(path) in msg and "\n" not in msg


FLOAT_CASES = [
    ({"low": -1e308, "high": 1e308}, "difference is finite, got low=-1e+308, high=1e+308"),
    ({"low": float("nan"), "high": 1.0}, "must be finite numbers"),
    ({"low": 0.0, "high": float("inf")}, "must be finite numbers"),
    ({"low": float("-inf"), "high": 0.0}, "must be finite numbers"),
    ({"low": 0.0, "high": 1.0, "step": float("inf")}, "step must be a finite number, got inf"),
    ({"low": 0.0, "high": 1.0, "step": float("nan")}, "step must be a finite number, got nan"),
]


@pytest.mark.parametrize("bounds, expect", FLOAT_CASES)
def test_float_ranges_must_be_finite(tmp_path, bounds, expect):
    _float_space_refused(tmp_path, bounds, expect)


def test_an_overflowing_float_range_is_refused_before_any_trial(tmp_path, data_cfg, capsys):
    """-1e308..1e308 passed the parser and crashed the first trial in the sampler."""
    search = _search(tmp_path, {"data.init_args.encoder_options.dim":
                                {"type": "float", "low": -1e308, "high": 1e308}})
    out = tmp_path / "out"
    err = _one_line_error(["tune", "--router", "knn", "-c", str(data_cfg), "--search", str(search),
                           "--n-trials", "1", "--out", str(out), "--no-plots", "--no-progress"],
                          capsys)
    assert "low and high must be finite numbers whose difference is finite" in err
    assert not out.exists()


def test_a_wide_finite_float_range_still_parses():
    from recsys_router.tuning.space import parse_search_space
    p = parse_search_space({"a.x": {"type": "float", "low": -1e307, "high": 1e307}}).params[0]
    assert (p.low, p.high) == (-1e307, 1e307)


def test_choices_and_keys_are_capped(tmp_path):
    from recsys_router.errors import DataValidationError
    from recsys_router.tuning.space import MAX_CHOICES, MAX_PARAMS, parse_search_space
    assert (MAX_CHOICES, MAX_PARAMS) == (10_000, 1_000)
    ok = parse_search_space({"a.c": {"type": "categorical", "choices": list(range(10_000))}})
    assert len(ok.params[0].choices) == 10_000
    with pytest.raises(DataValidationError, match=r"'a.c': 'choices' has 10001 values; at most "
                                                  r"10000 are allowed"):
        parse_search_space({"a.c": {"type": "categorical", "choices": list(range(10_001))}},
                           source="c.yaml")
    many = {f"a.k{i}": {"type": "int", "low": 0, "high": 1} for i in range(1_001)}
    with pytest.raises(DataValidationError, match="has 1001 keys; at most 1000 are allowed"):
        parse_search_space(many)
    many.pop("a.k0")
    assert len(parse_search_space(many)) == 1_000


def test_a_20k_choice_categorical_is_refused_before_any_trial(tmp_path, data_cfg, capsys):
    search = _search(tmp_path, {"params.metric": {"type": "categorical",
                                                  "choices": [f"c{i}" for i in range(20_000)]}})
    out = tmp_path / "out"
    err = _one_line_error(["tune", "--router", "knn", "-c", str(data_cfg), "--search", str(search),
                           "--n-trials", "3", "--out", str(out), "--no-plots", "--no-progress"],
                          capsys)
    assert "'choices' has 20000 values; at most 10000 are allowed" in err and not out.exists()


def test_search_files_with_aliases_or_over_the_size_cap_are_refused(tmp_path):
    from recsys_router.errors import DataValidationError
    from recsys_router.tuning.space import MAX_FILE_BYTES, load_search_space
    laughs = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    laughs += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(laughs) + "\nm.k: {type: categorical, choices: [*a8]}\n")
    with pytest.raises(DataValidationError, match=r"YAML aliases \(\*name\) are not allowed"):
        load_search_space(bomb)
    big = tmp_path / "big.yaml"
    big.write_text("m.k: {type: int, low: 1, high: 9}\n" + "#" * MAX_FILE_BYTES + "\n")
    with pytest.raises(DataValidationError, match=f"bytes; at most {MAX_FILE_BYTES} are read"):
        load_search_space(big)
    big.write_text("m.k: {type: int, low: 1, high: 9}\n")
    assert load_search_space(big).keys == ["m.k"]


@pytest.mark.parametrize("name, expect", [
    ("../../escape", "may not hold '/', '\\' or '..'"),
    ("a/b", "may not hold '/', '\\' or '..'"),
    ("a\\b", "may not hold '/', '\\' or '..'"),
    ("..", "may not hold '/', '\\' or '..'"),
    (".", "may not hold '/', '\\' or '..'"),
    ("a\x00b", "holds a NUL or other control character"),
    ("a\nb", "holds a NUL or other control character"),
    ("a\x1bb", "holds a NUL or other control character"),
    ("x" * 513, "must be 1 to 512 characters"),
], ids=["parent-path", "slash", "backslash", "dotdot", "dot", "nul", "newline", "escape", "513-chars"])
def test_study_names_that_would_leave_the_default_out_are_refused(tmp_path, data_cfg, capsys,
                                                                  monkeypatch, name, expect):
    work = tmp_path / "work" / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    err = _one_line_error(["tune", "--router", "knn", "-c", str(data_cfg), "--search", str(KNN),
                           "--n-trials", "1", "--study-name", name, "--no-plots", "--no-progress"],
                          capsys)
    assert expect in err
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == [
        Path("data.yaml"), Path("work"), Path("work/a"), Path("work/a/b")]   # nothing written


def test_a_slash_in_the_study_name_is_fine_with_an_explicit_out(tmp_path, data_cfg):
    """Only the default ``tuning/STUDY`` folder is built from the name: with ``--out`` a shared
    database may hold names such as ``team/mf``; control characters are refused everywhere."""
    res = tune([data_cfg], KNN, router="knn", n_trials=1, study_name="team/mf..v2",
               out_dir=tmp_path / "o", progress=False, plots=False)
    assert res.study.study_name == "team/mf..v2" and (tmp_path / "o" / "best_config.yaml").is_file()
    with pytest.raises(ValueError, match="holds a NUL or other control character"):
        tune([data_cfg], KNN, router="knn", n_trials=1, study_name="a\x00b",
             out_dir=tmp_path / "o2", progress=False, plots=False)
    assert not (tmp_path / "o2").exists()


# --- float steps (r2): Optuna's decimal arithmetic crashed the first trial on 1e-30 over 0..1

STEP_CASES = [
    ({"low": 0.0, "high": 1.0, "step": 1e-30}, "step 1e-30 divides low=0.0..high=1.0 into 1e+30 steps"),
    ({"low": 0.0, "high": 1.0, "step": 1e-10}, "into 1e+10 steps; at most 1e+09 are allowed"),
    ({"low": 0.0, "high": 1.0, "step": 5e-324}, "into inf steps"),
    ({"low": 1e20, "high": 1e20 + 1e6, "step": 1.0}, "below twice the spacing of floats near"),
]


@pytest.mark.parametrize("bounds, expect", STEP_CASES, ids=["1e-30", "1e-10", "denormal", "ulp"])
def test_float_steps_too_fine_are_refused(tmp_path, bounds, expect):
    _float_space_refused(tmp_path, bounds, expect)


def test_a_tiny_float_step_is_refused_before_any_trial_and_leaves_no_out(tmp_path, data_cfg, capsys):
    """The file passed the check, the first trial died in decimal.InvalidOperation and left
    --out/study.db behind."""
    search = _search(tmp_path, {"params.k": {"type": "int", "low": 1, "high": 50},
                                "params.p": {"type": "float", "low": 0.0, "high": 1.0, "step": 1e-30}})
    out = tmp_path / "out"
    err = _one_line_error(["tune", "--router", "knn", "-c", str(data_cfg), "--search", str(search),
                           "--n-trials", "2", "--out", str(out), "--no-plots", "--no-progress"],
                          capsys)
    assert f"{search}: search space key 'params.p': step 1e-30" in err and "1e+30 steps" in err
    assert "InvalidOperation" not in err and not out.exists()


def test_a_float_step_at_the_limit_samples_on_its_grid():
    import optuna

    from recsys_router.tuning.space import MAX_FLOAT_STEPS, parse_search_space
    from recsys_router.tuning.study import TrialSeededSampler
    assert MAX_FLOAT_STEPS == 10**9
    space = parse_search_space({"a.x": {"type": "float", "low": 0.0, "high": 1.0, "step": 1e-9}})
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(sampler=TrialSeededSampler(0, n_startup_trials=3))
    study.optimize(lambda t: space.suggest(t)["a.x"], n_trials=5)
    xs = [t.params["a.x"] for t in study.trials]
    assert len(xs) == 5 and all(0.0 <= x <= 1.0 and abs(x * 1e9 - round(x * 1e9)) < 1e-3 for x in xs)


# --- int ranges (r3): past int64 the first TPE trial crashed (object arrays); from about 2**47
# (log scale) or 2**51 (linear) its float64 arithmetic gives NaN acquisition values

INT_CASES = [
    ({"low": -2**70, "high": 2**70}, "low=-1180591620717411303424, high=1180591620717411303424"),
    ({"low": 0, "high": 2**40 + 1}, "low=0, high=1099511627777"),
    ({"low": -2**40 - 1, "high": 0}, "low=-1099511627777, high=0"),
    ({"low": 1, "high": 2**47, "log": True}, "low=1, high=140737488355328"),
    ({"low": 0, "high": 2**63 - 1, "step": 2}, "high=9223372036854775807"),
]


@pytest.mark.parametrize("bounds, expect", INT_CASES,
                         ids=["2**70", "2**40+1", "-2**40-1", "log-2**47", "int64"])
def test_int_ranges_past_2_to_the_40_are_refused(tmp_path, bounds, expect):
    from recsys_router.errors import DataValidationError
    from recsys_router.tuning.space import load_search_space
    path = _search(tmp_path, {"params.k": {"type": "int", **bounds}})
    with pytest.raises(DataValidationError) as err:
        load_search_space(path)
    msg = str(err.value)
    assert "int bounds must lie within -2**40..2**40" in msg and expect in msg
    assert "'params.k'" in msg and str(path) in msg and "\n" not in msg


def test_integers_too_long_to_print_are_refused_by_size(tmp_path):
    from recsys_router.errors import DataValidationError
    from recsys_router.tuning.space import load_search_space, parse_search_space
    with pytest.raises(DataValidationError, match=r"'params.k': int bounds .* high=an integer of "
                                                  r"13288 bits"):
        parse_search_space({"params.k": {"type": "int", "low": 0, "high": 10**4000}}, source="s.yaml")
    with pytest.raises(DataValidationError, match=r"'params.x': low and high must be finite numbers, "
                                                  r"got low=a negative integer of 1329 bits"):
        parse_search_space({"params.x": {"type": "float", "low": -10**400, "high": 0.5}},
                           source="s.yaml")
    path = tmp_path / "digits.yaml"   # YAML's int() refuses 5,000 digits: still one line naming the file
    path.write_text(f"params.k: {{type: int, low: 0, high: {'9' * 5000}}}\n")
    with pytest.raises(DataValidationError, match="not valid YAML: Exceeds the limit"):
        load_search_space(path)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("spec", [{"low": -2**40, "high": 2**40},
                                  {"low": 1, "high": 2**40, "log": True},
                                  {"low": -2**40, "high": 2**40, "step": 3}],
                         ids=["signed", "log", "step"])
def test_tpe_samples_the_widest_accepted_int_range_past_its_startup_trials(spec, seed):
    import warnings

    import optuna

    from recsys_router.tuning.space import parse_search_space
    from recsys_router.tuning.study import TrialSeededSampler
    space = parse_search_space({"a.k": {"type": "int", **spec}})
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(sampler=TrialSeededSampler(seed))   # 10 random start-up trials
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)   # NaN acquisition values on wider ranges
        warnings.filterwarnings("ignore", message=".*not divisible by `step`", category=UserWarning)
        study.optimize(lambda t: float(space.suggest(t)["a.k"] % 7), n_trials=14)
    ks = [t.params["a.k"] for t in study.trials]
    assert len(ks) == 14 and all(t.state.name == "COMPLETE" for t in study.trials)
    assert all(isinstance(k, int) and spec["low"] <= k <= spec["high"] for k in ks)


# --- categorical choices equal in Python (r4): Optuna recorded the first equal choice

EQUAL_CASES = [
    ([0, False, "x"], "'choices' 0 and false are equal"),
    ([True, "y", 1], "'choices' true and 1 are equal"),
    ([1, 1.0], "'choices' 1 and 1.0 are equal"),
    ([0.0, -0.0], "'choices' 0.0 and -0.0 are equal"),
    ([[1, [2]], [1, [2.0]]], "'choices' [1, [2]] and [1, [2.0]] are equal"),
    ([{"a": 1}, {"a": True}], '\'choices\' {"a": 1} and {"a": true} are equal'),
]


@pytest.mark.parametrize("choices, expect", EQUAL_CASES,
                         ids=["0-false", "true-1", "1-1.0", "zeros", "nested", "mapping"])
def test_choices_equal_in_python_are_refused(tmp_path, choices, expect):
    from recsys_router.errors import DataValidationError
    from recsys_router.tuning.space import load_search_space
    path = _search(tmp_path, {"params.a": {"type": "categorical", "choices": choices}})
    with pytest.raises(DataValidationError) as err:
        load_search_space(path)
    msg = str(err.value)
    assert expect in msg and "'params.a'" in msg and str(path) in msg and "\n" not in msg


def test_distinct_choices_of_mixed_types_are_recorded_as_used():
    """0, true, "0" and null are unequal in Python: each trial records the value it used."""
    import optuna

    from recsys_router.tuning.space import parse_search_space
    from recsys_router.tuning.study import TrialSeededSampler
    space = parse_search_space({"a.c": {"type": "categorical", "choices": [0, True, "0", None]}})
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    study = optuna.create_study(sampler=TrialSeededSampler(0, n_startup_trials=4))
    used = []
    study.optimize(lambda t: (used.append(space.suggest(t)["a.c"]), 0.0)[1], n_trials=16)
    recorded = [t.params["a.c"] for t in study.trials]
    assert [(type(v), v) for v in used] == [(type(v), v) for v in recorded]
    assert len({repr(v) for v in used}) >= 3


# --- values a YAML file can hold but a search space cannot use (second review, R2C-3/4)

@pytest.mark.parametrize("text, expect", [
    ("params.a:\n  type: categorical\n  choices: [2024-01-01, x]\n",
     "choices[0] must be a number, string, boolean, null, list or mapping, got date '2024-01-01'"),
    ("params.a:\n  type: categorical\n  choices: [!!binary aGk=, x]\n",
     "choices[0] must be a number, string, boolean, null, list or mapping, got bytes"),
    ("params.a:\n  type: categorical\n  choices: [x, !!set {a: null}]\n",
     "choices[1] must be a number, string, boolean, null, list or mapping, got set"),
    ("params.a:\n  type: categorical\n  choices: [1, .nan]\n",
     "choices[1] must be a number, string, boolean, null, list or mapping, got float 'nan'"),
    ("params.a:\n  type: float\n  low: 0\n  high: 1\n  step: " + "1" + "0" * 400 + "\n",
     "step must be a finite number, got step=an integer of 1329 bits (past float range)"),
], ids=["date", "bytes", "set", "nan", "huge-step"])
def test_yaml_values_no_search_space_can_use_are_named(tmp_path, text, expect):
    """Such values gave a bare TypeError or OverflowError naming neither file nor key."""
    from recsys_router.errors import DataValidationError
    from recsys_router.tuning.space import load_search_space
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(DataValidationError) as err:
        load_search_space(path)
    msg = str(err.value)
    assert expect in msg and "'params.a'" in msg and str(path) in msg and "\n" not in msg, msg
