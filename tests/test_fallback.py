"""Safe fallback: paired comparison with best-single and task-best on held-out train queries,
per task for tasks with enough held-out queries, pooled otherwise."""

import math

import numpy as np
import pandas as pd
import pytest

from recsys_router.data import RoutingData
from recsys_router.fallback import (SafeFallbackRouter, fallback_summary, realised_scores,
                                    stratified_holdout)
from recsys_router.inner_validation import paired_decision, stratified_folds
from recsys_router.registry import make_router
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
    r = SafeFallbackRouter(TextRule(), val_fraction=0.2, seed=0, min_task_queries=4).fit(d)
    fb = r.fallback_
    # t1: router realises 0 on its 4 held-out queries; task-best (a) and best-single (a:
    # mean 0.75 over both tasks) realise 1 -> baseline best-single (task-best does not lead
    # it), d = -1 on every query, SE 0 -> falls back; t2: router realises 1, neither
    # baseline can always (half the t2 queries need a, half b) -> d >= 0 -> router
    assert fb["tasks"] == {"t1": "best-single", "t2": "router"}
    t1 = fb["means"]["t1"]
    assert (t1["router"], t1["best-single"], t1["task-best"]) == (0.0, 1.0, 1.0)
    assert (t1["baseline"], t1["diff"], t1["se"], t1["n"], t1["pooled"]) == \
        ("best-single", -1.0, 0.0, 4, False)
    assert fb["means"]["t2"]["router"] == 1.0 and fb["n_val"] == 8
    assert r.router_.n_train_ == 40 and fb["refitted"]   # refitted on every training query
    chosen = r.route(d)
    truth_best = np.where(d.scores[:, 0] == 1.0, "a", "b")
    assert (chosen == truth_best).all()
    assert "fell back on 1 of 2 tasks (best-single: t1)" in fallback_summary(fb)


def test_task_best_wins_where_the_best_single_llm_is_wrong():
    d = _data()
    # make b the best single LLM overall: on t2 b is right on every query; 5 t1 queries
    # nobody gets right (a: 15 / 40, b: 20 / 40)
    s = d.scores.copy()
    s[20:] = [0.0, 1.0]
    s[:5] = [0.0, 0.0]
    d = RoutingData(d.queries, d.llms, s, name="t")
    r = SafeFallbackRouter(TextRule(), seed=0, min_task_queries=4).fit(d)
    # t1: router 0 (picks b), best-single b -> 0, task-best a -> 1 except on the 5 queries
    # nobody gets right, two of which are among the 4 seeded held-out ones: task-best
    # leads by [1, 1, 0, 0], mean 0.5 > 1.645 * SE 0.2887 = 0.4749 -> task-best
    m = r.fallback_["means"]["t1"]
    assert m["task_vs_single"] == 0.5 and m["task_vs_single_se"] == pytest.approx(math.sqrt(1 / 12))
    assert r.fallback_["tasks"]["t1"] == "task-best"
    # t2 (all b): router picks b on "y" and a on "x" -> 0.5; baselines 1 -> best-single
    # (task-best does not lead it); d is -1 on the "x" queries and 0 on the "y" ones: on
    # the seeded held-out [-1, -1, 0, 0], mean -0.5 < -1.645 * SE 0.2887 -> falls back
    assert r.fallback_["tasks"]["t2"] == "best-single"
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
    r = SafeFallbackRouter(TextRule(), seed=1, min_task_queries=4).fit(d)
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


# ------------------------------------------------------------------ the decision rule by hand
def test_paired_rule_keeps_a_router_better_by_a_clear_margin():
    out = paired_decision([1] * 10, [0] * 10, [0, 1] * 5, z=1.645)
    # baseline task-best (0.5 > 0); d = [1, 0] * 5: mean 0.5 >= anything negative
    assert (out["baseline"], out["diff"], out["n"], out["decision"]) == ("task-best", 0.5, 10, "router")


def test_paired_rule_falls_back_when_worse_beyond_noise():
    r, bs, tb = [0] * 8 + [1] * 2, [1] * 5 + [0] * 5, [1] * 10
    out = paired_decision(r, bs, tb, z=1.645)
    # baseline task-best (1.0 > 0.5); d = eight -1 and two 0: mean -0.8,
    # sample variance (8 * 0.2^2 + 2 * 0.8^2) / 9 = 1.6 / 9, SE = sqrt(1.6 / 9 / 10)
    assert out["baseline"] == "task-best" and out["diff"] == pytest.approx(-0.8)
    assert out["se"] == pytest.approx(math.sqrt(1.6 / 9 / 10))
    assert -0.8 < -1.645 * out["se"] and out["decision"] == "task-best"


