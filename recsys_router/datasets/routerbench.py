"""RouterBench (Hu et al., 2024, "RouterBench: A Benchmark for Multi-LLM Routing System").

Wide format, one row per prompt: ``sample_id``, ``prompt``, ``eval_name``, one score column
per LLM, ``<llm>|model_response``, ``<llm>|total_cost`` (USD) and
``oracle_model_to_route_to`` (an LLM name, *not* an LLM column). Two published forms:

* ``routerbench`` -- the pickle ``routerbench_0shot.pkl`` (Hugging Face dataset
  ``withmartian/routerbench``), a pandas DataFrame with those columns;
* ``routerbench_zs`` -- the CSV folder used by RouterDC (``<eval>_{train,test}.csv`` with a
  leading unnamed index column); the split comes from the file name.

The ``prompt`` field is a Python list literal (a string in the CSVs) whose first element is
the prompt text; a few records carry the same prompt twice (``[p, p]``).

Query identity and duplicates (documented behaviour)
----------------------------------------------------
``sample_id`` is not a key: in the CSV folder 14 ids each carry two records whose prompt
lists differ (``[p]`` and ``[p, p]``) and whose scores are complementary (one has only
gpt-3.5-turbo-1106 observed, the other the ten other LLMs). A query is therefore keyed on
its full prompt list (``identity="prompt"``, default) or on the prompt text alone
(``identity="text"``, which merges those 14 pairs into fully observed queries).

Records with the same key are merged into one query. Files are read train first, then
test; per (query, LLM) cell the ``duplicates`` rule picks the value (default ``"first"``:
the training copy; ``"mean"``, ``"last"`` or ``"error"`` also accepted), and the query's
``split``/``task``/``sample_id`` come from its first record. In the CSV folder this affects
two MBPP prompts that appear under different ids in ``mbpp_train.csv`` and
``mbpp_test.csv``; they are kept once, in train. Every merge is logged (warning) and listed
in ``meta["merged_records"]`` as ``(kept query_id, merged sample_id, file)``; nothing is
dropped silently. Result on the CSV folder: 3,176 queries x 11 LLMs, 154 unobserved cells.

The default identity leaks across the published split: six of the ARC ``[p]`` / ``[p, p]``
twins have one record in a ``_train.csv`` and the other in a ``_test.csv``, so with
``--split-column split`` 6 of the 951 test queries carry the exact text of a train query
(a text-based router has seen them at fit time). ``evaluate`` reports this in its notes
("fold 0: 6 of 951 test queries have the same text as a train query"); ``identity="text"``
merges the twins (into train, the first file read) and leaves no such overlap. The default
is kept so that published numbers stay comparable.

A query id is the ``sample_id`` when that id maps to one key, else
``"<sample_id>#<first 8 hex digits of the key's SHA-1>"``; two different keys that would
get one id (a generated id equal to another record's ``sample_id``) are an error naming
both records.

Scores and costs must be numbers: an empty field (NaN in the pickle) is a missing score
(not observed) or an unknown cost; any other text (``n/a``), an infinite value or a
negative cost is an error naming the file, the record's line and the column. LLM sizes (billions of
parameters) are parsed from the names where present (``llama-2-70b`` -> 70).
"""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import numpy as np
import pandas as pd

from ..data import RoutingData
from ..errors import DataValidationError
from ..numeric import shown, to_floats
from ._common import (csv_header, csv_na_options, order_files, parse_size, read_csv, require_trust,
                      task_split_from_stem, text_hash)
from ._rows import CsvLines
from .registry import register

__all__ = ["load_routerbench", "load_routerbench_zs", "routerbench_frame_to_data",
           "detect_routerbench_csv", "detect_routerbench_pickle"]

log = logging.getLogger(__name__)

_META_COLUMNS = ("sample_id", "prompt", "eval_name", "oracle_model_to_route_to")
_PICKLE_NAMES = {0: "routerbench_0shot.pkl", 5: "routerbench_5shot.pkl"}


def _llm_columns(df: pd.DataFrame) -> list[str]:
    cols = set(df.columns)
    return [c for c in df.columns if "|" not in str(c) and c not in _META_COLUMNS
            and (f"{c}|total_cost" in cols or f"{c}|model_response" in cols)]


def _as_list(value, strict: bool):
    """The prompt/response value as a list of strings (None when it cannot be one)."""
    if isinstance(value, (list, tuple, np.ndarray)):
        return [str(v) for v in value]
    if isinstance(value, str):
        try:
            parsed = ast.literal_eval(value)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None if strict else [value]
        if isinstance(parsed, (list, tuple)) and len(parsed) > 0:
            return [str(v) for v in parsed]
        return None if strict else [value]
    return None


