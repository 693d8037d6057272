"""Offline tournaments and historical replay (eq. C.21), hand-worked on tiny data."""

from __future__ import annotations

import numpy as np
import pytest

from test_judge_helpers import FixedRouter, PriorRouter, TextRouter, TruthRouter, tiny_data
from recsys_router.judge import metrics as M
from recsys_router.judge.records import JudgeRecord
from recsys_router.judge.replay import replay, replay_summary
from recsys_router.judge.simulate import judge_label, simulate_tournament
from recsys_router.judge.store import JudgeStore


def test_judge_label_rules():
    assert judge_label(1, 0) == "A" and judge_label(0, 1) == "B"
    assert judge_label(0.4, 0.4) == "tie"
    assert judge_label(0.4, 0.4, threshold=0.5) == "both_bad"
    assert judge_label(0.4, 0.6, threshold=0.5) == "B"  # one is above the threshold
    with pytest.raises(ValueError, match="unobserved"):
        judge_label(np.nan, 1.0)


def test_tiny_tournament_hand_worked(tmp_path):
    data = tiny_data()
    st = JudgeStore(tmp_path / "j.db")
    res = simulate_tournament(data, {"fx": FixedRouter("x"), "fy": FixedRouter("y")}, n=2, seed=0, store=st)
    by_q = {r.query_id: r for r in res.records}
    assert set(by_q) == {"qa", "qb"} and st.count() == 2
    # qa: x=1 beats y=0; qb: x=0.5 ties y=0.5
    assert by_q["qa"].attribution == {"fx": 1.0, "fy": 0.0}
    assert by_q["qb"].attribution == {"fx": 0.5, "fy": 0.5}
    assert M.pref_score(res.records, "fx") == 0.75 and M.pref_score(res.records, "fy") == 0.25
    assert res.offline.loc["fx", "offline_score"] == 0.75 and res.offline.loc["fx", "offline_cost"] == 1.0
    # with threshold 0.6 the qb duel is "both bad"
    res2 = simulate_tournament(data, {"fx": FixedRouter("x"), "fy": FixedRouter("y")}, n=2, seed=0,
                               threshold=0.6)
    assert {r.query_id: r.label for r in res2.records}["qb"] == "both_bad"
    assert M.pref_score(res2.records, "fx") == 0.5
    assert st.records() == res.records


def test_simulation_reproducible_and_consistent(sim_small):
    routers = lambda: {"oracle": TruthRouter(), "fixed0": FixedRouter("sim-llm-0"),  # noqa: E731
                       "fixed3": FixedRouter("sim-llm-3")}
    a = simulate_tournament(sim_small, routers(), n=60, seed=3)
    b = simulate_tournament(sim_small, routers(), n=60, seed=3)
    assert [r.label for r in a.records] == [r.label for r in b.records]
    for rec in a.records:
        assert rec.label == judge_label(rec.metadata["score_a"], rec.metadata["score_b"])
        assert rec.consensus >= 1 / 3
    # the oracle never loses a duel it takes part in
    assert all(rec.attribution["oracle"] in (None, 1.0, 0.5) for rec in a.records)
    assert a.rank_correlation("pref_score") > 0
    comp = a.comparison(n_boot=20)
    assert {"elo", "elo_lower", "bt", "offline_score"} <= set(comp.columns)


def test_label_noise(sim_small):
    res = simulate_tournament(sim_small, {"o": TruthRouter(), "f": FixedRouter("sim-llm-1")}, n=400,
                              seed=0, noise=1.0)
    labels = [r.label for r in res.records]
    for lab in ("A", "B", "tie", "both_bad"):
        assert 60 < labels.count(lab) < 140  # uniform: 100 expected each
    with pytest.raises(ValueError, match="noise"):
        simulate_tournament(sim_small, {"o": TruthRouter(), "f": FixedRouter("sim-llm-1")}, noise=2)


def _recs():
    f = ["x", "y", "z"]
    c = {"x": 1.0, "y": 2.0, "z": 3.0}
    return [JudgeRecord("alpha?", {"r1": "x", "r2": "y"}, "x", "y", "A", f, query_id="qa", costs=c, budget=1.5),
            JudgeRecord("beta?", {"r1": "x", "r2": "z"}, "z", "x", "A", f, query_id="qb", costs=c),
            JudgeRecord("alpha?", {"r1": "y", "r2": "z"}, "y", "z", "tie", ["y", "z"], query_id="qa", costs=c)]


