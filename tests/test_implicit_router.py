"""ALS / BPR routers (``implicit``): matrix construction, fold-ins, calibration, routing quality."""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from sklearn.linear_model import Ridge  # noqa: E402

from recsys_router.models.implicit_router import (ALSRouter, BPRRouter, ImplicitRouter,  # noqa: E402
                                    _per_column_linear, interaction_matrix)
from recsys_router.models.components.ridge import ridge as _ridge  # noqa: E402
from recsys_router.data import RoutingData  # noqa: E402
from recsys_router.datasets.synthetic import make_synthetic  # noqa: E402
from recsys_router.errors import DataValidationError  # noqa: E402
from recsys_router.registry import make_router  # noqa: E402
from router_contract import RouterContract  # noqa: E402


def _held_out(seed: int):
    parts = make_synthetic(300, 5, 4, seed=seed).split((0.7, 0.3), seed=0)
    return parts["train"], parts["test"]


def _mu(test: RoutingData, idx: np.ndarray) -> float:
    return float(test.scores[np.arange(test.n_queries), idx].mean())


def test_interaction_matrix_by_hand():
    # binary: correct cells get 1 + alpha, failures and unobserved are left out
    d = RoutingData(["q1", "q2", "q3"], ["a", "b", "c"],
                    [[1, 0, 1], [np.nan, 1, 0], [0, 0, 0]])
    m = interaction_matrix(d, 4.0).toarray()
    np.testing.assert_allclose(m, [[5, 0, 5], [0, 5, 0], [0, 0, 0]])
    # continuous 2..6 -> s = 0, .5, 1; row means .5 and .25: cells >= mean and > 0 are kept
    d = RoutingData(["q1", "q2"], ["a", "b", "c"], [[2, 4, 6], [4, 2, 2]])
    m = interaction_matrix(d, 2.0).toarray()
    np.testing.assert_allclose(m, [[0, 2.0, 3.0], [2.0, 0, 0]])


def test_ridge_matches_sklearn():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(40, 6)), rng.normal(size=(40, 3))
    coef = _ridge(x, y, 2.5)
    sk = Ridge(alpha=2.5, fit_intercept=True).fit(x, y)
    np.testing.assert_allclose(coef[:-1], sk.coef_.T, atol=1e-8)
    np.testing.assert_allclose(coef[-1], sk.intercept_, atol=1e-8)


def test_per_column_calibration_matches_polyfit():
    rng = np.random.default_rng(1)
    raw = rng.normal(size=(30, 2))
    target = np.c_[2.0 * raw[:, 0] + 1 + rng.normal(0, .1, 30), -raw[:, 1]].astype(np.float32)
    target[:5, 0] = np.nan
    w, c = _per_column_linear(raw, target)
    slope, icpt = np.polyfit(raw[5:, 0], target[5:, 0], 1)
    assert w[0] == pytest.approx(slope, rel=1e-5) and c[0] == pytest.approx(icpt, rel=1e-5)
    # an anti-correlated column is clipped to slope 0: the LLM's mean score
    assert w[1] == 0.0 and c[1] == pytest.approx(target[:, 1].mean(), abs=1e-6)


@pytest.mark.parametrize("cls", [ALSRouter, BPRRouter])
@pytest.mark.parametrize("fold_in", ["ridge", "knn"])
def test_beats_random_router_on_held_out_sim(cls, fold_in):
    wins = []
    for seed in (1, 2):
        train, test = _held_out(seed)
        router = cls(fold_in=fold_in, seed=0).fit(train)
        random_mu = float(np.nanmean(test.scores))  # expected mu_o of a uniform random choice
        wins.append(_mu(test, router.route_indices(test)) - random_mu)
    assert min(wins) > 0.05, wins


def test_knn_fold_in_with_k1_returns_own_train_factor():
    train, _ = _held_out(3)
    r = ALSRouter(fold_in="knn", k=1, factors=4, iterations=5).fit(train)
    np.testing.assert_allclose(r.query_factors(train), r.query_factors_, atol=1e-10)
    # prediction = folded factor . LLM factor, then the per-LLM linear calibration
    w, c = r.calib_
    np.testing.assert_allclose(r.predict_scores(train),
                               (r.query_factors_ @ r.llm_factors_.T) * w + c, atol=1e-8)


