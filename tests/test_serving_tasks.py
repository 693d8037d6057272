"""``POST /route`` carries task labels (``task`` with ``query``, ``tasks`` with ``queries``) to a
served router that routes by task; the micro-batcher keeps each request's labels with its
texts; bad labels are refused naming the entry; a router that reads no task ignores them."""

from __future__ import annotations

import asyncio
import warnings

import numpy as np
import pytest
from fastapi.testclient import TestClient

from pg_util import pg_url  # noqa: F401 - fixture
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.export import export_router, load_router
from recsys_router.registry import make_router
from recsys_router.serving import create_app
from recsys_router.serving.batcher import MicroBatcher
from serve_helpers import mock_backend, mocked_backends


@pytest.fixture(scope="module")
def parts():
    d = make_synthetic(400, 6, 4, seed=0, specialisation=4.0, binary=False)
    return d.subset(np.arange(300)), d.subset(np.arange(300, 400))


def _client(router, train, tmp_path, name) -> TestClient:
    out = tmp_path / name
    export_router(router, out, train_data=train)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return TestClient(create_app(load_router(out)))


def _best_per_task(train):
    """The task-best rule by hand: per task, the LLM with the highest mean train score."""
    names = list(train.llm_names)
    tasks = np.asarray(train.tasks, dtype=object)
    best = {}
    for t in sorted(set(tasks)):
        means = np.nanmean(train.scores[tasks == t], axis=0)
        best[t] = names[int(np.argmax(means))]
    overall = names[int(np.argmax(np.nanmean(train.scores, axis=0)))]
    return best, overall


def test_task_best_served_routes_each_query_by_its_task(parts, tmp_path):
    tr, te = parts
    best, overall = _best_per_task(tr)
    assert len(set(best.values())) > 1  # the tasks really disagree, or the test proves nothing
    c = _client(make_router("task-best").fit(tr), tr, tmp_path, "tb")
    assert c.get("/health").json()["uses_tasks"] is True
    texts, tasks = list(te.texts[:12]), list(te.tasks[:12])
    for text, task in zip(texts, tasks):
        r = c.post("/route", json={"query": text, "task": task})
        assert r.status_code == 200, r.text
        assert r.json()["llm"] == best[task]
    r = c.post("/route", json={"query": texts[0]})  # no task: the overall best
    assert r.json()["llm"] == overall
    labels = tasks[:5] + [None, ""]  # null and "" both mean no task
    r = c.post("/route", json={"queries": texts[:7], "tasks": labels})
    assert r.status_code == 200, r.text
    assert [x["llm"] for x in r.json()["results"]] == [best[t] for t in tasks[:5]] + [overall] * 2


def test_same_text_under_two_tasks_in_one_batch(parts, tmp_path):
    tr, _ = parts
    best, _ = _best_per_task(tr)
    a, b = [t for t in best if best[t] != best[sorted(best)[0]]][0], sorted(best)[0]
    c = _client(make_router("task-best").fit(tr), tr, tmp_path, "tb2")
    r = c.post("/route", json={"queries": ["same text", "same text"], "tasks": [a, b]})
    assert [x["llm"] for x in r.json()["results"]] == [best[a], best[b]]


@pytest.mark.parametrize("body,status,message", [
    ({"queries": ["a", "b"], "tasks": ["x"]}, 400, "tasks: 1 labels for 2 queries"),
    ({"queries": ["a"], "task": "x"}, 400, "'task' labels a single 'query'"),
    ({"query": "a", "tasks": ["x"]}, 400, "'tasks' labels 'queries'"),
    ({"query": "a", "task": "t" * 1001}, 400, "tasks[0]: 1001 characters; the limit is 1000"),
    ({"queries": ["a", "b"], "tasks": [None, "t" * 5000]}, 400, "tasks[1]: 5000 characters"),
    ({"query": "a", "task": "x\u0000y"}, 422, "NUL"),
    ({"queries": ["a"], "tasks": [5]}, 422, "tasks"),
    ({"queries": ["a"], "tasks": "x"}, 422, "tasks"),
    ({"queries": ["a"], "tasks": [["x"]]}, 422, "tasks"),
])
def test_bad_task_labels_are_refused_naming_the_entry(parts, tmp_path, body, status, message):
    tr, _ = parts
    c = _client(make_router("task-best").fit(tr), tr, tmp_path, "tb3")
    r = c.post("/route", json=body)
    assert r.status_code == status, r.text
    assert message in r.text
    assert c.post("/route", json={"query": "fine", "task": "x"}).status_code == 200  # still serving


