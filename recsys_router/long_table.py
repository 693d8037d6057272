"""Long table (one row per query-LLM record) to a dense query x LLM matrix, vectorised.

Used by :meth:`recsys_router.data.RoutingData.from_long`; kept apart so the core type stays
small. Every rejected record is reported with its row number and column.
"""

from __future__ import annotations

import logging
import os
from typing import Callable, Union

import numpy as np
import pandas as pd

from .errors import DataValidationError
from .numeric import shown, to_floats

__all__ = ["DUPLICATE_MODES", "long_to_matrix", "matrix_to_long", "cell_limit", "MIN_CELLS",
           "CELLS_PER_RECORD", "LONG_RESERVED", "RowOffset", "row_number", "float32_matrix"]

log = logging.getLogger(__name__)

DUPLICATE_MODES = ("error", "mean", "first", "last")
# a long table may span at most max(MIN_CELLS, CELLS_PER_RECORD x records) matrix cells, so the
# memory of the dense matrices grows linearly with the file, whatever its ids
MIN_CELLS = 1 << 22            # 4.2M cells: 16 MB per float32 matrix
CELLS_PER_RECORD = 64          # density >= 1/64 above that
MAX_CELLS_ENV = "RECSYS_ROUTER_MAX_CELLS"
# names a query column cannot keep in a long table: the record columns and the aliases the
# generic reader maps onto a record column, the text or the task
LONG_RESERVED = ("model", "score", "cost", "query_text", "llm", "prompt", "category", "eval_name")


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


def cell_limit(n_records: int, max_cells: int | None = None) -> int:
    """The largest dense queries x LLMs matrix a long table of ``n_records`` may build.

    ``max_cells`` (or the environment variable ``RECSYS_ROUTER_MAX_CELLS``) sets it
    explicitly; the default ``max(MIN_CELLS, CELLS_PER_RECORD * n_records)`` keeps memory
    linear in the records: a few thousand records naming thousands of distinct queries and
    LLMs (a nearly empty matrix of millions of cells) are refused instead of allocated.

    Example
    -------
    >>> cell_limit(10) == MIN_CELLS, cell_limit(1_000_000), cell_limit(10, max_cells=50)
    (True, 64000000, 50)
    """
    if max_cells is None and os.environ.get(MAX_CELLS_ENV):
        raw = os.environ[MAX_CELLS_ENV]
        try:
            max_cells = int(raw)
        except ValueError:
            raise ValueError(f"{MAX_CELLS_ENV}={raw!r}: expected a whole number of cells") from None
    if max_cells is not None:
        if isinstance(max_cells, bool) or not isinstance(max_cells, (int, np.integer)) or max_cells < 1:
            raise ValueError(f"max_cells must be a positive whole number, got {max_cells!r}")
        return int(max_cells)
    return max(MIN_CELLS, CELLS_PER_RECORD * int(n_records))


