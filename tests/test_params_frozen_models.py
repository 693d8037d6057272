"""Hyperparameters the collaborative-filtering routers read after ``fit`` are fixed at ``fit``
(and restored from the stored parameters on load): ``set_params`` afterwards changes nothing
until the next ``fit``.

What was read after ``fit`` before: ALS/BPR's ``fold_in`` and ``k`` at every prediction (a
router fitted with the ridge fold-in then folded new queries in by kNN, and the reverse) and
``alpha`` in ``add_llm``; the graph router's ``cost_weight`` (one fitted with
``cost_weight=0``, whose cost head never trained, answered costs from that untrained head
after ``set_params(cost_weight=1)``); every Lightning router's ``batch_size`` (a value ``fit``
refuses broke prediction); and the MLP baselines' export wrote ``hidden_size`` from the
parameter, so an export after ``set_params(hidden_size=...)`` no longer loaded; and every
export stored the parameters as set last, not as fitted, so the loaded router fixed other
values than the exported one (``params_at_fit`` now). The generic
check of every router is ``RouterContract.test_params_fixed_at_fit``
(``tests/router_contract_params.py``); these tests add the next fit, the values and the export.
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch

from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.export import export_router, load_router
from recsys_router.models.components.ridge import unit_rows
from recsys_router.models.implicit_router import encode_queries
from recsys_router.registry import make_router

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def split():
    d = make_synthetic(120, 4, 3, seed=0)
    idx = np.random.default_rng(0).permutation(d.n_queries)
    return d.subset(np.sort(idx[:90])), d.subset(np.sort(idx[90:]))


def _knn_fold_by_hand(router, data, k):
    """The kNN fold-in written out: the mean learned factor of the ``k`` train queries whose
    embeddings are nearest by cosine."""
    emb = encode_queries(router.encoder_, data)
    sims = unit_rows(emb) @ router.train_unit_emb_.T
    nn = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    return router.query_factors_[nn].mean(axis=1)


@pytest.mark.parametrize("name", ["als", "bpr"])
def test_implicit_fold_in_and_k_stay_until_refit(split, name):
    train, test = split
    r = make_router(name, fold_in="knn", k=3, factors=4, iterations=5).fit(train)
    np.testing.assert_allclose(r.query_factors(test), _knn_fold_by_hand(r, test, 3))
    scores = r.predict_scores(test)
    r.set_params(fold_in="ridge", k=1)
    np.testing.assert_array_equal(r.query_factors(test), _knn_fold_by_hand(r, test, 3))
    np.testing.assert_array_equal(r.predict_scores(test), scores)
    r.set_params(fold_in="knn", k=0)          # a value fit refuses changes nothing either
    np.testing.assert_array_equal(r.predict_scores(test), scores)
    with pytest.raises(ValueError, match="k must be >= 1"):
        r.fit(train)
    r.set_params(fold_in="knn", k=1).fit(train)
    np.testing.assert_allclose(r.query_factors(test), _knn_fold_by_hand(r, test, 1))


def test_implicit_add_llm_uses_alpha_fixed_at_fit(split):
    train, test = split
    r = make_router("als", alpha=10.0, factors=4, iterations=5).fit(train)
    probes = {str(t): float(s) for t, s in zip(train.texts[:30], train.scores[:30, 0])}
    costs = {t: 0.5 for t in probes}
    plain = copy.deepcopy(r).add_llm("new", probes, costs)
    moved = copy.deepcopy(r).set_params(alpha=0.0).add_llm("new", probes, costs)
    np.testing.assert_array_equal(moved.llm_factors_, plain.llm_factors_)
    # alpha does change the new LLM's factor (so reading the new value would show): the
    # same router with alpha 0 fixed places it elsewhere
    assert plain.alpha_ == 10.0
    r0 = copy.deepcopy(r)
    r0.alpha_ = 0.0
    assert not np.allclose(r0.add_llm("new", probes, costs).llm_factors_[-1],
                           plain.llm_factors_[-1])


def test_implicit_loaded_router_keeps_its_stored_fold_in(split, tmp_path):
    train, test = split
    r = make_router("bpr", fold_in="knn", k=2, factors=4, iterations=5).fit(train)
    loaded = load_router(export_router(r, tmp_path / "bpr", train_data=train)).router
    assert (loaded.fold_in_, loaded.k_, loaded.alpha_) == ("knn", 2, 10.0)
    np.testing.assert_allclose(loaded.query_factors(test), _knn_fold_by_hand(loaded, test, 2))
    loaded.set_params(fold_in="ridge", k=5)
    np.testing.assert_allclose(loaded.predict_scores(test), r.predict_scores(test))


def test_graph_cost_weight_stays_until_refit(split):
    train, test = split
    r = make_router("graph", cost_weight=0.0, hidden=8, max_epochs=2, batch_size=64,
                    encoder_options={"dim": 32}).fit(train)
    mean_costs = np.tile(train.mean_costs(), (test.n_queries, 1))
    np.testing.assert_allclose(r.predict_costs(test), mean_costs)   # no cost head trained
    r.set_params(cost_weight=1.0)
    np.testing.assert_allclose(r.predict_costs(test), mean_costs)   # the untrained head before
    r.set_params(cost_weight=-1.0)
    with pytest.raises(ValueError, match="cost_weight"):
        r.fit(train)


def test_lightning_batch_size_stays_until_refit(split):
    train, test = split
    r = make_router("mf", dim=4, max_epochs=1, batch_size=32, encoder_options={"dim": 16}).fit(train)
    assert r.batch_size_ == 32 and r.plan_["batch_size"] == 32
    scores = r.predict_scores(test)
    r.set_params(batch_size="64")              # fit refuses it; prediction failed on it
    np.testing.assert_array_equal(r.predict_scores(test), scores)
    with pytest.raises(ValueError, match="batch_size must be an integer"):
        r.fit(train)


@pytest.mark.parametrize("name, sizes", [("mlpr", {"hidden_size": 8, "n_hidden": 2}),
                                         ("mlc", {"hidden_size": 8, "n_hidden": 1}),
                                         ("mlpr", {"hidden_size": 8, "n_hidden": 0})])
def test_mlp_export_reads_the_fitted_network(split, tmp_path, name, sizes):
    train, test = split
    r = make_router(name, epochs=2, **sizes).fit(train)
    r.set_params(hidden_size=5, n_hidden=3)   # the next fit's; the network is still 8 wide
    out = export_router(r, tmp_path / name, train_data=train)
    loaded = load_router(out).router
    np.testing.assert_allclose(loaded.predict_scores(test), r.predict_scores(test),
                               rtol=1e-6, atol=1e-9)
    widths = [m.out_features for m in loaded.model_.modules() if isinstance(m, torch.nn.Linear)]
    assert widths == [8] * sizes["n_hidden"] + [train.n_llms]


def test_export_after_set_params_stores_the_params_of_fit(split, tmp_path):
    """An export stores the parameters the router was fitted with: one made after
    ``set_params(fold_in="knn")`` on a ridge-fitted ALS router loaded as a kNN one (scores
    0.5 apart on this data) before."""
    train, test = split
    r = make_router("als", factors=4, iterations=5).fit(train)
    r.set_params(fold_in="knn", k=1, alpha=0.5)
    assert r.params_at_fit()["fold_in"] == "ridge" and r.get_params()["fold_in"] == "knn"
    out = export_router(r, tmp_path / "als", train_data=train)
    man = json.loads((out / "manifest.json").read_text())
    assert (man["router_params"]["fold_in"], man["router_params"]["k"],
            man["router_params"]["alpha"]) == ("ridge", 10, 10.0)
    loaded = load_router(out).router
    assert (loaded.fold_in_, loaded.k_, loaded.alpha_) == ("ridge", 10, 10.0)
    np.testing.assert_allclose(loaded.predict_scores(test), r.predict_scores(test),
                               rtol=1e-6, atol=1e-9)
    # the next fit takes the parameters set since, and so does its export
    r.fit(train)
    assert r.params_at_fit()["fold_in"] == "knn"
    again = load_router(export_router(r, tmp_path / "als2", train_data=train)).router
    assert (again.fold_in_, again.k_, again.alpha_) == ("knn", 1, 0.5)
