"""DM/DR bootstrap intervals with the reward model refitted per resample, the ridge reward
model and cross-fitting, each checked against a second, simple implementation."""

import numpy as np
import pytest
from sklearn.linear_model import Ridge

from recsys_router.feedback.logged import ridge_reward_model
from recsys_router.feedback.ope import estimate_all
from recsys_router.feedback.reward import crossfit, ridge_fit, ridge_predict, ridge_refit


def _arm_means(action, y, n_llms):
    """Reward model by hand: each LLM's mean logged outcome (0.5 when never logged)."""
    return np.array([np.mean([y[i] for i in range(len(y)) if action[i] == j])
                     if any(action[i] == j for i in range(len(y))) else 0.5 for j in range(n_llms)])


def _weighted_arm_refit(action, y, n_llms):
    def refit(weights):
        num = np.bincount(action, weights * y, minlength=n_llms)
        den = np.bincount(action, weights, minlength=n_llms)
        m = np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.5)
        return np.tile(m, (len(y), 1))
    return refit


def test_refit_bootstrap_equals_refitting_on_each_resampled_log():
    """The interval of DM and DR from weights = resample counts equals the one from fitting
    the model on each explicitly resampled (copied) log, done by a loop."""
    rng = np.random.default_rng(0)
    n, L, n_boot = 30, 3, 50
    a = rng.integers(0, L, n)
    y = rng.random(n)
    p = np.full(n, 1 / L)
    target = rng.integers(0, L, n)
    pi = np.eye(L)[target]
    got = estimate_all(y, p, pi, a, refit=_weighted_arm_refit(a, y, L), n_boot=n_boot, seed=7)
    idx = np.random.default_rng(7).integers(0, n, size=(n_boot, n))
    dm_b, dr_b = [], []
    for ix in idx:
        ab, yb, tb = a[ix], y[ix], target[ix]
        m = _arm_means(ab, yb, L)
        dm_b.append(np.mean([m[t] for t in tb]))
        dr_b.append(np.mean([m[tb[i]] + (tb[i] == ab[i]) * L * (yb[i] - m[ab[i]])
                             for i in range(n)]))
    for name, boots in (("dm", dm_b), ("dr", dr_b)):
        lo, hi = np.quantile(boots, [0.025, 0.975])
        assert got[name]["lo"] == pytest.approx(lo, abs=1e-12)
        assert got[name]["hi"] == pytest.approx(hi, abs=1e-12)
    m = _arm_means(a, y, L)
    assert got["dm"]["value"] == pytest.approx(np.mean(m[target]))
    assert got["n_refit"] == n_boot


def test_refit_intervals_cover_where_a_fixed_model_does_not():
    """Rewards depend on the LLM only, so the per-LLM-mean model is right and DM is unbiased:
    refitted per resample its interval covers the truth (from the full matrix) in most of 40
    draws; held fixed, its interval only reflects which LLM the target picks and covers less."""
    n, L = 400, 4
    means = np.array([0.3, 0.5, 0.6, 0.45])
    covered_refit = covered_fixed = 0
    for s in range(40):
        rng = np.random.default_rng(100 + s)
        full = (rng.random((n, L)) < means).astype(float)
        target = rng.integers(0, L, n)
        truth = full[np.arange(n), target].mean()
        a = rng.integers(0, L, n)
        y = full[np.arange(n), a]
        pi = np.eye(L)[target]
        refit = _weighted_arm_refit(a, y, L)
        r1 = estimate_all(y, np.full(n, 1 / L), pi, a, refit=refit, n_boot=200, seed=s)
        r0 = estimate_all(y, np.full(n, 1 / L), pi, a, refit(np.ones(n)), n_boot=200, seed=s)
        covered_refit += r1["dm"]["lo"] <= truth <= r1["dm"]["hi"]
        covered_fixed += r0["dm"]["lo"] <= truth <= r0["dm"]["hi"]
        assert r1["dm"]["value"] == r0["dm"]["value"]
    assert covered_refit >= 34
    assert covered_fixed < covered_refit - 10


def test_n_refit_uses_the_first_resamples_only():
    rng = np.random.default_rng(2)
    n, L = 40, 2
    a, y = rng.integers(0, L, n), rng.random(n)
    calls = []
    base = _weighted_arm_refit(a, y, L)

    def counting(w):
        calls.append(w.sum())
        return base(w)
    out = estimate_all(y, np.full(n, 0.5), np.eye(L)[rng.integers(0, L, n)], a, refit=counting,
                       n_boot=100, n_refit=10, seed=0)
    assert len(calls) == 11 and out["n_refit"] == 10  # the point estimate + 10 resamples
    assert all(c == n for c in calls)


