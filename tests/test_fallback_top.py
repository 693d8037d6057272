"""The safe fallback's check of the top choice on priced data: a router kept within the noise
for its cost-quality trade-offs still hands its no-budget choice to the better baseline
unless it leads it by one SE (``top_z``), and only that choice changes."""

import math

import numpy as np
import pandas as pd
import pytest

from recsys_router.data import RoutingData
from recsys_router.export import export_router, load_router
from recsys_router.fallback import SafeFallbackRouter, fallback_summary, promote_top
from recsys_router.fallback_scores import TOP_MARGIN
from recsys_router.policies import argmax_policy, budget_policy, wtp_policy
from recsys_router.router import Router


class Fixed(Router):
    """The same predicted row for every query: b (0.9) over a (0.8) over c (0.1)."""

    def __init__(self, row=(0.8, 0.9, 0.1)):
        self.row = row

    def _fit(self, train, val):
        self.n_llms_ = train.n_llms

    def _predict_scores(self, data):
        return np.tile(np.asarray(self.row, dtype=np.float64), (data.n_queries, 1))


def _data(n=200, b_wrong=2, costs=(10.0, 1.0, 0.1)):
    """a is always right (best-single); b is right except on ``b_wrong`` queries; c never."""
    scores = np.zeros((n, 3))
    scores[:, 0] = 1.0
    scores[:, 1] = 1.0
    scores[:b_wrong, 1] = 0.0
    q = pd.DataFrame({"query_id": [f"q{i}" for i in range(n)], "text": [f"t{i}" for i in range(n)]})
    c = None if costs is None else np.tile(np.asarray(costs, dtype=np.float64), (n, 1))
    return RoutingData(q, pd.DataFrame({"name": ["a", "b", "c"]}), scores, c)


def test_promote_top_by_hand():
    pred = np.array([[0.2, 0.9, 0.5], [3.0, -1.0, np.nan], [np.nan, np.nan, np.nan]])
    out = promote_top(pred, np.array([2, 1, 0]))
    # row 0: 0.9 + 1e-6 * max(1, 0.9); row 1: 3 + 1e-6 * 3 (NaN ignored); row 2: 0 + 1e-6
    assert out[0].tolist() == [0.2, 0.9, 0.9 + TOP_MARGIN]
    assert out[1, 1] == 3.0 + TOP_MARGIN * 3.0 and out[1, 0] == 3.0 and np.isnan(out[1, 2])
    assert out[2, 0] == TOP_MARGIN and np.isnan(out[2, 1:]).all()
    assert argmax_policy(out[:2]).tolist() == [2, 1]
    assert np.isnan(pred[2]).all() and pred[0, 2] == 0.5          # the input is not changed
    # a budget below the promoted LLM's cost chooses as the original predictions do
    c = np.array([[1.0, 0.5, 5.0]])
    assert budget_policy(out[:1], c, 1.0).tolist() == budget_policy(pred[:1], c, 1.0).tolist()
    assert budget_policy(out[:1], c, 5.0).tolist() == [2]


def test_kept_within_the_noise_its_top_choice_goes_to_best_single():
    # b's realised score is 1 on 198 of 200 held-out queries, best-single's (a) on all:
    # d = -1 twice, 0 otherwise; mean -0.01, SE = sqrt((2 - 200 * 0.01^2) / 199 / 200)
    d = _data()
    r = SafeFallbackRouter(Fixed(), inner_folds=5, seed=0).fit(d)
    fb = r.fallback_
    se = math.sqrt((2 - 200 * 0.01 ** 2) / 199 / 200)
    o, t = fb["overall"], fb["top_check"]
    assert o["diff"] == pytest.approx(-0.01) and o["se"] == pytest.approx(se)
    # the costs rule (1.645 SE against the router): -0.01 > -1.645 * 0.00705 -> kept
    assert fb["default"] == "router" and fb["verdict_z"] == 1.645
    # the top choice must lead by one SE: it does not -> best-single
    assert (fb["top"], fb["top_z"], t["baseline"]) == ("best-single", -1.0, "best-single")
    assert t["diff"] == pytest.approx(-0.01) and t["n"] == 200
    assert "the router does not lead best-single by 1 SE" in t["why"]
    pred, own = r.predict_scores(d), r.router_.predict_scores(d)
    assert (argmax_policy(pred) == 0).all() and (argmax_policy(own) == 1).all()
    assert np.array_equal(pred[:, 1:], own[:, 1:])                 # only a's prediction moved
    assert np.allclose(pred[:, 0], 0.9 + TOP_MARGIN)
    # under a budget below a's cost, and at a low willingness to pay, the router's choice
    assert (budget_policy(pred, d.costs, 5.0) == 1).all()
    assert (wtp_policy(pred, d.costs, 1.0) == wtp_policy(own, d.costs, 1.0)).all()
    assert r.selection_probs(d) is None
    assert "top choice on the router's queries: best-single's LLM, raised above the " \
           "router's predictions (router - best-single = -0.0100" in fallback_summary(fb)