def long_to_matrix(df: pd.DataFrame, *, duplicates: str = "error", llms: pd.DataFrame | None = None,
                   name: str = "data", source: str | None = None, row_offset: RowOffset = 0,
                   max_cells: int | None = None, labels: str = "error"):
    """Pivot a validated long table into query/LLM tables and score/cost matrices.

    Parameters
    ----------
    df : pandas.DataFrame
        Columns ``query_id``, ``model``, ``score``; optional ``cost`` and per-query columns.
    duplicates : {"error", "mean", "first", "last"}
        Handling of repeated (query, LLM) records.
    llms : pandas.DataFrame, optional
        A checked LLM table (column ``name``) fixing the LLM order.
    name, source : str
        Used in log lines and error messages.
    row_offset : int or callable
        Added to row numbers in error messages, or a function mapping a 0-based record
        index to the row to report (e.g. the file line of a multi-line CSV record).
    max_cells : int, optional
        Refuse tables whose ids span more cells than this (default :func:`cell_limit`).
    labels : {"error", "first"}
        A query whose records carry two different ``task`` or ``split`` labels: raise
        naming both rows, or keep the first (logged).

    Returns
    -------
    tuple
        ``(queries, llm_table, scores, costs, n_duplicates)``; ``costs`` is None without a
        ``cost`` column.

    Example
    -------
    >>> df = pd.DataFrame({"query_id": ["a", "b"], "model": ["x", "x"], "score": [1.0, 0.0]})
    >>> long_to_matrix(df)[2].tolist()
    [[1.0], [0.0]]
    """
    if duplicates not in DUPLICATE_MODES:
        raise ValueError(f"duplicates must be one of {DUPLICATE_MODES}, got {duplicates!r}")
    if labels not in ("error", "first"):
        raise ValueError(f"labels must be 'error' or 'first', got {labels!r}")
    for col in ("query_id", "model", "score"):
        if col not in df.columns:
            raise DataValidationError(f"missing required column {col!r}; columns present: "
                                      f"{list(df.columns)}", source=source, column=col)
    if len(df) == 0:
        raise DataValidationError("no records: the table is empty", source=source)
    for col in ("query_id", "model"):
        na = df[col].isna().to_numpy()
        if na.any():
            raise DataValidationError(f"empty {col}; expected a value on every record",
                                      source=source, column=col,
                                      row=row_number(int(np.flatnonzero(na)[0]), row_offset, col))
    score = _numeric(df["score"])
    bad = ~np.isfinite(score)
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        raise DataValidationError(f"score {shown(df['score'].iloc[r])} is not a finite number "
                                  f"({int(bad.sum())} such records)", source=source,
                                  row=row_number(r, row_offset, "score"), column="score")
    _check_float32(score, df["score"], "score", source, row_offset)
    cost = None
    if "cost" in df.columns:
        cost = _numeric(df["cost"])
        badc = np.isinf(cost) | (cost < 0)
        if df["cost"].dtype.kind != "f":  # a non-numeric entry was coerced to NaN
            badc |= np.isnan(cost) & df["cost"].notna().to_numpy()
        if badc.any():
            r = int(np.flatnonzero(badc)[0])
            raise DataValidationError(f"cost {shown(df['cost'].iloc[r])} is not a number >= 0",
                                      source=source, row=row_number(r, row_offset, "cost"),
                                      column="cost")
        _check_float32(cost, df["cost"], "cost", source, row_offset)
    for col in ("query_id", "model", "task", "split"):
        if col in df.columns:
            _check_scalar(df[col], col, source, row_offset)
    qcodes, qids = _factorize_str(df["query_id"])
    _check_blank(qcodes, qids, "query_id", source, row_offset)
    _check_spellings(qcodes, qids, "query_id", source, row_offset)
    mcodes_raw, mnames = _factorize_str(df["model"])
    _check_blank(mcodes_raw, mnames, "model", source, row_offset)
    _check_spellings(mcodes_raw, mnames, "model", source, row_offset)
    if llms is not None:
        names = pd.Index(llms["name"])
        lookup = names.get_indexer(mnames)
        if (lookup < 0).any():
            bad = int(np.flatnonzero(lookup < 0)[0])
            r = int(np.flatnonzero(mcodes_raw == bad)[0])
            raise DataValidationError(f"LLM {mnames[bad]!r} is not in the LLM table",
                                      source=source, row=row_number(r, row_offset, "model"),
                                      column="model")
        mcodes = lookup[mcodes_raw]
        llm_table = llms
    else:
        mcodes, names = mcodes_raw, mnames
        llm_table = pd.DataFrame({"name": list(names)})
    nq, nl = len(qids), len(names)
    limit = cell_limit(len(df), max_cells)
    if nq * nl > limit:
        raise DataValidationError(
            f"{len(df):,} records name {nq:,} queries x {nl:,} LLMs = {nq * nl:,} matrix cells "
            f"(density {len(df) / (nq * nl):.2g}); more than the limit of {limit:,} cells for a "
            f"dense matrix. If the ids are right, raise the limit with the {MAX_CELLS_ENV} "
            f"environment variable (every loader) or, for the generic long-table loader, its "
            f"option max_cells (-o max_cells=N)", source=source)
    flat = qcodes.astype(np.int64)
    flat *= nl
    flat += mcodes
    scores = np.full(nq * nl, np.nan, dtype=np.float32)
    scores[flat] = score  # scores are finite, so #observed cells < #records iff duplicates
    n_dup = int(len(flat) - np.count_nonzero(~np.isnan(scores)))
    costs = None if cost is None else np.full(nq * nl, np.nan, dtype=np.float32)
    if n_dup:
        cnt = np.bincount(flat, minlength=nq * nl)
        if duplicates == "error":
            rows = np.flatnonzero(cnt[flat] > 1)          # every record of a repeated cell
            first_seen = np.full(nq * nl, len(flat), dtype=np.int64)
            np.minimum.at(first_seen, flat[rows], rows)
            second = int(rows[np.flatnonzero(first_seen[flat[rows]] != rows)[0]])
            first = int(first_seen[flat[second]])
            raise DataValidationError(
                f"duplicate record for query {qids[qcodes[second]]!r} and LLM "
                f"{names[mcodes[second]]!r} (also at row {row_number(first, row_offset)}); pass "
                f"duplicates='mean'|'first'|'last' to merge ({n_dup} duplicate records)",
                source=source, row=row_number(second, row_offset))
        log.info("%s: merged %d duplicate (query, LLM) records with duplicates=%r",
                 source or name, n_dup, duplicates)
        has = cnt > 0
        if duplicates == "mean":
            scores[has] = np.bincount(flat, weights=score, minlength=nq * nl)[has] / cnt[has]
            if cost is not None:
                ccnt = np.bincount(flat, weights=~np.isnan(cost), minlength=nq * nl)
                csum = np.bincount(flat, weights=np.nan_to_num(cost), minlength=nq * nl)
                ok = ccnt > 0
                costs[ok] = csum[ok] / ccnt[ok]
        else:  # the winning record of each cell: its first or last row
            rows = np.arange(len(flat), dtype=np.int64)
            if duplicates == "first":
                win = np.full(nq * nl, len(flat), dtype=np.int64)
                np.minimum.at(win, flat, rows)
            else:
                win = np.full(nq * nl, -1, dtype=np.int64)
                np.maximum.at(win, flat, rows)
            cells = np.flatnonzero(has)
            scores[cells] = score[win[cells]]
            if cost is not None:
                costs[cells] = cost[win[cells]]
    elif cost is not None:
        costs[flat] = cost
    # per-query columns: first non-null value per query ("query_text", the interchange
    # name written by to_long, is read as "text")
    if "query_text" in df.columns and "text" not in df.columns:
        df = df.rename(columns={"query_text": "text"})
    for col in ("task", "split"):
        if col in df.columns:
            _check_labels(df[col], qcodes, qids, col, labels, source, row_offset)
    qcols = [c for c in df.columns if c not in ("query_id", "model", "score", "cost")]
    queries = pd.DataFrame({"query_id": list(qids)})
    if qcols:  # one grouped pass over every per-query column (every code 0..nq-1 occurs)
        firsts = df[qcols].groupby(qcodes, sort=True).first().reset_index(drop=True)
        queries = pd.concat([queries, firsts], axis=1)
    return (queries, llm_table, scores.reshape(nq, nl),
            None if costs is None else costs.reshape(nq, nl), n_dup)


