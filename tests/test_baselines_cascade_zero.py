"""Hand-made examples for RouterBench's Zero router and cascading router."""

from __future__ import annotations

import numpy as np
import pytest

from recsys_router.data import RoutingData

from recsys_router.models.baselines import CascadeRouter, ZeroRouter, nondecreasing_hull


# ---------------------------------------------------------------------------- zero router
def _zero_train():
    # mean (cost, score): a (1, .5), b (2, .55), c (3, .9), d (4, .8)
    return RoutingData(["t1", "t2"], list("abcd"), [[.5, .55, .9, .8]] * 2, [[1, 2, 3, 4]] * 2)


def _many(n=4000):
    return RoutingData([f"q{i}" for i in range(n)], list("abcd"), np.zeros((n, 4)),
                       np.tile([1.0, 2.0, 3.0, 4.0], (n, 1)))


def test_hull_vertices_hand_example():
    r = ZeroRouter().fit(_zero_train())
    # b lies below the a-c segment (0.55 < 0.7 at cost 2); d is past the best score
    assert r.hull_llms_ == ["a", "c"]


def test_hull_edge_cases():
    # collinear middle point dropped; equal cost keeps the better score; decreasing tail cut
    c = np.array([1.0, 2.0, 3.0, 1.0, 5.0])
    s = np.array([0.2, 0.4, 0.6, 0.1, 0.5])
    assert nondecreasing_hull(c, s).tolist() == [0, 2]
    # a concave frontier keeps every point
    assert nondecreasing_hull(np.array([1., 2., 4.]), np.array([.5, .8, .9])).tolist() == [0, 1, 2]
    # cheapest point is the start even when it scores best
    assert nondecreasing_hull(np.array([1., 2.]), np.array([.9, .5])).tolist() == [0]
    with pytest.raises(ValueError):
        nondecreasing_hull(np.array([np.nan]), np.array([1.0]))


def test_budget_mix_interpolates_between_neighbours():
    r = ZeroRouter().fit(_zero_train())
    assert r.budget_mix(2.5) == pytest.approx({"a": 0.25, "c": 0.75})
    assert r.budget_mix(2.0) == pytest.approx({"a": 0.5, "c": 0.5})
    assert r.budget_mix(0.5) == {"a": 1.0}
    assert r.budget_mix(1.0) == {"a": 1.0}
    assert r.budget_mix(3.0) == {"c": 1.0}
    assert r.budget_mix(10.0) == {"c": 1.0}
    assert r.expected_score(2.5) == pytest.approx(0.25 * 0.5 + 0.75 * 0.9)


def test_budget_routing_hits_the_mix_and_the_budget_on_average():
    r = ZeroRouter(seed=4).fit(_zero_train())
    q = _many()
    picks = r.route(q, budget=2.5)
    assert set(picks) == {"a", "c"}
    assert np.mean(picks == "c") == pytest.approx(0.75, abs=0.025)
    cost = np.where(picks == "c", 3.0, 1.0)
    assert cost.mean() == pytest.approx(2.5, abs=0.05)
    # batch-invariant per query, seed-dependent
    assert r.route(q.subset([5]), budget=2.5)[0] == picks[5]
    other = ZeroRouter(seed=5).fit(_zero_train()).route(q, budget=2.5)
    assert np.mean(other != picks) > 0.2


def test_wtp_picks_the_hull_vertex():
    r = ZeroRouter().fit(_zero_train())
    q = _many(3)
    assert set(r.route(q, wtp=4.0)) == {"a"}   # 4*.5-1 = 1.0 > 4*.9-3 = 0.6
    assert set(r.route(q, wtp=6.0)) == {"c"}   # 2.0 < 2.4
    assert set(r.route(q, wtp=5.0)) == {"a"}   # tie 1.5 = 1.5 -> cheaper
    assert set(r.route(q)) == {"c"}


def test_wtp_past_float64_picks_the_best_hull_vertex():
    """On a 1-10 scale, 1e308 * score overflows: every utility was +inf and the first
    (cheapest) vertex won; the order is that of score - cost / wtp, so the best score wins."""
    d = RoutingData(["t1", "t2"], ["cheap", "best"], [[2.0, 9.0], [2.0, 9.0]], [[1, 5]] * 2)
    r = ZeroRouter().fit(d)
    q = RoutingData(["x"], ["cheap", "best"], np.zeros((1, 2)), [[1, 5]])
    assert list(r.route(q, wtp=1e308)) == ["best"]
    assert list(r.route(q, wtp=0.5)) == ["cheap"]   # 0.5*2-1 = 0 > 0.5*9-5 = -0.5


def test_candidates_recompute_the_hull():
    r = ZeroRouter().fit(_zero_train())
    # over a, b, d: b (0.55) is below the a-d line (0.583 at cost 2)
    assert r.budget_mix(2.5, candidates=["a", "b", "d"]) == pytest.approx({"a": 0.5, "d": 0.5})
    assert set(r.route(_many(5), candidates=["b", "d"])) == {"d"}


def test_zero_needs_costs():
    d = RoutingData(["q"], ["a", "b"], [[1.0, 0.0]])
    with pytest.raises(ValueError, match="costs"):
        ZeroRouter().fit(d)


