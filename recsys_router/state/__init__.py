"""Declared fitted state: what a router (or encoder, or network) persists, as data only.

A router's fitted state is a set of named pieces, each declared with a spec:

* :class:`Arr` - a numpy array with an allowed dtype and a shape whose dimensions are
  numbers, symbols (``"n_llms"``; the same symbol must have the same size everywhere) or
  ``None`` (any size);
* a JSON type - :data:`INT`, :data:`FLOAT`, :data:`STR`, :data:`BOOL`, :class:`ListOf`,
  :class:`DictOf`, :class:`TupleOf`, :class:`Opt` (``None`` allowed).

:func:`check_state` validates JSON values and array headers (dtype, shape) against a spec
before any family code sees them, and returns the JSON values converted to their declared
Python types. Nothing here imports or calls anything named by the data.

Example
-------
>>> spec = {"means_": Arr("float64", ("n_llms",)), "best_": INT}
>>> check_state(spec, {"best_": 1}, {"means_": (np.dtype("float64"), (3,))}, {"n_llms": 3})
{'best_': 1}
"""

from __future__ import annotations

import math
import re

import numpy as np

# re-exported: JSON numbers and conversions (json_safe, number_keys lived here before numbers.py)
from .numbers import describe, is_finite_number, is_json_number, json_safe, number_keys

__all__ = ["StateError", "Arr", "Part", "Size", "Scalar", "ListOf", "DictOf", "TupleOf", "Opt", "INT", "FLOAT",
           "STR", "BOOL", "NUM", "JSON_ANY", "check_value", "check_state", "is_finite_number", "is_json_number", "describe", "check_indices", "check_finite", "collect_state", "number_keys",
           "ARRAY_DTYPES", "NAME_RE", "json_safe"]

#: dtypes an artifact array may have (never object, string, void or structured)
ARRAY_DTYPES = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                          "uint64", "float16", "float32", "float64"})
#: allowed names of state pieces and arrays (path-like, no ``..``, no leading ``/``)
NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.<>\-/]{0,199}$")


class StateError(ValueError):
    """A state value does not match its declared spec (the message names the field)."""


class Arr:
    """An array piece: allowed dtype name(s) and a shape of ints, symbols or ``None``.

    Parameters
    ----------
    dtype : str or tuple of str
        Allowed dtype names (see :data:`ARRAY_DTYPES`).
    shape : tuple
        One entry per dimension: an int (exact), a str symbol (consistent size), or None.
    optional : bool
        The piece may be absent (the attribute is then ``None``).
    index_of : str, optional
        The values are indices into an axis of this symbol's size: checked to lie in
        ``[0, size)`` by :func:`check_indices` once the array is read.
    missing : bool
        NaN marks a missing value here (an unobserved score, an unknown cost); without it
        a float array must hold finite numbers only. Infinities are refused either way
        (:func:`check_finite`).
    """

    def __init__(self, dtype, shape: tuple, optional: bool = False, index_of: str | None = None,
                 missing: bool = False):
        self.dtypes = (dtype,) if isinstance(dtype, str) else tuple(dtype)
        unknown = set(self.dtypes) - ARRAY_DTYPES
        if unknown:
            raise ValueError(f"Arr: dtype(s) {sorted(unknown)} are not allowed in artifacts")
        self.shape = tuple(shape)
        self.optional = optional
        self.index_of = index_of
        self.missing = missing

    def __repr__(self) -> str:
        return f"Arr({self.dtypes}, {self.shape})"


class Scalar:
    """A JSON scalar of one Python type (``float`` also accepts integers; no NaN/inf unless
    ``finite=False``)."""

    def __init__(self, kind: type, finite: bool = True):
        self.kind, self.finite = kind, finite

    def __repr__(self) -> str:
        return self.kind.__name__


class ListOf:
    """A JSON list of items of one spec (``max_len`` items at most); ``dim`` binds the
    list's length to a shape symbol (e.g. the rows of a per-task array)."""

    def __init__(self, item, max_len: int = 1_000_000, dim: str | None = None):
        self.item, self.max_len, self.dim = item, max_len, dim


