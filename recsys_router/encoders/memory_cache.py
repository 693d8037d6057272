"""The in-memory side of the embedding caches: a process-wide, thread-safe LRU of vectors
(:data:`MEMORY_CACHE`) and :func:`memory_only`, inside which encoders use it alone (the HTTP
service's model calls: no disk read, no shard written). The shared on-disk store is
:mod:`recsys_router.encoders.cache`, which re-exports these names.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from contextlib import contextmanager
from contextvars import ContextVar

import numpy as np

__all__ = ["MemoryLRU", "MEMORY_CACHE", "memory_only", "disk_cache_enabled"]

_DISK_ON: ContextVar[bool] = ContextVar("recsys_router_disk_cache", default=True)


@contextmanager
def memory_only():
    """Within this block, encoders cache in memory only: no disk read, no shard written.
    Context-local: it holds in this thread and in asyncio tasks created inside the block, while
    other threads, including ones started inside it, keep the disk cache (unless run with
    ``contextvars.copy_context().run``).

    Example
    -------
    >>> with memory_only():
    ...     disk_cache_enabled()
    False
    >>> disk_cache_enabled()
    True
    """
    token = _DISK_ON.set(False)
    try:
        yield
    finally:
        _DISK_ON.reset(token)


def disk_cache_enabled() -> bool:
    """False inside :func:`memory_only`."""
    return _DISK_ON.get()


class MemoryLRU:
    """Thread-safe least-recently-used map of ``(identity, text_key) -> vector``.

    Parameters
    ----------
    max_bytes : int
        Evict the least recently used vectors beyond this many bytes: each entry counts its
        vector's bytes plus ``entry_overhead`` (key strings, dict slot, array header).
    entry_overhead : int
        Bytes charged per entry besides the vector data.

    Example
    -------
    >>> lru = MemoryLRU(max_bytes=1024)
    >>> lru.put(("e", "k1"), np.zeros(2, np.float32)); lru.get(("e", "k1")).shape
    (2,)
    """

    def __init__(self, max_bytes: int = 256 * 2**20, entry_overhead: int = 256):
        self.max_bytes = max_bytes
        self.entry_overhead = entry_overhead
        self._data: OrderedDict = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key):
        with self._lock:
            vec = self._data.get(key)
            if vec is not None:
                self._data.move_to_end(key)
            return vec

    def put(self, key, vec: np.ndarray) -> None:
        """Store ``vec`` under ``key``. A view (a row of a batch or of a disk shard) is
        copied first: the entry is charged its own bytes, so it must not keep a larger
        array alive."""
        if vec.base is not None or not vec.flags.owndata:
            vec = vec.copy()
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._bytes -= old.nbytes + self.entry_overhead
            self._data[key] = vec
            self._bytes += vec.nbytes + self.entry_overhead
            while self._bytes > self.max_bytes and self._data:
                _, v = self._data.popitem(last=False)
                self._bytes -= v.nbytes + self.entry_overhead

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._bytes = 0

    @property
    def nbytes(self) -> int:
        """Bytes charged for the entries held (at most ``max_bytes``)."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._data)


MEMORY_CACHE = MemoryLRU()
