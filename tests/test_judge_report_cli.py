"""RouteJudge report files and the ``recsys-router judge`` commands (simulate, report, replay,
export/import), plus the voting page on the real RouterBench answers when the data is present."""

from __future__ import annotations

import json

import matplotlib.image as mpimg
import pandas as pd
import pytest

from conftest import shared_path
from recsys_router.cli import main
from recsys_router.judge import metrics as M
from recsys_router.judge.records import JudgeRecord
from recsys_router.judge.report import selection_table, write_report
from recsys_router.judge.store import JudgeStore

COSTS = {"x": 1.0, "y": 2.0, "z": 3.0}


def _r(c1, c2, c3, a, b, label, task):
    return JudgeRecord("q", {"r1": c1, "r2": c2, "r3": c3}, a, b, label, ["x", "y", "z"], task=task,
                       costs=dict(COSTS))


RECS = [_r("x", "y", "x", "x", "y", "A", "t1"), _r("x", "y", "z", "y", "x", "A", "t1"),
        _r("x", "x", "z", "z", "x", "tie", "t2"), _r("y", "x", "y", "x", "y", "both_bad", "t2"),
        _r("z", "x", "y", "x", "y", "B", "t2")]  # the hand-worked example of test_judge_metrics


def test_report_files_and_numbers(tmp_path):
    paths = write_report(RECS, tmp_path / "rep", n_boot=30, seed=0)
    for name in ("leaderboard.csv", "leaderboard.md", "h2h.csv", "h2h.md", "mcnemar.csv", "agreement.csv",
                 "task_pref_score.csv", "task_win_rate.csv", "selection.csv", "report.md",
                 "leaderboard_elo.png", "h2h_heatmap.png", "selection_distribution.png", "cost_vs_pref_score.png"):
        assert paths[name].exists() and paths[name].stat().st_size > 0, name
    lb = pd.read_csv(paths["leaderboard.csv"]).set_index("router")
    assert lb.loc[["r1", "r2", "r3"], "pref_score"].tolist() == pytest.approx([0.375, 0.3, 0.625])
    assert lb.loc[["r1", "r2", "r3"], "mean_cost"].tolist() == pytest.approx([1.6, 1.4, 2.2])
    assert (lb["elo_lower"] <= lb["elo_upper"]).all()
    h2h = pd.read_csv(paths["h2h.csv"], index_col=0)
    assert h2h.loc["r3", "r2"] == pytest.approx(0.75)
    mc = pd.read_csv(paths["mcnemar.csv"])
    row = mc[(mc.router_i == "r2") & (mc.router_j == "r3")].iloc[0]
    assert (row.a, row.b, row.chi2) == (0, 2, pytest.approx(0.5))
    sel = selection_table(RECS)
    assert sel.loc["r1"].tolist() == pytest.approx([0.6, 0.2, 0.2])
    for png in ("leaderboard_elo.png", "h2h_heatmap.png", "selection_distribution.png", "cost_vs_pref_score.png"):
        img = mpimg.imread(paths[png])
        assert img.shape[0] > 300 and img.shape[1] > 500 and img.std() > 0.05  # a real, non-blank picture
    md = paths["report.md"].read_text()
    assert "## Head-to-head" in md and "![Elo](leaderboard_elo.png)" in md
    with pytest.raises(ValueError, match="no judged records"):
        write_report([], tmp_path / "empty")