class DictOf:
    """A JSON object with string keys and values of one spec."""

    def __init__(self, value, max_len: int = 1_000_000):
        self.value, self.max_len = value, max_len


class TupleOf:
    """A JSON list of fixed length with one spec per position; returned as a tuple."""

    def __init__(self, *items):
        self.items = items


class Opt:
    """``None`` or a value of the inner spec."""

    def __init__(self, inner):
        self.inner = inner


class Part:
    """A nested state (an encoder, a network, an inner router): a JSON object stored under
    the piece name, with its arrays named ``"<piece>/<array>"``. The owning family restores
    it (and validates it with its own spec) in ``_from_state``. ``router=True`` marks a
    nested router's state document, whose arrays that router's own load checks;
    ``missing`` names the part's arrays in which NaN marks a missing value (the part's
    other float arrays must be finite, see :func:`check_finite`).
    """

    def __init__(self, optional: bool = False, router: bool = False, missing: tuple = ()):
        self.optional = optional
        self.router = router
        self.missing = tuple(missing)


class Size:
    """An integer that is the size of a shape symbol (e.g. ``Size("n_llms")``): it must equal
    that symbol's size wherever else it appears, so a stored count cannot ask for an
    allocation out of proportion to the stored arrays."""

    def __init__(self, symbol: str):
        self.symbol = symbol


class _Any:
    """Any JSON value (already size- and depth-capped by the reader), returned unchanged."""

    def __repr__(self) -> str:
        return "json"


INT, FLOAT, STR, BOOL = Scalar(int), Scalar(float, finite=False), Scalar(str), Scalar(bool)
#: an int or a finite float, kept as given (e.g. scikit-learn's ``min_df``: count or share)
NUM = Scalar(complex)
JSON_ANY = _Any()