def test_paired_rule_keeps_the_router_within_noise():
    r = [0, 1] * 5                                # mean 0.5
    bs = [1, 1, 1, 1, 0, 1, 0, 1, 0, 1]           # mean 0.7: better, but not beyond noise
    out = paired_decision(r, bs, [0] * 10, z=1.645)
    # d = [-1, 0, -1, 0, 0, 0, 0, 0, 0, 0]: mean -0.2, variance 1.6 / 9, SE 0.1333;
    # -0.2 > -1.645 * 0.1333 = -0.2193 -> router (the old strict rule fell back here)
    assert out["baseline"] == "best-single" and out["diff"] == pytest.approx(-0.2)
    assert out["se"] == pytest.approx(math.sqrt(1.6 / 9 / 10))
    assert out["decision"] == "router"
    assert paired_decision(r, bs, [0] * 10, z=1.0)["decision"] == "best-single"  # -0.2 < -0.133
    # z_keep = 0: any loss on the mean hands the queries to the baseline; the baseline choice
    # still uses z (task-best, all 0, is not chosen)
    keep0 = paired_decision(r, bs, [0] * 10, z=1.645, z_keep=0.0)
    assert (keep0["baseline"], keep0["decision"]) == ("best-single", "best-single")
    assert paired_decision([1, 0], [1, 0], [1, 0], 1.645, z_keep=0)["decision"] == "router"
    # one query (no SE): a loss falls back at z_keep = 0, is kept otherwise
    assert paired_decision([0], [1], [1], 1.645, z_keep=0)["decision"] == "best-single"
    assert paired_decision([0], [1], [1], 1.645)["decision"] == "router"
    for bad in (float("nan"), float("inf"), "1", True):
        with pytest.raises(ValueError, match="z_keep"):
            paired_decision(r, bs, [0] * 10, z=1.645, z_keep=bad)


def test_negative_z_keep_asks_the_router_to_lead():
    # router 1 on 6 of 10 queries, best-single on 5 (the first 5 shared): d = [0]*5 + [1] +
    # [0]*4 -> mean 0.1, variance (1 - 10 * 0.01) / 9 = 0.1, SE sqrt(0.1 / 10) = 0.1
    r = [1] * 6 + [0] * 4
    bs = [1] * 5 + [0] * 5
    out = paired_decision(r, bs, [0] * 10, z=1.645, z_keep=-1.0)
    assert out["diff"] == pytest.approx(0.1) and out["se"] == pytest.approx(0.1)
    # a lead of exactly 1 SE is enough (0.1 < 0.1 is false), 1.5 SE is not
    assert out["decision"] == "router"
    assert paired_decision(r, bs, [0] * 10, z=1.645, z_keep=-1.5)["decision"] == "best-single"
    # identical routing (d = 0, SE 0) keeps the router at any margin
    assert paired_decision([1, 0], [1, 0], [1, 0], 1.645, z_keep=-1)["decision"] == "router"
    # one query (no SE): a tie falls back when a lead is required, a win is kept
    assert paired_decision([1], [1], [1], 1.645, z_keep=-1)["decision"] == "best-single"
    assert paired_decision([1], [0], [0], 1.645, z_keep=-1)["decision"] == "router"
    assert paired_decision([1], [1], [1], 1.645, z_keep=0)["decision"] == "router"


def test_paired_rule_edge_cases():
    # every difference -1: SE 0, any loss is beyond noise; the baselines tie -> best-single
    assert paired_decision([0, 0, 0], [1, 1, 1], [1, 1, 1], 1.645)["decision"] == "best-single"
    # ties everywhere: d = 0, SE 0 -> router
    assert paired_decision([1, 0], [1, 0], [1, 0], 1.645)["decision"] == "router"
    # one query: no SE, the router is kept; NaN rows are left out; nothing known -> None
    one = paired_decision([0, np.nan], [1, 1], [1, 1], 1.645)
    assert (one["n"], one["se"], one["decision"]) == (1, None, "router")
    assert paired_decision([np.nan], [1], [1], 1.645) is None