def _first_text(value) -> str | None:
    lst = _as_list(value, strict=False)
    return lst[0] if lst else None


def routerbench_frame_to_data(frame: pd.DataFrame, *, source: str, name: str,
                              identity: str = "prompt", duplicates: str = "first",
                              with_responses: bool = False, strict_prompt: bool = True,
                              rows: np.ndarray | None = None,
                              files: np.ndarray | None = None) -> RoutingData:
    """Build :class:`RoutingData` from a RouterBench wide frame (see the module notes).

    Parameters
    ----------
    frame : pandas.DataFrame
        The wide table (``split`` column optional).
    identity : {"prompt", "text"}
        Key queries on the full prompt list or on its first element.
    duplicates : {"first", "mean", "last", "error"}
        Rule for a (query, LLM) cell given by several records.
    with_responses : bool
        Attach ``data.responses``: DataFrame indexed by query id, one column per LLM,
        each cell the first element of that LLM's ``model_response`` list.
    strict_prompt : bool
        Require ``prompt`` to be a non-empty list (literal); else raise naming the row.
    rows, files : array, optional
        Row numbers and file names per record for error messages; ``rows`` may also be a
        function ``(record index, column) -> line``.
    """
    if identity not in ("prompt", "text"):
        raise ValueError(f"identity must be 'prompt' or 'text', got {identity!r}")
    frame = frame.reset_index(drop=True)
    rows = np.arange(len(frame)) if rows is None else (rows if callable(rows) else np.asarray(rows))
    files = np.full(len(frame), source, dtype=object) if files is None else np.asarray(files)
    for col in ("sample_id", "prompt"):
        if col not in frame.columns:
            raise DataValidationError(f"missing required column {col!r} of the RouterBench wide "
                                      f"format; present: {list(frame.columns)[:12]}...",
                                      source=source, column=col)
    llms = _llm_columns(frame)
    if not llms:
        raise DataValidationError("no LLM columns found: expected a score column <llm> next to "
                                  "'<llm>|total_cost' or '<llm>|model_response'", source=source)
    prompts = [_as_list(v, strict_prompt) for v in frame["prompt"].tolist()]
    bad = [i for i, p in enumerate(prompts) if p is None]
    if bad:
        i = bad[0]
        raise DataValidationError(f"prompt {str(frame['prompt'].iloc[i])[:60]!r} is not a list of "
                                  f"strings (expected e.g. \"['question text']\"; {len(bad)} such rows)",
                                  source=str(files[i]), row=_line(rows, i, "prompt"),
                                  column="prompt")
    text = pd.Series([p[0] for p in prompts], dtype=object)
    key = text if identity == "text" else pd.Series(["\x1f".join(p) for p in prompts], dtype=object)
    sid = frame["sample_id"].astype(str)
    keys_per_id = pd.DataFrame({"sid": sid, "key": key}).drop_duplicates().groupby("sid")["key"].size()
    ambiguous = sid.map(keys_per_id).to_numpy() > 1
    qid = sid.where(~ambiguous, sid + "#" + text_hash(key, 8))
    # merged records: same key as an earlier record -> that record's id
    first_pos = pd.Series(np.arange(len(key))).groupby(key.to_numpy()).transform("min").to_numpy()
    qid = pd.Series(qid.to_numpy()[first_pos])
    merged = np.flatnonzero(first_pos != np.arange(len(key)))
    merged_list = [(qid.iloc[i], sid.iloc[i], str(files[i])) for i in merged]
    if merged_list:
        log.warning("%s: %d records repeat an earlier record's prompt and were merged into it "
                    "(duplicates=%r): %s", source, len(merged_list), duplicates, merged_list[:10])
    _check_unique_ids(qid, key, rows, files)
    # scores and costs: validate, naming the file and record, then long form of observed cells
    S = np.column_stack([_numbers(frame, c, "score", rows, files) for c in llms])
    has_cost = any(f"{c}|total_cost" in frame.columns for c in llms)
    C = None
    if has_cost:
        C = np.column_stack([_numbers(frame, f"{c}|total_cost", "cost", rows, files)
                             if f"{c}|total_cost" in frame.columns else np.full(len(frame), np.nan)
                             for c in llms])
    i, j = np.nonzero(~np.isnan(S))
    long = pd.DataFrame({"query_id": qid.to_numpy()[i], "model": np.asarray(llms, dtype=object)[j],
                         "score": S[i, j]})
    if C is not None:
        long["cost"] = C[i, j]
    if not len(long):
        raise DataValidationError("no observed scores in any LLM column", source=source)
    data = RoutingData.from_long(long, duplicates=duplicates, llms=pd.DataFrame({"name": llms, "size": [parse_size(n) for n in llms]}),
                                 name=name, source=source,
                                 meta={"merged_records": merged_list, "identity": identity})
    # query columns come from each query's first record only
    fr = np.unique(first_pos)
    firsts = pd.DataFrame({"query_id": qid.to_numpy()[fr], "text": text.to_numpy()[fr],
                           "task": frame["eval_name"].to_numpy()[fr] if "eval_name" in frame.columns
                           else None,
                           "split": frame["split"].to_numpy()[fr] if "split" in frame.columns else None,
                           "sample_id": sid.to_numpy()[fr]})
    data.queries = data.queries[["query_id"]].merge(firsts, on="query_id", how="left")
    unscored = sorted(set(qid) - set(data.query_ids))
    if unscored:  # records without any score carry no routing signal: reported, not kept
        log.warning("%s: %d prompts have no observed score in any LLM column and are not "
                    "queries: %s", source, len(unscored), unscored[:10])
    data.meta["unscored_prompts"] = unscored
    if with_responses:
        data.responses = _responses(frame, llms, qid, data.query_ids)
    return data


