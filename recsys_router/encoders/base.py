"""The :class:`Encoder` base class: text -> float32 vectors with transparent caching."""

from __future__ import annotations

import threading
import warnings
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..errors import DataValidationError
from .cache import MEMORY_CACHE, DiskCache, cache_root, disk_cache_enabled, text_key

if TYPE_CHECKING:  # pragma: no cover
    from ..data import RoutingData

__all__ = ["Encoder", "progress_bars"]

_FLUSH_EVERY = 16384  # write a disk shard after this many new vectors
_DISKS: dict[tuple, DiskCache] = {}  # one per (identity, dim, folder): its shard index is kept
_DISKS_LOCK = threading.Lock()
_PROGRESS: ContextVar[bool] = ContextVar("recsys_router_encoder_progress", default=True)


@contextmanager
def progress_bars(enabled: bool):
    """Within this block, whether :meth:`Encoder.encode` shows its tqdm bar when not told
    (``show_progress=None``); ``evaluate(progress=False)`` and the command line's
    ``--no-progress`` turn it off.

    The setting is a context variable: it holds in this thread and in asyncio tasks created
    inside the block (they copy the context), but a ``threading.Thread`` or a
    ``ThreadPoolExecutor`` worker starts from the default (bars on); run its function with
    ``contextvars.copy_context().run`` to carry the setting over.

    Example
    -------
    >>> with progress_bars(False):
    ...     _PROGRESS.get()
    False
    """
    token = _PROGRESS.set(bool(enabled))
    try:
        yield
    finally:
        _PROGRESS.reset(token)


def _disk_cache(identity: str, dim: int, root) -> DiskCache:
    """The process's :class:`DiskCache` of an identity: its index of shard keys is read once and
    then only new shards are scanned (a fresh one per call re-read every shard, ~50 ms per
    served query once a cache holds a few dozen shards)."""
    folder = str(Path(root).expanduser() if root is not None else cache_root())
    key = (identity, int(dim), folder)
    with _DISKS_LOCK:
        if key not in _DISKS:
            if len(_DISKS) >= 64:  # many identities/folders (tests): start over
                _DISKS.clear()
            _DISKS[key] = DiskCache(identity, dim, root=folder)
        return _DISKS[key]


_WARNED: set[str] = set()  # cache folders already warned about (once per process each)


def _cache_failed(disk: DiskCache, err: OSError) -> None:
    """Warn, once per cache folder, that the disk cache cannot be used: it only saves work, so
    the call goes on with the vectors it computes."""
    folder = str(disk.dir.parent.parent)
    with _DISKS_LOCK:
        if folder in _WARNED:
            return
        _WARNED.add(folder)
    warnings.warn(f"embedding cache {folder!r} cannot be used ({type(err).__name__}: "
                  f"{err.strerror or err}); vectors are computed but not cached: set "
                  f"$RECSYS_ROUTER_CACHE (or the encoder's cache_dir) to a writable folder",
                  RuntimeWarning, stacklevel=4)


def _store(disk: DiskCache, keys: list[str], vecs: np.ndarray) -> bool:
    """``disk.put``; False (and a warning) when the cache cannot be written."""
    try:
        disk.put(keys, vecs)
    except OSError as err:  # read-only or missing folder, a temporary removed by another host
        _cache_failed(disk, err)
        return False
    return True