def test_small_tasks_pool_into_the_all_queries_comparison():
    # big task A (40 queries): router 1, baselines 0; big task B (40): router 0, task-best 1;
    # small task C (3): router 0, task-best 1
    keys = np.array(["A"] * 40 + ["B"] * 40 + ["C"] * 3, dtype=object)
    got = {"router": np.r_[np.ones(40), np.zeros(43)], "best-single": np.zeros(83),
           "task-best": np.r_[np.zeros(40), np.ones(43)]}
    fb = SafeFallbackRouter(TextRule(), min_task_queries=30, verdict_z=1.645)._decide_all(
        got, keys, 83)
    # all queries: baseline task-best (43/83 > 0), d = +1 x 40, -1 x 43: mean -3/83,
    # variance (83 - 83 * (3/83)^2) / 82, SE = sqrt(variance / 83) = 0.1097 -> within noise,
    # and verdict_z = 1.645 (the rule before verdict_z) keeps the router
    o = fb["overall"]
    assert o["baseline"] == "task-best" and o["diff"] == pytest.approx(-3 / 83)
    assert o["se"] == pytest.approx(math.sqrt((83 - 9 / 83) / 82 / 83))
    assert fb["default"] == "router"
    # A: d = +1 -> router; B: d = -1 everywhere (SE 0, 40 >= 30) -> task-best; C would
    # fall back on its own 3 queries, but 3 < 30: it follows the all-queries decision
    assert fb["tasks"] == {"A": "router", "B": "task-best", "C": "router"}
    c = fb["means"]["C"]
    assert (c["own_decision"], c["decision"], c["pooled"], c["departs"]) == \
        ("task-best", "router", True, False)
    assert "3 < 30 held-out queries" in c["why"]
    b = fb["means"]["B"]
    assert (b["own_decision"], b["decision"], b["departs"]) == ("task-best", "task-best", True)
    assert "task-best beats the router" in b["why"]
    assert not fb["means"]["A"]["departs"] and fb["means"]["A"]["router_better"]
    summary = fallback_summary(fb)
    assert "1 task(s) with < 30 held-out queries" in summary
    assert "1 task(s) depart from it on their own evidence: B -> task-best (-1.0000" in summary
    fb1 = SafeFallbackRouter(TextRule(), min_task_queries=3, verdict_z=1.645)._decide_all(
        got, keys, 83)
    assert fb1["tasks"]["C"] == "task-best"


def test_default_verdict_falls_back_unless_the_router_leads():
    # the data of the test above at the default verdict_z = -1 (no costs): mean d = -3/83 is
    # below +1 SE, so the all-queries verdict is task-best although the loss is within the
    # noise; verdict_z = 0 falls back too (-3/83 < 0)
    keys = np.array(["A"] * 40 + ["B"] * 40 + ["C"] * 3, dtype=object)
    got = {"router": np.r_[np.ones(40), np.zeros(43)], "best-single": np.zeros(83),
           "task-best": np.r_[np.zeros(40), np.ones(43)]}
    fb = SafeFallbackRouter(TextRule(), min_task_queries=30)._decide_all(got, keys, 83)
    assert fb["verdict_z"] == -1 and fb["default"] == "task-best"
    assert "the router does not lead task-best by 1 SE" in fb["overall"]["why"]
    fb0 = SafeFallbackRouter(TextRule(), min_task_queries=30, verdict_z=0)._decide_all(
        got, keys, 83)
    assert fb0["default"] == "task-best"
    assert "the router does not beat task-best on the mean" in fb0["overall"]["why"]
    # A: d = +1 on all 40 (SE 0) -> the router beats its better baseline beyond the noise:
    # departs to the router; B (d = -1) and the pooled C follow the verdict
    assert fb["tasks"] == {"A": "router", "B": "task-best", "C": "task-best"}
    assert fb["means"]["A"]["departs"] and not fb["means"]["B"]["departs"]
    # e more queries where the router wins: n = 83 + e, mean d = (e - 3) / n, SE =
    # sqrt((n - n mean^2) / (n - 1) / n). verdict_z = 0: e = 1, 2 still lose on the mean,
    # e = 3 ties (0) -> kept. Default (-1): e = 12 leads by 0.0947 < SE 0.1027 -> back;
    # e = 13: 10/96 = 0.1042 >= SE 0.1020 -> kept
    for extra, vz, want in ((1, 0, "task-best"), (2, 0, "task-best"), (3, 0, "router"),
                            (3, "auto", "task-best"), (12, "auto", "task-best"),
                            (13, "auto", "router")):
        k2 = np.r_[keys, np.array(["D"] * extra, dtype=object)]
        g2 = {"router": np.r_[got["router"], np.ones(extra)],
              "best-single": np.r_[got["best-single"], np.zeros(extra)],
              "task-best": np.r_[got["task-best"], np.zeros(extra)]}
        out = SafeFallbackRouter(TextRule(), min_task_queries=30, verdict_z=vz)._decide_all(
            g2, k2, 83 + extra)
        assert out["default"] == want, (extra, vz)


def test_inner_folds_hold_out_every_training_query_once():
    d = _data()
    r = SafeFallbackRouter(TextRule(), inner_folds=2, min_task_queries=10, seed=0).fit(d)
    fb = r.fallback_
    # 2 folds: all 40 queries held out once; t1 (20): d = -1 everywhere -> best-single
    # (= task-best there); t2 (20): the router is right on every query -> router;
    # refitted on all 40
    assert fb["n_val"] == 40 and fb["means"]["t1"]["n"] == 20 and fb["inner_folds"] == 2
    assert fb["tasks"] == {"t1": "best-single", "t2": "router"}
    assert r.router_.n_train_ == 40 and fb["refitted"]
    folds = stratified_folds(d.tasks, 3, 0)
    held = np.sort(np.concatenate([va for _, va in folds]))
    assert held.tolist() == list(range(40))
    assert all(len(np.intersect1d(tr, va)) == 0 for tr, va in folds)
    with pytest.raises(ValueError, match="inner_folds"):
        SafeFallbackRouter(TextRule(), inner_folds=0).fit(d)


