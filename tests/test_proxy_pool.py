"""The OpenAI-compatible proxy routes within the pool served now (``POST``/``DELETE /llms``
change it), and relays a backend's answer that is not strict JSON as a JSON 502, never a
plain-text 500 (mocked backend: ``httpx.MockTransport``)."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from recsys_router.export import export_router, load_router
from recsys_router.serving import ServiceConfig, create_app
from serve_helpers import mock_backend, mocked_backends
from toy_routers import WordRouter

KEY = {"Authorization": "Bearer k"}
ASK = {"model": "router", "messages": [{"role": "user", "content": "one two three four five"}]}


@pytest.fixture(scope="module")
def artifact(tmp_path_factory, sim_split):
    tr = sim_split["train"]
    out = tmp_path_factory.mktemp("art") / "word"
    export_router(WordRouter().fit(tr), out, train_data=tr)
    return out


@pytest.fixture
def backend(monkeypatch):
    """A mocked backend; ``answer["raw"]`` (bytes), when set, is its whole reply."""
    return mock_backend(monkeypatch)


def _client(path, names):
    art = load_router(path)
    cfg = ServiceConfig(api_key="k", backends=mocked_backends(names(art.llm_names)))
    return TestClient(create_app(art, cfg), raise_server_exceptions=False), art.llm_names


def _best(c, candidates):
    """The LLM /route picks among ``candidates`` (computed from its returned scores)."""
    r = c.post("/route", json={"query": ASK["messages"][0]["content"]}, headers=KEY).json()
    return max(candidates, key=lambda n: r["scores"][n])


def test_proxy_routes_in_the_pool_left_after_delete(artifact, backend):
    c, names = _client(artifact, lambda n: n)
    first = c.post("/v1/chat/completions", json=ASK, headers=KEY)
    assert first.status_code == 200 and first.headers["x-recsys-router-llm"] == _best(c, names)
    gone = first.headers["x-recsys-router-llm"]
    assert c.delete(f"/llms/{gone}", headers=KEY).status_code == 200
    left = [n for n in names if n != gone]
    r = c.post("/v1/chat/completions", json=ASK, headers=KEY)
    assert r.status_code == 200, r.text
    assert r.headers["x-recsys-router-llm"] == _best(c, left) != gone
    assert r.json()["model"] == r.headers["x-recsys-router-llm"]
    assert backend["seen"][-1]["model"] == "m-" + r.headers["x-recsys-router-llm"]


def test_no_backend_left_in_the_pool_is_503(artifact, backend):
    c, names = _client(artifact, lambda n: n[:1])        # one LLM has a backend
    assert c.post("/v1/chat/completions", json=ASK, headers=KEY).headers[
        "x-recsys-router-llm"] == names[0]
    assert c.delete(f"/llms/{names[0]}", headers=KEY).status_code == 200
    r = c.post("/v1/chat/completions", json=ASK, headers=KEY)
    assert r.status_code == 503 and "no LLM of the served pool has a backend" in r.json()["error"]
    assert c.post("/route", json={"query": "a b"}, headers=KEY).status_code == 200


@pytest.mark.parametrize("raw", [b'{"id": "x", "usage": {"t": NaN}}',
                                 b'{"id": "x", "usage": {"t": -Infinity}}'])
def test_backend_non_finite_number_is_a_json_502(artifact, backend, raw):
    c, _ = _client(artifact, lambda n: n)
    backend["raw"] = raw
    r = c.post("/v1/chat/completions", json=ASK, headers=KEY)
    assert r.status_code == 502 and "cannot be relayed" in r.json()["error"]
    backend["raw"] = None
    assert c.post("/v1/chat/completions", json=ASK, headers=KEY).status_code == 200


def test_backend_lone_surrogate_is_relayed_escaped(artifact, backend):
    c, _ = _client(artifact, lambda n: n)
    backend["raw"] = b'{"id": "x", "choices": [{"message": {"content": "a\\ud83d"}}]}'
    r = c.post("/v1/chat/completions", json=ASK, headers=KEY)
    assert r.status_code == 200
    assert b'"content":"a\\ud83d"' in r.content                  # the escape, as sent
    assert r.json()["choices"][0]["message"]["content"] == "a\ud83d"


def test_backend_nested_too_deep_is_a_json_502(artifact, backend):
    c, _ = _client(artifact, lambda n: n)
    backend["raw"] = b"[" * 100_000 + b"]" * 100_000
    r = c.post("/v1/chat/completions", json=ASK, headers=KEY)
    assert r.status_code == 502 and r.json()["error"].startswith("backend for")


@pytest.mark.parametrize("content,status,what", [
    ("a\u0000b", 422, "messages[3].content: text holds a NUL character (U+0000) at character 1"),
    ("a" * 101, 413, "messages[3].content has 101 characters; the limit is 100"),
    ([{"type": "text", "text": "a"}, {"type": "text", "text": "b\u0000"}], 422,
     "messages[3].content: text holds a NUL character (U+0000) at character 3"),  # "a b\0"
], ids=["nul", "too-long", "nul-in-parts"])
def test_proxy_errors_name_the_routed_message(artifact, backend, content, status, what):
    # the routed text is the last user message, messages[3]; it used to be called queries[0]
    art = load_router(artifact)
    cfg = ServiceConfig(backends=mocked_backends(art.llm_names), max_text_chars=100)
    c = TestClient(create_app(art, cfg))
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "x"},
            {"role": "assistant", "content": "y"}, {"role": "user", "content": content},
            {"role": "assistant", "content": "z"}]
    r = c.post("/v1/chat/completions", json={"model": "router", "messages": msgs})
    assert (r.status_code, r.json()) == (status, {"error": what})
    assert backend["seen"] == []  # nothing forwarded
    # /route keeps its own field names
    r = c.post("/route", json={"queries": ["ok", "a" * 101]})
    assert (r.status_code, r.json()) == (413, {"error": "queries[1] has 101 characters; the "
                                                        "limit is 100"})


# ------------------------------------------- a failing backend, its URL, its event stream
SECRET_URL = "http://svc-user:Sup3rSecret@127.0.0.1:{port}/v1?api-key=AZURE-KEY-123"


def _patched(monkeypatch, handler):
    """Put ``handler`` (an ``httpx.MockTransport`` handler) behind the proxy's client."""
    import httpx
    import recsys_router.serving.openai_proxy as proxy
    real = httpx.AsyncClient
    monkeypatch.setattr(proxy.httpx, "AsyncClient",
                        lambda **kw: real(transport=httpx.MockTransport(handler), **kw))


