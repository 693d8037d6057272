"""Helpers shared by the real-format loaders: reading files with located errors,
LLM-size parsing, split/task names from file names, stable query ids.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import DataValidationError

__all__ = ["read_json", "read_jsonl", "require_columns", "parse_size", "task_split_from_stem",
           "text_hash", "order_files", "SPLIT_ORDER", "resolve_file", "log_merged"]

log = logging.getLogger("recsys_router.datasets")

# files are read in this split order so that, when a prompt appears in several files,
# the training copy comes first (see each loader's notes on duplicates)
SPLIT_ORDER = {"train": 0, "val": 1, None: 2, "test": 3}
_SPLIT_SUFFIX = re.compile(r"^(?P<task>.+?)[_\-.](?P<split>train|test|val|valid|validation|dev)$",
                           re.IGNORECASE)


def read_json(path: Path):
    """Parse a JSON file; a syntax error names the file, line and column."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except json.JSONDecodeError as exc:
        raise DataValidationError(f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
                                  source=str(path), row=exc.lineno) from None


def read_jsonl(path: Path) -> pd.DataFrame:
    """Read a JSON-lines file into a DataFrame (one record per line).

    A line that is not a JSON object raises :class:`DataValidationError` naming its line
    number (1-based). Blank lines are skipped.
    """
    records = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataValidationError(f"invalid JSON on this line: {exc.msg}", source=str(path),
                                          row=lineno) from None
            if not isinstance(rec, dict):
                raise DataValidationError(f"expected a JSON object per line, got {type(rec).__name__}",
                                          source=str(path), row=lineno)
            records.append(rec)
    if not records:
        raise DataValidationError("no records: the file is empty", source=str(path))
    return pd.DataFrame.from_records(records)


def require_columns(df: pd.DataFrame, columns, source, what: str = "column") -> None:
    """Raise naming the first missing column and listing those present."""
    for col in columns:
        if col not in df.columns:
            raise DataValidationError(f"missing required {what} {col!r}; present: {list(df.columns)}",
                                      source=str(source), column=col)


_MOE = re.compile(r"(?<![A-Za-z0-9.])(\d+)\s*[xX]\s*(\d+(?:\.\d+)?)\s*[bB](?![A-Za-z])")
_BILLIONS = re.compile(r"(?<![A-Za-z0-9.])(\d+(?:\.\d+)?)\s*[bB](?![A-Za-z])")
_MILLIONS = re.compile(r"(?<![A-Za-z0-9.])(\d+(?:\.\d+)?)\s*[mM](?![A-Za-z])")


def parse_size(name) -> float:
    """Parameter count in billions parsed from an LLM name, NaN when the name has none.

    ``"8x7b"`` (mixture of experts) counts experts x size (56); ``"1.5B"`` -> 1.5;
    ``"560m"`` -> 0.56. A number glued to letters (``"Qwen2.5"``, ``"A2.7B"``) or followed
    by more letters (``"7bit"``) is not a size. The first match wins.

    Example
    -------
    >>> parse_size("mistralai/Mixtral-8x7B-Instruct"), parse_size("Llama-3.1-8B"), parse_size("gpt-4")
    (56.0, 8.0, nan)
    """
    if name is None or (isinstance(name, float) and np.isnan(name)):
        return float("nan")
    s = str(name)
    m = _MOE.search(s)
    if m:
        return float(m.group(1)) * float(m.group(2))
    m = _BILLIONS.search(s)
    if m:
        return float(m.group(1))
    m = _MILLIONS.search(s)
    if m:
        return float(m.group(1)) / 1000.0
    return float("nan")


def task_split_from_stem(stem: str) -> tuple[str, str | None]:
    """Split a file stem like ``mmlu_train`` / ``gsm8k-test`` into ``(task, split)``.

    ``val``/``valid``/``validation``/``dev`` become ``"val"``; a stem without a split
    suffix gives ``(stem, None)``.

    Example
    -------
    >>> task_split_from_stem("gsm8k-test"), task_split_from_stem("ceval")
    (('gsm8k', 'test'), ('ceval', None))
    """
    m = _SPLIT_SUFFIX.match(stem)
    if not m:
        return stem, None
    split = m.group("split").lower()
    if split in ("valid", "validation", "dev"):
        split = "val"
    return m.group("task"), split


def order_files(paths) -> list[Path]:
    """Sort files train first, then unsplit, val, test (alphabetical within each)."""
    def key(p: Path):
        _, split = task_split_from_stem(Path(p).stem)
        return (SPLIT_ORDER.get(split, 2), Path(p).name)
    return sorted((Path(p) for p in paths), key=key)


def text_hash(texts: pd.Series, n: int = 12) -> pd.Series:
    """Stable short SHA-1 hex digest of each text (used to build query ids)."""
    return texts.astype(str).map(lambda t: hashlib.sha1(t.encode("utf-8")).hexdigest()[:n])


def resolve_file(path, names: tuple[str, ...], what: str) -> Path:
    """``path`` itself if it is a file, else the first of ``names`` inside the folder."""
    path = Path(path)
    if path.is_file():
        return path
    for n in names:
        if (path / n).is_file():
            return path / n
    raise FileNotFoundError(f"{path}: no {what} found (looked for {', '.join(names)})")


def log_merged(source, n: int, what: str) -> None:
    if n:
        log.warning("%s: %s", source, what)
