"""Bounded readers for untrusted artifact files: capped JSON and a lazy ``.npz`` reader.

* :func:`read_json` refuses symbolic links and other non-regular files, files over a size
  cap, nesting deeper than a depth cap (measured on the raw text before parsing, in linear
  time, so a deep document cannot exhaust the stack), duplicate keys, the
  non-standard constants ``NaN``/``Infinity`` and numbers that overflow a float (``1e400``);
  :func:`parse_json` can also cap the items (counted in the same scan, so a text of ``{},``
  cannot grow 27x in memory).
* :class:`NpzReader` reads only the members it is asked for, from an uncompressed zip
  (``np.savez``): it parses each ``.npy`` header itself, refuses object, string and
  structured dtypes, checks the stored size against dtype x shape before allocating, and
  reads exactly that many bytes. A compressed member (a possible zip bomb) is refused.

Example
-------
>>> import io, json, tempfile, os
>>> p = os.path.join(tempfile.mkdtemp(), "x.json")
>>> _ = open(p, "w").write(json.dumps({"a": [1, 2]}))
>>> read_json(p, max_bytes=100, max_depth=3)
{'a': [1, 2]}
"""

from __future__ import annotations

import ast
import hashlib
import io
import json
import math
import os
import stat
import sys
import zipfile
from pathlib import Path

import numpy as np

from ..json_keys import unique_keys
from ..state import ARRAY_DTYPES
from .json_scan import json_depth, json_scan

__all__ = ["LimitError", "MAX_DIM", "shape_span", "read_json", "parse_json", "read_bytes",
           "sha256_file", "json_depth", "json_scan", "NpzReader", "non_native"]

_MAX_HEADER = 4096
#: largest array dimension a header or manifest may declare: more than any machine holds,
#: and small enough that a product of 8 of them prints (Python refuses to format an int
#: of more than 4,300 digits)
MAX_DIM = 1 << 62


def shape_span(shape, itemsize: int) -> int:
    """Bytes an array of ``shape`` would take with its zero sizes read as 1: numpy refuses
    a shape whose span exceeds its index range even when the array is empty (``(2**62, 2,
    0)``), so a loader bounds this by :data:`MAX_DIM`, not only the true size."""
    return math.prod(d or 1 for d in shape) * itemsize


class LimitError(ValueError):
    """A file breaks a size, depth or format limit (the message names the file)."""


def _no_constants(name: str):
    raise ValueError(f"non-standard JSON constant {name}")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):   # 1e400: valid JSON that parses to infinity
        raise ValueError(f"number {text[:40]} is beyond the range of a float")
    return value


def _open_regular(path: Path) -> tuple[int, os.stat_result]:
    """A read-only descriptor of a regular file that is not a symbolic link, and its stat."""
    if path.is_symlink():
        raise LimitError(f"{path}: not a regular file (a symbolic link)")
    # O_NOFOLLOW: a link swapped in after the check is refused too; O_NONBLOCK: opening a
    # FIFO (or a device) returns at once instead of waiting for a writer, and fstat refuses it
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        raise LimitError(f"{path}: not a readable regular file ({err.strerror})") from err
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise LimitError(f"{path}: not a regular file")
    if hasattr(os, "set_blocking"):
        os.set_blocking(fd, True)
    return fd, st


def read_bytes(path, *, max_bytes: int) -> bytes:
    """The content of a regular file (never through a symbolic link), read once and whole.

    Whoever checks these bytes (a checksum) and parses them sees the same content, even if
    the file is replaced or rewritten meanwhile.

    Raises
    ------
    LimitError
        Not a regular file (a symbolic link included) or more than ``max_bytes`` bytes; the
        message names the file.
    """
    path = Path(path)
    fd, st = _open_regular(path)
    with open(fd, "rb") as fh:
        if st.st_size > max_bytes:
            raise LimitError(f"{path}: {st.st_size:,} bytes, more than the {max_bytes:,} allowed")
        raw = fh.read(st.st_size + 1)  # never max_bytes: read(n) allocates n bytes up front
    if len(raw) > max_bytes:
        raise LimitError(f"{path}: more than the {max_bytes:,} bytes allowed")
    return raw