def _one_backend_client(artifact, base_url, **cfg):
    art = load_router(artifact)
    backends = {n: {"base_url": base_url, "model": "m", "api_key_env": None} for n in art.llm_names}
    app = create_app(art, ServiceConfig(api_key="k", backends=backends, **cfg))
    return TestClient(app, raise_server_exceptions=False)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_unreachable_backend_502_hides_its_url(artifact, stream, caplog):
    from serve_helpers import free_port
    port = free_port()  # nothing listens there
    c = _one_backend_client(artifact, SECRET_URL.format(port=port), backend_timeout_s=5)
    llm = _best(c, load_router(artifact).llm_names)
    with caplog.at_level("WARNING", logger="recsys_router.serving.openai_proxy"):
        r = c.post("/v1/chat/completions", json={**ASK, "stream": stream}, headers=KEY)
    assert (r.status_code, r.json()) == (502, {"error": f"backend for {llm!r} failed: connection error"})
    logged = "\n".join(rec.getMessage() for rec in caplog.records)
    # the operator's log names the URL called, credentials and query value masked
    assert f"backend for {llm!r} at http://***@127.0.0.1:{port}/v1/chat/completions?api-key=*** " \
           f"failed: ConnectError" in logged
    for secret in ("svc-user", "Sup3rSecret", "AZURE-KEY-123"):
        assert secret not in logged and secret not in r.text


@pytest.mark.parametrize("exc,reason", [("ReadTimeout", "timed out"),
                                        ("RemoteProtocolError", "protocol error")])
def test_backend_failure_reason_is_generic(artifact, monkeypatch, exc, reason):
    import httpx

    def handler(request):
        raise getattr(httpx, exc)(f"boom at {request.url}", request=request)
    _patched(monkeypatch, handler)
    c = _one_backend_client(artifact, "http://me:pw1234@backend/v1")
    for stream in (False, True):
        r = c.post("/v1/chat/completions", json={**ASK, "stream": stream}, headers=KEY)
        assert r.status_code == 502 and r.json()["error"].endswith(f"failed: {reason}")
        assert "pw1234" not in r.text and "backend/v1" not in r.text


