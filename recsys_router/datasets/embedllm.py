"""EmbedLLM correctness data (Zhuang et al., 2025, "EmbedLLM: Learning Compact
Representations of Large Language Models"; Hugging Face ``RZ412/EmbedLLM``).

Folder layout::

    train.csv, val.csv, test.csv   # one row per (prompt, model): prompt_id, model_id, label,
                                   # category, model_name, prompt (text, where present)
    model_order.csv                # model_id, model_name
    question_order.csv             # prompt_id, prompt

Queries are ``prompt_id`` values (ids kept as strings), LLMs the ``model_id`` values named
through ``model_order.csv`` (else the ``model_name`` column, else ``model_<id>``), scores
the 0/1 ``label``; ``task`` = ``category``; ``split`` = the file. Texts come from
``question_order.csv`` (else the ``prompt`` column). Ids must be whole numbers within
int64; an id listed twice in ``model_order.csv``/``question_order.csv`` with two different
names/texts is an error naming both lines (identical repeats are kept once, logged). Only the needed columns are read, so
the 2.7 GB ``train.csv`` is parsed without its repeated prompt texts.

The same prompt can be listed under several category variants, giving repeated
(prompt, model) records: the ``duplicates`` rule picks the value (default ``"first"`` in
file order train, val, test; ``"mean"`` averages); the number merged is logged and kept in
``meta["merged_duplicates"]``. Such a prompt's task and split are those of its first
record (the number of prompts with several is logged). No costs are published.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

from ..data import RoutingData
from ..errors import DataValidationError
from ._common import csv_header, parse_size, read_csv, require_columns
from ._rows import CsvLines
from .registry import register

__all__ = ["load_embedllm", "detect_embedllm"]

log = logging.getLogger(__name__)

_SPLIT_FILES = (("train", "train.csv"), ("val", "val.csv"), ("test", "test.csv"))
_WANT = ("prompt_id", "model_id", "label", "category", "model_name")


_I64 = (-(1 << 63), (1 << 63) - 1)


def _int_column(df: pd.DataFrame, col: str, source: Path) -> pd.Series:
    """An id column as int64; a value that is not a whole number within int64 (missing,
    infinite, fractional, or so large it would wrap onto another id) raises naming the
    file line."""
    raw = df[col]
    if raw.dtype == np.int64:
        return raw
    if raw.dtype.kind in "iu":
        bad = (raw > _I64[1]).to_numpy()
    elif raw.dtype.kind == "f":
        vals = raw.to_numpy()
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(vals) | (vals != np.floor(vals)) | (np.abs(vals) > 2 ** 53)
    else:
        bad = np.array([_as_int(v) is None for v in raw.tolist()], dtype=bool)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        v = raw.iloc[i]
        v = v.item() if isinstance(v, np.generic) else v
        raise DataValidationError(f"{col} {v!r} is not an integer id (a whole number within "
                                  f"int64)", source=str(source),
                                  row=CsvLines(source).field_line(i, col), column=col)
    if raw.dtype.kind in "iuf":
        return raw.astype(np.int64)
    return pd.Series([_as_int(v) for v in raw.tolist()], index=raw.index, dtype=np.int64)


def _as_int(v) -> int | None:
    """A whole number within int64 from an id field (int, integral float or digits)."""
    if isinstance(v, (bool, np.bool_)) or v is None:
        return None
    if isinstance(v, (int, np.integer)):
        n = int(v)
    elif isinstance(v, (float, np.floating)):
        if not np.isfinite(v) or v != np.floor(v) or abs(v) > 2 ** 53:
            return None
        n = int(v)
    else:
        text = str(v).strip()
        try:
            n = int(text)
        except ValueError:
            try:
                f = float(text)
            except ValueError:
                return None
            return _as_int(f)
    return n if _I64[0] <= n <= _I64[1] else None


def _unique_ids(df: pd.DataFrame, id_col: str, value_col: str, source: Path) -> pd.DataFrame:
    """One row per id: repeats with the same value are dropped (logged); an id given two
    different values raises naming both file lines."""
    pairs = df.drop_duplicates([id_col, value_col])
    dup = pairs[id_col].duplicated(keep=False).to_numpy()
    if dup.any():
        key = pairs[id_col].to_numpy()[dup][0]
        mine = (df[id_col] == key).to_numpy()
        i = int(np.flatnonzero(mine)[0])
        # the first record that differs from the first one of this id
        same = df[value_col].astype(str).to_numpy() == str(df[value_col].iloc[i])
        j = int(np.flatnonzero(mine & ~same)[0])
        lines = CsvLines(source)
        li, lj = lines.field_line(i, id_col), lines.field_line(j, id_col)
        raise DataValidationError(
            f"{id_col} {key} is listed twice with different {value_col}s (lines {li} and "
            f"{lj}): {str(df[value_col].iloc[i])[:60]!r} and "
            f"{str(df[value_col].iloc[j])[:60]!r}; expected one {value_col} per {id_col}",
            source=str(source), row=lj, column=id_col)
    n = len(df) - len(pairs)
    if n:
        log.warning("%s: %d repeated identical (%s, %s) rows kept once", source, n, id_col,
                    value_col)
    return pairs


def _one_value_per_id(frames, files, id_col: str, value_col: str, fix: str) -> None:
    """Across the split files' records (no order file), an id given two different non-null
    values raises naming both files and lines, as :func:`_unique_ids` does for an order
    file (the records would otherwise load with the first value, silently)."""
    parts = [pd.DataFrame({"id": df[id_col].to_numpy(), "v": df[value_col].to_numpy(),
                           "file": k, "row": np.arange(len(df))})
             for k, df in enumerate(frames) if value_col in df.columns]
    if not parts:
        return
    allr = pd.concat(parts, ignore_index=True)
    allr = allr[allr["v"].notna().to_numpy()]
    pairs = allr.drop_duplicates(["id", "v"])
    dup = pairs["id"].duplicated(keep=False).to_numpy()
    if not dup.any():
        return
    first = pairs[dup].iloc[0]
    other = pairs[(pairs["id"] == first["id"]).to_numpy() & (pairs["v"] != first["v"]).to_numpy()]
    second = other.iloc[0]
    (f1, l1), (f2, l2) = ((files[int(r["file"])],
                           CsvLines(files[int(r["file"])]).field_line(int(r["row"]), id_col))
                          for r in (first, second))
    where1 = f"line {l1}" if f1 == f2 else f"{f1.name} line {l1}"
    raise DataValidationError(
        f"{id_col} {first['id']} has two different {value_col}s, {str(first['v'])[:60]!r} "
        f"({where1}) and {str(second['v'])[:60]!r} (line {l2}); expected one {value_col} per "
        f"{id_col} ({int(pairs.loc[dup, 'id'].nunique())} such ids): fix the records or give "
        f"{fix}", source=str(f2), row=l2, column=value_col)


def _splits(splits) -> tuple[str, ...]:
    """The ``splits`` option as split names: a sequence or a comma-separated string."""
    if isinstance(splits, str):
        splits = [s for s in splits.split(",")]
    names = tuple(str(s).strip() for s in splits if str(s).strip())
    known = [s for s, _ in _SPLIT_FILES]
    unknown = [s for s in names if s not in known]
    if unknown or not names:
        raise ValueError(f"splits must name some of {', '.join(known)} (a list or a comma-"
                         f"separated string such as 'train,test'), got {splits!r}")
    return names


def _read_split(path: Path, with_prompt: bool) -> pd.DataFrame:
    header = csv_header(path)
    want = [c for c in header if c in _WANT or (with_prompt and c == "prompt")]
    df = read_csv(path, usecols=want)
    require_columns(df, ("prompt_id", "model_id", "label"), path)
    return df


def detect_embedllm(path: Path) -> bool:
    path = Path(path)
    return path.is_dir() and (path / "model_order.csv").is_file() and any(
        (path / f).is_file() for _, f in _SPLIT_FILES)


@register("embedllm", folder="embedllm", hub_repo="RZ412/EmbedLLM",
          hub_files=("train.csv", "val.csv", "test.csv", "model_order.csv",
                     "question_order.csv"), detect=detect_embedllm,
          description="EmbedLLM correctness (112 LLMs, ~36k prompts, 0/1 labels; train/val/test)")
def load_embedllm(path, duplicates: str = "first", splits=("train", "val", "test")) -> RoutingData:
    """Load the EmbedLLM folder.

    Parameters
    ----------
    path : str or Path
        Folder with ``train.csv``/``val.csv``/``test.csv`` (any subset) and, ideally,
        ``model_order.csv`` and ``question_order.csv``.
    duplicates : {"first", "mean", "last", "error"}
        Rule for repeated (prompt, model) records.
    splits : sequence of str or str
        Which split files to read: some of ``train``, ``val``, ``test``, as a list or a
        comma-separated string (``-o splits=train,test``); another name is an error.

    Returns
    -------
    RoutingData
    """
    path = Path(path)
    order_f, q_f = path / "model_order.csv", path / "question_order.csv"
    need_prompt = not q_f.is_file()
    frames, offsets, files = [], [], []
    splits = _splits(splits)
    todo = [(s, path / f) for s, f in _SPLIT_FILES if s in splits and (path / f).is_file()]
    # the published train.csv is 2.7 GB: show progress on a terminal (silent otherwise)
    for split, f in tqdm(todo, desc="EmbedLLM files", unit="file", disable=None):
        df = _read_split(f, need_prompt)
        df["prompt_id"] = _int_column(df, "prompt_id", f)
        df["model_id"] = _int_column(df, "model_id", f)
        df["split"] = split
        frames.append(df)
        files.append(f)
    if not frames:
        raise FileNotFoundError(f"{path}: none of {[f for _, f in _SPLIT_FILES]} found "
                                f"(EmbedLLM layout); download with `recsys-router data download "
                                f"embedllm`")
    if order_f.is_file():
        order = read_csv(order_f)
        require_columns(order, ("model_id", "model_name"), order_f)
        order["model_id"] = _int_column(order, "model_id", order_f)
        order = _unique_ids(order, "model_id", "model_name", order_f)
        names = order.set_index("model_id")["model_name"].astype(str)
    elif "model_name" in frames[0].columns:
        _one_value_per_id(frames, files, "model_id", "model_name", "model_order.csv")
        names = (pd.concat([f[["model_id", "model_name"]] for f in frames])
                 .drop_duplicates("model_id").set_index("model_id")["model_name"].astype(str))
    else:
        ids = sorted(set(np.concatenate([f["model_id"].unique() for f in frames])))
        names = pd.Series([f"model_{i}" for i in ids], index=ids)
    for df, f in zip(frames, files):
        unknown = ~df["model_id"].isin(names.index)
        if unknown.any():
            i = int(np.flatnonzero(unknown.to_numpy())[0])
            raise DataValidationError(f"model_id {df['model_id'].iloc[i]} is not in "
                                      f"{order_f.name}", source=str(f),
                                      row=CsvLines(f).field_line(i, "model_id"),
                                      column="model_id")
    # validate labels per file so errors name the right file and row
    for df, f in zip(frames, files):
        lab = pd.to_numeric(df["label"], errors="coerce")
        bad = ~np.isfinite(lab.to_numpy(dtype=np.float64, na_value=np.nan))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            v = df["label"].iloc[i]
            v = v.item() if isinstance(v, np.generic) else v
            raise DataValidationError(f"label {v!r} is not a finite number", source=str(f),
                                      row=CsvLines(f).field_line(i, "label"), column="label")
        df["label"] = lab
    if need_prompt:
        _one_value_per_id(frames, files, "prompt_id", "prompt", "question_order.csv")
    full = pd.concat(frames, ignore_index=True)
    llms = pd.DataFrame({"name": names.to_numpy(), "model_id": names.index.to_numpy()})
    llms["size"] = [parse_size(n) for n in llms["name"]]
    long = pd.DataFrame({"query_id": full["prompt_id"].astype(str), "model": full["model_id"].map(names),
                         "score": full["label"], "split": full["split"]})
    if "category" in full.columns:
        long["task"] = full["category"].to_numpy()
    if need_prompt and "prompt" in full.columns:
        long["text"] = full["prompt"].to_numpy()
    data = RoutingData.from_long(long, duplicates=duplicates, llms=llms, name="embedllm",
                                 source=str(path), labels="first")
    if data.meta.get("merged_duplicates"):
        log.warning("%s: %d repeated (prompt, model) records merged with duplicates=%r", path,
                    data.meta["merged_duplicates"], duplicates)
    if not need_prompt:
        qo = read_csv(q_f)
        require_columns(qo, ("prompt_id", "prompt"), q_f)
        qo["prompt_id"] = _int_column(qo, "prompt_id", q_f)
        qo = _unique_ids(qo, "prompt_id", "prompt", q_f)
        text = pd.Series(qo["prompt"].to_numpy(), index=qo["prompt_id"].astype(str).to_numpy())
        data.queries["text"] = data.queries["query_id"].map(text).to_numpy()
    return data