def _line(rows, i: int, column: str) -> int:
    """The row to report for record ``i``: ``rows[i]``, or ``rows(i, column)`` (the file
    line of that field) when ``rows`` is a function."""
    return int(rows(int(i), column)) if callable(rows) else int(rows[i])


def _numbers(frame: pd.DataFrame, column: str, what: str, rows, files) -> np.ndarray:
    """A score or cost column as floats (missing = NaN); a value that is not a number, is
    infinite or (a cost) negative raises naming the file, the record's row and the column."""
    raw = frame[column]
    col = to_floats(raw)
    bad = np.isnan(col) & raw.notna().to_numpy()
    with np.errstate(invalid="ignore"):
        bad |= np.isinf(col) | ((col < 0) if what == "cost" else False)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        want = "a finite number >= 0 (empty = unknown)" if what == "cost" else \
            "a finite number (empty = not observed)"
        raise DataValidationError(f"{what} {shown(raw.iloc[i])} is not {want} ({int(bad.sum())} such records "
                                  f"in this column)", source=str(files[i]), row=_line(rows, i, column),
                                  column=column)
    return col


def _check_unique_ids(qid: pd.Series, key: pd.Series, rows, files) -> None:
    """Refuse two different prompts that end up with one query id (a generated
    ``<sample_id>#<hash>`` id equal to another record's sample_id, or a hash collision)."""
    pairs = pd.DataFrame({"q": qid.to_numpy(), "k": key.to_numpy()}).drop_duplicates()
    clash = pairs["q"].duplicated(keep=False).to_numpy()
    if clash.any():
        q = pairs["q"].to_numpy()[clash][0]
        i, j = (int(r) for r in pairs.index[(pairs["q"] == q).to_numpy()][:2])
        raise DataValidationError(
            f"query id {q!r} would name two different prompts: the record at {files[i]}, row "
            f"{_line(rows, i, 'sample_id')} and this one; a query id '<sample_id>#<hash>' made for a sample_id with "
            f"several prompts equals another record's sample_id (or two prompts share a hash). "
            f"Rename one sample_id", source=str(files[j]), row=_line(rows, j, "sample_id"),
            column="sample_id")


def _responses(frame, llms, qid: pd.Series, order) -> pd.DataFrame:
    cols = {}
    for c in llms:
        rc = f"{c}|model_response"
        if rc in frame.columns:
            cols[c] = [None if v is None or (isinstance(v, float) and np.isnan(v)) else _first_text(v)
                       for v in frame[rc].tolist()]
        else:
            cols[c] = [None] * len(frame)
    resp = pd.DataFrame(cols, dtype=object)
    resp.index = qid.to_numpy()
    return resp.groupby(level=0, sort=False).first().reindex(order)


def _read_csv(path: Path) -> pd.DataFrame:
    # only an empty field is missing: a cost "n/a" or an id "NA" is not read as NaN
    df = read_csv(path, **csv_na_options(csv_header(path)))
    return df.drop(columns=[c for c in df.columns if str(c).startswith("Unnamed:")])


def detect_routerbench_csv(path: Path) -> bool:
    """A RouterBench wide CSV, or a folder of them."""
    path = Path(path)
    files = sorted(path.glob("*.csv")) if path.is_dir() else [path]
    if not files or not files[0].is_file() or files[0].suffix != ".csv":
        return False
    try:
        cols = csv_header(files[0])
    except Exception:  # noqa: BLE001
        return False
    return "sample_id" in cols and "prompt" in cols and any("|total_cost" in c for c in cols)


@register("routerbench_zs", folder="routerbench_zs", detect=detect_routerbench_csv,
          description="RouterBench 0-shot records as RouterDC's train/test CSV folder "
                      "(3 evals, 11 LLMs, USD costs, model responses)")