def test_no_costs_no_separate_check_and_top_z_none_turns_it_off():
    plain = SafeFallbackRouter(Fixed(), inner_folds=5, seed=0).fit(_data(costs=None))
    assert "top" not in plain.fallback_ and plain.fallback_["default"] == "best-single"
    off = SafeFallbackRouter(Fixed(), inner_folds=5, seed=0, top_z=None).fit(_data())
    assert "top" not in off.fallback_ and off.fallback_["default"] == "router"
    d = _data()
    assert np.array_equal(off.predict_scores(d), off.router_.predict_scores(d))
    assert "top choice" not in fallback_summary(off.fallback_)
    # an explicit top_z applies without costs too; 0 here: -0.01 < 0 on the mean -> back
    z0 = SafeFallbackRouter(Fixed(), inner_folds=5, seed=0, verdict_z=1.645,
                            top_z=0).fit(_data(costs=None))
    assert (z0.fallback_["default"], z0.fallback_["top"]) == ("router", "best-single")
    # a looser top_z keeps the top choice: -0.01 > -2 SE
    loose = SafeFallbackRouter(Fixed(), inner_folds=5, seed=0, top_z=2.0).fit(d)
    assert loose.fallback_["top"] == "router"
    assert np.array_equal(loose.predict_scores(d), loose.router_.predict_scores(d))


def test_a_router_that_leads_keeps_its_top_choice():
    # b right everywhere, a wrong on 60 of 200: best-single is b itself; a router preferring
    # b ties it exactly (SE 0: kept); one preferring a loses beyond the noise and falls back
    d = _data(b_wrong=0)
    d.scores[:60, 0] = 0.0
    tie = SafeFallbackRouter(Fixed(), inner_folds=5, seed=0).fit(d)
    assert tie.fallback_["top"] == "router" and tie.fallback_["top_check"]["se"] == 0.0
    # (by mu_o: by nAUC its curve equals best-single's, the same cheap-to-dear front)
    worse = SafeFallbackRouter(Fixed((0.9, 0.8, 0.1)), inner_folds=5, seed=0,
                               verdict_metric="mu_o").fit(d)
    assert worse.fallback_["default"] == "best-single"
    # no router rows left: the check has no queries and is not recorded
    assert "top" not in worse.fallback_


def test_top_z_is_validated_before_any_fit():
    for bad in ("sometimes", float("nan"), float("inf"), True, [1.0]):
        with pytest.raises(ValueError, match="top_z"):
            SafeFallbackRouter(Fixed(), top_z=bad).fit(_data())


def test_registry_router_with_a_promoted_top_exports_and_routes_the_same(tmp_path):
    from recsys_router.registry import make_router
    d = _data()
    r = SafeFallbackRouter(make_router("best-single"), inner_folds=5, seed=0)
    r.fit(d)
    # best-single ties itself (d = 0, SE 0): kept
    assert r.fallback_["top"] == "router"
    r.fallback_["top"] = "best-single"      # force the promoted path into the artifact
    loaded = load_router(export_router(r, tmp_path / "fb", train_data=d)).router
    assert loaded.fallback_["top"] == "best-single"
    assert np.array_equal(loaded.predict_scores(d), r.predict_scores(d))


def test_wrap_router_and_evaluate_pass_the_top_check_switch(tmp_path):
    from recsys_router.cli import main
    from recsys_router.evaluation.wrappers import wrap_router
    from recsys_router.registry import make_router
    assert wrap_router(make_router("knn"), "knn").top_z == "auto"
    assert wrap_router(make_router("knn"), "knn", top_check=False).top_z is None
    d = _data()
    rows = [(q, t, m, d.scores[i, j], (10.0, 1.0, 0.1)[j])
            for i, (q, t) in enumerate(zip(d.queries["query_id"], d.texts))
            for j, m in enumerate(d.llm_names)]
    path = tmp_path / "priced.csv"
    pd.DataFrame(rows, columns=["query_id", "text", "model", "score", "cost"]).to_csv(path,
                                                                                   index=False)
    reports = {}
    for flag in ([], ["--no-top-check"]):
        out = tmp_path / ("off" if flag else "on")
        rc = main(["evaluate", "--data", str(path), "--routers", "best-single,knn",
                   "--encoder", "hashing", "--protocol", "routereval", "--seed", "0",
                   "--out", str(out), *flag])
        assert rc == 0
        reports[bool(flag)] = (out / "report.md").read_text()
    # the data has costs: the check is in the notes by default, absent when turned off
    assert "top choice on the router's queries" in reports[False]
    assert "top choice on the router's queries" not in reports[True]
    assert "safe fallback" in reports[True]


def test_promoted_top_choice_breaks_a_mean_tie_by_the_cheaper_cost():
    # a and b both score 0.8 on average (wrong on different queries) and a costs 10x b: the
    # top check hands the top choice to best-single, whose LLM is then b (the cheaper of the
    # tie, as best-single and routing pick), not a (the lower column)
    n = 200
    scores = np.zeros((n, 3))
    scores[:, 0] = np.arange(n) % 5 != 0
    scores[:, 1] = np.arange(n) % 5 != 1
    q = pd.DataFrame({"query_id": [f"q{i}" for i in range(n)], "text": [f"t{i}" for i in range(n)]})
    data = RoutingData(q, pd.DataFrame({"name": ["a", "b", "c"]}), scores,
                       np.tile([10.0, 1.0, 0.5], (n, 1)))
    r = SafeFallbackRouter(Fixed((0.1, 0.2, 0.9)), inner_folds=1, verdict_z=1e6,
                           top_z=-1e6).fit(data)
    assert r.fallback_["default"] == "router" and r.fallback_["top"] == "best-single"
    assert r.route(data).tolist() == ["b"] * n
