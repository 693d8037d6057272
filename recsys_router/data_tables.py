"""The construction checks of :class:`~recsys_router.data.RoutingData`: its queries and LLM
tables, and the values of its score and cost matrices.

Kept apart from the data type itself so that :mod:`recsys_router.data` stays small; every
error names the source, row and column and says what was expected.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .errors import DataValidationError

__all__ = ["query_table", "llm_table", "check_values"]


def query_table(queries, source) -> pd.DataFrame:
    """The queries table of a :class:`~recsys_router.data.RoutingData`, checked.

    Parameters
    ----------
    queries : pandas.DataFrame or sequence of str
        One row per query with column ``query_id``; a sequence is taken as query ids.
    source : str or None
        File or folder named in the errors.

    Returns
    -------
    pandas.DataFrame
        A copy with string ``query_id`` (non-empty, unique) and the ``text``, ``task`` and
        ``split`` columns (None where absent).

    Example
    -------
    >>> query_table(["q1", "q2"], None).columns.tolist()
    ['query_id', 'text', 'task', 'split']
    """
    if not isinstance(queries, pd.DataFrame):
        queries = pd.DataFrame({"query_id": list(queries)})
    else:
        queries = queries.reset_index(drop=True).copy()
    if "query_id" not in queries.columns:
        raise DataValidationError("queries table has no 'query_id' column", source=source,
                                  column="query_id")
    ids = queries["query_id"]
    empty = (ids.isna() | (ids.astype(str).str.strip() == "")).to_numpy()
    if empty.any():
        row = int(np.flatnonzero(empty)[0])
        raise DataValidationError("missing query_id; expected a non-empty id", source=source,
                                  row=row, column="query_id")
    queries["query_id"] = ids.astype(str)
    dup = queries["query_id"].duplicated()
    if dup.any():
        row = int(np.flatnonzero(dup.to_numpy())[0])
        raise DataValidationError(
            f"duplicate query_id {queries['query_id'].iloc[row]!r}; expected unique query ids",
            source=source, row=row, column="query_id")
    for col in ("text", "task", "split"):
        if col not in queries.columns:
            queries[col] = None
    return queries


def llm_table(llms, source) -> pd.DataFrame:
    """The LLM table of a :class:`~recsys_router.data.RoutingData`, checked.

    Parameters
    ----------
    llms : pandas.DataFrame or sequence of str
        One row per LLM with column ``name``; a sequence is taken as names.
    source : str or None
        File or folder named in the errors.

    Returns
    -------
    pandas.DataFrame
        A copy with string ``name`` (non-empty, unique), float ``input_price``,
        ``output_price`` and ``size`` (finite and >= 0, or NaN = unknown) and a
        ``description`` column.

    Example
    -------
    >>> llm_table(pd.DataFrame({"name": ["a"], "size": ["-1"]}), "llms.csv")
    Traceback (most recent call last):
    ...
    recsys_router.errors.DataValidationError: llms.csv, row 0, column 'size': negative size -1.0 for LLM 'a'; expected >= 0
    """
    if not isinstance(llms, pd.DataFrame):
        llms = pd.DataFrame({"name": list(llms)})
    else:
        llms = llms.reset_index(drop=True).copy()
    if "name" not in llms.columns:
        raise DataValidationError("LLM table has no 'name' column", source=source, column="name")
    empty = (llms["name"].isna() | (llms["name"].astype(str).str.strip() == "")).to_numpy()
    if empty.any():
        row = int(np.flatnonzero(empty)[0])
        raise DataValidationError("missing LLM name; expected a non-empty name", source=source,
                                  row=row, column="name")
    llms["name"] = llms["name"].astype(str)
    dup = llms["name"].duplicated()
    if dup.any():
        row = int(np.flatnonzero(dup.to_numpy())[0])
        raise DataValidationError(f"duplicate LLM name {llms['name'].iloc[row]!r}", source=source,
                                  row=row, column="name")
    for col in ("input_price", "output_price", "size"):
        if col not in llms.columns:
            llms[col] = np.nan
        raw = llms[col]
        num = pd.to_numeric(raw, errors="coerce").astype(float)
        bad = (num.isna() & raw.notna()) | np.isinf(num) | (num < 0)
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            val = raw.iloc[row]
            val = val.item() if isinstance(val, np.generic) else val
            msg = (f"negative {col} {num.iloc[row]} for LLM {llms['name'].iloc[row]!r}; "
                   f"expected >= 0" if num.iloc[row] < 0 else
                   f"{col} {val!r} for LLM {llms['name'].iloc[row]!r} is not a finite "
                   f"number >= 0 (missing = unknown)")
            raise DataValidationError(msg, source=source, row=row, column=col)
        llms[col] = num
    if "description" not in llms.columns:
        llms["description"] = None
    return llms


def check_values(data, require_observed: bool) -> None:
    """Refuse an infinite score, an infinite or negative cost and (``require_observed``) a
    query or an LLM without any observed score, naming the query, LLM and row.

    Parameters
    ----------
    data : RoutingData
        Its ``scores``, ``costs``, ``source``, ids and names are read.
    require_observed : bool
    """
    s, src = data.scores, data.source
    inf = np.isinf(s)
    if inf.any():
        i, j = np.argwhere(inf)[0]
        raise DataValidationError(
            f"non-finite score {s[i, j]} for query {data.query_ids[i]!r} and LLM "
            f"{data.llm_names[j]!r}; expected a finite number (NaN = not observed)",
            source=src, row=int(i), column=data.llm_names[j])
    if data.costs is not None:
        c = data.costs
        bad = np.isinf(c) | (c < 0)
        if bad.any():
            i, j = np.argwhere(bad)[0]
            raise DataValidationError(
                f"invalid cost {c[i, j]} for query {data.query_ids[i]!r} and LLM "
                f"{data.llm_names[j]!r}; expected a finite cost >= 0", source=src, row=int(i),
                column=f"{data.llm_names[j]}|cost")
    if require_observed:
        obs = data.observed
        q_empty = ~obs.any(axis=1)
        if q_empty.any():
            i = int(np.flatnonzero(q_empty)[0])
            raise DataValidationError(f"query {data.query_ids[i]!r} has no observed score "
                                      f"({int(q_empty.sum())} such queries)", source=src, row=i)
        l_empty = ~obs.any(axis=0)
        if l_empty.any():
            j = int(np.flatnonzero(l_empty)[0])
            raise DataValidationError(f"LLM {data.llm_names[j]!r} has no observed score "
                                      f"({int(l_empty.sum())} such LLMs)", source=src,
                                      column=data.llm_names[j])