def test_cli_simulate_report_replay_export(tmp_path, capsys):
    db, rep = tmp_path / "judge.db", tmp_path / "rep"
    rc = main(["judge", "simulate", "--data", "synthetic", "-o", "n_queries=200", "-o", "n_llms=4",
               "--routers", "random", "best-single", "oracle", "--n", "80", "--seed", "1", "--db", str(db),
               "--threshold", "0.5", "--noise", "0.1"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "80 duels written" in out and "Spearman" in out
    recs = JudgeStore(db).records()
    assert len(recs) == 80 and set(recs[0].router_choices) == {"random", "best-single", "oracle"}
    noisy = [r for r in recs if not r.metadata["noisy"]]
    assert all(r.label == ("both_bad" if max(r.metadata["score_a"], r.metadata["score_b"]) < 0.5 else
                           "tie" if r.metadata["score_a"] == r.metadata["score_b"] else
                           "A" if r.metadata["score_a"] > r.metadata["score_b"] else "B") for r in noisy)
    assert main(["judge", "report", "--db", str(db), "--out", str(rep), "--n-boot", "20"]) == 0
    lb = pd.read_csv(rep / "leaderboard.csv").set_index("router")
    assert lb.loc["oracle", "pref_score"] == pytest.approx(M.pref_score(recs, "oracle"))
    # replay a registry router fitted on the same train split (the records come from its test split)
    assert main(["judge", "replay", "--db", str(db), "--data", "synthetic", "-o", "n_queries=200", "-o", "n_llms=4",
                 "--router", "best-single", "--name", "bsm2", "--seed", "1", "--out", str(tmp_path / "rp.csv")]) == 0
    rp = pd.read_csv(tmp_path / "rp.csv").set_index("router")
    # a second best-single fitted on the same train data chooses exactly like the stored one
    assert rp.loc["bsm2", "pref_score"] == pytest.approx(rp.loc["best-single", "pref_score"])
    assert rp.loc["bsm2", "replayed"] and not rp.loc["oracle", "replayed"]
    assert main(["judge", "export", "--db", str(db), "--out", str(tmp_path / "r.jsonl")]) == 0
    first = json.loads((tmp_path / "r.jsonl").read_text().splitlines()[0])
    assert first["record_id"] == recs[0].record_id
    assert main(["judge", "import", "--db", str(tmp_path / "b.db"), "--jsonl", str(tmp_path / "r.jsonl")]) == 0
    assert JudgeStore(tmp_path / "b.db").records() == recs


def test_cli_errors(tmp_path, capsys):
    assert main(["judge", "report", "--db", str(tmp_path / "none.db"), "--out", str(tmp_path / "o")]) == 2
    assert "no such database" in capsys.readouterr().err
    assert main(["judge", "simulate", "--data", "synthetic", "-o", "n_queries=100", "--routers", "random",
                 "oracle", "--n", "5", "--db", str(tmp_path / "j.db"), "--noise", "3"]) == 2
    assert "noise must be a probability" in capsys.readouterr().err
    assert main(["judge", "serve", "--data", "synthetic", "--routers", "random", "oracle",
                 "--db", str(tmp_path / "j.db")]) == 2
    assert "carries no recorded answers" in capsys.readouterr().err


def test_voting_session_on_routerbench_answers(tmp_path):
    folder = shared_path("routerbench_zs")
    from fastapi.testclient import TestClient

    from recsys_router.datasets import load_dataset
    from recsys_router.judge.routers import fit_routers, train_test
    from recsys_router.judge.web import JudgeSession, create_app

    data = load_dataset(folder / "winograde_test.csv", with_responses=True)
    train, pool = train_test(data, test_size=0.5, seed=0)
    routers = fit_routers(["best-single", "random"], train)
    c = TestClient(create_app(JudgeSession(pool, routers, JudgeStore(tmp_path / "j.db"), responses=data.responses)))
    qid = pool.query_ids[0]
    duel = c.post("/api/duel", json={"query_id": qid, "budget": 0.001}).json()
    rev = c.post("/api/vote", json={"token": duel["token"], "label": "tie"}).json()
    assert duel["answers"]["A"] == data.responses.loc[qid, rev["llm_a"]]
    assert duel["answers"]["B"] == data.responses.loc[qid, rev["llm_b"]]
    i = data.query_ids.index(qid)
    assert rev["costs"]["A"] == pytest.approx(float(data.costs[i, data.llm_names.index(rev["llm_a"])]))
    assert JudgeStore(tmp_path / "j.db").records()[0].query_id == qid