def test_all_queries_verdict_is_every_tasks_default_under_a_fallback():
    # A (40): router 1, baselines 0 -> the router leads beyond noise (d = +1, SE 0);
    # B (80): router 0, task-best 1; D (40): router within noise of task-best (d = +1 on 2
    # queries, 0 elsewhere); E (40): best-single right, router and task-best wrong;
    # C (5): router 1, baselines 0, but too small to be decided alone
    n = {"A": 40, "B": 80, "D": 40, "E": 40, "C": 5}
    keys = np.array([k for k, m in n.items() for _ in range(m)], dtype=object)
    r = np.r_[np.ones(40), np.zeros(80), np.r_[np.ones(2), np.zeros(38)], np.zeros(40), np.ones(5)]
    b = np.r_[np.zeros(40), np.zeros(80), np.zeros(40), np.ones(40), np.zeros(5)]
    t = np.r_[np.zeros(40), np.ones(80), np.zeros(40), np.zeros(40), np.zeros(5)]
    fb = SafeFallbackRouter(TextRule(), min_task_queries=30)._decide_all(
        {"router": r, "best-single": b, "task-best": t}, keys, 205)
    # all 205: means router 47/205, best-single 40/205, task-best 80/205; task-best minus
    # best-single: +1 on B's 80, -1 on E's 40: mean 40/205 = 0.195, SE 0.052 -> task-best;
    # d = r - t: +1 on 40 + 2 + 5 = 47 queries, -1 on 80, 0 on 78: mean -33/205
    o = fb["overall"]
    d = np.r_[np.ones(47), -np.ones(80), np.zeros(78)]
    assert o["baseline"] == "task-best" and o["diff"] == pytest.approx(-33 / 205)
    assert o["se"] == pytest.approx(d.std(ddof=1) / math.sqrt(205))
    assert -33 / 205 < -1.645 * o["se"] and fb["default"] == "task-best"
    # A keeps the router on its own evidence; B falls back as the verdict says; D's lead
    # (mean 0.05, SE sqrt((2 - 40 * 0.05 ** 2) / 39 / 40) = 0.0349, 0.05 < 1.645 * 0.0349)
    # is within noise, so D falls back as the verdict says (the old per-task rule kept the
    # router there), to the verdict's task-best (its baselines tie); E falls back to
    # best-single, which leads task-best there on every query (SE 0); C (5 < 30) follows
    assert fb["tasks"] == {"A": "router", "B": "task-best", "C": "task-best",
                           "D": "task-best", "E": "best-single"}
    assert fb["means"]["D"]["se"] == pytest.approx(math.sqrt((2 - 40 * 0.05 ** 2) / 39 / 40))
    assert fb["means"]["D"]["own_decision"] == "router"     # what D alone would have said
    assert "fell back on 4 of 5 tasks (best-single: E; task-best: B, C, D)" in fallback_summary(fb)


def test_all_queries_verdict_kept_router_departs_only_on_significant_loss():
    # overall the router wins (A: +1 on 60 queries); F (40): the router loses on 2 queries
    # only (d = -1 twice: mean -0.05, SE 0.0349, within noise) -> keeps the router;
    # G (40): loses on every query -> task-best
    keys = np.array(["A"] * 60 + ["F"] * 40 + ["G"] * 40, dtype=object)
    r = np.r_[np.ones(60), np.r_[np.zeros(2), np.ones(38)], np.zeros(40)]
    b = np.zeros(140)
    t = np.r_[np.zeros(60), np.ones(40), np.ones(40)]
    fb = SafeFallbackRouter(TextRule(), min_task_queries=30)._decide_all(
        {"router": r, "best-single": b, "task-best": t}, keys, 140)
    assert fb["default"] == "router" and fb["overall"]["diff"] == pytest.approx((60 - 42) / 140)
    assert fb["tasks"] == {"A": "router", "F": "router", "G": "task-best"}

def _got(blocks):
    """(keys, got) from blocks of (task, count, router, best-single, task-best) per query."""
    keys = np.array([t for t, n, *_ in blocks for _ in range(n)], dtype=object)
    got = {k: np.concatenate([np.full(n, v[i], dtype=float) for _, n, *v in blocks])
           for i, k in enumerate(("router", "best-single", "task-best"))}
    return keys, got