def test_query_of_base_url_is_sent_after_the_path(artifact, monkeypatch):
    import httpx
    seen = []

    def handler(request):
        seen.append(str(request.url))
        return httpx.Response(200, json={"id": "x", "choices": []})
    _patched(monkeypatch, handler)
    c = _one_backend_client(artifact, "http://backend/openai/deployments/d?api-version=2024-02-01")
    assert c.post("/v1/chat/completions", json=ASK, headers=KEY).status_code == 200
    # was http://backend/openai/deployments/d?api-version=2024-02-01/chat/completions
    assert seen == ["http://backend/openai/deployments/d/chat/completions?api-version=2024-02-01"]


@pytest.mark.parametrize("url,why", [
    ("http://me:S3#cr3t@h/v1", "must not hold a '#fragment'"),
    ("http://h/v1#top", "must not hold a '#fragment'"),
    ("ftp://me:S3cr3t@h/v1", "must be an http:// or https:// URL with a host"),
    ("http:///v1?key=S3cr3t", "must be an http:// or https:// URL with a host"),
    ("me:S3cr3t@h/v1", "must be an http:// or https:// URL with a host"),
    ("http://me:S3cr3t@h:port/v1", "is not a valid URL"),
    (12, "must be a string, got int"),
    ("http://me:S3cr3t@h\u00a0/v1", "is not a URL an HTTP request can be sent to"),   # httpx: InvalidURL
    ("http://me:S3cr3t@xn--a/v1", "is not a URL an HTTP request can be sent to"),     # IDNA refuses it
    ("http://me:S3cr3t@h/v\n1", "must not hold a control character (U+000A at character 20)"),
], ids=["fragment-in-password", "fragment", "ftp", "no-host", "no-scheme", "bad-port", "number",
        "control-character", "bad-idna-host", "line-break"])
def test_load_backends_refuses_a_bad_base_url(tmp_path, url, why):
    """Both loaders (the proxy's and the judge's live mode) refuse it, naming the backend and
    never the URL; the last two passed and then failed each request with a bare 500."""
    from recsys_router.judge.web import load_backends as judge_load_backends
    from recsys_router.serving import load_backends
    p = tmp_path / "b.yaml"
    p.write_text(f"backends:\n  llm-a: {{base_url: {json.dumps(url)}, model: m}}\n")
    for load in (load_backends, judge_load_backends):
        with pytest.raises(ValueError) as err:
            load(p, ["llm-a"])
        assert f"backend 'llm-a': base_url {why}" in str(err.value), str(err.value)
        assert "S3" not in str(err.value) and "cr3t" not in str(err.value)


def test_a_query_value_ending_in_a_slash_is_kept(tmp_path):
    """Both loaders stripped every trailing '/' of base_url: a query value lost its own."""
    from recsys_router.judge.web import load_backends as judge_load_backends
    from recsys_router.serving import load_backends
    from recsys_router.serving.backends import chat_url
    p = tmp_path / "b.yaml"
    p.write_text("backends:\n  llm-a: {base_url: 'https://h/openai/d/?sig=AbC/', model: m}\n")
    for load in (load_backends, judge_load_backends):
        assert load(p) == {"llm-a": {"base_url": "https://h/openai/d/?sig=AbC/", "model": "m",
                                     "api_key_env": None}}
        assert chat_url(load(p)["llm-a"]["base_url"]) == "https://h/openai/d/chat/completions?sig=AbC/"


GOOD = b'data: {"model":"m","choices":[{"delta":{"content":"hi"}}]}\n\n'
REST = b'data: {"model":"m","choices":[{"delta":{"content":"rest"}}]}\n\ndata: [DONE]\n\n'


def _stream_reply(artifact, monkeypatch, reply):
    import httpx
    _patched(monkeypatch, lambda request: httpx.Response(
        200, stream=reply, headers={"content-type": "text/event-stream"}))
    c = _one_backend_client(artifact, "http://backend/v1")
    r = c.post("/v1/chat/completions", json={**ASK, "stream": True}, headers=KEY)
    return r, r.headers["x-recsys-router-llm"]


@pytest.mark.parametrize("bad", [
    b"[" * 100_000 + b"]" * 100_000, b'{"model":"m","x":NaN}', b'{"x":-Infinity}', b'{"x":1e400}',
    b"not json", b'{"x":"\xff"}'], ids=["100000-deep", "nan", "-inf", "1e400", "text", "bad-utf8"])
