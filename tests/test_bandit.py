"""The bandit protocol: simulated logs (propensities against frequencies), the offline run's
metric rows checked against recomputation, and the online loop's regret by hand."""

from __future__ import annotations

import numpy as np
import pytest

from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.feedback.bandit import (bandit_evaluate, epsilon_schedule, logging_probabilities,
                                           online_bandit, parse_logging_policy, simulate_log)


@pytest.fixture(scope="module")
def split():
    d = make_synthetic(360, 4, 3, seed=5)
    return d.split((0.7, 0.0, 0.3), seed=0)


def test_logging_policies_and_frequencies(split):
    tr = split["train"]
    best = int(np.nanargmax(np.nanmean(tr.scores, axis=0)))
    p = logging_probabilities(tr, tr, "epsilon-greedy:0.2")
    assert np.allclose(p[:, best], 0.8 + 0.05) and np.allclose(p.sum(axis=1), 1.0)
    big = make_synthetic(4000, 4, 3, seed=1)
    probs = logging_probabilities(tr, big, "epsilon-greedy:0.4")
    log, a = simulate_log(big, probs, seed=3)
    freq = np.bincount(a, minlength=4) / big.n_queries
    assert np.all(np.abs(freq - probs[0]) < 4 * np.sqrt(probs[0] * (1 - probs[0]) / big.n_queries))
    assert np.allclose(log.queries["propensity"], probs[np.arange(big.n_queries), a])
    assert ((~np.isnan(log.scores)).sum(axis=1) == 1).all()
    for bad in ("greedy", "epsilon-greedy:0", "epsilon-greedy:x", "router:"):
        with pytest.raises(ValueError, match="--logging-policy"):
            parse_logging_policy(bad)


def test_offline_bandit_rows(split):
    tr, te = split["train"], split["test"]
    df = bandit_evaluate(tr, te, {"mf": ("mf", {"max_epochs": 2, "dim": 8})},
                         logging_policy="uniform", losses=("naive", "dr"), n_boot=50, seed=0,
                         dm_router=("mf", {"max_epochs": 2, "dim": 8}))
    t = df.set_index(["router", "loss", "metric"])["value"]
    best = int(np.nanargmax(np.nanmean(tr.scores, axis=0)))
    assert t[("best-single", "full", "mu_o")] == pytest.approx(te.scores[:, best].mean())
    for loss in ("naive", "dr"):
        truth = t[("mf", loss, "mu_o")]
        for e in ("ips", "snips", "dm", "dr"):
            assert t[("mf", loss, f"ope_error_{e}")] == pytest.approx(abs(t[("mf", loss, f"ope_{e}")] - truth))
            assert t[("mf", loss, f"ope_ci_covered_{e}")] in (0.0, 1.0)
        assert 0 <= t[("mf", loss, "ope_ci_covered")] <= 1
        assert 0 < t[("mf", loss, "nauc")] <= 1.5
        # uniform logging over 4 LLMs: a deterministic target keeps about n/4 weight mass
        assert t[("mf", loss, "ope_ess")] == pytest.approx(te.n_queries / 4, rel=0.35)
    assert ("mf", "full", "mu_o") in t.index


def test_offline_bandit_default_reward_model_is_refitted_ridge(split, monkeypatch):
    """Default DM/DR reward model: the ridge on the test log, one fit per bootstrap resample
    plus the point estimate; DM's value is the mean of its prediction at the target's choice."""
    from recsys_router.feedback import bandit as mod
    tr, te = split["train"], split["test"]
    calls = []
    real = mod.ridge_reward

    def counting(*a, **k):
        f = real(*a, **k)
        return lambda w: (calls.append(1), f(w))[1]
    monkeypatch.setattr(mod, "ridge_reward", counting)
    df = bandit_evaluate(tr, te, {"mf": ("mf", {"max_epochs": 1, "dim": 8})},
                         logging_policy="uniform", losses=("naive",), n_boot=20, seed=0)
    assert len(calls) == 1 + 20
    t = df.set_index(["router", "loss", "metric"])["value"]
    for e in ("dm", "dr"):
        assert 0 <= t[("mf", "naive", f"ope_{e}")] <= 1.5
        assert t[("mf", "naive", f"ope_ci_covered_{e}")] in (0.0, 1.0)


def test_online_regret_by_hand(split):
    d = split["train"]
    out = online_bandit(d, ("mf", {"max_epochs": 1, "dim": 8}), loss="ips", rounds=120,
                        retrain_every=60, epsilon=0.2, seed=0)
    assert len(out) == 120
    assert np.allclose(out["regret_policy"], np.cumsum(out["oracle"] - out["score"]))
    assert np.allclose(out["regret_best_fixed"], np.cumsum(out["oracle"] - out["best_fixed"]))
    assert (out["propensity"].iloc[:60] == 0.25).all()  # first block: uniform
    later = out["propensity"].iloc[60:]
    assert set(np.round(later, 6)) <= {round(0.8 + 0.05, 6), 0.05}


def test_online_decaying_epsilon(split):
    """epsilon / sqrt(k) after the k-th retraining: propensities of each block by hand."""
    d = split["train"]
    out = online_bandit(d, ("mf", {"max_epochs": 1, "dim": 8}), loss="naive", rounds=150,
                        retrain_every=50, epsilon=0.4, decay="sqrt", seed=1)
    assert (out["epsilon"].iloc[:50] == 1.0).all() and (out["propensity"].iloc[:50] == 0.25).all()
    for k, sl in ((1, slice(50, 100)), (2, slice(100, 150))):
        e = 0.4 / np.sqrt(k)
        assert np.allclose(out["epsilon"].iloc[sl], e)
        assert set(np.round(out["propensity"].iloc[sl], 9)) <= {round(1 - e + e / 4, 9), round(e / 4, 9)}
    assert epsilon_schedule(4.0 / 4, "sqrt", 1) == 1.0


@pytest.mark.parametrize("eps, decay", [(1.5, "constant"), (-0.1, "sqrt"), (0.1, "exp")])
def test_online_bad_schedule(split, eps, decay):
    with pytest.raises(ValueError, match="epsilon"):
        online_bandit(split["train"], ("mf", {}), rounds=10, retrain_every=5, epsilon=eps, decay=decay)
