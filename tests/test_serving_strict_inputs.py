"""Router service requests: numbers are JSON numbers, texts are storable, body limits count
bytes received.

``{"wtp": true}`` routed with wtp=1.0 and ``"1.5"`` became 1.5 (pydantic's lax mode); a NUL
character in a query reached the decision log, where PostgreSQL refused the whole batch of
every other request; a raw ASGI server may pass a ``Content-Length`` that lies, repeats or
is not a number, and the body limit trusted it. Each is now a 4xx before any model call.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from fastapi.testclient import TestClient

from recsys_router.serving import ServiceConfig, create_app
from recsys_router.serving.guards import BodyLimit
from test_serving import _expected, artifact  # noqa: F401 - the WordRouter artifact fixture

JSON = {"content-type": "application/json"}


@pytest.mark.parametrize("body,what", [
    (b'{"query": "a b", "wtp": true}', "wtp: Input should be a valid number"),
    (b'{"query": "a b", "wtp": "1.5"}', "wtp: Input should be a valid number"),
    (b'{"query": "a b", "budget": false}', "budget: Input should be a valid number"),
    (b'{"query": "a b", "budget": "0.01"}', "budget: Input should be a valid number"),
    (b'{"query": "a b", "wtp": NaN}', "wtp: Input should be a finite number"),  # was ">= 0"
    (b'{"query": "a b", "budget": -Infinity}', "budget: Input should be a finite number"),
    (b'{"query": "evil\\u0000text"}', "query: Value error, text holds a NUL character"),
    (b'{"queries": ["ok", "a\\u0000"]}', "queries.1: Value error, text holds a NUL"),
    (b'{"query": "a", "candidates": ["x\\u0000"]}', "candidates.0: Value error, text holds a NUL"),
])
def test_route_refuses_non_numbers_and_nul_text(artifact, body, what):  # noqa: F811
    app = create_app(artifact)
    r = TestClient(app).post("/route", content=body, headers=JSON)
    assert r.status_code == 422, r.text
    assert what in r.json()["error"]
    assert app.state.batcher.texts_run == 0  # refused before any model call


def test_route_still_takes_json_integers_and_floats(artifact):  # noqa: F811
    c = TestClient(create_app(artifact))
    as_int = c.post("/route", content=b'{"query": "a b", "wtp": 1}', headers=JSON)
    as_float = c.post("/route", content=b'{"query": "a b", "wtp": 1.0}', headers=JSON)
    assert as_int.status_code == as_float.status_code == 200
    assert as_int.json()["policy_value"] == 1.0 and as_int.json()["llm"] == as_float.json()["llm"]
    r = c.post("/route", content=b'{"query": "a b", "budget": 0}', headers=JSON)
    assert r.status_code == 200 and r.json()["policy"] == "budget"


@pytest.mark.parametrize("body,what", [
    (b'{"decision_id": "d", "score": true}', "score: Input should be a valid number"),
    (b'{"decision_id": "d", "score": "0.5"}', "score: Input should be a valid number"),
    (b'{"decision_id": "d", "thumbs": "up", "cost": "1"}', "cost: Input should be a valid number"),
    (b'{"decision_id": "d", "score": 1, "latency_ms": true}', "latency_ms: Input should be a valid"),
    (b'{"decision_id": "d", "score": NaN}', "score: Input should be a finite number"),
    (b'{"decision_id": "a\\u0000b", "score": 1}', "decision_id: Value error, must not hold a NUL"),
    (b'{"decision_id": "a\\ud800", "score": 1}', "decision_id: "),  # pydantic: not a valid string
])
def test_feedback_refuses_non_numbers_and_unstorable_ids(artifact, body, what):  # noqa: F811
    c = TestClient(create_app(artifact))
    r = c.post("/feedback", content=body, headers=JSON)
    assert r.status_code == 422, r.text
    assert what in r.json()["error"]
    # the same body with proper values passes validation (this service keeps no log: a 400)
    ok = c.post("/feedback", content=b'{"decision_id": "d", "score": 1, "latency_ms": 3}',
                headers=JSON)
    assert ok.status_code == 400 and "keeps no decision log" in ok.json()["error"]


# ---------------------------------------------------------------- body limit on bytes received
def _raw_post(app, headers: list[tuple[bytes, bytes]], chunks: list[bytes]) -> tuple[int, bytes]:
    """POST /route through the raw ASGI interface, headers and chunks exactly as given."""
    msgs = iter([{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
                 for i, c in enumerate(chunks)])
    out: list[dict] = []

    async def receive():
        try:
            return next(msgs)
        except StopIteration:
            await asyncio.sleep(3600)  # a client that sends nothing more

    async def send(m):
        out.append(m)
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
             "scheme": "http", "path": "/route", "raw_path": b"/route", "query_string": b"",
             "headers": [(b"content-type", b"application/json")] + headers,
             "client": ("1.2.3.4", 1), "server": ("t", 80), "root_path": ""}
    asyncio.run(asyncio.wait_for(app(scope, receive, send), 30))
    status = next(m["status"] for m in out if m["type"] == "http.response.start")
    return status, b"".join(m.get("body", b"") for m in out if m["type"] == "http.response.body")


BIG = json.dumps({"query": "a " * 2000}).encode()      # 4,013 bytes


@pytest.mark.parametrize("headers", [
    [(b"content-length", b"10")],                                   # a lie: says 10
    [(b"content-length", b"+10")],                                  # not digits
    [(b"content-length", b"10"), (b"content-length", str(len(BIG)).encode())],  # two values
    [(b"content-length", str(len(BIG)).encode()), (b"content-length", b"10")],
    [],                                                             # none (chunked)
])
def test_body_limit_counts_the_bytes_received(artifact, headers):  # noqa: F811
    app = create_app(artifact, ServiceConfig(max_body_bytes=1000))
    status, body = _raw_post(app, headers, [BIG[i:i + 700] for i in range(0, len(BIG), 700)])
    assert status == 413 and b"limit of 1000 bytes" in body
    assert app.state.batcher.texts_run == 0
    if headers and headers[0][1] == str(len(BIG)).encode():
        return  # a first Content-Length over the limit: refused on that alone (the service guard)
    small = json.dumps({"query": "a b"}).encode()
    status, body = _raw_post(app, headers, [small])  # the same headers with a small body
    assert status == 200 and json.loads(body)["llm"] == _expected(artifact, "a b")


def test_body_limit_middleware_alone_with_a_lying_length():
    """BodyLimit in front of an app that would read anything: it never sees more than the limit."""
    seen = []

    async def app(scope, receive, send):
        msg = await receive()
        seen.append(len(msg["body"]))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})
    guarded = BodyLimit(app, limit=100, check_declared=True)
    status, _ = _raw_post(guarded, [(b"content-length", b"5")], [b"x" * 60, b"x" * 60])
    assert status == 413 and seen == []
    status, _ = _raw_post(guarded, [(b"content-length", b"5")], [b"x" * 60, b"x" * 40])
    assert status == 200 and seen == [100]  # 100 bytes, in two chunks, handed over whole
