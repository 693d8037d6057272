"""Reading JSON and JSON-lines files with located errors: the file, and the line of a
syntax error, a non-UTF-8 byte, a record that is not an object or an escape that is not
text (a lone surrogate)."""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import DataValidationError
from ..json_keys import RepeatedKey, unique_keys
from ._limits import ReadLimits, open_counted, too_many_records
from ._rows import lone_surrogate_line, not_utf8 as _not_utf8, open_bytes as _open_bytes

__all__ = ["read_json", "read_jsonl", "read_jsonl_lines", "json_record_lines"]


def _repeated_key_line(text: str) -> int | None:
    """The 1-based line where the first object naming a key twice starts (a second, pure
    Python parse run only on this error path: it hands each object's start offset over)."""
    import json.decoder
    import json.scanner

    dec = json.JSONDecoder(object_pairs_hook=unique_keys)

    def parse_object(s_and_end, *args, **kwargs):
        try:
            return json.decoder.JSONObject(s_and_end, *args, **kwargs)
        except RepeatedKey as exc:  # the innermost object sets the line
            if exc.line is None:
                s, end = s_and_end
                exc.line = s.count("\n", 0, end) + 1
            raise

    dec.parse_object = parse_object
    dec.scan_once = json.scanner.py_make_scanner(dec)
    try:
        dec.decode(text)
    except RepeatedKey as exc:
        return exc.line
    except (ValueError, RecursionError):
        return None
    return None


def _repeated(path, key: str, line: int | None) -> DataValidationError:
    where = "" if line is None else "an object starting on this line "
    return DataValidationError(f"{where}names the key {key!r} twice; a JSON key must be given "
                               f"once (a reader would silently keep only the last value)",
                               source=str(path), row=line)


