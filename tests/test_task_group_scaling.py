"""Per-task statistics scale linearly with the query count: task labels that are unique per
query (a user file can hold such labels) must not allocate a (tasks x queries) matrix."""

from __future__ import annotations

import numpy as np
import pandas as pd

from recsys_router.data import RoutingData
from recsys_router.models.baselines import TaskBestRouter
from recsys_router.models.baselines._common import masked_group_means
from recsys_router.models.task_residual import TaskResidualRouter


def _naive_group_means(scores, groups, n_groups, fallback):
    """One group and one LLM at a time, straight from the definition."""
    out = np.empty((n_groups, scores.shape[1]))
    for g in range(n_groups):
        for j in range(scores.shape[1]):
            col = scores[groups == g, j]
            col = col[~np.isnan(col)]
            out[g, j] = col.mean() if len(col) else fallback[j]
    return out


def test_group_means_equal_a_naive_loop():
    rng = np.random.default_rng(4)
    s = rng.random((40, 3))
    s[rng.random(s.shape) < 0.3] = np.nan
    s[:, 2] = np.nan                               # an LLM never observed
    groups = rng.integers(0, 7, 40)
    groups[groups == 5] = 6                        # a group with no rows
    fb = np.array([-1.0, -2.0, -3.0])
    got = masked_group_means(s, groups, 7, fb)
    np.testing.assert_allclose(got, _naive_group_means(s, groups, 7, fb), rtol=1e-13, atol=0)
    assert got[5].tolist() == fb.tolist() and (got[:, 2] == -3.0).all()


def test_group_means_by_hand():
    s = np.array([[1.0, np.nan], [0.0, 2.0], [3.0, np.nan], [np.nan, 4.0]])
    got = masked_group_means(s, np.array([0, 0, 1, 1]), 3, np.array([9.0, 8.0]))
    assert got.tolist() == [[0.5, 2.0], [3.0, 4.0], [9.0, 8.0]]


def _unique_task_data(n: int) -> RoutingData:
    rng = np.random.default_rng(0)
    q = pd.DataFrame({"query_id": [f"q{i}" for i in range(n)], "text": [f"t{i}" for i in range(n)],
                      "task": [f"task{i}" for i in range(n)]})
    return RoutingData(q, ["a", "b"], rng.random((n, 2)).astype(np.float32))


def test_200k_unique_task_labels_fit_in_linear_memory():
    # the former one-hot (tasks x queries) float64 matrix needed 200,000**2 * 8 bytes = 298 GiB
    n = 200_000
    s = np.random.default_rng(1).random((n, 2))
    got = masked_group_means(s, np.arange(n), n, np.zeros(2))
    assert got.shape == (n, 2) and np.array_equal(got, s)
    d = _unique_task_data(n)
    r = TaskBestRouter().fit(d)
    assert len(r.tasks_) == n
    # each query's own task: its own scores are the task means
    assert np.array_equal(r.predict_scores(d), d.scores.astype(np.float64))


def test_task_residual_with_unique_tasks_is_linear_too():
    d = _unique_task_data(60_000)
    r = TaskResidualRouter("best-single", alpha=0.5).fit(d)
    # a one-query task's centre is its own prediction: the residual vanishes
    np.testing.assert_allclose(r.predict_scores(d), d.scores.astype(np.float64), rtol=0, atol=1e-12)
