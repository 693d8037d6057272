"""The generic long table: the project's interchange format.

One row per (query, LLM) record::

    query_id, model, score[, cost][, query_text][, task][, split][, any other per-query column]

Accepted aliases: ``llm`` for ``model``; ``prompt`` or ``text`` for ``query_text``;
``category`` or ``eval_name`` for ``task``. Files: ``.csv``, ``.csv.gz``, ``.parquet``,
``.jsonl`` (also ``.jsonl.gz``). The query text may be repeated on every row of a query or
given once (the first non-null value is used); two *different* non-null texts for the same
``query_id`` are an error naming both rows.

Row numbers in errors are what a user sees when opening the file: for CSV the file line
where the record starts (the header is line 1, so the first record is row 2; a quoted field
may span lines), for JSONL the line (blank lines count), for parquet the 1-based record
number. In a CSV file the ids, the ``task``/``split`` labels (and their aliases) and the
texts are read as text, as written (task ``01`` stays ``"01"``, not the number 1) and only an
empty field is missing, so values such as ``NA``, ``None`` or ``null`` stay text; in
``score``/``cost`` pandas' spellings of a missing number (``NA``, ``NaN``, ``null``, ...) are
missing too. Other per-query columns are parsed by pandas (numbers become numbers). In a
JSONL file each id and label keeps its JSON value (``1`` is the id ``"1"`` even beside a
float id ``0.5``, never ``"1.0"``; a large integer is kept whole); a number and a text that
would spell one id (``1`` and ``"1"``) are refused naming both lines. A boolean ``cost`` is
refused; a boolean ``score`` reads as 1 (true) or 0 (false).

:func:`write_long` writes ``RoutingData.to_long()`` atomically; reading it back with
:func:`load_generic` gives the same matrices (LLM order is the order of first appearance,
which equals the original order whenever the first query has every LLM observed), less
what the format cannot hold (:func:`long_losses`, warned about when writing).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from ..atomic import atomic_write
from ..data import RoutingData
from ..errors import DataValidationError
from ..long_table import RowOffset
from ._common import csv_header, csv_na_options, read_csv, read_jsonl_lines, read_parquet
from ._limits import ReadLimits, open_counted
# the record columns' checks; TEXT_MODES re-exported (its public path before _record_checks.py)
from ._record_checks import TEXT_MODES, check_propensity, check_text_types, check_texts
from ._rows import CsvLines
from .registry import register

__all__ = ["load_generic", "read_long_table", "write_long", "long_losses", "detect_generic",
           "frame_to_data",
           "LONG_SUFFIXES", "TEXT_MODES"]

log = logging.getLogger(__name__)

LONG_SUFFIXES = (".csv", ".csv.gz", ".parquet", ".jsonl", ".jsonl.gz")
_ALIASES = {"llm": "model", "prompt": "query_text", "text": "query_text", "category": "task",
            "eval_name": "task"}
#: CSV columns read as text: the ids, the per-query labels (task and split, aliases too) and
#: the texts; "01", "1.10" or "007" stay as written, and a label column with an empty field
#: does not turn "1" into "1.0"
_TEXT_COLUMNS = ("query_id", "model", "llm", "query_text", "prompt", "text", "task", "category",
                 "eval_name", "split")


def _suffix(path: Path) -> str:
    name = path.name.lower()
    for s in sorted(LONG_SUFFIXES, key=len, reverse=True):
        if name.endswith(s):
            return s
    return path.suffix.lower()


def _header(path: Path, limits: ReadLimits | None = None) -> list[str]:
    suf = _suffix(path)
    if suf in (".csv", ".csv.gz"):
        return csv_header(path)
    if suf == ".parquet":
        import pyarrow.parquet as pq
        return list(pq.read_schema(path).names)
    if suf in (".jsonl", ".jsonl.gz"):
        import json
        with open_counted(path, limits if limits is not None else ReadLimits()) as fh:
            for line in fh:
                if line.strip():
                    rec = json.loads(line.decode("utf-8"))
                    return list(rec) if isinstance(rec, dict) else []
    return []


def detect_generic(path: Path, limits: ReadLimits | None = None) -> bool:
    """True for a long-table file with ``query_id``, ``model``/``llm`` and ``score`` columns,
    and for a folder whose only ``.csv``/``.csv.gz``/``.parquet``/``.jsonl`` file is one (the
    folder :func:`load_generic` reads). A JSONL file's first record is read under ``limits``
    (default :class:`ReadLimits`): :func:`~recsys_router.datasets.load_dataset` passes the
    caller's ``max_bytes``."""
    path = Path(path)
    limits = limits if limits is not None else ReadLimits()
    if path.is_dir():
        try:
            tables = [p for p in path.iterdir() if p.is_file() and _suffix(p) in LONG_SUFFIXES]
        except OSError:
            return False
        return len(tables) == 1 and detect_generic(tables[0], limits)
    if not path.is_file() or _suffix(path) not in LONG_SUFFIXES:
        return False
    try:
        cols = set(_header(path, limits))
    except Exception:  # noqa: BLE001 - unreadable: the generic loader names the problem
        return _suffix(path) in LONG_SUFFIXES
    return "query_id" in cols and bool(cols & {"model", "llm"}) and "score" in cols