@pytest.mark.parametrize("bad, match", [
    (lambda w: np.zeros((3, 2)), "shape"),
    (lambda w: np.full((4, 2), np.nan), "not all finite"),
])
def test_bad_reward_model_output_is_a_clear_error(bad, match):
    with pytest.raises(ValueError, match=match):
        estimate_all([1.0, 0.0, 1.0, 0.0], np.full(4, 0.5), np.eye(2)[[0, 1, 0, 1]], [0, 1, 1, 0],
                     refit=bad, n_boot=5)


@pytest.mark.parametrize("k", [0, 6, -1])
def test_n_refit_out_of_range(k):
    with pytest.raises(ValueError, match="n_refit"):
        estimate_all([1.0, 0.0], [0.5, 0.5], np.eye(2), [0, 1], refit=lambda w: np.zeros((2, 2)),
                     n_boot=5, n_refit=k)


def test_ridge_fit_matches_sklearn_ridge_and_replicated_rows():
    rng = np.random.default_rng(4)
    n, d, L = 60, 3, 2
    x = rng.normal(size=(n, d))
    a = rng.integers(0, L, n)
    y = rng.random(n)
    w = rng.integers(0, 4, n).astype(float)
    model = ridge_fit(x, a, y, w, L, alpha=2.0, prior=0.0)
    xt = rng.normal(size=(5, d))
    q = ridge_predict(model, xt)
    for j in range(L):
        m = (a == j) & (w > 0)
        sk = Ridge(alpha=2.0).fit(x[m], y[m], sample_weight=w[m])
        assert np.allclose(q[:, j], np.clip(sk.predict(xt), 0, 1), atol=1e-9)
    # integer weights = each decision repeated that many times with weight 1
    rep = np.repeat(np.arange(n), w.astype(int))
    again = ridge_predict(ridge_fit(x[rep], a[rep], y[rep], np.ones(len(rep)), L, alpha=2.0,
                                    prior=0.0), xt)
    assert np.allclose(q, again, atol=1e-9)


def test_ridge_shrinks_towards_pooled_mean_and_handles_unlogged_llms():
    x = np.zeros((4, 1))
    a = np.array([0, 0, 0, 1])
    y = np.array([1.0, 1.0, 1.0, 0.0])
    m = ridge_fit(x, a, y, np.ones(4), 3, prior=2.0)
    pooled = 0.75
    strength = 2.0  # prior x mean weight 1
    assert m["mean"][0] == pytest.approx((3 + strength * pooled) / (3 + strength))
    assert m["mean"][1] == pytest.approx((0 + strength * pooled) / (1 + strength))
    assert m["mean"][2] == pytest.approx(pooled)  # never logged
    # all weight of LLM 1 removed: it falls back to the pooled mean of what is left (1.0)
    m0 = ridge_fit(x, a, y, np.array([1.0, 1.0, 1.0, 0.0]), 3, prior=2.0)
    assert m0["mean"][1] == pytest.approx(1.0)
    # the DR loss's model is the same fit, predicted on its own queries
    assert np.allclose(ridge_reward_model(x, a, y, np.ones(4), 3, prior=2.0),
                       ridge_predict(m, x))


def test_crossfit_predicts_each_fold_from_the_other_folds():
    rng = np.random.default_rng(5)
    n, L = 21, 2
    x = rng.normal(size=(n, 2))
    a, y = rng.integers(0, L, n), rng.random(n)
    refit = ridge_refit(x, a, y, L, alpha=1.0, prior=1.0)
    q = crossfit(refit, n, folds=3, seed=9)(np.ones(n))
    fold = np.random.default_rng(9).permutation(n) % 3
    for k in range(3):
        held = fold == k
        sub = ridge_fit(x[~held], a[~held], y[~held], np.ones((~held).sum()), L, alpha=1.0,
                        prior=1.0)
        assert np.allclose(q[held], ridge_predict(sub, x[held]))
    assert crossfit(refit, n, folds=1) is refit
    with pytest.raises(ValueError, match="at least 3 decisions"):
        crossfit(refit, 2, folds=3)
