"""LLMRouter data (ulab-uiuc/LLMRouter; its DC-router preprocessed split and example data).

Folder layout::

    dcrouter_train.json, dcrouter_test.json   # [{question, scores: {llm: score}, ...}]
    default_llm.json                          # {llm: {size: "7B", feature, input_price, output_price, ...}}
    default_query_train.jsonl, default_query_test.jsonl  # {task_name, query, metric, ...} per line

Queries are distinct question texts. ``task`` and ``metric`` come from the query files,
matched on the exact question text (train file first; a text listed under several tasks
takes its first listing). A question in both ``dcrouter_train.json`` and
``dcrouter_test.json`` is one query: per cell the ``duplicates`` rule picks the value
(default ``"first"``, the train record) and its split is ``train``; merges are logged and
listed in ``meta["merged_records"]``. On the published files: 5,608 train + 500 test records,
119 questions in both (GPQA 50, HumanEval 50, MBPP 19; 50 of them with different scores),
hence 5,989 queries x 9 LLMs.

Cost estimate (the data has prices, not token counts)
-----------------------------------------------------
``cost[i, j] = (input_tokens_i * input_price_j + output_tokens * output_price_j) / 1e6`` USD
with ``input_tokens_i = ceil(len(question_i) / chars_per_token)`` (``chars_per_token=4``,
the usual English average) and a fixed ``output_tokens=256`` per answer; prices are USD per
1M tokens from ``default_llm.json``. Both constants are options. It is a proxy: it ranks
LLMs by price and queries by length, nothing more.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from ..data import RoutingData
from ..errors import DataValidationError
from ..hyperparams import check_number
from ._common import parse_size, read_json, read_jsonl_lines, require_columns
from .registry import register
from .routerdc import _merge_files, question_records_to_long

__all__ = ["load_llmrouter", "detect_llmrouter", "estimate_costs"]

log = logging.getLogger(__name__)


def _llm_table(path: Path) -> pd.DataFrame:
    raw = read_json(path)
    if not isinstance(raw, dict):
        raise DataValidationError(f"expected an object {{llm: {{...}}}}, got {type(raw).__name__}",
                                  source=str(path))
    rows = []
    for name, info in raw.items():
        if not isinstance(info, dict):
            raise DataValidationError(f"LLM entry must be an object, got {type(info).__name__}",
                                      source=str(path), column=name)
        price = {k: _price(info.get(k), path, f"{name}.{k}")
                 for k in ("input_price", "output_price")}
        size = parse_size(info.get("size")) if info.get("size") is not None else parse_size(name)
        rows.append({"name": name, **price, "size": size, "description": info.get("feature"),
                     "api_model": info.get("model")})
    return pd.DataFrame(rows)


def _price(v, path: Path, field: str) -> float:
    """A price field: a finite number >= 0 (USD per 1M tokens), or null for unknown."""
    if v is None:
        return np.nan
    num = None
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        num = float(v)
    elif isinstance(v, str):
        try:
            num = float(v)
        except ValueError:
            num = None
    if num is None or not np.isfinite(num) or num < 0:
        what = "a number" if num is None else "a finite number >= 0"
        raise DataValidationError(f"{field.rsplit('.', 1)[-1]} {v!r} is not {what} (USD per 1M "
                                  f"tokens; null = unknown)", source=str(path), column=field)
    return num


def estimate_costs(texts, input_price, output_price, *, chars_per_token: float = 4.0,
                   output_tokens: float = 256.0) -> np.ndarray:
    """USD cost proxy per (query, LLM); see the module notes.

    Example
    -------
    >>> estimate_costs(["abcd" * 100], [1.0], [2.0]).round(8).tolist()  # 100 in, 256 out tokens
    [[0.000612]]
    """
    n_in = np.ceil(np.array([len(t) for t in texts], dtype=np.float64) / chars_per_token)
    return (n_in[:, None] * np.asarray(input_price, dtype=np.float64)[None, :]
            + output_tokens * np.asarray(output_price, dtype=np.float64)[None, :]) / 1e6


def detect_llmrouter(path: Path) -> bool:
    path = Path(path)
    return path.is_dir() and (path / "dcrouter_train.json").is_file()


@register("llmrouter", folder="llmrouter", detect=detect_llmrouter,
          description="LLMRouter DC-router split: 9 NVIDIA-NIM LLMs on 14 tasks, prices per LLM "
                      "(costs estimated from text length)")
def load_llmrouter(path, duplicates: str = "first", chars_per_token: float = 4.0,
                   output_tokens: float = 256.0):
    """Load the LLMRouter folder.

    Parameters
    ----------
    path : str or Path
        Folder with ``dcrouter_{train,test}.json`` (required), ``default_llm.json`` and
        ``default_query_{train,test}.jsonl`` (optional: without them there are no prices,
        costs, tasks or metrics).
    duplicates : {"first", "mean", "last", "error"}
        Rule for a question given in both files.
    chars_per_token, output_tokens : float
        Cost estimate constants (module notes): characters per input token, in (0, 1e9],
        and output tokens per answer, in [0, 1e9]; anything else is refused naming the option.

    Returns
    -------
    RoutingData
        Columns ``task``, ``metric``, ``split``; LLM prices/sizes/descriptions; USD cost proxy.

    Example
    -------
    >>> d = load_llmrouter("../shared/data/llmrouter")  # doctest: +SKIP
    >>> d.shape  # doctest: +SKIP
    (5989, 9)
    """
    chars_per_token = check_number(chars_per_token, "dataset option 'chars_per_token'", low=0,
                                   low_open=True, high=1e9)
    output_tokens = check_number(output_tokens, "dataset option 'output_tokens'", low=0, high=1e9)
    path = Path(path)
    parts = []
    for split in ("train", "test"):
        f = path / f"dcrouter_{split}.json"
        if not f.is_file():
            if split == "train":
                raise FileNotFoundError(f"{path}: no dcrouter_train.json (LLMRouter layout expected)")
            continue
        long, extra = question_records_to_long(read_json(f), str(f))
        extra["split"] = split
        parts.append((long, extra, f"{split}"))
    llm_file = path / "default_llm.json"
    llms = None
    if llm_file.is_file():
        table = _llm_table(llm_file)
        scored = pd.unique(pd.concat([p[0]["model"] for p in parts]))
        unknown = [m for m in scored if m not in set(table["name"])]
        if unknown:
            log.warning("%s: scored LLMs %s are not in default_llm.json (no price)", path, unknown)
            table = pd.concat([table, pd.DataFrame({"name": unknown})], ignore_index=True)
        llms = table.set_index("name").loc[list(scored)].reset_index()
    data = _merge_files(parts, identity="text", duplicates=duplicates, source=str(path),
                        name="llmrouter", llms=llms)
    data.queries = data.queries.drop(columns=["file"])
    _attach_tasks(data, path)
    if llms is None:
        return data
    costs = estimate_costs(data.texts, data.llms["input_price"], data.llms["output_price"],
                           chars_per_token=chars_per_token, output_tokens=output_tokens)
    return RoutingData(data.queries, data.llms, data.scores, costs, name=data.name,
                       source=data.source,
                       meta={**data.meta, "cost_estimate": {"chars_per_token": chars_per_token,
                                                            "output_tokens": output_tokens}})


def _attach_tasks(data, path: Path) -> None:
    frames = []
    for split in ("train", "test"):
        f = path / f"default_query_{split}.jsonl"
        if f.is_file():
            q, lines = read_jsonl_lines(f)
            require_columns(q, ("task_name", "query"), f)
            for col in ("query", "task_name", "metric"):
                if col not in q.columns:
                    continue
                ok = q[col].map(lambda v: v is None or isinstance(v, str)
                                or (isinstance(v, float) and np.isnan(v))).to_numpy(dtype=bool)
                if col == "query":
                    ok = ok & q[col].map(lambda v: isinstance(v, str)).to_numpy(dtype=bool)
                if not ok.all():
                    i = int(np.flatnonzero(~ok)[0])
                    raise DataValidationError(f"{col} must be a string, got "
                                              f"{type(q[col].iloc[i]).__name__} "
                                              f"{str(q[col].iloc[i])[:60]!r}", source=str(f),
                                              row=int(lines[i]), column=col)
            frames.append(q)
    if not frames:
        return
    q = pd.concat(frames, ignore_index=True).drop_duplicates("query", keep="first").set_index("query")
    text = data.queries["text"]
    data.queries["task"] = text.map(q["task_name"]).to_numpy()
    if "metric" in q.columns:
        data.queries["metric"] = text.map(q["metric"]).to_numpy()
    n_missing = int(data.queries["task"].isna().sum())
    data.meta["queries_without_task"] = n_missing
    if n_missing:
        log.warning("%s: %d questions are not in default_query_*.jsonl (task unknown)", path,
                    n_missing)
