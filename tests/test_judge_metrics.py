"""Hand-worked tests of every RouteJudge metric on a five-record, three-router example.

Attribution per record (eq. 1), LLM costs x=1, y=2, z=3:

    rec  choices (r1, r2, r3)  A  B  label     s(r1) s(r2) s(r3)   task
    1    x  y  x               x  y  A         1     0     1       t1
    2    x  y  z               y  x  A         0     1     -       t1
    3    x  x  z               z  x  tie       .5    .5    .5      t2
    4    y  x  y               x  y  both_bad  0     0     0       t2
    5    z  x  y               x  y  B         -     0     1       t2
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from recsys_router.judge import metrics as M
from recsys_router.judge.rating import bradley_terry, elo_bootstrap, elo_ratings, games
from recsys_router.judge.records import JudgeRecord

COSTS = {"x": 1.0, "y": 2.0, "z": 3.0}


def _r(c1, c2, c3, a, b, label, task):
    return JudgeRecord("q", {"r1": c1, "r2": c2, "r3": c3}, a, b, label, ["x", "y", "z"], task=task,
                       costs=dict(COSTS))


@pytest.fixture
def recs():
    return [_r("x", "y", "x", "x", "y", "A", "t1"), _r("x", "y", "z", "y", "x", "A", "t1"),
            _r("x", "x", "z", "z", "x", "tie", "t2"), _r("y", "x", "y", "x", "y", "both_bad", "t2"),
            _r("z", "x", "y", "x", "y", "B", "t2")]


def test_participation_pref_win(recs):
    assert [M.participation_rate(recs, r) for r in ("r1", "r2", "r3")] == [0.8, 1.0, 0.8]
    assert M.pref_score(recs, "r1") == pytest.approx(1.5 / 4)
    assert M.pref_score(recs, "r2") == pytest.approx(1.5 / 5)
    assert M.pref_score(recs, "r3") == pytest.approx(2.5 / 4)
    assert M.win_rate(recs, "r1") == pytest.approx(1 / 2)
    assert M.win_rate(recs, "r2") == pytest.approx(1 / 3)
    assert M.win_rate(recs, "r3") == pytest.approx(1.0)
    assert math.isnan(M.pref_score(recs, "nobody")) and math.isnan(M.participation_rate(recs, "nobody"))


def test_task_conditioned(recs):
    p = M.task_pref_scores(recs)
    assert p.loc["t1"].tolist() == pytest.approx([0.5, 0.5, 1.0])
    assert p.loc["t2"].tolist() == pytest.approx([0.25, 1 / 6, 0.5])
    w = M.task_win_rates(recs)
    assert w.loc["t1"].tolist() == pytest.approx([0.5, 0.5, 1.0])
    assert math.isnan(w.loc["t2", "r1"]) and w.loc["t2", "r2"] == 0.0 and w.loc["t2", "r3"] == 1.0


def test_h2h(recs):
    assert M.h2h(recs, "r1", "r2") == pytest.approx((1 + 0.5 * 2) / 4)
    assert M.h2h(recs, "r1", "r3") == pytest.approx(0.5)  # three draws
    assert M.h2h(recs, "r2", "r3") == pytest.approx((0 + 0.5 * 2) / 4)
    m = M.h2h_matrix(recs)
    assert m.loc["r3", "r2"] == pytest.approx(0.75) and math.isnan(m.loc["r1", "r1"])


def test_mcnemar(recs):
    out = M.mcnemar(recs, "r3", "r2")
    assert (out["a"], out["b"]) == (2, 0)
    assert out["chi2"] == pytest.approx((abs(2 - 0) - 1) ** 2 / 2)
    # chi-square survival function with 1 dof = erfc(sqrt(x / 2))
    assert out["p_value"] == pytest.approx(math.erfc(math.sqrt(0.5 / 2)))
    assert M.mcnemar(recs, "r1", "r3") == {"a": 0, "b": 0, "chi2": 0.0, "p_value": 1.0}


def test_entropy(recs):
    h, hn = M.vote_entropy(recs, "r1")  # x x x y z
    expect = -(0.6 * math.log2(0.6) + 2 * 0.2 * math.log2(0.2))
    assert h == pytest.approx(expect) and hn == pytest.approx(expect / math.log2(3))
    h2, hn2 = M.vote_entropy(recs, "r2", llms=["x", "y", "z", "w"])  # y y x x x
    assert h2 == pytest.approx(-(0.6 * math.log2(0.6) + 0.4 * math.log2(0.4)))
    assert hn2 == pytest.approx(h2 / 2.0)
    one = [_r("x", "x", "x", "x", "y", "A", "t")]
    assert M.vote_entropy(one, "r1") == (0.0, 0.0)


def test_agreement_kappa(recs):
    assert M.agreement(recs, "r1", "r3") == pytest.approx(0.4)
    pe = 0.6 * 0.2 + 0.2 * 0.4 + 0.2 * 0.4
    assert M.cohen_kappa(recs, "r1", "r3") == pytest.approx((0.4 - pe) / (1 - pe))
    assert M.cohen_kappa(recs, "r1", "r1") == pytest.approx(1.0)


def test_consensus(recs):
    assert [M.consensus_strength(r) for r in recs] == pytest.approx([2 / 3, 1 / 3, 2 / 3, 2 / 3, 1 / 3])
    assert M.mean_consensus(recs) == pytest.approx((2 + 2 / 3) / 5)


def test_costs_and_pareto(recs):
    assert [M.router_costs(recs, r) for r in ("r1", "r2", "r3")] == pytest.approx([1.6, 1.4, 2.2])
    assert M.pareto_frontier([1, 2, 3, 2], [0.5, 0.4, 0.9, 0.5]).tolist() == [True, False, True, False]
    assert M.pareto_frontier([1, np.nan], [0.1, 0.9]).tolist() == [True, False]
    lb = M.leaderboard(recs)
    assert lb["pareto"].tolist() == [True, True, True]
    assert lb["pref_score"].tolist() == pytest.approx([0.375, 0.3, 0.625])


def test_games(recs):
    assert games(recs) == [(0, "r1", "r2", 1.0), (0, "r2", "r3", 0.0), (1, "r1", "r2", 0.0),
                           (2, "r1", "r3", 0.5), (2, "r2", "r3", 0.5), (3, "r1", "r2", 0.5),
                           (3, "r2", "r3", 0.5), (4, "r2", "r3", 0.0)]


def _duel(win_first: bool):
    return JudgeRecord("q", {"a": "x", "b": "y"}, "x", "y", "A" if win_first else "B", ["x", "y"])


def test_elo_hand_worked():
    recs = [_duel(True), _duel(False)]
    e = elo_ratings(recs, k=32, init=1000)
    # game 1: expected 0.5 each -> a 1016, b 984; game 2: b wins with E_b = 1/(1+10^(32/400))
    e_b = 1 / (1 + 10 ** (32 / 400))
    assert e["b"] == pytest.approx(984 + 32 * (1 - e_b))
    assert e["a"] == pytest.approx(1016 - 32 * (1 - e_b))


def test_games_in_sorted_router_order_whatever_the_dict_order():
    # a chose x (wins), b and c chose y; insertion orders c, b, a and a, b, c
    back = JudgeRecord("q", {"c": "y", "b": "y", "a": "x"}, "x", "y", "A", ["x", "y"])
    fwd = JudgeRecord("q", {"a": "x", "b": "y", "c": "y"}, "x", "y", "A", ["x", "y"])
    assert games([back]) == games([fwd]) == [(0, "a", "b", 1.0), (0, "a", "c", 1.0)]
    # by hand, K=4: (a, b): E = 0.5 -> a 1002, b 998; (a, c): E_a = 1/(1+10^(-2/400))
    e_a = 1 / (1 + 10 ** ((1000 - 1002) / 400))
    want = {"a": 1002 + 4 * (1 - e_a), "b": 998.0, "c": 1000 - 4 * (1 - e_a)}
    for rec in (back, fwd):
        e = elo_ratings([rec], k=4, init=1000)
        assert e.to_dict() == pytest.approx(want)


def test_bradley_terry_hand_worked():
    recs = [_duel(True)] * 3 + [_duel(False)]
    bt = bradley_terry(recs, prior=0.0)
    assert bt["a"] - bt["b"] == pytest.approx(400 * math.log10(3), abs=1e-6)
    assert (bt["a"] + bt["b"]) / 2 == pytest.approx(1000)
    # prior = 1 adds one virtual draw: 3.5 vs 1.5 wins
    bt1 = bradley_terry(recs, prior=1.0)
    assert bt1["a"] - bt1["b"] == pytest.approx(400 * math.log10(3.5 / 1.5), abs=1e-6)


def test_elo_bootstrap_and_bt_agree():
    rng = np.random.default_rng(0)
    strength = {"a": 0.8, "b": 0.5, "c": 0.2}  # a > b > c
    recs = []
    for _ in range(150):
        i, j = rng.choice(list(strength), 2, replace=False)
        p = strength[i] / (strength[i] + strength[j])
        recs.append(JudgeRecord("q", {i: "x", j: "y"}, "x", "y", "A" if rng.random() < p else "B", ["x", "y"]))
    boot = elo_bootstrap(recs, ["a", "b", "c"], n_boot=100, seed=1)
    assert (boot["elo_lower"] <= boot["elo_median"]).all() and (boot["elo_median"] <= boot["elo_upper"]).all()
    assert boot["elo_median"].idxmax() == "a" and boot["elo_median"].idxmin() == "c"
    bt = bradley_terry(recs, ["a", "b", "c"])
    assert list(bt.sort_values().index) == list(boot["elo_median"].sort_values().index)
    again = elo_bootstrap(recs, ["a", "b", "c"], n_boot=100, seed=1)
    assert again.equals(boot)
    assert boot["n_games"].sum() == 2 * 150


def test_rating_refuses_a_router_missing_from_routers():
    """Review M-3: elo_ratings / elo_bootstrap / bradley_terry raised a bare KeyError 'b' when
    the records name a router that ``routers`` leaves out."""
    recs = [_duel(True), _duel(False)]
    for fn in (elo_ratings, elo_bootstrap, bradley_terry):
        with pytest.raises(ValueError, match=r"router\(s\) \['b'\] not in routers \['a'\]"):
            fn(recs, ["a"])
        with pytest.raises(ValueError, match=r"\['a'\] more than once"):
            fn(recs, ["a", "b", "a"])
    # a listed router that plays no game is fine: it keeps the initial rating
    e = elo_ratings(recs, ["a", "b", "c"], k=32, init=1000)
    e_b = 1 / (1 + 10 ** (32 / 400))
    assert e.to_dict() == pytest.approx({"a": 1016 - 32 * (1 - e_b), "b": 984 + 32 * (1 - e_b),
                                         "c": 1000.0})


@pytest.mark.parametrize("kw, msg", [({"alpha": 1.8}, "alpha must be"), ({"alpha": 0.0}, "alpha must be"),
                                     ({"alpha": float("nan")}, "alpha must be"),
                                     ({"n_boot": -1}, "n_boot must be"), ({"n_boot": 2.5}, "n_boot must be"),
                                     ({"n_boot": True}, "n_boot must be"),
                                     ({"n_boot": 10_001}, r"n_boot must be an integer in \[0, 10000\]")])
def test_elo_bootstrap_checks_alpha_and_n_boot(kw, msg):
    """Review M-3: alpha=1.8 gave elo_lower > elo_upper without a word, n_boot=-1 failed in
    numpy ("negative dimensions"); the upper limit is sweep_check.MAX_BOOT, as paired_nauc's."""
    with pytest.raises(ValueError, match=msg):
        elo_bootstrap([_duel(True)], n_boot=kw.get("n_boot", 10), alpha=kw.get("alpha", 0.05))


def test_elo_bootstrap_without_resamples_has_no_interval():
    # n_boot = 0 stays allowed (report --n-boot 0): record-order Elo, NaN interval
    boot = elo_bootstrap([_duel(True)], n_boot=0, k=32, init=1000)
    assert boot["elo"].to_dict() == {"a": 1016.0, "b": 984.0}
    assert boot[["elo_median", "elo_lower", "elo_upper"]].isna().all().all()