def test_malformed_stream_chunk_ends_with_error_and_done(artifact, monkeypatch, bad):
    import httpx
    r, llm = _stream_reply(artifact, monkeypatch,
                           httpx.ByteStream(GOOD + b"data: " + bad + b"\n\n" + REST))
    assert r.status_code == 200
    msg = (f"backend for {llm!r} sent a stream chunk that cannot be relayed (not JSON, a "
           "non-finite number or nesting too deep)")
    # the good chunk (model renamed), then the error event and [DONE]; nothing after the bad one
    want = ('data: {"model": "' + llm + '", "choices": [{"delta": {"content": "hi"}}]}\n\n\n'
            'data: {"error": {"message": ' + json.dumps(msg) + ', "type": "backend_error", '
            '"code": 502}}\n\ndata: [DONE]\n\n')
    assert r.text == want


def test_stream_broken_off_by_the_backend_ends_with_error_and_done(artifact, monkeypatch):
    import httpx

    class Broken(httpx.AsyncByteStream):
        async def __aiter__(self):
            yield GOOD
            raise httpx.ReadError("connection reset by peer")
    r, llm = _stream_reply(artifact, monkeypatch, Broken())
    lines = [ln for ln in r.text.split("\n") if ln]
    assert lines[-1] == "data: [DONE]" and len(lines) == 3
    assert json.loads(lines[0][5:])["model"] == llm
    assert json.loads(lines[1][5:]) == {"error": {
        "message": f"backend for {llm!r} failed mid-stream: connection error",
        "type": "backend_error", "code": 502}}


def _relay_by_split(raw: bytes, llm: str) -> bytes:
    """A second, naive relay: split the whole stream on line ends, rewrite each line."""
    from recsys_router.serving.stream_relay import rewrite_sse_line
    *lines, last = raw.split(b"\n")
    out = b"".join(rewrite_sse_line(ln, llm) + b"\n" for ln in lines)
    return out + (rewrite_sse_line(last, llm) if last else b"")


def _pieces(raw: bytes, size: int):
    """A backend stream that sends ``raw`` ``size`` bytes at a time."""
    import httpx

    class Pieces(httpx.AsyncByteStream):
        async def __aiter__(self):
            for i in range(0, len(raw), size):
                yield raw[i:i + size]
    return Pieces()


@pytest.mark.parametrize("size", [1, 3, 7, 64, 10_000])
def test_a_stream_split_anywhere_is_relayed_line_by_line(artifact, monkeypatch, size):
    """However the backend cuts its chunks (one byte at a time included), the relay equals
    the naive split-then-rewrite of the whole stream; the line scan looks at each byte once."""
    raw = GOOD + b": keep-alive\n\n" + GOOD + b'data: {"model":"m","n":[1,2]}\n\n' + REST
    r, llm = _stream_reply(artifact, monkeypatch, _pieces(raw, size))
    assert r.status_code == 200 and r.content == _relay_by_split(raw, llm)


def test_a_stream_line_that_never_ends_is_cut_at_the_cap(artifact, monkeypatch):
    """A backend that sends bytes without a line end grew the proxy's buffer without bound
    (and rescanned it for every chunk); past MAX_STREAM_LINE_BYTES the relay ends with an
    error event and [DONE], after the lines already relayed."""
    from recsys_router.serving import stream_relay
    monkeypatch.setattr(stream_relay, "MAX_STREAM_LINE_BYTES", 1000)
    r, llm = _stream_reply(artifact, monkeypatch, _pieces(GOOD + b"data: " + b"x" * 5000, 100))
    lines = [ln for ln in r.text.split("\n") if ln]
    assert json.loads(lines[0][5:])["model"] == llm and lines[-1] == "data: [DONE]"
    assert json.loads(lines[1][5:]) == {"error": {
        "message": f"backend for {llm!r} sent a stream line of more than 1,000 bytes",
        "type": "backend_error", "code": 502}}
    assert len(lines) == 3


