"""Helpers shared by the real-format loaders: reading files with located errors,
LLM-size parsing, split/task names from file names, stable query ids.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import logging
import re
import zlib
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import DataValidationError
from ._json import read_json, read_jsonl, read_jsonl_lines
from ._limits import ReadLimits, check_parquet_footer, open_counted, too_many_records
from ._rows import first_non_utf8_line, not_utf8 as _not_utf8, open_bytes as _open_bytes
from ._rows import open_text as _open_text

__all__ = ["read_csv", "csv_header", "csv_na_options", "NUMBER_NA", "MAX_CSV_COLUMNS", "require_trust", "read_parquet", "read_json", "read_jsonl", "read_jsonl_lines", "require_columns",
           "parse_size", "task_split_from_stem", "text_hash", "first_non_utf8_line", "order_files", "SPLIT_ORDER", "resolve_file", "log_merged"]

log = logging.getLogger("recsys_router.datasets")

MAX_CSV_COLUMNS = 2048
MAX_HEADER_BYTES = 1 << 20

# files are read in this split order so that, when a prompt appears in several files,
# the training copy comes first (see each loader's notes on duplicates)
SPLIT_ORDER = {"train": 0, "val": 1, None: 2, "test": 3}
_SPLIT_SUFFIX = re.compile(r"^(?P<task>.+?)[_\-.](?P<split>train|test|val|valid|validation|dev)$",
                           re.IGNORECASE)





def _first_long_line(path: Path, n_header: int,
                     max_records: int | None = None) -> tuple[int, int] | None:
    """``(line, n_fields)`` of the first CSV record with more fields than the header."""
    with _open_text(path) as fh:
        reader = csv.reader(fh)
        try:
            next(reader, None)
            for i, rec in enumerate(reader):
                if max_records is not None and i >= max_records:
                    return None
                if len(rec) > n_header:
                    return reader.line_num, len(rec)
        except csv.Error:  # a field over the csv module's size limit: line unknown
            return None
    return None


_EXTRA = "\x00extra field"   # a name no header has: catches fields past the last header name


def _column_names(header: list[str]) -> list[str]:
    """Header names as pandas would name them: ``Unnamed: i`` for blanks, ``a.1`` for repeats."""
    names, seen = [], {}
    for i, h in enumerate(header):
        name = h if h.strip() else f"Unnamed: {i}"
        base, k = name, seen.get(name, 0)
        while name in seen:
            k += 1
            name = f"{base}.{k}"
        seen[base] = k
        seen[name] = 0
        names.append(name)
    return names


def read_csv(path: Path, limits: ReadLimits | None = None, **kwargs) -> pd.DataFrame:
    """``pandas.read_csv`` that refuses what pandas would read silently wrong.

    * A record with more fields than the header raises naming the line (pandas would make
      the first field the index and shift every column: costs become scores; with
      ``usecols`` it would drop the extra field).
    * A header of more than :data:`MAX_CSV_COLUMNS` names is refused before parsing (pandas'
      time grows with the square of the column count); so is a header naming a column
      twice (pandas would rename the second ``score.1``).
    * Text that is not UTF-8, malformed quoting, an empty file and any other parse failure
      raise :class:`DataValidationError` naming the file (and the line when known).

    * With ``limits`` (:class:`~recsys_router.datasets._limits.ReadLimits`), a ``.gz``
      file is read through a counter that stops after ``limits.max_bytes`` decompressed
      bytes, and at most ``limits.max_records`` records are parsed; more is refused naming
      the file and the option that raises the limit.

    ``kwargs`` go to :func:`pandas.read_csv` (``header``, ``names`` and ``index_col`` are
    set here). With ``usecols`` (names), which reads huge files without their unused
    columns, the records are first scanned once (linear, streaming) for extra fields.

    Example
    -------
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "x.csv")
    >>> _ = open(p, "w").write("a,b\\n1,2\\n3,4,5\\n")
    >>> try:
    ...     read_csv(p)
    ... except DataValidationError as err:
    ...     print(str(err).split(": ")[1].split(";")[0])
    line 3 has 3 fields but the header has 2
    """
    path = Path(path)
    header = csv_header(path)
    seen = set()
    for h in header:
        if h.strip() and h in seen:
            raise DataValidationError(f"the header names column {h!r} twice; expected each "
                                      f"column name once", source=str(path), row=1, column=h)
        seen.add(h)
    names = _column_names(header)
    n_header = len(names)
    if n_header > MAX_CSV_COLUMNS:
        raise DataValidationError(
            f"{n_header:,} columns; at most {MAX_CSV_COLUMNS:,} are read (a routing table has a "
            f"few columns per LLM and per query)", source=str(path), row=1)
    usecols = kwargs.get("usecols")
    if usecols is not None:
        # pandas cannot select a sentinel column that no record fills: one streaming scan
        found = _first_long_line(path, n_header)
        if found:
            raise _long_line(path, n_header, found[0])
    if isinstance(kwargs.get("na_values"), dict) and usecols is None:  # the sentinel column
        kwargs["na_values"] = {**kwargs["na_values"], _EXTRA: [""]}
    if limits is not None:
        kwargs["nrows"] = limits.max_records + 1
        kwargs["compression"] = None
    try:
        with (open_counted(path, limits) if limits is not None else nullcontext(path)) as src:
            df = pd.read_csv(src, header=None, skiprows=1, index_col=False, **kwargs,
                             names=names if usecols is not None else names + [_EXTRA])
    except DataValidationError:
        raise
    except UnicodeDecodeError:
        raise _not_utf8(path) from None
    except pd.errors.EmptyDataError:
        raise DataValidationError("empty file: expected a header line and records",
                                  source=str(path)) from None
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise DataValidationError(f"not a readable gzip file ({exc})", source=str(path)) from None
    except (pd.errors.ParserError, csv.Error, ValueError) as exc:
        msg = " ".join(str(exc).split())
        m = re.search(r"line (\d+)", msg)
        if m and "Expected" in msg:  # two or more fields too many
            raise _long_line(path, n_header, int(m.group(1))) from None
        raise DataValidationError(f"malformed CSV: {msg}", source=str(path),
                                  row=int(m.group(1)) if m else None) from None
    if limits is not None and len(df) > limits.max_records:
        raise too_many_records(path, limits.max_records)
    extra = df.pop(_EXTRA).notna().to_numpy() if usecols is None else np.zeros(0, bool)
    if extra.any():
        raise _long_line(path, n_header, int(np.flatnonzero(extra)[0]) + 2)
    return df


def _long_line(path: Path, n_header: int, guess: int) -> DataValidationError:
    found = _first_long_line(path, n_header)
    line, n = found if found else (guess, None)
    has = f"has {n} fields" if n else "has more fields"
    return DataValidationError(
        f"line {line} {has} but the header has {n_header}; every record must have one field "
        f"per header column (a missing header name or a stray delimiter?)", source=str(path),
        row=line)


def csv_header(path: Path) -> list[str]:
    """The column names of a CSV file (its first line), with located errors.

    Read with the :mod:`csv` module (pandas takes seconds on a header of 20,000 names).
    """
    try:
        with _open_bytes(path) as fh:
            first = fh.readline(MAX_HEADER_BYTES + 1)
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise DataValidationError(f"not a readable gzip file ({exc})", source=str(path)) from None
    if len(first) > MAX_HEADER_BYTES:
        raise DataValidationError(f"header line longer than {MAX_HEADER_BYTES:,} bytes",
                                  source=str(path), row=1)
    try:
        text = first.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DataValidationError(f"byte 0x{first[exc.start]:02x} is not UTF-8 text; expected a "
                                  f"UTF-8 encoded file", source=str(path), row=1) from None
    try:
        header = next(csv.reader([text]), None)
    except csv.Error as exc:
        raise DataValidationError(f"malformed CSV header: {exc}", source=str(path), row=1) from None
    if not header:
        raise DataValidationError("empty file: expected a header line", source=str(path), row=1)
    return header


#: spellings of a missing number in a CSV number field (pandas' defaults)
NUMBER_NA = ("", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
             "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null")


def csv_na_options(cols, *, number=(), text=()) -> dict:
    """:func:`read_csv` options for a file with columns ``cols``: only an empty field is
    missing (an id, label or text "NA", "None" or "null" stays text), except in the ``number``
    columns, where :data:`NUMBER_NA` are too; the ``text`` columns are read as text (a text of
    digits, "1984", stays one).

    Example
    -------
    >>> o = csv_na_options(["query_id", "score"], number=["score"], text=["query_id"])
    >>> o["dtype"], o["na_values"]["query_id"], "NA" in o["na_values"]["score"]
    ({'query_id': <class 'str'>}, [''], True)
    """
    return {"dtype": {c: str for c in cols if c in text}, "keep_default_na": False,
            "na_values": {c: list(NUMBER_NA) if c in number else [""] for c in cols}}


def read_parquet(path: Path, columns=None, limits: ReadLimits | None = None) -> pd.DataFrame:
    """``pandas.read_parquet`` whose failures (corrupt or truncated file, not parquet) raise
    one :class:`DataValidationError` naming the file; with ``limits``, a footer declaring
    more records or uncompressed bytes than they allow is refused before any data is read."""
    if limits is not None:
        check_parquet_footer(Path(path), limits)
    try:
        return pd.read_parquet(path, columns=columns)
    except (OSError, ValueError, TypeError, ImportError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        msg = " ".join(str(exc).split())[:300]
        raise DataValidationError(f"not a readable parquet file ({type(exc).__name__}: {msg})",
                                  source=str(path)) from None
    except Exception as exc:  # noqa: BLE001 - pyarrow raises its own ArrowException types
        msg = " ".join(str(exc).split())[:300]
        raise DataValidationError(f"not a readable parquet file ({type(exc).__name__}: {msg})",
                                  source=str(path)) from None


def require_trust(path: Path, trust_pickle: bool) -> None:
    """Refuse to unpickle ``path`` unless the caller said it trusts the file.

    Unpickling runs whatever code the file names, so a pickle is as dangerous as a script.
    """
    if not trust_pickle:
        raise DataValidationError(
            "refusing to unpickle: a pickle runs code of the file's choosing while it loads; if "
            "you trust where this file came from, pass --trust-pickle (trust_pickle=True)",
            source=str(path))


def require_columns(df: pd.DataFrame, columns, source, what: str = "column") -> None:
    """Raise naming the first missing column and listing those present."""
    for col in columns:
        if col not in df.columns:
            raise DataValidationError(f"missing required {what} {col!r}; present: {list(df.columns)}",
                                      source=str(source), column=col)


_MOE = re.compile(r"(?<![A-Za-z0-9.])(\d+)\s*[xX]\s*(\d+(?:\.\d+)?)\s*[bB](?![A-Za-z])")
_BILLIONS = re.compile(r"(?<![A-Za-z0-9.])(\d+(?:\.\d+)?)\s*[bB](?![A-Za-z])")
_MILLIONS = re.compile(r"(?<![A-Za-z0-9.])(\d+(?:\.\d+)?)\s*[mM](?![A-Za-z])")


def parse_size(name) -> float:
    """Parameter count in billions parsed from an LLM name, NaN when the name has none.

    ``"8x7b"`` (mixture of experts) counts experts x size (56); ``"1.5B"`` -> 1.5;
    ``"560m"`` -> 0.56. A number glued to letters (``"Qwen2.5"``, ``"A2.7B"``) or followed
    by more letters (``"7bit"``) is not a size. The first match wins.

    Example
    -------
    >>> parse_size("mistralai/Mixtral-8x7B-Instruct"), parse_size("Llama-3.1-8B"), parse_size("gpt-4")
    (56.0, 8.0, nan)
    """
    if name is None or (isinstance(name, float) and np.isnan(name)):
        return float("nan")
    s = str(name)
    m = _MOE.search(s)
    if m:
        return float(m.group(1)) * float(m.group(2))
    m = _BILLIONS.search(s)
    if m:
        return float(m.group(1))
    m = _MILLIONS.search(s)
    if m:
        return float(m.group(1)) / 1000.0
    return float("nan")


def task_split_from_stem(stem: str) -> tuple[str, str | None]:
    """Split a file stem like ``mmlu_train`` / ``gsm8k-test`` into ``(task, split)``.

    ``val``/``valid``/``validation``/``dev`` become ``"val"``; a stem without a split
    suffix gives ``(stem, None)``.

    Example
    -------
    >>> task_split_from_stem("gsm8k-test"), task_split_from_stem("ceval")
    (('gsm8k', 'test'), ('ceval', None))
    """
    m = _SPLIT_SUFFIX.match(stem)
    if not m:
        return stem, None
    split = m.group("split").lower()
    if split in ("valid", "validation", "dev"):
        split = "val"
    return m.group("task"), split


def order_files(paths) -> list[Path]:
    """Sort files train first, then unsplit, val, test (alphabetical within each)."""
    def key(p: Path):
        _, split = task_split_from_stem(Path(p).stem)
        return (SPLIT_ORDER.get(split, 2), Path(p).name)
    return sorted((Path(p) for p in paths), key=key)


def text_hash(texts: pd.Series, n: int = 12) -> pd.Series:
    """Stable short SHA-1 hex digest of each text (used to build query ids)."""
    return texts.astype(str).map(lambda t: hashlib.sha1(t.encode("utf-8")).hexdigest()[:n])


def resolve_file(path, names: tuple[str, ...], what: str) -> Path:
    """``path`` itself if it is a file, else the first of ``names`` inside the folder."""
    path = Path(path)
    if path.is_file():
        return path
    for n in names:
        if (path / n).is_file():
            return path / n
    raise FileNotFoundError(f"{path}: no {what} found (looked for {', '.join(names)})")


def log_merged(source, n: int, what: str) -> None:
    if n:
        log.warning("%s: %s", source, what)
