"""Decision-log writer failures are visible: an engine that cannot write makes the writer
retry each batch WRITE_ATTEMPTS times, then drop it; the failed attempts, the dropped
decisions, the last error (without the query text) and the queue depth show in
``GET /health`` (status ``degraded``) and ``GET /metrics``. No timing is asserted: the
back-off is set to 0 and the tests wait on the writer's own flush."""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from recsys_router.feedback import store, writer
from recsys_router.feedback.store import WRITE_ATTEMPTS, DecisionLog, DecisionWriter, LogFull
from recsys_router.serving import ServiceConfig, create_app
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


def test_a_full_queue_counts_rejected_decisions(tmp_path):
    log = DecisionLog(f"sqlite:///{tmp_path / 'q.db'}")
    entered, release = threading.Event(), threading.Event()
    real = log.insert_decisions

    def slow(rows):
        entered.set()
        release.wait(30)
        real(rows)

    log.insert_decisions = slow
    w = DecisionWriter(log, batch_size=1, flush_ms=1.0, max_pending=2)
    w.submit([_row("a")])
    entered.wait(30)  # the writer holds "a"; the queue is empty
    w.submit([_row("b"), _row("c")])
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


def _row(did: str) -> dict:
    return store.decision_row(decision_id=did, instance="t", artifact_sha=None, policy="argmax",
                              policy_value=None, explore="none", candidates=["m"], chosen="m",
                              propensity=1.0, probs={"m": 1.0}, scores={"m": 0.5}, costs=None,
                              text="q", log_text="none")