def test_a_router_without_tasks_ignores_them(parts, tmp_path):
    tr, te = parts
    c = _client(make_router("knn", encoder="hashing").fit(tr), tr, tmp_path, "knn")
    assert c.get("/health").json()["uses_tasks"] is False
    texts = list(te.texts[:6])
    plain = c.post("/route", json={"queries": texts}).json()["results"]
    tagged = c.post("/route", json={"queries": texts, "tasks": list(te.tasks[:6])}).json()["results"]
    assert [x["llm"] for x in plain] == [x["llm"] for x in tagged]
    assert [x["scores"] for x in plain] == [x["scores"] for x in tagged]


def test_batcher_keeps_each_requests_labels_with_its_texts():
    calls = []

    def predict(texts, tasks=None):
        calls.append((list(texts), tasks))
        return np.zeros((len(texts), 1)), None

    async def main():
        b = MicroBatcher(predict, max_batch=64, max_wait_ms=0)
        try:
            return await asyncio.gather(b.submit(["a", "b"], tasks=["x", None]),
                                        b.submit(["c"]),
                                        b.submit(["d"], tasks=["y"]))
        finally:
            await b.stop()

    out = asyncio.run(main())
    assert [o[0].shape for o in out] == [(2, 1), (1, 1), (1, 1)]
    assert calls == [(["a", "b", "c", "d"], ["x", None, None, "y"])]
    calls.clear()

    async def plain():
        b = MicroBatcher(predict, max_batch=64, max_wait_ms=0)
        try:
            return await b.submit(["e"])
        finally:
            await b.stop()
    asyncio.run(plain())
    assert calls == [(["e"], None)]  # no request gave labels: predict is called without them


def test_batcher_refuses_labels_that_do_not_match_the_texts():
    async def main():
        b = MicroBatcher(lambda t, tasks=None: (np.zeros((len(t), 1)), None))
        await b.submit(["a", "b"], tasks=["x"])
    with pytest.raises(ValueError, match="1 task labels for 2 texts"):
        asyncio.run(main())


# --- the decision log keeps each decision's task label (third review, R3-r1)

def test_task_routed_decisions_are_logged_with_their_task_and_ope_agrees(parts, tmp_path):
    """The same text routed with and without its task gave two log rows that differed only in
    'chosen': ``ope`` of the serving artifact on its own log then found it disagreeing with
    itself (1 of 2 decisions unsupported, IPS/SNIPS/DR 'biased')."""
    import pandas as pd

    from recsys_router.cli import main
    from recsys_router.feedback.logged import log_to_data
    from recsys_router.feedback.store import DecisionLog
    from recsys_router.serving.app import ServiceConfig
    tr, te = parts
    best, overall = _best_per_task(tr)
    text, task = te.texts[0], te.tasks[0]
    assert best[task] != overall  # the label changes the decision here
    export_router(make_router("task-best").fit(tr), tmp_path / "tb", train_data=tr)
    db = f"sqlite:///{tmp_path / 'log.db'}"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        app = create_app(load_router(tmp_path / "tb"), ServiceConfig(log_db=db, log_text="full"))
    with TestClient(app) as c:
        a = c.post("/route", json={"query": text, "task": task}).json()
        b = c.post("/route", json={"query": text}).json()
        mixed = c.post("/route", json={"queries": [text, text], "tasks": [None, task]}).json()["results"]
        for x in (a, b, *mixed):
            assert c.post("/feedback", json={"decision_id": x["decision_id"], "score": 1.0}).status_code == 200
    assert (a["llm"], b["llm"], [x["llm"] for x in mixed]) == (best[task], overall, [overall, best[task]])
    log = DecisionLog(db).read()
    assert [t if isinstance(t, str) else None for t in log["task"]] == [task, None, None, task]
    data = log_to_data(log, source="log")
    assert [t if isinstance(t, str) else None for t in data.queries["task"]] == [task, None, None, task]
    assert main(["ope", "--log", db, "--router", str(tmp_path / "tb"), "--policy", "argmax",
                 "--out", str(tmp_path / "ope"), "--seed", "0"]) == 0
    ope = pd.read_csv(tmp_path / "ope" / "ope.csv")
    assert (ope["unsupported"] == 0).all() and not ope["biased"].any()


