"""Bad argument values of the benchmark scripts are refused when the command line is parsed:
argparse's one-line error naming the flag (exit 2), never a traceback after the work started,
a silent run on a meaningless value, or a made-up row. Each case adds small sizes, so that a
script that does not check the value would run quickly (and fail the test) rather than hang."""

from __future__ import annotations

import asyncio

import pytest

#: (script, argv, the flag the error must name, more text the error must hold)
CASES = [
    ("bench_data", ["--records", "-1", "--skip-routereval"], "--records", ""),
    ("bench_data", ["--records", "5", "--llms", "20", "--skip-routereval"], "--records 5", "--llms"),
    ("bench_data_checks", ["--queries", "-5"], "--queries", ""),
    ("bench_data_checks", ["--repeat", "0", "--queries", "200", "--split-queries", "1000",
                           "--rows", "50", "--cols", "5"], "--repeat", ">= 1"),
    ("bench_metrics", ["--queries", "-1"], "--queries", ""),
    ("bench_metrics", ["--llms", "0", "--queries", "100"], "--llms", ""),
    ("bench_metrics", ["--loop-queries", "0", "--queries", "100"], "--loop-queries", ""),
    ("bench_json_depth", ["--max-mib", "0"], "--max-mib", ">= 1"),
    ("bench_json_depth", ["--max-mib", "-1"], "--max-mib", ""),
    ("bench_scale", ["--queries", "-1", "--skip-scaling"], "--queries", ""),
    ("bench_scale", ["--scale-llms", "10,0", "--scale-queries", "50", "--skip-full",
                     "--routers", "best-single"], "--scale-llms", ""),
    ("bench_train", ["--queries", "-1", "--models", "mf"], "--queries", ""),
    ("bench_train", ["--models", "bogus", "--queries", "100"], "--models", "implicit-als"),
    ("bench_within_task", ["--folds", "1", "--datasets", "cruxeval", "--encoder", "hashing"],
     "--folds", ">= 2"),
    ("bench_within_task", ["--repeats", "0", "--datasets", "cruxeval", "--encoder", "hashing"],
     "--repeats", ""),
    ("bench_within_task", ["--datasets", "bogus", "--encoder", "hashing"], "--datasets", "routerdc"),
    ("bench_quality", ["--folds", "0", "--part", "folds", "--datasets", "cruxeval", "--encoder",
                       "hashing", "--routers", "best-single", "--out", "{tmp}"], "--folds", ""),
    ("bench_quality", ["--routers", "bogus", "--part", "folds", "--datasets", "cruxeval",
                       "--encoder", "hashing", "--out", "{tmp}"], "--routers", "knn"),
    ("bench_coldstart", ["--routers", "bogus", "--datasets", "cruxeval", "--out", "{tmp}"],
     "--routers", "knn"),
    ("bench_coldstart", ["--seeds", "0", "--datasets", "cruxeval", "--routers", "knn",
                         "--max-train", "50", "--max-test", "20", "--probes", "10", "--aim-k",
                         "10", "--cold-llms", "2", "--strategies", "random", "--encoder",
                         "hashing", "--out", "{tmp}"], "--seeds", ""),
    ("bench_coldstart", ["--probes", "10,-5", "--aim-k", "10", "--datasets", "cruxeval",
                         "--routers", "knn", "--max-train", "50", "--max-test", "20",
                         "--cold-llms", "2", "--strategies", "random", "--encoder", "hashing",
                         "--out", "{tmp}"], "--probes", ""),
    ("bench_feedback", ["--seeds", "0", "--parts", "ope", "--datasets", "cruxeval", "--out",
                        "{tmp}"], "--seeds", ""),
    ("bench_feedback", ["--router", "bogus", "--parts", "train", "--out", "{tmp}"], "--router",
     "mf"),
    ("bench_feedback", ["--datasets", "nosuch", "--parts", "ope", "--seeds", "1", "--out",
                        "{tmp}"], "--datasets", "cruxeval"),
    ("bench_feedback", ["--train-datasets", "cruxeval,nosuch", "--parts", "train", "--out",
                        "{tmp}"], "--train-datasets", "routerdc"),
    ("bench_feedback", ["--online-dataset", "nosuch", "--parts", "online", "--rounds", "10",
                        "--retrain-every", "5", "--out", "{tmp}"], "--online-dataset", "synthetic"),
    ("bench_feedback", ["--target-frac", "-1", "--parts", "ope", "--datasets", "cruxeval",
                        "--seeds", "1", "--n-boot", "0", "--out", "{tmp}"], "--target-frac", ""),
    ("bench_feedback", ["--epsilon", "1.5", "--parts", "train", "--train-datasets", "cruxeval",
                        "--n-boot", "0", "--out", "{tmp}"], "--epsilon", ""),
    ("bench_feedback", ["--online-epsilon", "7", "--parts", "online", "--online-dataset",
                        "synthetic", "--rounds", "10", "--retrain-every", "5", "--out", "{tmp}"],
     "--online-epsilon", ""),
    ("bench_feedback", ["--online-loss", "nosuch", "--parts", "online", "--online-dataset",
                        "synthetic", "--rounds", "10", "--retrain-every", "5", "--out", "{tmp}"],
     "--online-loss", "snips"),
    ("bench_feedback", ["--parts", "ope,nosuch", "--datasets", "cruxeval", "--out", "{tmp}"],
     "--parts", "online"),
    ("bench_feedback", ["--encoder", "minilm:bogus", "--parts", "ope", "--datasets", "cruxeval",
                        "--seeds", "1", "--n-boot", "0", "--out", "{tmp}"], "--encoder", ""),
    ("bench_scale", ["--routers", "nosuch", "--skip-full", "--scale-llms", "5",
                     "--scale-queries", "50"], "--routers", "best-single"),
    ("bench_scale", ["--pools", "nosuch", "--queries", "200", "--llms", "5", "--skip-scaling",
                     "--routers", "best-single"], "--pools", "'all'"),
    ("bench_scale", ["--scale-pools", "3,0", "--skip-full", "--scale-llms", "5",
                     "--scale-queries", "50", "--routers", "best-single"], "--scale-pools", ">= 1"),
    ("bench_scale", ["--encoder", "minilm:bogus", "--skip-full", "--scale-llms", "5",
                     "--scale-queries", "50", "--routers", "knn"], "--encoder", ""),
    ("bench_coldstart", ["--cold-llms", "0", "--datasets", "cruxeval", "--routers", "knn",
                         "--max-train", "50", "--max-test", "20", "--probes", "10", "--aim-k",
                         "10", "--strategies", "random", "--encoder", "hashing", "--out",
                         "{tmp}"], "--cold-llms", ">= 1"),
    # cruxeval (37 LLMs) would run in full before routerdc (7 LLMs) refused 10 cold LLMs
    ("bench_coldstart", ["--datasets", "cruxeval,routerdc", "--cold-llms", "10", "--routers",
                         "knn", "--max-train", "50", "--max-test", "20", "--probes", "10",
                         "--aim-k", "10", "--strategies", "random", "--encoder", "hashing",
                         "--out", "{tmp}"], "--cold-llms", "routerdc"),
    ("bench_coldstart", ["--datasets", "cruxeval", "--cold-llms", "nosuch", "--routers", "knn",
                         "--max-train", "50", "--max-test", "20", "--probes", "10", "--aim-k",
                         "10", "--strategies", "random", "--encoder", "hashing", "--out",
                         "{tmp}"], "--cold-llms", "the pool is"),
    ("bench_encode", ["--n", "0", "--sets", "rb", "--variants", "onnx-int8"], "--n", ""),
    ("profile_graph", ["--steps", "0"], "--steps", ""),
    ("profile_graph", ["--batch", "0", "--steps", "1"], "--batch", ""),
    ("profile_train", ["--model", "bogus"], "--model", "knn"),
    ("profile_train", ["--queries", "-1"], "--queries", ""),
    ("bench_serve_isolation", ["--clients", "0"], "--clients", ""),
    ("bench_serve", ["--requests", "0", "--concurrency", "1", "--encoders", "hashing"],
     "--requests", ""),
    ("bench_serve", ["--concurrency", "0", "--requests", "5", "--encoders", "hashing"],
     "--concurrency", ">= 1"),
    ("bench_serve", ["--concurrency", "1,-3", "--requests", "5", "--encoders", "hashing"],
     "--concurrency", ""),
    ("bench_serve", ["--encoders", "hashing,minilm:bogus", "--requests", "1", "--concurrency",
                     "1"], "--encoders", ""),
]


