"""Decision-log writer failures are visible: an engine that cannot write makes the writer
retry each batch WRITE_ATTEMPTS times, then drop it (a row the database refuses, such as a
NUL character on PostgreSQL, is split off and dropped alone); the failed attempts, the dropped
decisions, the last error (without the query text) and the queue depth show in
``GET /health`` (status ``degraded``) and ``GET /metrics``. No timing is asserted: the
back-off is set to 0 and the tests wait on the writer's own flush."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
import sqlalchemy as sa
from fastapi import HTTPException
from fastapi.testclient import TestClient

from recsys_router.feedback import store, writer
from recsys_router.feedback.store import WRITE_ATTEMPTS, DecisionLog, DecisionWriter, LogFull
from recsys_router.feedback.service import COMMIT_WAIT_S, FeedbackLoop, FeedbackRequest
from recsys_router.serving import ServiceConfig, create_app
from pg_util import pg_url  # noqa: F401 - fixture
from test_serving import artifact  # noqa: F401 - the WordRouter artifact fixture


def _metric(text: str, name: str) -> float:
    rows = [ln for ln in text.splitlines() if ln.startswith(name + " ")]
    assert len(rows) == 1, (name, rows)
    return float(rows[0].split()[1])


def test_failing_engine_is_counted_and_reported(tmp_path, artifact, monkeypatch):  # noqa: F811
    monkeypatch.setattr(writer, "_BACKOFF_S", 0.0)
    url = f"sqlite:///{tmp_path / 'd.db'}"
    cfg = ServiceConfig(log_db=url, log_batch=1)  # one decision per batch: exact counts
    with TestClient(create_app(artifact, cfg)) as c:
        loop = c.app.state.feedback_loop
        h = c.get("/health").json()
        assert h["status"] == "ok" and h["decision_log"]["dropped"] == 0
        good = loop.log.engine
        # a real engine that cannot open its database file
        loop.log.engine = sa.create_engine(f"sqlite:///{tmp_path / 'no' / 'such' / 'dir.db'}")
        secret = "my private question about taxes"
        ids = [x["decision_id"] for x in
               c.post("/route", json={"queries": [secret, "b c", "d e f"]}).json()["results"]]
        loop.writer.flush()  # returns once every queued row is committed or dropped
        h = c.get("/health").json()
        assert h["status"] == "degraded"
        log = h["decision_log"]
        assert log["failed_attempts"] == 3 * WRITE_ATTEMPTS and log["dropped"] == 3
        assert log["written"] == 0 and log["queued"] == 0 and log["failing"] is True
        assert log["last_error"].startswith("OperationalError: unable to open database file")
        assert secret not in str(h)  # the SQL parameters never reach the unauthenticated /health
        m = c.get("/metrics").text
        assert _metric(m, "recsys_router_decision_log_failures_total") == 3 * WRITE_ATTEMPTS
        assert _metric(m, "recsys_router_decision_log_dropped_total") == 3
        assert _metric(m, "recsys_router_decision_log_written_total") == 0
        assert _metric(m, "recsys_router_decision_log_queue_depth") == 0
        assert _metric(m, "recsys_router_decision_log_failing") == 1
        assert "# TYPE recsys_router_decision_log_dropped_total counter" in m
        # feedback while the database is down: a clean 503 naming the cause
        r = c.post("/feedback", json={"decision_id": ids[0], "score": 1.0})
        assert r.status_code == 503 and "decision log unavailable" in r.json()["error"]
        # the database comes back: writes resume, the gap stays visible
        loop.log.engine = good
        # a dropped decision is honestly unknown (not a hang on a forever-pending id)
        assert c.post("/feedback", json={"decision_id": ids[0], "score": 1.0}).status_code == 404
        c.post("/route", json={"queries": ["g", "h i"]})
        loop.writer.flush()
        h = c.get("/health").json()
        assert h["decision_log"]["written"] == 2 and h["decision_log"]["failing"] is False
        assert h["status"] == "degraded" and h["decision_log"]["dropped"] == 3
        m = c.get("/metrics").text
        assert _metric(m, "recsys_router_decision_log_written_total") == 2
        assert _metric(m, "recsys_router_decision_log_failing") == 0
    assert DecisionLog(url).counts()[0] == 2


def test_any_exception_is_survived_and_counted(tmp_path, monkeypatch):
    monkeypatch.setattr(writer, "_BACKOFF_S", 0.0)
    log = DecisionLog(f"sqlite:///{tmp_path / 'x.db'}")
    w = DecisionWriter(log, batch_size=1, flush_ms=1.0)
    real = log.insert_decisions
    monkeypatch.setattr(log, "insert_decisions", lambda rows: (_ for _ in ()).throw(TypeError("driver bug")))
    w.submit([_row("a")])
    w.flush()
    st = w.status()
    assert st["dropped"] == 1 and st["last_error"] == "TypeError: driver bug" and st["writer_alive"]
    monkeypatch.setattr(log, "insert_decisions", real)
    w.submit([_row("b")])
    w.flush()
    w.close()
    assert w.status()["written"] == 1 and log.counts() == (1, 0)
    assert not w.status()["ok"]  # one decision was lost


def _full_queue(tmp_path) -> tuple[DecisionLog, DecisionWriter, threading.Event]:
    """A writer (queue of 2) whose database holds its insert of "a" until the returned event
    is set, with "b" and "c" queued behind it: the queue is full."""
    log = DecisionLog(f"sqlite:///{tmp_path / 'q.db'}")
    entered, release = threading.Event(), threading.Event()
    real = log.insert_decisions

    def held(rows):
        entered.set()
        release.wait(60)
        real(rows)

    log.insert_decisions = held
    w = DecisionWriter(log, batch_size=1, flush_ms=1.0, max_pending=2)
    w.submit([_row("a")])
    entered.wait(30)  # the writer holds "a"; the queue is empty
    w.submit([_row("b"), _row("c")])
    return log, w, release


def test_a_full_queue_counts_rejected_decisions(tmp_path):
    log, w, release = _full_queue(tmp_path)
    with pytest.raises(LogFull, match="queue is full"):
        w.submit([_row("d")])
    st = w.status()
    assert st["rejected"] == 1 and st["queued"] == 2 and st["ok"]  # refused, not lost
    release.set()
    w.close()
    assert w.status()["written"] == 3 and log.counts() == (3, 0)
    with pytest.raises(LogFull, match="closed"):
        w.submit([_row("e")])
    assert w.status()["rejected"] == 2


def test_health_without_a_decision_log(artifact):  # noqa: F811
    with TestClient(create_app(artifact, ServiceConfig())) as c:
        h = c.get("/health").json()
        assert h["status"] == "ok" and "decision_log" not in h
        assert "decision_log" not in c.get("/metrics").text


# ---------------------------------------------------------------- one refused row
def _one_bad_batch(url: str, bad: dict, monkeypatch) -> tuple[DecisionWriter, list[str]]:
    """Eleven rows queued as one batch, the sixth refused by the database: the writer keeps
    the ten others. Returns the closed writer and the ids of the good rows."""
    monkeypatch.setattr(writer, "_BACKOFF_S", 0.0)
    log = DecisionLog(url)
    w = DecisionWriter(log, batch_size=64, flush_ms=60_000.0)  # one batch, sent by close()
    good = [_row(f"good{i}", text=f"good query {i}") for i in range(10)]
    w.submit(good[:5] + [bad] + good[5:])
    w.close()
    return w, [r["decision_id"] for r in good]


def _check_only_the_bad_row_dropped(w: DecisionWriter, good_ids: list[str]) -> None:
    st = w.status()
    assert st["written"] == 10 and st["dropped"] == 1 and st["queued"] == 0
    assert st["failed_attempts"] >= 1 and not st["ok"]  # the lost row stays visible
    assert sorted(w.log.read()["decision_id"]) == sorted(good_ids)
    assert not any(w.is_pending(d) for d in good_ids + ["bad"])


def test_a_row_sqlite_refuses_loses_only_itself(tmp_path, monkeypatch):
    # SQLite's driver cannot bind a lone surrogate (a bare UnicodeEncodeError); before, the
    # whole batch was retried WRITE_ATTEMPTS times and all eleven rows were dropped
    bad = _row("bad", chosen="m\ud800")
    w, good_ids = _one_bad_batch(f"sqlite:///{tmp_path / 'b.db'}", bad, monkeypatch)
    _check_only_the_bad_row_dropped(w, good_ids)
    assert w.status()["last_error"].startswith("UnicodeEncodeError")


def test_a_nul_text_on_postgresql_loses_only_its_row(pg_url, monkeypatch):  # noqa: F811
    bad = _row("bad", text="evil\x00text", log_text="full")
    w, good_ids = _one_bad_batch(pg_url, bad, monkeypatch)
    _check_only_the_bad_row_dropped(w, good_ids)
    assert w.status()["last_error"].startswith("DataError")
    # bisection: at most 2 * ceil(log2(11)) failed inserts for one bad row, never a retry loop
    assert w.status()["failed_attempts"] <= 8
    w.log.dispose()


def test_an_unavailable_database_is_still_retried_whole(tmp_path, monkeypatch):
    # a connection error is not a refused row: the batch is retried, not split
    monkeypatch.setattr(writer, "_BACKOFF_S", 0.0)
    log = DecisionLog(f"sqlite:///{tmp_path / 'u.db'}")
    calls = []

    def down(rows):
        calls.append(len(rows))
        raise sa.exc.OperationalError("INSERT", {}, Exception("connection refused"))
    monkeypatch.setattr(log, "insert_decisions", down)
    w = DecisionWriter(log, batch_size=64, flush_ms=60_000.0)
    w.submit([_row(f"r{i}") for i in range(6)])
    w.close()
    assert calls == [6] * WRITE_ATTEMPTS
    assert w.status()["dropped"] == 6 and w.status()["written"] == 0


def test_feedback_with_a_nul_id_is_a_client_error_on_postgresql(pg_url, artifact):  # noqa: F811
    cfg = ServiceConfig(log_db=pg_url, log_text="full", log_flush_ms=50)
    with TestClient(create_app(artifact, cfg)) as c:
        r = c.post("/route", content=b'{"query": "evil\\u0000text"}',
                   headers={"content-type": "application/json"})
        assert r.status_code == 422 and "NUL" in r.json()["error"]
        good = c.post("/route", json={"queries": ["good one", "good two"]}).json()["results"]
        r = c.post("/feedback", content=b'{"decision_id": "a\\u0000b", "score": 1}',
                   headers={"content-type": "application/json"})
        assert r.status_code == 422 and "decision_id" in r.json()["error"]
        # past the request model too (a caller of FeedbackLoop.feedback): the database's
        # DataError is the client's value, a 422, never "decision log unavailable" (503)
        loop = c.app.state.feedback_loop
        req = FeedbackRequest.model_construct(decision_id="a\x00b", score=1.0, thumbs=None,
                                              cost=None, latency_ms=None)
        with pytest.raises(HTTPException) as exc:
            asyncio.run(loop.feedback(req))
        assert exc.value.status_code == 422 and "DataError" in exc.value.detail
        for g in good:
            r = c.post("/feedback", json={"decision_id": g["decision_id"], "score": 1.0})
            assert r.status_code == 200, r.text
        assert c.get("/health").json()["status"] == "ok"


# ------------------------------------------------- feedback on a decision still queued
def _gate(log, hold: dict) -> None:
    """Make ``log`` hold each batch holding a decision id of ``hold`` until its event is set."""
    real = log.insert_decisions

    def gated(rows):
        for r in rows:
            if r["decision_id"] in hold:
                hold[r["decision_id"]].wait(60)
        real(rows)
    log.insert_decisions = gated


def test_feedback_waits_for_its_own_decision_not_the_whole_queue(tmp_path, artifact):  # noqa: F811
    # the queue never empties (a later batch is stuck in the writer); feedback used to wait for
    # the whole queue: 30 s, then a TimeoutError (a 500), though its own row was committed
    loop = FeedbackLoop(artifact, log_db=f"sqlite:///{tmp_path / 'f.db'}", batch_size=1,
                        flush_ms=20.0)
    ours, busy = threading.Event(), threading.Event()
    _gate(loop.log, {"ours": ours, "busy": busy})
    loop.writer.submit([_row("ours")])
    loop.writer.submit([_row("busy")])

    async def scenario():
        task = asyncio.create_task(loop.feedback(FeedbackRequest(decision_id="ours", score=1.0)))
        await asyncio.sleep(0.05)  # the feedback found "ours" queued and waits
        assert not task.done() and loop.writer.is_pending("ours")
        ours.set()  # "ours" is committed; "busy" then holds the writer
        return await asyncio.wait_for(task, 10)  # the old code waited 30 s

    try:
        assert asyncio.run(scenario()) == {"decision_id": "ours", "status": "recorded"}
        assert loop.writer.is_pending("busy")  # the queue was never empty
    finally:
        ours.set()
        busy.set()
        loop.close()
    df = DecisionLog(f"sqlite:///{tmp_path / 'f.db'}").read()
    fb = df.set_index("decision_id")["feedback_score"]
    assert sorted(fb.index) == ["busy", "ours"] and fb["ours"] == 1.0 and fb.isna()["busy"]


def test_feedback_on_a_decision_queued_too_long_is_a_503_then_retried(tmp_path, artifact):  # noqa: F811
    cfg = ServiceConfig(log_db=f"sqlite:///{tmp_path / 'g.db'}", log_batch=1, log_flush_ms=20)
    with TestClient(create_app(artifact, cfg)) as c:
        loop = c.app.state.feedback_loop
        assert loop.commit_wait_s == COMMIT_WAIT_S == 2.0  # 5 flush intervals are shorter
        release, real = threading.Event(), loop.log.insert_decisions
        loop.log.insert_decisions = lambda rows: (release.wait(60), real(rows))  # a stuck database
        try:
            did = c.post("/route", json={"query": "a b"}).json()["decision_id"]
            assert loop.writer.is_pending(did)
            t0 = time.monotonic()
            r = c.post("/feedback", json={"decision_id": did, "thumbs": "up"})
            waited = time.monotonic() - t0
            assert r.status_code == 503, r.text  # was a 500 (TimeoutError) after 30 s
            assert r.json() == {"error": f"decision log busy: decision {did!r} is still queued "
                                         "after 2 s (the database is not keeping up); retry the "
                                         "feedback later"}
            assert 2.0 <= waited < 20.0
        finally:
            release.set()
        loop.writer.flush()
        r = c.post("/feedback", json={"decision_id": did, "thumbs": "up"})  # the retry
        assert r.status_code == 200 and r.json()["status"] == "recorded"


def test_close_with_a_timeout_returns_while_a_full_queue_waits_on_the_database(tmp_path):
    """close(timeout) first put its stop mark into the queue without a timeout: with the
    queue full and the database holding the writer's insert, close waited for the database
    (minutes on a silent PostgreSQL) before its timed wait began. It now gives up on time:
    the queued rows are counted as given up and the database still holds the insert."""
    log, w, release = _full_queue(tmp_path)   # the database holds "a"; b and c queued
    out = {}
    closer = threading.Thread(target=lambda: out.setdefault(
        "lost", w.close(timeout=0.2)), daemon=True)
    with pytest.warns(RuntimeWarning, match="were not committed"):
        closer.start()
        closer.join(30)                    # liveness, not timing: the old close never returned
    try:
        assert not closer.is_alive() and not release.is_set()
        assert out["lost"] == 3            # a, b and c: none committed when the wait ended
    finally:
        release.set()
    w._thread.join(30)                     # the insert of "a" ends: the thread ends too (it
    assert not w._thread.is_alive()        # waited forever for a stop mark that never fit)
    st = w.status()
    assert (st["written"], st["dropped"]) == (1, 2) and log.counts() == (1, 0)


def _row(did: str, chosen: str = "m", text: str = "q", log_text: str = "none") -> dict:
    return store.decision_row(decision_id=did, instance="t", artifact_sha=None, policy="argmax",
                              policy_value=None, explore="none", candidates=["m"], chosen=chosen,
                              propensity=1.0, probs={"m": 1.0}, scores={"m": 0.5}, costs=None,
                              text=text, log_text=log_text)


def test_a_retry_of_feedback_whose_write_went_through_is_not_a_409(tmp_path, artifact):  # noqa: F811
    """A POST /feedback that timed out (503) may still be written by the log's thread; the
    client's retry, as README tells it to make, got a 409 for its own feedback. The same
    feedback again is a 200 'already recorded' (and stored once); other values are a 409."""
    url = f"sqlite:///{tmp_path / 'f.db'}"
    with TestClient(create_app(artifact, ServiceConfig(log_db=url, log_flush_ms=5))) as c:
        did = c.post("/route", json={"query": "a b"}).json()["decision_id"]
        loop = c.app.state.feedback_loop
        loop.writer.flush()
        loop.log.add_feedback(did, score=0.25, cost=0.5)   # the write of the timed-out request
        r = c.post("/feedback", json={"decision_id": did, "score": 0.25, "cost": 0.5})
        assert r.status_code == 200 and r.json()["status"] == "already recorded"
        for other in ({"score": 0.5, "cost": 0.5}, {"score": 0.25}, {"thumbs": "up", "cost": 0.5}):
            assert c.post("/feedback", json={"decision_id": did, **other}).status_code == 409
        assert loop.log.counts() == (1, 1)


@pytest.mark.parametrize("bad", [{"cost": float("nan")}, {"cost": float("inf")}, {"cost": -1.0},
                                 {"latency_ms": float("nan")}, {"cost": True}, {"cost": "1"}])
def test_add_feedback_refuses_what_post_feedback_refuses(tmp_path, bad):
    """POST /feedback refuses a non-finite or negative cost or latency; the Python API stored a
    NaN cost (SQLite keeps it as NULL), and the identical retry then raised DuplicateFeedback
    (review D5-5). It is a ValueError naming the field; nothing is stored."""
    import numpy as np
    log = DecisionLog(f"sqlite:///{tmp_path / 'f.db'}")
    log.insert_decisions([_row("d1")])
    field = next(iter(bad))
    with pytest.raises(ValueError, match=f"{field} must be a finite number >= 0 or None"):
        log.add_feedback("d1", score=0.5, **bad)
    assert log.counts() == (1, 0)
    assert log.add_feedback("d1", score=0.5, cost=np.float32(0.25))["cost"] == 0.25
