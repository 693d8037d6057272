"""The per-column checks and label codes of a long table (one row per query-LLM record).

Used by :func:`recsys_router.long_table.long_to_matrix` (and :class:`recsys_router.data.RoutingData`
through :func:`float32_matrix`); kept apart from the reshaping so each module stays small.
Every rejected value is reported with its row number (:func:`row_number`) and column.
:mod:`recsys_router.long_table` re-exports every name here, its public path.
"""

from __future__ import annotations

import logging
from typing import Callable, Union

import numpy as np
import pandas as pd

from .errors import DataValidationError
from .numeric import to_floats

__all__ = ["RowOffset", "row_number", "F32_MAX", "float32_matrix"]

# the records keep the logger name they always had (users filter on it)
log = logging.getLogger("recsys_router.long_table")


RowOffset = Union[int, Callable[[int], int]]


def row_number(index: int, row_offset: RowOffset = 0, column: str | None = None) -> int:
    """The row to report for the 0-based record ``index``: ``index + row_offset``, or
    ``row_offset(index)`` when it is a function (file lines of multi-line records); a
    function with a ``field_line(index, column)`` method gives the line of that column's
    field when ``column`` is known.

    Example
    -------
    >>> row_number(3, 2), row_number(3, lambda i: [2, 4, 5, 9][i])
    (5, 9)
    """
    if callable(row_offset):
        field_line = getattr(row_offset, "field_line", None)
        if field_line is not None and column is not None:
            return int(field_line(int(index), column))
        return int(row_offset(int(index)))
    return int(index) + int(row_offset)


F32_MAX = float(np.finfo(np.float32).max)


def _check_float32(values: np.ndarray, raw: pd.Series, name: str, source, row_offset) -> None:
    """Refuse finite values that float32 (the matrices' type) cannot hold: they would
    become infinite when stored."""
    with np.errstate(invalid="ignore"):
        big = np.abs(values) > F32_MAX
    if big.any():
        r = int(np.flatnonzero(big)[0])
        val = raw.iloc[r]
        val = val.item() if isinstance(val, np.generic) else val
        raise DataValidationError(f"{name} {val!r} is beyond the float32 range (|x| <= "
                                  f"{F32_MAX:.4g}) the matrices are stored in "
                                  f"({int(big.sum())} such records)", source=source,
                                  row=row_number(r, row_offset, name), column=name)


def float32_matrix(a, name: str, shape: tuple[int, int] | None, source: str | None) -> np.ndarray:
    """``a`` as a float32 (queries x LLMs) matrix; a finite value beyond the float32 range
    (it would become infinite) or a ragged, non-numeric or misshapen array is refused.

    Example
    -------
    >>> float32_matrix([[1, 2]], "scores", (1, 2), None).dtype
    dtype('float32')
    """
    try:
        arr = np.asarray(a)
        if arr.dtype != np.float32:
            wide = np.asarray(arr, dtype=np.float64)
            with np.errstate(over="ignore"):  # a finite value beyond float32 becomes inf here
                arr = wide.astype(np.float32)
            # the float64 check (full-size temporaries) only when some cast cell is infinite
            # or at the float32 limit (a value just beyond it rounds down to the limit);
            # fmax/fmin skip NaN, the unobserved cells
            if wide.ndim == 2 and arr.size and (np.fmax.reduce(arr, axis=None) >= F32_MAX
                                                or np.fmin.reduce(arr, axis=None) <= -F32_MAX):
                with np.errstate(invalid="ignore"):
                    big = np.isfinite(wide) & (np.abs(wide) > F32_MAX)
                if big.any():
                    i, j = np.argwhere(big)[0]
                    raise DataValidationError(
                        f"{name[:-1]} {float(wide[i, j])!r} at query index {i}, LLM index {j} is "
                        f"beyond the float32 range the matrices are stored in", source=source,
                        row=int(i), column=name)
    except (ValueError, TypeError) as err:
        if isinstance(err, DataValidationError):
            raise
        raise DataValidationError(f"{name} must be a rectangular numeric (queries x LLMs) array; "
                                  f"got ragged rows or non-numeric values ({err})", source=source,
                                  column=name) from err
    if arr.ndim != 2:
        raise DataValidationError(f"{name} must be a 2-D (queries x LLMs) array, got shape {arr.shape}",
                                  source=source, column=name)
    if shape is not None and arr.shape != shape:
        raise DataValidationError(f"{name} has shape {arr.shape}, expected {shape} (queries x LLMs)",
                                  source=source, column=name)
    return arr


