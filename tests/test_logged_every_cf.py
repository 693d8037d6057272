"""Every collaborative-filtering router trains on logged feedback with every loss (issue 13).

The weights each family receives are checked by hand on a tiny log: the graph router's
loss gets ``1 / max(p, clip)`` per logged cell (self-normalised for ``snips``), ALS's
confidence of a positive logged cell is ``1 + alpha * w * s``, BPR stores a positive ``w``
times; hostile logs (propensity 0, > 1, NaN, no column) fail cleanly on each new path.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from recsys_router.data import RoutingData
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.feedback.bandit import simulate_log
from recsys_router.models import graph_module
from recsys_router.models.implicit_feedback import (confidence_matrix, logged_training,
                                                    per_column_linear, stochastic_round)
from recsys_router.models.logged_feedback import feedback_loss_table
from recsys_router.registry import make_router, register_router, unregister_router

torch.set_num_threads(1)
LOSSES = ["naive", "ips", "snips", "dr"]
FAST = {"mf": {"max_epochs": 2, "dim": 8, "encoder_options": {"dim": 32}},
        "two-tower": {"max_epochs": 1, "encoder_options": {"dim": 32}},
        "mirt": {"max_epochs": 1, "encoder_options": {"dim": 32}},
        "nirt": {"max_epochs": 1, "encoder_options": {"dim": 32}},
        "graph": {"max_epochs": 1, "hidden": 8, "batch_size": 64, "encoder_options": {"dim": 32}},
        # a fixed fold-in penalty: on 180 logged queries the leave-one-out choice ("auto")
        # can fold every query to one factor, and these tests look at what the losses learn
        "als": {"factors": 4, "iterations": 3, "encoder_kwargs": {"dim": 32}, "ridge_alpha": 100.0},
        "bpr": {"factors": 4, "iterations": 5, "encoder_kwargs": {"dim": 32}, "ridge_alpha": 100.0}}


@pytest.fixture(scope="module")
def small_log():
    d = make_synthetic(240, 4, 3, seed=5)
    sp = d.split((0.75, 0.0, 0.25), seed=0)
    probs = np.tile([0.1, 0.2, 0.3, 0.4], (sp["train"].n_queries, 1))
    log, _ = simulate_log(sp["train"], probs, seed=0)
    return log, sp["test"]


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("name", sorted(FAST))
def test_every_cf_router_trains_with_every_loss(small_log, name, loss):
    log, test = small_log
    r = make_router("logged", router=name, loss=loss, params=FAST[name], seed=0).fit(log)
    s = r.predict_scores(test)
    assert s.shape == (test.n_queries, 4) and np.isfinite(s).all()
    assert r.route(test).shape == (test.n_queries,)
    assert not hasattr(r.router_, "_feedback")  # the loss setting lives for one fit only


def test_the_losses_change_what_a_router_learns(small_log):
    """ips / dr are not naive under another name: the fitted predictions differ."""
    log, test = small_log
    for name in ("graph", "als", "bpr"):
        preds = {loss: make_router("logged", router=name, loss=loss, params=FAST[name],
                                   seed=0).fit(log).predict_scores(test) for loss in LOSSES}
        for loss in ("ips", "dr"):
            assert not np.allclose(preds[loss], preds["naive"]), (name, loss)


# ---------------------------------------------------------------------- weights by hand
def _tiny_log(prop, outcomes):
    n = len(prop)
    q = pd.DataFrame({"query_id": [f"q{i}" for i in range(n)], "text": [f"t {i}" for i in range(n)],
                      "propensity": list(prop)})
    s = np.full((n, 2), np.nan)
    for i, y in enumerate(outcomes):
        s[i, i % 2] = y
    return RoutingData(q, ["m", "n"], s)


PROP = [0.5, 0.25, 0.04, 1.0]          # w = 1 / max(p, 0.05) = 2, 4, 20, 1
OUTCOMES = [0.9, 0.6, 0.8, 0.7]        # all positive for the implicit rule
W = np.array([2.0, 4.0, 20.0, 1.0])


def test_graph_loss_receives_the_inverse_propensity_weights(monkeypatch):
    seen = []
    real = graph_module.logged_feedback_loss

    def spy(logits, target, mask, w, kind="bce", self_normalise=False):
        seen.append((target.detach().numpy().copy(), mask.numpy().copy(), w.numpy().copy(),
                     self_normalise))
        return real(logits, target, mask, w, kind, self_normalise)

    monkeypatch.setattr(graph_module, "logged_feedback_loss", spy)
    d = _tiny_log(PROP, OUTCOMES)
    params = {"max_epochs": 2, "hidden": 4, "batch_size": 4, "k": 1, "target_fraction": 0.9,
              "encoder_options": {"dim": 8}}
    for loss in ("ips", "snips", "naive"):
        seen.clear()
        make_router("logged", router="graph", loss=loss, params=params, seed=0).fit(d)
        assert seen
        for target, mask, w, sn in seen:
            assert mask.sum(axis=1).tolist() == [1] * len(mask)  # the logged cell only
            # each row is identified by its (distinct) outcome in its logged cell
            rows = [OUTCOMES.index(pytest.approx(float(t[m][0]))) for t, m in zip(target, mask)]
            want = W[rows] if loss != "naive" else np.ones(len(rows))
            assert w.tolist() == pytest.approx(want.tolist())
            assert sn == (loss == "snips")  # snips: the loss divides by sum(w), not by B
    seen.clear()
    make_router("logged", router="graph", loss="dr", params=params, seed=0).fit(d)
    for target, mask, w, _ in seen:  # dr: every cell, weights inside the pseudo-targets
        assert mask.all() and (w == 1).all()


def test_als_confidence_is_scaled_by_the_weights():
    d = _tiny_log(PROP, OUTCOMES)
    x = np.zeros((4, 1))
    alpha = 3.0
    for loss, want in (("naive", np.ones(4)), ("ips", W), ("snips", W * 4 / W.sum())):
        t = logged_training(d, x, loss, 0.05, "als", alpha, 0.0, 1.0)
        m = t["matrix"].toarray()
        cells = m[np.arange(4), np.arange(4) % 2]
        assert ((cells - 1.0) / (alpha * np.array(OUTCOMES))).tolist() == pytest.approx(want.tolist())
        assert t["calib_weight"].tolist() == pytest.approx(want.tolist())
        assert t["matrix"].nnz == 4


def test_bpr_stores_each_positive_w_times():
    d = _tiny_log(PROP, OUTCOMES)
    t = logged_training(d, np.zeros((4, 1)), "ips", 0.05, "bpr", 3.0, 0.0, 1.0)
    assert np.diff(t["matrix"].indptr).tolist() == [2, 4, 20, 1]  # integer weights: exact
    assert t["matrix"].nnz == 27
    # snips: the same weights normalised to mean 1 (n w / sum w), stochastically rounded
    big = _tiny_log([0.5, 0.25] * 2000, [0.9] * 4000)
    t = logged_training(big, np.zeros((4000, 1)), "snips", 0.05, "bpr", 3.0, 0.0, 1.0, seed=1)
    counts = np.diff(t["matrix"].indptr)
    want = np.array([2.0, 4.0]) * 4000 / (3.0 * 4000)            # 2/3 and 4/3
    got = np.array([counts[0::2].mean(), counts[1::2].mean()])
    assert got == pytest.approx(want, abs=0.05)                  # 2,000 draws each: sd < 0.011
    assert set(counts[0::2]) <= {0, 1} and set(counts[1::2]) <= {1, 2}


def test_implicit_dr_uses_clipped_pseudo_targets():
    d = _tiny_log(PROP, [1.0, 0.0, 1.0, 0.0])
    x = np.arange(4.0)[:, None]
    t = logged_training(d, x, "dr", 0.05, "als", 2.0, 0.0, 1.0)
    y = t["calib_target"]
    assert y.shape == (4, 2) and not np.isnan(y).any()
    assert y.min() >= 0.0 and y.max() <= 1.0  # clipped to the score range
    # a query logged with weight 20 and outcome 1 has the top pseudo-target in its cell
    assert y[2, 0] == pytest.approx(1.0)


def test_helpers_by_hand():
    m = confidence_matrix(np.array([[0.5, np.nan], [0.2, 0.8]]), 2.0, np.array([1.0, 2.0]),
                          repeat=np.array([3, 1]))
    assert np.diff(m.indptr).tolist() == [3, 1] and m.data.tolist() == pytest.approx([2.0] * 3 + [4.2])
    assert stochastic_round(np.array([1.0, 0.0, 5.0]), np.random.default_rng(0)).tolist() == [1, 0, 5]
    # weighted calibration: weight 0 rows are ignored
    w, c = per_column_linear(np.array([[0.0], [1.0], [2.0], [3.0]]),
                             np.array([[1.0], [3.0], [5.0], [100.0]]), np.array([1, 1, 1, 0.0]))
    assert (w[0], c[0]) == pytest.approx((2.0, 1.0))


# ---------------------------------------------------------------------- hostile logs
@pytest.mark.parametrize("name", ["graph", "als", "bpr"])
@pytest.mark.parametrize("bad,match", [((0.5, 0.0, 0.5, 1.0), "row 1: propensity 0.0"),
                                       ((0.5, 1.5, 0.5, 1.0), "row 1: propensity 1.5"),
                                       ((0.5, float("nan"), 0.5, 1.0), "row 1: propensity nan")])
def test_bad_propensities_on_the_new_paths(name, bad, match):
    for loss in ("ips", "snips", "dr"):
        r = make_router("logged", router=name, loss=loss, params=FAST[name])
        with pytest.raises(ValueError, match=match):
            r.fit(_tiny_log(bad, OUTCOMES))
        assert not r.is_fitted


@pytest.mark.parametrize("name", ["graph", "als", "bpr"])
def test_missing_propensity_column_on_the_new_paths(name):
    d = _tiny_log(PROP, OUTCOMES)
    d.queries.drop(columns="propensity", inplace=True)
    for loss in ("ips", "snips", "dr"):
        with pytest.raises(ValueError, match="no 'propensity' column"):
            make_router("logged", router=name, loss=loss, params=FAST[name]).fit(d)
    # a full matrix is not a log
    with pytest.raises(ValueError, match="logged feedback reveals exactly one"):
        make_router("logged", router=name, loss="ips", params=FAST[name]).fit(make_synthetic(10, 3))


def test_implicit_logged_training_reads_no_propensity_it_was_not_given():
    d = _tiny_log(PROP, OUTCOMES)
    d.queries.drop(columns="propensity", inplace=True)
    with pytest.raises(ValueError, match="no 'propensity' column"):
        logged_training(d, np.zeros((4, 1)), "ips", 0.05, "als", 1.0, 0.0, 1.0)


# ---------------------------------------------------------------------- which router takes which loss
def test_non_cf_routers_refuse_debiasing_losses_naming_who_accepts_them(small_log):
    log, _ = small_log
    with pytest.raises(ValueError) as e:
        make_router("logged", router="linearr", loss="dr").fit(log)
    msg = str(e.value)
    assert "'linearr' trains only with naive" in msg
    assert "naive, ips, snips, dr: als, bpr, graph, mf, mirt, nirt, two-tower" in msg
    assert "naive only:" in msg and "knn" in msg and "mlpr" in msg


def test_the_loss_table_is_read_from_the_registry():
    from recsys_router.models.baselines.simple import BestSingleRouter

    class Weighted(BestSingleRouter):
        feedback_losses = ("naive", "ips")

    register_router("toy-weighted", Weighted)
    try:
        assert "naive, ips: toy-weighted" in feedback_loss_table()
    finally:
        unregister_router("toy-weighted")
    assert "toy-weighted" not in feedback_loss_table()