# ---------------------------------------------------------------------------- cascade
def _cascade_data():
    # columns c, a, b with costs 4, 1, 2: the chain is a -> b -> c
    scores = [[1, 1, 1],   # q1: a accepted
              [1, 0, 1],   # q2: a rejected, b accepted
              [1, 0, 0],   # q3: only c
              [0, 0, 0],   # q4: nobody -> ends on c
              [1, np.nan, 1]]  # q5: a unobserved -> skipped (not tried or paid), b accepted
    return RoutingData([f"q{i}" for i in range(1, 6)], ["c", "a", "b"], scores, [[4, 1, 2]] * 5)


def test_cascade_chain_accepts_and_sums_costs():
    d = _cascade_data()
    r = CascadeRouter(threshold=1.0).fit(d)
    assert [r.llm_names_[j] for j in r.chain_] == ["a", "b", "c"]
    names, cost = r.route_with_costs(d)
    assert names.tolist() == ["a", "b", "c", "c", "b"]
    assert cost.tolist() == [1.0, 3.0, 7.0, 7.0, 2.0]
    assert r.route(d).tolist() == names.tolist()


def test_cascade_cost_cap():
    d = _cascade_data()
    names, cost = CascadeRouter(threshold=1.0, max_cost=3.0).fit(d).route_with_costs(d)
    # c would bring the total to 7 > 3, so q3/q4 stop at b
    assert names.tolist() == ["a", "b", "b", "b", "b"]
    assert cost.tolist() == [1.0, 3.0, 3.0, 3.0, 2.0]
    # the first LLM with a result is always tried, even above the cap (q5: b, a has none)
    names, cost = CascadeRouter(threshold=1.0, max_cost=0.5).fit(d).route_with_costs(d)
    assert names.tolist() == ["a"] * 4 + ["b"] and cost.tolist() == [1.0] * 4 + [2.0]
    # budget= is the same cap, and the tighter of max_cost / budget wins
    r = CascadeRouter(threshold=1.0, max_cost=100.0).fit(d)
    assert r.route_with_costs(d, budget=3.0)[1].tolist() == [1.0, 3.0, 3.0, 3.0, 2.0]


def test_cascade_judge_errors():
    d = _cascade_data()
    names, cost = CascadeRouter(threshold=1.0, epsilon=1.0).fit(d).route_with_costs(d)
    # every verdict flipped: right answers rejected, wrong ones accepted; NaN still rejected
    assert names.tolist() == ["c", "a", "a", "a", "c"]
    assert cost.tolist() == [7.0, 1.0, 1.0, 1.0, 6.0]
    n = 3000
    ones = RoutingData([f"q{i}" for i in range(n)], ["a", "b"], np.ones((n, 2)), [[1, 2]] * n)
    r = CascadeRouter(threshold=1.0, epsilon=0.3, seed=9).fit(ones)
    picks = r.route(ones)
    assert np.mean(picks == "b") == pytest.approx(0.3, abs=0.03)  # a wrongly rejected
    assert list(CascadeRouter(threshold=1.0, epsilon=0.3, seed=9).fit(ones).route(ones)) == list(picks)
    assert list(CascadeRouter(threshold=1.0, epsilon=0.3, seed=10).fit(ones).route(ones)) != list(picks)


def test_cascade_default_threshold_and_candidates():
    d = _cascade_data()
    r = CascadeRouter().fit(d)
    obs = d.scores[d.observed]
    assert r.threshold_ == pytest.approx(np.quantile(obs, 0.95))
    names, cost = r.route_with_costs(d, candidates=["b", "c"])
    assert names.tolist() == ["b", "b", "c", "c", "b"]
    assert cost.tolist() == [2.0, 2.0, 6.0, 6.0, 2.0]


def test_cascade_rejects_bad_settings():
    d = _cascade_data()
    r = CascadeRouter().fit(d)
    for bad in (-1.0, float("inf"), float("nan")):   # inf was taken: a cap of inf, no cap at all
        with pytest.raises(ValueError, match=r"wtp \(lambda\) must be a finite number >= 0"):
            r.route(d, wtp=bad)
    with pytest.raises(ValueError, match="epsilon"):
        CascadeRouter(epsilon=2.0).fit(d)
    with pytest.raises(ValueError, match="costs"):
        CascadeRouter().fit(RoutingData(["q"], ["a"], [[1.0]]))


def test_cascade_wtp_caps_the_total_before_any_answer():
    """wtp lambda caps the total cost at lambda * threshold (what an accepted answer is worth),
    a rule fixed before any answer is seen; with a budget the tighter cap wins."""
    d = _cascade_data()
    r = CascadeRouter(threshold=1.0).fit(d)
    # cap 3: c (total 7) is never tried; q3/q4 stop at b, whatever c would have answered
    assert r.decide(d, wtp=3.0)[1].tolist() == [1.0, 3.0, 3.0, 3.0, 2.0]
    assert r.route(d, wtp=3.0).tolist() == ["a", "b", "b", "b", "b"]
    assert r.decide(d, wtp=7.0)[1].tolist() == [1.0, 3.0, 7.0, 7.0, 2.0]
    # lambda 0: only the first LLM with a result
    assert r.decide(d, wtp=0.0)[1].tolist() == [1.0, 1.0, 1.0, 1.0, 2.0]
    assert r.decide(d, wtp=7.0, budget=3.0)[1].tolist() == r.decide(d, budget=3.0)[1].tolist()
