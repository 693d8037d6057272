"""Splits of queries with missing task/split labels and hostile ratios (splitting.py,
datasets.resolve.select_split): every query lands in exactly one part, errors are clear."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recsys_router.data import RoutingData
from recsys_router.datasets.resolve import select_split
from recsys_router.errors import DataValidationError


def _labelled() -> RoutingData:
    # tasks: a = q0 q1 q2 q8 (4), b = q3 q4 q7 (3), none = q5 q6 q9 (3)
    q = pd.DataFrame({"query_id": [f"q{i}" for i in range(10)],
                      "task": ["a", "a", "a", "b", "b", None, np.nan, "b", "a", None]})
    return RoutingData(q, ["m1", "m2"], np.ones((10, 2)))


def test_stratify_keeps_queries_without_a_task():
    parts = _labelled().split((0.6, 0.2, 0.2), seed=0, stratify_task=True)
    # per group round(0.6 n) train, round(0.2 n) val, the rest test:
    # a (4): 2/1/1, b (3): 2/1/0, no task (3): 2/1/0
    assert {k: v.n_queries for k, v in parts.items()} == {"train": 6, "val": 3, "test": 1}
    ids = [q for p in parts.values() for q in p.query_ids]
    assert sorted(ids) == sorted(f"q{i}" for i in range(10))
    taskless = {"q5", "q6", "q9"}
    assert len(taskless & set(parts["train"].query_ids)) == 2
    assert len(taskless & set(parts["val"].query_ids)) == 1


def test_stratify_without_any_task_splits_all_queries():
    d = RoutingData([f"q{i}" for i in range(6)], ["m1", "m2"], np.ones((6, 2)))
    parts = d.split((0.5, 0.5), stratify_task=True, seed=0)
    assert {k: v.n_queries for k, v in parts.items()} == {"train": 3, "test": 3}


def test_stratify_groups_match_one_pass_per_task_in_sorted_order():
    # the grouped indices (one factorize + stable sort) are the per-task scan they replaced:
    # tasks in sorted string order (1 and "1" are one task "1"; "" is a task), ascending
    # indices, the taskless queries last; so the seeded draws and the splits are unchanged
    from recsys_router.splitting import _task_groups, _task_labels, split_indices
    rng = np.random.default_rng(3)
    vals = np.array([1, "1", 2.5, "b", "", "B", "ä", None, np.nan], dtype=object)
    q = pd.DataFrame({"query_id": [f"q{i}" for i in range(400)],
                      "task": pd.Series(list(rng.choice(vals, 400)), dtype=object)})
    tasks, has = _task_labels(q)
    want = [np.flatnonzero(has & (tasks == t)) for t in sorted(set(tasks[has]))]
    want.append(np.flatnonzero(~has))
    got = _task_groups(tasks, has)
    assert [g.tolist() for g in got] == [w.tolist() for w in want]
    assert [g.tolist() for g in _task_groups(tasks[~has], has[~has])] == [list(range((~has).sum()))]
    assert _task_groups(tasks[has][:0], has[has][:0]) == []
    r = np.random.default_rng(0)
    parts = {"train": [], "val": [], "test": []}
    for idx in want:  # the draws of the code before the grouping rewrite
        perm = r.permutation(idx)
        n_tr, n_va = int(round(0.6 * len(perm))), int(round(0.2 * len(perm)))
        for k, v in zip(parts, (perm[:n_tr], perm[n_tr:n_tr + n_va], perm[n_tr + n_va:])):
            parts[k].extend(v.tolist())
    got_parts = split_indices(q, (0.6, 0.2, 0.2), seed=0, stratify_task=True)
    assert {k: v.tolist() for k, v in got_parts.items()} == {k: sorted(v) for k, v in parts.items()}


def test_unknown_ood_task_and_split_with_missing_labels_are_clear_errors():
    q = pd.DataFrame({"query_id": [f"q{i}" for i in range(4)], "task": ["a", None, "b", "a"],
                      "split": ["train", None, "test", "train"]})
    d = RoutingData(q, ["m1"], np.ones((4, 1)))
    with pytest.raises(DataValidationError, match=r"unknown OOD task\(s\) \['zzz'\]; tasks "
                                                  r"present: \['a', 'b'\]"):
        d.split((0.5, 0.25, 0.25), ood_tasks=["zzz"])
    with pytest.raises(ValueError, match=r"no query has split 'val' \(splits: \['test', "
                                         r"'train'\]; 1 queries have no split\)"):
        select_split(d, "val")
    # the taskless query q1 is not out of domain: it is in train or val
    parts = d.split((0.5, 0.5, 0.0), ood_tasks=["b"], seed=0)
    assert parts["test"].query_ids == ["q2"]
    # the three others split 1:1: round(0.5 * 3) = 2 train, 1 val
    assert sorted(parts["train"].query_ids + parts["val"].query_ids) == ["q0", "q1", "q3"]
    assert parts["train"].n_queries == 2


@pytest.mark.parametrize("ratios", [(float("nan"), 0.5, 0.5), (0.8, float("nan")),
                                    (float("inf"), 0.0), (0.5, "x")])
def test_non_finite_ratios_refused(ratios):
    d = RoutingData([f"q{i}" for i in range(10)], ["a"], np.ones((10, 1)))
    with pytest.raises(ValueError, match="ratios must be 2 or 3"):
        d.split(ratios)


def test_select_split_reads_labels_as_the_split_column_does():
    """`calibrate --split NAME` (select_split) picks the queries `--split-column` puts in
    that part: 'Test ' is test and 'dev' is val for both (select_split compared labels
    exactly: 1 test query, and no 'val' at all)."""
    q = pd.DataFrame({"query_id": ["q1", "q2", "q3", "q4", "q5"],
                      "split": ["train", "test", "Test ", "dev", None]})
    d = RoutingData(q, ["a"], [[1], [0], [1], [0], [1]])
    assert select_split(d, "test").query_ids == ["q2", "q3"]
    assert select_split(d, "val").query_ids == ["q4"]
    assert select_split(d, " Validation").query_ids == ["q4"]
    assert select_split(d, "TRAIN").query_ids == ["q1"]
    full = d.subset(np.arange(4))  # split_indices refuses a query without a label
    parts = full.split(column="split")
    for name in ("train", "val", "test"):
        assert select_split(full, name).query_ids == parts[name].query_ids
    with pytest.raises(ValueError, match=r"no query has split 'holdout' \(splits: \['test', "
                                         r"'train', 'val'\]; 1 queries have no split\)"):
        select_split(d, "holdout")
