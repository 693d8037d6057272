"""Checks behind :class:`~recsys_router.judge.records.JudgeRecord`: finding a value no
database or JSON export can hold anywhere in a nested record, and showing an offending value
briefly in an error message."""

from __future__ import annotations

import math
from typing import Mapping

from ..errors import DataValidationError

__all__ = ["brief", "nonfinite", "require", "unencodable"]


def _first(value, bad, depth: int = 0):
    """The first item of ``value`` (nested dicts, their keys, and lists included; ``value``
    itself first) for which ``bad(item)`` holds, else None."""
    if bad(value):
        return value
    if depth > 100:  # deeper than any record may nest (import bounds lines at 64)
        return None
    items = []
    if isinstance(value, Mapping):
        items = [x for kv in value.items() for x in kv]
    elif isinstance(value, (list, tuple)):
        items = value
    for x in items:
        found = _first(x, bad, depth + 1)
        if found is not None:
            return found
    return None


def _not_utf8(value) -> bool:
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def unencodable(value):
    """The first string in ``value`` (nested dicts, their keys, and lists included) that
    cannot be UTF-8 encoded (a lone surrogate, e.g. from a ``"\\ud800"`` JSON escape), else None.

    Example
    -------
    >>> unencodable({"a": ["ok", "x\\udc00"]})
    'x\\udc00'
    >>> unencodable({"a": ["ok"]}) is None
    True
    """
    return _first(value, _not_utf8)


def nonfinite(value):
    """The first float in ``value`` (nested dicts and lists included) that is NaN or
    infinite, which JSON cannot hold (``NaN``, ``Infinity`` and ``1e400`` parse to them), else
    None.

    Example
    -------
    >>> nonfinite({"a": [1, {"b": float("inf")}]}), nonfinite({"a": [1.5, "NaN"]})
    (inf, None)
    """
    return _first(value, lambda v: isinstance(v, float) and not math.isfinite(v))


def brief(value, n: int = 60) -> str:
    """``repr`` of an offending value with its type, cut to ``n`` characters.

    Example
    -------
    >>> brief(5), brief({"a": 1})
    ('5 (int)', "{'a': 1} (dict)")
    """
    try:
        text = repr(value)
    except ValueError:  # an int of more digits than Python converts to text
        text = "<a number too long to show>"
    text = text if len(text) <= n else text[: n - 3] + "..."
    return f"{text} ({type(value).__name__})"


def require(d: Mapping, key: str, src, row):
    """``d[key]``; a missing or null field raises :class:`DataValidationError` naming it."""
    if key not in d or d[key] is None:
        raise DataValidationError(f"missing required field {key!r}", source=src, row=row, column=key)
    return d[key]
