"""The router service: routing API, validation, limits, API key, metrics, micro-batching,
and the OpenAI-compatible proxy against a fake backend server on loopback."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import httpx
import numpy as np
import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse
from fastapi.testclient import TestClient

from recsys_router.export import export_router, load_router
from recsys_router.serving import ServiceConfig, create_app
from serve_helpers import free_port
from toy_routers import WordRouter


@pytest.fixture(scope="module")
def artifact(tmp_path_factory, sim_split):
    tr = sim_split["train"]
    out = tmp_path_factory.mktemp("art") / "word"
    export_router(WordRouter().fit(tr), out, train_data=tr)
    return load_router(out)


def _expected(art, text):
    n = len(art.llm_names)
    return art.llm_names[len(text.split()) % n]


def test_route_single_and_batch(artifact):
    c = TestClient(create_app(artifact))
    r = c.post("/route", json={"query": "one two three"})
    assert r.status_code == 200
    assert r.json()["llm"] == _expected(artifact, "one two three")
    assert set(r.json()["scores"]) == set(artifact.llm_names)
    texts = ["a", "a b", "a b c d"]
    r = c.post("/route", json={"queries": texts})
    assert [x["llm"] for x in r.json()["results"]] == [_expected(artifact, t) for t in texts]
    cand = artifact.llm_names[:2]
    r = c.post("/route", json={"query": "a b c", "candidates": cand, "wtp": 1e6})
    assert r.json()["llm"] in cand and r.json()["policy"] == "wtp"
    assert set(r.json()["scores"]) == set(cand)


def test_health_llms_metrics(artifact):
    c = TestClient(create_app(artifact))
    assert c.get("/health").json()["status"] == "ok"
    assert [x["name"] for x in c.get("/llms").json()["llms"]] == artifact.llm_names
    c.post("/route", json={"query": "x y"})
    c.post("/route", json={"query": ""})
    m = c.get("/metrics").text
    assert 'recsys_router_requests_total{endpoint="/route",status="200"} 1' in m
    assert 'recsys_router_requests_total{endpoint="/route",status="400"} 1' in m
    assert f'recsys_router_chosen_total{{llm="{_expected(artifact, "x y")}"}} 1' in m


@pytest.mark.parametrize("body,status,needle", [
    ({}, 400, "exactly one of"),
    ({"query": "a", "queries": ["b"]}, 400, "exactly one of"),
    ({"query": "a", "wtp": -1}, 422, "wtp"),
    ({"query": "a", "wtp": 1, "budget": 1}, 400, "not both"),
    ({"query": "a", "candidates": ["nope"]}, 400, "unknown candidate"),
    ({"query": "a", "colour": "red"}, 422, "colour"),
    ({"queries": []}, 400, "non-empty"),
    ({"query": 3}, 422, "query"),
])
def test_bad_requests(artifact, body, status, needle):
    c = TestClient(create_app(artifact))
    r = c.post("/route", json=body)
    assert r.status_code == status, r.text
    assert needle in r.json()["error"]


def test_limits_and_api_key(artifact):
    c = TestClient(create_app(artifact, ServiceConfig(max_batch=2, max_body_bytes=200, api_key="s3cret")))
    assert c.post("/route", json={"query": "a"}).status_code == 401
    h = {"Authorization": "Bearer s3cret"}
    assert c.post("/route", json={"query": "a"}, headers=h).status_code == 200
    assert c.post("/route", json={"queries": ["a", "b", "c"]}, headers=h).status_code == 413
    r = c.post("/route", json={"query": "a " * 200}, headers=h)
    assert r.status_code == 413 and "exceeds the limit" in r.json()["error"]
    assert c.get("/health").status_code == 200  # health needs no key


def test_micro_batching_groups_concurrent_requests(artifact):
    app = create_app(artifact, ServiceConfig(batch_wait_ms=50))

    async def run():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as cl:
            texts = [" ".join(["w"] * k) for k in range(1, 21)]
            rs = await asyncio.gather(*[cl.post("/route", json={"query": t}) for t in texts])
            return texts, rs
    texts, rs = asyncio.run(run())
    assert [r.json()["llm"] for r in rs] == [_expected(artifact, t) for t in texts]
    assert app.state.batcher.texts_run == 20
    assert app.state.batcher.batches_run < 20


# ---------------------------------------------------------------- OpenAI-compatible proxy
def _fake_openai(name: str) -> FastAPI:
    app = FastAPI()
    app.state.seen = []

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        app.state.seen.append((body, request.headers.get("authorization")))
        text = f"{name} says hi"
        if body.get("stream"):
            async def gen():
                for w in text.split():
                    yield "data: " + json.dumps({"model": body["model"], "choices": [
                        {"index": 0, "delta": {"content": w + " "}}]}) + "\n\n"
                yield "data: [DONE]\n\n"
            return StreamingResponse(gen(), media_type="text/event-stream")
        return {"id": "x", "object": "chat.completion", "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}
    return app


@pytest.fixture(scope="module")
def fake_backends():
    servers, apps, ports = [], [], []
    for k in range(2):
        app = _fake_openai(f"backend{k}")
        port = free_port()
        srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
        th = threading.Thread(target=srv.run, daemon=True)
        th.start()
        servers.append(srv)
        apps.append(app)
        ports.append(port)
    deadline = time.time() + 10
    while not all(s.started for s in servers) and time.time() < deadline:
        time.sleep(0.05)
    yield apps, ports
    for s in servers:
        s.should_exit = True


def test_openai_proxy(artifact, fake_backends, tmp_path, monkeypatch):
    apps, ports = fake_backends
    names = artifact.llm_names
    (tmp_path / "backends.yaml").write_text(
        "backends:\n"
        f"  {names[0]}: {{base_url: 'http://127.0.0.1:{ports[0]}/v1', model: m0, api_key_env: K0}}\n"
        f"  {names[1]}: {{base_url: 'http://127.0.0.1:{ports[1]}/v1', model: m1}}\n")
    from recsys_router.serving import load_backends
    monkeypatch.setenv("K0", "key0")
    cfg = ServiceConfig(backends=load_backends(tmp_path / "backends.yaml", names))
    c = TestClient(create_app(artifact, cfg))
    # WordRouter: 2-word text -> LLM index 2 % n; restrict to the two backends by word count
    n = len(names)
    text0 = " ".join(["w"] * n)          # n words -> index 0
    text1 = " ".join(["w"] * (n + 1))    # n+1 words -> index 1
    r = c.post("/v1/chat/completions", json={"model": "router", "messages": [
        {"role": "system", "content": "be nice"}, {"role": "user", "content": text0}]})
    assert r.status_code == 200, r.text
    assert r.headers["x-recsys-router-llm"] == names[0] and r.json()["model"] == names[0]
    assert len(r.headers["x-recsys-router-decision-id"]) == 32  # for POST /feedback
    assert r.json()["choices"][0]["message"]["content"] == "backend0 says hi"
    body, auth = apps[0].state.seen[-1]
    assert body["model"] == "m0" and auth == "Bearer key0"
    with c.stream("POST", "/v1/chat/completions", json={
            "model": "router-argmax", "stream": True,
            "messages": [{"role": "user", "content": text1}]}) as r:
        assert r.headers["x-recsys-router-llm"] == names[1]
        assert len(r.headers["x-recsys-router-decision-id"]) == 32
        lines = [ln for ln in r.iter_lines() if ln.startswith("data:")]
    assert lines[-1] == "data: [DONE]"
    chunks = [json.loads(ln[5:]) for ln in lines[:-1]]
    assert "".join(ch["choices"][0]["delta"]["content"] for ch in chunks).strip() == "backend1 says hi"
    assert all(ch["model"] == names[1] for ch in chunks)
    bad = c.post("/v1/chat/completions", json={"model": "gpt-4", "messages": [{"role": "user", "content": "x"}]})
    assert bad.status_code == 400 and "router" in bad.json()["error"]
    bad = c.post("/v1/chat/completions", json={"model": "router", "messages": []})
    assert bad.status_code == 400


def test_backends_file_errors(tmp_path, artifact):
    from recsys_router.serving import load_backends
    p = tmp_path / "b.yaml"
    p.write_text("backends:\n  nope: {base_url: 'http://127.0.0.1:1/v1'}\n")
    with pytest.raises(ValueError, match="not an LLM of this router"):
        load_backends(p, artifact.llm_names)
    p.write_text("x: 1\n")
    with pytest.raises(ValueError, match="top-level 'backends:'"):
        load_backends(p)


# ---------------------------------------------------------------- hardening
def test_chunked_body_over_limit_is_413(artifact):
    c = TestClient(create_app(artifact, ServiceConfig(max_body_bytes=100)))

    def chunks():  # no Content-Length: httpx sends Transfer-Encoding: chunked
        yield b'{"query": "'
        for _ in range(20):
            yield b"word word "
        yield b'"}'
    r = c.post("/route", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413 and "100 bytes" in r.json()["error"]

    def small():
        yield b'{"query": "a b"}'
    r = c.post("/route", content=small(), headers={"content-type": "application/json"})
    assert r.status_code == 200 and r.json()["llm"] == _expected(artifact, "a b")


def test_own_rule_router_served_and_ground_truth_refused(sim_split, tmp_path):
    from recsys_router.registry import make_router
    tr = sim_split["train"]
    zero = load_router(export_router(make_router("zero").fit(tr), tmp_path / "zero", train_data=tr))
    assert zero.custom_routing
    c = TestClient(create_app(zero))
    texts = [f"query number {i}" for i in range(12)]
    mc = np.asarray(zero.router.mean_costs_)
    budget = float(np.sort(mc)[2] * 0.5 + np.sort(mc)[3] * 0.5)
    got = [x["llm"] for x in c.post("/route", json={"queries": texts, "budget": budget}).json()["results"]]
    want = list(zero.router.route(zero.to_data(texts), budget=budget))
    assert got == want
    # the zero router mixes two hull LLMs at this budget; each text keeps its draw alone
    assert [c.post("/route", json={"query": t, "budget": budget}).json()["llm"] for t in texts] == got
    oracle = load_router(export_router(make_router("oracle").fit(tr), tmp_path / "or", train_data=tr))
    with pytest.raises(ValueError, match="ground-truth"):
        create_app(oracle)


def test_repeated_texts_in_a_batch(artifact):
    c = TestClient(create_app(artifact))
    r = c.post("/route", json={"queries": ["a b c", "x", "a b c"]}).json()["results"]
    same = [{k: v for k, v in x.items() if k != "decision_id"} for x in (r[0], r[2])]
    assert same[0] == same[1] and r[0]["llm"] == _expected(artifact, "a b c")
    assert r[0]["decision_id"] != r[2]["decision_id"]  # each decision is its own


def test_proxy_backend_down_is_502(artifact):
    port = free_port()  # nothing listens there
    names = artifact.llm_names
    backends = {n: {"base_url": f"http://127.0.0.1:{port}/v1", "model": "m", "api_key_env": None}
                for n in names}
    c = TestClient(create_app(artifact, ServiceConfig(backends=backends, backend_timeout_s=5)))
    for stream in (False, True):
        r = c.post("/v1/chat/completions", json={"model": "router", "stream": stream,
                                                 "messages": [{"role": "user", "content": "a b"}]})
        assert r.status_code == 502 and _expected(artifact, "a b") in r.json()["error"]
