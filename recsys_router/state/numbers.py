"""Numbers in JSON: finiteness of ints too large for a float, short descriptions of values
for error messages, and the conversions between Python / numpy values and plain JSON
(:func:`json_safe`: NaN and infinities to None; :func:`number_keys`: string keys back to
numbers). All are re-exported by :mod:`recsys_router.state`.

JSON has no size limit on integers: ``10**400`` parses to a Python int that ``float()``,
``math.isfinite`` and numpy refuse with OverflowError or TypeError, and an int of more than
4,300 digits cannot even be formatted. These helpers let validators turn such values into
errors that name the field.

Example
-------
>>> is_finite_number(10**400), is_finite_number(1e308), is_finite_number(float("nan"))
(False, True, False)
>>> describe(10**400)
'an integer of 401 digits'
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["is_finite_number", "is_json_number", "describe", "json_safe", "number_keys"]


def is_finite_number(value) -> bool:
    """Whether an int or float is finite as a float (an int too large for a float is not:
    ``float(10**400)`` overflows)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def is_json_number(value) -> bool:
    """Whether ``value`` is a JSON number (an int or float, never a bool) finite as a float.

    Example
    -------
    >>> is_json_number(2), is_json_number(True), is_json_number("1.5"), is_json_number(10**400)
    (True, False, False, False)
    """
    return not isinstance(value, bool) and isinstance(value, (int, float)) \
        and is_finite_number(value)


def describe(value, limit: int = 60) -> str:
    """A short description of a JSON value for an error message: its repr cut to ``limit``
    characters, or the size of an integer too long to print (Python refuses to format an
    int of more than 4,300 digits)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an integer of {int(value.bit_length() * 0.30103) + 1} digits"
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def json_safe(value):
    """A Python value as plain JSON (tuples become lists, numpy scalars Python numbers,
    NaN and infinities None)."""
    if isinstance(value, (float, np.floating)) and not math.isfinite(value):
        return None
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    return value


def number_keys(table: dict | None, kind: type = float) -> dict:
    """A JSON-restored ``{str: number or None}`` as ``{kind(key): number}`` (None -> NaN),
    e.g. the validation scores a router kept per tried hyperparameter value.

    Example
    -------
    >>> number_keys({"0.5": 0.25, "1": None})
    {0.5: 0.25, 1.0: nan}
    """
    return {kind(k): (float("nan") if v is None else v) for k, v in (table or {}).items()}
