"""Router defects found in review (2026-12-02), each checked against a value worked out here:
a failed refit leaves the router unfitted; Lightning routers keep an LLM's price when only
one of its two prices is known; r_o's selection probabilities on data without costs; an LLM
never observed in training ranks last for the MLP baselines."""

from __future__ import annotations

import numpy as np
import pytest

from recsys_router.data import RoutingData
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.errors import NotFittedError
from recsys_router.registry import make_router


def _no_costs(d: RoutingData) -> RoutingData:
    return RoutingData(d.queries, d.llms, d.scores, None, name=d.name)


def test_a_failed_refit_leaves_an_unfitted_router():
    a = make_synthetic(60, 3, seed=0)
    router = make_router("mlpr", epochs=1, encoder="hashing").fit(a)
    b = make_synthetic(40, 5, seed=1)
    nothing = RoutingData(b.queries, b.llms, np.full(b.scores.shape, np.nan), b.costs)
    with pytest.raises(ValueError, match="no training query has an observed score"):
        router.fit(nothing)
    assert not router.is_fitted
    with pytest.raises(NotFittedError):
        router.route(b)


def test_lightning_router_keeps_a_price_known_on_one_side_only():
    d = make_synthetic(80, 3, seed=0)
    llms = d.llms.copy()
    llms["input_price"] = [1.0, 2.0, np.nan]
    llms["output_price"] = [3.0, np.nan, np.nan]
    d = RoutingData(d.queries, llms, d.scores, d.costs)
    expected = [2.0, 2.0, np.nan]  # mean of the known prices, NaN where none is known
    for router in (make_router("best-single"),
                   make_router("mf", encoder="hashing", seed=0, max_steps=2)):
        router.fit(d)
        np.testing.assert_array_equal(router.llm_prices_, expected)


def test_r_o_selection_probabilities_without_costs():
    d = _no_costs(make_synthetic(30, 4, seed=0))
    p = 0.6
    probs = make_router("r_o", p=p).fit(d).selection_probs(d)
    s = np.where(np.isnan(d.scores), -np.inf, d.scores)
    best = s.argmax(axis=1)  # the oracle's choice: first best true score, no costs to break ties
    expected = np.full(probs.shape, (1 - p) / 4)
    expected[np.arange(30), best] += p
    np.testing.assert_allclose(probs, expected)


@pytest.mark.parametrize("name", ["mlpr", "mlc"])
def test_mlp_baselines_never_route_to_an_llm_never_observed(name):
    d = make_synthetic(200, 4, seed=0)
    scores = d.scores.copy()
    scores[:150, 1] = np.nan  # LLM 1 is never observed in the training rows
    train = RoutingData(d.queries.iloc[:150], d.llms, scores[:150], d.costs[:150])
    test = RoutingData(d.queries.iloc[150:], d.llms, d.scores[150:], d.costs[150:])
    router = make_router(name, epochs=5, encoder="hashing", seed=0).fit(train)
    pred = router.predict_scores(test)
    assert (pred[:, 1] < 1e-12).all()  # sigmoid(-30)
    assert (pred[:, 1] < np.delete(pred, 1, axis=1).min(axis=1)).all()
    assert (router.route(test) != 1).all()
