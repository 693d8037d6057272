"""RouteJudge voting page under hostile clients: non-finite numbers, booleans or strings as
numbers, and unencodable or NUL text are 422 before any token is issued; unvoted tokens
expire and are capped per client; optional
voter key and rate limit (checked before any byte of a body is read); a strictly parsed
``Content-Length``; a body that stops arriving is a 408. Every refusal leaves the database as
it was."""

from __future__ import annotations

import argparse
import json
import sqlite3
import threading
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pandas as pd
import pytest
from fastapi import HTTPException
from fastapi.testclient import TestClient

from recsys_router.data import RoutingData
from recsys_router.judge.store import EXPIRED_KEEP_S, JudgeStore
from recsys_router.judge.web import create_app, load_backends
from recsys_router.serving.guards import TokenBucket
from serve_helpers import raw_request
from test_judge_helpers import tiny_data
from test_judge_web import make_session


def _tokens(db) -> list[tuple]:
    with sqlite3.connect(db) as con:
        return con.execute("SELECT token, used_at, client FROM duel_tokens ORDER BY issued_at").fetchall()


def _age(db, token: str, seconds: float) -> None:
    """Move a token's issue time into the past, as if it had waited ``seconds``."""
    old = (datetime.now(timezone.utc) - timedelta(seconds=seconds)).isoformat(timespec="milliseconds")
    with sqlite3.connect(db) as con:
        con.execute("UPDATE duel_tokens SET issued_at = ? WHERE token = ?", (old, token))


@pytest.mark.parametrize("raw", [
    b'{"budget": NaN}', b'{"budget": Infinity}', b'{"budget": -Infinity}', b'{"budget": 1e999}',
    b'{"query_id": "qa", "budget": NaN}',
])
def test_non_finite_budget_is_422_before_any_token(tmp_path, raw):
    _duel_refused(tmp_path / "j.db", raw, "finite")