def test_overall_fall_back_and_a_task_that_significantly_keeps_the_router():
    # A (40): router 1, baselines 0; B (80): router 0, baselines 1; C (5): like A but small
    keys, got = _got([("A", 40, 1, 0, 0), ("B", 80, 0, 1, 1), ("C", 5, 1, 0, 0)])
    fb = SafeFallbackRouter(TextRule(), min_task_queries=30)._decide_all(got, keys, 125)
    # all 125: the baselines tie on every query -> best-single; d = +1 x 45, -1 x 80: mean
    # -35/125 = -0.28, variance (125 - 125 * 0.28^2) / 124, SE 0.0862: -0.28 < -1.645 *
    # 0.0862 -> best-single
    o = fb["overall"]
    assert o["diff"] == pytest.approx(-0.28) and o["baseline"] == "best-single"
    assert o["se"] == pytest.approx(math.sqrt((125 - 125 * 0.28 ** 2) / 124 / 125))
    assert fb["default"] == "best-single" and "does not lead best-single by 1 SE" in o["why"]
    # A: d = +1 on 40 >= 30 queries (SE 0) -> departs to the router; B agrees with the
    # verdict; C's d = +1 too, but 5 < 30 queries: it follows the verdict
    assert fb["tasks"] == {"A": "router", "B": "best-single", "C": "best-single"}
    assert fb["means"]["A"]["departs"] and "the router beats best-single" in fb["means"]["A"]["why"]
    assert not fb["means"]["B"]["departs"] and not fb["means"]["C"]["departs"]
    assert fb["means"]["C"]["router_better"] and fb["means"]["C"]["pooled"]
    assert "depart from it on their own evidence: A -> router (+1.0000" in fallback_summary(fb)


def test_losing_overall_beyond_noise_but_per_task_within_it_falls_back_everywhere():
    # four tasks of 40 queries, each: 6 queries router 0 / task-best 1 (d = -1), 3 queries
    # router 1 / task-best 0 (d = +1), 31 both 1 (d = 0); best-single 0 everywhere
    block = [(0, 0, 1)] * 6 + [(1, 0, 0)] * 3 + [(1, 0, 1)] * 31
    keys, got = _got([(t, 1, *v) for t in "ABCD" for v in block])
    fb = SafeFallbackRouter(TextRule(), min_task_queries=30)._decide_all(got, keys, 160)
    # per task: mean -3/40 = -0.075, variance (9 - 40 * 0.075^2) / 39, SE 0.075:
    # -0.075 > -1.645 * 0.075 -> within noise on its own
    se_task = math.sqrt((9 - 40 * 0.075 ** 2) / 39 / 40)
    for t in "ABCD":
        m = fb["means"][t]
        assert m["diff"] == pytest.approx(-0.075) and m["se"] == pytest.approx(se_task)
        assert m["own_decision"] == "router" and not m["router_better"] and not m["departs"]
    # all 160: mean -0.075, variance (36 - 160 * 0.075^2) / 159, SE 0.0371:
    # -0.075 < -1.645 * 0.0371 = -0.0611 -> task-best, and every task follows it
    se_all = math.sqrt((36 - 160 * 0.075 ** 2) / 159 / 160)
    assert fb["overall"]["se"] == pytest.approx(se_all) and -0.075 < -1.645 * se_all
    assert fb["default"] == "task-best"
    assert fb["tasks"] == {t: "task-best" for t in "ABCD"}
    assert "no significant evidence" in fb["means"]["A"]["why"]


def test_no_tasks_at_all_follow_the_all_queries_verdict():
    keys, got = _got([("", 10, 0, 1, 1)])
    fb = SafeFallbackRouter(TextRule())._decide_all(got, keys, 10)
    assert fb["tasks"] == {} and fb["means"] == {} and fb["default"] == "best-single"
    assert fb["overall"]["n"] == 10 and fb["overall"]["diff"] == -1.0
    keys, got = _got([("", 10, 1, 0, 0)])
    assert SafeFallbackRouter(TextRule())._decide_all(got, keys, 10)["default"] == "router"
    empty = {k: np.full(3, np.nan) for k in ("router", "best-single", "task-best")}
    fb = SafeFallbackRouter(TextRule())._decide_all(empty, np.array([""] * 3, dtype=object), 3)
    assert (fb["default"], fb["overall"]) == ("router", {})


