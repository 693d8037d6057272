"""Router service requests: numbers are JSON numbers and texts are storable.

``{"wtp": true}`` routed with wtp=1.0 and ``"1.5"`` became 1.5 (pydantic's lax mode); a NUL
character in a query reached the decision log, where PostgreSQL refused the whole batch of
every other request. Each is now a 422 before any model call.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from recsys_router.serving import ServiceConfig, create_app
from test_serving import artifact  # noqa: F401 - the WordRouter artifact fixture

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
