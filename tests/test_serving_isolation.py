"""Serving isolation: one bad client cannot break another.

Unencodable text is a 422 at validation and never reaches a batch; a batch whose model call
fails is retried request by request; ``/metrics`` labels come from the route table only and
parse with ``prometheus_client``; the OpenAI proxy answers every malformed message shape
with 400 and forwards nothing.
"""

from __future__ import annotations

import asyncio
import hashlib
import json

import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from recsys_router.encoders.cache import text_key
from recsys_router.serving import ServiceConfig, create_app
from recsys_router.serving.batcher import MicroBatcher
from test_serving import _expected, artifact  # noqa: F401 - the shared exported WordRouter

GOOD = [" ".join(["w"] * k) + f" good{k}" for k in range(1, 31)]


async def _post_all(app, bodies: list[bytes]) -> list[httpx.Response]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as cl:
        return await asyncio.gather(*[cl.post("/route", content=b, headers={"content-type": "application/json"})
                                      for b in bodies])


def _bodies(texts) -> list[bytes]:
    return [json.dumps({"query": t}).encode() for t in texts]


# ---------------------------------------------------------------- unencodable text
def test_lone_surrogate_is_422_and_never_reaches_a_batch(artifact):  # noqa: F811
    app = create_app(artifact, ServiceConfig(batch_wait_ms=100))
    bad = b'{"query": "evil \\ud800 text"}'  # a JSON escape that decodes to a lone surrogate
    bodies = _bodies(GOOD)
    bodies.insert(13, bad)
    rs = asyncio.run(_post_all(app, bodies))
    bad_r = rs.pop(13)
    assert bad_r.status_code == 422 and "UTF-8" in bad_r.json()["error"] and "query" in bad_r.json()["error"]
    assert [r.status_code for r in rs] == [200] * 30
    assert [r.json()["llm"] for r in rs] == [_expected(artifact, t) for t in GOOD]
    assert app.state.batcher.texts_run == 30  # the bad text was never predicted