def _check_labels(col: pd.Series, qcodes: np.ndarray, qids, name: str, labels: str, source,
                  row_offset: RowOffset) -> None:
    """A query whose records carry two different non-null ``task``/``split`` labels: raise
    naming both rows (``labels="error"``) or log and keep the first (``"first"``).

    Labels are compared as strings (``1`` and ``"1"`` are one label, ``1`` and ``1.0`` two),
    through integer codes: per query the smallest and largest label code, a clash where they
    differ; rows are only looked at when there is a clash.

    Example
    -------
    >>> col, qcodes = pd.Series([1, None, "1", "x", "y"]), np.array([0, 0, 0, 1, 1])
    >>> _check_labels(col[:4], qcodes[:4], ["q1", "q2"], "task", "error", None, 2)
    >>> _check_labels(col, qcodes, ["q1", "q2"], "task", "error", None, 2)
    Traceback (most recent call last):
    recsys_router.errors.DataValidationError: row 6, column 'task': query 'q2' has two different task labels, 'x' (row 5) and 'y' (1 such queries); a query carries one task: fix the file
    """
    has = col.notna().to_numpy()
    if not has.any():
        return
    if has.all():  # no copies of the column and the codes
        vcodes, strings = _label_codes(col)
        q = np.asarray(qcodes, dtype=np.intp)
    else:
        vcodes, strings = _label_codes(col[has])
        q = np.asarray(qcodes)[has].astype(np.intp)
    if name == "task":  # "math " would be a task of its own, missed by ood_tasks=["math"]
        _check_spellings(vcodes, strings, name, source, row_offset,
                         rows=None if has.all() else np.flatnonzero(has))
    nq = int(q.max()) + 1
    lo = np.full(nq, len(strings), dtype=np.intp)
    hi = np.full(nq, -1, dtype=np.intp)
    np.minimum.at(lo, q, vcodes)
    np.maximum.at(hi, q, vcodes)
    clash = lo < hi  # queries without a label keep lo > hi
    n = int(clash.sum())
    if not n:
        return
    if labels == "first":
        log.warning("%s: %d queries carry different %s labels on their records; kept the first "
                    "of each", source, n, name)
        return
    # the clashing query whose first label comes first; its first row and the first of its
    # rows with another label
    sel = np.flatnonzero(clash[q])
    i1 = sel[0]
    mine = sel[q[sel] == q[i1]]
    i2 = mine[vcodes[mine] != vcodes[i1]][0]
    rows = np.flatnonzero(has)
    r1, r2 = int(rows[i1]), int(rows[i2])
    v1, v2 = strings[vcodes[i1]], strings[vcodes[i2]]
    raise DataValidationError(
        f"query {qids[q[i1]]!r} has two different {name} labels, {v1!r} (row "
        f"{row_number(r1, row_offset, name)}) and {v2!r} ({n} such queries); a query carries one "
        f"{name}: fix the file", source=source, row=row_number(r2, row_offset, name), column=name)


def _as_string(vals: pd.Series) -> pd.Series:
    """Each label as the string it is compared by (object values through ``str``)."""
    return vals.astype(object).astype(str)


