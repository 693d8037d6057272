"""Hostile request bodies of the router service (``POST /route``, the OpenAI proxy, ``POST
/llms``): each gets a short 4xx that names the field, and none is half-read.

Thousands of unknown ``candidates`` were all echoed back, with the whole pool (a 936 KB
answer to a 900 KB request).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from fastapi.testclient import TestClient

from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.errors import RepeatedNameError, few
from recsys_router.export import export_router, load_router
from recsys_router.feedback.service import FeedbackLoop
from recsys_router.feedback.store import DecisionLog
from recsys_router.registry import make_router
from recsys_router.serving import ServiceConfig, create_app
from toy_routers import WordRouter


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    tr = make_synthetic(60, 4, 2, seed=3)
    out = tmp_path_factory.mktemp("art") / "word"
    export_router(WordRouter().fit(tr), out, train_data=tr)
    return load_router(out)


def _client(art, **cfg):
    return TestClient(create_app(art, ServiceConfig(**cfg)), raise_server_exceptions=False)


def test_few_names_is_bounded():
    assert few(["a", "b"]) == "['a', 'b']"
    assert few([f"m{i}" for i in range(12)], limit=3) == "['m0', 'm1', 'm2', ...] (12 in all)"
    assert few(["x" * 500], width=10) == "['xxxxxx...]"  # repr "'xxx..." cut to 10 characters


@pytest.mark.parametrize("names", [["x" * 100] * 9000, [f"llm-{i}" for i in range(9000)]])
def test_many_unknown_candidates_give_a_short_answer(artifact, names):
    body = {"query": "a b", "candidates": names}
    r = _client(artifact, max_body_bytes=2_000_000).post("/route", json=body)
    assert r.status_code == 400
    msg = r.json()["error"]
    assert len(r.content) < 3_000, len(r.content)  # was 936,109 bytes
    assert msg.startswith("unknown candidate LLM(s) [")
    distinct = len(set(names))
    assert (f"({distinct:,} in all)" in msg) is (distinct > 10)
    assert repr(names[0][:10])[:-1] in msg   # the first name, cut
    for llm in artifact.llm_names:  # a pool of 4: listed whole
        assert repr(llm) in msg


def test_a_large_pool_is_listed_in_part():
    data = make_synthetic(40, 30, 2, seed=1)
    router = make_router("best-single").fit(data)
    with pytest.raises(ValueError) as info:
        router.candidate_mask(["nope"])
    msg = str(info.value)
    shown = [n for n in data.llm_names if repr(n) in msg]
    assert shown == data.llm_names[:20] and "(30 in all)" in msg
    with pytest.raises(ValueError, match=r"got list \[b'x', b'x'") as info:
        router.candidate_mask([b"x"] * 10_000)
    assert len(str(info.value)) < 200


def _repeats(pool):  # (candidates, queries): one LLM 5,000 times, one LLM twice, the pool + 1
    return [([pool[1]] * 5_000, 64), ([pool[0], pool[2], pool[0]], 1), (pool + [pool[3]], 3)]


@pytest.mark.parametrize("case", [0, 1, 2])
def test_repeated_candidates_are_a_422_and_never_logged(artifact, tmp_path, case):
    # each decision row stores the candidates list: 76,000 repeats of one name in a 1 MB body
    # with 256 queries put 253 MB into the log (was a 200)
    cands, n = _repeats(list(artifact.llm_names))[case]
    db = tmp_path / "log.db"
    with _client(artifact, log_db=str(db)) as c:
        r = c.post("/route", json={"queries": [f"q {i}" for i in range(n)], "candidates": cands})
        twice = cands[-1]  # the repeated name
        assert r.status_code == 422 and len(r.content) < 300
        assert r.json()["error"] == (f"candidates must name each LLM once: [{twice!r}] repeated "
                                     f"({len(cands):,} names, {len(set(cands))} distinct)")
        assert c.app.state.feedback_loop.log_status()["queued"] == 0
    assert DecisionLog(str(db)).counts()[0] == 0  # nothing logged
    with pytest.raises(RepeatedNameError, match=repr(twice)):  # the Python API refuses it too
        artifact.route(["q 0"], candidates=cands)
    loop = FeedbackLoop(artifact, log_db=str(tmp_path / "direct.db"))
    res = [{"policy": "argmax", "policy_value": None, "llm": twice, "scores": {}, "costs": {}}]
    with pytest.raises(RepeatedNameError):  # a caller that skipped the check: nothing queued
        loop.record(["q 0"], res, np.ones((1, len(artifact.llm_names))), np.ones(1), cands)
    assert "decision_id" not in res[0] and loop.log_status()["queued"] == 0
    loop.close()


def test_a_normal_candidates_list_is_routed_and_logged_once_per_decision(artifact, tmp_path):
    pool = list(artifact.llm_names)
    cands = [pool[2], pool[0]]  # the client's order is kept
    db = tmp_path / "log.db"
    with _client(artifact, log_db=str(db)) as c:
        r = c.post("/route", json={"queries": ["a", "a b", "a b c"], "candidates": cands})
        assert r.status_code == 200
        res = r.json()["results"]
        assert {x["llm"] for x in res} <= set(cands)
        c.app.state.feedback_loop.writer.flush()
    df = DecisionLog(str(db)).read()
    assert sorted(df["decision_id"]) == sorted(x["decision_id"] for x in res)
    assert list(df["candidates"]) == [json.dumps(cands)] * 3


def _proxy(art):
    # backends on a closed port: a request forwarded would be a 502, so a 400 forwarded nothing
    backends = {n: {"base_url": "http://127.0.0.1:9/v1", "model": n, "api_key_env": None}
                for n in art.llm_names}
    return _client(art, backends=backends, backend_timeout_s=2)


CHAT = [{"role": "user", "content": "one two"}]


@pytest.mark.parametrize("model", [
    "router-wtp-1_000", "router-wtp- 5 ", "router-wtp-5 ", "router-wtp-\u0661\u0660",  # Arabic-Indic 10
    "router-budget-\uff13", "router-budget-\u00b2", "router-wtp-+5", "router-wtp--5",  # fullwidth 3, superscript 2
    "router-wtp-inf", "router-wtp-nan", "router-wtp-0x10", "router-wtp-.5", "router-wtp-5.",
    "router-budget-1e", "router-wtp-", "router-budget-1,5", "router-wtp-5\n",
])
def test_policy_values_in_model_names_are_ascii_decimals(artifact, model):
    r = _proxy(artifact).post("/v1/chat/completions", json={"model": model, "messages": CHAT})
    assert r.status_code == 400, (model, r.status_code, r.text)
    policy = model.split("-")[1]
    assert r.json()["error"] == (
        f"{model!r}: the {policy} value must be a number (in the model name in ASCII decimal "
        f"notation such as 250, 0.5 or 1e-3, or the request's '{policy}' field as a JSON number)")


@pytest.mark.parametrize("model,expect", [
    ("router-wtp-250", (250.0, None)), ("router-wtp-0.5", (0.5, None)),
    ("router-budget-1e-3", (None, 0.001)), ("router-budget-2E+2", (None, 200.0)),
    ("router-wtp-007", (7.0, None)),
])
def test_ascii_decimal_model_names_still_work(model, expect):
    from recsys_router.serving.openai_proxy import parse_router_model
    assert parse_router_model(model, {}) == expect


@pytest.mark.parametrize("body", [
    {"model": "router-wtp-" + "9" * 400},        # parses to infinity
    {"model": "router-wtp", "wtp": 10 ** 400},   # no float holds it (was a 500)
])
def test_policy_values_past_float_range_are_400(artifact, body):
    r = _proxy(artifact).post("/v1/chat/completions", json={**body, "messages": CHAT})
    assert r.status_code == 400 and "must be a finite number >= 0" in r.json()["error"]
    assert len(r.content) < 400  # the model name is cut


@pytest.mark.parametrize("model", ["router", "router-argmax", "router-wtp", "router-budget",
                                   "router-wtp-5", "router-budget-1"])
@pytest.mark.parametrize("field,value,error", [
    ("wtp", "abc", "'wtp' must be a JSON number (an integer or a float) >= 0, got str"),
    ("wtp", True, "'wtp' must be a JSON number (an integer or a float) >= 0, got bool"),
    ("budget", -1, "'budget' must be a finite number >= 0, got -1"),
    ("budget", "0", "'budget' must be a JSON number (an integer or a float) >= 0, got str"),
    ("wtp", [1], "'wtp' must be a JSON number (an integer or a float) >= 0, got list"),
    ("budget", {"v": 1}, "'budget' must be a JSON number (an integer or a float) >= 0, got dict"),
    ("wtp", -0.5, "'wtp' must be a finite number >= 0, got -0.5"),
    ("budget", 10 ** 400, "'budget' must be a finite number >= 0"),
], ids=["wtp-abc", "wtp-true", "budget-minus-1", "budget-text-0", "wtp-list", "budget-object",
        "wtp-minus-0.5", "budget-10e400"])
def test_a_malformed_wtp_or_budget_field_is_a_400_naming_it_whatever_the_model(
        artifact, model, field, value, error):
    """With model 'router' (or 'router-argmax', or a value in the name) these fields were
    dropped unread: a 200 routed by the default policy."""
    c = _proxy(artifact)
    r = c.post("/v1/chat/completions", json={"model": model, field: value, "messages": CHAT})
    assert (r.status_code, r.json()) == (400, {"error": error})
    assert c.app.state.batcher.texts_run == 0   # refused before routing


def test_a_long_unknown_model_name_is_cut(artifact):
    r = _proxy(artifact).post("/v1/chat/completions",
                              json={"model": "router-x" + "y" * 100_000, "messages": CHAT})
    assert r.status_code == 400 and len(r.content) < 400
    assert r.json()["error"].startswith("model must be 'router', ")


JSON = {"content-type": "application/json"}
REPEATS = [  # (path, body, the key named)
    ("/route", b'{"query": "a", "budget": 0, "budget": 1000}', "budget"),
    ("/route", b'{"query": "a", "candidates": ["x"], "candidates": ["y"]}', "candidates"),
    ("/route", b'{"query": "a", "query": "b"}', "query"),
    ("/route", b'{"query": "a", "wtp": 1, "wtp": 1}', "wtp"),  # the same value twice too
    ("/feedback", b'{"decision_id": "d", "score": 1, "score": 0}', "score"),
    ("/v1/chat/completions", b'{"model": "router-argmax", "model": "router-wtp-1e9", '
                             b'"messages": [{"role": "user", "content": "a b"}]}', "model"),
    ("/v1/chat/completions", b'{"model": "router", "messages": [{"role": "user", '
                             b'"content": "a", "content": "b"}]}', "content"),  # nested
    ("/llms", b'{"name": "new", "name": "other", "probes": [{"text": "a", "score": 1}]}', "name"),
    ("/llms", b'{"name": "new", "probes": [{"text": "a", "score": 1, "score": 0}]}', "score"),
]


@pytest.mark.parametrize("path,body,key", REPEATS, ids=[f"{p}-{k}" for p, _, k in REPEATS])
def test_a_key_given_twice_is_a_422_naming_it(artifact, path, body, key):
    c = _client(artifact, api_key="k", log_db=None,
                backends={n: {"base_url": "http://127.0.0.1:9/v1", "model": n, "api_key_env": None}
                          for n in artifact.llm_names})
    pool = list(c.app.state.served.current.llm_names)
    r = c.post(path, content=body, headers={**JSON, "Authorization": "Bearer k"})
    assert (r.status_code, r.json()) == (422, {"error": f"the request body names the key {key!r} "
                                                        "more than once; give each field once"})
    assert c.app.state.served.current.llm_names == pool  # no LLM added
    assert "recsys_router_chosen_total{" not in c.get("/metrics", headers={"Authorization": "Bearer k"}).text


def test_a_repeated_key_is_named_cut_and_a_body_without_repeats_still_routes(artifact):
    c = _client(artifact)
    key = "k" * 5000
    r = c.post("/route", content=f'{{"{key}": 1, "{key}": 2}}'.encode(), headers=JSON)
    assert r.status_code == 422 and len(r.content) < 300
    r = c.post("/route", content=b'{"queries": ["a b"], "candidates": ["%s"]}'
               % artifact.llm_names[0].encode(), headers=JSON)
    assert r.status_code == 200 and r.json()["results"][0]["llm"] == artifact.llm_names[0]


CHAT_BODY = b'{"model": "router", "messages": [{"role": "user", "content": "a b"}]}'
TYPES = [  # (Content-Type sent, as the 415 names it)
    ("text/plain", "got 'text/plain'"),  # a browser sends it cross-site without a preflight
    ("application/x-www-form-urlencoded", "got 'application/x-www-form-urlencoded'"),
    ("multipart/form-data; boundary=x", "got 'multipart/form-data; boundary=x'"),
    ("text/json", "got 'text/json'"), ("application/jsonx", "got 'application/jsonx'"),
    (None, "none was given"),
]


@pytest.mark.parametrize("path,body", [
    ("/route", b'{"query": "a b"}'), ("/v1/chat/completions", CHAT_BODY),
    ("/feedback", b'{"decision_id": "d", "score": 1}'),
    ("/llms", b'{"name": "new", "probes": [{"text": "a", "score": 1}]}'),
], ids=["route", "proxy", "feedback", "llms"])
@pytest.mark.parametrize("ctype,got", TYPES, ids=[t or "none" for t, _ in TYPES])
def test_a_body_that_is_not_sent_as_json_is_415(artifact, path, body, ctype, got):
    # /route answered 422 "Input should be a valid dictionary" and the proxy read the body as JSON
    c = _proxy(artifact)
    headers = {} if ctype is None else {"content-type": ctype}
    r = c.post(path, content=body, headers=headers)
    assert r.status_code == 415, (r.status_code, r.text)
    assert r.json() == {"error": "the request body must be JSON sent with 'Content-Type: "
                                 f"application/json'; {got}"}
    assert c.app.state.batcher.texts_run == 0  # nothing routed, nothing forwarded


@pytest.mark.parametrize("ctype", ["application/json", "application/json; charset=utf-8",
                                   "Application/JSON", "application/vnd.api+json"])
def test_json_content_types_are_accepted(artifact, ctype):
    c = _client(artifact)
    r = c.post("/route", content=b'{"query": "a b"}', headers={"content-type": ctype})
    assert r.status_code == 200 and r.json()["llm"] == artifact.llm_names[2 % 4]  # 2 words, 4 LLMs
    r = c.delete("/llms/" + artifact.llm_names[0])  # a DELETE needs no body: the key decides
    assert r.status_code == 403


def test_the_415_is_given_before_the_body_is_parsed(artifact):
    c = _client(artifact)
    r = c.post("/route", content=b'{"query": "a", "query": "b"}', headers={"content-type": "text/plain"})
    assert r.status_code == 415  # not the repeated key: the content type comes first
    m = c.get("/metrics").text
    assert 'recsys_router_requests_total{endpoint="/route",status="415"} 1' in m


def test_an_empty_body_is_left_to_the_endpoint(artifact):
    c = _proxy(artifact)
    r = c.post("/route")  # nothing to misread: the endpoint says what is missing
    assert (r.status_code, r.json()) == (422, {"error": "invalid request: body: Field required"})
    r = c.post("/v1/chat/completions")
    assert (r.status_code, r.json()) == (400, {"error": "request body is not valid JSON (or nests too deep)"})


BAD_BACKENDS = {
    "ftp": ({"base_url": "ftp://me:S3cr3t@h/v1"},
            "backend.base_url must be an http:// or https:// URL with a host"),
    "fragment": ({"base_url": "http://me:S3#cr3t@h/v1"}, "backend.base_url must not hold a '#fragment'"),
    "control-character": ({"base_url": "http://me:S3cr3t@h/v1\u0001"},
                          "backend.base_url must not hold a control character (U+0001 at character 21)"),
    "line-break": ({"base_url": "http://me:S3cr3t@h/v\n1"},
                   "backend.base_url must not hold a control character (U+000A at character 20)"),
    "bad-port": ({"base_url": "http://me:S3cr3t@h:port/v1"}, "backend.base_url is not a valid URL"),
    "bad-idna-host": ({"base_url": "http://me:S3cr3t@xn--a/v1"},
                      "backend.base_url is not a URL an HTTP request can be sent to"),
    "number": ({"base_url": 12}, "backend.base_url must be a string, got int"),
    "no-base-url": ({"model": "m", "api_key_env": None}, "backend.base_url is missing"),
    "model-object": ({"base_url": "http://h/v1", "model": {"a": 1}},
                     "backend.model must be a non-empty string"),
    "model-empty": ({"base_url": "http://h/v1", "model": " "}, "backend.model must be a non-empty string"),
    "key-env-number": ({"base_url": "http://h/v1", "api_key_env": 7}, "backend.api_key_env must be the name"),
    # the proxy would send the value of any variable of the server to a URL the client chose
    "key-env-not-in-yaml": ({"base_url": "http://me:S3cr3t@h/v1", "api_key_env": "RECSYS_ROUTER_API_KEY"},
                            "backend.api_key_env: 'RECSYS_ROUTER_API_KEY' is not a variable "
                            "backends.yaml names"),
    "not-an-object": ("http://me:S3cr3t@h/v1",
                      "invalid request: backend: Input should be a valid dictionary"),
}


@pytest.mark.parametrize("case", list(BAD_BACKENDS))
def test_a_hostile_backend_in_post_llms_is_a_422_naming_the_field(artifact, case):
    """POST /llms checks its ``backend`` as backends.yaml's entries are checked; the error
    names the field and never shows the URL's credentials; nothing is added."""
    spec, what = BAD_BACKENDS[case]
    key = {"Authorization": "Bearer k"}
    c = _client(artifact, api_key="k",
                backends={n: {"base_url": "http://127.0.0.1:9/v1", "model": n, "api_key_env": "OK_KEY"}
                          for n in artifact.llm_names})
    before = c.get("/llms", headers=key).json()
    probes = [{"text": f"question {i}", "score": 1.0} for i in range(5)]
    r = c.post("/llms", json={"name": "new", "probes": probes, "backend": spec}, headers=key)
    assert r.status_code == 422 and r.json()["error"].startswith(what), r.text
    assert "S3" not in r.text and "cr3t" not in r.text
    assert c.get("/llms", headers=key).json() == before
    assert "new" not in c.app.state.served.current.proxy_backends


def test_a_backend_without_the_proxy_is_a_422(artifact):
    c = _client(artifact, api_key="k")
    probes = [{"text": f"question {i}", "score": 1.0} for i in range(5)]
    r = c.post("/llms", json={"name": "new", "probes": probes, "backend": {"base_url": "http://h/v1"}},
               headers={"Authorization": "Bearer k"})
    assert (r.status_code, r.json()["error"]) == (422, "backend: the OpenAI-compatible proxy is off "
                                                       "(start the service with --backends backends.yaml "
                                                       "to give LLMs backends)")
    assert "new" not in c.app.state.served.current.llm_names