def test_replay_eq_c21():
    train = tiny_data().subset([0, 1])
    out = replay(FixedRouter("x").fit(train), _recs(), name="R")
    # rec1: R picks x = A, label A -> 1; rec2: x = B, label A -> 0; rec3: x not feasible -> y (A) tie -> 0.5
    assert [r.attribution["R"] for r in out] == [1.0, 0.0, 0.5]
    assert [r.router_choices["R"] for r in out] == ["x", "x", "y"]
    assert M.pref_score(out, "R") == 0.5
    # the stored routers' attributions are unchanged
    assert [r.attribution["r1"] for r in out] == [r.attribution["r1"] for r in _recs()]
    lb = replay_summary(out, "R")
    assert lb.loc[lb["replayed"], "router"].tolist() == ["R"]


def test_replay_keys_queries_by_id_and_text():
    r = TextRouter().fit(tiny_data().subset([0, 1]))

    def rec(text, qid):
        return JudgeRecord(text, {"s": "x"}, "x", "y", "A", ["x", "y"], query_id=qid)
    # same id, different texts: each routed on its own text (was: both on "alpha?" -> x, x)
    out = replay(r, [rec("alpha?", "q1"), rec("beta?", "q1")], name="T")
    assert [o.router_choices["T"] for o in out] == ["x", "y"]
    # the id "text:beta?" is not the id-less query "beta?" (was: both routed on "alpha?")
    out = replay(r, [rec("alpha?", "text:beta?"), rec("beta?", None)], name="T")
    assert [o.router_choices["T"] for o in out] == ["x", "y"]


def test_replay_rows_keep_unambiguous_query_ids():
    """A query id with one text keeps its id (a precomputed encoder looks embeddings up by
    it); ids with several texts and id-less records get made-up ids that no record uses."""
    from recsys_router.judge.replay import queries_of

    def rec(text, qid):
        return JudgeRecord(text, {"s": "x"}, "x", "y", "A", ["x", "y"], query_id=qid)
    recs = [rec("a", "q1"), rec("b", "judge-0"), rec("c", "q2"), rec("d", "q2"), rec("e", None),
            rec("a", "q1")]
    data, pos = queries_of(recs, ["x", "y"])
    assert list(data.query_ids) == ["q1", "judge-0", "judge-1", "judge-2", "judge-3"]
    assert list(data.texts) == ["a", "b", "c", "d", "e"] and pos.tolist() == [0, 1, 2, 3, 4, 0]
    # a blank id (records allow it; RoutingData does not) is read as no id
    data, _ = queries_of([rec("a", ""), rec("b", "  "), rec("c", "q1")], ["x", "y"])
    assert list(data.query_ids) == ["judge-0", "judge-1", "q1"]
    from recsys_router.datasets.synthetic import make_synthetic
    from recsys_router.encoders.precomputed import PrecomputedEncoder
    from recsys_router.router_spec import resolve_router
    d = make_synthetic(40, 3, 2, seed=0)
    enc = PrecomputedEncoder(None, table=(list(d.query_ids),
                                          np.random.default_rng(0).normal(size=(d.n_queries, 8))))
    knn = resolve_router("knn", {"k": 1}, encoder=enc, seed=0)[0].fit(d)
    a, b = d.llm_names[:2]
    out = replay(knn, [JudgeRecord(str(d.texts[i]), {"r": a}, a, b, "A", [a, b],
                                   query_id=str(d.query_ids[i])) for i in range(4)], name="k")
    # 1-NN on its own training queries' vectors: the best of a and b on each query
    best = [a if d.scores[i, 0] >= d.scores[i, 1] else b for i in range(4)]
    assert [o.router_choices["k"] for o in out] == best


def test_replay_budget_and_non_participation():
    train = tiny_data().subset([0, 1])
    r = PriorRouter({"x": 0.1, "y": 0.9, "z": 0.5}).fit(train)
    out = replay(r, _recs(), name="P")
    # rec1 budget 1.5: only x (cost 1) fits -> x = A -> 1; rec2: y best, not shown -> None; rec3: y = A tie -> .5
    assert [o.router_choices["P"] for o in out] == ["x", "y", "y"]
    assert [o.attribution["P"] for o in out] == [1.0, None, 0.5]
    assert M.participation_rate(out, "P") == pytest.approx(2 / 3)


def test_replay_routes_with_the_records_wtp():
    r = PriorRouter({"x": 0.1, "y": 0.9, "z": 0.5}).fit(tiny_data().subset([0, 1]))
    c = {"x": 1.0, "y": 2.0, "z": 3.0}

    def rec(**kw):
        return JudgeRecord("beta?", {"r1": "x", "r2": "y"}, "x", "y", "A", ["x", "y", "z"], query_id="qb",
                           costs=c, **kw)
    # wtp 0: cheapest (x); wtp 10: 10*s - c = 0, 7, 2 -> y; none: argmax -> y (was: y, y, y)
    out = replay(r, [rec(metadata={"wtp": 0.0}), rec(metadata={"wtp": 10}), rec()], name="P")
    assert [o.router_choices["P"] for o in out] == ["x", "y", "y"]
    with pytest.raises(ValueError, match="both a budget"):
        replay(r, [rec(budget=1.0, metadata={"wtp": 1.0})], name="P")
    with pytest.raises(ValueError, match=r"metadata\['wtp'\] must be a finite number"):
        replay(r, [rec(metadata={"wtp": "cheap"})], name="P")