def test_ties_never_move_a_task_off_the_verdict():
    # A (40): router = task-best = 1 (d = 0, SE 0); B (40): router 0, task-best 1
    keys, got = _got([("A", 40, 1, 0, 1), ("B", 40, 0, 0, 1)])
    fb = SafeFallbackRouter(TextRule(), min_task_queries=30)._decide_all(got, keys, 80)
    # all 80: d = 0 x 40, -1 x 40: mean -0.5, SE sqrt((40 - 80 * 0.25) / 79 / 80) -> task-best
    assert fb["overall"]["se"] == pytest.approx(math.sqrt(20 / 79 / 80))
    assert fb["default"] == "task-best"
    a = fb["means"]["A"]
    assert (a["diff"], a["se"], a["router_better"], a["departs"]) == (0.0, 0.0, False, False)
    assert fb["tasks"] == {"A": "task-best", "B": "task-best"}
    # ties everywhere: the verdict keeps the router and so does every task
    keys, got = _got([("A", 40, 1, 1, 1), ("B", 40, 0, 0, 0)])
    fb = SafeFallbackRouter(TextRule(), min_task_queries=30)._decide_all(got, keys, 80)
    assert fb["default"] == "router" and fb["tasks"] == {"A": "router", "B": "router"}


def test_a_large_task_falls_back_to_its_own_better_baseline_a_small_one_to_the_verdicts():
    # A (40): router 0, best-single 0, task-best 1; B (80): router 0, best-single 1,
    # task-best 0; C (5): like A but small
    keys, got = _got([("A", 40, 0, 0, 1), ("B", 80, 0, 1, 0), ("C", 5, 0, 0, 1)])
    fb = SafeFallbackRouter(TextRule(), min_task_queries=30)._decide_all(got, keys, 125)
    # all 125: best-single 80/125 > task-best 45/125; d = -1 on B's 80, 0 elsewhere:
    # mean -0.64 < -1.645 SE -> best-single
    assert fb["overall"]["baseline"] == "best-single" and fb["default"] == "best-single"
    assert fb["overall"]["diff"] == pytest.approx(-0.64)
    # A agrees with falling back; task-best is its better baseline (1 vs 0) -> task-best;
    # C (5 < 30) takes the verdict's best-single
    assert fb["tasks"] == {"A": "task-best", "B": "best-single", "C": "best-single"}
    assert not fb["means"]["A"]["departs"]


def test_task_best_is_the_baseline_only_when_it_leads_best_single_beyond_noise():
    r, bs = [0] * 10, [0] * 10
    tb = [1, 1] + [0] * 8
    # task-best minus best-single: mean 0.2, variance (2 - 10 * 0.2^2) / 9 = 1.6 / 9,
    # SE 0.1333: 0.2 < 1.645 * 0.1333 = 0.2193 -> best-single (the higher mean alone chose
    # task-best); the router ties best-single (d = 0) -> router
    out = paired_decision(r, bs, tb, z=1.645)
    assert out["task_vs_single"] == pytest.approx(0.2)
    assert out["task_vs_single_se"] == pytest.approx(math.sqrt(1.6 / 9 / 10))
    assert (out["baseline"], out["diff"], out["decision"]) == ("best-single", 0.0, "router")
    # at z = 1: 0.2 > 0.1333 -> task-best, and the router's d = -0.2 < -0.1333 -> task-best
    out = paired_decision(r, bs, tb, z=1.0)
    assert (out["baseline"], out["decision"]) == ("task-best", "task-best")


def test_a_task_keeps_the_all_queries_baseline_unless_the_other_leads_on_its_own():
    r, bs, tb = [0] * 10, [1, 1] + [0] * 8, [0] * 10
    # best-single minus task-best: mean 0.2, SE 0.1333 (as above): within noise, so a task
    # told to prefer task-best keeps it; the router ties task-best -> router
    out = paired_decision(r, bs, tb, z=1.645, prefer="task-best")
    assert out["task_vs_single"] == pytest.approx(-0.2)
    assert (out["baseline"], out["decision"]) == ("task-best", "router")
    assert paired_decision(r, bs, tb, z=1.0, prefer="task-best")["baseline"] == "best-single"
    with pytest.raises(ValueError, match="prefer"):
        paired_decision(r, bs, tb, z=1.645, prefer="oracle")


class HoldsOwnVal(TextRule):
    """TextRule with a ``val_fraction`` (like a Lightning router) that records its val."""

    holds_out_val = True

    def __init__(self, strength: float = 1.0, val_fraction: float = 0.1):
        super().__init__(strength)
        self.val_fraction = val_fraction

    def _fit(self, train, val):
        super()._fit(train, val)
        self.val_seen_ = val


class TunesOnValFraction(HoldsOwnVal):
    """A ``val_fraction`` that only tunes a setting (like cost-aware, task-residual, --auto):
    the router still ends fitted on all the queries it is given."""

    holds_out_val = False


def test_a_val_fraction_parameter_alone_does_not_skip_the_refit():
    d = _data()
    r = SafeFallbackRouter(TunesOnValFraction(), seed=0, min_task_queries=4).fit(d)
    assert r.fallback_["n_val"] == 8 and r.fallback_["refitted"]
    assert r.router_.n_train_ == 40                      # refitted on every training query
    assert make_router("mf").holds_out_val and not make_router("mf", val_fraction=0.0).holds_out_val
    assert not make_router("cost-aware").holds_out_val
    assert not make_router("task-residual").holds_out_val