def load_routerbench_zs(path, identity: str = "prompt", duplicates: str = "first",
                        with_responses: bool = False) -> RoutingData:
    """Load the RouterBench CSV folder (or one of its CSV files).

    Parameters
    ----------
    path : str or Path
        Folder of ``<eval>_{train,test}.csv`` files, or one such file.
    identity, duplicates, with_responses
        See :func:`routerbench_frame_to_data` and the module notes.

    Returns
    -------
    RoutingData
        ``split`` from the file name, ``task`` = ``eval_name``, costs in USD;
        ``data.responses`` when ``with_responses=True``.

    Example
    -------
    >>> d = load_routerbench_zs("../shared/data/routerbench_zs")  # doctest: +SKIP
    >>> d.shape  # doctest: +SKIP
    (3176, 11)
    """
    path = Path(path)
    files = order_files(path.glob("*.csv")) if path.is_dir() else [path]
    if not files or not files[0].exists():
        raise FileNotFoundError(f"{path}: no RouterBench CSV files found")
    frames, locs, names = [], [], []
    for k, f in enumerate(files):
        df = _read_csv(f)
        df["split"] = task_split_from_stem(f.stem)[1]
        frames.append(df)
        locs.append(np.stack([np.full(len(df), k), np.arange(len(df))], axis=1))
        names.append(np.full(len(df), str(f), dtype=object))
    lines = [CsvLines(f) for f in files]
    loc = np.concatenate(locs)

    def rows(i: int, column: str) -> int:  # file line of a record's field (error path only)
        k, r = loc[i]
        return lines[k].field_line(int(r), column)

    cols = list(dict.fromkeys(c for df in frames for c in df.columns))
    frame = pd.concat([df.reindex(columns=cols) for df in frames], ignore_index=True)
    return routerbench_frame_to_data(frame, source=str(path), name="routerbench_zs",
                                     identity=identity, duplicates=duplicates,
                                     with_responses=with_responses, strict_prompt=True,
                                     rows=rows, files=np.concatenate(names))


def detect_routerbench_pickle(path: Path) -> bool:
    path = Path(path)
    if path.is_dir():
        return any((path / n).is_file() for n in _PICKLE_NAMES.values())
    return path.suffix == ".pkl" and path.name.startswith("routerbench")


@register("routerbench", folder="routerbench", hub_repo="withmartian/routerbench",
          hub_files=("routerbench_0shot.pkl",),
          detect=detect_routerbench_pickle,
          description="RouterBench full pickle routerbench_0shot.pkl (Hugging Face "
                      "withmartian/routerbench; 11 LLMs, USD costs)")
def load_routerbench(path, shots: int = 0, identity: str = "prompt", duplicates: str = "first",
                     with_responses: bool = False, trust_pickle: bool = False) -> RoutingData:
    """Load the published RouterBench pickle.

    Unpickling runs code the file chooses, so the file is read only with
    ``trust_pickle=True`` (``--trust-pickle`` on the command line); otherwise the load is
    refused with a :class:`DataValidationError` saying so, before the file is opened.

    Parameters
    ----------
    path : str or Path
        The ``.pkl`` file, or a folder holding ``routerbench_0shot.pkl`` /
        ``routerbench_5shot.pkl``.
    shots : {0, 5}
        Which pickle to pick from a folder.
    identity, duplicates, with_responses
        See :func:`routerbench_frame_to_data`.
    trust_pickle : bool
        You trust the file's origin (it may run code while loading).

    Returns
    -------
    RoutingData
        ``task`` = ``eval_name``; no split (the pickle has none).
    """
    path = Path(path)
    if path.is_dir():
        if shots not in _PICKLE_NAMES:
            raise ValueError(f"shots must be 0 or 5, got {shots!r}")
        fname = path / _PICKLE_NAMES[shots]
        if not fname.is_file():
            raise FileNotFoundError(f"{path}: no {_PICKLE_NAMES[shots]}; download it with "
                                    f"`recsys-router data download routerbench`")
        path = fname
    require_trust(path, trust_pickle)
    try:
        frame = pd.read_pickle(path)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure is a bad file
        raise DataValidationError(f"cannot read the pickle: {exc}", source=str(path)) from None
    if not isinstance(frame, pd.DataFrame):
        raise DataValidationError(f"expected a pandas DataFrame in the pickle, got "
                                  f"{type(frame).__name__}", source=str(path))
    return routerbench_frame_to_data(frame, source=str(path), name="routerbench",
                                     identity=identity, duplicates=duplicates,
                                     with_responses=with_responses, strict_prompt=False,
                                     rows=np.arange(len(frame)) + 1)
