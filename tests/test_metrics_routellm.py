"""RouteLLM metrics: hand-worked threshold sweep, APGR and CPT; a loop re-implementation of
RouteLLM's evaluation (pd.qcut edges, >= then > at the last edge) on random data."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from recsys_router.errors import DataValidationError
from recsys_router.metrics import DIRECTIONS, apgr, cpt, routellm_metrics, threshold_sweep

# 4 queries; column 0 = strong, column 1 = weak
S = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0], [1.0, 0.0]])
W = np.array([0.9, 0.1, 0.5, 0.7])


def test_threshold_sweep_by_hand():
    cv = threshold_sweep(W, S, n_thresholds=2)
    # edges: quantiles 0, .5, 1 of W = 0.1, 0.6, 0.9
    # t=0.1 (>=): all strong -> 3/4; t=0.6: queries 0, 3 strong -> 1 + 1 + 0 + 1 = 3/4;
    # t=0.9 (strict >): none strong -> weak mean 1/4
    assert cv.thresholds == pytest.approx([0.9, 0.6, 0.1])
    assert cv.strong_frac.tolist() == [0.0, 0.5, 1.0]
    assert cv.qualities == pytest.approx([0.25, 0.75, 0.75])


def test_apgr_cpt_by_hand():
    r = routellm_metrics(W, S, n_thresholds=2)
    assert (r["weak_quality"], r["strong_quality"]) == (0.25, 0.75)
    # AUC = .5 * (.25 + .75) / 2 + .5 * .75 = 0.625; (0.625 - 0.25) / (0.75 - 0.25) = 0.75
    assert r["apgr"] == pytest.approx(0.75)
    # 50% of the gap = 0.5, reached half-way along [0, .5] -> 0.25; 80% = 0.65 -> 0.4
    assert r["cpt50"] == pytest.approx(0.25) and r["cpt80"] == pytest.approx(0.4)
    # a straight line from weak to strong: APGR 1/2, CPT(p) = p; a curve never reaching 0.52
    assert apgr([0.0, 1.0], [0.2, 0.6], 0.2, 0.6) == pytest.approx(0.5)
    assert cpt([0.0, 1.0], [0.2, 0.6], 0.2, 0.6, pgr=0.8) == pytest.approx(0.8)
    assert math.isnan(cpt([0.0, 0.5, 1.0], [0.2, 0.3, 0.4], 0.2, 0.6, pgr=0.8))
    assert math.isnan(apgr([0.0, 1.0], [0.5, 0.5], 0.5, 0.5))


def test_apgr_is_undefined_when_the_pair_is_inverted_on_the_test_queries():
    """The pair comes from training means; on test queries where the "strong" LLM scores
    lower, (AUC - q_w W) / ((q_s - q_w) W) flips sign: an oracle curve above both (AUC 0.6
    over [0, 1] with q_s 0.4, q_w 0.5) would get (0.6 - 0.5) / (-0.1) = -1, below a router
    that only ever calls the weak LLM (0). Undefined instead, and skipped by means."""
    assert math.isnan(apgr([0.0, 1.0], [0.6, 0.6], 0.5, 0.4))
    assert math.isnan(apgr([0.0, 1.0], [0.5, 0.4], 0.5, 0.4))
    # the same curve with the pair the right way round is defined: (0.6 - 0.4) / 0.1 = 2
    assert apgr([0.0, 1.0], [0.6, 0.6], 0.4, 0.5) == pytest.approx(2.0)
    # CPT: the target is at most q_weak, reached at the curve's start
    assert cpt([0.0, 1.0], [0.5, 0.4], 0.5, 0.4, pgr=0.5) == 0.0


def _routellm_loop(w, strong_q, weak_q, n):
    """RouteLLM's evaluate loop, one threshold and one query at a time."""
    _, edges = pd.qcut(w, n, retbins=True)
    fr, qu = [], []
    for i, t in enumerate(edges):
        picks = [(x > t) if i == len(edges) - 1 else (x >= t) for x in w]
        qu.append(sum(sq if p else wq for p, sq, wq in zip(picks, strong_q, weak_q)) / len(w))
        fr.append(sum(picks) / len(w))
    o = np.argsort(fr, kind="stable")
    return np.array(fr)[o], np.array(qu)[o]


