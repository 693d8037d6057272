"""Serving latency mechanics (correctness only, nothing timed): the micro-batcher runs a lone
request without waiting for company, still batches requests that arrive during a model call,
and the service's encoder keeps its cache in a bounded memory LRU instead of writing a disk
shard per request."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest
from fastapi.testclient import TestClient

from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.encoders import Encoder
from recsys_router.encoders import cache as cache_mod
from recsys_router.encoders.cache import MemoryLRU, disk_cache_enabled, memory_only, text_key
from recsys_router.export import export_router, load_router
from recsys_router.registry import make_router
from recsys_router.serving import ServiceConfig, create_app
from recsys_router.serving.batcher import MicroBatcher

HOUR_MS = 3_600_000.0  # a window no test could sit out: waiting it would hang the test


def _lengths(calls):
    def predict(texts):
        calls.append(list(texts))
        return np.array([[len(t), 0.0] for t in texts]), None
    return predict


# ---------------------------------------------------------------- the batcher
def test_lone_requests_run_at_once_without_the_window():
    calls = []
    b = MicroBatcher(_lengths(calls), max_batch=64, max_wait_ms=HOUR_MS)

    async def run():
        try:
            out = []
            for t in ["a", "bb", "ccc"]:  # one client, one request at a time
                out.append(await asyncio.wait_for(b.submit([t]), 60))  # hang guard only
            return out
        finally:
            await b.stop()
    out = asyncio.run(run())
    assert [s.tolist() for s, _ in out] == [[[1.0, 0.0]], [[2.0, 0.0]], [[3.0, 0.0]]]
    assert calls == [["a"], ["bb"], ["ccc"]]
    assert b.batches_waited == 0 and b.batches_run == 3


def test_requests_arriving_during_a_model_call_form_the_next_batch():
    calls, entered, release = [], threading.Event(), threading.Event()

    def predict(texts):
        calls.append(list(texts))
        if len(calls) == 1:  # hold the first model call until the others have queued
            entered.set()
            assert release.wait(60)
        return np.array([[len(t), 0.0] for t in texts]), None
    b = MicroBatcher(predict, max_batch=64, max_wait_ms=1.0)

    async def run():
        try:
            first = asyncio.ensure_future(b.submit(["x"]))
            assert await asyncio.to_thread(entered.wait, 60)
            rest = [asyncio.ensure_future(b.submit([t])) for t in ["aa", "bbb", "cccc"]]
            rest.append(asyncio.ensure_future(b.submit(["d", "ee"])))
            await asyncio.sleep(0)  # let them queue
            await asyncio.sleep(0)
            release.set()
            return await first, await asyncio.gather(*rest)
        finally:
            release.set()
            await b.stop()
    first, rest = asyncio.run(run())
    assert calls == [["x"], ["aa", "bbb", "cccc", "d", "ee"]]  # one call for the four requests
    assert first[0].tolist() == [[1.0, 0.0]]
    assert [s[:, 0].tolist() for s, _ in rest] == [[2.0], [3.0], [4.0], [1.0, 2.0]]
    assert b.batches_run == 2 and b.texts_run == 6 and b.batches_waited == 1


def test_batch_formed_under_load_respects_max_batch():
    calls, entered, release = [], threading.Event(), threading.Event()

    def predict(texts):
        calls.append(list(texts))
        if len(calls) == 1:
            entered.set()
            assert release.wait(60)
        return np.zeros((len(texts), 1)), None
    b = MicroBatcher(predict, max_batch=3, max_wait_ms=0.0)

    async def run():
        try:
            first = asyncio.ensure_future(b.submit(["x"]))
            assert await asyncio.to_thread(entered.wait, 60)
            rest = [asyncio.ensure_future(b.submit([f"t{i}"])) for i in range(7)]
            await asyncio.sleep(0)
            release.set()
            await first
            await asyncio.gather(*rest)
        finally:
            release.set()
            await b.stop()
    asyncio.run(run())
    assert [len(c) for c in calls] == [1, 3, 3, 1]
    assert [t for c in calls[1:] for t in c] == [f"t{i}" for i in range(7)]  # order kept


# ---------------------------------------------------------------- the in-memory cache
class _Counting(Encoder):
    identity = "counting-test-encoder"
    dim = 3
    cache_by_default = True

    def __init__(self, **kw):
        super().__init__(**kw)
        self.computed = []

    def _encode_batch(self, texts):
        self.computed += texts
        return np.array([[len(t), t.count("a"), 1.0] for t in texts], dtype=np.float32)


def _files(root):
    return sorted(p.name for p in root.rglob("*") if p.is_file())


def test_memory_only_never_touches_the_disk_and_returns_identical_vectors(tmp_path):
    cache_mod.MEMORY_CACHE.clear()
    enc = _Counting(cache_dir=tmp_path)
    with memory_only():
        assert not disk_cache_enabled()
        v1 = enc.encode(["banana", "kiwi", "banana"])
        v2 = enc.encode(["kiwi", "banana"])
    assert disk_cache_enabled()
    assert enc.computed == ["banana", "kiwi"]  # each distinct text computed once
    np.testing.assert_array_equal(v1, [[6, 3, 1], [4, 0, 1], [6, 3, 1]])  # by hand
    np.testing.assert_array_equal(v2, v1[[1, 0]])
    assert _files(tmp_path) == []  # nothing written
    enc.encode(["apple"])  # outside: the offline path still writes its shard
    assert any(n.endswith(".npz") for n in _files(tmp_path))


def test_memory_only_is_local_to_its_thread(tmp_path):
    seen = {}
    inside, done = threading.Event(), threading.Event()

    def other():
        assert inside.wait(60)
        seen["other"] = disk_cache_enabled()
        done.set()
    t = threading.Thread(target=other)
    t.start()
    with memory_only():
        inside.set()
        assert done.wait(60)
        seen["here"] = disk_cache_enabled()
    t.join()
    assert seen == {"here": False, "other": True}


def test_memory_lru_is_bounded_and_evicts_least_recent():
    per = 4 * 4 + 10  # 4 float32 + overhead
    lru = MemoryLRU(max_bytes=3 * per, entry_overhead=10)
    vecs = {k: np.full(4, i, np.float32) for i, k in enumerate("abcde")}
    for k in "abc":
        lru.put(("e", k), vecs[k])
    assert lru.get(("e", "a")) is vecs["a"]  # a is now the most recent
    lru.put(("e", "d"), vecs["d"])  # evicts b, the least recent
    assert lru.get(("e", "b")) is None and len(lru) == 3 and lru.nbytes == 3 * per
    lru.put(("e", "e"), vecs["e"])  # evicts c
    assert [lru.get(("e", k)) is not None for k in "abcde"] == [True, False, False, True, True]
    np.testing.assert_array_equal(lru.get(("e", "e")), [4, 4, 4, 4])
    lru.put(("e", "a"), vecs["b"])  # replacing keeps the byte count exact
    assert lru.nbytes == 3 * per and lru.get(("e", "a")) is vecs["b"]


# ---------------------------------------------------------------- the service
@pytest.fixture()
def cached_knn(tmp_path, monkeypatch):
    monkeypatch.setenv("RECSYS_ROUTER_CACHE", str(tmp_path / "cache"))
    train = make_synthetic(120, 4, 2, seed=0)
    art = load_router(export_router(make_router("knn", k=5, encoder="hashing").fit(train),
                                    tmp_path / "art"))
    art.router.fitted_encoder_.cache = True  # a caching encoder, as MiniLM is
    cache_mod.MEMORY_CACHE.clear()
    return art, tmp_path / "cache"


def test_served_requests_write_no_cache_files(cached_knn):
    art, root = cached_knn
    texts = [f"served question number {i}" for i in range(5)]
    c = TestClient(create_app(art, ServiceConfig(batch_wait_ms=2.0)))
    def ask():
        out = [c.post("/route", json={"query": t}).json() for t in texts]
        return [{k: v for k, v in r.items() if k != "decision_id"} for r in out]
    got = ask()
    assert not root.exists() or _files(root) == []
    ident = art.router.fitted_encoder_.identity
    assert all(cache_mod.MEMORY_CACHE.get((ident, text_key(t))) is not None for t in texts)
    assert ask() == got  # from the memory LRU: the same vectors, the same answers
    cache_mod.MEMORY_CACHE.clear()
    assert [r["llm"] for r in got] == [r["llm"] for r in art.route(texts)]
    assert any(n.endswith(".npz") for n in _files(root))  # in process: the disk cache as before
