"""DM/DR's ridge reward model keeps the outcomes' own scale: predictions are clipped to the
range of the logged outcomes, not to [0, 1]."""

from __future__ import annotations

import numpy as np
import pytest

from recsys_router.data import RoutingData
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.feedback.logging_sim import simulate_log
from recsys_router.feedback.report import evaluate_on_log
from recsys_router.feedback.reward import ridge_fit, ridge_predict
from recsys_router.registry import make_router


def test_ridge_predictions_clipped_to_the_observed_range():
    x = np.array([[0.0], [1.0], [2.0], [3.0]])
    y = np.array([2.0, 3.0, 4.0, 5.0])            # y = 2 + x exactly
    m = ridge_fit(x, np.zeros(4, int), y, np.ones(4), 1, alpha=1e-9, prior=0.0)
    q = ridge_predict(m, np.array([[1.5], [10.0], [-10.0]]))[:, 0]
    assert q == pytest.approx([3.5, 5.0, 2.0])     # old code: [1.0, 1.0, 0.0]
    # bootstrap weights: the range is the one of the outcomes drawn
    m = ridge_fit(x, np.zeros(4, int), y, np.array([1.0, 2.0, 0.0, 0.0]), 1, alpha=1e-9, prior=0.0)
    assert (m["lo"], m["hi"]) == (2.0, 3.0)


def test_dm_and_dr_follow_an_affine_change_of_score_scale():
    d = make_synthetic(400, 3, seed=0)
    d10 = RoutingData(d.queries, d.llms, 1.0 + 9.0 * d.scores, d.costs, name="x10")
    router = make_router("knn").fit(d.subset(np.arange(200)))
    te, te10 = d.subset(np.arange(200, 400)), d10.subset(np.arange(200, 400))
    probs = np.full((200, 3), 1 / 3)
    log, _ = simulate_log(te, probs, seed=1)
    log10, _ = simulate_log(te10, probs, seed=1)
    assert np.nanmin(log10.scores) == 1.0 and np.nanmax(log10.scores) == 10.0
    t = evaluate_on_log(router, log, n_boot=0, seed=0).set_index(["outcome", "estimator"])
    t10 = evaluate_on_log(router, log10, n_boot=0, seed=0).set_index(["outcome", "estimator"])
    for e in ("dm", "dr", "snips"):  # each is affine-equivariant in the outcome
        assert t10.loc[("score", e), "value"] == pytest.approx(1.0 + 9.0 * t.loc[("score", e), "value"])
    assert t10.loc[("score", "dm"), "value"] > 2.0   # old code: at most 1
