"""models/components/ridge.py and its use by the ALS/BPR fold-in: the leave-one-out shortcut
against refitting without each row, the penalty choice, the leave-one-out calibration, and
bad penalties."""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from sklearn.linear_model import Ridge  # noqa: E402

from recsys_router.data import RoutingData  # noqa: E402
from recsys_router.models.components.ridge import ridge_loo  # noqa: E402
from recsys_router.models.implicit_feedback import per_column_linear  # noqa: E402
from recsys_router.models.implicit_router import ALSRouter, BPRRouter  # noqa: E402


def _refit_loo(x, y, lam):
    """Second implementation: scikit-learn's ridge refitted without each row."""
    out = np.zeros_like(y)
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        out[i] = Ridge(alpha=lam).fit(x[keep], y[keep]).predict(x[i:i + 1])[0]
    return out


def test_loo_predictions_and_choice_match_refitting():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(30, 5))
    y = x @ rng.normal(size=(5, 2)) + rng.normal(0, 1.0, size=(30, 2))
    grid = (0.01, 1.0, 30.0, 1e4)
    coef, lam, loo = ridge_loo(x, y, grid)
    errors = {g: float(np.mean((y - _refit_loo(x, y, g)) ** 2)) for g in grid}
    assert lam == min(errors, key=errors.get)
    np.testing.assert_allclose(loo, _refit_loo(x, y, lam), atol=1e-8)
    sk = Ridge(alpha=lam).fit(x, y)
    np.testing.assert_allclose(coef[:-1], sk.coef_.T, atol=1e-8)
    np.testing.assert_allclose(coef[-1], sk.intercept_, atol=1e-8)


def test_pure_noise_targets_choose_the_largest_penalty():
    rng = np.random.default_rng(1)
    x, y = rng.normal(size=(200, 20)), rng.normal(size=(200, 3))
    _, lam, loo = ridge_loo(x, y, (0.1, 10.0, 1e6))
    assert lam == 1e6
    np.testing.assert_allclose(loo, np.broadcast_to(y.mean(0), y.shape), atol=0.05)


@pytest.mark.parametrize("grid", [(), (0.0,), (-1.0, 1.0), (float("nan"),), (float("inf"),)])
def test_bad_penalties_are_refused(grid):
    with pytest.raises(ValueError, match="ridge penalties must be finite numbers > 0"):
        ridge_loo(np.ones((5, 2)), np.ones((5, 1)), grid)


def test_too_few_rows_are_refused():
    with pytest.raises(ValueError, match="at least 3 rows"):
        ridge_loo(np.ones((2, 2)), np.ones((2, 1)), (1.0,))


@pytest.mark.parametrize("bad", ["big", -1.0, float("nan"), float("inf"), None, [1.0]])
def test_router_refuses_bad_ridge_alpha_before_fitting(bad):
    with pytest.raises(ValueError, match="ridge_alpha must be 'auto' or a finite number >= 0"):
        ALSRouter(ridge_alpha=bad, encoder="hashing")._check_params()


def _noise_text_data(seed: int, n: int = 240):
    """Scores with a strong per-LLM mean and no link to the (random) query texts."""
    rng = np.random.default_rng(seed)
    p = np.array([0.8, 0.5, 0.3, 0.6])
    scores = (rng.random((n, 4)) < p).astype(float)
    words = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"]
    texts = [" ".join(rng.choice(words, 6)) for _ in range(n)]
    q = __import__("pandas").DataFrame({"query_id": [f"q{i}" for i in range(n)], "text": texts})
    return RoutingData(q, ["l0", "l1", "l2", "l3"], scores)


@pytest.mark.parametrize("cls", [ALSRouter, BPRRouter])
def test_auto_fold_in_calibrates_on_leave_one_out_factors(cls):
    train = _noise_text_data(0)
    r = cls(encoder="hashing", factors=4, iterations=10, seed=0).fit(train)
    assert r.ridge_alpha_ in (10.0 ** k for k in range(-2, 8))
    # the calibration is the per-LLM fit on the exact leave-one-out fold-in factors
    emb = np.asarray(r.encoder_.encode(list(train.texts)), dtype=np.float64)
    z = (emb - r.emb_mean_) / r.emb_scale_
    loo = _refit_loo(z, r.query_factors_, r.ridge_alpha_)
    w, c = per_column_linear(loo @ r.llm_factors_.T, train.scores)
    np.testing.assert_allclose(r.calib_[0], w, atol=1e-6)
    np.testing.assert_allclose(r.calib_[1], c, atol=1e-6)
    # texts carry nothing: new queries go (almost always) to the LLM with the best mean
    test = _noise_text_data(1, 200)
    assert np.mean(r.route_indices(test) == 0) >= 0.9


def test_knn_fold_in_calibration_leaves_each_query_out_of_its_neighbours():
    train = _noise_text_data(2, 120)
    r = ALSRouter(encoder="hashing", fold_in="knn", k=1, factors=4, iterations=5).fit(train)
    emb = np.asarray(r.encoder_.encode(list(train.texts)), dtype=np.float64)
    u = emb / np.linalg.norm(emb, axis=1, keepdims=True)
    sims = u @ u.T
    np.fill_diagonal(sims, -np.inf)
    nearest = r.query_factors_[sims.argmax(1)]          # k = 1: the nearest other query
    w, c = per_column_linear(nearest @ r.llm_factors_.T, train.scores)
    np.testing.assert_allclose(r.calib_[0], w, atol=1e-6)
    np.testing.assert_allclose(r.calib_[1], c, atol=1e-6)
