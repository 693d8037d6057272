"""Read limits for long-table files, checked before a table is built in memory.

A compressed file can expand a thousandfold: a 145 KB ``.csv.gz`` holds 100 MB of CSV
(2.2 GB once pandas has read it) and a 203 KB parquet file 20 million records. So the
generic loader reads

* compressed text (``.csv.gz``, ``.jsonl.gz``) through a counting reader that stops once
  more than ``max_bytes`` decompressed bytes have come out (default
  :data:`DEFAULT_MAX_BYTES`, 4 GiB), and
* at most ``max_records`` records (default :data:`DEFAULT_MAX_RECORDS`, 50 million: a
  RouterEval-scale table of 2,000 LLMs x 20,000 queries has 40 million); a parquet file's
  record count and uncompressed size are read from its footer before any data.

Both are dataset options of the generic loader (``-o max_bytes=N``, ``-o max_records=N``).
"""

from __future__ import annotations

import gzip
import io
from dataclasses import dataclass
from pathlib import Path

from ..errors import DataValidationError

__all__ = ["DEFAULT_MAX_BYTES", "DEFAULT_MAX_RECORDS", "ReadLimits", "open_counted",
           "too_many_records", "check_parquet_footer"]

DEFAULT_MAX_BYTES = 4 << 30
DEFAULT_MAX_RECORDS = 50_000_000


@dataclass(frozen=True)
class ReadLimits:
    """The most decompressed bytes and records one long-table file may give.

    Example
    -------
    >>> ReadLimits.of(max_records=10)
    ReadLimits(max_bytes=4294967296, max_records=10)
    >>> ReadLimits.of(max_bytes=0)
    Traceback (most recent call last):
    ...
    ValueError: max_bytes must be a positive whole number, got 0
    """

    max_bytes: int = DEFAULT_MAX_BYTES
    max_records: int = DEFAULT_MAX_RECORDS

    @classmethod
    def of(cls, max_bytes: int | None = None, max_records: int | None = None) -> "ReadLimits":
        """Validated limits; ``None`` takes the default."""
        out = {}
        for key, value, default in (("max_bytes", max_bytes, DEFAULT_MAX_BYTES),
                                    ("max_records", max_records, DEFAULT_MAX_RECORDS)):
            if value is None:
                value = default
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{key} must be a positive whole number, got {value!r}")
            out[key] = int(value)
        return cls(**out)


def _too_many_bytes(path, limit: int, what: str = "once decompressed") -> DataValidationError:
    return DataValidationError(
        f"more than {limit:,} bytes {what} (the max_bytes read limit, which keeps a small "
        f"compressed file from filling memory); pass -o max_bytes=N (max_bytes=N) to read "
        f"a larger file", source=str(path))


def too_many_records(path, limit: int, n: int | None = None) -> DataValidationError:
    """The refusal of a file with more than ``limit`` records (``n`` when known)."""
    count = f"{n:,} records" if n is not None else f"more than {limit:,} records"
    return DataValidationError(
        f"{count}; at most {limit:,} are read (the max_records read limit); pass "
        f"-o max_records=N (max_records=N) to read a larger table", source=str(path))


class _Counted(io.RawIOBase):
    """A binary stream that raises once more than ``limit`` bytes have been read from it."""

    def __init__(self, raw, path, limit: int):
        super().__init__()
        self._raw, self._path, self._limit, self._n = raw, path, limit, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        k = self._raw.readinto(buf)
        self._n += k or 0
        if self._n > self._limit:
            raise _too_many_bytes(self._path, self._limit)
        return k

    def close(self) -> None:
        try:
            self._raw.close()
        finally:
            super().close()


def open_counted(path: Path, limits: ReadLimits):
    """``path`` opened for reading bytes; a ``.gz`` file is gunzipped through a counter that
    raises :class:`DataValidationError` (naming the file and ``max_bytes``) once more than
    ``limits.max_bytes`` decompressed bytes have been read.

    Example
    -------
    >>> import gzip, os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "x.csv.gz")
    >>> with gzip.open(p, "wb") as fh:
    ...     _ = fh.write(b"a" * 100_000)
    >>> with open_counted(p, ReadLimits.of(max_bytes=1000)) as fh:
    ...     fh.read()  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    recsys_router.errors.DataValidationError: ...x.csv.gz: more than 1,000 bytes once decompressed ...
    """
    if not str(path).lower().endswith(".gz"):
        return open(path, "rb")
    return io.BufferedReader(_Counted(gzip.open(path, "rb"), path, limits.max_bytes))


def check_parquet_footer(path: Path, limits: ReadLimits) -> None:
    """Refuse a parquet file whose footer declares more than ``max_records`` records or more
    than ``max_bytes`` uncompressed bytes, before any of its data is read (an unreadable
    footer is left to the reader, which names the file). The declared size counts a
    dictionary-encoded value once, so it can understate the loaded table many times over
    (10,000 references to one 50 KB text declare ~157 KB and load as ~475 MB)."""
    try:
        import pyarrow.parquet as pq  # noqa: PLC0415
        meta = pq.ParquetFile(path).metadata
        n_rows = int(meta.num_rows)
        size = sum(int(meta.row_group(i).total_byte_size) for i in range(meta.num_row_groups))
    except FileNotFoundError:
        raise
    except Exception:  # noqa: BLE001 - a corrupt footer: read_parquet names it
        return
    if n_rows > limits.max_records:
        raise too_many_records(path, limits.max_records, n_rows)
    if size > limits.max_bytes:
        raise _too_many_bytes(path, limits.max_bytes, f"uncompressed ({size:,} declared)")
