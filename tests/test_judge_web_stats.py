"""The voting page's ``/api/stats``: the same numbers as a full recomputation over every stored
record, read without the texts, computed once per database state, and once for concurrent callers."""

from __future__ import annotations

import random
import threading
import time

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

import recsys_router.judge.web.app as web_app
from recsys_router.errors import DataValidationError
from recsys_router.judge.metrics import h2h_matrix, leaderboard
from recsys_router.judge.outcomes import read_outcomes
from recsys_router.judge.rating import elo_bootstrap, games
from recsys_router.judge.records import JudgeRecord
from recsys_router.judge.schema import READ_ONLY, records_t
from recsys_router.judge.store import JudgeStore
from recsys_router.judge.web import create_app
from recsys_router.judge.web.single_flight import SingleFlight
from test_judge_web import make_session


def naive_elo_bootstrap(records, routers, n_boot, seed=0, k=4.0, init=1000.0, alpha=0.05):
    """The Elo bootstrap written out plainly (numpy ratings, the game list rebuilt per replay)."""
    g = games(records)
    pos = {r: n for n, r in enumerate(routers)}

    def elo(seq):
        rating = np.full(len(routers), init)
        for _, i, j, s in seq:
            e = 1.0 / (1.0 + 10 ** ((rating[pos[j]] - rating[pos[i]]) / 400.0))
            rating[pos[i]] += k * (s - e)
            rating[pos[j]] -= k * (s - e)
        return rating
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(n_boot):
        idx = rng.integers(0, len(records), size=len(records))
        boots.append(elo([x for t in idx for x in g if x[0] == t]))
    q = np.percentile(np.array(boots), [100 * alpha / 2, 50, 100 * (1 - alpha / 2)], axis=0) if boots else \
        np.full((3, len(routers)), np.nan)
    n_games = [sum(r in (i, j) for _, i, j, _s in g) for r in routers]
    return pd.DataFrame({"elo": elo(g), "elo_median": q[1], "elo_lower": q[0], "elo_upper": q[2],
                         "n_games": n_games}, index=pd.Index(routers, name="router"))


def full_stats(db, routers, n_boot):
    """What /api/stats answered before: every full record re-read, the naive bootstrap."""
    recs = JudgeStore(db, read_only=True).records()
    lb = leaderboard(recs, routers).set_index("router")
    lb = pd.concat([lb, naive_elo_bootstrap(recs, routers, n_boot)], axis=1).reset_index() \
        .sort_values("elo_median", ascending=False, kind="stable")
    h = h2h_matrix(recs, list(lb["router"]))
    return web_app._clean({"n_records": len(recs), "leaderboard": lb.to_dict(orient="records"),
                           "h2h": {"routers": list(h.index), "matrix": h.to_numpy().tolist()}})


def vote(c, qid, label, budget=None):
    tok = c.post("/api/duel", json={"query_id": qid, "budget": budget}).json()["token"]
    assert c.post("/api/vote", json={"token": tok, "label": label}).status_code == 200


def test_stats_equal_a_full_recomputation_after_each_vote(tmp_path):
    s = make_session(tmp_path / "j.db")
    c = TestClient(create_app(s))
    steps = [("qa", "A", None), ("qb", "B", 2.5), ("qa", "tie", None), ("tr1", "both_bad", None),
             ("qb", "A", 1.5), ("tr2", "B", None), ("qa", "A", 2.5)]
    for n, (qid, label, budget) in enumerate(steps, 1):
        vote(c, qid, label, budget)
        got = c.get("/api/stats").json()
        assert got["n_records"] == n
        assert got == full_stats(tmp_path / "j.db", list(s.routers), 100)


def test_elo_bootstrap_equals_the_plain_computation_exactly():
    rng = random.Random(5)
    for _ in range(15):
        recs = []
        for _ in range(rng.randint(1, 40)):
            feas = ["x", "y", "z", "w"][:rng.randint(2, 4)]
            a, b = rng.sample(feas, 2)
            ch = {r: rng.choice(feas) for r in rng.sample(["r1", "r2", "r3", "r4"], rng.randint(1, 4))}
            recs.append(JudgeRecord("q", ch, a, b, rng.choice(["A", "B", "tie", "both_bad"]), feas))
        routers = ["r1", "r2", "r3", "r4"]
        n_boot, seed = rng.randint(0, 30), rng.randint(0, 9)
        got = elo_bootstrap(recs, routers, n_boot=n_boot, seed=seed)
        assert got.equals(naive_elo_bootstrap(recs, routers, n_boot, seed=seed))  # bit for bit


