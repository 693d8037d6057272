"""The feedback loop in the service: decision ids and propensities in /route and the proxy,
the decision log in SQLite (WAL) and a real PostgreSQL server, POST /feedback status codes,
a clean shutdown flushing every queued decision, two service processes logging to one
PostgreSQL database, and kill -9 losing at most the unflushed batch."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient
from pg_util import pg_url  # noqa: F401 - fixture

from recsys_router.export import export_router, load_router
from recsys_router.feedback.store import SCHEMA_VERSION, DecisionLog
from recsys_router.serving import ServiceConfig, create_app
from serve_helpers import free_port, wait_up
from test_serving import artifact  # noqa: F401 - the WordRouter artifact fixture

ROOT = Path(__file__).resolve().parents[1]


def _exercise(url, artifact):
    """Route, give feedback, check every status code and the stored rows."""
    cfg = ServiceConfig(log_db=url, log_text="full", explore="epsilon:0.5", seed=1, api_key="k")
    auth = {"authorization": "Bearer k"}
    with TestClient(create_app(artifact, cfg)) as c:
        r = c.post("/route", json={"queries": ["a b", "a b c"]}, headers=auth).json()["results"]
        ids = [x["decision_id"] for x in r]
        n = len(artifact.llm_names)
        for x in r:  # epsilon 0.5 over n LLMs: greedy 0.5 + 0.5/n, others 0.5/n
            greedy = x["llm"] == artifact.llm_names[len(("a b" if x is r[0] else "a b c").split()) % n]
            assert x["propensity"] == pytest.approx(0.5 + 0.5 / n if greedy else 0.5 / n)
        fb = {"decision_id": ids[0], "score": 0.75, "cost": 0.01, "latency_ms": 120}
        assert c.post("/feedback", json=fb).status_code == 401  # same auth as /route
        assert c.post("/feedback", json=fb, headers=auth).status_code == 200
        again = c.post("/feedback", json=fb, headers=auth)   # a retry of the same: no error
        assert again.status_code == 200 and again.json()["status"] == "already recorded"
        for other in ({**fb, "score": 0.5}, {**fb, "cost": 0.02}, {**fb, "latency_ms": None}):
            assert c.post("/feedback", json=other, headers=auth).status_code == 409
        assert c.post("/feedback", json={"decision_id": "nope", "score": 1}, headers=auth).status_code == 404
        for bad in ({"decision_id": ids[1], "score": 1.5}, {"decision_id": ids[1], "score": -0.1},
                    {"decision_id": ids[1], "thumbs": "sideways"}, {"decision_id": ids[1]},
                    {"decision_id": ids[1], "score": 1, "thumbs": "up"},
                    {"decision_id": ids[1], "score": 1, "cost": -1},
                    {"decision_id": ids[1], "score": 1, "extra": "x"}):
            resp = c.post("/feedback", json=bad, headers=auth)
            assert resp.status_code == 422, bad
            assert "error" in resp.json()
        assert c.post("/feedback", json={"decision_id": ids[1], "thumbs": "down"},
                      headers=auth).status_code == 200
    log = DecisionLog(url)
    df = log.read()
    assert set(df["decision_id"]) == set(ids) and len(df) == 2
    row = df.set_index("decision_id").loc[ids[0]]
    assert row["query_text"] == "a b" and len(row["query_hash"]) == 64
    assert row["feedback_score"] == 0.75 and row["latency_ms"] == 120
    assert row["chosen"] == r[0]["llm"] and row["propensity"] == pytest.approx(r[0]["propensity"])
    assert row["explore"] == "epsilon:0.5" and row["policy"] == "argmax"
    assert df.set_index("decision_id").loc[ids[1], "thumbs"] == "down"
    assert log.counts() == (2, 2)
    return log


def test_sqlite_log_wal_and_feedback(tmp_path, artifact):
    log = _exercise(f"sqlite:///{tmp_path / 'd.db'}", artifact)
    with log.engine.connect() as c:
        assert c.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


def test_postgresql_log_and_feedback(pg_url, artifact):  # noqa: F811
    _exercise(pg_url, artifact)


def test_log_text_none_and_schema_version(tmp_path, artifact):
    url = f"sqlite:///{tmp_path / 'd.db'}"
    with TestClient(create_app(artifact, ServiceConfig(log_db=url, log_text="none"))) as c:
        c.post("/route", json={"query": "secret words"})
    df = DecisionLog(url).read()
    assert df["query_text"].isna().all() and df["query_hash"].isna().all()
    eng = sa.create_engine(url)
    with eng.begin() as conn:
        conn.exec_driver_sql("UPDATE rr_meta SET value='99' WHERE key='schema_version'")
    with pytest.raises(ValueError, match=f"schema version 99; this package reads version {SCHEMA_VERSION}"):
        DecisionLog(url)


def test_feedback_without_log_and_bad_urls(artifact):
    with TestClient(create_app(artifact)) as c:
        r = c.post("/route", json={"query": "a"}).json()
        assert len(r["decision_id"]) == 32 and r["propensity"] == 1.0
        resp = c.post("/feedback", json={"decision_id": r["decision_id"], "score": 1})
        assert resp.status_code == 400 and "--log-db" in resp.json()["error"]
    with pytest.raises(ValueError, match="not a usable database URL"):
        DecisionLog("nosuchdialect://x/y")
    with pytest.raises(ValueError, match="--log-text"):
        create_app(artifact, ServiceConfig(log_text="all"))
    with pytest.raises(ValueError, match="--explore"):
        create_app(artifact, ServiceConfig(explore="epsilon:2"))
    with pytest.raises(ValueError, match="thompson needs a router that can sample"):
        create_app(artifact, ServiceConfig(explore="thompson"))


def test_service_propensities_match_frequencies(artifact):
    """Through the service: over many decisions of one query, each LLM is served as often
    as its logged propensity says."""
    n_calls = 1500
    with TestClient(create_app(artifact, ServiceConfig(explore="softmax:0.5", seed=3))) as c:
        res = []
        for _ in range(n_calls // 100):
            res += c.post("/route", json={"queries": ["one two"] * 100}).json()["results"]
    names = artifact.llm_names
    prop = {}
    for x in res:
        prop.setdefault(x["llm"], set()).add(round(x["propensity"], 12))
    assert all(len(v) == 1 for v in prop.values())  # one query: one probability per LLM
    s = np.array([res[0]["scores"][n] for n in names])
    want = np.exp(s / 0.5) / np.exp(s / 0.5).sum()
    freq = np.array([sum(x["llm"] == n for x in res) for n in names]) / n_calls
    for j, n in enumerate(names):
        if n in prop:
            assert next(iter(prop[n])) == pytest.approx(want[j])
    assert np.all(np.abs(freq - want) <= 4 * np.sqrt(want * (1 - want) / n_calls) + 1e-9)


def test_clean_shutdown_flushes_queued_decisions(tmp_path, artifact):
    url = f"sqlite:///{tmp_path / 'd.db'}"
    cfg = ServiceConfig(log_db=url, log_batch=1000, log_flush_ms=600_000)  # never by time
    with TestClient(create_app(artifact, cfg)) as c:
        for _ in range(7):
            c.post("/route", json={"queries": ["a", "b c"]})
        assert DecisionLog(url).counts()[0] == 0  # all still queued
    assert DecisionLog(url).counts()[0] == 14


# ---------------------------------------------------------------------------- processes
@pytest.fixture(scope="module")
def knn_artifact(tmp_path_factory, sim_split):
    from recsys_router.registry import make_router
    out = tmp_path_factory.mktemp("knn") / "knn"
    export_router(make_router("knn", k=5).fit(sim_split["train"]), out, train_data=sim_split["train"])
    return out


def _serve(art, url, *extra):
    port = free_port()
    cmd = [sys.executable, "-c", "import sys; from recsys_router.cli import main; sys.exit(main())", "serve", str(art), "--port", str(port),
           "--log-db", url, *extra]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
    base = f"http://127.0.0.1:{port}"
    wait_up(base, proc, 120.0)
    return proc, base


def test_two_processes_one_postgresql_nothing_lost(pg_url, knn_artifact):  # noqa: F811
    procs = [_serve(knn_artifact, pg_url, "--explore", "epsilon:0.2", "--seed", str(k),
                    "--log-batch", "16", "--log-flush-ms", "100") for k in range(2)]
    n_each, ids, errors = 60, [[], []], []

    def client(k):
        try:
            with httpx.Client(timeout=30) as h:
                for i in range(n_each):
                    r = h.post(procs[k][1] + "/route", json={"query": f"query {k} {i} {'w ' * (i % 5)}"})
                    ids[k].append(r.json()["decision_id"])
                # feedback through the OTHER instance (its decision may still be batched there)
                for i, did in enumerate(ids[k]):
                    r = h.post(procs[1 - k][1] + "/feedback", json={"decision_id": did, "score": (i % 3) / 2})
                    assert r.status_code == 200, r.text
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))

    threads = [threading.Thread(target=client, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for proc, _ in procs:
        proc.send_signal(signal.SIGTERM)  # clean shutdown
        proc.wait(timeout=60)
    assert not errors, errors
    log = DecisionLog(pg_url)
    df = log.read()
    assert log.counts() == (2 * n_each, 2 * n_each)
    assert set(df["decision_id"]) == set(ids[0]) | set(ids[1])
    assert df["instance"].nunique() == 2


def test_kill_9_loses_at_most_the_unflushed_batch(tmp_path, knn_artifact):
    url = f"sqlite:///{tmp_path / 'k.db'}"
    batch = 5
    proc, base = _serve(knn_artifact, url, "--log-batch", str(batch), "--log-flush-ms", "600000")
    with httpx.Client(timeout=30) as h:
        for i in range(12):
            h.post(base + "/route", json={"query": f"q {i}"})
    time.sleep(1.0)  # let the writer commit the two full batches
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    written = DecisionLog(url).counts()[0]
    assert written == 10  # two full batches committed, the last partial one (2 rows) lost
    assert 12 - written <= batch


@pytest.mark.parametrize("kind", ["own-sampler", "mc-dropout"])
def test_thompson_through_the_service_propensities_match_frequencies(tmp_path, sim_split, kind):
    """Thompson sampling: every logged propensity is the probability of what was served, and
    over many decisions of one query each LLM is served as often as the mean of its logged
    choice probabilities (read back from the log's rows)."""
    import json

    from recsys_router.registry import make_router
    from toy_routers import NoisyWordRouter
    tr = sim_split["train"]
    out = tmp_path / "r"
    router = NoisyWordRouter() if kind == "own-sampler" else \
        make_router("mf", dropout=0.5, hidden=[16], dim=8, max_epochs=1, encoder_options={"dim": 32})
    export_router(router.fit(tr), out, train_data=tr)
    art = load_router(out)
    url = f"sqlite:///{tmp_path / 't.db'}"
    n_calls = 600
    with TestClient(create_app(art, ServiceConfig(explore="thompson:16", log_db=url, seed=2))) as c:
        for _ in range(n_calls // 100):
            assert c.post("/route", json={"queries": ["a question about lists"] * 100}).status_code == 200
    df = DecisionLog(url).read()
    assert len(df) == n_calls and df["explore"].eq("thompson").all()
    probs = [json.loads(p) for p in df["probs"]]
    for row, p in zip(df.itertuples(), probs):
        assert row.propensity == pytest.approx(p[row.chosen])  # logged = probability of what was drawn
        assert sum(p.values()) == pytest.approx(1.0)
    names = art.llm_names
    mean_p = np.array([np.mean([p.get(n, 0.0) for p in probs]) for n in names])
    freq = np.array([(df["chosen"] == n).mean() for n in names])
    assert np.all(np.abs(freq - mean_p) <= 4 * np.sqrt(mean_p * (1 - mean_p) / n_calls) + 1e-9)
    if kind == "own-sampler":
        assert (mean_p > 0.02).sum() >= 3  # the draws do disagree
