"""One computation at a time of a value that depends on the database's state, shared by callers.

The voting page's statistics are a function of the stored records, and records are only
appended, so ``(record count, last record id)`` names the state they were computed on.
:class:`SingleFlight` keeps the last result with its state and hands it back while the
state is unchanged. When the state has changed it queues one computation on its own worker
thread; every caller that asks before that computation starts, or while it runs on the
state the caller saw, gets the same :class:`concurrent.futures.Future`. At most one
computation runs and at most one more waits, however many callers there are, and callers
hold no thread while they wait (the page awaits the future on its event loop).
"""

from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Hashable

__all__ = ["SingleFlight"]


def _uncancellable() -> Future:
    """A future that one caller giving up (a closed connection) cannot cancel for the others."""
    fut: Future = Future()
    fut.set_running_or_notify_cancel()
    return fut


class SingleFlight:
    """Cache of ``compute(state)`` keyed by ``state()``, computed at most once at a time.

    Parameters
    ----------
    state : callable () -> hashable
        The current state (cheap: it is read on every call).
    compute : callable (state) -> value
        The expensive computation on that state; it must read the state it is given, not a newer one.
    executor : concurrent.futures.Executor, optional
        Where computations run (default: a private one-thread pool, so they run one at a time).

    Example
    -------
    >>> calls = []
    >>> sf = SingleFlight(lambda: 1, lambda s: calls.append(s) or s * 10)
    >>> sf.get().result(), sf.get().result(), calls
    (10, 10, [1])
    """

    def __init__(self, state: Callable[[], Hashable], compute: Callable[[Hashable], Any],
                 executor: ThreadPoolExecutor | None = None):
        self._state, self._compute = state, compute
        self._executor = executor or ThreadPoolExecutor(max_workers=1, thread_name_prefix="judge-stats")
        self._lock = threading.Lock()
        self._cache: tuple[Hashable, Any] | None = None
        self._running: tuple[Hashable, Future] | None = None
        self._queued: Future | None = None

    def get(self) -> Future:
        """A future of the value on the current state (already done when it is cached)."""
        key = self._state()
        with self._lock:
            if self._cache is not None and self._cache[0] == key:
                done = Future()
                done.set_result(self._cache[1])
                return done
            if self._running is not None and self._running[0] == key:
                return self._running[1]
            if self._queued is None:  # it reads the state when it starts: this caller's or newer
                self._queued = _uncancellable()
                self._executor.submit(self._run, self._queued)
            return self._queued

    def _run(self, fut: Future) -> None:
        with self._lock:
            self._queued = None
            try:
                key = self._state()
            except BaseException as exc:  # the database cannot be read: every waiter is told
                fut.set_exception(exc)
                return
            self._running = (key, fut)
        try:
            value = self._compute(key)
        except BaseException as exc:  # every waiter gets it; the next call tries again
            with self._lock:
                self._running = None
            fut.set_exception(exc)
            return
        with self._lock:
            self._running = None
            self._cache = (key, value)
        fut.set_result(value)
