"""Metric edge cases found in review: targets met exactly but rounded (QNC, CPT), means over
folds of targets that were missed, NaN predicted costs in the policies, V_B on signed scores.

Each expected value is worked by hand or by a plain loop here."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recsys_router.evaluation.protocols import get_protocol
from recsys_router.evaluation.protocols._base import Block, MetricContext
from recsys_router.evaluation.recompute import METRIC_COLUMNS, aggregate_metrics
from recsys_router.evaluation.tables import metric_table
from recsys_router.metrics import cpt, mu_o, qnc, v_b
from recsys_router.metrics.base import best_single, reaches
from recsys_router.policies import argmax_policy, budget_policy, wtp_policy


def test_best_single_quality_is_exactly_the_mu_o_of_always_choosing_it():
    misses = 0
    for seed in range(60):
        rng = np.random.default_rng(seed)
        s = rng.random((1000, 3)).round(3)
        c = np.tile([1.0, 2.0, 3.0], (1000, 1)) * rng.random((1000, 1))
        bs = best_single(s, c)
        ch = np.full(1000, bs.index)
        # the plain per-column mean of the best column, as a loop over its values
        assert abs(bs.quality - sum(s[:, bs.index]) / 1000) < 1e-12
        misses += mu_o(s, ch) != bs.quality or mu_o(c, ch) != bs.cost or v_b(s, ch) != 1.0
    assert misses == 0


def test_orbit_protocol_always_best_single_reaches_qnc_at_its_cost():
    # seed 1 of this simulation put the best column's mean 1 ulp above mu_o's sum before
    for seed in range(20):
        rng = np.random.default_rng(seed)
        s = rng.random((1000, 3)).round(3)
        c = np.tile([1.0, 2.0, 3.0], (1000, 1))
        bs = best_single(s, c)
        ch = np.full(1000, bs.index)
        runs = {"always-best": [("budget", float(b), ch, np.full(1000, np.nan)) for b in (1.0, 2.0, 3.0)]}
        ms, _ = get_protocol("orbit").metrics(Block(s, c, ["a", "b", "c"], {k: "single" for k in "abc"},
                                                    runs), MetricContext("x"))
        got = {r["metric"]: r["value"] for r in ms}
        assert got["qnc"] == bs.cost and got["rqnc"] == 1.0, seed


def test_reaches_allows_rounding_only():
    assert not (0.7 + 0.1 >= 0.8)
    assert reaches([0.7 + 0.1], 0.8).tolist() == [True]
    assert reaches([0.8 - 1e-9], 0.8).tolist() == [False]
    assert reaches([1e6 - 1e-7, 1e6 - 1e-5], 1e6).tolist() == [True, False]   # relative
    res = qnc(np.array([[1.0, 0.5], [2.0, 0.7 + 0.1], [3.0, 0.9]]), 0.8, 4.0)
    assert (res.qnc, res.rqnc, res.reached) == (2.0, 0.5, True)


def test_cpt_takes_a_point_equal_to_its_target():
    # target 0.4 + 0.5 * (0.8 - 0.4) = 0.6 (computed as 0.6000000000000001); the curve is at
    # 0.6 from x = 0.4 on, so 40% strong calls reach it
    assert cpt([0, .4, .8, .8, 1], [.4, .6, .6, .6, .8], 0.4, 0.8, 0.5) == 0.4
    # crossing between points: linear interpolation, 0.25 + (0.5 - 0.4) / (0.6 - 0.4) * 0.25
    assert abs(cpt([0, .25, .5], [.2, .4, .6], 0.2, 0.8, 0.5) - 0.375) < 1e-12
    assert np.isnan(cpt([0, .5, 1], [.2, .3, .4], 0.2, 0.8, 0.5))


def _rows(values, metric="cpt50", group="all", pool="all", protocol="routellm"):
    return [dict(dataset="d", protocol=protocol, pool=pool, group=g, fold=f, router="R",
                 metric=metric, value=v) for (f, g), v in zip(group, values)]


def test_fold_mean_of_a_missed_target_is_missing_and_says_in_how_many_folds():
    keys = [("0", "all"), ("1", "all"), ("2", "all")]
    rows = _rows([0.1, np.nan, np.nan], "cpt50", keys) + _rows([0.5, np.nan, 0.7], "apgr", keys)
    m = aggregate_metrics(pd.DataFrame(rows, columns=METRIC_COLUMNS))
    at = m.set_index(["fold", "metric"])["value"]
    assert np.isnan(at[("mean", "cpt50")]) and np.isnan(at[("std", "cpt50")])
    assert at[("mean", "apgr")] == 0.6           # not a target: the folds that have a value
    table = metric_table(m, "routellm", "all", "all", (("apgr", "APGR"), ("cpt50", "CPT(50%)")))
    assert "not reached in 2 of 3 folds" in table and "0.1000" not in table
    every = aggregate_metrics(pd.DataFrame(_rows([np.nan] * 3, "cpt50", keys), columns=METRIC_COLUMNS))
    assert "| not reached |" in metric_table(every, "routellm", "all", "all", (("cpt50", "CPT(50%)"),))


def test_group_mean_of_a_missed_target_is_missing():
    keys = [("0", "all-strong"), ("0", "all-weak"), ("0", "strong-to-weak")]
    rows = _rows([0.1, np.nan, 0.3], "rqnc", keys, pool="5", protocol="orbit")
    rows += _rows([0.1, np.nan, 0.3], "nauc", keys, pool="5", protocol="orbit")
    m = aggregate_metrics(pd.DataFrame(rows, columns=METRIC_COLUMNS))
    gm = m[m["group"] == "mean"].set_index("metric")["value"]
    assert np.isnan(gm["rqnc"]) and abs(gm["nauc"] - 0.2) < 1e-12


def test_policies_with_unknown_predicted_costs():
    s = np.array([[0.1, 0.9], [0.5, 0.2]])
    c = np.array([[1.0, np.nan], [1.0, 1.0]])
    # argmax: 0.9 wins row 0 whatever its cost; the NaN cost only matters among ties
    assert argmax_policy(s, c).tolist() == [1, 0]
    assert argmax_policy(np.array([[0.9, 0.9]]), np.array([[np.nan, 2.0]])).tolist() == [1]
    # wtp 10: row 0 utilities 10*0.1-1 = 0 and -inf (unknown cost), row 1 4 and 1
    assert wtp_policy(s, c, 10.0).tolist() == [0, 0]
    # no known cost in the row: the best predicted score
    assert wtp_policy(s[:1], np.array([[np.nan, np.nan]]), 10.0).tolist() == [1]
    # budget: an unknown cost never fits (row 0: only LLM 0 fits)
    assert budget_policy(s, c, 5.0).tolist() == [0, 0]


def test_masked_out_llm_is_never_chosen_when_the_allowed_scores_are_missing():
    s = np.array([[0.3, 0.9, np.nan], [np.nan, 0.9, np.nan]])
    mask = np.array([[False, False, True], [True, False, True]])
    assert argmax_policy(s, None, mask).tolist() == [2, 0]
    assert argmax_policy(s, np.array([[1.0, 1.0, 3.0], [5.0, 1.0, 2.0]]), mask).tolist() == [2, 2]


def test_v_b_is_undefined_when_the_best_mean_is_not_positive():
    s = np.array([[-1.0, -3.0], [-2.0, -2.0], [-1.0, -4.0]])
    assert np.isnan(v_b(s, np.array([0, 0, 0])))
    assert np.isnan(v_b(np.zeros((2, 2)), np.array([0, 1])))
    assert v_b(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]), np.array([0, 1, 0])) == 1.5


def test_routerbench_metrics_with_every_llm_free():
    """All costs 0 (local models): the paper's AIQ over the shared (zero-width) domain is the
    hull's quality; RouterBench's code AIQ divides by the dearest cost and is NaN, where
    ``routerbench_metrics`` raised before."""
    from recsys_router.metrics import routerbench as rb
    s = np.array([[1.0, 0.0], [0.0, 1.0]])
    c0 = np.zeros((2, 2))
    r = rb.routerbench_metrics(s, c0, s, c0, [0.0, 1.0])
    assert r["aiq"] == 1.0  # a perfect router at cost 0
    assert r["zero_aiq"] == 0.5  # either LLM alone: half the queries
    assert np.isnan(r["aiq_code"]) and np.isnan(r["zero_aiq_code"])


def test_rqnc_of_a_free_best_single_llm_is_not_read_as_unreached():
    from recsys_router.metrics.orbit import qnc
    assert qnc(np.array([[0.0, 0.8]]), 0.8, 0.0) == (0.0, 1.0, True)
    assert qnc(np.array([[0.0, 0.7], [0.5, 0.8]]), 0.8, 0.0) == (0.5, np.inf, True)
    missed = qnc(np.array([[0.0, 0.7]]), 0.8, 0.0)
    assert np.isnan(missed.rqnc) and not missed.reached


def test_evaluate_on_free_llms_judges_by_quality():
    """Equal costs everywhere cannot change a choice: the safe fallback judges by mu_o, not by
    a budget sweep whose nAUC is 0 for every router, and rQNC is reached (1.0), not NaN."""
    from recsys_router.data import RoutingData
    from recsys_router.datasets.synthetic import make_synthetic
    from recsys_router.evaluation.runner import EvalConfig, evaluate
    d = make_synthetic(150, 4, seed=0)
    free = RoutingData(d.queries, d.llms, d.scores, np.zeros_like(d.costs), name="free")
    res = evaluate(free, EvalConfig(["best-single", "knn"], protocols=["orbit", "routerbench"],
                                    encoder="hashing"), progress=False)
    fallback = [n for n in res.notes if "knn safe fallback" in n]
    assert fallback and not any("by nAUC" in n for n in fallback)
    m = res.metrics.set_index(["router", "metric"])["value"]
    assert m[("knn", "rqnc")] == 1.0 and m[("best-single", "rqnc")] == 1.0


def test_an_explicit_nauc_verdict_on_equal_costs_says_why():
    from recsys_router.data import RoutingData
    from recsys_router.datasets.synthetic import make_synthetic
    from recsys_router.fallback_nauc import resolve_verdict_metric
    d = make_synthetic(40, 3, seed=0)
    same = RoutingData(d.queries, d.llms, d.scores, np.full_like(d.costs, 0.25))
    assert resolve_verdict_metric("auto", same) == "mu_o"
    with pytest.raises(ValueError, match="one cost everywhere"):
        resolve_verdict_metric("nauc", same)


def test_best_single_cost_over_the_queries_where_its_score_was_observed():
    """Review M-2: best_single's cost (and its cost tie-break) averaged the cost over every
    query, also where the LLM's score was unobserved."""
    s = np.array([[1.0, np.nan], [0.0, 1.0]])
    c = np.array([[1.0, 2.0], [1.0, 4.0]])
    assert best_single(s, c) == (1, 1.0, 4.0)          # LLM 1: query 1 only, cost 4
    # both LLMs have mean score 1; LLM 0 costs (1 + 3) / 2 = 2, LLM 1 costs 3 on its one
    # observed query (the 0 on its unobserved query made it look like 1.5 and win the tie)
    s = np.array([[1.0, np.nan], [1.0, 1.0]])
    c = np.array([[1.0, 0.0], [3.0, 3.0]])
    assert best_single(s, c) == (0, 1.0, 2.0)