@pytest.mark.parametrize("script,argv,flag,more", CASES,
                         ids=[f"{c[0]} {' '.join(c[1][:2])}" for c in CASES])
def test_bad_value_is_refused_at_parse_time(bench_script, capsys, tmp_path, script, argv, flag,
                                            more):
    main = bench_script(script).main
    argv = [a.replace("{tmp}", str(tmp_path / "out")) for a in argv]
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2, err
    last = err.strip().splitlines()[-1]
    assert "error:" in last and flag in last and more in last, err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_unknown_names_list_the_valid_ones(bench_script, capsys):
    with pytest.raises(SystemExit):
        bench_script("bench_quality").main(["--routers", "knn,ca-mf,bogus"])
    err = capsys.readouterr().err
    assert "unknown router" in err and "'bogus'" in err
    assert "best-single" in err and "two-tower" in err  # the registry's names


def test_good_names_pass_the_checks(bench_script):
    bq = bench_script("bench_quality")
    assert bq.router_names("knn, ca-mf,cam-knn") == ["knn", "ca-mf", "cam-knn"]
    bc = bench_script("bench_checks")
    assert bc.int_list(1)("1,16,128") == [1, 16, 128]
    with pytest.raises(bc.OptionError, match="ca-bogus"):
        bq.router_names("ca-bogus")


@pytest.mark.parametrize("text", ["1_000", "1" * 21, "1e3", " ", "2.0"])
def test_whole_numbers_are_read_as_the_router_cli_reads_them(bench_script, text):
    """The benchmarks' number types share the router CLI's parser (at most 20 plain digits):
    before, ``int()`` let ``1_000`` and a 21-digit number through."""
    from recsys_router.cli.args import OptionError, positive_int
    bc = bench_script("bench_checks")
    with pytest.raises(OptionError):
        positive_int(text)
    with pytest.raises(bc.OptionError, match="expected a whole number >= 1"):
        bc.at_least(1)(text)
    with pytest.raises(bc.OptionError, match="comma-separated list of whole numbers >= 1"):
        bc.int_list(1)(f"4,{text}")
    assert bc.at_least(1)(" +7 ") == 7 and bc.int_list(2)("2, 3") == [2, 3]


@pytest.mark.parametrize("level", [0, -3])
def test_serve_load_refuses_a_level_without_clients(bench_script, level):
    """Called as main calls it, against a port where nothing listens: before, it returned a
    wall time of ~0 and no latency (a made-up row of millions of requests/s)."""
    bs = bench_script("bench_serve")
    with pytest.raises(ValueError, match="concurrency must be >= 1"):
        asyncio.run(bs._load("http://127.0.0.1:9", ["a", "b"], level))