def check_value(spec, value, where: str):
    """Validate one JSON value against ``spec``; return it converted (tuples, floats).

    Example
    -------
    >>> check_value(TupleOf(FLOAT, FLOAT), [0, 1.5], "x")
    (0.0, 1.5)
    >>> check_value(ListOf(STR), ["a", 1], "names")
    Traceback (most recent call last):
    ...
    recsys_router.state.StateError: names[1]: expected str, got int
    """
    if isinstance(spec, _Any):
        return value
    if isinstance(spec, Opt):
        return None if value is None else check_value(spec.inner, value, where)
    if isinstance(spec, Scalar):
        if spec.kind is NUM.kind:
            if not is_json_number(value):
                raise StateError(f"{where}: expected a finite number, got {describe(value)}")
            return value
        ok = isinstance(value, spec.kind) and not (spec.kind is int and isinstance(value, bool))
        if spec.kind is float and isinstance(value, int) and not isinstance(value, bool):
            if not is_finite_number(value):
                raise StateError(f"{where}: expected a float, got {describe(value)}, beyond the "
                                 "range of a float")
            value, ok = float(value), True
        if not ok:
            raise StateError(f"{where}: expected {spec.kind.__name__}, got {type(value).__name__}")
        if spec.kind is float and spec.finite and not math.isfinite(value):
            raise StateError(f"{where}: expected a finite number, got {value!r}")
        return value
    if isinstance(spec, (ListOf, TupleOf)):
        if not isinstance(value, list):
            raise StateError(f"{where}: expected a list, got {type(value).__name__}")
        if isinstance(spec, TupleOf):
            if len(value) != len(spec.items):
                raise StateError(f"{where}: expected {len(spec.items)} items, got {len(value)}")
            return tuple(check_value(s, v, f"{where}[{i}]")
                         for i, (s, v) in enumerate(zip(spec.items, value)))
        if len(value) > spec.max_len:
            raise StateError(f"{where}: {len(value)} items, at most {spec.max_len} allowed")
        return [check_value(spec.item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(spec, DictOf):
        if not isinstance(value, dict):
            raise StateError(f"{where}: expected an object, got {type(value).__name__}")
        if len(value) > spec.max_len:
            raise StateError(f"{where}: {len(value)} entries, at most {spec.max_len} allowed")
        return {k: check_value(spec.value, v, f"{where}.{k}") for k, v in value.items()}
    raise TypeError(f"{where}: unknown spec {spec!r}")  # a programming error, not bad input


def _check_array(spec: Arr, name: str, header, dims: dict) -> None:
    dtype, shape = header
    if np.dtype(dtype).name not in spec.dtypes:
        raise StateError(f"array {name!r}: dtype {np.dtype(dtype).name}, expected one of "
                         f"{list(spec.dtypes)}")
    if len(shape) != len(spec.shape):
        raise StateError(f"array {name!r}: {len(shape)} dimensions, expected {len(spec.shape)}")
    for axis, (want, got) in enumerate(zip(spec.shape, shape)):
        if isinstance(want, int) and got != want:
            raise StateError(f"array {name!r}: axis {axis} has size {got}, expected {want}")
        if isinstance(want, str):
            if want in dims and dims[want] != got:
                raise StateError(f"array {name!r}: axis {axis} has size {got}, expected "
                                 f"{want}={dims[want]}")
            dims[want] = got


def check_state(spec: dict, fields: dict, headers: dict, dims: dict | None = None,
                prefix: str = "") -> dict:
    """Validate a state against its spec before use.

    Parameters
    ----------
    spec : dict
        Piece name -> :class:`Arr` or JSON spec.
    fields : dict
        The JSON pieces (every non-array piece of ``spec`` must be present; no others).
    headers : dict
        Array name (``prefix + piece``) -> ``(dtype, shape)`` of the stored arrays.
    dims : dict, optional
        Known symbol sizes (e.g. ``{"n_llms": 5}``); updated with the symbols bound here.
    prefix : str
        Prefix of this spec's array names (nested states).

    Returns
    -------
    dict
        The JSON pieces converted to their declared types.

    Raises
    ------
    StateError
        Missing, extra or mistyped pieces, arrays of another dtype or shape.
    """
    dims = {} if dims is None else dims
    if not isinstance(fields, dict):
        raise StateError(f"{prefix or 'state'}: expected an object, got {type(fields).__name__}")
    json_names = {k for k, s in spec.items() if not isinstance(s, Arr)}
    extra = sorted(set(fields) - json_names)
    if extra:
        raise StateError(f"{prefix or 'state'}: undeclared field(s) {extra[:5]}")
    parts = tuple(prefix + k + "/" for k, s in spec.items() if isinstance(s, Part))
    for key in headers:
        if key.startswith(prefix) and not key.startswith(parts) \
                and not isinstance(spec.get(key[len(prefix):]), Arr):
            raise StateError(f"array {key!r} is not declared by the state")
    out = {}
    for name, s in spec.items():
        if isinstance(s, Part):
            value = fields.get(name)
            if value is None and s.optional:
                out[name] = None
                continue
            if not isinstance(value, dict):
                raise StateError(f"{prefix}{name}: expected an object, got {type(value).__name__}")
            out[name] = value
        elif isinstance(s, Arr):
            key = prefix + name
            if key not in headers:
                if s.optional:
                    continue
                raise StateError(f"array {key!r} is missing")
            _check_array(s, key, headers[key], dims)
        else:
            if name not in fields:
                raise StateError(f"{prefix}{name}: missing field")
            if isinstance(s, Size):
                n = check_value(INT, fields[name], prefix + name)
                if dims.setdefault(s.symbol, n) != n:
                    raise StateError(f"{prefix}{name}: {n}, expected {s.symbol}={dims[s.symbol]}")
                out[name] = n
                continue
            out[name] = check_value(s, fields[name], prefix + name)
            if isinstance(s, ListOf) and s.dim is not None:
                n = len(out[name])
                if dims.setdefault(s.dim, n) != n:
                    raise StateError(f"{prefix}{name}: {n} items, expected {s.dim}={dims[s.dim]}")
    return out


def check_indices(spec: dict, arrays: dict, dims: dict, prefix: str = "") -> None:
    """Check that every :class:`Arr` with ``index_of`` holds valid indices (after reading).

    Example
    -------
    >>> check_indices({"i": Arr("int64", (2,), index_of="n")}, {"i": np.array([0, 3])}, {"n": 3})
    Traceback (most recent call last):
    ...
    recsys_router.state.StateError: array 'i': index out of range [0, 3)
    """
    for name, s in spec.items():
        key = prefix + name
        if isinstance(s, Arr) and s.index_of is not None and key in arrays:
            a = arrays[key]
            n = dims.get(s.index_of)
            if n is None:
                raise StateError(f"array {key!r}: size {s.index_of} is unknown")
            if a.size and (int(a.min()) < 0 or int(a.max()) >= n):
                raise StateError(f"array {key!r}: index out of range [0, {n})")


_FINITE_BLOCK = 1 << 20


def check_finite(spec: dict, arrays: dict, prefix: str = "") -> None:
    """Refuse NaN and infinities in the float arrays of a state (after reading).

    Every float array named ``prefix + ...`` must hold finite numbers, except that an
    :class:`Arr` declared ``missing=True``, or an array a :class:`Part` lists in its
    ``missing``, may hold NaN (still no infinity). Arrays of a nested router (a
    :class:`Part` with ``router=True``) are left to that router's own check. Arrays are
    scanned in blocks, so the check needs little extra memory.

    Example
    -------
    >>> spec = {"w": Arr("float64", (2,)), "y": Arr("float64", (2,), missing=True)}
    >>> check_finite(spec, {"w": np.array([1.0, 2.0]), "y": np.array([np.nan, 0.5])})
    >>> check_finite(spec, {"w": np.array([1.0, np.nan])})
    Traceback (most recent call last):
    ...
    recsys_router.state.StateError: array 'w': 1 value(s) NaN or infinite; only finite numbers are allowed here
    """
    nested = tuple(prefix + k + "/" for k, s in spec.items() if isinstance(s, Part) and s.router)
    for key, a in arrays.items():
        if not key.startswith(prefix) or key.startswith(nested) or a.dtype.kind != "f":
            continue
        name = key[len(prefix):]
        declared, part = spec.get(name), spec.get(name.split("/", 1)[0])
        nan_ok = (isinstance(declared, Arr) and declared.missing) or \
            (isinstance(part, Part) and name.split("/", 1)[-1] in part.missing)
        flat, bad = a.reshape(-1), 0
        for s in range(0, flat.size, _FINITE_BLOCK):
            block = flat[s:s + _FINITE_BLOCK]
            bad += int(np.count_nonzero(np.isinf(block) if nan_ok else ~np.isfinite(block)))
        if bad:
            what = "infinite" if nan_ok else "NaN or infinite"
            allowed = "finite numbers or NaN (missing)" if nan_ok else "only finite numbers"
            raise StateError(f"array {key!r}: {bad} value(s) {what}; {allowed} are allowed here")


def collect_state(obj, spec: dict, prefix: str = "") -> tuple[dict, dict]:
    """Read the declared pieces of ``obj``: ``(json fields, {prefix + name: array})``."""
    fields, arrays = {}, {}
    for name, s in spec.items():
        if isinstance(s, Part):
            continue  # the family stores nested parts itself
        v = getattr(obj, name, None)
        if isinstance(s, Arr):
            if v is None:
                if not s.optional:
                    raise StateError(f"{type(obj).__name__}.{name} is None but declared required")
                continue
            arr = np.ascontiguousarray(np.asarray(v))
            if arr.dtype.name not in s.dtypes:
                arr = arr.astype(s.dtypes[0])
            arrays[prefix + name] = arr
        else:
            fields[name] = json_safe(v)
    return fields, arrays
