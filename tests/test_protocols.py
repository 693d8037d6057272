"""Protocols as registered records: a new protocol is one record (sweep, metrics, leaderboard
column, report section, plot) and the runner, recomputation, report and plots pick it up."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.evaluation import EvalConfig, evaluate, metrics_from_decisions, write_results
from recsys_router.evaluation.protocols import (Protocol, Sweep, get_protocol, metric_row,
                                                parse_protocols, protocol_names,
                                                register_protocol, unregister_protocol)
from recsys_router.evaluation.splits import complete_queries, make_folds


def _first_and_last_sweep(pred, view):
    n = pred.scores.shape[0]
    return Sweep("column", [(0.0, np.zeros(n, dtype=int)),
                            (1.0, np.full(n, len(view.names) - 1))])


def _mean_of_each_point(block, ctx):
    ms = []
    for router, runs in block.runs.items():
        for _, value, ch, _ in runs:
            ms.append(metric_row(router, f"mean_at_{int(value)}",
                                 block.scores[np.arange(len(ch)), ch].mean()))
    return ms, []


def _table(metrics, pool, timings=None):
    sel = metrics[(metrics["protocol"] == "toy") & (metrics["pool"] == pool)]
    return (f"Toy, pool {pool}", f"{len(sel)} toy rows") if len(sel) else None


def _plot(result, path):
    path.write_bytes(b"\x89PNG toy")
    return True


@pytest.fixture
def toy():
    proto = register_protocol(Protocol(
        "toy", sweep=_first_and_last_sweep, metrics=_mean_of_each_point, rank=99,
        in_all=False, leaderboard=(("mean_at_0", "first LLM"),), report=_table,
        plots=(("toy.png", _plot),)))
    yield proto
    unregister_protocol("toy")


def test_a_registered_protocol_runs_end_to_end(toy, tmp_path):
    data = make_synthetic(80, 3, 2, seed=5)
    cfg = EvalConfig(["best-single"], protocols=["toy"], seed=2)
    res = evaluate(data, cfg, progress=False)
    # independent: the same split, then the test queries' true scores of the first/last LLM
    fold = make_folds(data, seed=2)[0]
    test = fold.test.subset(np.flatnonzero(complete_queries(fold.test)))
    m = res.metrics.set_index(["router", "metric"])["value"]
    assert m[("best-single", "mean_at_0")] == pytest.approx(float(np.mean(test.scores[:, 0])))
    assert m[("best-single", "mean_at_1")] == pytest.approx(float(np.mean(test.scores[:, -1])))
    m2, _ = metrics_from_decisions(res.decisions)
    assert m2["value"].tolist() == res.metrics["value"].tolist()
    out, lb = write_results(res, tmp_path / "out")
    assert lb["first LLM"].iloc[0] == pytest.approx(float(np.mean(test.scores[:, 0])))
    assert "## Toy, pool all" in (out / "report.md").read_text()
    assert (out / "toy.png").read_bytes().startswith(b"\x89PNG")


def test_all_expands_to_in_all_protocols_only(toy):
    assert parse_protocols("all") == ["routereval", "routerbench", "orbit", "routellm"]
    assert parse_protocols("toy orbit,toy") == ["toy", "orbit"]
    assert "toy" in protocol_names() and "toy" not in protocol_names(all_only=True)


def test_protocol_needing_costs_is_skipped_with_a_note():
    data = make_synthetic(60, 3, 2, seed=1)
    data.costs = None
    res = evaluate(data, EvalConfig(["best-single"], protocols=["orbit", "routereval"]),
                   progress=False)
    assert res.info["protocols_run"] == ["routereval"]
    assert any("orbit skipped" in n for n in res.notes)


@pytest.mark.parametrize("bad", ["", "All", "all", "a,b", 3])
def test_bad_protocol_names_are_refused(bad):
    with pytest.raises((ValueError, TypeError)):
        register_protocol(Protocol(bad, run=print, in_all=False))


@pytest.mark.parametrize("fields", [{}, {"sweep": print}, {"sweep": print, "metrics": print,
                                                             "run": print, "in_all": False},
                                    {"run": print}])
def test_a_record_has_a_sweep_and_metrics_or_its_own_run(fields):
    with pytest.raises(ValueError, match="either sweep and metrics, or run|runs on its own"):
        register_protocol(Protocol("half", **fields))
    assert "half" not in protocol_names()


def test_duplicate_registration_is_refused():
    with pytest.raises(ValueError, match="already registered"):
        register_protocol(Protocol("orbit", run=print, in_all=False))
    with pytest.raises(TypeError, match="Protocol record"):
        register_protocol({"name": "x"})


def test_unknown_protocol_in_a_decision_file_is_a_clean_error():
    data = make_synthetic(60, 3, 2, seed=1)
    res = evaluate(data, EvalConfig(["best-single"], protocols=["routereval"]), progress=False)
    d = res.decisions.copy()
    d["protocol"] = pd.Categorical(["__import__('os')"] * len(d))
    with pytest.raises(ValueError, match="unknown protocol"):
        metrics_from_decisions(d)
    with pytest.raises(ValueError, match="unknown protocol"):
        get_protocol("os.system")
    with pytest.raises(ValueError, match="unknown protocol"):
        parse_protocols("routereval,nope")


def test_protocols_with_their_own_run_are_records_too(tmp_path, capsys):
    """coldstart and bandit: registered records whose options reach evaluate and whose run is
    dispatched by name; mixing them with sweep protocols is refused."""
    from recsys_router.cli import main
    from recsys_router.cli.evaluate import _run_settings
    assert {"coldstart", "bandit"} <= set(protocol_names()) - set(protocol_names(all_only=True))
    cold = get_protocol("coldstart")
    assert cold.run is not None and [o.flag for o in cold.options][:2] == ["--cold-llms", "--probes"]
    sim = ["--data", "synthetic", "-o", "n_queries=150", "-o", "n_llms=4", "-o", "seed=2"]
    assert main(["evaluate", *sim, "--routers", "best-single", "--protocol", "coldstart,orbit",
                 "--out", str(tmp_path / "x")]) == 2
    assert "runs on its own" in capsys.readouterr().err and not (tmp_path / "x").exists()
    with pytest.raises(ValueError, match="own procedure"):
        evaluate(make_synthetic(60, 3, seed=0), EvalConfig(["best-single"], protocols=["bandit"]),
                 progress=False)
    import argparse
    args = argparse.Namespace(routers=["mf"], encoder=None, split_column=None, seed=3,
                              out="o", no_plots=True, no_progress=True, cold_llms="2",
                              probes=["5", "10"], probe_strategy=["random"], n_seeds=1)
    got = _run_settings(args, cold)
    assert got["probes"] == ["5", "10"] and got["cold_llms"] == "2" and got["plots"] is False