def test_a_router_that_reads_no_task_still_logs_the_labels(parts, tmp_path):
    from recsys_router.feedback.store import DecisionLog
    from recsys_router.serving.app import ServiceConfig
    tr, te = parts
    export_router(make_router("knn", encoder="hashing").fit(tr), tmp_path / "knn", train_data=tr)
    db = f"sqlite:///{tmp_path / 'log.db'}"
    with TestClient(create_app(load_router(tmp_path / "knn"), ServiceConfig(log_db=db))) as c:
        assert c.post("/route", json={"queries": ["a", "b"], "tasks": ["math", ""]}).status_code == 200
    assert [t if isinstance(t, str) else None for t in DecisionLog(db).read()["task"]] == ["math", None]


def _drop_task_column(url: str) -> None:
    import sqlalchemy as sa
    eng = sa.create_engine(url)
    with eng.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE rr_decisions DROP COLUMN task")
    eng.dispose()


def _old_log_gets_the_column(url: str) -> None:
    from recsys_router.feedback.store import DecisionLog, decision_row
    row = dict(decision_id="d0", instance="i", artifact_sha=None, policy="argmax", policy_value=None,
               explore="none", candidates=["a", "b"], chosen="a", propensity=1.0, probs={"a": 1.0},
               scores={"a": 0.5, "b": 0.1}, costs=None, text="q", log_text="hash")
    log = DecisionLog(url)
    log.insert_decisions([{k: v for k, v in decision_row(**row).items() if k != "task"}])
    log.dispose()
    _drop_task_column(url)  # the log as an older version wrote it
    log = DecisionLog(url)  # opening adds the column; the old row has no task
    log.insert_decisions([decision_row(**{**row, "decision_id": "d1"}, task="math")])
    got = log.read()
    assert list(got["decision_id"]) == ["d0", "d1"]
    assert [t if isinstance(t, str) else None for t in got["task"]] == [None, "math"]
    log.dispose()
    DecisionLog(url).dispose()  # a second open finds the column: nothing to add


def test_a_log_written_before_the_task_column_gets_it_sqlite(tmp_path):
    _old_log_gets_the_column(f"sqlite:///{tmp_path / 'old.db'}")


def test_a_log_written_before_the_task_column_gets_it_postgresql(pg_url):  # noqa: F811
    _old_log_gets_the_column(pg_url)


@pytest.mark.parametrize("cell,message", [
    ("t" * 1001, "column 'task' holds 1,001 characters; a task label has at most 1,000"),
    (5, "column 'task': expected a task label (a string) or nothing, got int '5'"),
    (["math"], "column 'task': expected a task label (a string) or nothing, got list \"['math']\""),
])
def test_hostile_task_cells_in_a_log_file_are_named(cell, message):
    import pandas as pd

    from recsys_router.feedback.logged import log_to_data
    log = pd.DataFrame({"decision_id": ["d0", "d1"], "chosen": ["a", "a"], "propensity": [1.0, 1.0],
                        "candidates": ['["a", "b"]'] * 2, "feedback_score": [1.0, 0.0],
                        "task": ["math", cell]})
    with pytest.raises(ValueError) as err:
        log_to_data(log, source="log.csv")
    assert str(err.value) == f"log.csv: row 1 (decision_id 'd1'): {message}"


def test_missing_task_cells_of_any_kind_mean_no_task():
    import pandas as pd

    from recsys_router.feedback.logged import log_to_data
    log = pd.DataFrame({"decision_id": [f"d{i}" for i in range(4)], "chosen": ["a"] * 4,
                        "propensity": [1.0] * 4, "candidates": ['["a", "b"]'] * 4,
                        "feedback_score": [1.0, 0.0, 1.0, 0.0],
                        "task": pd.array(["math", None, "", "code"], dtype="string")})
    got = log_to_data(log, source="log").queries["task"]
    assert [t if isinstance(t, str) else None for t in got] == ["math", None, None, "code"]
    log["task"] = None  # a log of decisions none of which had a task
    assert not [t for t in log_to_data(log, source="log").queries["task"] if isinstance(t, str)]