def _duel_refused(db, raw: bytes, reason: str) -> TestClient:
    """POST ``raw`` to /api/duel: a 422 naming the budget and ``reason``, and no token or
    record made. Returns the client for further requests."""
    c = TestClient(create_app(make_session(db)), raise_server_exceptions=False)
    r = c.post("/api/duel", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert "budget" in r.json()["detail"] and reason in r.json()["detail"]
    assert _tokens(db) == [] and JudgeStore(db).count() == 0
    return c


@pytest.mark.parametrize("raw", [
    b'{"budget": true}', b'{"budget": "1.5"}', b'{"budget": "0"}',
    b'{"budget": "NaN"}', b'{"budget": "Infinity"}', b'{"budget": "-Infinity"}', b'{"budget": "inf"}',
])
def test_budget_that_is_not_a_json_number_is_422(tmp_path, raw):
    # a boolean or a numeric string was read as 1.0 / 1.5 and got a duel token (the strings
    # naming non-finite values were refused as non-finite; now as not a number at all)
    c = _duel_refused(tmp_path / "j.db", raw, "valid number")
    ok = c.post("/api/duel", content=b'{"query_id": "qa", "budget": 1}',
                headers={"content-type": "application/json"})
    assert ok.status_code == 200 and ok.json()["budget"] == 1.0  # a JSON integer is a number


def test_non_finite_budget_refused_in_process(tmp_path):
    s = make_session(tmp_path / "j.db")
    for bad in (float("nan"), float("inf"), -1.0):
        with pytest.raises(HTTPException) as err:
            s.new_duel("qa", budget=bad)
        assert err.value.status_code == 422
    assert _tokens(tmp_path / "j.db") == []


@pytest.mark.parametrize("path,raw", [
    ("/api/duel", b'{"query_id": "q\\ud800"}'),
    ("/api/duel", b'{"task": "\\udfff"}'),
    ("/api/duel", b'{"text": "custom \\ud83d"}'),
    ("/api/duel", b'{"text": "t", "history": [{"role": "user", "content": "\\udc00"}]}'),
    ("/api/duel", b'{"query_id": "raw \xed\xa0\x80"}'),
    ("/api/duel", b'{"text": "custom \\u0000 prompt"}'),     # NUL: no database text column holds it
    ("/api/vote", b'{"token": "\\ud800\\ud800\\ud800\\ud800\\ud800\\ud800\\ud800\\ud800", "label": "A"}'),
    ("/api/duel", b'{"query_id": "' + b"q" * 5000 + b'"}'),
    ("/api/duel", b'{"history": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
])
def test_odd_text_is_422_and_writes_nothing(tmp_path, path, raw):
    db = tmp_path / "j.db"
    c = TestClient(create_app(make_session(db)), raise_server_exceptions=False)
    r = c.post(path, content=raw, headers={"content-type": "application/json"})
    if raw.startswith(b'{"history": [[['):  # too deep for the JSON parser: a 400 parse error
        assert r.status_code == 400 and "parsing the body" in r.json()["detail"]
    else:
        assert r.status_code == 422, r.text
        assert r.json()["detail"].startswith("invalid request")
    assert _tokens(db) == [] and JudgeStore(db).count() == 0


def test_unvoted_tokens_expire(tmp_path):
    db = tmp_path / "j.db"
    c = TestClient(create_app(make_session(db, token_ttl_s=600)))
    old = c.post("/api/duel", json={"query_id": "qa"}).json()["token"]
    _age(db, old, 601)
    r = c.post("/api/vote", json={"token": old, "label": "A"})
    assert r.status_code == 410 and "expired" in r.json()["detail"]
    assert JudgeStore(db).count() == 0 and _tokens(db)[0][1] is None  # not consumed, nothing written
    fresh = c.post("/api/duel", json={"query_id": "qb"}).json()["token"]  # issuing drops expired duels
    assert [t[0] for t in _tokens(db)] == [old, fresh] and _payload(db, old) == {"expired": True}
    r = c.post("/api/vote", json={"token": old, "label": "A"})  # was 404 "unknown duel token"
    assert r.status_code == 410 and "expired" in r.json()["detail"]
    assert c.post("/api/vote", json={"token": fresh, "label": "B"}).status_code == 200
    assert JudgeStore(db).count() == 1
    _age(db, old, 600 + EXPIRED_KEEP_S + 1)  # a day after it expired its id is forgotten too
    c.post("/api/duel", json={"query_id": "qa"})
    assert old not in [t[0] for t in _tokens(db)]
    assert c.post("/api/vote", json={"token": old, "label": "A"}).status_code == 404


def _payload(db, token: str):
    with sqlite3.connect(db) as con:
        return json.loads(con.execute("SELECT payload FROM duel_tokens WHERE token = ?", (token,)).fetchone()[0])


def test_unvoted_tokens_capped_per_client(tmp_path):
    db = tmp_path / "j.db"
    s = make_session(db, max_pending=3, token_ttl_s=600)
    c = TestClient(create_app(s))
    toks = [c.post("/api/duel", json={}).json()["token"] for _ in range(3)]
    r = c.post("/api/duel", json={})
    assert r.status_code == 429 and "unvoted" in r.json()["detail"]
    assert len(_tokens(db)) == 3
    assert s.new_duel(client="10.0.0.2")["token"]          # another client is not affected
    assert c.post("/api/vote", json={"token": toks[0], "label": "tie"}).status_code == 200
    assert c.post("/api/duel", json={}).status_code == 200  # one voted: room for one more
    assert c.post("/api/duel", json={}).status_code == 429
    _age(db, toks[1], 601)                                  # an expired one no longer counts
    assert c.post("/api/duel", json={}).status_code == 200
    clients = [t[2] for t in _tokens(db)]
    assert clients.count("testclient") == 5 and clients.count("10.0.0.2") == 1  # the expired id is kept a day
    assert _payload(db, toks[1]) == {"expired": True}
    with pytest.raises(ValueError, match="max_pending"):
        make_session(tmp_path / "k.db", max_pending=0)


def test_cap_holds_under_the_store_transaction(tmp_path):
    st = JudgeStore(tmp_path / "j.db")
    st.issue_token("t" * 10, {"x": 1}, client="c", max_pending=1)
    from recsys_router.judge.store import TokenError
    with pytest.raises(TokenError) as err:
        st.issue_token("u" * 10, {"x": 1}, client="c", max_pending=1)
    assert err.value.status == 429 and st.pending_count("c") == 1


def test_voter_key(tmp_path):
    db = tmp_path / "j.db"
    c = TestClient(create_app(make_session(db), api_key="sekrit"))
    assert c.get("/").status_code == 200                   # the page itself holds no data
    for headers in ({}, {"x-api-key": "wrong"}, {"authorization": "Bearer nope"}, {"x-api-key": "sekri"}):
        assert c.get("/api/info", headers=headers).status_code == 401
        r = c.post("/api/duel", json={}, headers=headers)
        assert r.status_code == 401 and "key" in r.json()["detail"]
    assert _tokens(db) == []
    tok = c.post("/api/duel", json={}, headers={"x-api-key": "sekrit"}).json()["token"]
    assert c.post("/api/vote", json={"token": tok, "label": "A"}).status_code == 401
    assert c.post("/api/vote", json={"token": tok, "label": "A"},
                  headers={"authorization": "Bearer sekrit"}).status_code == 200
    assert JudgeStore(db).count() == 1


def test_rate_limit_per_client(tmp_path):
    c = TestClient(create_app(make_session(tmp_path / "j.db"), rate=0.01, burst=3))
    codes = [c.get("/api/info").status_code for _ in range(5)]
    assert codes == [200, 200, 200, 429, 429]
    r = c.post("/api/duel", json={})
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1 and "rate limit" in r.json()["detail"]
    assert _tokens(tmp_path / "j.db") == []
    assert c.get("/").status_code == 200                   # static pages are not limited


def test_token_bucket_refill_clients_and_bound():
    now = [0.0]
    tb = TokenBucket(rate=2.0, burst=2, max_clients=3, clock=lambda: now[0])
    assert [tb.take("a") for _ in range(3)] == [0.0, 0.0, 0.5]
    assert tb.take("b") == 0.0                              # separate buckets
    now[0] = 0.25
    assert tb.take("a") == pytest.approx(0.25)              # half a token refilled of the one needed
    now[0] = 0.5
    assert tb.take("a") == 0.0
    for k in range(10):
        tb.take(f"x{k}")
    assert len(tb) == 3                                     # the client table stays bounded
    with pytest.raises(ValueError):
        TokenBucket(rate=0, burst=1)


def test_old_database_gains_the_client_column(tmp_path):
    db = tmp_path / "old.db"
    with sqlite3.connect(db) as con:  # the duel_tokens table as the first schema made it
        con.execute("CREATE TABLE duel_tokens (token VARCHAR(64) PRIMARY KEY, payload TEXT NOT NULL, "
                    "issued_at VARCHAR(40) NOT NULL, used_at VARCHAR(40), record_id VARCHAR(64))")
        con.execute("INSERT INTO duel_tokens VALUES ('oldtoken1', '{}', '2020-01-01T00:00:00.000+00:00', "
                    "NULL, NULL)")
    st = JudgeStore(db)
    st.issue_token("newtoken1", {"a": 1}, client="c", max_pending=5, ttl_s=3600)
    rows = {t[0]: t[2] for t in _tokens(db)}
    assert rows == {"newtoken1": "c"}                      # the 2020 token had expired and was pruned


def test_cli_voter_key_env(monkeypatch):
    from recsys_router.cli.judge import VOTER_KEY_ENV, _voter_key
    monkeypatch.delenv(VOTER_KEY_ENV, raising=False)
    monkeypatch.delenv("MY_KEY", raising=False)
    assert _voter_key(argparse.Namespace(voter_key_env=None)) is None
    with pytest.raises(ValueError, match="MY_KEY"):
        _voter_key(argparse.Namespace(voter_key_env="MY_KEY"))
    monkeypatch.setenv("MY_KEY", "k1")
    assert _voter_key(argparse.Namespace(voter_key_env="MY_KEY")) == "k1"
    monkeypatch.setenv(VOTER_KEY_ENV, "k2")
    assert _voter_key(argparse.Namespace(voter_key_env=None)) == "k2"


def test_body_over_limit_is_413_before_reading(tmp_path):
    db = tmp_path / "j.db"
    c = TestClient(create_app(make_session(db), max_body_bytes=2_000))
    big = b'{"query_id": "qa", "task": "' + b"x" * 5_000 + b'"}'
    r = c.post("/api/duel", content=big, headers={"content-type": "application/json"})
    assert r.status_code == 413 and "2000 bytes" in r.json()["detail"]

    def chunks(body, size):  # no Content-Length: sent chunked
        for i in range(0, len(body), size):
            yield body[i:i + size]
    r = c.post("/api/duel", content=chunks(big, 7), headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert _tokens(db) == []
    ok = c.post("/api/duel", content=chunks(b'{"query_id": "qa"}', 1), headers={"content-type": "application/json"})
    assert ok.status_code == 200 and ok.json()["query_id"] == "qa"  # one-byte chunks reassembled


def test_voter_key_and_rate_limit_before_any_byte_of_the_body(tmp_path):
    """A client without the key held up to the body limit in memory: the body was read before
    the key was checked."""
    db = tmp_path / "j.db"
    app = create_app(make_session(db), api_key="sekrit")
    for headers in ([], [(b"x-api-key", b"wrong")], [(b"content-length", b"1999")]):
        status, body, reads, _ = raw_request(app, "/api/duel", headers, [b"x" * 1000, b"x" * 999])
        assert (status, reads) == (401, 0) and b"voter key" in body
    app = create_app(make_session(db), rate=1.0, burst=1)
    assert raw_request(app, "/api/duel", [], [b"{}"])[0] == 200
    status, _, reads, _ = raw_request(app, "/api/duel", [], [b"x" * 1000, b"x" * 999])
    assert (status, reads) == (429, 0)
    assert len(_tokens(db)) == 1


@pytest.mark.parametrize("value,status", [
    (b"0" * 4990 + b"2", 200), (b"9" * 5000, 413), (b"+2", 400), (b"\xb2", 400)],
    ids=["zeros-then-2", "5000-nines", "plus", "superscript-2"])
def test_content_length_parsed_strictly(tmp_path, value, status):
    db = tmp_path / "j.db"
    got, body, reads, _ = raw_request(create_app(make_session(db), max_body_bytes=2_000),
                                      "/api/duel", [(b"content-length", value)], [b"{}"])
    assert got == status, body
    assert status == 200 or (reads == 0 and _tokens(db) == [])


def test_a_body_that_stops_arriving_is_408(tmp_path):
    db = tmp_path / "j.db"
    app = create_app(make_session(db), body_timeout_s=0.5)
    status, body, _, headers = raw_request(app, "/api/duel", [(b"content-length", b"30")],
                                           [b'{"query_id"'], stall=True)
    assert status == 408 and json.loads(body)["detail"] == "request body not received within 0.5 s"
    assert headers["connection"] == "close" and _tokens(db) == []


class _Scripted(BaseHTTPRequestHandler):
    """An OpenAI-compatible backend whose raw reply body the test sets."""

    reply = b""
    paths: list = []

    def do_POST(self):  # noqa: N802 (http.server API)
        _Scripted.paths.append(self.path)
        self.rfile.read(int(self.headers["content-length"]))
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(self.reply)))
        self.end_headers()
        self.wfile.write(self.reply)

    def log_message(self, *a):
        pass


def _reply(content: str, usage: str) -> bytes:
    return (b'{"choices": [{"message": {"role": "assistant", "content": ' + content.encode()
            + b'}}], "usage": ' + usage.encode() + b"}")


@pytest.fixture
def live_client(tmp_path):
    fake = ThreadingHTTPServer(("127.0.0.1", 0), _Scripted)
    threading.Thread(target=fake.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{fake.server_address[1]}/v1"
    (tmp_path / "b.yaml").write_text("backends:\n" + "".join(f"  {m}: {{base_url: '{url}', model: {m}}}\n"
                                                              for m in "xyz"))
    base = tiny_data()
    llms = pd.DataFrame({"name": list("xyz"), "input_price": [1.0, 2, 3], "output_price": [2.0, 4, 6]})
    d = RoutingData(base.queries, llms, base.scores, base.costs, name="tiny")
    session = make_session(tmp_path / "j.db", d, backends=load_backends(tmp_path / "b.yaml", d.llm_names))
    try:
        yield TestClient(create_app(session), raise_server_exceptions=False), tmp_path / "j.db"
    finally:
        fake.shutdown()


@pytest.mark.parametrize("content,usage,reason", [
    ('"ok"', '{"prompt_tokens": "10", "completion_tokens": 5}', "usage.prompt_tokens must be a whole number"),
    ('"ok"', '{"prompt_tokens": -1000000, "completion_tokens": 5}', "usage.prompt_tokens must be a whole number"),
    ('"ok"', '{"prompt_tokens": 10, "completion_tokens": 1e308}', "usage.completion_tokens must be a whole number"),
    ('"ok"', '{"prompt_tokens": 10, "completion_tokens": NaN}', "usage.completion_tokens must be a whole number"),
    ('"ok"', '{"prompt_tokens": 10, "completion_tokens": 2.5}', "usage.completion_tokens must be a whole number"),
    ('"ok"', '{"prompt_tokens": true, "completion_tokens": 5}', "usage.prompt_tokens must be a whole number"),
    ('"ok"', '{"prompt_tokens": 10000000000, "completion_tokens": 5}', "usage.prompt_tokens must be a whole number"),
    ('"ok"', '[1, 2]', "'usage' is not an object"),
    ('"bad \\ud800 text"', '{"prompt_tokens": 10, "completion_tokens": 5}', "lone surrogate U+D800"),
    ('"nul \\u0000"', '{"prompt_tokens": 10, "completion_tokens": 5}', "NUL character"),
    ('{"text": "x"}', '{"prompt_tokens": 10, "completion_tokens": 5}', "is not text: dict"),
    ('"' + "a" * 200_001 + '"', '{}', "200001 characters (at most 200000)"),
], ids=["string-count", "negative", "1e308", "nan", "fraction", "bool", "over-cap", "usage-list", "surrogate",
        "nul", "content-object", "too-long"])
def test_live_backend_reply_checked_502_nothing_stored(live_client, content, usage, reason):
    c, db = live_client
    _Scripted.reply = _reply(content, usage)
    r = c.post("/api/duel", json={"query_id": "qa"})
    assert r.status_code == 502, r.text
    detail = r.json()["detail"]
    assert detail.startswith("backend of '") and reason in detail
    assert _tokens(db) == [] and JudgeStore(db).count() == 0


def test_live_backend_good_reply_still_voted(live_client):
    c, db = live_client
    _Scripted.reply = _reply('"caf\\u00e9"', '{"prompt_tokens": 1000000000, "completion_tokens": 0}')
    duel = c.post("/api/duel", json={"query_id": "qa"}).json()
    rev = c.post("/api/vote", json={"token": duel["token"], "label": "A"}).json()
    assert duel["answers"] == {"A": "caf\u00e9", "B": "caf\u00e9"}
    assert rev["costs"]["A"] == {"x": 1000.0, "y": 2000.0, "z": 3000.0}[rev["llm_a"]]  # 1e9 tokens x price / 1e6
    assert JudgeStore(db).count() == 1


def test_redeem_refuses_an_unstorable_record(tmp_path):
    """A payload a token carries is checked like add()'s records: a lone surrogate in the
    metadata is a 422 at vote, the token stays unvoted and nothing is stored."""
    db = tmp_path / "j.db"
    c = TestClient(create_app(make_session(db)))
    tok = c.post("/api/duel", json={"query_id": "qa"}).json()["token"]
    with sqlite3.connect(db) as con:
        payload = json.loads(con.execute("SELECT payload FROM duel_tokens").fetchone()[0])
        payload["metadata"]["answers"]["A"] = "bad \ud800"
        con.execute("UPDATE duel_tokens SET payload = ?", (json.dumps(payload),))
    r = c.post("/api/vote", json={"token": tok, "label": "A"})
    assert r.status_code == 422 and "lone surrogate" in r.json()["detail"]
    assert JudgeStore(db).count() == 0 and _tokens(db)[0][1] is None


@pytest.mark.parametrize("path,raw,key", [
    ("/api/vote", b'{"token": "TOKEN", "label": "A", "label": "B"}', "label"),
    ("/api/vote", b'{"token": "TOKEN", "token": "TOKEN", "label": "A"}', "token"),
    ("/api/duel", b'{"query_id": "qa", "query_id": "qb"}', "query_id"),
    ("/api/duel", b'{"query_id": "qa", "budget": 1, "budget": 0}', "budget"),
], ids=["vote-label", "vote-token", "duel-query-id", "duel-budget"])
def test_a_json_key_given_twice_is_422_and_changes_nothing(tmp_path, path, raw, key):
    """The last value used to win silently (a vote for A stored as B), unlike judge import."""
    db = tmp_path / "j.db"
    c = TestClient(create_app(make_session(db)))
    tok = c.post("/api/duel", json={"query_id": "qa"}).json()["token"]
    r = c.post(path, content=raw.replace(b"TOKEN", tok.encode()), headers={"content-type": "application/json"})
    assert r.status_code == 422
    assert r.json()["detail"] == f"the request body names the key {key!r} more than once; give each field once"
    assert JudgeStore(db).count() == 0 and [(t[0], t[1]) for t in _tokens(db)] == [(tok, None)]
    assert c.post("/api/vote", json={"token": tok, "label": "B"}).json()["label"] == "B"


def test_a_failed_live_backend_never_shows_its_url_to_the_voter(tmp_path, caplog):
    """The 502 showed the backend's whole URL (user:password, query token, host and port) and
    httpx's text to the voter; now a reason, with the masked URL in the server's log."""
    url = "http://svc:Sup3rS3cret@127.0.0.1:9/v1?api-key=T0KEN"   # port 9: nothing listens
    (tmp_path / "b.yaml").write_text("backends:\n" + "".join(f"  {m}: {{base_url: '{url}', model: {m}}}\n"
                                                              for m in "xyz"))
    d = tiny_data()
    session = make_session(tmp_path / "j.db", d, backends=load_backends(tmp_path / "b.yaml", d.llm_names))
    c = TestClient(create_app(session), raise_server_exceptions=False)
    with caplog.at_level("WARNING", logger="recsys_router.judge"):
        r = c.post("/api/duel", json={"query_id": "qa"})
    assert r.status_code == 502 and r.json()["detail"].endswith("failed: connection error"), r.text
    for secret in ("Sup3rS3cret", "T0KEN", "svc", "127.0.0.1"):
        assert secret not in r.text
    assert "http://***@127.0.0.1:9/v1/chat/completions?api-key=***" in caplog.text
    assert "Sup3rS3cret" not in caplog.text and "T0KEN" not in caplog.text


def test_live_backend_query_goes_after_the_path_and_a_fragment_is_refused(live_client, tmp_path,
                                                                           monkeypatch):
    c, _ = live_client
    _Scripted.paths.clear()
    _Scripted.reply = _reply('"ok"', '{}')
    assert c.post("/api/duel", json={"query_id": "qa"}).status_code == 200
    assert _Scripted.paths[-1] == "/v1/chat/completions"
    (tmp_path / "q.yaml").write_text("backends:\n  x: {base_url: 'http://h/v1?api-version=1', model: x}\n")
    (tmp_path / "f.yaml").write_text("backends:\n  x: {base_url: 'http://u:p#w@h/v1', model: x}\n")
    import httpx

    from recsys_router.judge.web.live import BackendError, ask_backend
    seen = []

    def post(u, **k):
        seen.append(u)
        raise httpx.ConnectError("refused")
    monkeypatch.setattr(httpx, "post", post)
    with pytest.raises(BackendError, match="connection error"):
        ask_backend(load_backends(tmp_path / "q.yaml")["x"], "hi")
    assert seen == ["http://h/v1/chat/completions?api-version=1"]   # was ...v1?api-version=1/chat/...
    with pytest.raises(ValueError, match="backend 'x': base_url must not hold a '#fragment'") as err:
        load_backends(tmp_path / "f.yaml")
    assert "u:p" not in str(err.value)

