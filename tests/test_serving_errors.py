"""Status codes of the router service: a client's mistake is a 4xx, a failure of the model
or the service a 500 with a JSON body (never plain text), and predictions that are NaN or
infinite are rendered as ``null`` instead of failing the answer."""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient

from recsys_router.data import RoutingData
from recsys_router.export import export_router, load_router
from recsys_router.serving import ServiceConfig, create_app
from toy_routers import WordRouter

TEXT = "one two"          # WordRouter: 2 words -> bonus for LLM 2 % n


@pytest.fixture(scope="module")
def paths(tmp_path_factory, sim_split):
    tr = sim_split["train"]
    root = tmp_path_factory.mktemp("art")
    bare = RoutingData(tr.queries, tr.llm_names, tr.scores, name="no-costs")
    return {"costs": export_router(WordRouter().fit(tr), root / "costs", train_data=tr),
            "bare": export_router(WordRouter().fit(bare), root / "bare", train_data=bare),
            "bare-wtp": export_router(WordRouter().fit(bare), root / "bare-wtp", train_data=bare,
                                      policy="wtp", policy_value=1.0)}


def _client(art):
    return TestClient(create_app(art, ServiceConfig()), raise_server_exceptions=False)


def _patched(path, **methods):
    art = load_router(path)
    for name, fn in methods.items():
        setattr(art.router, name, fn)
    return art


def test_nan_and_infinite_predictions_are_null(paths):
    art = load_router(paths["costs"])
    real_s, real_c = art.router._predict_scores, art.router._predict_costs

    def scores(data):
        out = real_s(data)
        out[:, 0] = np.nan
        out[:, 1] = -np.inf
        return out

    def costs(data):
        out = real_c(data)
        out[:, 3] = np.nan
        return out
    art.router._predict_scores, art.router._predict_costs = scores, costs
    names = art.llm_names
    r = _client(art).post("/route", json={"query": TEXT})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["scores"][names[0]] is None and body["scores"][names[1]] is None
    assert body["costs"][names[3]] is None and body["costs"][names[0]] == pytest.approx(
        float(real_c(art.to_data([TEXT]))[0, 0]))
    assert body["llm"] == names[2 % len(names)]          # the word-count bonus, as by hand


@pytest.mark.parametrize("exc", [ValueError("bad weights"), RuntimeError("boom"),
                                 IndexError("index 9 is out of bounds")])
def test_a_failing_model_is_a_json_500(paths, exc):
    def broken(data):
        raise exc
    c = _client(_patched(paths["costs"], _predict_scores=broken))
    r = c.post("/route", json={"query": TEXT})
    assert r.status_code == 500
    assert r.json() == {"error": f"routing failed: {type(exc).__name__}: {exc}"}
    assert c.get("/health").status_code == 200


def test_a_failing_decision_is_a_json_500(paths):
    def broken(*a, **k):
        raise ValueError("policy exploded")
    art = load_router(paths["costs"])
    art.decide = broken
    r = _client(art).post("/route", json={"query": TEXT})
    assert r.status_code == 500 and r.json()["error"] == "routing failed: ValueError: policy exploded"


@pytest.mark.parametrize("field", ["wtp", "budget"])
def test_a_policy_the_router_cannot_apply_is_the_clients_400(paths, field):
    r = _client(load_router(paths["bare"])).post("/route", json={"query": TEXT, field: 1.0})
    assert r.status_code == 400
    assert r.json()["error"] == f"the {field} policy needs predicted costs; this router has none"


def test_a_default_policy_the_router_cannot_apply_is_a_500(paths):
    c = _client(load_router(paths["bare-wtp"]))
    r = c.post("/route", json={"query": TEXT})
    assert r.status_code == 500 and "default policy 'wtp' needs predicted costs" in r.json()["error"]


def test_client_errors_stay_4xx(paths):
    c = _client(load_router(paths["costs"]))
    assert c.post("/route", json={"query": TEXT, "candidates": ["nope"]}).status_code == 400
    assert c.post("/route", json={"query": TEXT, "wtp": 1, "budget": 1}).status_code == 400
    assert c.post("/route", json={"query": " "}).status_code == 400
    assert c.post("/route", json={"query": TEXT, "wtp": -1}).status_code == 422


def test_an_unexpected_exception_is_a_json_500(paths):
    app = create_app(load_router(paths["costs"]))

    @app.get("/boom")
    async def boom():
        raise KeyError("secret detail")
    r = TestClient(app, raise_server_exceptions=False).get("/boom")
    assert r.status_code == 500 and r.json() == {"error": "internal error (KeyError)"}
    assert "secret" not in r.text


@pytest.mark.parametrize("field, bad", [
    ("max_batch", 0), ("max_batch", -3), ("max_batch", True), ("max_batch", 2.5),
    ("max_body_bytes", -1), ("max_text_chars", 0), ("batch_wait_ms", float("nan")),
    ("batch_wait_ms", -1.0), ("backend_timeout_s", 0.0), ("log_batch", 0),
    ("log_flush_ms", float("inf")), ("log_flush_ms", 0.0), ("seed", -1), ("max_batchh", 4),
    ("max_batch", 8.0), ("max_batch", "8"), ("seed", 1.5),
])
def test_service_limits_are_checked_when_the_config_is_made(field, bad):
    # a limit below 1 made every /route a 413; the config is refused instead, naming the field
    with pytest.raises(ValueError, match=field):
        ServiceConfig(**{field: bad})


def test_service_limits_at_their_edges_are_accepted():
    cfg = ServiceConfig(max_batch=1, max_body_bytes=1, max_text_chars=1, batch_wait_ms=0.0,
                        log_batch=1, log_flush_ms=0.5, seed=0)
    assert (cfg.max_batch, cfg.batch_wait_ms, cfg.log_flush_ms) == (1, 0.0, 0.5)
    cfg = ServiceConfig(max_batch=np.int64(8), seed=np.int32(3))   # numpy integers are numbers
    assert (cfg.max_batch, cfg.seed) == (8, 3) and type(cfg.max_batch) is int