def _label_codes(vals: pd.Series) -> tuple[np.ndarray, list[str]]:
    """Integer codes of non-null labels, equal exactly where their strings
    (:func:`_as_string`) are equal, and the string of each code.

    Only the distinct values are turned into strings where equal values have equal strings
    (categories, numbers by their bits, all-string columns); other columns (mixed objects:
    ``1 == 1.0 == True`` but their strings differ) are stringified row by row.

    Example
    -------
    >>> _label_codes(pd.Series([1, "1", 1.0, True, "b", 1], dtype=object))
    (array([0, 0, 1, 2, 3, 0]), ['1', '1.0', 'True', 'b'])
    >>> _label_codes(pd.Series(["b", "a", "b"], dtype="category").cat.add_categories("z"))
    (array([1, 0, 1]), ['a', 'b'])
    """
    dtype = vals.dtype
    if isinstance(dtype, pd.CategoricalDtype):  # the used categories, as the column converts them
        codes = vals.cat.codes.to_numpy()
        used = np.flatnonzero(np.bincount(codes, minlength=len(dtype.categories)))
        cats = pd.Series(pd.Categorical.from_codes(used, dtype=dtype))
        lut = np.zeros(len(dtype.categories), dtype=np.intp)
        merged, uniques = pd.factorize(_as_string(cats).to_numpy(dtype=object))  # 1 and "1": one
        lut[used] = merged
        return lut[codes], [str(u) for u in uniques]
    if isinstance(dtype, pd.StringDtype) or (
            dtype == object and pd.api.types.infer_dtype(vals.to_numpy(), skipna=False) == "string"):
        codes, uniques = pd.factorize(vals)  # equal strings are equal labels
        return np.asarray(codes, dtype=np.intp), [str(u) for u in uniques]
    if isinstance(dtype, np.dtype) and (dtype.kind in "iub" or (dtype.kind == "f" and
                                                                 dtype.itemsize in (2, 4, 8))):
        raw = vals.to_numpy()
        if dtype.kind == "f":  # by bits: -0.0 is not 0.0 ("-0.0" vs "0.0")
            raw = raw.view(f"i{dtype.itemsize}")
        codes, uniques = pd.factorize(raw)
        if dtype.kind == "f":
            uniques = uniques.view(dtype)
        strings = _as_string(pd.Series(uniques, dtype=dtype)).to_numpy(dtype=object)
        merged, names = pd.factorize(strings)
        return np.asarray(merged, dtype=np.intp)[codes], [str(u) for u in names]
    # mixed objects and other types: the string of every label
    codes, uniques = pd.factorize(_as_string(vals).to_numpy(dtype=object))
    return np.asarray(codes, dtype=np.intp), [str(u) for u in uniques]


#: value types an id/label column refuses (they cannot be keys)
_NOT_SCALAR = (list, tuple, dict, set, np.ndarray)
#: ``pd.api.types.infer_dtype`` kinds of a column that holds none of those types
_SCALAR_KINDS = frozenset({"string", "bytes", "integer", "floating", "mixed-integer-float",
                           "decimal", "complex", "boolean", "empty"})


def _check_scalar(col: pd.Series, name: str, source, row_offset: RowOffset) -> None:
    """Refuse list, tuple, dict, set or array values in an id/label column (they cannot be
    keys), naming the first such row.

    No Python code runs per row: ``pd.api.types.infer_dtype`` (one pass in C) clears the
    usual columns of strings or of numbers; any other object column collects the set of its
    values' types (``set(map(type, values))``, a C loop) and checks each distinct type once. A
    value is refused by its type (a subclass counts), as ``isinstance`` would; only when some
    type is refused are the rows scanned, up to the first refused one.

    Example
    -------
    >>> _check_scalar(pd.Series(["a", 1, None], dtype=object), "query_id", "t.csv", 2)
    >>> _check_scalar(pd.Series(["a", 1, ["b"]], dtype=object), "query_id", "t.csv", 2)
    Traceback (most recent call last):
    ...
    recsys_router.errors.DataValidationError: t.csv, row 4, column 'query_id': list value "['b']"; expected a single string or number
    """
    if col.dtype != object:
        return
    values = col.to_numpy(dtype=object)
    if pd.api.types.infer_dtype(values, skipna=True) in _SCALAR_KINDS:
        return
    bad_types = {t for t in set(map(type, values)) if issubclass(t, _NOT_SCALAR)}
    if bad_types:
        r = next(i for i, v in enumerate(values) if type(v) in bad_types)
        raise DataValidationError(f"{type(col.iloc[r]).__name__} value {str(col.iloc[r])[:60]!r}; "
                                  f"expected a single string or number", source=source,
                                  row=row_number(r, row_offset, name), column=name)


def _numeric(col: pd.Series) -> np.ndarray:
    """Float array of a column (no copy for float columns); non-numbers become NaN, an
    integer too large for a float ``±inf`` (:func:`recsys_router.numeric.to_floats`)."""
    return to_floats(col)


