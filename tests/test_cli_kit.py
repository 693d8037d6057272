"""One argument kit and one resolver per concept: lists with commas or spaces in every command,
one KEY=VALUE parser, one router-spec resolver, one config loader, one dataset resolver; each
boundary fed hostile input expects a clean error with nothing executed or written."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from recsys_router.cli import main
from recsys_router.cli.args import OptionError, kv_dict, parse_kv, split_list
from recsys_router.configs import MAX_CONFIG_BYTES, datamodule_from_config, load_yaml_configs
from recsys_router.datasets.resolve import resolve_dataset, select_split, stack_splits
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.router_spec import resolve_router

SIM = ["-o", "n_queries=120", "-o", "n_llms=3", "-o", "n_topics=2", "-o", "seed=4"]


def test_judge_simulate_takes_a_comma_list_of_routers(tmp_path):
    from recsys_router.judge.store import JudgeStore
    db = tmp_path / "j.db"
    assert main(["judge", "simulate", "--data", "synthetic", *SIM, "--routers", "knn,svm",
                 "--n", "15", "--seed", "0", "--db", str(db)]) == 0
    recs = JudgeStore(db).records()
    assert len(recs) == 15 and {r for rec in recs for r in rec.router_choices} == {"knn", "svm"}


def test_evaluate_takes_a_space_list_of_routers(tmp_path, capsys):
    assert main(["evaluate", "--data", "synthetic", *SIM, "--routers", "oracle", "random",
                 "--protocol", "routereval", "orbit", "--out", str(tmp_path / "o"),
                 "--no-plots", "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "| oracle |" in out and "| random |" in out


def test_same_list_whatever_the_separators():
    assert split_list("knn,svm") == split_list(["knn", "svm"]) == split_list(["knn,", "svm"]) \
        == ["knn", "svm"]


def test_one_kv_parser_with_typed_values():
    assert kv_dict(["m=5", "x=0.5", "n=1e3", "flag=true", "off=False", "none=null",
                    "group=all-strong", "l=[1, 2]", "n-queries=7", "empty="]) == {
        "m": 5, "x": 0.5, "n": 1000.0, "flag": True, "off": False, "none": None,
        "group": "all-strong", "l": [1, 2], "n_queries": 7, "empty": ""}


@pytest.mark.parametrize("bad", ["novalue", "=5", "a b=1", "__import__('os').system=1",
                                 "x=!!python/object/apply:os.system ['touch PWNED']",
                                 "x=[unclosed", "x=" + "1" * 20_000])
def test_hostile_kv_items_are_clean_errors(bad, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(OptionError):
        parse_kv(bad)
    assert isinstance(OptionError("x"), ValueError)
    assert not (tmp_path / "PWNED").exists()


def test_bad_option_on_the_command_line_exits_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["data", "info", "synthetic", "-o", "novalue"])
    assert exc.value.code == 2 and "KEY=VALUE" in capsys.readouterr().err


def test_router_spec_resolution_fills_run_settings_only_where_unset():
    r, fit = resolve_router("knn", {"k": 3}, encoder="hashing")
    assert fit and r.get_params()["k"] == 3 and r.get_params()["encoder"] == "hashing"
    r, _ = resolve_router("knn", {"encoder": "tfidf"}, encoder="hashing")
    assert r.get_params()["encoder"] == "tfidf"
    r, _ = resolve_router("random", seed=7)
    assert r.get_params()["seed"] == 7
    r, _ = resolve_router("random", {"seed": 2}, seed=7)
    assert r.get_params()["seed"] == 2
    r, _ = resolve_router("r_o", defaults={"p": 0.25})
    assert r.get_params()["p"] == 0.25
    seen = []
    resolve_router("knn", encoder=lambda default: seen.append(default) or "tfidf")
    assert seen == ["hashing"]


def test_router_instances_are_cloned_or_kept():
    d = make_synthetic(60, 3, 2, seed=0)
    fitted, _ = resolve_router("best-single")
    fitted.fit(d)
    same, need = resolve_router(fitted)
    assert same is fitted and not need
    clone, need = resolve_router(fitted, clone=True)
    assert clone is not fitted and need and not clone.is_fitted


def test_hostile_router_specs_are_clean_errors(tmp_path):
    with pytest.raises(ValueError, match="router 'knn'"):
        resolve_router("knn", {"kk": 3})
    with pytest.raises(TypeError, match="registry name"):
        resolve_router(3)
    with pytest.raises(KeyError, match="unknown router"):
        resolve_router("os.system")
    folder = tmp_path / "not_an_artifact"  # a folder without manifest.json is not loaded
    folder.mkdir()
    with pytest.raises(KeyError, match="unknown router"):
        resolve_router(str(folder))


def test_yaml_configs_merge_in_order(tmp_path):
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text("router: knn\nparams: {k: 3, encoder: hashing}\n")
    b.write_text("params: {k: 5}\n")
    assert load_yaml_configs([a, b]) == {"router": "knn", "params": {"k": 5, "encoder": "hashing"}}


@pytest.mark.parametrize("text, match", [
    ("- a\n- b\n", "must be a YAML mapping"),
    ("x: !!python/object/apply:os.system ['touch PWNED']\n", "cannot read config"),
    ("x: [1, 2\n", "cannot read config"),
])
def test_hostile_config_files_are_clean_errors(text, match, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    p = tmp_path / "c.yaml"
    p.write_text(text)
    with pytest.raises(ValueError, match=match):
        load_yaml_configs([p])
    assert not (tmp_path / "PWNED").exists()


def test_oversized_and_missing_configs(tmp_path):
    big = tmp_path / "big.yaml"
    with open(big, "wb") as fh:
        fh.truncate(MAX_CONFIG_BYTES + 1)
    with pytest.raises(ValueError, match="larger than"):
        load_yaml_configs([big])
    with pytest.raises(FileNotFoundError):
        load_yaml_configs([tmp_path / "nope.yaml"])


@pytest.mark.parametrize("path", ["os.system", "subprocess.Popen",
                                  "recsys_router.datamodules.routing_datamodule.pl",
                                  "recsys_router.datamodules.nope.X",
                                  "recsys_router.datamodules.routing_datamodule._secret"])
def test_data_class_path_outside_the_datamodules_is_refused(path):
    with pytest.raises(ValueError, match="class_path"):
        datamodule_from_config({"class_path": path, "init_args": {}}, "c.yaml")


def test_export_with_a_hostile_data_config_writes_nothing(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("router: best-single\ndata: {class_path: os.system, init_args: {}}\n")
    out = tmp_path / "art"
    assert main(["export", "-c", str(cfg), "--out", str(out)]) == 2
    assert "class_path" in capsys.readouterr().err and not out.exists()


def test_dataset_resolution():
    d = resolve_dataset("synthetic", seed=1, n_queries=40, n_llms=3)
    assert (d.n_queries, d.n_llms) == (40, 3)
    parts = d.split((0.5, 0.5), seed=0)
    stacked = stack_splits(parts)
    assert stacked.n_queries == 40
    test = select_split(stacked, "test")
    assert np.all(test.queries["split"] == "test") and test.n_queries == parts["test"].n_queries
    with pytest.raises(ValueError, match="no query has split 'dev'"):
        select_split(stacked, "dev")
    with pytest.raises(ValueError, match="several datasets"):
        stack_splits({"a": d, "b": d}, "x")
    with pytest.raises(ValueError, match="no recorded answers"):
        resolve_dataset("synthetic", with_responses=True)
    with pytest.raises(ValueError, match="colour"):
        resolve_dataset("synthetic", colour="red")


def test_every_command_takes_seed():
    from recsys_router.cli import build_parser
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = []
    for name, p in sub.choices.items():
        inner = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        leaves = inner[0].choices.items() if inner else [(None, p)]
        for leaf, q in leaves:
            if not any("--seed" in a.option_strings for a in q._actions):
                missing.append(f"{name} {leaf or ''}".strip())
    assert not missing, missing


def test_every_command_that_names_a_dataset_has_the_data_kit():
    """--data (or the positional dataset of ``data``) always comes with --data-dir, -o and
    --trust-pickle, and --routers always accepts lists (ListArg)."""
    from recsys_router.cli import build_parser
    from recsys_router.cli.args import ListArg
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    checked, missing = 0, []
    for name, p in sub.choices.items():
        inner = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        for leaf, q in (inner[0].choices.items() if inner else [(None, p)]):
            flags = {f: a for a in q._actions for f in a.option_strings}
            named = "--data" in flags or any(a.dest == "dataset" for a in q._actions)
            if named and name != "data" or (name == "data" and leaf in ("info", "convert")):
                checked += 1
                for need in ("--data-dir", "-o", "--data-option", "--trust-pickle"):
                    if need not in flags:
                        missing.append(f"{name} {leaf or ''}: {need}")
            if "--routers" in flags and not isinstance(flags["--routers"], ListArg):
                missing.append(f"{name} {leaf or ''}: --routers is not a list argument")
    assert checked >= 8 and not missing, missing


class _Opens:
    """Unpickling this object calls open(path, "w"): a marker file shows code ran."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_a_checkpoint_is_not_unpickled_without_trust(tmp_path):
    import pickle

    from recsys_router.export import build_router
    marker = tmp_path / "PWNED"
    ckpt = tmp_path / "evil.ckpt"
    ckpt.write_bytes(pickle.dumps(_Opens(marker)))
    with pytest.raises(ValueError, match="trust_pickle"):
        build_router(ckpt=ckpt)
    assert not marker.exists()
    pickle.loads(ckpt.read_bytes()).close()  # the file really runs code when unpickled
    assert marker.exists()


def test_top_level_help_names_the_lightning_commands(capsys):
    """fit/validate/test/predict go to LightningCLI, outside argparse's sub-commands; the
    top-level help still names them and how to see their options."""
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "Lightning commands (fit, validate, test, predict)" in out
    assert "recsys-router fit --help" in out
