"""Hand-computed checks of the random, oracle, r_o and best-single routers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recsys_router.data import RoutingData
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.registry import make_router

from recsys_router.models.baselines import BestSingleRouter, OracleRouter, RandomRouter, ROracleRouter
from recsys_router.models.baselines._common import best_llm_labels, query_uniforms


def _oracle_data():
    # columns a, b, c; mean costs a = 10/3, b = 5/3, c = 2
    scores = [[0, 1, 0], [1, 1, 0], [0, 0, 0], [np.nan, 0, np.nan]]
    costs = [[4, 2, 3], [1, 2, 1], [5, 1, 2], [1, 1, 1]]
    return RoutingData(["q1", "q2", "q3", "q4"], ["a", "b", "c"], scores, costs)


def test_oracle_picks_best_and_cheapest_on_the_query():
    d = _oracle_data()
    r = OracleRouter().fit(d)
    # q1: only b correct; q2: a and b tie -> a is cheaper on this query (1 < 2) although b is
    # cheaper on average; q3: all wrong -> cheapest on the query (b, cost 1); q4: only b observed
    assert r.route(d).tolist() == ["b", "a", "b", "b"]


def test_oracle_without_costs_breaks_ties_by_column():
    d = RoutingData(["q"], ["a", "b"], [[1.0, 1.0]])
    assert OracleRouter().fit(d).route(d).tolist() == ["a"]


def test_r_o_extremes_match_oracle_and_random():
    d = make_synthetic(200, 4, 3, seed=3)
    orc = OracleRouter().fit(d).route(d)
    assert list(ROracleRouter(p=1.0).fit(d).route(d)) == list(orc)
    rnd = RandomRouter(seed=5).fit(d).route(d)
    assert list(ROracleRouter(p=0.0, seed=5).fit(d).route(d)) == list(rnd)


def test_r_o_expected_score_hand_value():
    d = RoutingData(["q1", "q2"], ["a", "b"], [[1.0, 0.0], [1.0, 1.0]])
    # oracle mean = 1; per-LLM means 1 and 0.5 -> random 0.75; 0.5 * 1 + 0.5 * 0.75
    assert ROracleRouter.expected_score(d, 0.5) == pytest.approx(0.875)
    assert ROracleRouter.expected_score(d, 0.0) == pytest.approx(0.75)


def test_r_o_closed_form_matches_monte_carlo():
    d = make_synthetic(400, 5, 3, seed=1)
    p = 0.3
    mus = []
    for seed in range(150):
        r = ROracleRouter(p=p, seed=seed).fit(d)
        pick = r.route_indices(d)
        mus.append(d.scores[np.arange(d.n_queries), pick].mean())
    assert np.mean(mus) == pytest.approx(ROracleRouter.expected_score(d, p), abs=0.01)


def test_r_o_oracle_fraction_and_probs():
    d = make_synthetic(2000, 3, 2, seed=2)
    r = ROracleRouter(p=0.25, seed=0).fit(d)
    assert r.oracle_mask(d).mean() == pytest.approx(0.25, abs=0.03)
    probs = r.selection_probs(d)
    assert probs.min() == pytest.approx(0.75 / 3)
    np.testing.assert_allclose(probs.max(axis=1), 0.25 + 0.75 / 3)
    with pytest.raises(ValueError, match="p must be in"):
        ROracleRouter(p=1.5).fit(d)


def test_random_is_uniform_over_candidates_and_seeded():
    d = make_synthetic(3000, 4, 2, seed=0)
    r = RandomRouter(seed=11).fit(d)
    names = d.llm_names
    picks = r.route(d, candidates=[names[0], names[3]])
    frac = np.mean(picks == names[0])
    assert frac == pytest.approx(0.5, abs=0.04)
    counts = np.bincount(r.route_indices(d), minlength=4) / d.n_queries
    np.testing.assert_allclose(counts, 0.25, atol=0.03)
    np.testing.assert_allclose(r.selection_probs(d), 0.25)
    other = RandomRouter(seed=12).fit(d).route(d)
    assert np.mean(other != r.route(d)) > 0.5  # a different seed gives different draws


def test_query_uniforms_are_uniform_and_keyed_by_query():
    u = query_uniforms([f"q{i}" for i in range(5000)], 3, 2)
    assert 0.0 <= u.min() and u.max() < 1.0
    assert u.mean() == pytest.approx(0.5, abs=0.02)
    assert np.corrcoef(u[:, 0], u[:, 1])[0, 1] == pytest.approx(0.0, abs=0.05)
    np.testing.assert_array_equal(query_uniforms(["q7"], 3, 2)[0], u[7])


def test_best_single_hand_example():
    d = RoutingData(["q1", "q2", "q3", "q4"], ["a", "b", "c"],
                    [[1, 0, 1], [1, 1, 0], [0, 1, 1], [1, np.nan, 0]],
                    [[3, 1, 1]] * 4)
    r = BestSingleRouter().fit(d)
    np.testing.assert_allclose(r.mean_scores_, [0.75, 2 / 3, 0.5])
    assert r.best_llm_ == "a"
    assert set(r.route(d)) == {"a"}
    # wtp 1: utilities 0.75-3, 0.667-1, 0.5-1 -> b
    assert set(r.route(d, wtp=1.0)) == {"b"}


def test_best_single_ties_go_to_cheaper_and_unobserved_llm_ranks_last():
    d = RoutingData(["q1", "q2"], ["a", "b", "c"], [[1, 1, np.nan], [0, 0, np.nan]],
                    [[2, 1, 0], [2, 1, 0]])
    r = BestSingleRouter().fit(d)
    assert r.best_llm_ == "b"
    assert r.mean_scores_[2] == pytest.approx(-0.5)


def test_best_llm_labels_ties_and_empty_rows():
    s = np.array([[1, 1, 0], [0, 0, 0], [np.nan, np.nan, np.nan], [0.2, 0.9, 0.9]])
    assert best_llm_labels(s, np.array([3.0, 1.0, 2.0])).tolist() == [1, 1, -1, 1]
    assert best_llm_labels(s, np.array([3.0, 1.0, 2.0]), tie_rank=np.array([0, 2, 1])).tolist() == \
        [0, 0, -1, 2]


def test_registry_builds_reference_routers():
    assert isinstance(make_router("r_o", p=0.2), ROracleRouter)
    assert make_router("best-single").uses_ground_truth is False
    assert make_router("oracle").uses_ground_truth is True


def test_task_best_hand_example_unseen_and_missing_tasks():
    from recsys_router.models.baselines import TaskBestRouter
    # task x: a 1/1, b 0/1 -> a; task y: a 0.25, b 0.5 (c unobserved in y -> overall 0.5)
    scores = np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.5], [0.5, 0.0, np.nan]])
    d = RoutingData(pd.DataFrame({"query_id": ["q1", "q2", "q3"], "task": ["x", "y", "y"]}),
                    ["a", "b", "c"], scores)
    r = TaskBestRouter().fit(d)
    assert r.tasks_ == ["x", "y"]
    np.testing.assert_allclose(r.task_means_, [[1.0, 0.0, 0.5], [0.25, 0.5, 0.5]])
    new = RoutingData(pd.DataFrame({"query_id": ["n1", "n2", "n3"], "task": ["y", "z", None]}),
                      ["a", "b", "c"], np.zeros((3, 3)))
    # y -> b (0.5 ties c at 0.5: lower column wins without costs); unseen z and missing
    # task -> overall means (a 0.5, b 1/3, c 0.5) -> a
    assert r.route(new).tolist() == ["b", "a", "a"]
    np.testing.assert_allclose(r.predict_scores(new)[1], [0.5, 1 / 3, 0.5])


def test_oracle_never_counts_an_unrecorded_test_cost_free():
    # no training cost at all, and b's test cost unrecorded: b gets the dearest known cost of
    # the query (1.0), not 0. wtp 1: utilities a 1 - 1 = 0, b 1 - 1 = 0 (tie: the first),
    # c 0 - 0.5; budget 0.5: only c fits. (As free, b took both.)
    train = RoutingData(["t"], ["a", "b", "c"], [[1.0, 1.0, 0.0]], [[np.nan] * 3])
    test = RoutingData(["q"], ["a", "b", "c"], [[1.0, 1.0, 0.0]], [[1.0, np.nan, 0.5]])
    r = make_router("oracle").fit(train)
    np.testing.assert_allclose(r.predict_costs(test), [[1.0, 1.0, 0.5]])
    assert r.route(test, wtp=1.0).tolist() == ["a"]
    assert r.route(test, budget=0.5).tolist() == ["c"]