def test_stats_read_no_record_texts_and_are_cached_until_a_vote(tmp_path, monkeypatch):
    s = make_session(tmp_path / "j.db")
    c = TestClient(create_app(s))
    vote(c, "qa", "A")

    def refuse(*a, **k):
        raise AssertionError("the statistics read every full record (prompts and answer texts)")
    monkeypatch.setattr(JudgeStore, "iter_records", refuse)
    monkeypatch.setattr(JudgeStore, "records", refuse)
    calls = []
    real = web_app.read_outcomes
    monkeypatch.setattr(web_app, "read_outcomes", lambda *a: calls.append(a) or real(*a))
    first = c.get("/api/stats").json()
    assert first["n_records"] == 1 and len(calls) == 1
    assert c.get("/api/stats").json() == first and s.stats() == first and len(calls) == 1  # cached
    monkeypatch.undo()
    vote(c, "qb", "B")
    monkeypatch.setattr(web_app, "read_outcomes", lambda *a: calls.append(a) or real(*a))
    assert c.get("/api/stats").json()["n_records"] == 2 and len(calls) == 2  # a new vote: recomputed
    assert c.get("/api/stats").json()["n_records"] == 2 and len(calls) == 2


def test_concurrent_stats_calls_share_one_computation(tmp_path, monkeypatch):
    s = make_session(tmp_path / "j.db")
    c = TestClient(create_app(s))
    vote(c, "qa", "A")
    calls, release, states = [], threading.Event(), []
    real_stats, real_state = s._stats, web_app.store_state

    def slow(*a):
        calls.append(a)
        assert release.wait(30)
        return real_stats(*a)
    monkeypatch.setattr(s, "_stats", slow)
    monkeypatch.setattr(web_app, "store_state", lambda st: states.append(1) or real_state(st))
    out = []
    threads = [threading.Thread(target=lambda: out.append(c.get("/api/stats").json())) for _ in range(4)]
    for t in threads:
        t.start()
    deadline = time.time() + 30
    while len(states) < 5 and time.time() < deadline:  # 4 callers and the computation read the state
        time.sleep(0.01)
    # meanwhile the page still serves duels and votes (the computation holds no write lock)
    vote(c, "qb", "tie")
    release.set()
    for t in threads:
        t.join(30)
    assert len(calls) == 1 and len(out) == 4 and all(o == out[0] for o in out)
    assert out[0]["n_records"] == 1  # computed on the state the callers saw
    assert c.get("/api/stats").json()["n_records"] == 2 and len(calls) == 2


def test_a_failed_computation_reaches_every_waiter_and_is_retried():
    state, n = [1], []

    def compute(key):
        n.append(key)
        if len(n) == 1:
            raise RuntimeError("boom")
        return key * 10
    sf = SingleFlight(lambda: state[0], compute)
    with pytest.raises(RuntimeError, match="boom"):
        sf.get().result(10)
    assert sf.get().result(10) == 10 and sf.get().result(10) == 10 and n == [1, 1]
    state[0] = 2
    assert sf.get().result(10) == 20 and n == [1, 1, 2]


def test_reading_for_stats_does_not_hold_up_a_vote(tmp_path):
    st = JudgeStore(tmp_path / "j.db")
    rec = JudgeRecord("q", {"r": "x"}, "x", "y", "A", ["x", "y"])
    st.add(rec)
    with st.engine.connect().execution_options(**{READ_ONLY: True}) as conn:
        assert conn.execute(select(records_t.c.id)).all()  # a read transaction is open
        t0 = time.perf_counter()
        st.add(JudgeRecord("q", {"r": "y"}, "x", "y", "B", ["x", "y"]))  # BEGIN IMMEDIATE would wait 30 s
        assert time.perf_counter() - t0 < 10
        assert len(conn.execute(select(records_t.c.id)).all()) == 1  # the reader's snapshot
    assert len(read_outcomes(st)) == 2 and len(read_outcomes(st, 1)) == 1


def test_a_stored_row_that_is_not_a_record_is_named(tmp_path):
    st = JudgeStore(tmp_path / "j.db")
    rec = JudgeRecord("q", {"r": "x"}, "x", "y", "A", ["x", "y"])
    st.add(rec)
    for col, value in (("label", "maybe"), ("feasible", "{not json"), ("costs", '{"x": "1"}')):
        with st.engine.begin() as conn:
            conn.execute(records_t.update().values(**{col: value}))
        with pytest.raises(DataValidationError, match=f"j.db, record '{rec.record_id}'.*not a valid record"):
            read_outcomes(st)
        with st.engine.begin() as conn:
            conn.execute(records_t.update().values(label="A", feasible='["x", "y"]', costs="{}"))
    assert [o.attribution for o in read_outcomes(st)] == [rec.attribution]