def read_long_table(path, limits: ReadLimits | None = None) -> tuple[pd.DataFrame, RowOffset]:
    """Read a long-table file; returns ``(frame, row_offset)`` for error row numbers.

    ``row_offset`` is an int (parquet: 1) or a function of the 0-based record index giving
    its file line (CSV, whose quoted fields may span lines; JSONL, whose blank lines are
    skipped), as :func:`recsys_router.long_table.row_number` takes. In a CSV file the id,
    label (``task``, ``split`` and aliases) and text columns are read as text, and only an
    empty field is missing, except in ``score``/``cost`` where ``NA``, ``NaN``, ``null``
    and pandas' other spellings of a missing number are too.

    ``limits`` (default :class:`~recsys_router.datasets._limits.ReadLimits`: 4 GiB
    decompressed, 50 million records) are checked while reading, before the table is built.
    """
    path = Path(path)
    limits = limits if limits is not None else ReadLimits()
    suf = _suffix(path)
    if suf in (".csv", ".csv.gz"):
        opts = csv_na_options(csv_header(path), number=("score", "cost"),   # ids, labels, texts
                              text=_TEXT_COLUMNS)                           # as text
        return read_csv(path, limits, **opts), CsvLines(path)
    if suf == ".parquet":
        return read_parquet(path, limits=limits), 1
    if suf in (".jsonl", ".jsonl.gz"):
        df, lines = read_jsonl_lines(path, limits, exact=_TEXT_COLUMNS)  # ids as written
        return df, lambda i: int(lines[i])
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


def frame_to_data(df: pd.DataFrame, *, source: str, name: str, duplicates: str = "error",
                  row_offset: RowOffset = 0, meta: dict | None = None, texts: str = "error",
                  max_cells: int | None = None) -> RoutingData:
    """Validate a long DataFrame (aliases allowed) and build a :class:`RoutingData`.

    ``texts`` resolves a query id with several texts (see :data:`TEXT_MODES`); ``max_cells``
    caps the dense matrix (see :func:`recsys_router.long_table.long_to_matrix`).
    """
    df = _normalise_columns(df.reset_index(drop=True), source)
    for col in ("query_id", "model", "score"):
        if col not in df.columns:
            raise DataValidationError(f"missing required column {col!r}; columns present: "
                                      f"{list(df.columns)}", source=source, column=col)
    check_text_types(df, source, row_offset)
    df = check_texts(df, source, row_offset, texts)
    check_propensity(df, source, row_offset)
    df = df.rename(columns={"query_text": "text"})
    return RoutingData.from_long(df, duplicates=duplicates, name=name, source=source,
                                 row_offset=row_offset, meta=meta, max_cells=max_cells)


@register("generic", aliases=("long",), detect=detect_generic,
          description="generic long table (query_id, model, score[, cost, query_text, task, split]) "
                      "in .csv/.csv.gz/.parquet/.jsonl")