@pytest.mark.parametrize("seed", range(3))
def test_sweep_matches_routellm_loop(seed):
    rng = np.random.default_rng(seed)
    n = 400
    s = (rng.random((n, 2)) < [0.8, 0.5]).astype(float)
    w = rng.random(n)
    cv = threshold_sweep(w, s, n_thresholds=10)
    fr, qu = _routellm_loop(w, s[:, 0], s[:, 1], 10)
    assert cv.strong_frac == pytest.approx(fr) and cv.qualities == pytest.approx(qu)
    # RouteLLM's AUC/APGR arithmetic on the loop's curve
    weak, strong = s[:, 1].mean(), s[:, 0].mean()
    ref = (np.trapezoid(qu, fr) - weak) / (strong - weak)
    assert routellm_metrics(w, s)["apgr"] == pytest.approx(ref)


def test_random_router_apgr_near_half_and_oracle_high():
    rng = np.random.default_rng(0)
    n = 20_000
    s = (rng.random((n, 2)) < [0.8, 0.5]).astype(float)
    r = routellm_metrics(rng.random(n), s, n_thresholds=20)
    assert abs(r["apgr"] - 0.5) < 0.03
    oracle = routellm_metrics(s[:, 0] - s[:, 1], s, n_thresholds=20)
    assert oracle["apgr"] > 0.8 and oracle["cpt80"] < r["cpt80"]


def test_directions_and_errors():
    assert DIRECTIONS["apgr"] == "higher"
    assert DIRECTIONS["cpt50"] == DIRECTIONS["cpt80"] == "lower"
    with pytest.raises(ValueError, match="different"):
        threshold_sweep(W, S, 0, 0)
    with pytest.raises(DataValidationError, match="strong = 5"):
        threshold_sweep(W, S, 5, 1)
    with pytest.raises(DataValidationError, match="win_prob"):
        threshold_sweep(W[:3], S)
    with pytest.raises(ValueError, match="equal length"):
        apgr([0.0, 1.0], [0.5], 0.2, 0.6)


def test_pair_without_costs_never_takes_the_strong_llm_twice():
    """Two LLMs tie for the best train mean among more than 16 (numpy's unstable sort): the weak
    LLM is the best of the *other* LLMs, so the pair always has two different members, and an
    evaluation over that pool runs (it raised StopIteration when both roles fell on one LLM)."""
    from recsys_router.data import RoutingData
    from recsys_router.evaluation.protocols.routellm import routellm_pair

    rng = np.random.default_rng(0)
    for _ in range(200):
        m = int(rng.integers(17, 40))
        mean = np.round(rng.random(m), 1)
        top = np.flatnonzero(mean == mean.max())
        if len(top) < 2:
            mean[(top[0] + 1 + int(rng.integers(m - 1))) % m] = mean.max()  # a tie for the best
            top = np.flatnonzero(mean == mean.max())
        names = [f"l{j}" for j in range(m)]
        d = RoutingData(["q1", "q2"], names, np.vstack([mean, mean]))
        strong, weak = routellm_pair(d, names, None, [], "x")
        assert strong != weak
        assert strong == names[top[0]]  # the first of the tied best means
        assert mean[names.index(weak)] == mean.max()  # another LLM tied for the best


def _pair_of(scores, costs):
    from recsys_router.data import RoutingData
    from recsys_router.evaluation.protocols.routellm import routellm_pair

    names = ["big", "m1", "m2"]
    d = RoutingData(["q1", "q2"], names, scores, costs)
    notes = []
    return routellm_pair(d, names, None, notes, "x"), notes


