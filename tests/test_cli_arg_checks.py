"""Command-line values are checked when parsed (one line naming the option, exit 2, nothing
fitted or written), options a protocol would ignore are refused, and ``evaluate`` fails when
no router produced results."""

from __future__ import annotations

import pytest

from recsys_router.cli import main

from cli_checks import fails_in_one_line

_EVAL = ["evaluate", "--data", "synthetic", "-o", "n_queries=120", "-o", "n_llms=3",
         "--encoder", "hashing", "--no-plots", "--no-progress", "--seed", "0"]


_fails = fails_in_one_line


@pytest.mark.parametrize("args, needles", [
    (["--routers", "r_o", "--p", "2"], ("--p", "from 0 to 1")),
    (["--routers", "r_o", "--p", "nan"], ("--p", "'nan'")),
    (["--routers", "knn", "--auto", "-1"], ("--auto", ">= 0")),
    (["--routers", "knn", "--encoder", "bogus"], ("--encoder", "registered encoder", "'bogus'")),
    # a name longer than a path may be (OSError from the local-folder check)
    (["--routers", "knn", "--encoder", "x" * 300], ("--encoder", "registered encoder", "'xxx")),
    # a registered scheme with an argument it does not take (ran, then knn failed with a warning)
    (["--routers", "knn,best-single", "--encoder", "minilm:bogus"],
     ("--encoder", "unknown MiniLM variant 'bogus'", "bf16, fp32, int8, int8-batched, torch")),
    (["--routers", "knn", "--encoder", "hashing:64"], ("--encoder", "takes no ':' argument")),
    (["--routers", "knn", "--folds", "0"], ("--folds", ">= 1")),
])
def test_evaluate_values_checked_when_parsed(tmp_path, capsys, monkeypatch, args, needles):
    import recsys_router.cli.data as cli_data   # where every command's load_data reads the data

    def no_load(*a, **k):
        raise AssertionError("the data was loaded before the arguments were checked")
    monkeypatch.setattr(cli_data, "resolve_dataset", no_load)
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


@pytest.mark.parametrize("argv", [["serve", "ART", "--port", "70000"],
                                  ["serve", "ART", "--port", "-1"],
                                  ["serve", "ART", "--port", "0"],
                                  ["judge", "serve", "--data", "synthetic", "--routers", "a,b",
                                   "--db", "DB", "--port", "65536"]])
def test_ports_must_be_1_to_65535(tmp_path, capsys, argv):
    argv = [str(tmp_path / a) if a in ("ART", "DB") else a for a in argv]
    _fails(argv, capsys, "--port", "from 1 to 65535")
    assert not list(tmp_path.iterdir())
    from recsys_router.cli.args import port
    assert port("1") == 1 and port("65535") == 65535


@pytest.mark.parametrize("value, says", [
    ("nan,1", "'nan'"), ("0,inf", "'inf'"), ("1", "two numbers"), ("1,2,3", "two numbers"),
    ("", "two numbers"), ("10,0", "LOW < HIGH"), ("1,1", "LOW < HIGH"),
    ("0,1e13", "within +-1e+12"), ("-1e308,1e308", "within +-1e+12"), ("a,b", "'a'"),
])
@pytest.mark.parametrize("command", ["serve", "onboard"])
def test_score_range_is_two_ordered_bounded_numbers(tmp_path, capsys, value, says, command):
    """``--score-range LOW,HIGH`` on ``serve`` and ``onboard``: refused when parsed (one line,
    exit 2, nothing written) unless two finite numbers with LOW < HIGH within +-1e12 (an equal
    pair left only one score; huge ones made the probe scale infinite)."""
    art = str(tmp_path / "art")
    argv = (["serve", art] if command == "serve" else
            ["onboard", art, "--llm", "x", "--scores", str(tmp_path / "a.csv"),
             "--out", str(tmp_path / "o")])
    _fails([*argv, f"--score-range={value}"], capsys, "--score-range", says)
    assert not list(tmp_path.iterdir())
    from recsys_router.cli.args import score_range_arg
    assert score_range_arg("-1e12,1e12") == (-1e12, 1e12) and score_range_arg("0,0.5") == (0, 0.5)


@pytest.mark.parametrize("target, needles", [
    (["--target-cost", "-1"], ("--target-cost", ">= 0")),
    (["--target-cost", "nan"], ("--target-cost", "'nan'")),
    (["--target-share", "sim-llm-1=2"], ("--target-share", "from 0 to 1")),
    (["--target-share", "sim-llm-1=-0.1"], ("--target-share", "from 0 to 1")),
    (["--target-share", "0.3"], ("--target-share", "LLM=SHARE")),
])
def test_calibrate_targets_checked_when_parsed(tmp_path, capsys, target, needles):
    _fails(["calibrate", str(tmp_path / "art"), "--data", "synthetic"] + target, capsys, *needles)