@pytest.mark.parametrize("body,field", [
    (b'{"queries": ["fine", "\\udfff"]}', "queries.1"),
    (b'{"query": "ok", "candidates": ["\\ud83d"]}', "candidates.0"),
    (b'{"query": "raw \xed\xa0\x80 bytes"}', "query"),       # CESU bytes decode to a surrogate
    (b'{"query": "x", "\\ud800": 1}', "unicode"),            # a key: refused while parsing
])
def test_unencodable_anywhere_is_a_clean_422(artifact, body, field):  # noqa: F811
    app = create_app(artifact)
    r = TestClient(app).post("/route", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert field in r.json()["error"]
    assert app.state.batcher.texts_run == 0


@pytest.mark.parametrize("raw,status", [
    (b'{"query": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", 400),   # nesting past the parser's depth
    (b'{"query": "a", "wtp": NaN}', 422),
    (b'{"query": "a", "budget": Infinity}', 422),
    (b'{"query": "a", "budget": -Infinity}', 422),
    (b'{"query": "a", "wtp": 1e999}', 422),
    (b'{"query": "a", "wtp": "NaN"}', 422),
    (b'{"query": "a"', 422),
])
def test_hostile_bodies_get_one_line_errors(artifact, raw, status):  # noqa: F811
    app = create_app(artifact)
    r = TestClient(app, raise_server_exceptions=False).post("/route", content=raw,
                                                            headers={"content-type": "application/json"})
    assert r.status_code == status, r.text
    assert isinstance(r.json()["error"], str) and "\n" not in r.json()["error"]
    assert app.state.batcher.texts_run == 0


def test_text_key_never_raises_and_keeps_valid_keys():
    assert text_key("caf\u00e9") == hashlib.sha1("caf\u00e9".encode("utf-8")).hexdigest()
    # a lone surrogate is hashed from its surrogatepass bytes, written out by hand here
    assert text_key("a\ud800b") == hashlib.sha1(b"a\xed\xa0\x80b").hexdigest()
    odd = ["\ud800", "\udfff", "\ud83d", "\ud83d\ude00", "\U0001f600", "x\udc80y", "", "\x00"]
    keys = [text_key(t) for t in odd]
    assert len(set(keys)) == len(odd)  # distinct strings, distinct keys (the pair != the emoji)


# ---------------------------------------------------------------- failing batches
def test_failing_prediction_fails_only_its_request(artifact, monkeypatch):  # noqa: F811
    real = artifact.predict

    def poisoned(texts):
        if any("POISON" in t for t in texts):
            raise RuntimeError("model blew up on a poisoned text")
        return real(texts)
    monkeypatch.setattr(artifact, "predict", poisoned)
    app = create_app(artifact, ServiceConfig(batch_wait_ms=200))
    bodies = _bodies(GOOD)
    bodies.insert(7, json.dumps({"query": "a POISON pill"}).encode())
    rs = asyncio.run(_post_all(app, bodies))
    bad = rs.pop(7)
    assert bad.status_code == 500 and "blew up" in bad.json()["error"]
    assert [r.status_code for r in rs] == [200] * 30
    assert [r.json()["llm"] for r in rs] == [_expected(artifact, t) for t in GOOD]
    b = app.state.batcher
    assert b.batches_split >= 1 and b.requests_failed == 1 and b.texts_run == 30
    m = TestClient(app).get("/metrics").text
    assert "recsys_router_prediction_failures_total 1" in m


def _submit_all(batcher: MicroBatcher, requests: list[list[str]]) -> list:
    """Submit every request at once; results (or exceptions) in order."""
    async def run():
        try:
            return await asyncio.gather(*[batcher.submit(r) for r in requests], return_exceptions=True)
        finally:
            await batcher.stop()
    return asyncio.run(run())


def _recording_predict(calls: list, bad: str):
    """A model whose call fails when ``bad`` is among the texts; row = (text length, 0)."""
    def predict(texts):
        calls.append(list(texts))
        if bad in texts:
            raise ValueError(f"bad text {bad}")
        return np.array([[len(t), 0.0] for t in texts]), None
    return predict


def test_micro_batcher_retries_request_by_request():
    calls = []
    b = MicroBatcher(_recording_predict(calls, "bad"), max_batch=64, max_wait_ms=100)
    r1, r2, r3 = _submit_all(b, [["a"], ["bad", "cc"], ["dd", "eee"]])
    assert r1[0].tolist() == [[1.0, 0.0]] and r3[0].tolist() == [[2.0, 0.0], [3.0, 0.0]]
    assert isinstance(r2, ValueError)  # the whole request that held the bad text, and only it
    # halves of the three requests: [a] | [bad cc, dd eee] -> fails again -> [bad cc] | [dd eee]
    assert calls == [["a", "bad", "cc", "dd", "eee"], ["a"], ["bad", "cc", "dd", "eee"],
                     ["bad", "cc"], ["dd", "eee"]]
    assert (b.batches_split, b.requests_failed, b.batches_run, b.texts_run) == (2, 1, 2, 3)


def test_micro_batcher_bisection_cost():
    """One bad request among 64: found with 2 * log2(64) + 1 calls, not 65."""
    seen = []
    res = _submit_all(MicroBatcher(_recording_predict(seen, "t37"), max_batch=64, max_wait_ms=200),
                      [[f"t{i}"] for i in range(64)])
    calls = [len(c) for c in seen]
    assert [k for k, r in enumerate(res) if isinstance(r, Exception)] == [37]
    assert len(calls) == 1 + 2 * 6 and calls[0] == 64 and sum(calls[1:]) == 2 * (32 + 16 + 8 + 4 + 2 + 1)


# ---------------------------------------------------------------- /metrics
def _samples(text: str) -> dict:
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_labels_come_from_the_route_table(artifact):  # noqa: F811
    app = create_app(artifact, ServiceConfig(api_key="k"))
    c = TestClient(app)
    key = {"Authorization": "Bearer k"}
    c.post("/route", json={"query": "a b"}, headers=key)
    c.get("/no/such/path", headers=key)
    c.get("/unauthenticated/junk")
    c.get("/metrics", headers=key)                              # its own series exist from now on
    before = _samples(c.get("/metrics", headers=key).text)
    size_before = len(c.get("/metrics", headers=key).text)
    junk = ['/a"b', "/x\\y", "/%0Aevil 1", "/route/../../etc", "/{endpoint}", "/metrics/x", "/héhé"]
    for i in range(2000):
        path = junk[i % len(junk)] + f"/{i}"
        c.get(path, headers=key if i % 2 else {})           # 404 with the key, 401 without
        c.post(path, json={"query": "x"}, headers=key if i % 3 else {})
    text = c.get("/metrics", headers=key).text
    after = _samples(text)
    assert set(after) == set(before)                            # no new series, just bigger counts
    assert len(text) < size_before + 200                        # a few more digits at most
    endpoints = {dict(k[1]).get("endpoint") for k in after} - {None}
    assert endpoints <= {r.path for r in app.router.routes} | {"other"}
    assert after[("recsys_router_requests_total", (("endpoint", "other"), ("status", "404")))] == \
        1 + 1000 + sum(1 for i in range(2000) if i % 3)
    assert after[("recsys_router_requests_total", (("endpoint", "other"), ("status", "401")))] == \
        1 + 1000 + sum(1 for i in range(2000) if i % 3 == 0)
    assert after[("recsys_router_requests_total", (("endpoint", "/route"), ("status", "200")))] == 1


def test_metrics_label_values_are_escaped(artifact):  # noqa: F811
    app = create_app(artifact)
    c = TestClient(app)
    weird = 'evil"} 1\nrecsys_router_batches_total 999\\'
    app.state.stats.chosen[weird] += 3
    app.state.stats.observe('/x"\n\\', 200, 0.01)
    text = c.get("/metrics").text
    got = _samples(text)
    assert got[("recsys_router_chosen_total", (("llm", weird),))] == 3
    assert got[("recsys_router_requests_total", (("endpoint", '/x"\n\\'), ("status", "200")))] == 1
    assert got[("recsys_router_batches_total", ())] == 0  # the injected line did not become a sample


# ---------------------------------------------------------------- OpenAI proxy shapes
def _proxy(artifact):  # noqa: F811
    # backends on a closed port: anything forwarded would be a 502, so a 400 proves nothing left
    backends = {n: {"base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key_env": None}
                for n in artifact.llm_names}
    app = create_app(artifact, ServiceConfig(backends=backends, backend_timeout_s=2))
    return app, TestClient(app)


U = {"role": "user", "content": "route me"}
MALFORMED = [
    [], "text", 3, None,
    {"model": "router"},
    {"model": "router", "messages": {"role": "user", "content": "x"}},
    {"model": "router", "messages": "hello"},
    {"model": "router", "messages": []},
    {"model": "router", "messages": ["hello"]},
    {"model": "router", "messages": [None]},
    {"model": "router", "messages": [3]},
    {"model": "router", "messages": [["user", "x"]]},
    {"model": "router", "messages": [{"content": "x"}]},
    {"model": "router", "messages": [{"role": 1, "content": "x"}]},
    {"model": "router", "messages": [{"role": None, "content": "x"}]},
    {"model": "router", "messages": [{"role": ["user"], "content": "x"}]},
    {"model": "router", "messages": [{"role": "user"}]},
    {"model": "router", "messages": [{"role": "user", "content": None}]},
    {"model": "router", "messages": [{"role": "user", "content": 3}]},
    {"model": "router", "messages": [{"role": "user", "content": {"text": "x"}}]},
    {"model": "router", "messages": [{"role": "user", "content": ["x"]}]},
    {"model": "router", "messages": [{"role": "user", "content": [3]}]},
    {"model": "router", "messages": [{"role": "user", "content": [None]}]},
    {"model": "router", "messages": [{"role": "user", "content": [["text", "x"]]}]},
    {"model": "router", "messages": [{"role": "user", "content": [{"text": "x"}]}]},
    {"model": "router", "messages": [{"role": "user", "content": [{"type": 1, "text": "x"}]}]},
    {"model": "router", "messages": [{"role": "user", "content": [{"type": "text", "text": 3}]}]},
    {"model": "router", "messages": [{"role": "user", "content": [{"type": "text", "text": ["x"]}]}]},
    {"model": "router", "messages": [{"role": "user", "content": [{"type": "text", "text": {"a": 1}}]}]},
    {"model": "router", "messages": [{"role": "user", "content": [{"type": "text"}]}]},
    {"model": "router", "messages": [U, {"role": "assistant", "content": 7}]},
    {"model": "router", "messages": [U, "trailing junk"]},
    {"model": "router", "messages": [{"role": "system", "content": "only a system prompt"}]},
    {"model": ["router"], "messages": [U]},
    {"model": {"a": 1}, "messages": [U]},
    {"model": 3, "messages": [U]},
    {"model": "router", "stream": "yes", "messages": [U]},
    {"model": "router-wtp", "wtp": "nan", "messages": [U]},
    {"model": "router-wtp", "wtp": "inf", "messages": [U]},
    {"model": "router-wtp", "wtp": True, "messages": [U]},
    {"model": "router-wtp", "wtp": [1], "messages": [U]},
    {"model": "router-wtp", "wtp": "1.5", "messages": [U]},  # text only in the model name
    {"model": "router-budget-nan", "messages": [U]},
    {"model": "router-budget-1e999", "messages": [U]},
    {"model": "gpt-4", "messages": [U]},
]


@pytest.mark.parametrize("k", range(len(MALFORMED)))
def test_proxy_malformed_shapes_are_400(artifact, k):  # noqa: F811
    app, c = _proxy(artifact)
    r = c.post("/v1/chat/completions", json=MALFORMED[k])
    assert r.status_code == 400, (MALFORMED[k], r.status_code, r.text)
    assert isinstance(r.json()["error"], str) and r.json()["error"]
    assert app.state.batcher.texts_run == 0  # refused before routing


@pytest.mark.parametrize("raw,status", [
    (b'{"model": "router", "messages": [{"role": "user", "content": "x"}], "temperature": NaN}', 400),
    (b'{"model": "router-wtp", "wtp": Infinity, "messages": [{"role": "user", "content": "x"}]}', 400),
    (b'{"model": "router", "messages": ' + b"[" * 50_000 + b"]" * 50_000 + b"}", 400),
    (b'{"model": "router", "messages": [{"role": "user", "content": "bad \\udc00"}]}', 422),
    (b'{"model": "router", "messages": [{"role": "user", "content": [{"type": "text", "text": "\\ud800"}]}]}', 422),
    (b'{"model": "router", "messages": [{"role": "system", "content": "\\ud800"}, '
     b'{"role": "user", "content": "fine"}]}', 422),
    (b"\xff\xfe{not json", 400),
])
def test_proxy_unforwardable_bodies(artifact, raw, status):  # noqa: F811
    app, c = _proxy(artifact)
    r = c.post("/v1/chat/completions", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == status, r.text
    assert app.state.batcher.texts_run == 0


def test_micro_batcher_never_mixes_contexts_in_one_call():
    """Requests submitted with different contexts (router snapshots) share no model call."""
    calls = []

    def predict(texts, context=None):
        calls.append((context, list(texts)))
        return np.array([[len(t), context] for t in texts], dtype=float), None
    b = MicroBatcher(predict, max_batch=64, max_wait_ms=100)
    reqs = [(["a", "bb"], 1), (["ccc"], 2), (["dddd"], 1), (["e"], 2)]

    async def run():
        try:
            return await asyncio.gather(*[b.submit(t, c) for t, c in reqs])
        finally:
            await b.stop()
    out = asyncio.run(run())
    assert sorted((c, tuple(t)) for c, t in calls) == [(1, ("a", "bb", "dddd")), (2, ("ccc", "e"))]
    for (texts, ctx), (scores, _) in zip(reqs, out):
        assert scores.tolist() == [[len(t), ctx] for t in texts]
