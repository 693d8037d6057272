"""Embedding caches: a process-wide in-memory LRU (:mod:`~recsys_router.encoders.memory_cache`,
re-exported here) and a shared on-disk store.

The disk store lives under ``$RECSYS_ROUTER_CACHE`` (default ``~/.cache/recsys-router``),
in ``embeddings/<slug-of-identity>/``. Each write adds one *shard*: an uncompressed ``.npz``
holding ``keys`` (sha1 hex of the text) and ``vecs`` (float32 rows), written to a temporary
file in the same folder (``.tmp-HOST-PID-*``, removed by a later cache object's first write
on the same host once its process is gone, or on any host after a day) and moved into place
with :func:`os.replace`, so readers only ever see complete shards. Several processes may read and write the same folder at once: shards
never change after they appear, duplicated keys are harmless (the first one seen wins) and
a shard removed by another process's compaction triggers a rescan.

A service encodes one request at a time: a shard per request would be one file written (and
one folder listing) per served query. Inside :func:`memory_only` (the HTTP service wraps its
model calls in it) encoders use the bounded in-memory LRU alone, never reading or writing
the disk store; the offline paths (evaluate, fit, export) keep the disk cache.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import socket
import stat
import time
import uuid
import zipfile
from pathlib import Path
from typing import Sequence

import numpy as np

from ..atomic import atomic_write, pid_alive
# the in-memory side (re-exported: imported from here by callers and tests)
from .memory_cache import MEMORY_CACHE, MemoryLRU, disk_cache_enabled, memory_only

__all__ = ["cache_root", "text_key", "MemoryLRU", "DiskCache", "MEMORY_CACHE", "memory_only",
           "disk_cache_enabled", "host_tag"]

_SHARD_SUFFIX = ".npz"
#: temporaries of shard writes, ``.tmp-HOST-PID-HEX`` (HOST: :func:`host_tag`); the next write
#: on the same host removes those of its processes that no longer run. A cache folder may be
#: shared by hosts or containers (NFS, a mounted volume) whose process ids mean nothing here,
#: so another host's temporaries are removed only once older than :data:`_OLD_TMP_AGE_S`
#: (``identity.txt`` is written by :func:`recsys_router.atomic.atomic_write`, which tidies its own)
_TMP_RE = re.compile(r"^\.tmp-(?P<host>[0-9a-f]{12})-(?P<pid>\d+)-[0-9a-f]{32}$")
#: temporaries of earlier versions, ``.tmp-PID-HEX`` (no host tag) and ``.tmp-HEX`` (no pid):
#: whether their writer runs is unknown, so they are removed once older than
#: :data:`_OLD_TMP_AGE_S` (a shard takes seconds)
_OLD_TMP_RE = re.compile(r"^\.tmp-(?:\d+-)?[0-9a-f]{32}$")
_OLD_TMP_AGE_S = 24 * 3600
_HOST_TAG: list[str] = []
#: a shard is opened without following a symbolic link or waiting for a FIFO's writer
_NO_WAIT = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


def cache_root() -> Path:
    """Root cache folder: ``$RECSYS_ROUTER_CACHE`` or ``~/.cache/recsys-router``.

    Returns
    -------
    pathlib.Path

    Example
    -------
    >>> isinstance(cache_root(), Path)
    True
    """
    env = os.environ.get("RECSYS_ROUTER_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "recsys-router"


def text_key(text: str) -> str:
    """sha1 hex digest of a text (UTF-8), the per-text cache key. Never raises.

    A Python string may hold lone surrogates (e.g. ``"\\ud800"`` from a JSON escape or a
    file decoded with ``surrogateescape``), which strict UTF-8 refuses. They are encoded with
    ``surrogatepass`` (three bytes each, as in CESU-8): the key of every valid text is its
    plain UTF-8 digest, unchanged, and distinct strings keep distinct keys (a surrogate's
    bytes are not valid UTF-8, so no valid text shares them). Such a text has a key, but
    no encoder embeds it: :meth:`~recsys_router.encoders.base.Encoder.encode` refuses
    it with an error naming its position (and query id), and the HTTP services at validation
    (422).

    Parameters
    ----------
    text : str

    Returns
    -------
    str
        40 hex characters.

    Example
    -------
    >>> text_key("abc")
    'a9993e364706816aba3e25717850c26c9cd0d89d'
    >>> text_key("a\\ud800") == hashlib.sha1(b"a\\xed\\xa0\\x80").hexdigest()
    True
    """
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()


def _slug(identity: str) -> str:
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", identity)[:60].strip("_")
    return f"{readable}-{hashlib.sha1(identity.encode('utf-8')).hexdigest()[:16]}"


def _shard_arrays(path: Path, names: tuple[str, ...]):
    """The arrays ``names`` of the shard file ``path``; None when it vanished (merged by
    another process: rescan) or could not be opened just now (an ``OSError``: too many open
    files, a permission; a ``MemoryError``), kept for later; ``False`` when its content does
    not read as a shard: an empty or cut file
    (a power cut after the un-synced rename), a flipped byte, a ``.npy`` or a compressed member
    under a shard's name, or a header declaring more entries than its member holds (checked
    before anything is allocated). A shard never changes once it appears, so such a file is
    never read again and its vectors are recomputed; none stops an encode. Pickles are never
    loaded. Only a regular file is opened as a shard: a symbolic link, FIFO, socket or device
    under a shard's name (a FIFO blocked the open for ever) is ``False`` without being read."""
    try:
        fh = _open_regular(path)
        if fh is None:
            return False
        out = []
        with fh, zipfile.ZipFile(fh) as zf:   # the writer stores members uncompressed
            for name in names:
                info = zf.getinfo(name + ".npy")
                if info.compress_type != zipfile.ZIP_STORED:
                    return False
                with zf.open(info) as f:
                    version = np.lib.format.read_magic(f)
                    read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                                   else np.lib.format.read_array_header_2_0)
                    shape, _, dtype = read_header(f)
                if float(np.prod(shape, dtype=np.float64)) * dtype.itemsize > info.file_size:
                    return False
                with zf.open(info) as f:
                    out.append(np.lib.format.read_array(f, allow_pickle=False))
        return tuple(out)
    except (OSError, MemoryError):   # vanished, or a passing failure (too many open files,
        return None                   # a permission, an I/O error): skipped now, kept
    except Exception:  # noqa: BLE001 - the content: a damaged or foreign file is never read
        return False


