"""``recsys-router log export``, ``ope`` and ``evaluate --protocol bandit`` end to end: a
served artifact's log (SQLite) exported and evaluated, its numbers recomputed from the
exported file; bad inputs are one-line errors with nothing written."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient

from recsys_router.cli import main
from recsys_router.export import export_router, load_router
from recsys_router.feedback.logged import log_to_data
from recsys_router.registry import make_router
from recsys_router.serving import ServiceConfig, create_app


@pytest.fixture(scope="module")
def served_log(tmp_path_factory, sim_split):
    """A knn artifact served with epsilon exploration; feedback = the true score of the
    served LLM on simulated queries."""
    tmp = tmp_path_factory.mktemp("fb")
    tr, te = sim_split["train"], sim_split["test"]
    art = tmp / "knn"
    export_router(make_router("knn", k=5).fit(tr), art, train_data=tr)
    url = f"sqlite:///{tmp / 'd.db'}"
    cfg = ServiceConfig(log_db=url, log_text="full", explore="epsilon:0.5", seed=0)
    col = {n: j for j, n in enumerate(te.llm_names)}
    with TestClient(create_app(load_router(art), cfg)) as c:
        for i, text in enumerate(te.texts):
            r = c.post("/route", json={"query": text}).json()
            score = float(te.scores[i, col[r["llm"]]])
            assert c.post("/feedback", json={"decision_id": r["decision_id"], "score": score,
                                             "cost": float(te.costs[i, col[r["llm"]]])}).status_code == 200
        c.post("/route", json={"query": "no feedback for this one"})
    return tmp, art, url


def test_log_export_and_ope(served_log, capsys):
    tmp, art, url = served_log
    out = tmp / "log.parquet"
    assert main(["log", "export", "--db", url, "--out", str(out)]) == 0
    frame = pd.read_parquet(out)
    assert len(frame) == 61 and frame["feedback_score"].notna().sum() == 60
    rep = tmp / "ope"
    assert main(["ope", "--log", str(out), "--router", str(art), "--n-boot", "50",
                 "--out", str(rep), "--seed", "1"]) == 0
    table = pd.read_csv(rep / "ope.csv")
    assert (rep / "ope.png").stat().st_size > 0 and "SNIPS" in (rep / "report.md").read_text()
    # recompute IPS and SNIPS of the score from the exported file by hand
    d = log_to_data(frame)
    act = (~np.isnan(d.scores)).argmax(axis=1)
    r = d.scores[np.arange(d.n_queries), act]
    p = d.queries["propensity"].to_numpy()
    art_r = load_router(art)
    names = art_r.llm_names
    ch = art_r.router.route_indices(art_r.to_data(list(dict.fromkeys(d.texts))))
    by_text = dict(zip(dict.fromkeys(d.texts), ch))
    pi = np.zeros(d.scores.shape)
    for i, t in enumerate(d.texts):
        pi[i, d.llm_names.index(names[by_text[t]])] = 1.0
    w = pi[np.arange(d.n_queries), act] / p
    got = table[table["outcome"] == "score"].set_index("estimator")["value"]
    assert got["ips"] == pytest.approx(np.mean(w * r))
    assert got["snips"] == pytest.approx((w * r).sum() / w.sum())
    assert set(table["outcome"]) == {"score", "cost"}
    # DM/DR of the score: the default ridge reward model is refitted on every resample
    sc = table[table["outcome"] == "score"].set_index("estimator")
    assert sc.loc["dm", "refit"] == 50 and sc.loc["dr", "refit"] == 50 and sc.loc["ips", "refit"] == 0
    assert "refitted on each of 50 bootstrap resamples" in (rep / "report.md").read_text()
    assert (sc["lo"] <= sc["value"]).all() and (sc["value"] <= sc["hi"]).all()
    # a CF reward model is fitted once: the report says its intervals hold it fixed
    rep4 = tmp / "ope4"
    assert main(["ope", "--log", str(out), "--router", str(art), "--n-boot", "10", "--dm-router", "mf",
                 "--out", str(rep4), "--seed", "1"]) == 0
    t4 = pd.read_csv(rep4 / "ope.csv")
    assert (t4[t4["outcome"] == "score"]["refit"] == 0).all()
    # the cost model (each LLM's weighted mean cost) is refitted on every resample all the same
    assert (t4[t4["outcome"] == "cost"].set_index("estimator").loc[["dm", "dr"], "refit"] == 10).all()
    assert "held fixed in the bootstrap" in (rep4 / "report.md").read_text()
    # the database URL directly gives the same IPS
    rep2 = tmp / "ope2"
    assert main(["ope", "--log", url, "--router", str(art), "--n-boot", "0", "--out", str(rep2)]) == 0
    assert pd.read_csv(rep2 / "ope.csv").set_index(["outcome", "estimator"]).loc[("score", "ips"), "value"] \
        == pytest.approx(got["ips"])
    # a registry router trained on the log itself
    rep3 = tmp / "ope3"
    assert main(["ope", "--log", url, "--router", "mf", "--loss", "ips", "--param", "max_epochs=1",
                 "--n-boot", "0", "--out", str(rep3)]) == 0
    assert len(pd.read_csv(rep3 / "ope.csv")) == 8


def test_ope_bad_inputs(served_log, tmp_path, capsys):
    tmp, art, url = served_log
    assert main(["log", "export", "--db", url, "--out", str(tmp_path / "log.parquet")]) == 0
    frame = pd.read_parquet(tmp_path / "log.parquet")
    bad = tmp_path / "bad.parquet"
    frame.assign(propensity=np.where(np.arange(len(frame)) == 3, 0.0, frame["propensity"])).to_parquet(bad)
    out = tmp_path / "o"
    assert main(["ope", "--log", str(bad), "--router", str(art), "--out", str(out)]) == 2
    assert "propensity 0.0 must be in (0, 1]" in capsys.readouterr().err and not out.exists()
    assert main(["ope", "--log", str(tmp_path / "nope.parquet"), "--router", str(art), "--out", str(out)]) == 2
    with pytest.raises(SystemExit) as exc:    # refused when the command line is parsed (exit 2)
        main(["ope", "--log", url, "--router", str(art), "--policy", "wtp:x", "--out", str(out)])
    assert exc.value.code == 2
    assert "policy must be argmax" in capsys.readouterr().err and not out.exists()
    assert main(["log", "export", "--db", url, "--out", str(tmp_path / "x.txt")]) == 2
    no_prop = tmp_path / "np.csv"
    pd.DataFrame({"query_id": ["a", "b"], "model": ["m", "n"], "score": [1.0, 0.0],
                  "query_text": ["x", "y"]}).to_csv(no_prop, index=False)
    assert main(["ope", "--log", str(no_prop), "--router", "mf", "--out", str(out)]) == 2
    assert "no 'propensity' column" in capsys.readouterr().err and not out.exists()


def test_evaluate_bandit_protocol(tmp_path, capsys):
    out = tmp_path / "bandit"
    assert main(["evaluate", "--data", "synthetic", "--data-option", "n_queries=300",
                 "--data-option", "n_llms=4", "--data-option", "seed=2", "--routers", "mf",
                 "--protocol", "bandit", "--logging-policy", "epsilon-greedy:0.3", "--losses", "naive,ips",
                 "--bandit-param", "max_epochs=2",
                 "--n-boot", "30", "--online-rounds", "100", "--retrain-every", "50",
                 "--seed", "0", "--out", str(out), "--no-progress"]) == 0
    m = pd.read_csv(out / "metrics.csv")
    assert {"mu_o", "nauc", "ope_error_ips", "ope_error_snips", "ope_error_dm", "ope_error_dr",
            "ope_ci_covered"} <= set(m["metric"])
    assert set(m["loss"]) == {"full", "naive", "ips"} and (m["protocol"] == "bandit").all()
    reg = pd.read_csv(out / "regret.csv")
    assert len(reg) == 100 and (out / "regret.png").exists()
    assert main(["evaluate", "--data", "synthetic", "--routers", "mf", "--protocol", "bandit",
                 "--logging-policy", "greedy", "--out", str(tmp_path / "x"), "--no-progress"]) == 2
    assert "--logging-policy must be" in capsys.readouterr().err


def test_a_csv_log_goes_through_the_loaders_reader(served_log, tmp_path, capsys):
    """An exported CSV log reads back to the same data; one with an extra field in every
    record (which plain pandas reads with every column shifted) is a one-line error naming
    the file and line, and nothing is written."""
    import csv

    from recsys_router.errors import DataValidationError
    from recsys_router.feedback.workflow import load_log
    _, art, url = served_log
    good = tmp_path / "log.csv"
    assert main(["log", "export", "--db", url, "--out", str(good)]) == 0
    d = load_log(str(good))
    ref = log_to_data(pd.read_parquet(_export_parquet(url, tmp_path)))
    assert d.query_ids == ref.query_ids and np.array_equal(np.isnan(d.scores), np.isnan(ref.scores))
    with open(good, newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    bad = tmp_path / "shifted.csv"
    with open(bad, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(rows[0])
        w.writerows([r + ["extra"] for r in rows[1:]])
    with pytest.raises(DataValidationError, match=rf"shifted.csv, row 2.* has {len(rows[0]) + 1} "
                                                  rf"fields but the header has {len(rows[0])}"):
        load_log(str(bad))
    capsys.readouterr()
    out = tmp_path / "ope_bad"
    assert main(["ope", "--log", str(bad), "--router", str(art), "--out", str(out)]) == 2
    assert "shifted.csv" in capsys.readouterr().err and not out.exists()


def _export_parquet(url, tmp_path):
    out = tmp_path / "log.parquet"
    assert main(["log", "export", "--db", url, "--out", str(out)]) == 0
    return out