def sha256_file(path, *, max_bytes: int) -> str:
    """Hex SHA-256 of a regular file (never through a symbolic link), read in 1 MiB chunks
    and at most ``max_bytes`` of it (more is a :class:`LimitError`)."""
    path = Path(path)
    fd, st = _open_regular(path)
    h, seen = hashlib.sha256(), 0
    with open(fd, "rb") as fh:
        if st.st_size > max_bytes:
            raise LimitError(f"{path}: {st.st_size:,} bytes, more than the {max_bytes:,} allowed")
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            seen += len(chunk)
            if seen > max_bytes:
                raise LimitError(f"{path}: more than the {max_bytes:,} bytes allowed")
            h.update(chunk)
    return h.hexdigest()


def read_json(path, *, max_bytes: int, max_depth: int):
    """Parse a JSON file within limits.

    Raises
    ------
    LimitError
        Not a regular file (a symbolic link included), too large, too deep, not UTF-8, not
        valid JSON (duplicate keys, NaN/Infinity and numbers out of the float range such as
        ``1e400`` included); the message names the file.
    """
    return parse_json(read_bytes(path, max_bytes=max_bytes), Path(path), max_depth=max_depth)


def parse_json(raw: bytes, where, *, max_depth: int, max_items: int | None = None):
    """Parse JSON text already read (see :func:`read_json`); ``where`` names it in errors.

    Depth and ``max_items`` (the ``{ [ , :`` outside strings, see :func:`json_scan`) are
    checked on the raw text first, so memory stays within a small multiple of the text
    plus about 70 bytes per item."""
    depth, items = json_scan(raw)
    if depth > max_depth:
        raise LimitError(f"{where}: JSON nested {depth} deep, more than the {max_depth} allowed")
    if max_items is not None and items > max_items:
        raise LimitError(f"{where}: {items:,} JSON items (brackets, commas and colons), more "
                         f"than the {max_items:,} allowed")
    try:
        text = raw.decode("utf-8")
        return json.loads(text, parse_constant=_no_constants, parse_float=_finite_float,
                          object_pairs_hook=unique_keys)
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise LimitError(f"{where}: not valid JSON ({str(err).splitlines()[0][:200]})") from err


def _parse_header(raw: bytes, where: str) -> tuple[np.dtype, tuple, bool, int]:
    """``(dtype, shape, fortran_order, header_length)`` of a ``.npy`` byte prefix."""
    if raw[:6] != b"\x93NUMPY" or len(raw) < 10:
        raise LimitError(f"{where}: not a .npy array")
    major = raw[6]
    if major == 1:
        hlen, start = int.from_bytes(raw[8:10], "little"), 10
    elif major in (2, 3):
        hlen, start = int.from_bytes(raw[8:12], "little"), 12
    else:
        raise LimitError(f"{where}: unknown .npy version {major}")
    if start + hlen > len(raw) or hlen > _MAX_HEADER:
        raise LimitError(f"{where}: .npy header too long ({hlen} bytes)")
    try:
        text = raw[start:start + hlen].decode("latin1")
        head = ast.literal_eval(text)  # literals only: nothing can be called
    except (ValueError, SyntaxError, MemoryError, RecursionError) as err:
        raise LimitError(f"{where}: unreadable .npy header ({err})") from err
    if not isinstance(head, dict) or set(head) != {"descr", "fortran_order", "shape"}:
        raise LimitError(f"{where}: malformed .npy header")
    descr, shape, fortran = head["descr"], head["shape"], head["fortran_order"]
    if not isinstance(descr, str) or not isinstance(fortran, bool) or not isinstance(shape, tuple) \
            or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape) \
            or len(shape) > 8:
        raise LimitError(f"{where}: malformed .npy header (descr, shape or order)")
    if any(d > MAX_DIM for d in shape):
        raise LimitError(f"{where}: .npy header declares a dimension over 2**62")
    try:
        dtype = np.dtype(descr)
    except (TypeError, ValueError) as err:
        raise LimitError(f"{where}: unknown dtype {descr!r}") from err
    if dtype.hasobject or dtype.name not in ARRAY_DTYPES:
        raise LimitError(f"{where}: dtype {descr!r} is not allowed (object, string and structured "
                         "arrays are refused)")
    if not dtype.isnative:
        raise LimitError(f"{where}: dtype {descr!r} is {non_native(dtype)}")
    if shape_span(shape, dtype.itemsize) > MAX_DIM:
        raise LimitError(f"{where}: .npy header declares shape {shape}, whose sizes other than 0 "
                         f"times the {dtype.itemsize}-byte item exceed 2**62 (numpy cannot index it)")
    return dtype, shape, fortran, start + hlen