def test_a_reply_over_the_cap_is_a_502_and_is_not_read_whole(artifact, monkeypatch):
    """A non-streamed backend reply was read whole whatever its size; past MAX_REPLY_BYTES
    the proxy answers 502 naming the LLM, and stops reading."""
    import httpx

    from recsys_router.serving import stream_relay
    monkeypatch.setattr(stream_relay, "MAX_REPLY_BYTES", 1000)
    sent, ok = [], b'{"model": "m", "choices": []}'

    class Endless(httpx.AsyncByteStream):
        async def __aiter__(self):
            for _ in range(10_000):
                sent.append(1)
                yield b" " * 100
    _patched(monkeypatch, lambda request: httpx.Response(200, stream=Endless()) if not sent
             else httpx.Response(200, content=ok))
    c = _one_backend_client(artifact, "http://backend/v1")
    r = c.post("/v1/chat/completions", json=ASK, headers=KEY)
    assert r.status_code == 502
    assert r.json()["error"].endswith("sent a reply of more than 1,000 bytes")
    assert len(sent) == 11   # 1,100 bytes read, not 1,000,000
    r = c.post("/v1/chat/completions", json=ASK, headers=KEY)   # a reply under the cap
    assert r.status_code == 200, r.text
    assert r.json()["model"] == r.headers["x-recsys-router-llm"]


# ------------------------------------------- LLMs added live: their backends (POST /llms)
@pytest.fixture(scope="module")
def knn_artifact(tmp_path_factory):
    from recsys_router.datasets.synthetic import make_synthetic
    from recsys_router.registry import make_router
    d = make_synthetic(150, 4, 2, seed=0)
    old = d.subset(llms=d.llm_names[:3])
    out = tmp_path_factory.mktemp("art") / "knn"
    export_router(make_router("knn").fit(old), out, train_data=old)
    return out, [str(t) for t in d.texts[:20]]


#: scores 1 (the top of the [0, 1] scale) on every probe at a negligible cost: /route picks it
def _winning(texts):
    return [{"text": t, "score": 1.0, "cost": 1e-9} for t in texts]


def _recorded(monkeypatch):
    """Mocked backends (``httpx.MockTransport``): each request's URL and model, in order."""
    import httpx
    seen = []

    def handler(request):
        model = json.loads(request.content)["model"]
        seen.append((str(request.url), model))
        return httpx.Response(200, json={"id": "x", "model": model, "choices": []})
    _patched(monkeypatch, handler)
    return seen


def _proxied(c) -> str:
    r = c.post("/v1/chat/completions", json=ASK, headers=KEY)
    assert r.status_code == 200, r.text
    return r.headers["x-recsys-router-llm"]


def test_serve_backends_may_name_an_llm_still_to_come(knn_artifact, tmp_path, monkeypatch, caplog):
    """`serve --backends` refused a backends.yaml naming an LLM not in the artifact ('is not an
    LLM of this router'), so an LLM onboarded live could never get a backend. Now it starts,
    one warning line names the waiting backend, and POST /llms of that name is proxied."""
    import uvicorn

    from recsys_router.cli import main
    path, texts = knn_artifact
    names = load_router(path).llm_names
    (tmp_path / "b.yaml").write_text("backends:\n" + "".join(
        f"  {n}: {{base_url: 'http://backend/v1', model: m-{n}}}\n" for n in names + ["newbie"]))
    apps = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: apps.append(app))
    with caplog.at_level("WARNING", logger="recsys_router.serving.openai_proxy"):
        assert main(["serve", str(path), "--api-key", "k", "--backends", str(tmp_path / "b.yaml")]) == 0
    waiting = [r.getMessage() for r in caplog.records if "not in the served pool" in r.getMessage()]
    assert waiting == ["backends name 1 LLM(s) not in the served pool, used once POST /llms adds "
                       "them (or misspelt?): 'newbie'"]
    seen = _recorded(monkeypatch)
    c = TestClient(apps[0], raise_server_exceptions=False)
    before = _proxied(c)
    assert before in names
    r = c.post("/llms", json={"name": "newbie", "probes": _winning(texts)}, headers=KEY)
    assert r.status_code == 201, r.text
    assert r.json()["proxy"] == "the OpenAI-compatible proxy routes to 'newbie' (backend model 'm-newbie')"
    assert _best(c, names + ["newbie"]) == "newbie" == _proxied(c)
    assert seen[-1] == ("http://backend/v1/chat/completions", "m-newbie")
    # DELETE keeps backends.yaml's entry: a later add of that name is proxied again
    assert c.delete("/llms/newbie", headers=KEY).status_code == 200
    assert _proxied(c) == before
    assert c.post("/llms", json={"name": "newbie", "probes": _winning(texts)}, headers=KEY).status_code == 201
    assert _proxied(c) == "newbie"