def _boolean_rows(col: pd.Series) -> np.ndarray:
    """Mask of the records whose value is a boolean (``true``/``false`` in JSON, a parquet
    boolean column); the rows are only looked at when some value's type is a boolean.

    Example
    -------
    >>> _boolean_rows(pd.Series([1.5, True, None], dtype=object)).tolist()
    [False, True, False]
    """
    if col.dtype.kind == "b":  # numpy bool or pandas' nullable boolean
        return col.notna().to_numpy()
    if col.dtype != object:
        return np.zeros(len(col), dtype=bool)
    values = col.to_numpy(dtype=object)
    if not any(issubclass(t, (bool, np.bool_)) for t in set(map(type, values))):
        return np.zeros(len(col), dtype=bool)
    return np.fromiter((isinstance(v, (bool, np.bool_)) for v in values), dtype=bool,
                       count=len(values))


def _check_blank(codes: np.ndarray, labels: list[str], col: str, source, row_offset) -> None:
    """A whitespace-only ``query_id`` / ``model`` is an error at its record's row (checked on
    the unique labels, so once per distinct id).

    Example
    -------
    >>> _check_blank(np.array([0, 1]), ["a", "  "], "model", "f.csv", 2)
    Traceback (most recent call last):
    ...
    recsys_router.errors.DataValidationError: f.csv, row 3, column 'model': empty model '  '; expected a non-empty value on every record
    """
    blank = [k for k, v in enumerate(labels) if not str(v).strip()]
    if blank:
        r = int(np.flatnonzero(np.isin(codes, blank))[0])
        raise DataValidationError(f"empty {col} {labels[codes[r]]!r}; expected a non-empty "
                                  f"value on every record", source=source,
                                  row=row_number(r, row_offset, col), column=col)


_KINDS = {"query_id": "queries", "model": "LLMs", "task": "tasks"}


def _check_spellings(codes: np.ndarray, labels: list[str], col: str, source, row_offset,
                     rows: np.ndarray | None = None) -> None:
    """Refuse two distinct labels that are equal once surrounding whitespace is stripped and
    the text is put in Unicode NFC form (``"gpt-4"`` and ``"gpt-4 "``, a composed and a
    decomposed ``"café"``): they would load as two LLMs, queries or tasks. A label that
    collides with no other is kept as written.

    Only the distinct labels are normalised (vectorised string methods), so the cost is that
    of the unique ids, not of the records; ``rows`` maps an index of ``codes`` to its record
    (when ``codes`` covers only some records).

    Example
    -------
    >>> _check_spellings(np.array([0, 1, 0]), ["a", " b"], "model", "f.csv", 2)
    >>> _check_spellings(np.array([0, 1, 0, 2]), ["a", "b", "a "], "model", "f.csv", 2)
    Traceback (most recent call last):
    ...
    recsys_router.errors.DataValidationError: f.csv, row 5, column 'model': model 'a' (row 2) and 'a ' (row 5) are one spelling once surrounding whitespace is stripped and Unicode is NFC-normalised, so they would load as two different LLMs (1 such model spellings); write each one the same way
    """
    if len(labels) < 2:
        return
    uniq = pd.Series(labels, dtype=object)
    norm = uniq.str.strip().str.normalize("NFC")
    clash = norm.duplicated(keep=False).to_numpy()
    if not clash.any():
        return
    n = int(norm[clash].nunique())
    first = int(np.flatnonzero(clash)[0])
    second = int(np.flatnonzero(clash & (norm == norm.iloc[first]).to_numpy())[1])
    at = []
    for k in (first, second):
        i = int(np.flatnonzero(np.asarray(codes) == k)[0])
        at.append(row_number(int(rows[i]) if rows is not None else i, row_offset, col))
    raise DataValidationError(
        f"{col} {labels[first]!r} (row {at[0]}) and {labels[second]!r} (row {at[1]}) are one "
        f"spelling once surrounding whitespace is stripped and Unicode is NFC-normalised, so "
        f"they would load as two different {_KINDS.get(col, col + ' values')} ({n} such {col} "
        f"spellings); write each one the same way", source=source, row=at[1], column=col)
