"""RouteJudge voting page API: duels, votes, 4xx cases, replayed tokens, concurrency, restart, live mode."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pandas as pd
import pytest
import uvicorn
from fastapi.testclient import TestClient

from recsys_router.data import RoutingData
from recsys_router.judge.store import JudgeStore
from recsys_router.judge.web import JudgeSession, create_app, load_backends
from test_judge_helpers import FixedRouter, PriorRouter, tiny_data


def responses_of(d: RoutingData) -> pd.DataFrame:
    return pd.DataFrame({m: [f"answer of {m} to {q}" for q in d.query_ids] for m in d.llm_names},
                        index=d.query_ids)


def make_session(db, data=None, **kw):
    d = data or tiny_data()
    routers = {"fx": FixedRouter("x").fit(d), "fy": FixedRouter("y").fit(d),
               "pz": PriorRouter({"x": 0.0, "y": 0.5, "z": 1.0}).fit(d)}
    if "backends" not in kw:
        kw["responses"] = responses_of(d)
    return JudgeSession(d, routers, JudgeStore(db), seed=0, **kw)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    """uvicorn in a thread on a free loopback port."""

    def __init__(self, app):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self):
        self.thread.start()
        t0 = time.time()
        while not self.server.started:
            if time.time() - t0 > 20:
                raise RuntimeError("server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(10)


def test_duel_vote_reveal(tmp_path):
    s = make_session(tmp_path / "j.db")
    c = TestClient(create_app(s))
    duel = c.post("/api/duel", json={"query_id": "qa"}).json()
    assert set(duel) == {"token", "query_id", "query", "task", "budget", "answers"}
    assert not {"llm_a", "llm_b", "router_choices"} & set(duel)  # identities hidden until the vote
    # fx -> x, fy -> y, pz -> z: one vote each, no past comparisons -> seeded random pair
    r = c.post("/api/vote", json={"token": duel["token"], "label": "B"})
    assert r.status_code == 200
    rev = r.json()
    assert duel["answers"]["A"] == f"answer of {rev['llm_a']} to qa"
    assert duel["answers"]["B"] == f"answer of {rev['llm_b']} to qa"
    assert rev["router_choices"] == {"fx": "x", "fy": "y", "pz": "z"}
    expect = {r: (0.0 if m == rev["llm_a"] else 1.0 if m == rev["llm_b"] else None)
              for r, m in rev["router_choices"].items()}
    assert rev["attribution"] == expect
    assert rev["costs"] == {"A": {"x": 1.0, "y": 2.0, "z": 3.0}[rev["llm_a"]],
                            "B": {"x": 1.0, "y": 2.0, "z": 3.0}[rev["llm_b"]]}
    rec = JudgeStore(tmp_path / "j.db").records()
    assert len(rec) == 1 and rec[0].label == "B" and rec[0].record_id == rev["record_id"]
    assert rec[0].metadata["answers"] == duel["answers"]
    stats = c.get("/api/stats").json()
    assert stats["n_records"] == 1 and {row["router"] for row in stats["leaderboard"]} == {"fx", "fy", "pz"}
    assert c.get("/").status_code == 200 and "RouteJudge" in c.get("/stats").text


def test_budget_steers_votes(tmp_path):
    c = TestClient(create_app(make_session(tmp_path / "j.db")))
    # pz prefers z (cost 3); with C = 2.5 it takes y (prior .5 > x's 0): y has 2 votes, x 1
    duel = c.post("/api/duel", json={"query_id": "qb", "budget": 2.5}).json()
    rev = c.post("/api/vote", json={"token": duel["token"], "label": "tie"}).json()
    assert rev["router_choices"] == {"fx": "x", "fy": "y", "pz": "y"}
    assert {rev["llm_a"], rev["llm_b"]} == {"x", "y"} and rev["votes"] == {"x": 1, "y": 2, "z": 0}
    # with C = 1.5 only x fits: unanimous; the second LLM is the least-compared other one (z)
    duel = c.post("/api/duel", json={"query_id": "qb", "budget": 1.5}).json()
    rev = c.post("/api/vote", json={"token": duel["token"], "label": "A"}).json()
    assert rev["router_choices"] == {"fx": "x", "fy": "x", "pz": "x"}
    assert {rev["llm_a"], rev["llm_b"]} == {"x", "z"}
    assert [r.budget for r in JudgeStore(tmp_path / "j.db").records()] == [2.5, 1.5]


def test_random_draw_by_task(tmp_path):
    c = TestClient(create_app(make_session(tmp_path / "j.db")))
    seen = {c.post("/api/duel", json={"task": "k2"}).json()["query_id"] for _ in range(5)}
    assert seen == {"qb"}  # the only prompt of task k2
    assert c.post("/api/duel", json={"task": "nope"}).status_code == 404


def test_bad_requests_change_nothing(tmp_path):
    c = TestClient(create_app(make_session(tmp_path / "j.db")))
    tok = c.post("/api/duel", json={}).json()["token"]
    bad = [("/api/vote", {"token": tok, "label": "C"}, 422), ("/api/vote", {"label": "A"}, 422),
           ("/api/vote", {"token": tok, "label": "A", "extra": 1}, 422),
           ("/api/vote", {"token": "x" * 20, "label": "A"}, 404),
           ("/api/duel", {"query_id": "nope"}, 404), ("/api/duel", {"budget": -1}, 422),
           ("/api/duel", {"budget": "cheap"}, 422)]
    for path, body, status in bad:
        r = c.post(path, json=body)
        assert r.status_code == status, (path, body, r.text)
        assert "detail" in r.json()
    assert c.post("/api/vote", content=b"{not json", headers={"content-type": "application/json"}).status_code == 422
    assert c.get("/api/prompts?limit=0").status_code == 422
    r = c.post("/api/duel", json={"text": "my own prompt"})  # recorded mode has no answer to a custom prompt
    assert r.status_code == 422 and "live mode" in r.json()["detail"]
    assert JudgeStore(tmp_path / "j.db").count() == 0
    assert c.post("/api/vote", json={"token": tok, "label": "A"}).status_code == 200
    again = c.post("/api/vote", json={"token": tok, "label": "B"})
    assert again.status_code == 409 and "already used" in again.json()["detail"]
    recs = JudgeStore(tmp_path / "j.db").records()
    assert len(recs) == 1 and recs[0].label == "A"


def test_restart_keeps_votes_and_pending_duels(tmp_path):
    c1 = TestClient(create_app(make_session(tmp_path / "j.db")))
    t1 = c1.post("/api/duel", json={"query_id": "qa"}).json()["token"]
    t2 = c1.post("/api/duel", json={"query_id": "qb"}).json()["token"]
    assert c1.post("/api/vote", json={"token": t1, "label": "A"}).status_code == 200
    c2 = TestClient(create_app(make_session(tmp_path / "j.db")))  # a restarted server
    assert c2.get("/api/stats").json()["n_records"] == 1
    assert c2.post("/api/vote", json={"token": t2, "label": "both_bad"}).status_code == 200
    assert c2.post("/api/vote", json={"token": t1, "label": "A"}).status_code == 409
    assert [r.query_id for r in JudgeStore(tmp_path / "j.db").records()] == ["qa", "qb"]


def test_concurrent_votes_over_http(tmp_path):
    with LiveServer(create_app(make_session(tmp_path / "j.db"))) as srv:
        tokens = [httpx.post(srv.url + "/api/duel", json={}).json()["token"] for _ in range(12)]
        codes: list[int] = []
        lock = threading.Lock()

        def vote(tok, label):
            r = httpx.post(srv.url + "/api/vote", json={"token": tok, "label": label}, timeout=30)
            with lock:
                codes.append(r.status_code)

        labels = ["A", "B", "tie", "both_bad"]
        threads = [threading.Thread(target=vote, args=(t, labels[k % 4])) for k, t in enumerate(tokens)]
        # and eight browsers replaying the same extra token at once: exactly one wins
        extra = httpx.post(srv.url + "/api/duel", json={}).json()["token"]
        threads += [threading.Thread(target=vote, args=(extra, "A")) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert sorted(codes) == [200] * 13 + [409] * 7
    recs = JudgeStore(tmp_path / "j.db").records()
    assert len(recs) == 13 and len({r.record_id for r in recs}) == 13


class _FakeOpenAI(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server API)
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if self.headers.get("authorization") != "Bearer sekrit":
            self.send_response(401)
            self.end_headers()
            return
        prompt = body["messages"][-1]["content"]
        out = json.dumps({"id": "c1", "object": "chat.completion", "model": body["model"],
                          "choices": [{"index": 0, "message": {"role": "assistant",
                                                               "content": f"{body['model']} live: {prompt} "
                                                                          f"[{len(body['messages'])} msg]"}}],
                          "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *a):
        pass


def test_live_mode_fake_openai_server(tmp_path, monkeypatch):
    fake = ThreadingHTTPServer(("127.0.0.1", 0), _FakeOpenAI)
    threading.Thread(target=fake.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{fake.server_address[1]}/v1"
        (tmp_path / "backends.yaml").write_text(
            "backends:\n" + "".join(f"  {m}: {{base_url: '{url}', model: model-{m}, api_key_env: FAKE_KEY}}\n"
                                    for m in "xyz"))
        base = tiny_data()
        llms = pd.DataFrame({"name": ["x", "y", "z"], "input_price": [1.0, 2.0, 3.0], "output_price": [2.0, 4.0, 6.0]})
        d = RoutingData(base.queries, llms, base.scores, base.costs, name="tiny")
        backends = load_backends(tmp_path / "backends.yaml", d.llm_names)
        c = TestClient(create_app(make_session(tmp_path / "j.db", d, backends=backends)))
        r = c.post("/api/duel", json={"query_id": "qa"})
        assert r.status_code == 502 and "FAKE_KEY" in r.json()["detail"]  # key variable not set
        monkeypatch.setenv("FAKE_KEY", "sekrit")
        duel = c.post("/api/duel", json={"query_id": "qa"}).json()
        rev = c.post("/api/vote", json={"token": duel["token"], "label": "A"}).json()
        assert duel["answers"]["A"] == f"model-{rev['llm_a']} live: alpha? [1 msg]"
        assert duel["answers"]["B"] == f"model-{rev['llm_b']} live: alpha? [1 msg]"
        price = {"x": (1.0, 2.0), "y": (2.0, 4.0), "z": (3.0, 6.0)}
        for side, m in (("A", rev["llm_a"]), ("B", rev["llm_b"])):
            assert rev["costs"][side] == pytest.approx((10 * price[m][0] + 5 * price[m][1]) / 1e6)
            assert rev["latencies"][side] > 0
        rec = JudgeStore(tmp_path / "j.db").records()[0]
        assert rec.metadata["source"] == "live" and set(rec.latencies) == {rev["llm_a"], rev["llm_b"]}
        # a custom prompt with conversation history is forwarded as is (2 earlier turns + the prompt)
        hist = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
        duel = c.post("/api/duel", json={"text": "my own question", "history": hist, "task": "chat"}).json()
        assert duel["answers"]["A"].endswith("live: my own question [3 msg]") and duel["query_id"].startswith("custom-")
        rev = c.post("/api/vote", json={"token": duel["token"], "label": "tie"}).json()
        rec = JudgeStore(tmp_path / "j.db").records()[1]
        assert (rec.query, rec.history, rec.task) == ("my own question", hist, "chat")
        bad_turn = c.post("/api/duel", json={"text": "q", "history": [{"role": "robot", "content": "x"}]})
        assert bad_turn.status_code == 422
    finally:
        fake.shutdown()
    (tmp_path / "bad.yaml").write_text("backends:\n  q: {base_url: 'http://127.0.0.1:1/v1'}\n")
    with pytest.raises(ValueError, match="not an LLM of this router"):   # the proxy's loader's words
        load_backends(tmp_path / "bad.yaml", ["x"])


def test_one_loader_reads_both_layouts_for_the_judge_and_only_the_proxys_for_the_proxy(tmp_path):
    """The judge's live mode read backends.yaml with a copy of the proxy's loader; it now calls
    that loader, which takes the file without its top-level 'backends:' key for the judge."""
    from recsys_router.judge.web import load_backends as judge_load_backends
    from recsys_router.serving import load_backends
    p = tmp_path / "b.yaml"
    p.write_text("llm-a: {base_url: 'http://h/v1', model: m, api_key_env: K}\n")
    want = {"llm-a": {"base_url": "http://h/v1", "model": "m", "api_key_env": "K"}}
    assert judge_load_backends(p, ["llm-a"]) == want
    with pytest.raises(ValueError, match="expected a top-level 'backends:' mapping"):
        load_backends(p, ["llm-a"])
    p.write_text("backends:\n  llm-a: {base_url: 'http://h/v1', model: m, api_key_env: K}\n")
    assert judge_load_backends(p) == load_backends(p) == want
    p.write_text("- not a mapping\n")
    with pytest.raises(ValueError, match="expected a mapping of LLM name"):
        judge_load_backends(p)
