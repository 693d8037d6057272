"""The ``evaluate`` and ``demo`` commands, and one evaluation on the real RouterBench data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from conftest import shared_path
from recsys_router.cli import main
from recsys_router.evaluation import EvalConfig, evaluate, metrics_from_decisions
from recsys_router.evaluation.protocols import parse_protocols
from recsys_router.evaluation.splits import parse_pools


def test_evaluate_command_prints_leaderboard(tmp_path, capsys):
    out = tmp_path / "ev"
    rc = main(["evaluate", "--data", "synthetic", "--routers", "oracle,best-single,random",
               "--protocol", "routereval,orbit", "--split-fractions", "0.6,0.4", "--seed", "2",
               "--no-progress", "--no-plots", "--out", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "| router |" in text and "oracle" in text and "SIMULATED" in text
    m = pd.read_csv(out / "metrics.csv", dtype={"fold": str})
    assert set(m["protocol"]) == {"routereval", "orbit"}
    assert set(m["pool"].astype(str)) == {"all"} and set(m["group"]) == {"all"}


def test_evaluate_command_reports_bad_input(tmp_path, capsys):
    rc = main(["evaluate", "--data", "synthetic", "--routers", "oracle", "--protocol", "nope",
               "--out", str(tmp_path / "x")])
    assert rc == 2 and "unknown protocol" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
    with pytest.raises(ValueError, match="neither an integer nor 'all'"):
        parse_pools("3,five")
    assert parse_pools("3, all,3") == [3, "all"] and parse_protocols("all")[0] == "routereval"


def test_demo_runs_and_prints_report_path(tmp_path, capsys):
    out = tmp_path / "demo"
    rc = main(["demo", "--out", str(out), "--n-queries", "300", "--routers", "oracle,knn,random",
               "--no-progress"])
    assert rc == 0
    text = capsys.readouterr().out
    assert f"report: {out.absolute() / 'report.md'}" in text
    assert "SIMULATED" in text and (out / "report.md").exists()
    m = pd.read_csv(out / "metrics.csv", dtype={"fold": str, "pool": str})
    assert {"all", "3"} <= set(m["pool"])  # the demo also shows RouterEval's candidate groups


def test_real_routerbench_oracle_beats_every_llm():
    shared_path("routerbench_zs")
    from recsys_router.datasets.resolve import resolve_dataset
    data = resolve_dataset("routerbench_zs", stack=True)
    from recsys_router.encoders import get_encoder
    enc = get_encoder("hashing", dim=256, char_ngrams=None)  # word n-grams only: fast
    cfg = EvalConfig(["oracle", "best-single", "knn"], protocols=["routereval", "orbit"],
                     split_column="split", encoder=enc, seed=0)
    res = evaluate(data, cfg, progress=False)
    m = res.metrics
    mu = m[(m.protocol == "routereval") & (m.metric == "mu_o")].set_index("router")["value"]
    singles = mu[mu.index.str.startswith("LLM:") & (mu.index != "LLM:oracle-bound")]
    assert len(singles) == data.n_llms + 1  # every LLM plus the best one
    assert (mu["oracle"] >= singles).all() and mu["oracle"] == pytest.approx(mu["LLM:oracle-bound"])
    # the best single LLM of the published test split is GPT-4 (RouterBench's own finding)
    best = singles.drop("LLM:best").idxmax()
    assert best == "LLM:gpt-4-1106-preview"
    orbit = m[m.protocol == "orbit"].set_index(["router", "metric"])["value"]
    assert orbit[("oracle", "peak")] >= orbit[("best-single", "peak")]
    assert orbit[("oracle", "rqnc")] < 0.5  # the oracle reaches GPT-4's quality far cheaper
    m2, _ = metrics_from_decisions(res.decisions)
    np.testing.assert_allclose(np.sort(m2["value"].to_numpy()), np.sort(m["value"].to_numpy()),
                               equal_nan=True)


def test_v_r_for_routereval_benchmarks_and_data_options():
    from recsys_router.cli.args import kv_dict
    from recsys_router.datasets.synthetic import make_synthetic
    from recsys_router.evaluation.protocols.routereval import reference_benchmark
    assert kv_dict(["m=5", "group=all-strong", "x=0.5"]) == {"m": 5, "group": "all-strong",
                                                             "x": 0.5}
    with pytest.raises(ValueError, match="KEY=VALUE"):
        kv_dict(["m5"])
    assert reference_benchmark("routereval-arc-easy-5-all_strong") == "arc"
    d = make_synthetic(150, 3, 2, seed=9, with_text=False)
    d.name = "routereval-gsm8k-easy-3-all_strong"
    res = evaluate(d, EvalConfig(["oracle"], protocols=["routereval"]), progress=False)
    m = res.metrics.set_index(["router", "metric"])["value"]
    assert m[("oracle", "v_r")] == pytest.approx(m[("oracle", "mu_o")] / 0.92)  # gsm8k reference


def test_unknown_or_duplicate_routers_fail_before_fitting():
    from recsys_router.datasets.synthetic import make_synthetic
    d = make_synthetic(60, 3, 2, seed=1, with_text=False)
    with pytest.raises(ValueError, match="unknown router"):
        evaluate(d, EvalConfig(["oracle", "no-such-router"]), progress=False)
    with pytest.raises(ValueError, match="more than once"):
        evaluate(d, EvalConfig(["oracle", "oracle"]), progress=False)


@pytest.mark.parametrize("flag", [[], ["--no-progress"]])
def test_no_progress_hides_the_encoder_bar_too(tmp_path, capsys, flag):
    """``--no-progress`` ("hide the progress bar") left the encoder's tqdm bar on stderr (shown
    over 1,000 texts in more than four batches: a hashing encoder of batch 8 here)."""
    from recsys_router.encoders import ENCODERS, HashingEncoder, register_encoder
    register_encoder("hash-b8", lambda arg, **kw: HashingEncoder(dim=16, batch_size=8, **kw))
    try:
        rc = main(["evaluate", "--data", "synthetic", "-o", "n_queries=1100", "-o", "n_llms=3",
                   "--routers", "knn", "--encoder", "hash-b8", "--protocol", "routereval",
                   "--seed", "0", "--no-plots", "--out", str(tmp_path / "ev"), *flag])
    finally:
        ENCODERS.unregister("hash-b8")
    assert rc == 0
    err = capsys.readouterr().err
    assert ("encoding (hashing" in err) == (not flag), err[-500:]