def test_pair_when_only_the_strong_llm_has_a_train_cost_is_the_second_best_mean():
    """Review CAL r2: with a cost for "big" only, the masked costs were all inf and argmin
    took column 0, the strong LLM itself: the pair (big, big), with a note calling "big" the
    cheapest other LLM. Train means by hand: big 0.95, m1 0.45, m2 0.25; no other LLM has a
    cost, so the weak LLM is the best of the others, m1, and the note says so."""
    s = np.array([[1.0, 0.5, 0.2], [0.9, 0.4, 0.3]])
    c = np.array([[3.0, np.nan, np.nan], [3.0, np.nan, np.nan]])
    pair, notes = _pair_of(s, c)
    assert pair == ("big", "m1")
    assert notes == ["routellm x: the pool has 3 LLMs; evaluated the pair strong=big (best train "
                     "mean) vs weak=m1 (second-best train mean: no other LLM has a known train "
                     "cost)"]
    # costs known for the others: the cheaper of m1 (mean 5) and m2 (mean 2) is the weak one
    pair, notes = _pair_of(s, np.array([[3.0, 5.0, 2.0], [3.0, 5.0, 2.0]]))
    assert pair == ("big", "m2") and "weak=m2 (cheapest other LLM by mean train cost)" in notes[0]


def test_pair_of_a_pool_without_usable_train_scores_is_skipped_with_a_note():
    """Review CAL r2: a pool with no observed train score raised numpy's bare "All-NaN slice
    encountered"; it is now skipped with a note naming the pool and the data. So is a pool
    where only the strong LLM has a train score and no LLM has a cost (the weak one was
    column 0, the strong one itself)."""
    pair, notes = _pair_of(np.full((2, 3), np.nan), np.ones((2, 3)))
    assert pair is None
    assert notes == ["routellm x: no LLM of the pool ['big', 'm1', 'm2'] has an observed score "
                     "in the training data 'data', so there is no strong LLM; skipped"]
    s = np.array([[1.0, np.nan, np.nan], [0.5, np.nan, np.nan]])
    pair, notes = _pair_of(s, None)
    assert pair is None and len(notes) == 1
    assert notes[0].startswith("routellm x: no LLM of the pool other than the strong one (big) "
                               "has a known train cost or an observed train score")


def test_evaluate_with_costs_for_the_best_llm_only_pairs_two_llms():
    """End to end (review CAL r2): evaluate --protocol routellm on data where only the best LLM
    has costs failed with "appears in 2 rows" (both roles on one LLM); it now runs on the
    pair (best, second-best train mean)."""
    from recsys_router.datasets.synthetic import make_synthetic
    from recsys_router.evaluation.runner import EvalConfig, evaluate

    data = make_synthetic(80, 3, seed=3)
    mean = np.nanmean(data.scores, axis=0)
    best = int(np.argmax(mean))
    costs = np.full(data.shape, np.nan)
    costs[:, best] = data.costs[:, best]
    data = type(data)(data.queries, data.llms, data.scores, costs, name="only-best-costs")
    res = evaluate(data, EvalConfig(["best-single"], protocols=["routellm"], encoder="hashing",
                                    fallback=False, seed=0), progress=False)
    note = [n for n in res.notes if "evaluated the pair" in n]
    assert len(note) == 1 and f"strong={data.llm_names[best]} " in note[0]
    assert "second-best train mean: no other LLM has a known train cost" in note[0]
    assert len(res.metrics[res.metrics["protocol"] == "routellm"]) > 0


def test_equal_pair_refused_before_fitting():
    from recsys_router.datasets.synthetic import make_synthetic
    from recsys_router.evaluation.runner import EvalConfig, evaluate

    data = make_synthetic(60, 4, seed=0)
    name = data.llm_names[0]
    with pytest.raises(ValueError, match="two different LLM names"):
        evaluate(data, EvalConfig(["best-single"], protocols=["routellm"],
                                  routellm_pair=(name, name)), progress=False)


def _pair_run(test_a, test_b, routers=("best-single", "oracle")):
    """evaluate() on two LLMs with train means a = 1, b = 0 (so a is the strong one) and the
    given test scores."""
    from recsys_router.data import RoutingData
    from recsys_router.evaluation.runner import EvalConfig, evaluate

    n_train, n_test = 40, len(test_a)
    q = pd.DataFrame({"query_id": [f"q{i}" for i in range(n_train + n_test)],
                      "text": [f"question {i}" for i in range(n_train + n_test)],
                      "split": ["train"] * n_train + ["test"] * n_test})
    s = np.vstack([np.column_stack([np.ones(n_train), np.zeros(n_train)]),
                   np.column_stack([test_a, test_b])])
    data = RoutingData(q, ["a", "b"], s)
    return evaluate(data, EvalConfig(list(routers), protocols=["routellm"], split_column="split",
                                     encoder="hashing", fallback=False), progress=False)


