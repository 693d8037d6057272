"""Micro-batching of concurrent routing requests through one encoder/model call.

A request that finds the batcher idle (no model call running, nothing queued) is predicted
at once: a lone client never waits for company that is not coming. Requests that arrive
while a model call runs queue up and are predicted together in the next call (up to
``max_batch`` texts); such a batch, formed under load, also waits up to ``max_wait_ms`` for
more company. Each request then applies its own policy (wtp, budget, candidates) to its rows.

Isolation: when the model call of a batch raises, the batch is retried in halves down to
single requests, so only the request(s) that fail alone get the error; the others get
their results.

Snapshots: a request may name the ``context`` it must be predicted with (the service passes
the snapshot of the served router it took when the request arrived); requests of different
contexts are never put in one model call, so a model swapped in meanwhile cannot mix pools.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import numpy as np

__all__ = ["MicroBatcher"]


@dataclass
class _Pending:
    texts: list[str]
    future: asyncio.Future = field(repr=False)
    context: object = field(default=None, repr=False)
    tasks: list | None = field(default=None, repr=False)  # one task label per text, or None
    busy: bool = False  # it arrived while a model call ran (the batcher was under load)


class MicroBatcher:
    """Collect concurrent prediction requests and run them as one batch.

    Parameters
    ----------
    predict : callable
        ``predict(texts) -> (scores, costs)`` arrays of shape (n, n_llms); runs in a worker
        thread so the event loop stays free. Requests submitted with a ``context`` are
        predicted by ``predict(texts, context)``, one call per distinct context.
    max_batch : int
        Most texts per model call (a single request holding more runs alone).
    max_wait_ms : float
        Under load (the batch's first request arrived while another model call ran), how
        long the batch waits for more company; a request finding the batcher idle is run at
        once.

    Texts submitted with ``tasks`` (one task label per text) are predicted by
    ``predict(..., tasks=labels)``, the labels of the whole call in text order (None for the
    texts of requests that gave none); a call whose requests gave none is made without it.

    Example
    -------
    >>> b = MicroBatcher(lambda t: (np.zeros((len(t), 2)), None))  # doctest: +SKIP
    >>> scores, costs = await b.submit(["hello"])                   # doctest: +SKIP
    """

    def __init__(self, predict, max_batch: int = 256, max_wait_ms: float = 5.0):
        self.predict = predict
        self.max_batch = max_batch
        self.max_wait_ms = max_wait_ms
        self._queue: asyncio.Queue | None = None
        self._task: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.batches_run = 0
        self.texts_run = 0
        self.batches_split = 0   # failed multi-request calls, retried in halves
        self.requests_failed = 0  # requests whose own model call failed
        self.batches_waited = 0  # batches that waited for company (formed under load)
        self._calling = False  # a model call is running
        self._carry: _Pending | None = None  # taken from the queue, too big for the last batch

    async def start(self) -> None:
        """Start the batching task on the running event loop (again, if the loop changed:
        a test client may run each request in a fresh loop)."""
        loop = asyncio.get_running_loop()
        if self._task is None or self._loop is not loop or self._task.done():
            self._loop = loop
            self._queue = asyncio.Queue()
            self._carry = None
            self._task = loop.create_task(self._loop_body())

    async def stop(self) -> None:
        if self._task is not None and self._loop is asyncio.get_running_loop():
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        self._task = None

    async def submit(self, texts: list[str], context=None, tasks: list | None = None):
        """``(scores, costs)`` of ``texts``, predicted with ``context`` and ``tasks`` (see the
        class)."""
        if tasks is not None and len(tasks) != len(texts):
            raise ValueError(f"{len(tasks)} task labels for {len(texts)} texts")
        await self.start()
        fut = asyncio.get_running_loop().create_future()
        await self._queue.put(_Pending(list(texts), fut, context,
                                       None if tasks is None else list(tasks), busy=self._calling))
        return await fut

    async def _loop_body(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            first, self._carry = self._carry or await self._queue.get(), None
            batch, n = [first], len(first.texts)
            n = self._take_waiting(batch, n)
            # a request that found the batcher idle runs at once; one that arrived during a
            # model call (under load) waits up to max_wait_ms for more company
            if first.busy and n < self.max_batch and self.max_wait_ms > 0 and self._carry is None:
                self.batches_waited += 1
                deadline = loop.time() + self.max_wait_ms / 1000.0
                while n < self.max_batch and self._carry is None:
                    timeout = deadline - loop.time()
                    if timeout <= 0:
                        break
                    try:
                        nxt = await asyncio.wait_for(self._queue.get(), timeout)
                    except asyncio.TimeoutError:
                        break
                    n = self._take_waiting(batch, self._add(batch, n, nxt))
            groups: dict[int, list[_Pending]] = {}
            for p in batch:  # one model call per context (snapshot), never a mix
                groups.setdefault(id(p.context), []).append(p)
            self._calling = True
            try:
                for group in groups.values():
                    try:
                        await self._run(group)
                    except Exception as exc:  # noqa: BLE001 - a bug here never stops the batcher
                        for p in group:
                            if not p.future.done():
                                p.future.set_exception(exc)
            finally:
                self._calling = False

    def _add(self, batch: list[_Pending], n: int, nxt: _Pending) -> int:
        """Put ``nxt`` in ``batch`` if its texts fit within ``max_batch``, else keep it for
        the next batch; returns the batch's text count."""
        if n + len(nxt.texts) > self.max_batch:
            self._carry = nxt
            return n
        batch.append(nxt)
        return n + len(nxt.texts)

    def _take_waiting(self, batch: list[_Pending], n: int) -> int:
        """Move the requests already queued into ``batch`` while their texts fit within
        ``max_batch`` (a request that does not fit starts the next batch)."""
        while n < self.max_batch and self._carry is None and not self._queue.empty():
            n = self._add(batch, n, self._queue.get_nowait())
        return n

    async def _run(self, batch: list[_Pending]) -> None:
        """One model call for ``batch``; if it raises, the halves are run the same way, down
        to single requests: only a request that fails on its own gets the error (k bad
        requests among n cost about 2 k log2(n) extra calls, not n)."""
        batch = [p for p in batch if not p.future.done()]  # a client that went away
        if not batch:
            return
        texts = [t for p in batch for t in p.texts]
        context = batch[0].context
        args = (texts,) if context is None else (texts, context)
        kwargs = {}
        if any(p.tasks is not None for p in batch):
            kwargs["tasks"] = [t for p in batch for t in (p.tasks or [None] * len(p.texts))]
        try:
            scores, costs = await asyncio.to_thread(self.predict, *args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - isolate the failing request(s)
            if len(batch) == 1:
                self.requests_failed += 1
                if not batch[0].future.done():  # its client may have gone meanwhile
                    batch[0].future.set_exception(exc)
                return
            self.batches_split += 1
            mid = len(batch) // 2
            await self._run(batch[:mid])
            await self._run(batch[mid:])
            return
        self.batches_run += 1
        self.texts_run += len(texts)
        start = 0
        for p in batch:
            stop = start + len(p.texts)
            if not p.future.done():
                p.future.set_result((np.asarray(scores[start:stop]),
                                     None if costs is None else np.asarray(costs[start:stop])))
            start = stop
