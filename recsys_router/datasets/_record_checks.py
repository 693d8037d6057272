"""Checks of a long table's per-record columns, run by
:func:`~recsys_router.datasets.generic.frame_to_data` before the matrices are built:
``query_text`` must be a string or missing, one query id carries one text (or
``texts="first"|"longest"`` picks one, :data:`TEXT_MODES`), and a logged-feedback table's
``propensity`` is a number in (0, 1], not a boolean and not below
:data:`~recsys_router.numeric.PROPENSITY_FLOOR`, on every record or on none. Every error is a
:class:`~recsys_router.errors.DataValidationError` naming the file, the row a user sees
(:func:`~recsys_router.long_table.row_number`) and the column.

A helper of the generic loader (the leading underscore keeps the dataset registry from
importing it as a format); :data:`TEXT_MODES` is re-exported by
:mod:`recsys_router.datasets.generic`.
"""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from ..errors import DataValidationError
from ..long_columns import _boolean_rows
from ..long_table import RowOffset, row_number
from ..numeric import PROPENSITY_FLOOR

__all__ = ["TEXT_MODES", "check_texts", "check_text_types", "check_propensity"]

log = logging.getLogger(__name__)

TEXT_MODES = ("error", "first", "longest")


def check_texts(df: pd.DataFrame, source: str, offset: RowOffset,
                 texts: str = "error") -> pd.DataFrame:
    """Resolve queries whose rows carry different non-null texts.

    ``texts="error"`` raises naming both rows and the ``texts`` option; ``"first"`` keeps the
    first text of each query (file order), ``"longest"`` the longest one (the first of equal
    length). Returns the frame with one text per query id.
    """
    if texts not in TEXT_MODES:
        raise ValueError(f"texts must be one of {'|'.join(TEXT_MODES)}, got {texts!r}")
    if "query_text" not in df.columns:
        return df
    sub = df[["query_id", "query_text"]]
    sub = sub[sub["query_text"].notna()]
    uniq = sub.drop_duplicates()
    dup = uniq["query_id"].duplicated(keep=False)
    if not dup.any():
        return df
    n_ids = int(uniq.loc[dup, "query_id"].nunique())
    if texts == "error":
        qid = uniq.loc[dup, "query_id"].iloc[0]
        rows = uniq.index[(uniq["query_id"] == qid).to_numpy()][:2]
        r1, r2 = (row_number(int(r), offset, "query_text") for r in rows)
        raise DataValidationError(
            f"query {qid!r} has two different texts (rows {r1} and {r2}; {n_ids} such query ids); "
            f"a query id must carry one text: fix the file or pass -o texts=first|longest "
            f"(texts='first'|'longest') to keep the first or the longest text",
            source=source, row=r2, column="query_text")
    log.warning("%s: %d query ids have differing texts; kept the %s text of each (texts=%r)",
                source, n_ids, texts, texts)
    if texts == "first":  # RoutingData keeps the first non-null value per query
        return df
    lengths = uniq["query_text"].astype(str).str.len().to_numpy()
    order = uniq.iloc[pd.Series(-lengths).argsort(kind="stable").to_numpy()]
    longest = order.drop_duplicates("query_id").set_index("query_id")["query_text"]
    df = df.copy()
    has = df["query_text"].notna()
    df.loc[has, "query_text"] = df.loc[has, "query_id"].map(longest)
    return df


def check_text_types(df: pd.DataFrame, source: str, offset: RowOffset) -> None:
    """Each ``query_text`` is a string or missing: a number, boolean, list or object is
    refused naming its row."""
    if "query_text" not in df.columns:
        return
    col = df["query_text"]
    if pd.api.types.is_string_dtype(col.dtype) and col.dtype != object:
        return  # a string column (pandas 3 CSV): nothing else can be in it
    ok = col.map(lambda v: isinstance(v, str) or v is None or v is pd.NA
                 or (isinstance(v, float) and v != v)).to_numpy(dtype=bool)
    if not ok.all():
        r = int(np.flatnonzero(~ok)[0])
        v = col.iloc[r]
        raise DataValidationError(f"query_text must be a string or null, got "
                                  f"{type(v).__name__} {str(v)[:60]!r}", source=source,
                                  row=row_number(r, offset, "query_text"), column="query_text")


def check_propensity(df: pd.DataFrame, source: str, offset: RowOffset) -> None:
    """A logged-feedback table's ``propensity``: every given value a number in (0, 1] (not a
    boolean, not below :data:`~recsys_router.numeric.PROPENSITY_FLOOR`, 1e-12, whose inverse
    or its square overflows), and given on every record or on none; an error names the file
    line and the raw value.

    Example
    -------
    >>> df = pd.DataFrame({"propensity": ["0.5", "50%"]})
    >>> check_propensity(df, "log.csv", 2)
    Traceback (most recent call last):
    ...
    recsys_router.errors.DataValidationError: log.csv, row 3, column 'propensity': propensity '50%' is not a number; expected one in (0, 1]; it is the logging policy's probability of the logged choice
    """
    if "propensity" not in df.columns:
        return
    raw = df["propensity"]
    given = raw.notna().to_numpy() & (raw.astype(str).str.strip() != "").to_numpy()
    if not given.any():
        return
    v = pd.to_numeric(raw.where(given), errors="coerce").to_numpy(dtype=np.float64)
    flags = _boolean_rows(raw)    # true/false would read as 1/0
    with np.errstate(invalid="ignore"):
        bad = ~given | flags | ~(np.isfinite(v) & (v >= PROPENSITY_FLOOR) & (v <= 1))
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        val = raw.iloc[r]
        val = val.item() if isinstance(val, np.generic) else val
        what = ("no propensity on this record while other records have one" if not given[r]
                else f"propensity {val!r} is a boolean, not a number in (0, 1]" if flags[r]
                else f"propensity {val!r} is not a number; expected one in (0, 1]"
                if np.isnan(v[r]) else
                f"propensity {val!r} is below {PROPENSITY_FLOOR:g}, the smallest accepted "
                "(its importance weight 1/p or that weight's square would overflow)"
                if 0 < v[r] < PROPENSITY_FLOOR else f"propensity {val!r} must be in (0, 1]")
        raise DataValidationError(f"{what}; it is the logging policy's probability of the "
                                  f"logged choice", source=source,
                                  row=row_number(r, offset, "propensity"), column="propensity")