def test_calibrate_artifact_refuses_impossible_targets_before_reading(tmp_path):
    from recsys_router.datasets.synthetic import make_synthetic
    from recsys_router.export import calibrate_artifact
    data = make_synthetic(30, 3, seed=0)
    with pytest.raises(ValueError, match="target_cost must be a finite number >= 0"):
        calibrate_artifact(tmp_path / "none", data, target_cost=float("nan"))
    with pytest.raises(ValueError, match="target share of 'sim-llm-1' must be"):
        calibrate_artifact(tmp_path / "none", data, target_share=("sim-llm-1", 2.0))


@pytest.mark.parametrize("argv, flag", [
    (["--seed", "3", "-o", "seed=7"], "--seed"),
    (["--n-queries", "100", "-o", "n_queries=50"], "--n-queries"),
])
def test_data_option_given_twice_is_refused(capsys, argv, flag):
    for cmd in (["data", "info", "synthetic"], ["data", "convert", "synthetic", "--to", "x.csv"]):
        _fails(cmd + argv, capsys, flag, "-o", "give only one")


def test_data_options_alone_still_apply(capsys):
    assert main(["data", "info", "synthetic", "-o", "seed=3", "-o", "n_queries=40"]) == 0
    assert "queries   40" in capsys.readouterr().out


@pytest.mark.parametrize("routers, pools, p", [
    (["best-single", "knn"], [3], None),       # sized pools (all three groups formed here)
    (["best-single", "r_o"], ["all"], 2.0),   # a router that fails
])
def test_progress_bar_ends_full(monkeypatch, routers, pools, p):
    import tqdm.auto

    from recsys_router.datasets.synthetic import make_synthetic
    from recsys_router.evaluation import EvalConfig, evaluate
    bars = []

    class Bar(tqdm.auto.tqdm):
        def __init__(self, *a, **k):
            super().__init__(*a, **{**k, "disable": True})
            self.done = 0
            bars.append(self)

        def update(self, n=1):
            self.done += n
            self.n = self.done  # a disabled bar does not count by itself

    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    cfg = EvalConfig(routers, pools=pools, p=p, encoder="hashing", seed=0, folds=2)
    evaluate(make_synthetic(120, 5, seed=0), cfg, progress=True)
    assert bars and bars[0].done == bars[0].total


@pytest.mark.parametrize("policy, needle", [("epsilon-greedy:1.5", "0 < E <= 1"),
                                            ("softmax", "must be uniform")])
def test_bandit_logging_policy_checked_before_the_data_loads(tmp_path, capsys, monkeypatch,
                                                             policy, needle):
    import recsys_router.cli.evaluate as ce

    def no_load(args):
        raise AssertionError("the data was loaded before --logging-policy was checked")
    monkeypatch.setattr(ce, "_load", no_load)
    _fails(_EVAL + ["--routers", "knn", "--protocol", "bandit", "--logging-policy", policy,
                    "--out", str(tmp_path / "o")], capsys, "--logging-policy", needle)
    assert not (tmp_path / "o").exists()


def test_export_refuses_an_existing_out_before_fitting(tmp_path, capsys, monkeypatch):
    import recsys_router.export as ex

    def no_fit(**kwargs):
        raise AssertionError("the router was fitted before --out was checked")
    monkeypatch.setattr(ex, "build_router", no_fit)
    out = tmp_path / "art"
    out.mkdir()
    (out / "mine.txt").write_text("x")
    _fails(["export", "--router", "knn", "--data", "synthetic", "--seed", "0", "--out", str(out)],
           capsys, "already exists", "--overwrite")
    assert [p.name for p in out.iterdir()] == ["mine.txt"]


@pytest.mark.parametrize("extra, needles", [
    (["--policy", "wtp", "--policy-value", "nan"], ("--policy-value", "nan")),
    (["--policy", "budget", "--policy-value", "-2"], ("--policy-value", "-2")),
])
def test_export_numbers_checked_when_parsed(tmp_path, capsys, monkeypatch, extra, needles):
    import recsys_router.export as ex

    def no_fit(**kwargs):
        raise AssertionError("the router was fitted before the option was checked")
    monkeypatch.setattr(ex, "build_router", no_fit)
    _fails(["export", "--router", "knn", "--data", "synthetic", "--seed", "0", "--out",
            str(tmp_path / "art")] + extra, capsys, *needles)
    assert not (tmp_path / "art").exists()


def test_group_method_parsed_and_a_bad_value_refused(tmp_path, capsys, monkeypatch):
    import recsys_router.evaluation as ev
    seen = []

    def fake_evaluate(data, cfg, progress=True):
        seen.append(cfg.group_method)
        raise ValueError("stop here")
    monkeypatch.setattr(ev, "evaluate", fake_evaluate)
    base = _EVAL + ["--routers", "best-single", "--pools", "2", "--out", str(tmp_path / "o")]
    for argv, want in ((base, "routereval"), (base + ["--group-method", "oracle-best"],
                                              "oracle-best")):
        _fails(argv, capsys, "stop here")
        assert seen[-1] == want
    line = _fails(base + ["--group-method", "best"], capsys, "--group-method", "invalid choice")
    assert "routereval" in line and "oracle-best" in line
    assert len(seen) == 2