def load_generic(path, duplicates: str = "error", name: str | None = None, texts: str = "error",
                 max_cells: int | None = None, max_bytes: int | None = None,
                 max_records: int | None = None) -> RoutingData:
    """Load a long-table file.

    Parameters
    ----------
    path : str or Path
        A ``.csv``, ``.csv.gz``, ``.parquet`` or ``.jsonl`` file.
    duplicates : {"error", "mean", "first", "last"}
        Repeated (query, LLM) records: raise naming the rows, or merge them.
    name : str, optional
        Dataset name (default: the file name without suffix).
    texts : {"error", "first", "longest"}
        A query id whose rows carry different texts: raise naming both rows (default), or
        keep its first or its longest text (``-o texts=longest`` on the command line).
    max_cells : int, optional
        Largest dense queries x LLMs matrix to build (default: see
        :func:`recsys_router.long_table.cell_limit`); a table whose ids span more is refused.
    max_bytes : int, optional
        Most decompressed bytes read from a ``.csv.gz``/``.jsonl.gz`` file, or uncompressed
        bytes a parquet footer may declare (default 4 GiB, ``-o max_bytes=N``); a small
        compressed file that expands past it is refused before it fills memory.
    max_records : int, optional
        Most records read (default 50,000,000: a RouterEval-scale 2,000 LLMs x 20,000
        queries table has 40 million; ``-o max_records=N``); a parquet file's footer count
        is checked before its data is read.

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
    limits = ReadLimits.of(max_bytes, max_records)
    df, offset = read_long_table(path, limits)
    stem = path.name[: -len(_suffix(path))] if _suffix(path) else path.name
    return frame_to_data(df, source=str(path), name=name or stem, duplicates=duplicates,
                         row_offset=offset, texts=texts, max_cells=max_cells)


def long_losses(data: RoutingData) -> list[str]:
    """What of ``data`` a long table cannot hold, in words (empty when nothing is lost).

    A long table has one record per observed (query, LLM) cell, so a query or an LLM with
    no observed score has no record, nor has a cost on a cell whose score is unobserved (a
    record needs a score); and it has no place for LLM metadata (prices, sizes,
    descriptions, other LLM columns).

    Example
    -------
    >>> import numpy as np
    >>> d = RoutingData(["q1", "q2"], ["a", "b"], [[1, np.nan], [np.nan, np.nan]])
    >>> long_losses(d)
    ["1 queries with no observed score have no record and are not written: ['q2']", "1 LLMs with no observed score have no record and are not written: ['b']"]
    """
    notes = []
    obs = data.observed
    for what, empty, ids in (("queries", ~obs.any(axis=1), data.query_ids),
                             ("LLMs", ~obs.any(axis=0), data.llm_names)):
        if empty.any():
            named = [ids[i] for i in np.flatnonzero(empty)[:5]]
            more = ", ..." if empty.sum() > 5 else ""
            notes.append(f"{int(empty.sum())} {what} with no observed score have no record and "
                         f"are not written: {str(named)[:-1]}{more}]")
    if data.costs is not None:  # a record needs a score: a cost alone cannot be written
        lone = ~obs & ~np.isnan(data.costs)
        if lone.any():
            i, j = np.argwhere(lone)[0]
            notes.append(f"{int(lone.sum())} costs on cells with no observed score have no "
                         f"record and are not written (first: query "
                         f"{data.query_ids[i]!r}, LLM {data.llm_names[j]!r})")
    meta = [c for c in data.llms.columns if c != "name" and data.llms[c].notna().any()]
    if meta:
        notes.append(f"LLM columns {meta} have no place in the long format and are not written")
    return notes


def write_long(data: RoutingData, path, *, warn: bool = True) -> Path:
    """Write ``data.to_long()`` to ``path`` atomically (:func:`recsys_router.atomic.atomic_write`:
    a temp file tagged with this process id, then ``os.replace``; temp files of killed
    earlier writes are removed first).

    The format follows the suffix: ``.csv``, ``.csv.gz``, ``.parquet`` or ``.jsonl``. What
    the long format cannot hold (:func:`long_losses`: queries and LLMs without an observed
    score, LLM prices/sizes) is logged as a warning unless ``warn=False`` (the caller then
    reports it).

    Returns
    -------
    Path
        The written file.
    """
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path}: is a folder; expected an output file such as "
                         f"{path / (data.name + '.parquet')}")
    suf = _suffix(path)
    if suf not in LONG_SUFFIXES:
        raise ValueError(f"{path}: unsupported output type; use one of {', '.join(LONG_SUFFIXES)}")
    df = data.to_long()
    if warn:
        for note in long_losses(data):
            log.warning("%s: %s", path, note)
    with atomic_write(path) as tmp:
        if suf == ".csv":
            df.to_csv(tmp, index=False)
        elif suf == ".csv.gz":
            df.to_csv(tmp, index=False, compression="gzip")
        elif suf == ".parquet":
            df.to_parquet(tmp, index=False)
        else:
            _write_jsonl(df, tmp, gz=suf.endswith(".gz"))
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