def test_the_inner_fit_never_sees_the_held_out_queries():
    d = _data()
    r = SafeFallbackRouter(HoldsOwnVal(), seed=0, min_task_queries=4).fit(d, d.subset([0, 1]))
    # one inner split, a router holding out its own validation part: the router fitted on
    # the 32 inner-train queries is kept, and it was given no validation queries (it would
    # early-stop on its own part of the 32, never on the 8 the comparison uses)
    assert r.fallback_["n_val"] == 8 and not r.fallback_["refitted"]
    assert r.router_.n_train_ == 32 and r.router_.val_seen_ is None


class CheapRule(TextRule):
    cheap_fit = True


def test_auto_inner_folds_hold_out_every_query_for_cheap_fits_only():
    d = _data()
    cheap = SafeFallbackRouter(CheapRule(), seed=0, min_task_queries=4).fit(d)
    # 5 folds: all 40 training queries held out once, then one refit on all of them
    assert (cheap.fallback_["inner_folds"], cheap.fallback_["n_val"]) == (5, 40)
    assert cheap.router_.n_train_ == 40 and cheap.fallback_["refitted"]
    other = SafeFallbackRouter(TextRule(), seed=0, min_task_queries=4).fit(d)
    assert (other.fallback_["inner_folds"], other.fallback_["n_val"]) == (1, 8)
    for bad in ("many", True, 2.5, 0):
        with pytest.raises(ValueError, match="inner_folds"):
            SafeFallbackRouter(CheapRule(), inner_folds=bad).fit(d)


class SmallSetRule(TextRule):
    fold_max_cells = 80


def test_auto_inner_folds_for_routers_declaring_a_cell_limit():
    d = _data()                                   # 40 queries x 2 LLMs = 80 observed cells
    small = SafeFallbackRouter(SmallSetRule(), seed=0, min_task_queries=4).fit(d)
    assert (small.fallback_["inner_folds"], small.fallback_["n_val"]) == (5, 40)
    assert small.router_.n_train_ == 40 and small.fallback_["refitted"]
    # one cell more than the limit -> one held-out part
    SmallSetRule.fold_max_cells = 79
    try:
        big = SafeFallbackRouter(SmallSetRule(), seed=0, min_task_queries=4).fit(d)
    finally:
        SmallSetRule.fold_max_cells = 80
    assert (big.fallback_["inner_folds"], big.fallback_["n_val"]) == (1, 8)
    # missing cells do not count: 79 observed cells -> 5 folds again
    scores = d.scores.copy()
    scores[0, 1] = np.nan
    holed = RoutingData(d.queries, d.llms, scores)
    sparse = SafeFallbackRouter(SmallSetRule(), seed=0, min_task_queries=4)
    assert sparse._n_folds(d) == 5
    SmallSetRule.fold_max_cells = 79
    try:
        assert sparse._n_folds(d) == 1 and sparse._n_folds(holed) == 5
    finally:
        SmallSetRule.fold_max_cells = 80


def _priced(d, cost):
    return RoutingData(d.queries, d.llms, d.scores, np.full(d.scores.shape, cost))


def test_verdict_z_auto_reads_the_costs():
    d = _data()
    fb = SafeFallbackRouter(TextRule(), seed=0, min_task_queries=4)
    # no costs: quality is the objective -> -1 (a lead of 1 SE); observed costs: a sweep
    # decides -> z
    assert fb._verdict_z(d) == -1.0 and fb._verdict_z(_priced(d, 0.5)) == 1.645
    assert SafeFallbackRouter(TextRule(), z=2.0)._verdict_z(_priced(d, 0.5)) == 2.0
    assert SafeFallbackRouter(TextRule(), verdict_z=0.7)._verdict_z(_priced(d, 0.5)) == 0.7
    assert SafeFallbackRouter(TextRule(), verdict_z=-0.5)._verdict_z(d) == -0.5
    for bad in ("sometimes", float("nan"), float("-inf"), True, None):
        with pytest.raises(ValueError, match="verdict_z"):
            SafeFallbackRouter(TextRule(), verdict_z=bad).fit(d)
    # the fitted record says which was used: the router loses within the noise on all
    # held-out queries of a priced copy of the small-tasks data -> kept there, back without costs
    keys = np.array(["A"] * 40 + ["B"] * 40 + ["C"] * 3, dtype=object)
    got = {"router": np.r_[np.ones(40), np.zeros(43)], "best-single": np.zeros(83),
           "task-best": np.r_[np.zeros(40), np.ones(43)]}
    priced = fb._decide_all(got, keys, 83, 1, fb._verdict_z(_priced(d, 0.5)))
    plain = fb._decide_all(got, keys, 83, 1, fb._verdict_z(d))
    assert (priced["default"], priced["verdict_z"]) == ("router", 1.645)
    assert (plain["default"], plain["verdict_z"]) == ("task-best", -1.0)


