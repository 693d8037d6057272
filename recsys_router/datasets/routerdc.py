"""RouterDC data (Chen et al., 2024, "RouterDC: Query-Based Router by Dual Contrastive
Learning for Assembling Large Language Models").

Each ``<task>[_train|_test|-train|-test].json`` file is a JSON list of records
``{"question": str, "scores": {llm: score}, ...}`` (extra scalar fields such as
``cluster_id`` become query columns; a field named like a column the loader sets itself,
:data:`RESERVED_FIELDS`, is kept as ``field_<name>`` with a warning). A record whose scores
are all null is not a query: it is logged and listed in ``meta["unscored_prompts"]``
(its would-be query id). The task is the file stem without the split suffix; the split is
the suffix when there is one (``ceval.json`` has none).

Query identity and duplicates (documented behaviour)
----------------------------------------------------
A query is a distinct question text (``identity="text"``, default). Files are read train
first, then unsplit, then test (alphabetical within each); a question met again is merged
into its first record: per (query, LLM) cell the ``duplicates`` rule picks the value
(default ``"first"``), and task/split come from the first record. Each merge is logged and
listed in ``meta["merged_records"]`` as ``(kept query_id, file, index in file)``.
``identity="file"`` keys on (file, question) instead, so only repeats inside one file merge.

On ``split2_model7`` (16 files, 20,600 records): 11 records repeat a question of the same
file, giving 20,589 per-file queries (``identity="file"``, the count in SOURCES.md); 24 more
questions appear in two files (16 MMLU train/test, 4 ARC-Easy train/test, 2 ARC-Challenge
train/test, 1 CMMLU train/test, 1 in both ARC-Challenge and ARC-Easy train), so the default
gives 20,565 distinct questions x 7 LLMs.

Query ids are ``"<file stem>:<index of the first record in its file>"``.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from ..data import RoutingData
from ..errors import DataValidationError
from ..numeric import shown, to_floats
from ._common import order_files, parse_size, read_json, task_split_from_stem
from ._json import json_record_lines
from .registry import register

__all__ = ["load_routerdc", "question_records_to_long", "detect_routerdc", "RESERVED_FIELDS"]

log = logging.getLogger(__name__)


def question_records_to_long(records, source: str, *, question_key: str = "question",
                             scores_key: str = "scores") -> tuple[pd.DataFrame, pd.DataFrame]:
    """Validate ``[{question, scores: {llm: score}, ...}]`` records.

    Returns
    -------
    (long, extra)
        ``long`` has columns ``rec`` (record index), ``model``, ``score``; ``extra`` has one
        row per record with the question text and the other scalar fields.
    """
    if not isinstance(records, list):
        raise DataValidationError(f"expected a JSON list of records, got {type(records).__name__}",
                                  source=source)

    def at(i) -> tuple[int | None, str]:
        """The file line where record ``i`` starts, and " (record N of the list)"."""
        lines = json_record_lines(source) if source else []
        i = int(i)
        return (lines[i] if i < len(lines) else None), f" (record {i + 1} of the list)"

    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            line, rec_n = at(i)
            raise DataValidationError(f"expected an object, got {type(rec).__name__}{rec_n}",
                                      source=source, row=line)
        q = rec.get(question_key)
        if not isinstance(q, str) or not q:
            line, rec_n = at(i)
            raise DataValidationError(f"{question_key!r} must be a non-empty string, got "
                                      f"{q!r:.60}{rec_n}", source=source, row=line,
                                      column=question_key)
        s = rec.get(scores_key)
        if not isinstance(s, dict) or not s:
            line, rec_n = at(i)
            raise DataValidationError(f"{scores_key!r} must be a non-empty object {{llm: score}}, "
                                      f"got {s!r:.60}{rec_n}", source=source, row=line,
                                      column=scores_key)
    wide = pd.DataFrame.from_records([rec[scores_key] for rec in records])
    arr = (np.column_stack([to_floats(wide[c]) for c in wide.columns]) if len(wide.columns)
           else np.zeros((len(wide), 0)))
    bad = np.isnan(arr) & wide.notna().to_numpy()
    if bad.any():
        i, j = np.argwhere(bad)[0]
        line, rec_n = at(i)
        raise DataValidationError(f"score {shown(wide.iat[i, j])} for LLM {wide.columns[j]!r} is "
                                  f"not a number{rec_n}", source=source, row=line,
                                  column=f"{scores_key}.{wide.columns[j]}")
    inf = np.isinf(arr)
    if inf.any():
        i, j = np.argwhere(inf)[0]
        raw = records[int(i)][scores_key][wide.columns[j]]
        line, rec_n = at(i)
        raise DataValidationError(f"score {shown(raw)} for LLM {wide.columns[j]!r} is not a finite "
                                  f"number{rec_n}", source=source, row=line,
                                  column=f"{scores_key}.{wide.columns[j]}")
    i, j = np.nonzero(~np.isnan(arr))
    long = pd.DataFrame({"rec": i, "model": np.asarray(wide.columns, dtype=object)[j], "score": arr[i, j]})
    fields = [{_field_name(k, question_key): v for k, v in rec.items()
               if k != scores_key and not isinstance(v, (dict, list))} for rec in records]
    renamed = sorted({k for rec in records for k in rec
                      if k in RESERVED_FIELDS and k != question_key and k != scores_key})
    if renamed:
        log.warning("%s: record fields %s have names the loader uses; kept as %s", source,
                    renamed, [_field_name(k, question_key) for k in renamed])
    extra = pd.DataFrame.from_records(fields)
    return long, extra


# names the loaders give query columns themselves: a record field of one of these names is
# kept as "field_<name>" (the question itself becomes "text")
RESERVED_FIELDS = ("query_id", "text", "file", "task", "split", "metric", "_file", "_idx")


def _field_name(key: str, question_key: str) -> str:
    if key == question_key:
        return "text"
    return f"field_{key}" if key in RESERVED_FIELDS else key


def _merge_files(parts, *, identity: str, duplicates: str, source: str, name: str,
                 llms: pd.DataFrame | None = None, key_column: str = "text") -> RoutingData:
    """Concatenate per-file long tables and merge repeated questions (see module notes)."""
    frames = []
    for long, extra, label in parts:
        extra = extra.copy()
        extra["_file"] = label
        extra["_idx"] = np.arange(len(extra))
        frames.append((long, extra))
    allx = pd.concat([x for _, x in frames], ignore_index=True)
    offsets = np.cumsum([0] + [len(x) for _, x in frames[:-1]])
    key = allx[key_column].astype(str)
    if identity == "file":
        key = allx["_file"].astype(str) + "\x1f" + key
    elif identity != "text":
        raise ValueError(f"identity must be 'text' or 'file', got {identity!r}")
    first = pd.Series(np.arange(len(key))).groupby(key.to_numpy()).transform("min").to_numpy()
    qid_all = (allx["_file"].astype(str) + ":" + allx["_idx"].astype(str)).to_numpy()
    qid = qid_all[first]
    merged = np.flatnonzero(first != np.arange(len(key)))
    merged_list = [(qid[i], str(allx["_file"].iat[i]), int(allx["_idx"].iat[i])) for i in merged]
    if merged_list:
        log.warning("%s: %d records repeat an earlier question (identity=%r) and were merged into "
                    "it (duplicates=%r): %s", source, len(merged_list), identity, duplicates,
                    merged_list[:10])
    longs = []
    for (long, _), off in zip(frames, offsets):
        rec = long["rec"].to_numpy() + off
        lf = pd.DataFrame({"query_id": qid[rec], "model": long["model"].to_numpy(),
                           "score": long["score"].to_numpy()})
        if "cost" in long.columns:
            lf["cost"] = long["cost"].to_numpy()
        longs.append(lf)
    full = pd.concat(longs, ignore_index=True)
    data = RoutingData.from_long(full, duplicates=duplicates, llms=llms, name=name, source=source,
                                 meta={"merged_records": merged_list, "identity": identity})
    # query columns (text, task, split, ...) come from each query's first record only
    firsts = allx.drop(columns=["_idx"]).rename(columns={"_file": "file"}).iloc[np.unique(first)]
    firsts.insert(0, "query_id", qid[np.unique(first)])
    data.queries = data.queries[["query_id"]].merge(firsts, on="query_id", how="left")
    unscored = sorted(set(qid) - set(data.query_ids))
    if unscored:  # records without any score carry no routing signal: reported, not kept
        log.warning("%s: %d questions have no observed score (every score null) and are not "
                    "queries: %s", source, len(unscored), unscored[:10])
    data.meta["unscored_prompts"] = unscored
    data.llms["size"] = [s if pd.notna(s) else parse_size(n)
                         for n, s in zip(data.llms["name"], data.llms["size"])]
    return data


def detect_routerdc(path: Path) -> bool:
    path = Path(path)
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    if not files or files[0].suffix != ".json" or not files[0].is_file():
        return False
    if path.is_dir() and ((path / "default_llm.json").exists() or (path / "dcrouter_train.json").exists()):
        return False  # the LLMRouter folder
    with open(files[0], "rb") as fh:
        head = fh.read(4096).decode("utf-8", errors="replace")
    return head.lstrip().startswith("[") and '"question"' in head and '"scores"' in head


@register("routerdc", folder="routerdc_split2_model7", aliases=("routerdc_split2_model7",),
          detect=detect_routerdc,
          description="RouterDC question/scores JSON files (split2_model7: 7 open LLMs, 9 benchmarks)")
def load_routerdc(path, identity: str = "text", duplicates: str = "first") -> RoutingData:
    """Load a folder of RouterDC ``*.json`` files (or one file).

    Parameters
    ----------
    path : str or Path
        Folder or file.
    identity : {"text", "file"}
        Merge repeated questions across files or only within a file (module notes).
    duplicates : {"first", "mean", "last", "error"}
        Rule for a (query, LLM) cell given by several records.

    Returns
    -------
    RoutingData
        ``task`` and ``split`` from the file names, ``file`` column, no costs; LLM sizes
        parsed from the names.

    Example
    -------
    >>> d = load_routerdc("../shared/data/routerdc_split2_model7")  # doctest: +SKIP
    >>> d.shape  # doctest: +SKIP
    (20565, 7)
    """
    path = Path(path)
    files = order_files(path.glob("*.json")) if path.is_dir() else [path]
    if not files or not files[0].is_file():
        raise FileNotFoundError(f"{path}: no RouterDC .json files found")
    parts = []
    for f in files:
        long, extra = question_records_to_long(read_json(f), str(f))
        task, split = task_split_from_stem(f.stem)
        extra["task"], extra["split"] = task, split
        parts.append((long, extra, f.stem))
    return _merge_files(parts, identity=identity, duplicates=duplicates, source=str(path),
                        name="routerdc")
