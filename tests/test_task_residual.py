"""Task-residual router: CF deviations around per-task means, checked against a plain
pandas re-implementation; alpha=0 is task-best; alpha chosen on held-out train queries."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from router_contract import RouterContract

from recsys_router.models.baselines import TaskBestRouter
from recsys_router.models.task_residual import TaskResidualRouter
from recsys_router.data import RoutingData
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.registry import make_router

FAST = {"base": "linearr", "encoder": "hashing"}


def _split():
    return make_synthetic(240, 4, 3, seed=2).split((0.75, 0.25), seed=0)


def _with_tasks(d: RoutingData, tasks) -> RoutingData:
    q = d.queries.copy()
    q["task"] = tasks
    return RoutingData(q, d.llms, d.scores, d.costs)


def test_matches_a_plain_groupby_implementation():
    parts = _split()
    tr, te = parts["train"], parts["test"]
    te = _with_tasks(te, [None if i % 7 == 0 else t for i, t in enumerate(te.tasks)])
    r = TaskResidualRouter(alpha=0.5, **FAST).fit(tr)
    f_tr = r.router_.predict_scores(tr)
    f_te = r.router_.predict_scores(te)
    cols = range(tr.n_llms)
    means = pd.DataFrame(tr.scores).groupby(list(tr.tasks)).mean()
    centres = pd.DataFrame(f_tr).groupby(list(tr.tasks)).mean()
    want = np.empty_like(f_te)
    for i, t in enumerate(te.tasks):
        if t is None or t not in means.index:
            m, c = np.nanmean(tr.scores, axis=0), f_tr.mean(axis=0)
        else:
            m, c = means.loc[t, list(cols)].to_numpy(), centres.loc[t, list(cols)].to_numpy()
        want[i] = m + 0.5 * (f_te[i] - c)
    np.testing.assert_allclose(r.predict_scores(te), want, rtol=1e-6, atol=1e-7)


def test_alpha_zero_is_task_best():
    parts = _split()
    r = TaskResidualRouter(alpha=0.0, **FAST).fit(parts["train"])
    tb = TaskBestRouter().fit(parts["train"])
    np.testing.assert_allclose(r.predict_scores(parts["test"]), tb.predict_scores(parts["test"]))


def test_auto_alpha_is_the_best_held_out_value():
    parts = _split()
    r = TaskResidualRouter(alphas=(0.0, 1.0, 3.0), **FAST).fit(parts["train"])
    assert set(r.val_scores_) == {0.0, 1.0, 3.0}
    assert r.alpha_ == max(r.val_scores_, key=r.val_scores_.get)


def test_within_task_signal_gives_a_positive_alpha():
    # one task; which LLM is right depends on the text cluster, not on the task
    d = make_synthetic(400, 3, 3, seed=4, specialisation=3.0)
    d = _with_tasks(d, ["only"] * d.n_queries)
    parts = d.split((0.7, 0.3), seed=0)
    r = TaskResidualRouter(**FAST).fit(parts["train"])
    assert r.alpha_ > 0, r.val_scores_
    te = parts["test"]
    got = te.scores[np.arange(te.n_queries), r.route_indices(te)].mean()
    tb = TaskBestRouter().fit(parts["train"])
    flat = te.scores[np.arange(te.n_queries), tb.route_indices(te)].mean()
    assert got > flat + 0.03, (got, flat)


def test_bad_alpha_is_rejected():
    with pytest.raises(ValueError, match="alpha"):
        TaskResidualRouter(alpha=-1, **FAST).fit(_split()["train"])


class TestTaskResidualContract(RouterContract):
    router_factory = staticmethod(lambda: make_router("task-residual", **FAST))


def test_a_val_fraction_that_leaves_nothing_to_fit_on_is_named():
    # 20 training queries (the least that searches alpha): round(0.99 * 20) = 20 held out
    d = make_synthetic(120, 4, 3, seed=0).subset(np.arange(20))
    with pytest.raises(ValueError, match=r"^task-residual: val_fraction=0\.99 holds out 20 of "
                                         r"the 20 training queries and leaves none to fit on"):
        make_router("task-residual", base="knn", val_fraction=0.99).fit(d)