def read_json(path: Path):
    """Parse a JSON file; a syntax error names the file, line and column; non-UTF-8 text, an
    escape decoding to a lone surrogate (its line), an object naming a key twice (the line
    where it starts) and nesting too deep to parse are refused with the file named."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        try:
            obj = json.loads(text, object_pairs_hook=unique_keys)
        except RepeatedKey as exc:
            raise _repeated(path, exc.key, _repeated_key_line(text)) from None
        line = lone_surrogate_line(text, obj) if "\\u" in text else None
        if line is not None:
            rec = next((i for i, r in enumerate(obj) if not _is_text(r)),
                       None) if isinstance(obj, list) else None
            raise _surrogate(path, line, rec)
        return obj
    except json.JSONDecodeError as exc:
        raise DataValidationError(f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
                                  source=str(path), row=exc.lineno) from None
    except UnicodeDecodeError:
        raise _not_utf8(Path(path)) from None
    except RecursionError:
        raise DataValidationError("JSON nested too deeply to read", source=str(path)) from None
    except ValueError as exc:  # an integer of more digits than Python converts (4,300)
        if isinstance(exc, DataValidationError):
            raise
        raise DataValidationError(f"cannot be read as JSON ({str(exc).split(';')[0]})",
                                  source=str(path)) from None


def json_record_lines(path) -> list[int]:
    """The 1-based file line on which each element of a JSON file's top-level list starts
    (empty when the file is not a readable JSON list). Meant for error messages: it parses
    the file again, element by element.

    Example
    -------
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "x.json")
    >>> _ = open(p, "w").write('[{"a": 1},\\n\\n {"b":\\n  2}, 3]')
    >>> json_record_lines(p)
    [1, 3, 4]
    """
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        dec, ws = json.JSONDecoder(), " \t\n\r"
        i = len(text) - len(text.lstrip(ws))
        if not text.startswith("[", i):
            return []
        i, out, line, last = i + 1, [], 1, 0
        while True:
            while i < len(text) and text[i] in ws + ",":
                i += 1
            if i >= len(text) or text[i] == "]":
                return out
            line, last = line + text.count("\n", last, i), i
            out.append(line)
            _, i = dec.raw_decode(text, i)
    except (OSError, ValueError, RecursionError):
        return []


def read_jsonl(path: Path) -> pd.DataFrame:
    """Read a JSON-lines file into a DataFrame (one record per line).

    A line that is not a JSON object raises :class:`DataValidationError` naming its line
    number (1-based). Blank lines are skipped.
    """
    return read_jsonl_lines(path)[0]


def read_jsonl_lines(path: Path, limits: ReadLimits | None = None, exact=()
                     ) -> tuple[pd.DataFrame, np.ndarray]:
    """:func:`read_jsonl` and the 1-based file line of each record (blank lines skipped).

    With ``limits``, a ``.gz`` file giving more than ``limits.max_bytes`` decompressed bytes
    or a file of more than ``limits.max_records`` records is refused while it is read.

    The ``exact`` columns (ids, labels) keep each record's JSON value as parsed (Python
    ``int``, ``float``, ``str``, ...; a missing key or ``null`` is None) in an object column,
    where pandas would make a column of integers with one float or one null a float column:
    ``1`` would become ``1.0`` and ``9007199254740993`` the float ``9007199254740992.0``.

    Example
    -------
    >>> import os, tempfile
    >>> p = os.path.join(tempfile.mkdtemp(), "x.jsonl")
    >>> _ = open(p, "w").write('{"id": 1}\\n{"id": 2.5}\\n{"x": 0}\\n')
    >>> read_jsonl_lines(p)[0]["id"].tolist(), read_jsonl_lines(p, exact=["id"])[0]["id"].tolist()
    ([1.0, 2.5, nan], [1, 2.5, None])
    """
    try:
        return _read_jsonl(path, limits, exact)
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise DataValidationError(f"not a readable gzip file ({exc})", source=str(path)) from None


def _read_jsonl(path: Path, limits: ReadLimits | None = None, exact=()):
    records, lines = [], []
    with (open_counted(path, limits) if limits is not None else _open_bytes(path)) as fh:
        for lineno, raw in enumerate(fh, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise DataValidationError(f"byte 0x{raw[exc.start]:02x} is not UTF-8 text; expected "
                                          f"a UTF-8 encoded file", source=str(path),
                                          row=lineno) from None
            if not line.strip():
                continue
            try:
                rec = json.loads(line, object_pairs_hook=unique_keys)
            except RepeatedKey as exc:
                raise _repeated(path, exc.key, lineno) from None
            except json.JSONDecodeError as exc:
                raise DataValidationError(f"invalid JSON on this line: {exc.msg}", source=str(path),
                                          row=lineno) from None
            except RecursionError:
                raise DataValidationError("JSON nested too deeply to read", source=str(path),
                                          row=lineno) from None
            except ValueError as exc:  # an integer of more digits than Python converts
                raise DataValidationError(f"cannot be read as JSON ({str(exc).split(';')[0]})",
                                          source=str(path), row=lineno) from None
            if not isinstance(rec, dict):
                raise DataValidationError(f"expected a JSON object per line, got {type(rec).__name__}",
                                          source=str(path), row=lineno)
            if "\\u" in line and lone_surrogate_line(line, rec) is not None:
                raise _surrogate(path, lineno)
            if limits is not None and len(records) >= limits.max_records:
                raise too_many_records(path, limits.max_records)
            records.append(rec)
            lines.append(lineno)
    if not records:
        raise DataValidationError("no records: the file is empty", source=str(path))
    df = pd.DataFrame.from_records(records)
    for col in exact:  # a float column was upcast from mixed values or has nulls: rebuild it
        if col in df.columns and df[col].dtype.kind == "f":
            df[col] = pd.Series([rec.get(col) for rec in records], dtype=object, index=df.index)
    return df, np.asarray(lines, dtype=np.int64)


def _is_text(value) -> bool:
    """Whether a decoded JSON value holds only encodable text (no lone surrogate)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _surrogate(path, line: int, record: int | None = None) -> DataValidationError:
    at = "" if record is None else f" (record {record} of the list, counted from 0)"
    return DataValidationError(f"a \\uD800-\\uDFFF escape without its pair (a lone UTF-16 "
                               f"surrogate) is not text{at}; expected valid Unicode text",
                               source=str(path), row=line)