def non_native(dtype: np.dtype) -> str:
    """Why a dtype whose byte order is not this machine's is refused (artifacts store arrays
    in native order; torch and the checks after loading assume it)."""
    return (f"stored in {'big' if dtype.byteorder == '>' else 'little'}-endian byte order, not "
            f"this machine's ({sys.byteorder}-endian); artifacts store arrays in "
            "native byte order")


#: what zipfile raises on a damaged archive (EOFError: a member that the directory says is
#: longer than the bytes the file holds; RuntimeError and NotImplementedError: an encrypted
#: or patched member, which :data:`_BAD_FLAGS` refuses first)
_ZIP_ERRORS = (zipfile.BadZipFile, OSError, ValueError, EOFError, RuntimeError,
               NotImplementedError)
#: zip general-purpose flag bits np.savez never sets: 0 (encrypted), 5 (patched data) and
#: 6 (strong encryption)
_BAD_FLAGS = 0x1 | 0x20 | 0x40


def _why(err: Exception) -> str:
    if isinstance(err, EOFError):
        return "truncated: the archive ends inside it"
    return str(err)[:200] or type(err).__name__


class NpzReader:
    """Lazy, bounded reader of an uncompressed ``.npz`` file.

    Parameters
    ----------
    path : path
        The ``.npz`` file (read from disk unless ``data`` is given; errors name it).
    max_members : int
        Most members the archive may list.
    data : bytes, optional
        The file's content, already read (and checked) by the caller: the archive is parsed
        from these bytes, so what was checked is exactly what is read.

    Example
    -------
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "w.npz")
    >>> np.savez(p, a=np.arange(3))
    >>> with NpzReader(p) as z:
    ...     z.headers()["a"][1], z.read("a", 1 << 20).tolist()
    ((3,), [0, 1, 2])
    """

    def __init__(self, path, max_members: int = 10_000, *, data: bytes | None = None):
        self.path = Path(path)
        self._data = None if data is None else memoryview(data)
        try:
            self._zip = zipfile.ZipFile(self.path if data is None else io.BytesIO(data))
        except _ZIP_ERRORS as err:
            raise LimitError(f"{self.path}: not a readable .npz archive ({_why(err)})") from err
        infos = self._zip.infolist()
        if len(infos) > max_members:
            self._zip.close()
            raise LimitError(f"{self.path}: {len(infos)} members, more than {max_members}")
        self._infos = {}
        for info in infos:
            if not info.filename.endswith(".npy"):
                self._zip.close()
                raise LimitError(f"{self.path}: unexpected member {info.filename!r} (artifacts "
                                 "hold only .npy arrays)")
            if info.filename[:-4] in self._infos:  # keys are stored without ".npy"
                self._zip.close()
                raise LimitError(f"{self.path}: repeated member {info.filename!r}: the archive "
                                 "holds two arrays of that name, so readers could disagree on it")
            self._infos[info.filename[:-4]] = info
        self._headers: dict = {}

    def __enter__(self) -> "NpzReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._zip.close()

    @property
    def names(self) -> list[str]:
        return list(self._infos)

    def _member(self, name: str) -> zipfile.ZipInfo:
        info = self._infos.get(name)
        if info is None:
            raise LimitError(f"{self.path}: no array {name!r}")
        if info.flag_bits & _BAD_FLAGS:
            raise LimitError(f"{self.path}: array {name!r} is encrypted or patched (zip flag "
                             f"bits {info.flag_bits:#06x}); artifacts store plain arrays")
        if info.compress_type != zipfile.ZIP_STORED or info.compress_size != info.file_size:
            raise LimitError(f"{self.path}: array {name!r} is compressed; artifacts store arrays "
                             "uncompressed (np.savez), so a small file cannot expand in memory")
        return info

    def header(self, name: str) -> tuple[np.dtype, tuple, bool, int]:
        """``(dtype, shape, fortran_order, header_length)`` of one member (reads <= 4 KiB)."""
        if name not in self._headers:
            info = self._member(name)
            try:
                with self._zip.open(info) as fh:
                    raw = fh.read(min(info.file_size, _MAX_HEADER + 12))
            except _ZIP_ERRORS as err:
                raise LimitError(f"{self.path}: array {name!r} is unreadable ({_why(err)})") from err
            dtype, shape, fortran, hlen = _parse_header(raw, f"{self.path}:{name}")
            nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
            if info.file_size != hlen + nbytes:
                raise LimitError(f"{self.path}: array {name!r} stores {info.file_size - hlen:,} "
                                 f"bytes but its header declares {nbytes:,} ({dtype}, {shape})")
            self._headers[name] = (dtype, shape, fortran, hlen)
        return self._headers[name]

    def headers(self) -> dict:
        """``name -> (dtype, shape)`` for every member."""
        return {n: self.header(n)[:2] for n in self._infos}

    def read(self, name: str, max_bytes: int) -> np.ndarray:
        """Read one member (at most ``max_bytes`` of data) into a new writable array."""
        dtype, shape, fortran, hlen = self.header(name)
        nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
        if nbytes > max_bytes:
            raise LimitError(f"{self.path}: array {name!r} is {nbytes:,} bytes, more than the "
                             f"{max_bytes:,} allowed")
        if self._data is not None:  # in memory: one copy straight out of the archive's bytes
            data = self._stored_bytes(self._member(name), name)[hlen:]
        else:
            try:
                with self._zip.open(self._member(name)) as fh:
                    fh.read(hlen)
                    data = fh.read(nbytes + 1)
            except _ZIP_ERRORS as err:
                raise LimitError(f"{self.path}: array {name!r} is unreadable ({_why(err)})") from err
        if len(data) != nbytes:
            raise LimitError(f"{self.path}: array {name!r} is truncated")
        arr = np.frombuffer(data, dtype=dtype)
        arr = arr.reshape(shape, order="F" if fortran else "C")
        return np.array(arr, order="C", copy=True)  # writable, owns its memory

    def _stored_bytes(self, info: zipfile.ZipInfo, name: str) -> memoryview:
        """A stored member's bytes, as a view into the archive given in memory (its local
        header read here: its name and extra field lengths may differ from the directory's)."""
        raw, at = self._data, info.header_offset
        if at < 0 or at + 30 > len(raw) or bytes(raw[at:at + 4]) != b"PK\x03\x04":
            raise LimitError(f"{self.path}: array {name!r} is unreadable (bad local header)")
        flags = int.from_bytes(raw[at + 6:at + 8], "little")
        if flags & _BAD_FLAGS:   # zipfile reads some of these from the directory entry only
            raise LimitError(f"{self.path}: array {name!r} is encrypted or patched (zip flag "
                             f"bits {flags:#06x} in its local header); artifacts store plain arrays")
        start = at + 30 + int.from_bytes(raw[at + 26:at + 28], "little") \
            + int.from_bytes(raw[at + 28:at + 30], "little")
        if start + info.file_size > len(raw):
            raise LimitError(f"{self.path}: array {name!r} is unreadable (truncated: the "
                             "archive ends inside it)")
        return raw[start:start + info.file_size]