def test_serve_says_once_that_a_task_router_reads_task_labels(parts, tmp_path, monkeypatch):
    """``serve`` warned twice: ``load_router``'s note for Python callers, then the service's."""
    import uvicorn

    from recsys_router.cli import main
    tr, _ = parts
    export_router(make_router("task-best").fit(tr), tmp_path / "tb", train_data=tr)
    apps = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: apps.append(app))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["serve", str(tmp_path / "tb"), "--seed", "0"]) == 0
    said = [str(w.message) for w in caught if "routes by each query's task label" in str(w.message)]
    assert len(apps) == 1 and len(said) == 1, said
    assert "('task' in /v1/chat/completions)" in said[0]


def _proxy_client(router, train, tmp_path, name, monkeypatch, log_db=None):
    """The service with every LLM behind one mocked backend; returns (client, bodies the
    backend received)."""
    from recsys_router.serving.app import ServiceConfig
    seen = mock_backend(monkeypatch)["seen"]
    export_router(router, tmp_path / name, train_data=train)
    backends = mocked_backends(train.llm_names)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        app = create_app(load_router(tmp_path / name), ServiceConfig(backends=backends, log_db=log_db))
    return TestClient(app), seen


def _chat(text, **extra):
    return {"model": "router", "messages": [{"role": "user", "content": text}], **extra}


def test_the_openai_proxy_routes_by_the_requests_task(parts, tmp_path, monkeypatch):
    """The proxy had no task field: a task router served through it routed every query as
    one without a task."""
    from recsys_router.feedback.store import DecisionLog
    tr, te = parts
    best, overall = _best_per_task(tr)
    db = f"sqlite:///{tmp_path / 'log.db'}"
    c, seen = _proxy_client(make_router("task-best").fit(tr), tr, tmp_path, "tb", monkeypatch, db)
    with c:
        texts, tasks = list(te.texts[:8]), list(te.tasks[:8])
        for text, task in zip(texts, tasks):
            r = c.post("/v1/chat/completions", json=_chat(text, task=task))
            assert r.status_code == 200, r.text
            assert r.headers["x-recsys-router-llm"] == best[task]
        r = c.post("/v1/chat/completions", json=_chat(texts[0], task=None))
        assert r.headers["x-recsys-router-llm"] == overall
        r = c.post("/v1/chat/completions", json=_chat(texts[0]))
        assert r.headers["x-recsys-router-llm"] == overall
    # the backend never sees the routing field; the log keeps each decision's label
    assert all("task" not in body for body in seen) and len(seen) == 10
    assert [b["model"] for b in seen[:8]] == ["m-" + best[t] for t in tasks]
    logged = DecisionLog(db).read()["task"]
    assert [t if isinstance(t, str) else None for t in logged] == tasks + [None, None]


@pytest.mark.parametrize("task,status,message", [
    (5, 400, "'task' must be a string (the query's task label) or null, got int"),
    (["math"], 400, "'task' must be a string (the query's task label) or null, got list"),
    ({"a": 1}, 400, "got dict"),
    (True, 400, "got bool"),
    ("t" * 1001, 400, "'task' has 1001 characters; the limit is 1000"),
    ("x\u0000y", 422, "task: text holds a NUL character"),
    ("x\ud800", 422, "cannot be UTF-8 encoded"),
], ids=["number", "list", "object", "boolean", "too-long", "nul", "lone-surrogate"])
def test_the_openai_proxy_refuses_a_bad_task_naming_it(parts, tmp_path, monkeypatch, task, status,
                                                       message):
    tr, te = parts
    c, seen = _proxy_client(make_router("task-best").fit(tr), tr, tmp_path, "tb", monkeypatch)
    import json
    body = json.dumps(_chat("a question", task=task))   # ASCII escapes: a lone surrogate as \ud800
    r = c.post("/v1/chat/completions", content=body, headers={"content-type": "application/json"})
    assert r.status_code == status, r.text
    assert message in r.text and not seen        # nothing forwarded
    ok = c.post("/v1/chat/completions", json=_chat("a question", task=str(te.tasks[0])))
    assert ok.status_code == 200 and len(seen) == 1  # the service goes on
