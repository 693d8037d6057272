"""Long table (one row per query-LLM record) to a dense query x LLM matrix, vectorised.

Used by :meth:`recsys_router.data.RoutingData.from_long`; kept apart so the core type stays
small. Every rejected record is reported with its row number and column; the row numbering and
the per-column checks are in :mod:`recsys_router.long_columns`.
"""

from __future__ import annotations

import logging
import os

import numpy as np
import pandas as pd

from .errors import DataValidationError
# row numbering and the per-column checks live in long_columns; re-exported here (their
# public path, and the private helpers the benchmarks and tests import)
from .long_columns import (F32_MAX, RowOffset, _NOT_SCALAR, _SCALAR_KINDS,  # noqa: F401
                           _as_string, _boolean_rows, _check_blank, _check_float32,
                           _check_labels, _check_scalar, _check_spellings, _label_codes,
                           _numeric, float32_matrix, row_number)
from .long_ids import factorize_ids
from .numeric import shown

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
        Ids become strings as :func:`recsys_router.long_ids.factorize_ids` spells them (a
        number and a text spelling one id are refused). A boolean ``cost`` is refused (a
        cost is an amount in USD); a boolean ``score`` is read as 1.0 (true) or 0.0 (false),
        a correct/incorrect outcome.
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
        flags = _boolean_rows(df["cost"])  # a price in USD: true/false would be $1/$0
        if flags.any():
            r = int(np.flatnonzero(flags)[0])
            raise DataValidationError(f"cost {shown(df['cost'].iloc[r])} is a boolean; expected a "
                                      f"number >= 0 (a cost in USD, not true/false; "
                                      f"{int(flags.sum())} such records)", source=source,
                                      row=row_number(r, row_offset, "cost"), column="cost")
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
    qcodes, qids = factorize_ids(df["query_id"], "query_id", source, row_offset)
    _check_blank(qcodes, qids, "query_id", source, row_offset)
    _check_spellings(qcodes, qids, "query_id", source, row_offset)
    mcodes_raw, mnames = factorize_ids(df["model"], "model", source, row_offset)
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
