"""The OpenAI proxy's routing policy: ``router-argmax`` routes by the best predicted score
whatever the artifact's default policy, and a ``wtp``/``budget`` field is read by
``router-wtp``/``router-budget`` only, any other model refusing it with a 400 that names it
(it used to be dropped without a word). Mocked backend: ``httpx.MockTransport``."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

from recsys_router.export import export_router, load_router
from recsys_router.serving import ServiceConfig, create_app
from serve_helpers import mock_backend, mocked_backends
from toy_routers import WordRouter


@pytest.fixture(scope="module")
def cheap_default(tmp_path_factory, sim_split):
    """A WordRouter artifact whose default policy is wtp = 0 (always the cheapest LLM)."""
    tr = sim_split["train"]
    out = tmp_path_factory.mktemp("art") / "word-wtp0"
    export_router(WordRouter().fit(tr), out, train_data=tr, policy="wtp", policy_value=0.0)
    return load_router(out)


@pytest.fixture
def backend(monkeypatch):
    return mock_backend(monkeypatch)


def _client(art):
    cfg = ServiceConfig(backends=mocked_backends(art.llm_names))
    return TestClient(create_app(art, cfg), raise_server_exceptions=False)


def _text_away_from_the_cheapest(art) -> tuple[str, int, int]:
    """A text whose WordRouter argmax (the LLM at index words % n, which gets the +1 bonus
    over means in [0, 1]) is not the cheapest LLM; returns (text, argmax, cheapest)."""
    n = len(art.llm_names)
    _, costs, _ = art.predict(["one"])
    cheapest = int(np.argmin(costs[0]))
    k = next(k for k in range(1, 2 * n) if k % n != cheapest)
    return " ".join(["w"] * k), k % n, cheapest


def test_router_argmax_routes_by_score_whatever_the_default_policy(cheap_default, backend):
    """r5: router-argmax went through the artifact's default policy (wtp 0): the cheapest LLM,
    answered with policy 'wtp'."""
    art = cheap_default
    text, best, cheapest = _text_away_from_the_cheapest(art)
    assert art.default_policy == ("wtp", 0.0) and best != cheapest
    c = _client(art)
    msgs = [{"role": "user", "content": text}]
    r = c.post("/v1/chat/completions", json={"model": "router-argmax", "messages": msgs})
    assert r.status_code == 200, r.text
    assert (r.headers["x-recsys-router-llm"], r.headers["x-recsys-router-policy"]) == \
        (art.llm_names[best], "argmax")
    assert backend["seen"][-1]["model"] == "m-" + art.llm_names[best]
    r = c.post("/v1/chat/completions", json={"model": "router", "messages": msgs})  # the default
    assert (r.headers["x-recsys-router-llm"], r.headers["x-recsys-router-policy"]) == \
        (art.llm_names[cheapest], "wtp")


def test_exported_decide_takes_argmax_over_the_default_policy(cheap_default):
    art = cheap_default
    text, best, cheapest = _text_away_from_the_cheapest(art)
    scores, costs, _ = art.predict([text])
    ch, policy, value = art.decide([text], scores, costs, argmax=True)
    assert (ch.tolist(), policy, value) == ([best], "argmax", None)
    ch, policy, value = art.decide([text], scores, costs)
    assert (ch.tolist(), policy, value) == ([cheapest], "wtp", 0.0)
    with pytest.raises(ValueError, match="argmax takes neither wtp nor budget"):
        art.decide([text], scores, costs, argmax=True, wtp=1.0)


MSG = [{"role": "user", "content": "one two three"}]


@pytest.mark.parametrize("model,extra,field", [
    ("router", {"budget": 0}, "budget"),            # POST /route with it routes by budget
    ("router", {"wtp": 5}, "wtp"),
    ("router-argmax", {"budget": 0}, "budget"),
    ("router-argmax", {"wtp": 1e6}, "wtp"),
    ("router-wtp-5", {"budget": 0}, "budget"),      # two policies: which one?
    ("router-wtp-5", {"wtp": 7}, "wtp"),            # the value twice
    ("router-wtp", {"wtp": 1, "budget": 0}, "budget"),
    ("router-budget", {"budget": 1, "wtp": 2}, "wtp"),
    ("router-budget-0.5", {"budget": 0.5}, "budget"),
])
def test_a_policy_field_the_model_does_not_read_is_a_400_naming_it(cheap_default, backend,
                                                                   model, extra, field):
    """r2: every one of these was a 200 routed as if the field were absent."""
    c = _client(cheap_default)
    r = c.post("/v1/chat/completions", json={"model": model, "messages": MSG, **extra})
    assert r.status_code == 400, r.text
    assert r.json()["error"] == (
        f"the request's '{field}' field is read only with model 'router-{field}' (no value in "
        f"the name); model {model!r} does not use it: give the policy once, as model "
        f"'router-{field}' with the field, or 'router-{field}-<value>'")
    assert backend["seen"] == [] and c.app.state.batcher.texts_run == 0


@pytest.mark.parametrize("model,extra,policy,value", [
    ("router-wtp", {"wtp": 3}, "wtp", 3.0),
    ("router-budget", {"budget": 0}, "budget", 0.0),
    ("router", {"wtp": None, "budget": None}, "wtp", 0.0),  # null is absent: the default
    ("router-argmax", {"wtp": None}, "argmax", None),
])
def test_fields_read_by_their_own_model_still_route(cheap_default, backend, model, extra, policy,
                                                    value):
    from recsys_router.serving.openai_proxy import router_policy
    c = _client(cheap_default)
    r = c.post("/v1/chat/completions", json={"model": model, "messages": MSG, **extra})
    assert r.status_code == 200, r.text
    assert r.headers["x-recsys-router-policy"] == policy
    assert all(k not in backend["seen"][-1] for k in ("wtp", "budget"))   # never forwarded
    expect = (None, None) if model == "router" else (policy, value)
    assert router_policy(model, extra) == expect


def test_router_argmax_with_a_value_is_a_400(cheap_default, backend):
    c = _client(cheap_default)
    r = c.post("/v1/chat/completions", json={"model": "router-argmax-5", "messages": MSG})
    assert r.status_code == 400
    assert r.json()["error"].startswith("model must be 'router', 'router-argmax', ")
