"""Hyperparameters that prediction reads are fixed at fit (``mode_``, ``p_``, ``seed_``,
``metric_``, ``epsilon_``, ``max_cost_``): ``set_params`` after ``fit`` changes nothing until
the next ``fit`` (they were read again at route time: an SVM fitted in one mode crashed in the
other, r_o and random routed with values ``fit`` refuses). Also: cascade's ``max_cost`` is
checked at fit like its other parameters."""

import numpy as np
import pytest

from recsys_router.data import RoutingData
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.models.baselines.cascade import CascadeRouter
from recsys_router.models.baselines.neighbours import KNNRouter
from recsys_router.models.baselines.simple import ROracleRouter, RandomRouter
from recsys_router.models.baselines.svm import SVMRouter
from recsys_router.models.baselines.zero import ZeroRouter


@pytest.fixture(scope="module")
def data():
    return make_synthetic(60, 3, 2, seed=0)


@pytest.mark.parametrize("mode, other", [("classify", "regress"), ("regress", "classify")])
def test_svm_mode_stays_until_refit(data, mode, other):
    r = SVMRouter(mode=mode).fit(data)
    before = r.predict_scores(data)
    r.set_params(mode=other)
    np.testing.assert_array_equal(r.predict_scores(data), before)   # crashed before
    np.testing.assert_array_equal(r.fit(data).predict_scores(data),
                                  SVMRouter(mode=other).fit(data).predict_scores(data))


def test_r_o_p_and_seed_stay_until_refit(data):
    r = ROracleRouter(p=0.5, seed=0).fit(data)
    mask, probs = r.oracle_mask(data), r.selection_probs(data)
    assert 0 < mask.mean() < 1
    r.set_params(p=7, seed=1.5)                 # values fit refuses: ignored until the next fit
    np.testing.assert_array_equal(r.oracle_mask(data), mask)
    np.testing.assert_array_equal(r.selection_probs(data), probs)
    with pytest.raises(ValueError, match="p must be"):
        r.fit(data)
    r.set_params(p=1.0, seed=0).fit(data)
    assert r.oracle_mask(data).all()


def test_random_and_zero_seed_stay_until_refit(data):
    r = RandomRouter(seed=0).fit(data)
    before = r.route(data)
    r.set_params(seed=1.5)
    assert r.route(data).tolist() == before.tolist()
    with pytest.raises(ValueError, match="seed must be"):
        r.fit(data)
    assert r.set_params(seed=5).fit(data).route(data).tolist() == \
        RandomRouter(seed=5).fit(data).route(data).tolist()
    # zero: a 50/50 mix of a and c at budget 2 (b lies under the hull)
    n = 200
    d = RoutingData([f"q{i}" for i in range(n)], list("abc"), np.tile([.5, .55, .9], (n, 1)),
                    np.tile([1., 2., 3.], (n, 1)))
    z = ZeroRouter(seed=0).fit(d)
    mix = z.route_indices(d, budget=2.0)
    assert set(mix.tolist()) == {0, 2}
    z.set_params(seed=3)
    np.testing.assert_array_equal(z.route_indices(d, budget=2.0), mix)
    other = ZeroRouter(seed=3).fit(d).route_indices(d, budget=2.0)
    assert not np.array_equal(other, mix)
    np.testing.assert_array_equal(z.fit(d).route_indices(d, budget=2.0), other)


def test_knn_metric_stays_until_refit(data):
    r = KNNRouter(k=3, metric="cosine").fit(data)
    nb = r.neighbours(data)
    r.set_params(metric="manhattan")           # fit refuses it; route used to fail on it
    np.testing.assert_array_equal(r.neighbours(data), nb)
    with pytest.raises(ValueError, match="metric must be"):
        r.fit(data)
    r.set_params(metric="euclidean").fit(data)
    np.testing.assert_array_equal(r.neighbours(data),
                                  KNNRouter(k=3, metric="euclidean").fit(data).neighbours(data))


def test_cascade_params_stay_until_refit():
    # a costs 1 and is right on even queries; b costs 10, always right
    n = 20
    s = np.column_stack([(np.arange(n) % 2 == 0).astype(float), np.ones(n)])
    d = RoutingData([f"q{i}" for i in range(n)], ["a", "b"], s, np.tile([1., 10.], (n, 1)))
    r = CascadeRouter(threshold=1.0, max_cost=5.0).fit(d)
    ch, paid = r.decide(d)
    assert ch.tolist() == [0] * n and paid.tolist() == [1.0] * n  # b never fits under cap 5
    r.set_params(max_cost=None, epsilon=1.0, seed=2)
    ch2, paid2 = r.decide(d)
    assert ch2.tolist() == ch.tolist() and paid2.tolist() == paid.tolist()
    r.fit(d)  # now uncapped, every verdict flipped: even queries go on to b, odd stop at a
    ch3, paid3 = r.decide(d)
    assert ch3.tolist() == [1, 0] * (n // 2) and paid3.tolist() == [11.0, 1.0] * (n // 2)


@pytest.mark.parametrize("bad", ["5", float("nan"), float("inf"), -1.0, [3], True])
def test_cascade_max_cost_checked_at_fit(bad):
    n = 4
    d = RoutingData([f"q{i}" for i in range(n)], ["a", "b"], np.ones((n, 2)),
                    np.tile([1., 10.], (n, 1)))
    with pytest.raises(ValueError, match="max_cost"):
        CascadeRouter(max_cost=bad).fit(d)
    assert CascadeRouter(max_cost=0).fit(d).is_fitted
    assert CascadeRouter(max_cost=None).fit(d).is_fitted