def test_post_llms_with_a_backend_is_proxied_and_delete_removes_it(knn_artifact, monkeypatch):
    """An LLM added with POST /llms was never reached through the proxy (its backends were
    fixed at start): /route picked it, the proxy kept to the start-up LLMs."""
    path, texts = knn_artifact
    art = load_router(path)
    names = list(art.llm_names)
    seen = _recorded(monkeypatch)
    c = TestClient(create_app(art, ServiceConfig(api_key="k", backends=mocked_backends(names))),
                   raise_server_exceptions=False)
    before = _proxied(c)
    backend = {"base_url": "https://nb:S3cr3t@other.example:8443/v1?api-version=7",
               "model": "nb-model", "api_key_env": None}
    r = c.post("/llms", json={"name": "newbie", "probes": _winning(texts), "backend": backend},
               headers=KEY)
    assert r.status_code == 201, r.text
    assert r.json() == {"added": "newbie", "llms": names + ["newbie"],
                        "proxy": "the OpenAI-compatible proxy routes to 'newbie' (backend model 'nb-model')"}
    assert "S3cr3t" not in r.text and "other.example" not in c.get("/llms", headers=KEY).text
    assert _best(c, names + ["newbie"]) == "newbie" == _proxied(c)
    assert seen[-1] == ("https://nb:S3cr3t@other.example:8443/v1/chat/completions?api-version=7",
                        "nb-model")
    assert c.delete("/llms/newbie", headers=KEY).status_code == 200
    assert _proxied(c) == before and seen[-1][1] == "m-" + before
    # added again without a backend: the 201 says the proxy will not route to it, and it does not
    r = c.post("/llms", json={"name": "newbie", "probes": _winning(texts)}, headers=KEY)
    assert r.status_code == 201, r.text
    assert r.json()["proxy"] == ("the OpenAI-compatible proxy will not route to 'newbie': it has no "
                                 "backend (give 'backend' in POST /llms, or name it in backends.yaml "
                                 "before the start)")
    routed = c.post("/route", json={"query": ASK["messages"][0]["content"]}, headers=KEY).json()
    assert routed["llm"] == "newbie"
    assert _proxied(c) == before


def test_a_backend_waits_in_the_snapshot_of_its_pool(knn_artifact, monkeypatch):
    """A request that took its snapshot before POST /llms routes with the old pool and old
    backends; one after it sees both new (one assignment publishes both)."""
    path, texts = knn_artifact
    art = load_router(path)
    app = create_app(art, ServiceConfig(api_key="k", backends=mocked_backends(art.llm_names)))
    c = TestClient(app)
    old = app.state.served.current
    backend = {"base_url": "http://other/v1", "model": "nb"}
    assert c.post("/llms", json={"name": "nb", "probes": _winning(texts), "backend": backend},
                  headers=KEY).status_code == 201
    new = app.state.served.current
    assert "nb" not in old.proxy_backends and "nb" not in old.llm_names
    assert new.proxy_backends["nb"] == {"base_url": "http://other/v1", "model": "nb", "api_key_env": None}
    assert art.__dict__.get("proxy_backends") is None        # the caller's artifact is untouched


def test_the_caps_hold_for_a_compressed_backend(monkeypatch):
    """A gzip-encoded reply decodes into chunks far larger than what came over the wire: a
    whole 5,000-byte line ending inside one decoded chunk was relayed past a 1,000-byte line
    cap (only the bytes left after a chunk's lines were checked). The reply cap's answers are
    checked too (they held before: only its memory bound changed, a chunk now checked before
    it is kept)."""
    import asyncio
    import gzip

    import httpx

    from recsys_router.serving.stream_relay import capped_reply, relayed_lines

    def reply(raw: bytes) -> httpx.Response:
        class Net(httpx.AsyncByteStream):
            async def __aiter__(self):
                yield gzip.compress(raw)
        return httpx.Response(200, headers={"content-encoding": "gzip"}, stream=Net())

    async def relay(raw):
        return [x async for x in relayed_lines(reply(raw), "a", str, limit=1000)]
    out = asyncio.run(relay(GOOD + b'data: {"pad": "' + b"x" * 5000 + b'"}\n\n' + REST))
    assert len(out) == 3 and out[0] == b'data: {"model": "a", "choices": [{"delta": {"content": "hi"}}]}\n'
    assert json.loads(out[2].split(b"\n")[1][5:])["error"]["message"] == (
        "backend for 'a' sent a stream line of more than 1,000 bytes")
    assert asyncio.run(capped_reply(reply(b" " * 5000), limit=1000)) is None
    assert asyncio.run(capped_reply(reply(b" " * 1000), limit=1000)) == b" " * 1000
