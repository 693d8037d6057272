"""Reading a RouteJudge JSONL file without trusting it: UTF-8 only, nesting bounded before
parsing, in linear time (so a 100,000-deep line is refused, not a ``RecursionError``, and a
line of escaped quotes is not a quadratic regex scan), every error naming the file and line
(1-based)."""

from __future__ import annotations

import json

from ..errors import DataValidationError
from ..export.safe_io import json_depth
from ..json_keys import unique_keys
from .records import JudgeRecord

__all__ = ["MAX_JSON_DEPTH", "MAX_IMPORT_LLMS", "MAX_IMPORT_ROUTERS", "BLANK", "parse_line", "read_jsonl"]

#: deepest JSON nesting a record line may have (a record nests three levels; metadata a few more)
MAX_JSON_DEPTH = 64
#: most distinct router names one imported file (and the database after the import) may hold
#: (the report's pairwise tables grow with their square)
MAX_IMPORT_ROUTERS = 100
#: most distinct LLM names (shown, chosen or feasible) one imported file (and the database after the
#: import) may hold
MAX_IMPORT_LLMS = 1000
#: what :func:`parse_line` returns for a blank line
BLANK = object()


def parse_line(raw: bytes, path, lineno: int):
    """One JSONL line (bytes) -> its JSON value, or :data:`BLANK` for a blank line.

    Raises
    ------
    DataValidationError
        Not UTF-8, nested deeper than :data:`MAX_JSON_DEPTH`, not JSON, an object naming a
        key twice (JSON would keep the last silently: a router's vote lost), or a number
        Python will not convert (an integer of more than 4,300 digits); the message names
        ``path`` and ``lineno``.

    Example
    -------
    >>> parse_line(b'{"a": 1}\\n', "f.jsonl", 1)
    {'a': 1}
    >>> parse_line(b"[[[" * 30 + b"\\n", "f.jsonl", 2)
    Traceback (most recent call last):
    ...
    recsys_router.errors.DataValidationError: f.jsonl: line 2: JSON nested 90 deep, more than the 64 allowed
    >>> parse_line(b'{"r1": "x", "r1": "y"}', "f.jsonl", 3)
    Traceback (most recent call last):
    ...
    recsys_router.errors.DataValidationError: f.jsonl: line 3 cannot be read as JSON (duplicate key 'r1')
    """
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DataValidationError(f"line {lineno}: byte 0x{raw[exc.start]:02x} is not UTF-8 text; "
                                  "expected a UTF-8 encoded JSONL file", source=str(path)) from None
    if not line.strip():
        return BLANK
    # nesting never exceeds the count of opening brackets (a cheap bound for every line);
    # only a line with more runs the artifact reader's linear-time scan, strings skipped
    depth = json_depth(raw) if raw.count(b"[") + raw.count(b"{") > MAX_JSON_DEPTH else 0
    if depth > MAX_JSON_DEPTH:
        raise DataValidationError(f"line {lineno}: JSON nested {depth} deep, more than the "
                                  f"{MAX_JSON_DEPTH} allowed", source=str(path))
    try:
        return json.loads(line, object_pairs_hook=unique_keys)  # {"r1": "x", "r1": "y"}: refused
    except json.JSONDecodeError as exc:
        raise DataValidationError(f"line {lineno} is not valid JSON ({exc.msg})", source=str(path)) from None
    except RecursionError:
        raise DataValidationError(f"line {lineno}: JSON nested too deeply to read", source=str(path)) from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts (4,300)
        msg = str(exc).split(":")[0].strip()
        raise DataValidationError(f"line {lineno} cannot be read as JSON ({msg})",
                                  source=str(path)) from None


def read_jsonl(path) -> list[JudgeRecord]:
    """Every record of a JSONL file, validated in full (nothing is written anywhere).

    Raises
    ------
    DataValidationError
        A malformed line (see :func:`parse_line`), a record that is not valid or not storable
        (:meth:`JudgeRecord.from_dict`, :meth:`JudgeRecord.check_storable`), or a
        ``record_id`` on two lines (both named), or more than :data:`MAX_IMPORT_ROUTERS`
        distinct routers or :data:`MAX_IMPORT_LLMS` distinct LLMs in the file (the line that
        goes past the limit is named); the message names the file, line and field.

    Example
    -------
    >>> import tempfile, pathlib
    >>> row = '{"query": "q", "router_choices": {"r": "x"}, "llm_a": "x", "llm_b": "y", ' \\
    ...       '"label": "A", "feasible": ["x", "y"], "record_id": "a"}\\n'
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "r.jsonl"
    >>> _ = f.write_text(row + "\\n" + row)
    >>> read_jsonl(f)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    recsys_router.errors.DataValidationError: ...r.jsonl, line 3, column 'record_id': record_id 'a' is also on line 1
    """
    recs, first = [], {}
    routers: set[str] = set()
    llms: set[str] = set()
    with open(path, "rb") as fh:
        for i, raw in enumerate(fh, start=1):
            d = parse_line(raw, path, i)
            if d is BLANK:
                continue
            rec = JudgeRecord.from_dict(d, source=f"{path}, line {i}")
            if rec.record_id in first:
                raise DataValidationError(f"record_id {rec.record_id!r} is also on line {first[rec.record_id]}",
                                          source=f"{path}, line {i}", column="record_id")
            first[rec.record_id] = i
            recs.append(rec)
            routers.update(rec.router_choices)
            llms.update((rec.llm_a, rec.llm_b, *rec.feasible, *rec.router_choices.values()))
            for what, names, cap in (("router", routers, MAX_IMPORT_ROUTERS), ("LLM", llms, MAX_IMPORT_LLMS)):
                if len(names) > cap:
                    raise DataValidationError(f"the file names more than {cap} distinct {what}s (the limit "
                                              "for one import); split it or drop some", source=f"{path}, line {i}")
    return recs
