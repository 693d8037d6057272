"""Router service requests: numbers are JSON numbers, texts are storable, body limits count
bytes received.

``{"wtp": true}`` routed with wtp=1.0 and ``"1.5"`` became 1.5 (pydantic's lax mode); a NUL
character in a query reached the decision log, where PostgreSQL refused the whole batch of
every other request; a raw ASGI server may pass a ``Content-Length`` that lies, repeats or
is not a number, and the body limit trusted it. Each is now a 4xx before any model call.
A ``Content-Length`` of thousands of digits was a 500 (``int()``'s digit limit) and a latin-1
superscript two passed ``str.isdigit()``; a body was read whole before the API key was checked,
and one that stopped arriving was waited on for ever: now 413/400, 401 before the body, 408.
"""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from recsys_router.serving import ServiceConfig, create_app
from recsys_router.serving.guards import BodyLimit
from serve_helpers import raw_request
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
    status, body, _, _ = raw_request(app, "/route", headers, chunks)
    return status, body


BIG = json.dumps({"query": "a " * 2000}).encode()      # 4,013 bytes


@pytest.mark.parametrize("headers", [
    [(b"content-length", b"10")],                                   # a lie: says 10
    [(b"content-length", b"10"), (b"content-length", b"010")],      # the same lie twice
    [],                                                             # none (chunked)
])
def test_body_limit_counts_the_bytes_received(artifact, headers):  # noqa: F811
    app = create_app(artifact, ServiceConfig(max_body_bytes=1000))
    status, body = _raw_post(app, headers, [BIG[i:i + 700] for i in range(0, len(BIG), 700)])
    assert status == 413 and b"limit of 1000 bytes" in body
    assert app.state.batcher.texts_run == 0
    small = json.dumps({"query": "a b"}).encode()
    status, body = _raw_post(app, headers, [small])  # the same headers with a small body
    assert status == 200 and json.loads(body)["llm"] == _expected(artifact, "a b")


@pytest.mark.parametrize("value", [
    b"+10", b"-1", b"1e3", b"0x10", b"", b"12 34", b"1,1",
    b"\xb2",                  # latin-1 superscript two: str.isdigit() said yes, int() a 500
    "\u0663".encode(),        # ARABIC-INDIC DIGIT THREE in UTF-8
    b"\xef\xbc\x91",           # FULLWIDTH DIGIT ONE
], ids=["plus", "minus", "exponent", "hex", "empty", "space", "list", "superscript-2",
        "arabic-indic-3", "fullwidth-1"])
def test_malformed_content_length_is_400_before_the_body(artifact, value):  # noqa: F811
    app = create_app(artifact, ServiceConfig(max_body_bytes=1000))
    small = json.dumps({"query": "a b"}).encode()
    status, body, reads, headers = raw_request(app, "/route", [(b"content-length", value)], [small])
    assert status == 400 and json.loads(body)["error"] == \
        "Content-Length is not a whole number of bytes in ASCII digits"
    assert reads == 0 and app.state.batcher.texts_run == 0
    assert headers["connection"] == "close"


@pytest.mark.parametrize("pair", [(b"10", str(len(BIG)).encode()), (str(len(BIG)).encode(), b"10")])
def test_two_different_content_lengths_are_400(artifact, pair):  # noqa: F811
    app = create_app(artifact, ServiceConfig(max_body_bytes=1000))
    status, body, reads, _ = raw_request(app, "/route", [(b"content-length", v) for v in pair], [BIG])
    assert status == 400 and b"given twice with different values" in body and reads == 0


SMALL = b'{"query": "a b c d e f g h ij"}'   # 31 bytes
LIMIT = b'{"query": "' + b"a " * 493 + b'a"}'   # 1,000 bytes


@pytest.mark.parametrize("digits,body,status", [
    (b"0" * 4990 + b"31", SMALL, 200),    # 31 said with 4,992 digits: int() refused it, a 500
    (b"0" * 100 + b"1000", LIMIT, 200),    # exactly the limit, after leading zeros
    (b"0" * 100 + b"1001", SMALL, 413),    # one byte over
    (b"9" * 5000, SMALL, 413),
    (b"1" + b"0" * 4300, SMALL, 413),
], ids=["zeros-then-31", "zeros-then-limit", "zeros-then-limit+1", "5000-nines", "10**4300"])
def test_content_length_of_thousands_of_digits(artifact, digits, body, status):  # noqa: F811
    assert len(SMALL) == 31 and len(LIMIT) == 1000
    app = create_app(artifact, ServiceConfig(max_body_bytes=1000))
    got, out, reads, _ = raw_request(app, "/route", [(b"content-length", digits)], [body])
    assert got == status, out
    if status == 200:
        assert json.loads(out)["llm"] == _expected(artifact, json.loads(body)["query"])
    else:
        assert json.loads(out)["error"] == \
            "request body (Content-Length) exceeds the limit of 1000 bytes" and reads == 0


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
    status, _ = _raw_post(guarded, [(b"content-length", b"9" * 5000)], [b"x"])
    assert status == 413 and seen == [100]