def test_a_pair_inverted_on_the_test_queries_leaves_apgr_and_cpt_out():
    """The pair comes from training means: "a" (train mean 1) over "b" (0). On the test
    queries "a" scores 0.2 and "b" 0.8, so APGR would flip sign and every router would reach
    the CPT targets with "b" alone: both are left out (APGR NaN, no CPT rows), the curve and
    the LLMs' mu_o kept."""
    test_a = np.array([1.0, 1.0] + [0.0] * 8)        # 0.2 on the test queries
    test_b = np.array([0.0, 0.0] + [1.0] * 8)        # 0.8
    res = _pair_run(test_a, test_b)
    m = res.metrics[res.metrics["protocol"] == "routellm"]
    assert not m["metric"].isin(["cpt50", "cpt80"]).any()
    apgr_rows = m[m["metric"] == "apgr"].set_index("router")["value"]
    assert sorted(apgr_rows.index) == ["best-single", "oracle"] and apgr_rows.isna().all()
    mu = m[m["metric"] == "mu_o"].set_index("router")["value"]
    assert mu["LLM:a"] == pytest.approx(0.2) and mu["LLM:b"] == pytest.approx(0.8)
    assert len(res.curves[res.curves["protocol"] == "routellm"]) > 0


@pytest.mark.parametrize("test_a, test_b, means", [
    ([1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0], "0.2500 vs 0.7500"),   # inverted
    ([1.0, 1.0, 0.0, 0.0], [0.0, 1.0, 1.0, 0.0], "0.5000 vs 0.5000"),   # equal
])
def test_an_undefined_pair_shows_dashes_and_says_why(tmp_path, test_a, test_b, means):
    """The report had empty, malformed RouteLLM and leaderboard tables (``|  |``) and no note
    when the strong LLM did not beat the weak one on the test queries; each router now has a
    row of ``-`` cells, and a note gives both test means (worked out by hand above)."""
    from recsys_router.evaluation import write_results

    res = _pair_run(np.array(test_a), np.array(test_b), routers=("best-single", "random"))
    note = ("routellm pool all/all fold 0: strong LLM a does not beat weak LLM b on the test "
            f"queries (mean score {means}): APGR and CPT are undefined, shown as -")
    assert note in res.notes
    _, lb = write_results(res, tmp_path / "out", plots=False)
    assert list(lb["router"]) == ["best-single", "random"] and list(lb["APGR"].isna()) == [True] * 2
    report = (tmp_path / "out" / "report.md").read_text()
    section = report[report.index("## RouteLLM"):]
    for router in ("best-single", "random"):
        assert f"| {router} | - | - | - |" in section
    assert f"- {note}" in report and "\n|  |\n" not in report  # no empty table


def test_cpt_and_apgr_refuse_a_missing_curve_point():
    """Review M-1: cpt([0, 1], [nan, 0.5], 0.2, 0.6) returned 1.0, a crossing interpolated
    from a NaN point (min(1.0, nan) is 1.0); a missing point is now named, not interpolated."""
    for fn in (cpt, apgr):
        with pytest.raises(DataValidationError, match=r"qualities\[0\] is nan"):
            fn([0.0, 1.0], [np.nan, 0.5], 0.2, 0.6)
        with pytest.raises(DataValidationError, match=r"strong_frac\[1\] is nan"):
            fn([0.0, np.nan], [0.2, 0.5], 0.2, 0.6)
        with pytest.raises(DataValidationError, match="weak_quality is nan"):
            fn([0.0, 1.0], [0.2, 0.5], np.nan, 0.6)
    with pytest.raises(DataValidationError, match="pgr is inf"):
        cpt([0.0, 1.0], [0.2, 0.5], 0.2, 0.6, np.inf)
    # the finite curve still crosses where the line does: 0.2 + (0.4 - 0.2) / (0.6 - 0.2) = 0.5
    assert cpt([0.0, 1.0], [0.2, 0.6], 0.2, 0.6) == pytest.approx(0.5)
