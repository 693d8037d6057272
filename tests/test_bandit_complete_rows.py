"""The bandit protocol logs and tests only queries with every LLM observed: the report and
config.json give the counts it used (not those before the drop), a note says how many were
left out and why, and data with no complete training (or test) query is refused with an error
that says what the protocol needs."""

from __future__ import annotations

import csv
import json

import numpy as np
import pandas as pd
import pytest

from recsys_router.cli import main

_N_TRAIN, _N_TEST, _L = 20, 10, 3


def _matrix(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.random((_N_TRAIN + _N_TEST, _L)) < np.array([0.3, 0.6, 0.8])).astype(float)


def _write(path, scores: np.ndarray) -> str:
    """A long CSV: the first ``_N_TRAIN`` queries train, the others test; NaN cells absent."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["query_id", "query_text", "model", "score", "cost", "split"])
        for i, row in enumerate(scores):
            for j, v in enumerate(row):
                if not np.isnan(v):
                    w.writerow([f"q{i}", f"question {i} about topic {i % 3}", f"L{j}", v,
                                [0.1, 0.5, 1.0][j], "train" if i < _N_TRAIN else "test"])
    return str(path)


def _run(tmp_path, scores, *extra):
    out = tmp_path / "out"
    rc = main(["evaluate", "--data", _write(tmp_path / "d.csv", scores), "--split-column",
               "split", "--routers", "knn", "--protocol", "bandit", "--losses", "naive",
               "--n-boot", "0", "--seed", "0", "--no-plots", "--no-progress", "--out", str(out),
               *extra])
    return rc, out


def test_counts_and_note_give_the_queries_actually_logged(tmp_path, capsys):
    S = _matrix()
    S[[0, 3, 4, 8, 11, 12, 19], 0] = np.nan      # 7 of the 20 training queries miss L0
    S[[21, 27], 2] = np.nan                      # 2 of the 10 test queries miss L2
    rc, out = _run(tmp_path, S)
    assert rc == 0
    printed = capsys.readouterr().out
    report = (out / "report.md").read_text().splitlines()
    assert "13 logged training queries" in report[2] and "8 test queries" in report[2]
    config = json.loads((out / "config.json").read_text())
    assert (config["n_train"], config["n_test"]) == (13, 8)
    train_note = ("7 of 20 training queries left out: each misses the score of at least one "
                  "LLM, and the log is simulated from the full matrix")
    test_note = "2 of 10 test queries left out"
    assert train_note in config["notes"][0] and test_note in config["notes"][1]
    for text in ("\n".join(report), printed):
        assert f"note: {train_note}" in text and f"note: {test_note}" in text
    # best-single, recomputed on the complete rows by hand: the best training mean of the 13
    # complete training queries, scored on the 8 complete test queries
    tr, te = S[:_N_TRAIN], S[_N_TRAIN:]
    tr, te = tr[~np.isnan(tr).any(axis=1)], te[~np.isnan(te).any(axis=1)]
    want = te[:, int(np.argmax(tr.mean(axis=0)))].mean()
    m = pd.read_csv(out / "metrics.csv")
    got = m[(m["router"] == "best-single") & (m["metric"] == "mu_o")]["value"]
    assert float(got.iloc[0]) == pytest.approx(want)


def test_router_logging_policy_counts_its_warm_up_out(tmp_path):
    S = _matrix()
    S[[1, 2, 5], 1] = np.nan                     # 17 complete training queries
    rc, out = _run(tmp_path, S, "--logging-policy", "router:knn")
    assert rc == 0
    warm = max(1, 17 // 10)                      # the 10% warm-up slice leaves the log
    config = json.loads((out / "config.json").read_text())
    assert config["n_train"] == 17 - warm == 16 and config["n_test"] == 10
    assert "16 logged training queries" in (out / "report.md").read_text()
    assert any(f"{warm} of the 17 complete training queries fitted the logging router 'knn'"
               in n for n in config["notes"])


def test_complete_data_has_no_note(tmp_path):
    rc, out = _run(tmp_path, _matrix())
    config = json.loads((out / "config.json").read_text())
    assert rc == 0 and config["notes"] == [] and (config["n_train"], config["n_test"]) == (20, 10)


@pytest.mark.parametrize("rows, what, n", [(slice(0, _N_TRAIN), "training", _N_TRAIN),
                                           (slice(_N_TRAIN, None), "test", _N_TEST)])
def test_no_complete_query_is_a_clear_error(tmp_path, capsys, rows, what, n):
    S = _matrix()
    S[rows, 0] = np.nan                          # every query of that part misses L0
    rc, out = _run(tmp_path, S)
    err = capsys.readouterr().err
    assert rc == 2 and not out.exists()
    assert "d.csv" in err
    assert f"the bandit protocol needs {what} queries with every LLM observed" in err
    assert f"0 of {n} are" in err


def test_router_policy_on_one_complete_training_query_is_refused():
    from recsys_router.data import RoutingData
    from recsys_router.feedback.bandit import bandit_parts
    d = RoutingData(["a", "b"], ["x", "y"], [[1, 0], [np.nan, 1]])
    with pytest.raises(ValueError, match="router:knn needs at least 2 complete training "
                                         "queries.*the data has 1"):
        bandit_parts(d, d, "router:knn")
