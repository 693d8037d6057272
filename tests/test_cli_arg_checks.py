"""Command-line values are checked when parsed (one line naming the option, exit 2, nothing
fitted or written), options a protocol would ignore are refused, and ``evaluate`` fails when
no router produced results."""

from __future__ import annotations

import pytest

from recsys_router.cli import main

_EVAL = ["evaluate", "--data", "synthetic", "-o", "n_queries=120", "-o", "n_llms=3",
         "--encoder", "hashing", "--no-plots", "--no-progress", "--seed", "0"]


def _fails(argv, capsys, *needles):
    """Run ``argv``; it must exit 2 with one error line holding every needle."""
    with pytest.raises(SystemExit) as exc:  # argparse errors exit through SystemExit(2) ...
        rc = main(argv)
        raise SystemExit(rc)                # ... command errors return 2
    assert exc.value.code == 2
    err = capsys.readouterr().err
    line = [x for x in err.splitlines() if "error:" in x]
    assert len(line) == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in line[0], line[0]
    return line[0]


@pytest.mark.parametrize("args, needles", [
    (["--routers", "r_o", "--p", "2"], ("--p", "from 0 to 1")),
    (["--routers", "r_o", "--p", "nan"], ("--p", "'nan'")),
    (["--routers", "knn", "--auto", "-1"], ("--auto", ">= 0")),
    (["--routers", "knn", "--encoder", "bogus"], ("--encoder", "registered encoder", "'bogus'")),
    (["--routers", "knn", "--folds", "0"], ("--folds", ">= 1")),
])
def test_evaluate_values_checked_when_parsed(tmp_path, capsys, monkeypatch, args, needles):
    import recsys_router.cli.evaluate as ev

    def no_load(*a, **k):
        raise AssertionError("the data was loaded before the arguments were checked")
    monkeypatch.setattr(ev, "resolve_dataset", no_load)
    _fails(_EVAL + args + ["--out", str(tmp_path / "o")], capsys, *needles)
    assert not (tmp_path / "o").exists()


def test_evaluate_fails_when_every_router_failed(tmp_path, capsys, monkeypatch):
    import recsys_router.evaluation.runner as runner

    def broken(*a, **k):
        raise ValueError("broken on purpose")
    monkeypatch.setattr(runner, "_build_router", broken)
    line = _fails(_EVAL + ["--routers", "r_o", "--protocol", "routereval",
                           "--out", str(tmp_path / "o")], capsys,
                  "no router produced results", "broken on purpose")
    assert "r_o" in line and not (tmp_path / "o").exists()


def test_folds_and_split_messages_name_the_options(tmp_path, capsys):
    _fails(_EVAL + ["--routers", "best-single", "--folds", "500", "--out", str(tmp_path / "a")],
           capsys, "--folds", "from 1 to 120", "500")
    line = _fails(_EVAL + ["--routers", "best-single", "--split-fractions", "0.8,0.1,0.1",
                           "--split-column", "split", "--out", str(tmp_path / "b")], capsys,
                  "--split-fractions")
    assert "--split," not in line


def test_scaling_max_m_checked(tmp_path, capsys):
    base = ["scaling", "--data", "synthetic", "-o", "n_queries=120", "-o", "n_llms=3",
            "--subsets", "2", "--seed", "0", "--out", str(tmp_path / "s")]
    _fails(base + ["--max-m", "0"], capsys, "--max-m", ">= 1")
    line = _fails(base + ["--max-m", "100"], capsys, "--max-m", "from 1 to 3", "100")
    assert "4, 5" not in line  # the sizes are not listed one by one
    _fails(base + ["--p", "0.5,1.5"], capsys, "--p", "from 0 to 1")


def test_routellm_pair_must_name_llms_of_the_data(tmp_path, capsys, monkeypatch):
    import recsys_router.evaluation.runner as runner

    def no_fit(*a, **k):
        raise AssertionError("a router was fitted before the pair was checked")
    monkeypatch.setattr(runner, "_fit_fold", no_fit)
    _fails(_EVAL + ["--routers", "best-single", "--protocol", "routellm", "--routellm-pair",
                    "nosuch,sim-llm-1", "--out", str(tmp_path / "o")], capsys,
           "--routellm-pair", "nosuch", "sim-llm-0, sim-llm-1, sim-llm-2")
    _fails(_EVAL + ["--routers", "best-single", "--protocol", "routellm", "--routellm-pair",
                    "sim-llm-1,sim-llm-1", "--out", str(tmp_path / "o")], capsys,
           "--routellm-pair", "two different")


_COLD = _EVAL + ["--protocol", "coldstart", "--cold-llms", "1", "--probe-strategy", "random",
                 "--probes", "5"]


@pytest.mark.parametrize("extra, needles", [
    (["--folds", "5"], ("--protocol coldstart does not use", "--folds")),
    (["--split-fractions", "0.5,0.5", "--pools", "2"], ("--split-fractions", "--pools")),
    (["--auto", "3"], ("--auto",)),
    (["--losses", "ips"], ("--losses", "bandit")),
])
def test_coldstart_refuses_options_it_ignores(tmp_path, capsys, extra, needles):
    _fails(_COLD + ["--routers", "knn", "--out", str(tmp_path / "o")] + extra, capsys, *needles)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("routers, extra, flag", [
    ("knn,knn", [], "--routers"),
    ("knn", ["--probe-strategy", "random,random"], "--probe-strategy"),
    ("knn", ["--probes", "5,5"], "--probes"),
])
def test_own_protocol_refuses_duplicates(tmp_path, capsys, routers, extra, flag):
    _fails(_COLD + ["--routers", routers, "--out", str(tmp_path / "o")] + extra, capsys,
           flag, "more than once")


def test_coldstart_probe_counts_differ():
    from recsys_router.evaluation.protocols.coldstart import _ints
    with pytest.raises(ValueError, match="must differ"):
        _ints(["5", "05"])


def test_sweep_protocols_refuse_own_protocol_options(tmp_path, capsys):
    _fails(_EVAL + ["--routers", "best-single", "--probes", "5", "--out", str(tmp_path / "o")],
           capsys, "does not use --probes", "coldstart")


def test_bandit_online_loop_notes_cap_and_no_retraining(tmp_path, capsys):
    rc = main(_EVAL + ["--protocol", "bandit", "--routers", "knn",
                       "--losses", "naive", "--n-boot", "0", "--online-rounds", "1000",
                       "--retrain-every", "500", "--out", str(tmp_path / "b")])
    assert rc == 0
    text = capsys.readouterr().out
    assert "note: --online-rounds 1000: the online loop ran" in text
    assert "never retrained" in text and "retrained every 500" not in text
    assert "never retrained" in (tmp_path / "b" / "report.md").read_text()