def matrix_to_long(queries: pd.DataFrame, names, scores: np.ndarray, costs: np.ndarray | None,
                   *, source: str = "data") -> pd.DataFrame:
    """Long table of the observed cells of a query x LLM matrix (the inverse of
    :func:`long_to_matrix`).

    Columns ``query_id``, ``model``, ``score`` (and ``cost``), then every query column that
    has a value (``text`` written as ``query_text``). A query column whose name is in
    :data:`LONG_RESERVED` (a record column, or an alias the generic reader maps onto one or
    onto the text/task) is written as ``query_<name>`` (more ``query_`` prefixes until the
    name is free) and a warning is logged: it never overwrites a record column. Queries and
    LLMs with no observed score have no record, nor has a cost on a cell whose score is
    unobserved (:func:`recsys_router.datasets.generic.long_losses` reports each of these).

    Example
    -------
    >>> q = pd.DataFrame({"query_id": ["q1", "q2"], "model": ["j", "k"]})
    >>> matrix_to_long(q, ["a"], np.array([[1.0], [np.nan]]), None).values.tolist()
    [['q1', 'a', 1.0, 'j']]
    """
    i, j = np.nonzero(~np.isnan(scores))
    out = pd.DataFrame({"query_id": queries["query_id"].to_numpy()[i],
                        "model": np.asarray(names, dtype=object)[j], "score": scores[i, j]})
    if costs is not None:
        out["cost"] = costs[i, j]
    cols = [c for c in queries.columns if c != "query_id" and not queries[c].isna().all()]
    taken = {"query_id", "model", "score", "cost"} | {"query_text" if c == "text" else str(c)
                                                      for c in cols}
    for col in cols:
        target = "query_text" if col == "text" else col
        if col != "text" and target in LONG_RESERVED:
            while target in taken:
                target = f"query_{target}"
            taken.add(target)
            log.warning("%s: the query column %r has the name of a long-table record column; "
                        "written as %r", source, col, target)
        out[target] = queries[col].to_numpy()[i]
    return out


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


def _factorize_str(col: pd.Series) -> tuple[np.ndarray, list[str]]:
    """Integer codes and string labels of a column, without stringifying every row.

    Labels are factorized as they are and only the uniques are turned into ``str``; if two
    distinct raw values share a string form (``1`` and ``"1"``) the column is re-factorized
    on its string form so that they merge. A categorical column keeps its category order
    (unused categories are dropped) and reuses its codes, which is much faster.
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
    codes, uniques = pd.factorize(col, sort=False)
    labels = pd.Index(uniques).astype(str).tolist()
    if len(set(labels)) != len(labels):
        codes, uniques = pd.factorize(col.astype(str), sort=False)
        labels = pd.Index(uniques).astype(str).tolist()
    return np.asarray(codes), labels
