"""Safe fallback: per-task comparison with best-single and task-best on held-out train queries."""

import numpy as np
import pandas as pd
import pytest

from recsys_router.data import RoutingData
from recsys_router.fallback import (SafeFallbackRouter, fallback_summary, realised_scores,
                                    stratified_holdout)
from recsys_router.router import Router


class TextRule(Router):
    """'x' -> LLM a, anything else -> LLM b (right on task t2, always wrong on task t1)."""

    uses_text = True

    def __init__(self, strength: float = 1.0):
        self.strength = strength

    def _fit(self, train, val):
        self.n_fits_ = getattr(self, "n_fits_", 0) + 1
        self.n_train_ = train.n_queries

    def _predict_scores(self, data):
        x = np.array([t == "x" for t in data.texts])
        return np.stack([x, ~x], axis=1).astype(float) * self.strength


def _data():
    # task t1: text "z", LLM a always right; task t2: text "x" -> a right, "y" -> b right
    rows = []
    for i in range(20):
        rows += [(f"p{i}", "z", "t1", "a", 1.0), (f"p{i}", "z", "t1", "b", 0.0)]
    for i in range(20):
        w = "x" if i % 2 else "y"
        rows += [(f"q{i}", w, "t2", "a", float(w == "x")), (f"q{i}", w, "t2", "b", float(w == "y"))]
    df = pd.DataFrame(rows, columns=["query_id", "text", "task", "model", "score"])
    return RoutingData.from_long(df)


def test_router_losing_on_a_task_falls_back_there_only():
    d = _data()
    r = SafeFallbackRouter(TextRule(), val_fraction=0.2, seed=0).fit(d)
    fb = r.fallback_
    # t1: router realises 0; task-best (a) and best-single (a: mean 0.75 over both tasks)
    # realise 1 -> the tie goes to task-best; t2: router realises 1, and neither
    # baseline can (half the t2 queries need a, half b) -> router
    assert fb["tasks"] == {"t1": "task-best", "t2": "router"}
    assert fb["means"]["t1"] == {"router": 0.0, "best-single": 1.0, "task-best": 1.0}
    assert fb["means"]["t2"]["router"] == 1.0 and fb["n_val"] == 8
    assert r.router_.n_train_ == 40 and fb["refitted"]   # refitted on every training query
    chosen = r.route(d)
    truth_best = np.where(d.scores[:, 0] == 1.0, "a", "b")
    assert (chosen == truth_best).all()
    assert "fell back on 1 of 2 tasks (task-best: t1)" in fallback_summary(fb)


def test_task_best_wins_where_the_best_single_llm_is_wrong():
    d = _data()
    # make b the best single LLM overall: on t2 b is right on every query; 5 t1 queries
    # nobody gets right (a: 15 / 40, b: 20 / 40)
    s = d.scores.copy()
    s[20:] = [0.0, 1.0]
    s[:5] = [0.0, 0.0]
    d = RoutingData(d.queries, d.llms, s, name="t")
    r = SafeFallbackRouter(TextRule(), seed=0).fit(d)
    # t1: router 0 (picks b), best-single b -> 0, task-best a -> 1 => task-best
    assert r.fallback_["tasks"]["t1"] == "task-best"
    # t2 (all b): router picks b on "y" and a on "x" -> 0.5; baselines 1 -> task-best (tie)
    assert r.fallback_["tasks"]["t2"] == "task-best"
    assert (r.route(d) == np.where(np.arange(40) < 20, "a", "b")).all()


def test_flag_off_never_falls_back_and_fits_once():
    d = _data()
    r = SafeFallbackRouter(TextRule(), enabled=False).fit(d)
    assert r.fallback_ == {"enabled": False, "tasks": {}, "default": "router"}
    assert r.router_.n_fits_ == 1 and r.router_.n_train_ == 40
    assert (r.route(d)[:20] == "b").all()        # the wrapped router's own (wrong) choice
    assert fallback_summary(r.fallback_) == "fallback off"


def test_unseen_task_follows_the_overall_decision():
    d = _data()
    r = SafeFallbackRouter(TextRule(), seed=1).fit(d)
    new = RoutingData(pd.DataFrame({"query_id": ["n1"], "text": ["x"], "task": ["t9"]}),
                      d.llms, np.full((1, 2), np.nan))
    assert r.fallback_rows(new).tolist() == [r.fallback_["default"]]


def test_too_few_queries_skip_the_comparison_with_a_reason():
    d = _data().subset(np.arange(6))
    r = SafeFallbackRouter(TextRule()).fit(d)
    assert "too few" in r.fallback_["skipped"] and r.fallback_["tasks"] == {}


def test_wrapping_something_else_is_a_clear_error():
    with pytest.raises(TypeError, match="wraps a Router"):
        SafeFallbackRouter("knn").fit(_data())


def test_realised_scores_choose_among_observed_llms_only():
    pred = np.array([[0.9, 0.5, 0.1], [0.1, 0.2, 0.3], [0.5, 0.5, 0.5]])
    truth = np.array([[np.nan, 0.0, 1.0], [1.0, 0.0, 0.5], [np.nan, np.nan, np.nan]])
    out = realised_scores(pred, truth)
    assert out[:2].tolist() == [0.0, 0.5] and np.isnan(out[2])


def test_stratified_holdout_takes_the_same_share_of_every_task():
    d = _data()
    tr, va = stratified_holdout(d.tasks, 0.25, 3)
    tasks = np.asarray(d.tasks)
    assert (tasks[va] == "t1").sum() == 5 and (tasks[va] == "t2").sum() == 5
    assert len(np.intersect1d(tr, va)) == 0 and len(tr) + len(va) == 40
    with pytest.raises(ValueError, match="fraction"):
        stratified_holdout(d.tasks, 1.0, 0)
