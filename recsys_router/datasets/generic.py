"""The generic long table: the project's interchange format.

One row per (query, LLM) record::

    query_id, model, score[, cost][, query_text][, task][, split][, any other per-query column]

Accepted aliases: ``llm`` for ``model``; ``prompt`` or ``text`` for ``query_text``;
``category`` or ``eval_name`` for ``task``. Files: ``.csv``, ``.csv.gz``, ``.parquet``,
``.jsonl`` (also ``.jsonl.gz``). The query text may be repeated on every row of a query or
given once (the first non-null value is used); two *different* non-null texts for the same
``query_id`` are an error naming both rows.

Row numbers in errors are what a user sees when opening the file: for CSV the file line
(the header is line 1, so the first record is row 2), for JSONL the line (first record is
row 1), for parquet the 1-based record number.

:func:`write_long` writes ``RoutingData.to_long()`` atomically; reading it back with
:func:`load_generic` gives the same matrices (LLM order is the order of first appearance,
which equals the original order whenever the first query has every LLM observed).
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from ..data import RoutingData
from ..errors import DataValidationError
from ._common import read_jsonl
from .registry import register

__all__ = ["load_generic", "read_long_table", "write_long", "detect_generic", "frame_to_data",
           "LONG_SUFFIXES"]

LONG_SUFFIXES = (".csv", ".csv.gz", ".parquet", ".jsonl", ".jsonl.gz")
_ALIASES = {"llm": "model", "prompt": "query_text", "text": "query_text", "category": "task",
            "eval_name": "task"}


def _suffix(path: Path) -> str:
    name = path.name.lower()
    for s in sorted(LONG_SUFFIXES, key=len, reverse=True):
        if name.endswith(s):
            return s
    return path.suffix.lower()


def _header(path: Path) -> list[str]:
    suf = _suffix(path)
    if suf in (".csv", ".csv.gz"):
        return list(pd.read_csv(path, nrows=0).columns)
    if suf == ".parquet":
        import pyarrow.parquet as pq
        return list(pq.read_schema(path).names)
    if suf in (".jsonl", ".jsonl.gz"):
        import gzip
        import json
        opener = gzip.open if suf.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    rec = json.loads(line)
                    return list(rec) if isinstance(rec, dict) else []
    return []


def detect_generic(path: Path) -> bool:
    """True for a long-table file with ``query_id``, ``model``/``llm`` and ``score`` columns."""
    path = Path(path)
    if not path.is_file() or _suffix(path) not in LONG_SUFFIXES:
        return False
    try:
        cols = set(_header(path))
    except Exception:  # noqa: BLE001 - unreadable files are simply not this format
        return False
    return "query_id" in cols and bool(cols & {"model", "llm"}) and "score" in cols


def read_long_table(path) -> tuple[pd.DataFrame, int]:
    """Read a long-table file; returns ``(frame, row_offset)`` for error row numbers."""
    path = Path(path)
    suf = _suffix(path)
    if suf in (".csv", ".csv.gz"):
        try:
            df = pd.read_csv(path, dtype={"query_id": str, "model": str, "llm": str},
                             keep_default_na=True)
        except pd.errors.ParserError as exc:
            raise DataValidationError(f"malformed CSV: {exc}", source=str(path)) from None
        return df, 2
    if suf == ".parquet":
        return pd.read_parquet(path), 1
    if suf == ".jsonl":
        return read_jsonl(path), 1
    if suf == ".jsonl.gz":
        return pd.read_json(path, lines=True, dtype=False, compression="gzip"), 1
    raise DataValidationError(f"unsupported file type {suf!r}; expected one of {LONG_SUFFIXES}",
                              source=str(path))


def _normalise_columns(df: pd.DataFrame, source: str) -> pd.DataFrame:
    ren = {}
    for col in df.columns:
        target = _ALIASES.get(col)
        if target is None:
            continue
        if target in df.columns or target in ren.values():
            raise DataValidationError(f"both {col!r} and its alias target {target!r} are present; "
                                      f"keep one", source=source, column=col)
        ren[col] = target
    return df.rename(columns=ren)


def _check_texts(df: pd.DataFrame, source: str, offset: int) -> None:
    """Two different non-null texts for one query id is an error naming both rows."""
    if "query_text" not in df.columns:
        return
    sub = df[["query_id", "query_text"]]
    sub = sub[sub["query_text"].notna()]
    uniq = sub.drop_duplicates()
    dup = uniq["query_id"].duplicated(keep=False)
    if not dup.any():
        return
    qid = uniq.loc[dup, "query_id"].iloc[0]
    rows = uniq.index[(uniq["query_id"] == qid).to_numpy()][:2]
    r1, r2 = (int(r) + offset for r in rows)
    raise DataValidationError(f"query {qid!r} has two different texts (rows {r1} and {r2}); a query "
                              f"id must carry one text", source=source, row=r2, column="query_text")


def frame_to_data(df: pd.DataFrame, *, source: str, name: str, duplicates: str = "error",
                  row_offset: int = 0, meta: dict | None = None) -> RoutingData:
    """Validate a long DataFrame (aliases allowed) and build a :class:`RoutingData`."""
    df = _normalise_columns(df.reset_index(drop=True), source)
    for col in ("query_id", "model", "score"):
        if col not in df.columns:
            raise DataValidationError(f"missing required column {col!r}; columns present: "
                                      f"{list(df.columns)}", source=source, column=col)
    _check_texts(df, source, row_offset)
    df = df.rename(columns={"query_text": "text"})
    return RoutingData.from_long(df, duplicates=duplicates, name=name, source=source,
                                 row_offset=row_offset, meta=meta)


@register("generic", aliases=("long",), detect=detect_generic,
          description="generic long table (query_id, model, score[, cost, query_text, task, split]) "
                      "in .csv/.csv.gz/.parquet/.jsonl")
def load_generic(path, duplicates: str = "error", name: str | None = None) -> RoutingData:
    """Load a long-table file.

    Parameters
    ----------
    path : str or Path
        A ``.csv``, ``.csv.gz``, ``.parquet`` or ``.jsonl`` file.
    duplicates : {"error", "mean", "first", "last"}
        Repeated (query, LLM) records: raise naming the rows, or merge them.
    name : str, optional
        Dataset name (default: the file name without suffix).

    Returns
    -------
    RoutingData

    Example
    -------
    >>> import tempfile, os
    >>> p = os.path.join(tempfile.mkdtemp(), "d.csv")
    >>> _ = open(p, "w").write("query_id,model,score\\nq1,a,1\\nq1,b,0\\n")
    >>> load_generic(p).scores.tolist()
    [[1.0, 0.0]]
    """
    path = Path(path)
    if path.is_dir():
        files = [p for p in sorted(path.iterdir()) if detect_generic(p)]
        if len(files) != 1:
            raise FileNotFoundError(f"{path}: expected exactly one long-table file in the folder, "
                                    f"found {[p.name for p in files]}")
        path = files[0]
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file")
    df, offset = read_long_table(path)
    stem = path.name[: -len(_suffix(path))] if _suffix(path) else path.name
    return frame_to_data(df, source=str(path), name=name or stem, duplicates=duplicates,
                         row_offset=offset)


def write_long(data: RoutingData, path) -> Path:
    """Write ``data.to_long()`` to ``path`` atomically (temp file + ``os.replace``).

    The format follows the suffix: ``.csv``, ``.csv.gz``, ``.parquet`` or ``.jsonl``.

    Returns
    -------
    Path
        The written file.
    """
    path = Path(path)
    suf = _suffix(path)
    if suf not in LONG_SUFFIXES:
        raise ValueError(f"{path}: unsupported output type; use one of {', '.join(LONG_SUFFIXES)}")
    df = data.to_long()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{os.getpid()}.tmp"
    try:
        if suf == ".csv":
            df.to_csv(tmp, index=False)
        elif suf == ".csv.gz":
            df.to_csv(tmp, index=False, compression="gzip")
        elif suf == ".parquet":
            df.to_parquet(tmp, index=False)
        else:
            _write_jsonl(df, tmp, gz=suf.endswith(".gz"))
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path



def _write_jsonl(df: pd.DataFrame, path: Path, gz: bool) -> None:
    """One JSON object per line; floats written with Python's shortest exact repr so that
    float32 scores/costs read back bit-identical (pandas' writer rounds them)."""
    import gzip
    import json
    out = df.astype({c: "float64" for c in df.columns if df[c].dtype == "float32"})
    out = out.astype(object).where(out.notna(), None)
    opener = gzip.open if gz else open
    with opener(path, "wt", encoding="utf-8") as fh:
        for rec in out.to_dict("records"):
            fh.write(json.dumps(rec, ensure_ascii=False))
            fh.write("\n")