def test_replay_truth_and_errors():
    data = tiny_data()
    out = replay(TruthRouter().fit(data.subset([0, 1])), _recs(), name="O", truth=data)
    # qa truth x=1,y=0,z=1 -> x (cheaper of the tied x/z); qb truth x=.5,y=.5,z=0 -> x
    assert [o.router_choices["O"] for o in out] == ["x", "x", "z"]
    with pytest.raises(ValueError, match="ground-truth"):
        replay(TruthRouter().fit(data.subset([0, 1])), _recs(), name="O")
    # some records' queries are not in the truth data: refused, not routed on NaN scores
    recs = _recs() + [JudgeRecord("gamma?", {"r1": "x", "r2": "y"}, "x", "y", "A", ["x", "y", "z"],
                                  query_id="nowhere"),
                      JudgeRecord("delta?", {"r1": "x", "r2": "y"}, "x", "y", "A", ["x", "y", "z"],
                                  record_id="r-noid")]
    with pytest.raises(ValueError, match=r"2 of 5 stored records have a query with no recorded score in "
                                         r"'tiny' \(query ids 'nowhere', record 'r-noid' \(no id\)\)"):
        replay(TruthRouter().fit(data.subset([0, 1])), recs, name="O", truth=data)
    with pytest.raises(ValueError, match="not fitted"):
        replay(FixedRouter("x"), _recs(), name="F")
    with pytest.raises(ValueError, match="already voted"):
        replay(FixedRouter("x").fit(data), _recs(), name="r1")


def test_replay_artifact_folder_and_registry_name(tmp_path):
    from recsys_router.export import export_router
    from recsys_router.registry import make_router

    train = tiny_data().subset([0, 1])  # x: mean 0.5, y: 0.5, z: 0.5 -> best-single ties go to the cheapest, x
    fitted = make_router("best-single").fit(train)
    path = export_router(fitted, tmp_path / "bsm")
    by_path = replay(str(path), _recs(), name="bsm")
    by_name = replay("best-single", _recs(), name="bsm", train=train)
    expect = [fitted.route(tiny_data().subset([2]), budget=b, candidates=c)[0]
              for b, c in ((1.5, ["x", "y", "z"]), (None, ["x", "y", "z"]), (None, ["y", "z"]))]
    assert expect == ["x", "x", "y"]
    assert [r.router_choices["bsm"] for r in by_path] == expect
    assert [r.router_choices["bsm"] for r in by_name] == expect


def test_simulate_notes_the_queries_it_cannot_draw_and_repeats(capsys, tmp_path):
    """A test query missing some LLM's score is never drawn; a task that loses every query,
    and a draw with replacement, are said (cruxeval lost its whole output_prediction task
    without a word)."""
    import pandas as pd

    from recsys_router.cli import main
    from recsys_router.data import RoutingData
    n = 40
    q = pd.DataFrame({"query_id": [f"q{i}" for i in range(n)], "text": [f"t {i}" for i in range(n)],
                      "task": ["full"] * (n // 2) + ["gappy"] * (n // 2)})
    s = np.tile([0.9, 0.4, 0.6], (n, 1))
    s[n // 2:, 2] = np.nan  # LLM "c" never answered the gappy task
    data = RoutingData(q, ["a", "b", "c"], s, require_observed=False)
    res = simulate_tournament(data, {"fx": FixedRouter("a"), "fy": FixedRouter("b")}, n=30,
                              seed=0, test_size=0.5)
    complete = sum(r.task == "full" for r in res.records)
    assert complete == 30 and not any(r.task == "gappy" for r in res.records)
    assert any("tasks left without any query: ['gappy']" in m for m in res.notes)
    assert any(m.startswith("30 duels drawn from ") and "repeat" in m for m in res.notes)
    data.to_long().to_csv(tmp_path / "d.csv", index=False)
    assert main(["judge", "simulate", "--data", str(tmp_path / "d.csv"), "--routers",
                 "best-single,random", "--n", "30", "--db", str(tmp_path / "j.db"), "--seed", "0",
                 "--test-size", "0.5"]) == 0
    out = capsys.readouterr().out
    assert "note: " in out and "tasks left without any query: ['gappy']" in out
