"""The safe fallback with one inner split on data whose tasks are too small for a held-out
share of their own (two-query tasks at ``val_fraction=0.2``): such tasks are pooled, and
when nothing can be held out the recorded reason says why. Also: its ``seed`` is checked."""

import numpy as np
import pandas as pd
import pytest

from recsys_router.data import RoutingData
from recsys_router.errors import ArgumentValueError
from recsys_router.fallback import SafeFallbackRouter
from recsys_router.inner_validation import inner_splits, task_keys
from recsys_router.router import Router


class Const(Router):
    """The same predicted row for every query (a cheap, deterministic router)."""

    def _fit(self, train, val):
        self.n_llms_ = train.n_llms

    def _predict_scores(self, data):
        return np.tile(np.arange(data.n_llms, dtype=np.float64), (data.n_queries, 1))


def _data(tasks, seed=0):
    n = len(tasks)
    rng = np.random.default_rng(seed)
    q = pd.DataFrame({"query_id": [f"q{i}" for i in range(n)],
                      "text": [f"t{i}" for i in range(n)], "task": tasks})
    return RoutingData(q, pd.DataFrame({"name": ["a", "b", "c"]}),
                       (rng.random((n, 3)) < 0.5).astype(np.float64))


PAIRS = [f"task{i // 2}" for i in range(200)]           # 100 tasks of two queries


def test_one_split_holds_out_from_pooled_two_query_tasks():
    # by hand: every task rounds 0.2 * 2 = 0.4 to none, so all 200 queries are pooled and
    # round(0.2 * 200) = 40 of the 100 tasks give one query each
    (tr, va), = inner_splits(PAIRS, 1, 0.2, 0)
    keys = task_keys(PAIRS)
    assert len(va) == 40 and len(tr) == 160
    assert len(set(keys[va])) == 40                           # one per task
    assert set(keys[va]) <= set(keys[tr])                     # each keeps one in inner-train
    r = SafeFallbackRouter(Const(), inner_folds=1).fit(_data(PAIRS))
    assert "skipped" not in r.fallback_ and r.fallback_["n_val"] == 40


def test_pooled_small_tasks_add_to_the_larger_tasks_share():
    # a task of 10 holds out round(0.2 * 10) = 2; 20 two-query tasks pool 40 queries and
    # give round(0.2 * 40) = 8: 10 in all
    tasks = ["big"] * 10 + [f"p{i // 2}" for i in range(40)]
    (_, va), = inner_splits(tasks, 1, 0.2, 3)
    keys = task_keys(tasks)
    assert len(va) == 10 and int((keys[va] == "big").sum()) == 2
    assert SafeFallbackRouter(Const(), inner_folds=1).fit(_data(tasks)).fallback_["n_val"] == 10


def test_reason_when_every_task_has_one_query():
    tasks = [f"solo{i}" for i in range(30)]
    r = SafeFallbackRouter(Const(), inner_folds=1).fit(_data(tasks))
    assert r.fallback_["skipped"] == ("one inner split holds out no query: each of the 30 "
                                      "training queries is its task's only one (it stays in "
                                      "inner-train)")


def test_reason_when_the_fraction_rounds_to_none():
    # 10 two-query tasks pooled: round(0.02 * 20) = 0
    r = SafeFallbackRouter(Const(), inner_folds=1, val_fraction=0.02).fit(
        _data([f"p{i // 2}" for i in range(20)]))
    assert r.fallback_["skipped"] == ("one inner split holds out no query: val_fraction=0.02 "
                                      "of the 20 training queries in tasks of two or more "
                                      "rounds to none")


@pytest.mark.parametrize("seed", [1.7, "1", True, -1, 2**32])
def test_a_bad_seed_is_refused_naming_it_before_any_fit(seed):
    with pytest.raises(ArgumentValueError, match=r"^seed must be an integer in \[0, 4294967295\]"):
        SafeFallbackRouter(Const(), seed=seed).fit(_data(PAIRS))