class Encoder:
    """Base class of all query encoders.

    Subclasses set ``identity`` (a stable string naming the encoder and every setting that
    changes its output; the cache key) and ``dim``, and implement ``_encode_batch(texts)``
    returning a float32 array of shape ``(len(texts), dim)``. :meth:`encode` adds
    de-duplication, an in-memory LRU, an on-disk cache and a progress bar.

    Parameters
    ----------
    cache : bool, optional
        Use the in-memory and on-disk caches. ``None`` takes the class default
        (on for neural encoders, off for the cheap hashing/TF-IDF ones).
    cache_dir : path, optional
        Cache root; default ``$RECSYS_ROUTER_CACHE`` or ``~/.cache/recsys-router``.
    batch_size : int
        Texts per model call.

    Attributes
    ----------
    identity : str
    dim : int
    needs_fit : bool
        True when :meth:`fit` must be called before :meth:`encode`.
    needs_text : bool
        False for encoders keyed by query id (precomputed embeddings).
    batch_dependent : bool
        True when a text's vector depends on the other texts of its model call (e.g. int8
        activation scales shared by a batch). Such an encoder never caches (a cached vector
        would depend on what was encoded before, in this process or another), and
        :meth:`encode` runs the distinct texts of a call in one canonical order (longest
        first, ties by text), so its result depends on the set of distinct texts of the call
        alone: not on their order, repeats, cache contents or history.

    Example
    -------
    >>> from recsys_router.encoders import get_encoder
    >>> get_encoder("hashing", dim=8).encode(["hello world"]).shape
    (1, 8)
    """

    identity: str = "encoder"
    dim: int = 0
    needs_fit: bool = False
    needs_text: bool = True
    batch_dependent: bool = False
    cache_by_default: bool = False
    #: encode the texts of one call in order of length (less padding for transformers)
    sort_by_length: bool = False

    def __init__(self, *, cache: bool | None = None, cache_dir=None, batch_size: int = 64):
        self.cache = cache
        self.cache_dir = cache_dir
        self.batch_size = batch_size

    # ---------------------------------------------------------------- API
    @property
    def use_cache(self) -> bool:
        """Whether :meth:`encode` reads and writes the caches (never when ``batch_dependent``)."""
        if self.batch_dependent:
            return False
        return self.cache_by_default if self.cache is None else bool(self.cache)

    def fit(self, texts: Sequence[str]) -> "Encoder":
        """Learn encoder state from texts; a no-op for stateless encoders. Returns self."""
        return self

    def encode(self, texts: Sequence[str], query_ids: Sequence[str] | None = None,
               batch_size: int | None = None, show_progress: bool | None = None) -> np.ndarray:
        """Encode texts into a float32 array of shape ``(len(texts), dim)``.

        Parameters
        ----------
        texts : sequence of str
            Query texts. ``None`` entries, and texts that cannot be UTF-8 encoded (a lone
            surrogate), are an error naming the position (and query id).
        query_ids : sequence of str, optional
            Ids matching ``texts``; used in error messages, and as the lookup key by
            encoders with ``needs_text = False``.
        batch_size : int, optional
            Overrides the encoder's ``batch_size``.
        show_progress : bool, optional
            Force the tqdm bar on/off; by default shown when over 1,000 texts (and more than
            four batches) must be encoded, unless inside ``progress_bars(False)``.

        Returns
        -------
        numpy.ndarray
            float32, shape ``(n, dim)``; identical texts get identical rows.
        """
        texts = self._check_texts(texts, query_ids)
        n = len(texts)
        if n == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        bs = int(batch_size or self.batch_size)
        if self.batch_dependent:  # distinct texts, canonical order, no cache
            distinct = sorted(set(texts), key=lambda t: (-len(t), t))
            row = {t: i for i, t in enumerate(distinct)}
            vecs = self._compute(distinct, bs, show_progress, _sorted=True)
            return vecs[[row[t] for t in texts]]
        if not self.use_cache:
            return self._compute(texts, bs, show_progress)
        ident, dim = self.identity, self.dim
        keys = [text_key(t) for t in texts]
        first: dict[str, int] = {}
        for i, k in enumerate(keys):
            first.setdefault(k, i)
        got: dict[str, np.ndarray] = {}
        for k in first:
            v = MEMORY_CACHE.get((ident, k))
            if v is not None:
                got[k] = v
        need = [k for k in first if k not in got]
        disk = _disk_cache(ident, dim, self.cache_dir) if need and disk_cache_enabled() else None
        if need and disk is not None:
            try:
                found = disk.get(need)
            except OSError as err:  # an unreadable folder: a miss, and no writes either
                _cache_failed(disk, err)
                found, disk = {}, None
            for k, v in found.items():
                got[k] = v
                MEMORY_CACHE.put((ident, k), v)
            need = [k for k in need if k not in found]
        if need:
            new = self._compute([texts[first[k]] for k in need], bs, show_progress, disk=disk,
                                keys=need)
            for k, v in zip(need, new):
                got[k] = v
                MEMORY_CACHE.put((ident, k), v)
        out = np.empty((n, dim), dtype=np.float32)
        for i, k in enumerate(keys):
            out[i] = got[k]
        return out

    def encode_data(self, data: "RoutingData", **kwargs) -> np.ndarray:
        """Encode every query of a :class:`~recsys_router.data.RoutingData` (in row order).

        Raises
        ------
        DataValidationError
            When the encoder needs texts and some queries have none (names the dataset).
        """
        ids = data.query_ids
        if self.needs_text:
            texts = data.texts
            missing = [i for i, t in enumerate(texts) if t is None or (isinstance(t, float)
                                                                        and np.isnan(t))]
            if missing:
                i = missing[0]
                raise DataValidationError(
                    f"dataset {data.name!r} has no query text for {len(missing)} of "
                    f"{len(texts)} queries (first: {ids[i]!r}); encoder {self.identity!r} needs "
                    f"texts: use a dataset with a 'text' column, 'precomputed:<file>' "
                    f"embeddings, or a router that does not read text",
                    source=data.source or data.name, row=i, column="text")
            return self.encode(texts, ids, **kwargs)
        return self.encode([""] * len(ids), ids, **kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.identity!r}, dim={self.dim})"

    # ---------------------------------------------------------------- internals
    def _encode_batch(self, texts: list[str]) -> np.ndarray:  # pragma: no cover - abstract
        raise TypeError(f"{type(self).__name__} does not implement _encode_batch")

    def _check_texts(self, texts, query_ids) -> list[str]:
        if isinstance(texts, str):
            raise TypeError("encode expects a sequence of texts, got a single str; wrap it in a list")
        texts = list(texts)
        if query_ids is not None and len(query_ids) != len(texts):
            raise ValueError(f"{len(texts)} texts but {len(query_ids)} query_ids")
        if self.needs_text:
            for i, t in enumerate(texts):
                if not isinstance(t, str):
                    who = f" (query {query_ids[i]!r})" if query_ids is not None else ""
                    raise DataValidationError(f"text at position {i}{who} is {t!r}; expected a "
                                              f"string", row=i, column="text")
                if t.isascii():
                    continue
                try:  # a lone surrogate (a "\ud800" JSON escape): no tokenizer or hash takes it
                    t.encode("utf-8")
                except UnicodeEncodeError as err:
                    who = f" (query {query_ids[i]!r})" if query_ids is not None else ""
                    raise DataValidationError(
                        f"text at position {i}{who} cannot be UTF-8 encoded: lone surrogate "
                        f"U+{ord(t[err.start]):04X} at character {err.start}; expected valid "
                        f"Unicode text", row=i, column="text") from None
        return texts

    def _compute(self, texts: list[str], batch_size: int, show_progress, *,
                 disk: DiskCache | None = None, keys: list[str] | None = None,
                 _sorted: bool = False) -> np.ndarray:
        n = len(texts)
        if self.sort_by_length and not _sorted and n > 1:
            order = np.argsort([-len(t) for t in texts], kind="stable")
            if np.any(order != np.arange(n)):
                sorted_out = self._compute([texts[i] for i in order], batch_size, show_progress,
                                           disk=disk,
                                           keys=None if keys is None else [keys[i] for i in order],
                                           _sorted=True)
                out = np.empty_like(sorted_out)
                out[order] = sorted_out
                return out
        chunk = max(1, batch_size)
        show = (n > 1000 and n > 4 * chunk and _PROGRESS.get()) if show_progress is None \
            else bool(show_progress)
        out = np.empty((n, self.dim), dtype=np.float32)
        pending = done = 0  # rows [pending, done) are encoded but not yet on disk
        bar = None
        if show:
            from tqdm.auto import tqdm
            bar = tqdm(total=n, desc=f"encoding ({self.identity[:40]})", unit="text")
        try:
            for s in range(0, n, chunk):
                e = min(n, s + chunk)
                vec = np.asarray(self._encode_batch(texts[s:e]), dtype=np.float32)
                if vec.shape != (e - s, self.dim):
                    raise RuntimeError(f"{type(self).__name__} returned shape {vec.shape}, "
                                       f"expected {(e - s, self.dim)}")
                out[s:e] = vec
                done = e
                if disk is not None and done - pending >= _FLUSH_EVERY:
                    if not _store(disk, keys[pending:done], out[pending:done]):
                        disk = None  # warned: the rest is computed without the cache
                    pending = done
                if bar is not None:
                    bar.update(e - s)
        finally:
            if bar is not None:
                bar.close()
            if disk is not None and done > pending:  # keep finished work even on interrupt
                _store(disk, keys[pending:done], out[pending:done])
        return out
