"""``--seed`` is checked when the command line is parsed, for every command: a negative or
too large seed is refused before anything is created (``judge simulate`` used to leave an
empty database, ``judge report`` an empty folder)."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from recsys_router.cli import build_parser, main
from recsys_router.cli.args import MAX_SEED, OptionError, count, finite_float, positive_int, seed_value


def _leaves(parser, path=()):
    """(command path, parser) of every sub-command that takes arguments of its own."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
    for a in subs:
        for name, p in a.choices.items():
            yield from _leaves(p, (*path, name))


def test_every_command_checks_its_seed():
    leaves = list(_leaves(build_parser()))
    assert len(leaves) >= 15
    for path, p in leaves:
        seed = [a for a in p._actions if "--seed" in a.option_strings]
        assert seed, f"{' '.join(path)} takes no --seed"
        assert seed[0].type is seed_value, f"{' '.join(path)}: --seed is not checked"
        assert seed[0].help not in (None, argparse.SUPPRESS), f"{' '.join(path)} hides --seed"
        assert "--seed" in p.format_help(), f"{' '.join(path)}: --help does not list --seed"


@pytest.mark.parametrize("text", ["-1", str(MAX_SEED + 1), "1.5", "x", ""])
def test_seed_values_refused(text):
    with pytest.raises(OptionError, match="expected a whole number from 0 to 4294967295"):
        seed_value(text)


def test_numbers():
    assert seed_value("0") == 0 and seed_value(str(MAX_SEED)) == 2**32 - 1
    assert count("0") == 0 and positive_int("1") == 1
    for fn, bad in ((count, "-1"), (positive_int, "0"), (positive_int, "2.0")):
        with pytest.raises(OptionError):
            fn(bad)
    for bad in ("nan", "inf", "-inf", "x"):
        with pytest.raises(OptionError, match="expected a finite number"):
            finite_float(bad)


@pytest.mark.parametrize("argv,made", [
    (["judge", "simulate", "--data", "synthetic", "--routers", "random,best-single", "--db", "{t}/j.db"], "j.db"),
    (["judge", "report", "--db", "{t}/j.db", "--out", "{t}/rep"], "rep"),
    (["evaluate", "--data", "synthetic", "--routers", "knn", "--out", "{t}/ev"], "ev"),
    (["data", "info", "synthetic"], None)])
def test_negative_seed_exits_2_and_creates_nothing(tmp_path, capsys, argv, made):
    argv = [a.replace("{t}", str(tmp_path)) for a in argv]
    with pytest.raises(SystemExit) as ei:
        main([*argv, "--seed", "-1"])
    assert ei.value.code == 2
    assert "argument --seed: expected a whole number from 0 to 4294967295, got '-1'" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv", [
    ["evaluate", "--routers", "best-single", "--out", "OUT"],
    ["scaling", "--out", "OUT"],
    ["probes", "ART", "--out", "OUT"],
    ["calibrate", "ART", "--target-cost", "1"],
    ["judge", "simulate", "--routers", "best-single,random", "--db", "OUT.db"],
    ["export", "--router", "best-single", "--out", "OUT"],
], ids=["evaluate", "scaling", "probes", "calibrate", "judge-simulate", "export"])
def test_generated_data_is_drawn_with_the_commands_seed(tmp_path, monkeypatch, capsys, argv):
    """``evaluate --data synthetic --seed 7`` evaluated the seed-0 dataset (the seed reached
    the split, pools and routers only), while ``data info --seed 7`` described another one."""
    import recsys_router.cli.data as cli_data
    import recsys_router.datasets.resolve as resolve   # export's build_router reads it there
    seen = []

    def spy(name, **kw):
        seen.append(kw.get("seed"))
        raise ValueError("stop here")
    monkeypatch.setattr(cli_data, "resolve_dataset", spy)
    monkeypatch.setattr(resolve, "resolve_dataset", spy)
    from recsys_router.datasets.synthetic import make_synthetic
    from recsys_router.export import export_router
    from recsys_router.registry import make_router
    d = make_synthetic(30, 3, 2, seed=0)
    art = export_router(make_router("best-single").fit(d), tmp_path / "a", train_data=d)
    sub = {"OUT": str(tmp_path / "o"), "OUT.db": str(tmp_path / "j.db"), "ART": str(art)}
    args = [sub.get(a, a) for a in argv] + ["--data", "synthetic"]
    assert main(args + ["--seed", "7"]) == 2 and "stop here" in capsys.readouterr().err
    assert main(args + ["--seed", "7", "-o", "seed=3"]) == 2   # -o seed= gives the data its own
    assert seen == [7, 3]


@pytest.mark.parametrize("argv", [
    ["evaluate", "--routers", "best-single", "--out", "OUT"],
    ["export", "--router", "best-single", "--out", "OUT"],
], ids=["evaluate", "export"])
def test_a_seed_option_for_data_read_from_files_is_refused(tmp_path, capsys, argv):
    """``-o seed=3`` on data that is read, not drawn, was dropped without a word (the run used
    nothing of it); it is refused naming the dataset, before anything is written. A generated
    dataset still takes it (previous test)."""
    from recsys_router.datasets.synthetic import make_synthetic
    from recsys_router.datasets.generic import write_long
    path = tmp_path / "d.csv"
    write_long(make_synthetic(30, 3, 2, seed=0), path)
    out = tmp_path / "o"
    args = [str(out) if a == "OUT" else a for a in argv]
    for data in (str(path), "routerbench_zs", "synthetc"):   # a misspelt name: the valid ones
        assert main(args + ["--data", data, "--seed", "7", "-o", "seed=3"]) == 2
        err = capsys.readouterr().err
        assert (f"-o seed=3: {data!r} is not a generated dataset (synthetic, synthetic-many, "
                "synthetic-routereval); data read from files takes no seed") in err
        assert not out.exists()


@pytest.mark.parametrize("sub", [["info"], ["convert", "--to", "OUT.csv"]], ids=["info", "convert"])
def test_data_commands_treat_the_seed_option_as_every_command_does(tmp_path, capsys, sub):
    """``data info``/``data convert`` dropped ``-o seed=3`` on data read from files without a
    word; it is refused as in every other command, and draws generated data."""
    from recsys_router.datasets.synthetic import make_synthetic
    from recsys_router.datasets.generic import load_generic, write_long
    path = tmp_path / "d.csv"
    write_long(make_synthetic(30, 3, 2, seed=0), path)
    out = tmp_path / "o.csv"
    argv = ["data"] + [str(out) if a == "OUT.csv" else a for a in sub]
    for data in (str(path), "routerbench_zs"):
        assert main(argv[:2] + [data] + argv[2:] + ["-o", "seed=3"]) == 2
        err = capsys.readouterr().err
        assert f"-o seed=3: {data!r} is not a generated dataset" in err
        assert not out.exists()
    assert main(argv[:2] + ["synthetic", "--n-queries", "30", "--n-llms", "3",
                            "-o", "seed=7"] + argv[2:]) == 0
    if sub[0] == "convert":   # the data drawn with seed 7, not the default seed
        got = load_generic(out)
        assert np.array_equal(got.scores, make_synthetic(30, 3, seed=7).scores)
        assert not np.array_equal(got.scores, make_synthetic(30, 3, seed=0).scores)
