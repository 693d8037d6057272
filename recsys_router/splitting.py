"""Query splits: seeded random ratios, a given split column, out-of-domain tasks, per task.

Pure index arithmetic over a queries table; :meth:`RoutingData.split` turns the index
arrays into datasets.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from .errors import DataValidationError

__all__ = ["split_indices", "split_labels", "SPLIT_LABELS"]

#: the labels a split column may hold (after trimming and lower-casing)
SPLIT_LABELS = ("train", "val", "test")
_SPLIT_ALIASES = {"validation": "val", "dev": "val", "valid": "val"}


def split_labels(values) -> pd.Series:
    """Split labels as every split reader compares them: as text, surrounding whitespace
    stripped, lower-cased, and ``validation``/``dev``/``valid`` read as ``val``. Missing
    values stay missing. :func:`split_indices` (``--split-column``) and
    :func:`recsys_router.datasets.resolve.select_split` (``calibrate --split``) both use it.

    Example
    -------
    >>> split_labels(["Test ", "dev", None, "train"]).tolist()
    ['test', 'val', nan, 'train']
    """
    vals = pd.Series(values, dtype=object)
    has = vals.notna()
    out = pd.Series(np.nan, index=vals.index, dtype=object)
    out[has] = vals[has].astype(str).str.strip().str.lower().replace(_SPLIT_ALIASES)
    return out


def split_indices(queries: pd.DataFrame, ratios: Sequence[float] | None = (0.8, 0.1, 0.1), *,
                  seed: int = 0, column: str | None = None, ood_tasks: Sequence[str] | None = None,
                  stratify_task: bool = False, source: str | None = None) -> dict[str, np.ndarray]:
    """Sorted query row indices per part (see :meth:`RoutingData.split` for the options).

    Example
    -------
    >>> q = pd.DataFrame({"query_id": list("abcd"), "split": ["train", "test", "train", "dev"]})
    >>> {k: v.tolist() for k, v in split_indices(q, column="split").items()}
    {'train': [0, 2], 'test': [1], 'val': [3]}
    """
    if column is not None:
        if column not in queries.columns:
            raise DataValidationError(f"no split column {column!r}; query columns: "
                                      f"{list(queries.columns)}", source=source,
                                      column=column)
        vals = queries[column]
        if vals.isna().any():
            row = int(np.flatnonzero(vals.isna().to_numpy())[0])
            raise DataValidationError(f"query {queries['query_id'].iloc[row]!r} has no value in split "
                                      f"column {column!r}", source=source, row=row,
                                      column=column)
        norm = split_labels(vals)
        bad = ~norm.isin(SPLIT_LABELS).to_numpy()
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise DataValidationError(
                f"query {queries['query_id'].iloc[row]!r} has split label {vals.iloc[row]!r} "
                f"({int(bad.sum())} queries have a label other than the allowed "
                f"{', '.join(SPLIT_LABELS)} or {', '.join(_SPLIT_ALIASES)} for val; case and "
                f"surrounding spaces are ignored)", source=source, row=row, column=column)
        return {k: np.flatnonzero((norm == k).to_numpy()) for k in dict.fromkeys(norm.tolist())}
    rng = np.random.default_rng(seed)
    ratios = _check_ratios(ratios)
    tasks, has_task = _task_labels(queries)
    if ood_tasks is not None:
        present = set(tasks[has_task].tolist())
        unknown = set(map(str, ood_tasks)) - present
        if unknown:
            raise DataValidationError(f"unknown OOD task(s) {sorted(unknown)}; tasks present: "
                                      f"{sorted(present)}", source=source, column="task")
        test_mask = has_task & np.isin(tasks, [str(t) for t in ood_tasks])
        rest = np.flatnonzero(~test_mask)
        tr = ratios[0] / (ratios[0] + ratios[1]) if len(ratios) == 3 else 1.0
        perm = rng.permutation(rest)
        n_tr = int(round(tr * len(perm)))
        parts = {"train": perm[:n_tr], "val": perm[n_tr:], "test": np.flatnonzero(test_mask)}
    elif stratify_task:
        parts = {"train": [], "val": [], "test": []}
        groups = _task_groups(tasks, has_task)
        for idx in groups:
            for k, v in _random_parts(idx, ratios, rng).items():
                parts[k].extend(v.tolist())
        parts = {k: np.sort(np.asarray(v, dtype=np.int64)) for k, v in parts.items()}
    else:
        parts = _random_parts(np.arange(len(queries)), ratios, rng)
    return {k: np.sort(v) for k, v in parts.items() if len(v)}


def _task_labels(queries: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The task of each query as a string (``""`` where it has none) and a has-task mask."""
    if "task" not in queries.columns:
        return np.full(len(queries), "", dtype=object), np.zeros(len(queries), bool)
    col = queries["task"]
    has = col.notna().to_numpy()
    labels = np.array([str(t) if h else "" for t, h in zip(col.tolist(), has)], dtype=object)
    return labels, has


def _task_groups(tasks: np.ndarray, has_task: np.ndarray) -> list[np.ndarray]:
    """Ascending query indices per task, the tasks in sorted (string) order, then the
    queries without a task as one more group (split last); one factorize and one stable
    sort instead of a pass over the queries per task.

    Example
    -------
    >>> t = np.array(["b", "", "a", "b"], dtype=object)
    >>> [g.tolist() for g in _task_groups(t, t != "")]
    [[2], [0, 3], [1]]
    """
    with_task = np.flatnonzero(has_task)
    codes, uniques = pd.factorize(tasks[with_task], sort=True)  # sorted like sorted(set(...))
    order = with_task[np.argsort(codes, kind="stable")]  # stable: ascending within a task
    groups = np.split(order, np.cumsum(np.bincount(codes, minlength=len(uniques)))[:-1]) \
        if len(uniques) else []
    if len(with_task) < len(tasks):  # the queries without a task are one more group, split last
        groups.append(np.flatnonzero(~has_task))
    return groups


def _check_ratios(ratios) -> tuple[float, ...]:
    try:
        ratios = tuple(float(r) for r in ratios)
    except (TypeError, ValueError):
        raise ValueError(f"ratios must be 2 or 3 numbers, got {ratios!r}") from None
    if len(ratios) not in (2, 3) or not all(np.isfinite(r) and r >= 0 for r in ratios) \
            or abs(sum(ratios) - 1) > 1e-6:
        raise ValueError(f"ratios must be 2 or 3 finite non-negative fractions summing to 1, "
                         f"got {ratios}")
    return ratios


def _random_parts(idx: np.ndarray, ratios, rng) -> dict[str, np.ndarray]:
    perm = rng.permutation(idx)
    n = len(perm)
    n_tr = int(round(ratios[0] * n))
    n_va = int(round(ratios[1] * n)) if len(ratios) == 3 else 0
    if len(ratios) == 2:
        return {"train": perm[:n_tr], "test": perm[n_tr:]}
    return {"train": perm[:n_tr], "val": perm[n_tr:n_tr + n_va], "test": perm[n_tr + n_va:]}