def _open_regular(path: Path):
    """``path`` opened for binary reading when it is a regular file, else None (a symbolic
    link, FIFO, socket or device: the writer makes only regular files). The type is read with
    ``lstat`` first, and the open neither follows a link nor waits for a FIFO's writer, so one
    swapped in meanwhile is refused too. An ``OSError`` (vanished, a permission) propagates."""
    if not stat.S_ISREG(os.lstat(path).st_mode):
        return None
    try:
        fh = open(path, "rb", opener=lambda name, flags: os.open(name, flags | _NO_WAIT))
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENXIO):  # a link or socket swapped in meanwhile
            return None
        raise
    if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
        fh.close()
        return None
    return fh


class DiskCache:
    """Append-only sharded store of vectors for one encoder identity.

    Parameters
    ----------
    identity : str
        Encoder identity; each identity gets its own folder.
    dim : int
        Vector width; shards of another width are ignored.
    root : path, optional
        Cache root; default :func:`cache_root` at construction time.
    max_shards : int
        When a write leaves more than this many small shards, the small ones are merged into
        one; large shards (over ``small_bytes``) are never rewritten by a write, so a
        service that adds one text at a time does not copy the whole cache again and again.
    small_bytes : int
        Size under which a shard counts as small.

    Example
    -------
    >>> import tempfile
    >>> c = DiskCache("demo", 2, root=tempfile.mkdtemp())
    >>> c.put(["k"], np.ones((1, 2), np.float32)); c.get(["k", "x"])["k"].tolist()
    [1.0, 1.0]
    """

    def __init__(self, identity: str, dim: int, root: str | os.PathLike | None = None,
                 max_shards: int = 64, small_bytes: int = 4 * 2**20):
        self.identity = identity
        self.dim = int(dim)
        self.max_shards = max_shards
        self.small_bytes = small_bytes
        self.dir = Path(root if root is not None else cache_root()) / "embeddings" / _slug(identity)
        self._index: dict[str, tuple[str, int]] = {}
        self._seen: set[str] = set()
        self._tidied = False

    # ---------------------------------------------------------------- reading
    def _shards(self) -> list[Path]:
        if not self.dir.is_dir():
            return []
        return sorted(p for p in self.dir.iterdir() if p.name.endswith(_SHARD_SUFFIX))

    def _read(self, path: Path):
        """``(keys, vecs)`` of a shard; None when it vanished (merged by another process),
        ``False`` when it is not a shard of this cache: a damaged file (:func:`_shard_arrays`),
        keys not one string per row of ``vecs``, another width, or a non-finite vector."""
        arrays = _shard_arrays(path, ("keys", "vecs"))
        if not arrays:   # None (vanished: rescan) or False (not a shard: never read again)
            return arrays
        keys, vecs = arrays
        if (keys.ndim != 1 or keys.dtype.kind != "U" or vecs.ndim != 2 or vecs.dtype.kind != "f"
                or len(keys) != len(vecs) or vecs.shape[1] != self.dim
                or not np.isfinite(vecs).all()):
            return False
        return keys.tolist(), vecs

    def _read_vecs(self, path: Path, rows: list[int]):
        """The vectors of a shard :meth:`_scan` accepted, or None when it vanished or no longer
        reads as one (the rows asked for must exist and be finite); only ``vecs`` is read."""
        arrays = _shard_arrays(path, ("vecs",))
        if not arrays:
            return None
        vecs = arrays[0]
        if (vecs.ndim != 2 or vecs.dtype.kind != "f" or vecs.shape[1] != self.dim
                or max(rows) >= len(vecs) or not np.isfinite(vecs[rows]).all()):
            return None
        return vecs

    def _scan(self) -> None:
        for p in self._shards():
            if p.name in self._seen:
                continue
            shard = self._read(p)
            if shard is None:
                continue  # vanished (compacted by another process) or unreadable: skip
            self._seen.add(p.name)
            if shard is False:
                continue  # malformed, another width or non-finite: never served
            for r, k in enumerate(shard[0]):
                self._index.setdefault(k, (p.name, r))

    def _reset(self) -> None:
        """Drop the index (a shard vanished, e.g. merged by another process): rescan next."""
        self._seen.clear()
        self._index.clear()

    def get(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """Vectors for those ``keys`` that are stored (missing keys are left out)."""
        out: dict[str, np.ndarray] = {}
        for attempt in range(3):
            self._scan()
            by_shard: dict[str, list[tuple[str, int]]] = {}
            for k in keys:
                if k not in out and k in self._index:
                    shard, row = self._index[k]
                    by_shard.setdefault(shard, []).append((k, row))
            lost = False
            for shard, items in by_shard.items():
                vecs = self._read_vecs(self.dir / shard, [row for _, row in items])
                if vecs is None:  # vanished, or replaced by something that is not a shard
                    self._reset()
                    lost = True
                    continue
                for k, row in items:  # a copy: a row view would keep the whole shard alive
                    out[k] = np.array(vecs[row], dtype=np.float32)
            if not lost:
                break
        return out

    # ---------------------------------------------------------------- writing
    def _write_shard(self, keys: Sequence[str], vecs: np.ndarray) -> str:
        self.dir.mkdir(parents=True, exist_ok=True)
        if not self._tidied:  # once per cache object: a write lists the folder once, not twice
            self._tidy()
        ident_file = self.dir / "identity.txt"
        if not ident_file.exists():
            with atomic_write(ident_file) as tmp:
                tmp.write_bytes((self.identity + "\n").encode("utf-8"))
        name = f"{time.time_ns():020d}-{os.getpid()}-{uuid.uuid4().hex[:8]}{_SHARD_SUFFIX}"
        tmp = _temp_name(self.dir)
        try:
            with open(tmp, "wb") as f:
                np.savez(f, keys=np.asarray(list(keys), dtype="U40"),
                         vecs=np.ascontiguousarray(vecs, dtype=np.float32))
            # the rename makes the shard appear whole or not at all; no fsync: a cache entry
            # lost in a power cut is only recomputed
            os.replace(tmp, self.dir / name)
        finally:
            tmp.unlink(missing_ok=True)
        return name

    def _tidy(self) -> None:
        """Remove the temporaries that writers killed mid-shard left: those of this host's
        processes that are gone, and any other (another host's, an older version's) after a
        day."""
        now, here = time.time(), host_tag()
        for p in self.dir.iterdir():
            m = _TMP_RE.match(p.name)
            try:
                if m and m.group("host") == here:  # ours: gone with its process
                    if not pid_alive(int(m.group("pid"))) and not p.is_dir():
                        p.unlink()
                elif ((m or _OLD_TMP_RE.match(p.name)) and p.is_file() and not p.is_symlink()
                        and now - p.stat().st_mtime > _OLD_TMP_AGE_S):
                    p.unlink()  # another host's, or an earlier version's: only when very old
            except FileNotFoundError:
                continue  # another process tidied it first
        self._tidied = True

    def put(self, keys: Sequence[str], vecs: np.ndarray) -> None:
        """Store ``vecs[i]`` under ``keys[i]`` as one new shard (atomic)."""
        vecs = np.asarray(vecs, dtype=np.float32)
        if len(keys) == 0:
            return
        if vecs.shape != (len(keys), self.dim):
            raise ValueError(f"expected vectors of shape ({len(keys)}, {self.dim}), got {vecs.shape}")
        name = self._write_shard(keys, vecs)
        self._seen.add(name)
        for r, k in enumerate(keys):
            self._index.setdefault(k, (name, r))
        if len(self._small_shards()) > self.max_shards:
            self.compact(small_only=True)

    def _small_shards(self) -> list[Path]:
        out = []
        for p in self._shards():
            try:
                if p.stat().st_size < self.small_bytes:
                    out.append(p)
            except FileNotFoundError:
                continue
        return out

    def compact(self, small_only: bool = False) -> None:
        """Merge the current shards (or only the small ones) into one; safe while other
        processes read or write."""
        shards = self._small_shards() if small_only else self._shards()
        if len(shards) <= 1:
            return
        keys: list[str] = []
        vecs: list[np.ndarray] = []
        seen: set[str] = set()
        merged = []
        for p in shards:
            read = self._read(p)
            if read is None:
                continue
            merged.append(p)
            if read is False:
                continue  # not a shard of this cache: dropped with the merged ones
            k, v = read
            keep = [i for i, key in enumerate(k) if key not in seen]
            seen.update(k)
            keys += [k[i] for i in keep]
            vecs.append(v[keep])
        if not keys:
            return
        self._write_shard(keys, np.concatenate(vecs))
        for p in merged:
            try:
                p.unlink()
            except FileNotFoundError:
                pass
        self._reset()

    def __len__(self) -> int:
        self._scan()
        return len(self._index)


def host_tag() -> str:
    """12 hex characters naming this host and process-id namespace (a container has its own):
    a temporary's process id is only checked where this tag is the same.

    Example
    -------
    >>> len(host_tag()), host_tag() == host_tag()
    (12, True)
    """
    if not _HOST_TAG:
        try:
            ns = os.readlink("/proc/self/ns/pid")
        except OSError:  # not Linux: the host name alone
            ns = ""
        raw = f"{socket.gethostname()}\0{ns}".encode("utf-8", "surrogatepass")
        _HOST_TAG.append(hashlib.sha1(raw).hexdigest()[:12])
    return _HOST_TAG[0]


def _temp_name(folder: Path) -> Path:
    """A temporary in a cache folder, tagged with this host and process (see :data:`_TMP_RE`)."""
    return folder / f".tmp-{host_tag()}-{os.getpid()}-{uuid.uuid4().hex}"


