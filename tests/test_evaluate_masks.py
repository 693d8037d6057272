"""Sparse test matrices: per-query candidate masks through every protocol; the safe fallback
and the score scale in the report notes."""

import numpy as np
import pytest

from recsys_router.data import RoutingData
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.evaluation import EvalConfig, evaluate
from recsys_router.candidate_masks import mask_predictions
from recsys_router.policies import argmax_policy, budget_policy, wtp_policy


def _sparse(seed=0, n=160):
    d = make_synthetic(n, 5, 3, seed=seed)
    s, c = d.scores.copy(), d.costs.copy()
    rng = np.random.default_rng(seed)
    hole = rng.random(s.shape) < 0.2
    hole[:, 0] &= np.arange(n) % 2 == 0        # keep some rows complete for LLM 0
    hole[np.arange(n), rng.integers(0, 5, n)] = False     # every query keeps one LLM
    s[hole], c[hole] = np.nan, np.nan
    return RoutingData(d.queries, d.llms, s, c, name="sparse", meta=d.meta)


def test_reduced_pools_are_kept_and_routed_among_observed_llms():
    d = _sparse()
    cfg = EvalConfig(["oracle", "best-single", "random", "knn"], protocols=["all"],
                     split=(0.75, 0.25), seed=0, fallback=False)
    res = evaluate(d, cfg, progress=False)
    dec = res.decisions
    routers = dec[~dec["router"].astype(str).str.startswith("LLM:")]
    assert np.isfinite(routers["score"]).all()     # nobody chose an unobserved LLM
    test_ids = set(dec["query_id"].astype(str))
    test = d.subset(np.flatnonzero(np.isin(d.query_ids, sorted(test_ids))))
    reduced = int((~test.observed.all(axis=1)).sum())
    assert reduced > 0
    assert any(f"{reduced} of {test.n_queries} test queries had reduced candidate pools" in n
               for n in res.notes)
    m = res.metrics
    got = m.query("protocol == 'routereval' and router == 'oracle' and metric == 'mu_o'")
    # oracle by hand: the best observed score per test query
    assert got["value"].item() == pytest.approx(float(np.nanmax(test.scores, axis=1).mean()))
    # routellm scores only the queries where both of its pair are observed
    rl = dec[(dec["protocol"] == "routellm") & (dec["router"] == "oracle")]
    assert 0 < rl["query_id"].nunique() < test.n_queries


def test_drop_option_leaves_incomplete_queries_out():
    d = _sparse()
    res = evaluate(d, EvalConfig(["oracle"], protocols=["routereval"], split=(0.75, 0.25),
                                 seed=0, missing="drop"), progress=False)
    ids = res.decisions["query_id"].astype(str).unique()
    sub = d.scores[np.isin(d.query_ids, ids)]
    assert not np.isnan(sub).any()
    assert any("with unobserved scores dropped" in n for n in res.notes)
    with pytest.raises(ValueError, match="missing must be"):
        evaluate(d, EvalConfig(["oracle"], protocols=["routereval"], missing="guess"),
                 progress=False)


def test_masked_predictions_are_never_chosen_by_any_policy():
    rng = np.random.default_rng(3)
    P, C = rng.random((200, 6)), rng.random((200, 6)) * 5
    obs = rng.random((200, 6)) < 0.5
    obs[np.arange(200), rng.integers(0, 6, 200)] = True
    ps, pc = mask_predictions(P, C, obs)
    rows = np.arange(200)
    assert obs[rows, argmax_policy(ps, pc)].all()
    for w in (0.0, 0.1, 1.0, 10.0, 1e6):
        assert obs[rows, wtp_policy(ps, pc, w)].all()
    for b in np.linspace(0.0, 5.0, 11):
        assert obs[rows, budget_policy(ps, pc, b)].all()
    with pytest.raises(ValueError, match="at least one observed"):
        mask_predictions(P[:1], C[:1], np.zeros((1, 6), bool))


def test_fallback_and_score_scale_are_in_the_notes():
    d = make_synthetic(200, 4, 3, seed=1)
    res = evaluate(d, EvalConfig(["best-single", "knn"], protocols=["routereval"],
                                 split=(0.8, 0.2), seed=0), progress=False)
    assert any("knn safe fallback:" in n for n in res.notes)
    assert any("score scale" in n and "0/1 scores" in n for n in res.notes)
    off = evaluate(d, EvalConfig(["knn"], protocols=["routereval"], split=(0.8, 0.2), seed=0,
                                 fallback=False), progress=False)
    assert not any("safe fallback" in n for n in off.notes)


def test_cli_flags_turn_fallback_off_and_drop_incomplete_queries(tmp_path, capsys):
    from recsys_router.cli import main
    args = ["evaluate", "--data", "synthetic", "--data-option", "n_queries=200", "--routers",
            "best-single,knn", "--protocol", "routereval", "--seed", "0", "--no-plots",
            "--no-progress"]
    assert main(args + ["--out", str(tmp_path / "on")]) == 0
    assert "knn safe fallback" in capsys.readouterr().err
    assert main(args + ["--no-fallback", "--missing", "drop", "--out", str(tmp_path / "off")]) == 0
    assert "safe fallback" not in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(args + ["--missing", "guess", "--out", str(tmp_path / "bad")])
    assert exc.value.code == 2
    assert "invalid choice: 'guess'" in capsys.readouterr().err


def test_unknown_predicted_cost_of_an_observed_llm_keeps_the_masked_cost_finite():
    scores = np.array([[0.9, 0.6, 0.5], [0.9, 0.6, 0.5]])
    costs = np.array([[5.0, np.nan, 1.0], [5.0, np.nan, np.nan]])
    observed = np.array([[False, True, True], [False, True, True]])
    s, c = mask_predictions(scores, costs, observed)
    # row 0: one below the lowest observed score (0.5 - 1), a hair above the highest known
    # observed cost (1.0 + 1e-6); row 1 has no known observed cost: the masked one stays unknown
    np.testing.assert_allclose(s, [[-0.5, 0.6, 0.5], [-0.5, 0.6, 0.5]])
    np.testing.assert_allclose(c[0], [1.000001, np.nan, 1.0])
    assert np.isnan(c[1]).all()
    for w in (0.0, 0.5, 100.0):
        assert observed[[0, 1], wtp_policy(s, c, w)].all()
    for budget in (0.5, 1.0, 2.0):
        assert observed[[0, 1], budget_policy(s, c, budget)].all()
