"""The Platt map of ranking-loss logits: against a second implementation, and extreme logits."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.linear_model import LogisticRegression

from recsys_router.models.base.llm_rows import fit_logit_calibration


def test_platt_map_matches_an_unregularised_logistic_regression():
    rng = np.random.default_rng(0)
    z = rng.normal(size=2000) * 3
    y = (rng.random(2000) < 1 / (1 + np.exp(-(0.7 * z + 0.4)))).astype(float)
    a, b = fit_logit_calibration(z, y)
    ref = LogisticRegression(C=1e12, tol=1e-12, max_iter=10_000).fit(z[:, None], y)
    assert np.allclose([a, b], [ref.coef_[0, 0], ref.intercept_[0]], atol=1e-4)


def test_extreme_logits_fit_without_overflow_warnings():
    """Logits of +-800 (a sharp ranking loss) overflow exp(); the fit stays finite and quiet."""
    z = np.array([-800.0, -500.0, -1.0, 0.0, 1.0, 500.0, 800.0])
    y = np.array([0.0, 0.0, 0.2, 0.5, 0.9, 1.0, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a, b = fit_logit_calibration(z, y)
    assert np.isfinite([a, b]).all() and a > 0