def test_group_method_reaches_the_groups_evaluate_builds():
    from recsys_router.datasets.synthetic import make_synthetic
    from recsys_router.evaluation import EvalConfig, evaluate
    from recsys_router.evaluation.splits import make_folds
    from recsys_router.pools import candidate_groups
    data = make_synthetic(150, 15, seed=1)
    train = make_folds(data, seed=0)[0].train
    want = {meth: candidate_groups(train, 3, method=meth, seed=0)
            for meth in ("routereval", "oracle-best")}
    assert want["routereval"] != want["oracle-best"]     # the two constructions differ here
    for method, groups in want.items():
        res = evaluate(data, EvalConfig(["best-single"], protocols=["routereval"], pools=[3],
                                        group_method=method, encoder="hashing", seed=0),
                       progress=False)
        m = res.metrics[(res.metrics["pool"] == "3") & res.metrics["router"].str.startswith("LLM:")]
        for g, names in groups.items():
            got = {r for r in m.loc[m["group"] == g, "router"] if r.startswith("LLM:sim-")}
            assert got == {"LLM:" + n for n in names}, (method, g)
    with pytest.raises(ValueError, match="group_method must be one of"):
        evaluate(data, EvalConfig(["best-single"], pools=[3], group_method="best"), progress=False)


@pytest.mark.parametrize("extra, needles", [
    (["--groups", "all-weak"], ("--groups all-weak", "sized candidate pools", "leave --groups out")),
    (["--group-method", "oracle-best"], ("--group-method oracle-best", "applies only")),
    (["--pools", "all", "--groups", "all-strong", "--group-method", "oracle-best"],
     ("leave --groups and --group-method out",)),
])
def test_group_options_without_a_sized_pool_refused_before_loading(tmp_path, capsys, monkeypatch,
                                                                    extra, needles):
    import recsys_router.cli.data as cli_data

    def no_load(*a, **k):
        raise AssertionError("the data was loaded before the arguments were checked")
    monkeypatch.setattr(cli_data, "resolve_dataset", no_load)
    _fails(_EVAL + ["--routers", "best-single", "--out", str(tmp_path / "o")] + extra,
           capsys, *needles)
    assert not (tmp_path / "o").exists()


def test_group_given_twice_counts_once():
    """``--groups all-weak,all-weak`` evaluated the group twice, and the recomputation then
    failed on decisions covering each query twice; a repeated group now counts once, as a
    repeated pool size does."""
    from recsys_router.datasets.synthetic import make_synthetic
    from recsys_router.evaluation import EvalConfig, evaluate
    data = make_synthetic(120, 6, seed=2)
    runs = {}
    for groups in (["all-weak"], ["all-weak", "all-weak"]):
        res = evaluate(data, EvalConfig(["best-single", "random"], protocols=["routereval"],
                                        pools=[2], groups=groups, encoder="hashing", seed=0),
                       progress=False)
        runs[len(groups)] = res.metrics.sort_values(list(res.metrics.columns[:4])
                                                    ).reset_index(drop=True)
    assert "all-weak" in set(runs[2]["group"]) and not set(runs[2]["group"]) - {"all-weak", "mean"}
    assert runs[2].equals(runs[1])


def test_library_evaluate_refuses_groups_without_a_sized_pool():
    from recsys_router.datasets.synthetic import make_synthetic
    from recsys_router.evaluation import EvalConfig, evaluate
    data = make_synthetic(60, 3, seed=0)
    with pytest.raises(ValueError, match=r"groups \(--groups all-weak\) apply only"):
        evaluate(data, EvalConfig(["best-single"], groups=["all-weak"]), progress=False)
    with pytest.raises(ValueError, match="unknown candidate group"):
        evaluate(data, EvalConfig(["best-single"], pools=[2], groups=["weakest"]), progress=False)


@pytest.mark.parametrize("protocol", ["routereval", "orbit,routerbench", "bandit"])
def test_routellm_pair_refused_without_the_routellm_protocol(tmp_path, capsys, monkeypatch,
                                                              protocol):
    """``--routellm-pair`` was checked against the data and then ignored when routellm did not
    run; it is refused, before the data loads, like other options nothing reads."""
    import recsys_router.cli.data as cli_data

    def no_load(*a, **k):
        raise AssertionError("the data was loaded before the arguments were checked")
    monkeypatch.setattr(cli_data, "resolve_dataset", no_load)
    _fails(_EVAL + ["--routers", "best-single", "--protocol", protocol, "--routellm-pair",
                    "sim-llm-0,sim-llm-1", "--out", str(tmp_path / "o")], capsys,
           f"--protocol {protocol} does not use --routellm-pair", "--protocol routellm")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("protocol", ["routellm", "routereval,routellm", "all"])
def test_routellm_pair_accepted_where_routellm_runs(protocol):
    from recsys_router.cli.evaluate import _check_options_used
    from recsys_router.cli import build_parser
    from recsys_router.evaluation.protocols import get_protocol, parse_protocols
    args = build_parser().parse_args(_EVAL + ["--routers", "best-single", "--protocol", protocol,
                                              "--routellm-pair", "a,b", "--out", "o"])
    _check_options_used(args, [get_protocol(n) for n in parse_protocols(args.protocol)])
