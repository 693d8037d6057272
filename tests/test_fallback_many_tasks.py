"""The safe fallback's per-task steps group the rows once (linear in the query count), and give
what a scan per task label gives: checked against such naive loops on tiny cases, then run
with task labels unique per query (one scan per label would be quadratic)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from recsys_router.data import RoutingData
from recsys_router.fallback import SafeFallbackRouter
from recsys_router.fallback_nauc import decide_by_nauc
from recsys_router.fallback_scores import baseline_means
from recsys_router.inner_validation import (group_rows, paired_decision, stratified_folds,
                                            stratified_holdout, task_keys)
from recsys_router.registry import make_router
from recsys_router.sweep_check import paired_nauc

TASKS = ["b", "a", None, "b", "c", "a", "b", np.nan, "c", "a", "b", "d", "a", "b", "c", "a"]


def _data(tasks, seed=0, costs=False) -> RoutingData:
    n = len(tasks)
    rng = np.random.default_rng(seed)
    s = rng.random((n, 3))
    s[rng.random(s.shape) < 0.3] = np.nan
    q = pd.DataFrame({"query_id": [f"q{i}" for i in range(n)], "text": [f"t{i}" for i in range(n)],
                      "task": tasks})
    c = rng.random((n, 3)) + 0.1 if costs else None
    return RoutingData(q, ["x", "y", "z"], s.astype(np.float32), c)


def test_group_rows_equal_one_scan_per_label():
    keys = task_keys(TASKS)
    labels, rows = group_rows(keys)
    assert labels == sorted(set(keys))
    for t, r in zip(labels, rows):
        assert r.tolist() == np.flatnonzero(keys == t).tolist()
    assert group_rows(np.array([], dtype=object)) == ([], [])


def test_baseline_means_equal_a_naive_per_task_loop():
    d = _data(TASKS)
    s = d.scores.astype(np.float64)
    s[np.array(TASKS, dtype=object) == "d", 1] = np.nan      # an LLM task "d" never saw
    d = RoutingData(d.queries, d.llms, s.astype(np.float32))
    overall, tasks, per_task = baseline_means(d)
    keys = task_keys(d.tasks)
    assert tasks == ["a", "b", "c", "d"]
    for i, t in enumerate(tasks):
        for j in range(3):
            col = s[keys == t, j]
            col = col[~np.isnan(col)]
            want = col.mean() if len(col) else overall[j]
            assert abs(per_task[i, j] - want) < 1e-12
    assert per_task[3, 1] == overall[1]


def _naive_holdout(tasks, fraction, seed):
    rng = np.random.default_rng(seed)
    keys = task_keys(tasks)
    val = []
    for t in sorted(set(keys)):
        rows = np.flatnonzero(keys == t)
        if len(rows) < 2:
            continue
        n_val = min(max(int(round(fraction * len(rows))), 1 if len(rows) >= 5 else 0),
                    len(rows) - 1)
        val.extend(rng.permutation(rows)[:n_val])
    return sorted(int(v) for v in val)


def _naive_fold_of(tasks, k, seed):
    rng = np.random.default_rng(seed)
    keys = task_keys(tasks)
    fold_of, offset = np.empty(len(keys), dtype=np.int64), 0
    for t in sorted(set(keys)):
        rows = rng.permutation(np.flatnonzero(keys == t))
        fold_of[rows] = (np.arange(len(rows)) + offset) % k
        offset += len(rows)
    return fold_of


def test_stratified_splits_equal_one_scan_per_label():
    for seed in range(4):
        assert stratified_holdout(TASKS, 0.3, seed)[1].tolist() == _naive_holdout(TASKS, 0.3, seed)
        folds = stratified_folds(TASKS, 3, seed)
        want = _naive_fold_of(TASKS, 3, seed)
        for f, (_, va) in enumerate(folds):
            assert va.tolist() == np.flatnonzero(want == f).tolist()


def test_task_decisions_equal_a_naive_per_task_loop():
    rng = np.random.default_rng(3)
    keys = np.array(["a"] * 30 + ["b"] * 12 + ["c"] * 3 + [""] * 5, dtype=object)
    rng.shuffle(keys)
    got = {"router": rng.random(50), "best-single": rng.random(50) + 0.2,
           "task-best": rng.random(50)}
    got["router"][keys == "b"] += 0.8
    fb = SafeFallbackRouter(make_router("best-single"), min_task_queries=5)._decide_all(
        got, keys, 50)
    assert sorted(fb["means"]) == ["a", "b", "c"]
    for t in ("a", "b", "c"):
        m = paired_decision(got["router"][keys == t], got["best-single"][keys == t],
                            got["task-best"][keys == t], fb["z"], prefer=fb["overall"]["baseline"])
        for f in ("n", "diff", "se", "baseline", "router_better"):
            assert fb["means"][t][f] == m[f], (t, f)
        assert fb["means"][t]["pooled"] == (m["n"] < 5)


def test_nauc_task_comparisons_equal_a_mask_per_task():
    rng = np.random.default_rng(5)
    keys = np.array(["a"] * 20 + ["b"] * 16 + ["c"] * 2, dtype=object)
    rng.shuffle(keys)
    n = len(keys)
    truth = rng.random((n, 3))
    preds = {"router": rng.random((n, 3)), "best-single": rng.random((n, 3)),
             "task-best": rng.random((n, 3)), "costs": rng.random((n, 3)) + 0.1,
             "truth": truth, "truth_costs": rng.random((n, 3)) + 0.1}
    means = {t: {"n": int((keys == t).sum()), "baseline": "best-single",
                 "pooled": t == "c", "decision": "router"} for t in ("a", "b", "c")}
    fb = {"overall": {"baseline": "best-single", "decision": "router"}, "means": means,
          "tasks": {t: "router" for t in means}, "min_task_queries": 5, "default": "router"}
    decide_by_nauc(fb, preds, keys, 1.645, -1.0, 7)
    for i, t in enumerate(("a", "b")):
        m = keys == t
        want = paired_nauc(preds["router"][m], preds["best-single"][m], preds["costs"][m],
                           truth[m], preds["truth_costs"][m], seed=7 + 1 + i)
        assert fb["means"][t]["nauc"] == want
    assert "nauc" not in fb["means"]["c"]


def test_100k_unique_task_labels_group_in_one_pass():
    # one scan per label: 100,000 scans of 100,000 rows (1e10 comparisons) per call
    n = 100_000
    keys = np.array([f"t{i:06d}" for i in range(n)], dtype=object)
    labels, rows = group_rows(keys)
    assert len(labels) == n and all(len(r) == 1 for r in rows[:10])
    d = _data(list(keys), seed=1)
    overall, tasks, per_task = baseline_means(d)
    s = d.scores.astype(np.float64)
    assert len(tasks) == n
    assert np.array_equal(per_task, np.where(np.isnan(s), overall[None, :], s))
    tr, va = stratified_holdout(list(keys), 0.2, 0)
    assert len(va) == 0 and len(tr) == n                    # one-query tasks stay in train
    n = 20_000                          # one paired comparison per task follows: keep it short
    got = {w: np.random.default_rng(2).random(n) for w in ("router", "best-single", "task-best")}
    fb = SafeFallbackRouter(make_router("best-single"))._decide_all(got, keys[:n], n)
    assert len(fb["tasks"]) == n and all(m["pooled"] for m in fb["means"].values())