def test_knn_fold_in_is_mean_of_neighbour_factors():
    train, test = _held_out(4)
    r = ALSRouter(fold_in="knn", k=3, factors=4, iterations=5, calibrate=False).fit(train)
    from recsys_router.models.implicit_router import encode_queries
    e_tr, e_te = encode_queries(r.encoder_, train), encode_queries(r.encoder_, test)
    cos = (e_te / np.linalg.norm(e_te, axis=1, keepdims=True)) @ \
        (e_tr / np.linalg.norm(e_tr, axis=1, keepdims=True)).T
    i = 0
    nn = np.argsort(-cos[i])[:3]
    expect = r.query_factors_[nn].mean(axis=0) @ r.llm_factors_.T
    np.testing.assert_allclose(r.predict_scores(test)[i], expect, atol=1e-8)


def test_seeded_and_reproducible():
    train, test = _held_out(5)
    a = BPRRouter(seed=3, iterations=20).fit(train).predict_scores(test)
    b = BPRRouter(seed=3, iterations=20).fit(train).predict_scores(test)
    np.testing.assert_array_equal(a, b)


def test_params_and_validation():
    r = ALSRouter(factors=3)
    assert r.get_params()["factors"] == 3 and "model" not in r.get_params()
    assert ImplicitRouter(model="bpr").get_params()["model"] == "bpr"
    train, _ = _held_out(6)
    with pytest.raises(ValueError, match="fold_in"):
        ALSRouter(fold_in="nearest").fit(train)
    with pytest.raises(ValueError, match="model must be"):
        ImplicitRouter(model="svd").fit(train)
    no_text = RoutingData(["q1", "q2"], ["a", "b"], [[1, 0], [0, 1]])
    with pytest.raises(DataValidationError, match="no query text"):
        ALSRouter().fit(no_text)


def test_gpu_flag_warns_and_falls_back_without_cuda():
    from recsys_router.models.implicit_router import gpu_available
    if gpu_available():
        pytest.skip("a CUDA build of implicit is present")
    train, test = _held_out(7)
    with pytest.warns(RuntimeWarning, match="CPU"):
        r = ALSRouter(use_gpu=True, iterations=3).fit(train)
    assert r.predict_scores(test).shape == (test.n_queries, 5)


class TestALSContract(RouterContract):
    router_factory = staticmethod(lambda: make_router("als"))


class TestBPRKnnContract(RouterContract):
    router_factory = staticmethod(lambda: make_router("bpr", fold_in="knn"))


@pytest.mark.parametrize("name", ["als", "bpr"])
def test_router_config_builds_and_fits(name):
    import yaml
    from pathlib import Path
    cfg = yaml.safe_load((Path(__file__).resolve().parents[1] / "configs" / "routers"
                          / f"{name}.yaml").read_text())
    r = make_router(cfg["router"], **cfg["params"])
    assert type(r) is {"als": ALSRouter, "bpr": BPRRouter}[name]
    assert r.get_params() == {**r.get_params(), **cfg["params"]}
    train, test = _held_out(8)
    assert r.fit(train).predict_scores(test).shape == (test.n_queries, 5)


@pytest.mark.parametrize("cls", [ALSRouter, BPRRouter])
def test_artifact_without_ridge_alpha_loads_with_its_fixed_penalty(cls):
    """An artifact exported before ``ridge_alpha="auto"`` has no ``ridge_alpha_``: it still
    loads, predicts the same and reports the fixed penalty it was fitted with; a hostile
    value in that field is refused."""
    from recsys_router.router_state import router_from_state, router_to_state
    from recsys_router.state import StateError
    train, test = _held_out(3)
    r = cls(factors=4, iterations=4, ridge_alpha=30.0, encoder_kwargs={"dim": 64}).fit(train)
    doc, arrays = router_to_state(r)
    old = {**doc, "state": {k: v for k, v in doc["state"].items() if k != "ridge_alpha_"}}
    back = router_from_state(old, arrays, "old.json")
    assert back.ridge_alpha_ == 30.0
    np.testing.assert_array_equal(back.predict_scores(test), r.predict_scores(test))
    auto = {**old, "params": {**old["params"], "ridge_alpha": "auto"}}
    assert router_from_state(auto, arrays, "old.json").ridge_alpha_ is None
    for bad in ("os.system", [1.0], {"a": 1}):
        hostile = {**doc, "state": {**doc["state"], "ridge_alpha_": bad}}
        with pytest.raises(StateError, match="ridge_alpha_"):
            router_from_state(hostile, arrays, "bad.json")
