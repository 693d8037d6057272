"""Where a record is in its file: the line a CSV record or field is on (a quoted field may
span several lines), and the line of a JSON escape that is not text (a lone surrogate), so
that error messages name the line a user sees in an editor.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import json
import re
from pathlib import Path

import numpy as np

from ..errors import DataValidationError

__all__ = ["csv_record_lines", "CsvLines", "lone_surrogate_line", "open_bytes", "open_text",
           "first_non_utf8_line", "not_utf8"]


def open_bytes(path: Path):
    """The file for reading bytes, gunzipped when its name ends in ``.gz``."""
    return gzip.open(path, "rb") if str(path).lower().endswith(".gz") else open(path, "rb")


def open_text(path: Path):
    """The file for reading UTF-8 text (a BOM dropped, newlines as written, for :mod:`csv`),
    gunzipped when its name ends in ``.gz``."""
    if str(path).lower().endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8-sig", newline="")
    return open(path, encoding="utf-8-sig", newline="")


def first_non_utf8_line(path: Path) -> tuple[int, int] | None:
    """``(line, byte)`` of the first line of a text file that is not UTF-8 (1-based), or None."""
    with open_bytes(path) as fh:
        for lineno, line in enumerate(fh, start=1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as exc:
                return lineno, line[exc.start]
    return None


def not_utf8(path: Path) -> DataValidationError:
    try:
        found = first_non_utf8_line(path)
    except OSError:
        found = None
    if found is None:
        return DataValidationError("the text is not UTF-8; expected a UTF-8 encoded file",
                                   source=str(path))
    line, byte = found
    return DataValidationError(f"byte 0x{byte:02x} is not UTF-8 text; expected a UTF-8 encoded "
                               f"file (line {line})", source=str(path), row=line)


def csv_record_lines(path, header_lines: int = 1) -> np.ndarray:
    """The 1-based file line on which each data record of a CSV file starts.

    Records are read with the :mod:`csv` module, so a quoted field holding newlines makes
    its record span several lines; blank lines are skipped (as ``pandas.read_csv`` does).

    Example
    -------
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "x.csv")
    >>> _ = open(p, "w").write('a,b\\n"one\\ntwo",1\\n\\n3,4\\n')
    >>> csv_record_lines(p).tolist()
    [2, 5]
    """
    lines = []
    with _big_fields(), open_text(Path(path)) as fh:
        reader = csv.reader(fh)
        for _ in range(header_lines):
            next(reader, None)
        end = reader.line_num
        for rec in reader:
            if rec:
                lines.append(end + 1)
            end = reader.line_num
    return np.asarray(lines, dtype=np.int64)


@contextlib.contextmanager
def _big_fields():
    """:mod:`csv` reads fields of any length meanwhile (a long prompt is one field)."""
    old = csv.field_size_limit()
    csv.field_size_limit(1 << 30)
    try:
        yield
    finally:
        csv.field_size_limit(old)


class CsvLines:
    """A row-number function for :func:`recsys_router.long_table.row_number`: maps a 0-based
    record index of a CSV file to the file line where it starts, and (:meth:`field_line`)
    a record's field to the line it is on. The file is scanned only when a row number is
    asked for (on the error path), so reading a valid file costs nothing more."""

    def __init__(self, path, header_lines: int = 1):
        self.path, self.header_lines = Path(path), header_lines
        self._lines: np.ndarray | None = None

    def field_line(self, index: int, column: str | None) -> int:
        """The file line of field ``column`` of record ``index``: its start line plus the
        line breaks inside the quoted fields before that column (the record's start line
        when the column is not in the header).

        Example
        -------
        >>> import tempfile, os
        >>> p = os.path.join(tempfile.mkdtemp(), "x.csv")
        >>> _ = open(p, "w").write('text,score\\nok,1\\n"a\\nb\\nc",oops\\n')
        >>> CsvLines(p).field_line(1, "score"), CsvLines(p).field_line(1, "text")
        (5, 3)
        """
        if column is None:
            return self(index)
        try:  # one pass: the record's start line as csv_record_lines counts it, then its field
            with _big_fields(), open_text(self.path) as fh:
                reader = csv.reader(fh)
                header = next(reader, None) or []
                for _ in range(self.header_lines - 1):
                    next(reader, None)
                pos = header.index(column) if column in header else 0
                end, k = reader.line_num, 0
                for rec in reader:
                    if rec:
                        if k == index:
                            return end + 1 + sum(f.count("\n") for f in rec[:pos])
                        k += 1
                    end = reader.line_num
        except (OSError, csv.Error, UnicodeDecodeError, EOFError):
            pass
        return self(index)

    def __call__(self, index: int) -> int:
        if self._lines is None:
            try:
                self._lines = csv_record_lines(self.path, self.header_lines)
            except (OSError, csv.Error, UnicodeDecodeError, EOFError):
                self._lines = np.zeros(0, dtype=np.int64)
        if 0 <= index < len(self._lines):
            return int(self._lines[index])
        return int(index) + 1 + self.header_lines  # the file could not be scanned


# a UTF-16 surrogate escape in JSON text: a high one not followed by a low one, or a low one
# not preceded by a high one, decodes to a lone surrogate, which is not text (no encoding
# holds it: pyarrow and every UTF-8 writer fail on it)
_LONE_SURROGATE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
                             r"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}")


def lone_surrogate_line(text: str, parsed) -> int | None:
    """The 1-based line of ``text`` (JSON) holding an escape that decodes to a lone UTF-16
    surrogate, or None when ``parsed`` (the decoded value) is all valid text.

    Example
    -------
    >>> import json
    >>> t = '{"a": "ok"}\\n{"b": "\\\\ud83d alone"}'
    >>> lone_surrogate_line(t, [json.loads(x) for x in t.splitlines()])
    2
    >>> lone_surrogate_line('"\\\\ud83d\\\\ude00"', "\\U0001F600") is None
    True
    >>> t = '["\\\\\\\\udc00 is text",\\n "\\\\ud800 is not"]'
    >>> lone_surrogate_line(t, json.loads(t))
    2
    """
    if "\\ud" not in text and "\\uD" not in text:
        return None  # no surrogate escape at all (the common case): no regex pass
    first = None
    for m in _LONE_SURROGATE.finditer(text):
        # a real escape starts after an even run of backslashes ("\\\\udc00" is a backslash
        # then the letters "udc00")
        k = m.start()
        while k > 0 and text[k - 1] == "\\":
            k -= 1
        if (m.start() - k) % 2 == 0:
            first = m
            break
    if first is None:
        return None
    try:
        json.dumps(parsed, ensure_ascii=False).encode("utf-8")
        return None  # the escapes all pair up in the decoded text
    except UnicodeEncodeError:
        return text.count("\n", 0, first.start()) + 1