# ---------------------------------------------------------------- slow and unauthenticated bodies
def test_wrong_key_is_401_before_any_byte_of_the_body(artifact):  # noqa: F811
    """A client without the key held up to the body limit in server memory: the body was read
    before the key was checked."""
    app = create_app(artifact, ServiceConfig(max_body_bytes=1000, api_key="k"))
    for headers in ([], [(b"authorization", b"Bearer nope")], [(b"content-length", b"999")],
                    [(b"content-length", b"9" * 5000)], [(b"content-length", b"+1")]):
        status, body, reads, out_headers = raw_request(app, "/route", headers, [b"x" * 600, b"x" * 399])
        assert (status, reads) == (401, 0) and b"API key" in body
        assert out_headers["connection"] == "close"
    key = [(b"authorization", b"Bearer k")]
    status, _, reads, _ = raw_request(app, "/route", key + [(b"content-length", b"1001")], [b"x"])
    assert (status, reads) == (413, 0)
    small = json.dumps({"query": "a b"}).encode()
    status, body, _, _ = raw_request(app, "/route", key, [small])
    assert status == 200 and json.loads(body)["llm"] == _expected(artifact, "a b")


def test_a_body_that_stops_arriving_is_408(artifact):  # noqa: F811
    app = create_app(artifact, ServiceConfig(body_timeout_s=0.5))
    # half a body, then silence (the harness never sends the rest nor a disconnect)
    status, body, reads, headers = raw_request(app, "/route", [(b"content-length", b"100")],
                                               [b'{"query": ', b'"a b'], stall=True)
    assert status == 408 and json.loads(body)["error"] == "request body not received within 0.5 s"
    assert reads == 3 and headers["connection"] == "close"  # two chunks, then the wait
    assert app.state.batcher.texts_run == 0
    m = TestClient(app).get("/metrics").text
    assert 'recsys_router_requests_total{endpoint="/route",status="408"} 1' in m
    # a whole body is unaffected by the deadline
    status, body, _, _ = raw_request(app, "/route", [], [b'{"query": ', b'"a b"}'])
    assert status == 200 and json.loads(body)["llm"] == _expected(artifact, "a b")


def test_body_timeout_is_a_positive_finite_setting():
    for bad in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="body_timeout_s"):
            ServiceConfig(body_timeout_s=bad)
    assert ServiceConfig().body_timeout_s == 30.0


@pytest.mark.parametrize("key", ["cl\u00e9", "\u043a\u043b\u044e\u0447", " lead", "trail ", "a b",
                                 "tab\tkey", "nul\x00"])
def test_an_api_key_a_client_cannot_send_is_refused_at_start(tmp_path, capsys, key):
    """'clé' started the service and then answered 401 to every client sending it as UTF-8
    (the header was read as latin-1); 'ключ' could never be sent; a space at either end is
    stripped on the way. Refused when the service starts, for the router service and the
    judge's, naming the position and never the key."""
    from recsys_router.cli import main
    from recsys_router.datasets.synthetic import make_synthetic
    from recsys_router.export import export_router
    from recsys_router.judge.web import create_app as judge_app
    from recsys_router.registry import make_router
    from test_judge_web import make_session
    with pytest.raises(ValueError, match="is not a visible ASCII character") as err:
        ServiceConfig(api_key=key)
    assert key not in str(err.value)
    with pytest.raises(ValueError, match="voter key: character"):
        judge_app(make_session(tmp_path / "j.db"), api_key=key)
    d = make_synthetic(30, 3, 2, seed=0)
    art = export_router(make_router("best-single").fit(d), tmp_path / "bs", train_data=d)
    assert main(["serve", str(art), "--api-key", key]) == 2
    err = capsys.readouterr().err
    assert "is not a visible ASCII character" in err and key.strip() not in err


def test_a_visible_ascii_api_key_with_punctuation_works(artifact):  # noqa: F811
    key = "s3cr3t-K3y_!#$%&'*+.^`|~"
    c = TestClient(create_app(artifact, ServiceConfig(api_key=key)))
    assert c.post("/route", json={"query": "hi"}, headers={"authorization": f"Bearer {key}"}).status_code == 200
    assert c.post("/route", json={"query": "hi"}, headers={"x-api-key": key}).status_code == 200
    assert c.post("/route", json={"query": "hi"}, headers={"x-api-key": key[:-1]}).status_code == 401


@pytest.mark.parametrize("key", ["a+b", "x&y", "p#q", "50%41"])
def test_a_voter_key_the_page_address_would_change_is_refused(tmp_path, monkeypatch, key):
    """The judge's page is opened as /?key=KEY, where '+', '&', '#' and '%' change the key: such
    a voter key passed the check and then got 401 forever. It is refused, before the routers
    are fitted (the command read it first but checked it only after the fit)."""
    import recsys_router.judge.routers as judge_routers
    from recsys_router.cli import main
    from recsys_router.judge.web import create_app as judge_app
    from test_judge_web import make_session
    with pytest.raises(ValueError, match="which a page address"):
        judge_app(make_session(tmp_path / "j.db"), api_key=key)
    ServiceConfig(api_key=key)              # the router service takes it: no page address there

    def no_fit(*a, **k):
        raise AssertionError("the routers were fitted before the key was checked")
    monkeypatch.setattr(judge_routers, "fit_routers", no_fit)
    monkeypatch.setenv("RECSYS_ROUTER_JUDGE_KEY", key)
    assert main(["judge", "serve", "--data", "synthetic", "--routers", "best-single,random",
                 "--db", str(tmp_path / "j2.db")]) == 2

