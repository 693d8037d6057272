"""The OpenAI-compatible proxy routes within the pool served now (``POST``/``DELETE /llms``
change it), and relays a backend's answer that is not strict JSON as a JSON 502, never a
plain-text 500 (mocked backend: ``httpx.MockTransport``)."""

from __future__ import annotations

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