def test_verdict_z_auto_on_a_fit_with_and_without_costs():
    d = _data()
    # the fitted record shows the resolved value
    a = SafeFallbackRouter(TextRule(), seed=0, min_task_queries=4).fit(d)
    b = SafeFallbackRouter(TextRule(), seed=0, min_task_queries=4).fit(_priced(d, 1.0))
    assert a.fallback_["verdict_z"] == -1.0 and b.fallback_["verdict_z"] == 1.645


def test_lightning_routers_declare_the_cell_limit():
    from recsys_router.registry import make_router
    for name in ("mf", "mirt", "nirt", "two-tower", "graph"):
        assert make_router(name).fold_max_cells == 20_000, name
    assert make_router("best-single").fold_max_cells == 0


class Flat(Router):
    """Predicts 0.5 for every LLM: every row is a tie, broken by the predicted cost."""

    def _fit(self, train, val):
        pass

    def _predict_scores(self, data):
        return np.full((data.n_queries, data.n_llms), 0.5)


def test_realised_scores_break_ties_on_the_cheaper_predicted_cost_as_routing_does():
    pred = np.array([[0.5, 0.5], [0.5, 0.5], [0.9, 0.5]])
    truth = np.array([[1.0, 0.0], [1.0, np.nan], [1.0, 0.0]])
    costs = np.array([[2.0, 1.0], [2.0, 1.0], [2.0, 1.0]])
    # row 0: tie, b cheaper -> 0.0; row 1: b unobserved -> a -> 1.0; row 2: a best -> 1.0
    assert realised_scores(pred, truth, costs).tolist() == [0.0, 1.0, 1.0]
    assert realised_scores(pred, truth).tolist() == [1.0, 1.0, 1.0]    # no costs: first column


def test_fallback_scores_the_llm_the_router_routes_to_on_priced_ties():
    # a is always right and dearer (cost 2), b always wrong (cost 1); Flat ties everything,
    # so the router routes every query to b (cheaper) and realises 0 on every held-out query;
    # best-single (a) realises 1 -> d = -1, SE 0 -> the fallback takes best-single
    d = RoutingData([f"q{i}" for i in range(40)], ["a", "b"], np.tile([1.0, 0.0], (40, 1)),
                    np.tile([2.0, 1.0], (40, 1)))
    r = SafeFallbackRouter(Flat(), verdict_metric="mu_o", inner_folds=1, top_z=None).fit(d)
    assert (r.router_.route(d) == "b").all()
    ov = r.fallback_["overall"]
    assert (ov["router"], ov["best-single"], ov["diff"]) == (0.0, 1.0, -1.0)
    assert r.fallback_["default"] == "best-single" and (r.route(d) == "a").all()


def test_summary_of_a_departing_task_without_an_se_says_n_a():
    # task a: one held-out query, router 0 vs 1 -> d = -1, no SE (one value); at z = 0 it
    # departs from the all-queries verdict (router: d = -1/6, SE sqrt(1/6) / sqrt(6) = 1/6,
    # within 1.645 SE)
    r = SafeFallbackRouter(make_router("knn"), z=0.0, min_task_queries=1)
    got = {"router": np.array([0., 1, 1, 1, 1, 1]), "best-single": np.ones(6),
           "task-best": np.ones(6)}
    fb = r._decide_all(got, np.array(["a", "b", "b", "b", "b", "b"]), 6, 1, verdict_z=1.645)
    assert fb["default"] == "router" and fb["means"]["a"]["se"] is None
    text = fallback_summary(fb)
    assert "router - best-single = -0.1667, SE 0.1667" in text
    assert "a -> best-single (-1.0000, SE n/a)" in text


def test_more_inner_folds_than_training_queries_is_a_clean_skip():
    # 8 queries dealt round-robin over 10 folds: folds 8 and 9 hold out nothing (8 >= 5
    # held out in all, 7 >= 5 in every inner-train part, so only the empty folds are wrong)
    d = RoutingData([f"q{i}" for i in range(8)], ["a", "b"], np.tile([1.0, 0.0], (8, 1)))
    r = SafeFallbackRouter(Flat(), inner_folds=10).fit(d)
    assert r.fallback_["skipped"] == ("8 training queries are too few for 10 inner folds "
                                      "(2 would hold out no query)")
    assert r.fallback_["default"] == "router" and r.fallback_["tasks"] == {}
    assert (r.route(d) == "a").all()
