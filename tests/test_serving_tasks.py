"""``POST /route`` carries task labels (``task`` with ``query``, ``tasks`` with ``queries``) to a
served router that routes by task; the micro-batcher keeps each request's labels with its
texts; bad labels are refused naming the entry; a router that reads no task ignores them."""

from __future__ import annotations

import asyncio
import warnings

import numpy as np
import pytest
from fastapi.testclient import TestClient

from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.export import export_router, load_router
from recsys_router.registry import make_router
from recsys_router.serving import create_app
from recsys_router.serving.batcher import MicroBatcher


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
