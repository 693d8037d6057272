"""Fixes from the session-17 review of the classic baselines: LinearR's logistic form
(RouterEval's BCE-trained linear router), RouterEval's MLPR / MLC selection distributions,
kNN's k against the training rows, SVM's max_iter and convergence, and seed validation."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from recsys_router import export
from recsys_router.data import RoutingData
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.errors import ArgumentValueError, DataValidationError
from recsys_router.hyperparams import MAX_SEED, check_seed
from recsys_router.models.baselines import (CascadeRouter, ClusterRouter, KNNRouter, LinearRRouter,
                                            MLCRouter, MLPRRouter, PRKnnRouter, RandomRouter,
                                            ROracleRouter, SVMRouter, ZeroRouter)


class VecEncoder:
    """Test encoder: fixed vectors looked up by query id."""

    needs_fit = False
    needs_text = False
    identity = "vec"

    def __init__(self, ids, x):
        self.vectors = {q: np.asarray(v, dtype=np.float64) for q, v in zip(ids, x)}
        self.dim = x.shape[1]

    def encode(self, texts, query_ids=None):
        return np.stack([self.vectors[q] for q in query_ids])


def _tiny(n=40, d=3, seed=0):
    rng = np.random.default_rng(seed)
    ids = [f"q{i}" for i in range(n)]
    x = rng.normal(size=(n, d))
    return ids, x, rng


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


# ----------------------------------------------------------------------------- r1: LinearR


def test_linearr_logistic_matches_sklearn_per_llm():
    ids, x, rng = _tiny()
    w_true = np.array([[2.0, -1.0, 0.5], [-1.5, 0.0, 1.0], [0.3, 0.3, 0.3]])
    y = (rng.random((40, 3)) < _sigmoid(x @ w_true.T)).astype(float)
    y[::5, 1] = np.nan                       # LLM b partly observed
    y[:, 2] = np.round(_sigmoid(x @ w_true[2]), 2)  # LLM c: soft scores in [0, 1]
    alpha = 0.7
    r = LinearRRouter(alpha=alpha, loss="logistic", encoder=VecEncoder(ids, x))
    r.fit(RoutingData(ids, ["a", "b", "c"], y))
    for j in range(3):
        ok = ~np.isnan(y[:, j])
        # a soft target t is the pair of rows (label 1, weight t) and (label 0, weight 1 - t)
        xx = np.vstack([x[ok], x[ok]])
        lab = np.r_[np.ones(ok.sum()), np.zeros(ok.sum())]
        wt = np.r_[y[ok, j], 1.0 - y[ok, j]]
        ref = LogisticRegression(C=1.0 / alpha, tol=1e-12, max_iter=10_000).fit(xx, lab, sample_weight=wt)
        np.testing.assert_allclose(r.coef_[j], ref.coef_[0], atol=1e-5)
        np.testing.assert_allclose(r.intercept_[j], ref.intercept_[0], atol=1e-5)
    np.testing.assert_allclose(r.predict_scores(RoutingData(ids, ["a", "b", "c"], y)),
                               _sigmoid(x @ r.coef_.T + r.intercept_), rtol=1e-12)


def test_linearr_logistic_matches_plain_gradient_descent():
    # a second, independent reference: full-batch gradient descent to convergence
    ids, x, rng = _tiny(n=12, d=2, seed=3)
    y = (rng.random(12) < _sigmoid(x @ [1.0, -2.0])).astype(float)
    y[:2] = [0.0, 1.0]
    alpha = 2.0
    w, b = np.zeros(2), 0.0
    for _ in range(200_000):
        p = _sigmoid(x @ w + b)
        w, b = w - 0.02 * (x.T @ (p - y) + alpha * w), b - 0.02 * (p - y).sum()
    r = LinearRRouter(alpha=alpha, loss="logistic", encoder=VecEncoder(ids, x))
    r.fit(RoutingData(ids, ["a"], y[:, None]))
    np.testing.assert_allclose(r.coef_[0], w, atol=1e-6)
    np.testing.assert_allclose(r.intercept_[0], b, atol=1e-6)


def test_linearr_logistic_edge_columns_and_bad_input():
    ids, x, _ = _tiny(n=6, d=2)
    y = np.array([[1, 0, np.nan, 0], [1, 1, np.nan, 0], [1, 0, np.nan, 0],
                  [1, 1, 1, 0], [1, 0, np.nan, 0], [1, 1, np.nan, 0]], dtype=float)
    d = RoutingData(ids, ["one", "mix", "single", "zero"], y)
    r = LinearRRouter(loss="logistic", encoder=VecEncoder(ids, x)).fit(d)
    s = r.predict_scores(d)
    # all-1 / single-observation / all-0 LLMs: no weights, their mean as the score
    np.testing.assert_array_equal(r.coef_[[0, 2, 3]], 0.0)
    np.testing.assert_allclose(s[:, 0], 1.0, atol=1e-8)
    np.testing.assert_allclose(s[:, 2], 1.0, atol=1e-8)
    np.testing.assert_allclose(s[:, 3], 0.0, atol=1e-8)
    assert ((s[:, 1] > 0) & (s[:, 1] < 1)).all()
    with pytest.raises(DataValidationError, match=r"scores in \[0, 1\].*\[0, 2\]"):
        LinearRRouter(loss="logistic", encoder=VecEncoder(ids, x)).fit(
            RoutingData(ids, ["a"], np.array([[0.0], [2.0]] * 3)))
    with pytest.raises(ArgumentValueError, match="alpha must be a finite number > 0, got 0"):
        LinearRRouter(alpha=0, loss="logistic", encoder=VecEncoder(ids, x)).fit(d)
    with pytest.raises(ValueError, match="loss must be one of"):
        LinearRRouter(loss="bce", encoder=VecEncoder(ids, x)).fit(d)


def test_linearr_default_is_still_squared_ridge():
    assert LinearRRouter().loss == "squared"
    ids, x, _ = _tiny(n=10, d=2)
    y = (x @ [0.5, -0.25] + 0.1)[:, None]
    r = LinearRRouter(alpha=1e-10, encoder=VecEncoder(ids, x)).fit(RoutingData(ids, ["a"], y))
    np.testing.assert_allclose(r.predict_scores(RoutingData(ids, ["a"], y)), y, atol=1e-8)


def test_linearr_logistic_export_round_trip_and_set_params_after_fit(tmp_path):
    split = make_synthetic(120, 3, 2, seed=1).split((0.75, 0.25), seed=0)
    r = LinearRRouter(loss="logistic").fit(split["train"])
    before = r.predict_scores(split["test"])
    assert ((before > 0) & (before < 1)).all()
    export.export_router(r, tmp_path / "art", train_data=split["train"])
    back = export.load_router(tmp_path / "art").router
    assert back.get_params()["loss"] == "logistic"
    np.testing.assert_allclose(back.predict_scores(split["test"]), before)
    r.set_params(loss="squared")  # the fitted link stays until the next fit
    np.testing.assert_allclose(r.predict_scores(split["test"]), before)


# ----------------------------------------------------------------------------- r2: MLPR / MLC


def _net_logits(model, x):
    """The MLP's outputs by hand (numpy), from its Linear layers' weights."""
    import torch
    lin = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    h = x
    for i, layer in enumerate(lin):
        h = h @ layer.weight.detach().numpy().T.astype(np.float64) + layer.bias.detach().numpy()
        if i < len(lin) - 1:
            h = np.maximum(h, 0.0)
    return h


def test_mlpr_selection_probs_are_softmax_of_logits():
    d = make_synthetic(30, 3, 2, seed=0)
    r = MLPRRouter(hidden_size=4, epochs=2, batch_size=8).fit(d)
    z = _net_logits(r.model_, r._embed(d))
    e = np.exp(z - z.max(axis=1, keepdims=True))
    np.testing.assert_allclose(r.selection_probs(d), e / e.sum(axis=1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(r.predict_scores(d), _sigmoid(z), rtol=1e-5)


def test_mlc_selection_probs_are_routereval_positive_logits():
    import torch
    d = make_synthetic(30, 3, 2, seed=0)
    r = MLCRouter(hidden_size=4, epochs=2).fit(d)
    last = [m for m in r.model_.modules() if isinstance(m, torch.nn.Linear)][-1]
    with torch.no_grad():  # a known mix of positive and negative logits
        last.weight.zero_()
        last.bias.copy_(torch.tensor([1.5, -2.0, 0.5]))
    np.testing.assert_allclose(r.selection_probs(d), np.tile([0.75, 0.0, 0.25], (30, 1)), rtol=1e-6)
    with torch.no_grad():  # every logit <= 0: uniform (RouterEval would divide by zero)
        last.bias.copy_(torch.tensor([-1.0, -3.0, 0.0]))
    np.testing.assert_allclose(r.selection_probs(d), 1 / 3)


# ----------------------------------------------------------------------------- r3: kNN k


def test_knn_refuses_k_above_usable_training_rows():
    ids, x, _ = _tiny(n=5, d=2)
    y = np.array([[1.0, 0.0]] * 4 + [[np.nan, np.nan]])   # 4 usable rows of 5
    d = RoutingData(ids, ["a", "b"], y)
    for cls in (KNNRouter, PRKnnRouter):
        with pytest.raises(ValueError, match=r"k=5 neighbours but only 4 training queries have an "
                                             r"observed score \(5 in"):
            cls(k=5, encoder=VecEncoder(ids, x)).fit(d)
        assert cls(k=4, encoder=VecEncoder(ids, x)).fit(d).k_ == 4
    assert KNNRouter(encoder=VecEncoder(ids, x)).fit(d).k_ <= 4  # k=None chooses within the rows


# ----------------------------------------------------------------------------- r4: SVM


def test_svm_max_iter_validated_and_non_convergence_reported():
    d = make_synthetic(60, 3, 2, seed=0)
    for bad in (0, 2.5, True, -1, "10"):
        with pytest.raises(ArgumentValueError, match="max_iter must be an integer >= 1"):
            SVMRouter(max_iter=bad).fit(d)
    for mode in ("classify", "regress"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            SVMRouter(mode=mode, max_iter=1).fit(d)
        msgs = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
        assert len(msgs) == 1 and f"SVMRouter(mode={mode!r})" in msgs[0] and "max_iter=1 " in msgs[0]


# ----------------------------------------------------------------------------- r5: seeds


def test_check_seed_by_hand():
    assert check_seed(0) == 0 and check_seed(np.int64(7)) == 7 and check_seed(MAX_SEED) == MAX_SEED
    assert check_seed(None, none=True) is None
    for bad in (1.5, "a", True, -1, MAX_SEED + 1, None):
        with pytest.raises(ArgumentValueError, match=r"seed must be an integer in \[0, 4294967295\]"):
            check_seed(bad)


SEEDED = [RandomRouter, ROracleRouter, KNNRouter, PRKnnRouter, ZeroRouter, CascadeRouter,
          ClusterRouter, SVMRouter, MLPRRouter, MLCRouter]


@pytest.mark.parametrize("cls", SEEDED, ids=lambda c: c.__name__)
@pytest.mark.parametrize("bad", [1.5, "a", -1])
def test_baselines_refuse_bad_seed_at_fit(cls, bad):
    d = make_synthetic(40, 3, 2, seed=0)
    with pytest.raises(ArgumentValueError, match=r"seed must be an integer in \[0, 4294967295\], got "
                                                 + repr(bad).replace(".", r"\.")):
        cls(seed=bad).fit(d)


def test_every_registered_router_with_a_seed_refuses_a_bad_one_at_fit():
    from recsys_router.registry import ROUTERS, make_router
    d = make_synthetic(40, 3, 2, seed=0)
    checked = []
    # only the package's own routers: other test modules register toy routers (with an
    # unchecked seed) in the same process, so the set here would depend on test order
    own = sorted(n for n, fac in ROUTERS.items()
                 if isinstance(fac, str) and fac.startswith("recsys_router."))
    for name in own:
        r = make_router(name)
        if "seed" not in r.get_params():
            continue
        with pytest.raises(ArgumentValueError, match=r"seed must be an integer in \[0, 4294967295\], "
                                                     r"got 1\.5"):
            r.set_params(seed=1.5).fit(d)
        checked.append(name)
    assert {"random", "r_o", "knn", "svm", "mf", "cost-aware", "task-residual"} <= set(checked)
