"""bench_quality's --params parser: literals, strings, and commas inside brackets."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.bench_quality import parse_params  # noqa: E402


def test_nested_literals_keep_their_commas():
    got = parse_params("mf.batch_size=512, task-residual.base_params={'batch_size': 512, "
                       "'lr': 0.01},graph.encoder=minilm,x.grid=[1, 2]")
    assert got == {"mf": {"batch_size": 512},
                   "task-residual": {"base_params": {"batch_size": 512, "lr": 0.01}},
                   "graph": {"encoder": "minilm"}, "x": {"grid": [1, 2]}}


def test_entry_without_router_and_param_is_rejected():
    with pytest.raises(ValueError, match="router.param=value"):
        parse_params("batch_size=512")


def test_readme_block_is_replaced_in_place_or_appended(tmp_path):
    from benchmarks.bench_quality import update_readme
    f = tmp_path / "README.md"
    f.write_text("# B\n\n<!-- bench_quality: r/folds_a -->\nold\n<!-- /bench_quality: r/folds_a -->\n"
                 "\ntail text\n")
    update_readme(f, "r/folds_a", "| new | table |\n")
    update_readme(f, "r/folds_b", "second\n")
    assert f.read_text() == ("# B\n\n<!-- bench_quality: r/folds_a -->\n| new | table |\n"
                             "<!-- /bench_quality: r/folds_a -->\n\ntail text\n\n"
                             "<!-- bench_quality: r/folds_b -->\nsecond\n"
                             "<!-- /bench_quality: r/folds_b -->\n")
    assert not (tmp_path / "README.md.tmp").exists()


def test_unpaired_readme_marker_is_an_error(tmp_path):
    from benchmarks.bench_quality import update_readme
    f = tmp_path / "README.md"
    f.write_text("<!-- bench_quality: r/x -->\nno end\n")
    with pytest.raises(ValueError, match="without its pair"):
        update_readme(f, "r/x", "t\n")
    assert f.read_text() == "<!-- bench_quality: r/x -->\nno end\n"


@pytest.mark.parametrize("split", [{"protocols": ["orbit"], "split_column": "split", "seed": 0},
                                   {"protocols": ["routereval"], "folds": 5, "seed": 3}])
def test_both_parts_honour_no_fallback_and_auto(split):
    # the anchor part once built its config without them, so --no-fallback kept the fallback
    import argparse

    from benchmarks.bench_quality import run_config
    params = {"graph": {"batch_size": 23}, "mf": {"lr": 0.1}}
    for flags, fallback, auto in (({"no_fallback": True, "auto": 4, "auto_objective": "mu_o",
                                    "no_top_check": True, "fallback_metric": None,
                                    "auto_folds": 3}, False, 4),
                                  ({"no_fallback": False, "auto": 0, "auto_objective": "auto",
                                    "no_top_check": False, "fallback_metric": "nauc",
                                    "auto_folds": "auto"}, True, 0)):
        cfg = run_config(argparse.Namespace(seed=1, **flags), ["best-single", "graph"], params,
                         "minilm", **split)
        assert (cfg.fallback, cfg.auto) == (fallback, auto)
        assert cfg.top_check is not flags["no_top_check"]
        assert cfg.auto_objective == flags["auto_objective"]
        assert cfg.fallback_metric == flags["fallback_metric"]
        assert cfg.auto_folds == flags["auto_folds"]
        assert cfg.router_params == {"graph": {"batch_size": 23}}
        assert cfg.protocols == split["protocols"] and cfg.seed == split["seed"]


@pytest.mark.parametrize("flag", ["--auto-objective", "--fallback-metric"])
def test_auto_objective_must_be_one_of_the_choices(flag, tmp_path, capsys):
    # refused by argparse before any data is read or any file is written
    from benchmarks.bench_quality import main
    with pytest.raises(SystemExit):
        main(["--auto", "1", flag, "__import__('os').system('true')",
              "--out", str(tmp_path / "o")])
    assert "invalid choice" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("value", ["0", "21", "2.5", "-1", "all", "os.system", "1" * 500])
def test_auto_folds_must_be_auto_or_a_small_whole_number(value, tmp_path, capsys):
    from benchmarks.bench_quality import main
    with pytest.raises(SystemExit):
        main(["--auto", "1", "--auto-folds", value, "--out", str(tmp_path / "o")])
    assert ("argument --auto-folds: expected 'auto' or a whole number of inner folds from 1 to 20"
            in capsys.readouterr().err)
    assert not (tmp_path / "o").exists()
