"""MicroBatcher: ``max_batch`` bounds every model call, and a request cancelled while its
failing model call runs does not stop the batching task (the others still get answers)."""

from __future__ import annotations

import asyncio
import threading

import numpy as np

from recsys_router.serving.batcher import MicroBatcher


def _echo(sizes, gate=None):
    """predict(texts): row i = [len(texts[i]), call number]; the first call waits on gate."""
    def predict(texts):
        sizes.append(len(texts))
        if gate is not None and len(sizes) == 1:
            gate.wait(5)
        return np.array([[len(t), len(sizes)] for t in texts], dtype=float), None
    return predict


def test_max_batch_is_never_exceeded():
    sizes, gate = [], threading.Event()

    async def main():
        b = MicroBatcher(_echo(sizes, gate), max_batch=4, max_wait_ms=0)
        first = asyncio.create_task(b.submit(["a"]))
        await asyncio.sleep(0.1)                            # the first model call runs
        tasks = [asyncio.create_task(b.submit([c * 2] * k)) for c, k in
                 (("b", 3), ("c", 4), ("d", 1), ("e", 2), ("f", 2))]
        await asyncio.sleep(0.05)
        gate.set()
        out = await asyncio.gather(first, *tasks)
        await b.stop()
        return out
    out = asyncio.run(main())
    # queued 3, 4, 1, 2, 2 texts in order: [b b b], [c c c c], [d e e], [f f]
    assert sizes == [1, 3, 4, 3, 2]
    assert [s.shape for s, _ in out] == [(1, 2), (3, 2), (4, 2), (1, 2), (2, 2), (2, 2)]
    assert [int(s[0, 1]) for s, _ in out] == [1, 2, 3, 4, 4, 5]   # the call each was in
    assert all((s[:, 0] == (1 if i == 0 else 2)).all() for i, (s, _) in enumerate(out))


def test_a_request_larger_than_max_batch_runs_alone():
    sizes = []

    async def main():
        b = MicroBatcher(_echo(sizes), max_batch=2, max_wait_ms=0)
        s, _ = await b.submit(["x"] * 5)
        await b.stop()
        return s
    assert asyncio.run(main()).shape == (5, 2) and sizes == [5]


def test_cancelled_failing_request_does_not_stop_the_batcher():
    gate = threading.Event()

    def predict(texts):
        if texts == ["bad"]:
            gate.wait(5)
            raise RuntimeError("model failed on this request")
        return np.ones((len(texts), 2)), None

    async def main():
        b = MicroBatcher(predict, max_batch=8, max_wait_ms=0)
        bad = asyncio.create_task(b.submit(["bad"]))
        await asyncio.sleep(0.1)                            # its model call runs
        good = asyncio.create_task(b.submit(["good"]))
        await asyncio.sleep(0.05)
        bad.cancel()                                        # its client went away
        gate.set()
        scores, _ = await asyncio.wait_for(good, 5)
        alive = not b._task.done()
        later, _ = await asyncio.wait_for(b.submit(["later", "again"]), 5)
        await b.stop()
        return scores, alive, later, b.requests_failed
    scores, alive, later, failed = asyncio.run(main())
    assert alive and scores.tolist() == [[1.0, 1.0]] and later.shape == (2, 2) and failed == 1
