"""The ``query_id`` and ``model`` columns of a long table as integer codes and id strings.

Used by :func:`recsys_router.long_table.long_to_matrix`. An id is the string of its value:
a text as written, an integer in full (``9007199254740993``, never through a float), a float
as Python writes it (``0.5``, ``1.0``). Two different values never become one id: ``1``,
``1.0`` and ``True`` (equal in Python) are the ids ``'1'``, ``'1.0'`` and ``'True'``; two
values of different kinds that would spell one id (the number ``1`` and the text ``"1"`` in
a JSON-lines file) are refused, naming both rows, rather than merged.
"""

from __future__ import annotations

import numbers

import numpy as np
import pandas as pd

from .errors import DataValidationError
from .long_columns import RowOffset, row_number

__all__ = ["factorize_ids"]

#: ``pd.api.types.infer_dtype`` kinds of an object column whose equal values have equal
#: strings and whose distinct values distinct strings (no mixing of kinds)
_ONE_KIND = frozenset({"string", "integer"})


def _kind(t: type) -> str:
    """The kind of an id value's type, in words (for telling apart values of one string)."""
    if issubclass(t, (bool, np.bool_)):
        return "a boolean"
    if issubclass(t, numbers.Integral):
        return "an integer"
    if issubclass(t, numbers.Real):
        return "a number"
    if issubclass(t, str):
        return "a text"
    return f"a {t.__name__}"


def factorize_ids(col: pd.Series, name: str = "query_id", source: str | None = None,
                  row_offset: RowOffset = 0) -> tuple[np.ndarray, list[str]]:
    """Integer codes (order of first appearance) and the id string of each code.

    Parameters
    ----------
    col : pandas.Series
        The ids, none missing (the caller refuses empty ones first).
    name, source, row_offset
        The column, file and row numbering (:func:`~recsys_router.long_columns.row_number`)
        an error names.

    Only the distinct values are turned into strings for text, integer, float and
    categorical columns; an object column mixing kinds (numbers and texts, as a JSON-lines
    file may) is turned into strings row by row. A categorical column keeps its category
    order (unused categories dropped) and reuses its codes.

    Raises
    ------
    DataValidationError
        Two values of different kinds would spell one id (``1`` and ``"1"``, ``True`` and
        ``"True"``); the message names the first row of each.

    Example
    -------
    >>> factorize_ids(pd.Series([1, 1.0, True, "a", 1], dtype=object))
    (array([0, 1, 2, 3, 0]), ['1', '1.0', 'True', 'a'])
    >>> factorize_ids(pd.Series([1, "x", "1"], dtype=object), "query_id", "d.jsonl", 1)
    Traceback (most recent call last):
    ...
    recsys_router.errors.DataValidationError: d.jsonl, row 3, column 'query_id': query_id 1 (row 1, an integer) and '1' (row 3, a text) are different values that would be one id '1'; write every query_id the same way (all as texts, or all as numbers)
    """
    if isinstance(col.dtype, pd.CategoricalDtype):
        codes = col.cat.codes.to_numpy()
        used = np.bincount(codes, minlength=len(col.cat.categories)) > 0
        labels = pd.Index(col.cat.categories[used]).astype(str).tolist()
        if len(set(labels)) == len(labels):
            if used.all():
                return codes, labels
            remap = (np.cumsum(used) - 1).astype(np.int64)
            return remap[codes], labels
        col = col.astype(object)
    if col.dtype.kind == "f":  # by bits: -0.0 and 0.0 are two ids, as their strings are
        raw = col.to_numpy()
        codes, uniques = pd.factorize(raw.view(f"i{raw.dtype.itemsize}"), sort=False)
        return np.asarray(codes), pd.Index(uniques.view(raw.dtype)).astype(str).tolist()
    codes, uniques = pd.factorize(col, sort=False)
    # the kinds of every value (one pass in C): the uniques alone hide 1.0 merged into 1
    if col.dtype != object or pd.api.types.infer_dtype(col, skipna=False) in _ONE_KIND:
        labels = pd.Index(uniques).astype(str).tolist()
        if len(set(labels)) == len(labels):
            return np.asarray(codes), labels
    # mixed kinds: pandas holds 1 == 1.0 == True as one value, so go by each row's string
    values = col.to_numpy(dtype=object)
    codes, uniques = pd.factorize(np.array([str(v) for v in values], dtype=object), sort=False)
    tcodes, types = pd.factorize(pd.Series(list(map(type, values)), dtype=object), sort=False)
    kinds_of_type = [_kind(t) for t in types]
    kcodes, kinds = pd.factorize(np.array(kinds_of_type, dtype=object)[tcodes], sort=False)
    pairs, pair_vals = pd.factorize(np.asarray(codes, dtype=np.int64) * len(kinds) + kcodes,
                                    sort=False)
    if len(pair_vals) > len(uniques):
        _refuse_mixed(values, codes, pairs, pair_vals // len(kinds), list(uniques),
                      [kinds[k] for k in pair_vals % len(kinds)], name, source, row_offset)
    return np.asarray(codes), [str(u) for u in uniques]


def _refuse_mixed(values, codes, pairs, pair_string, labels, pair_kind, name, source,
                  row_offset) -> None:
    """Raise for the first id string held by values of two kinds, naming the first row of
    each kind."""
    seen = pd.Series(pair_string).duplicated().to_numpy()
    p2 = int(np.flatnonzero(seen)[0])              # first (string, kind) whose string came before
    p1 = int(np.flatnonzero(pair_string == pair_string[p2])[0])
    r1, r2 = (int(np.flatnonzero(pairs == p)[0]) for p in (p1, p2))
    v1, v2 = (v.item() if isinstance(v, np.generic) else v for v in (values[r1], values[r2]))
    at1, at2 = row_number(r1, row_offset, name), row_number(r2, row_offset, name)
    raise DataValidationError(
        f"{name} {v1!r} (row {at1}, {pair_kind[p1]}) and {v2!r} (row {at2}, {pair_kind[p2]}) "
        f"are different values that would be one id {labels[pair_string[p2]]!r}; write every "
        f"{name} the same way (all as texts, or all as numbers)", source=source, row=at2,
        column=name)
