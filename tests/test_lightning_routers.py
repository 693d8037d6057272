"""Lightning routers (mf, two-tower): the shared contract, to_router, registry and export."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from recsys_router.datamodules.routing_datamodule import RoutingDataModule
from recsys_router.models.base import LightningRouter, quiet_trainer
from recsys_router.models.mf_module import MFModule, MFRouter
from recsys_router.models.two_tower_module import TwoTowerRouter
from recsys_router.registry import make_router
from router_contract import RouterContract

torch.set_num_threads(1)
FAST = {"encoder_options": {"dim": 64}, "max_epochs": 3, "dim": 16}


class TestMFContract(RouterContract):
    router_factory = staticmethod(lambda: make_router("mf", **FAST))


class TestMFBattlesContract(RouterContract):
    """MF trained on pairwise comparisons (Bradley-Terry / BPR)."""
    router_factory = staticmethod(lambda: make_router("mf", loss="bpr", **FAST))


class TestTwoTowerContract(RouterContract):
    router_factory = staticmethod(lambda: make_router(
        "two-tower", query_hidden=(32,), llm_hidden=(32,), id_dim=8, **FAST))


def test_registry_builds_the_lightning_routers():
    assert isinstance(make_router("mf", dim=8), MFRouter)
    assert isinstance(make_router("two-tower"), TwoTowerRouter)
    with pytest.raises(TypeError, match="no parameter"):
        make_router("mf", n_layers=3)


@pytest.fixture(scope="module")
def trained(sim_small):
    """An MFModule trained by a plain Trainer on a RoutingDataModule."""
    dm = RoutingDataModule.from_splits(sim_small.split((0.7, 0.1, 0.2), seed=0),
                                       encoder_options={"dim": 32}, batch_size=32)
    module = MFModule(dm.n_llms, dm.embed_dim, dim=8)
    trainer = quiet_trainer(2)
    trainer.fit(module, datamodule=dm)
    return module, dm, trainer


def test_to_router_copies_the_callers_network_and_fit_takes_its_own(trained, sim_small,
                                                                     monkeypatch):
    """A module the caller keeps is copied (changing it later leaves the router alone); a
    router's own fit discards its module, so it takes that network without a copy."""
    import copy as copy_module
    module, dm, _ = trained
    router = module.to_router()
    assert router.net_ is not module.net
    test = dm.splits["test"]
    before = router.predict_scores(test)
    saved = copy_module.deepcopy(module.net.state_dict())
    try:
        with torch.no_grad():
            for p in module.net.parameters():
                p.add_(1.0)
        np.testing.assert_array_equal(router.predict_scores(test), before)
    finally:
        module.net.load_state_dict(saved)
    copied = []
    real = copy_module.deepcopy

    def spy(obj, *a, **k):
        if isinstance(obj, torch.nn.Module):
            copied.append(type(obj).__name__)
        return real(obj, *a, **k)
    monkeypatch.setattr(copy_module, "deepcopy", spy)
    fitted = make_router("mf", **{**FAST, "max_epochs": 1}).fit(sim_small)
    assert copied == [] and fitted.is_fitted
    module.to_router()                  # the spy sees the copy where one is made
    monkeypatch.undo()
    assert copied and copied[0] == type(module.net).__name__


def test_val_metrics_are_logged_each_epoch(trained):
    _, _, trainer = trained
    m = trainer.callback_metrics
    for key in ("val/mu_o", "val/v_b", "val/e_p", "val/aiq", "val/loss", "train/loss"):
        assert key in m, key
    assert 0.0 <= float(m["val/mu_o"]) <= 1.0
    assert 0.0 <= float(m["val/e_p"]) <= np.log2(5) + 1e-6


def test_to_router_matches_the_module_without_a_trainer(trained):
    module, dm, trainer = trained
    router = module.to_router()
    assert type(router) is LightningRouter and router.is_fitted
    test = dm.splits["test"]
    x = torch.as_tensor(dm.embeddings("test"))
    module.eval()
    with torch.no_grad():
        expect = torch.sigmoid(module(x)).numpy()
    np.testing.assert_allclose(router.predict_scores(test), expect, rtol=1e-5, atol=1e-6)
    # the Trainer's own predict loop gives the same numbers
    preds = trainer.predict(module, datamodule=dm)
    got = np.concatenate([p["scores"].numpy() for p in preds])
    idx = np.concatenate([p["index"].numpy() for p in preds])
    np.testing.assert_allclose(got[np.argsort(idx)], expect, rtol=1e-5, atol=1e-6)
    # the router holds no Lightning object and re-fits a fresh module of the same class
    assert not any("pytorch_lightning" in type(v).__module__ for v in vars(router).values())
    refit = LightningRouter(**router.get_params()).set_params(max_epochs=1).fit(dm.splits["train"])
    assert type(refit.net_) is type(router.net_)
    assert refit.module_options["dim"] == 8


def test_export_round_trip(tmp_path, sim_split):
    from recsys_router.export import export_router, load_router
    r = TwoTowerRouter(dim=8, id_dim=4, query_hidden=(16,), llm_hidden=(16,), max_epochs=1,
                       encoder_options={"dim": 32}).fit(sim_split["train"])
    path = export_router(r, tmp_path / "tt", train_data=sim_split["train"])
    loaded = load_router(path)
    test = sim_split["test"]
    texts = test.texts
    scores, _, _ = loaded.predict(texts)
    np.testing.assert_allclose(scores, r.predict_scores(test), rtol=1e-6)


def test_epoch_metrics_by_hand():
    from recsys_router.models.base import epoch_metrics
    s = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [np.nan, 1.0]])
    pred = np.array([[0.9, 0.1], [0.2, 0.8], [0.1, 0.9], [0.5, 0.5]])
    m = epoch_metrics(pred, s)                      # the incomplete 4th query is left out
    assert m["mu_o"] == pytest.approx(2 / 3)        # choices 0, 1, 1 -> scores 1, 1, 0
    assert m["v_b"] == pytest.approx((2 / 3) / (2 / 3))
    assert m["e_p"] == pytest.approx(-(1 / 3) * np.log2(1 / 3) - (2 / 3) * np.log2(2 / 3))
    c = np.array([[1.0, 3.0], [1.0, 3.0], [1.0, 3.0], [1.0, 3.0]])
    assert "aiq" in epoch_metrics(pred[:3], s[:3], c[:3])
    sparse = np.array([[1.0, np.nan], [np.nan, 0.0], [np.nan, np.nan]])
    got = epoch_metrics(np.array([[0.1, 0.9], [0.9, 0.1], [0.5, 0.5]]), sparse)
    assert got == {"mu_o": 0.5, "e_p": 1.0}          # choices restricted to observed LLMs


def test_to_router_of_a_ranking_loss_module_gets_the_platt_map_of_fit(sim_small):
    """A bpr-trained module turned into a router carries the Platt map that ``fit`` fits on
    the training cells (before, ``logit_calib_`` stayed None and scores were raw
    ``sigmoid(logit)``); the map is recomputed here by a generic optimiser."""
    from scipy.optimize import minimize
    from scipy.special import expit
    dm = RoutingDataModule.from_splits(sim_small.split((0.7, 0.1, 0.2), seed=0), mode="pairwise",
                                       encoder_options={"dim": 32}, batch_size=32)
    torch.manual_seed(0)
    module = MFModule(dm.n_llms, dm.embed_dim, dim=8, loss={"kind": "bpr"}, lr=0.1)
    quiet_trainer(5).fit(module, datamodule=dm)
    router = module.to_router(dm)
    assert router.logit_calib_ is not None
    module.eval()
    with torch.no_grad():
        z_train = module(torch.as_tensor(dm.embeddings("train"))).double().numpy()
        z_test = module(torch.as_tensor(dm.embeddings("test"))).double().numpy()
    y = dm.splits["train"].scores.astype(np.float64)
    ok = ~np.isnan(y)

    def nll(t):
        p = np.clip(expit(t[0] * z_train[ok] + t[1]), 1e-12, 1 - 1e-12)
        return -np.mean(y[ok] * np.log(p) + (1 - y[ok]) * np.log(1 - p))
    a, b = minimize(nll, [1.0, 0.0], method="Nelder-Mead",
                    options={"xatol": 1e-9, "fatol": 1e-12, "maxiter": 4000}).x
    np.testing.assert_allclose(router.logit_calib_, [a, b], atol=1e-3)
    np.testing.assert_allclose(router.predict_scores(dm.splits["test"]),
                               expit(a * z_test + b), atol=1e-3)
    # the map matches the training cells' mean score (the property a Platt map has)
    got = router.predict_scores(dm.splits["train"])[ok].mean()
    assert got == pytest.approx(y[ok].mean(), abs=1e-3)


def test_loss_selection_ratio_decides_the_listwise_targets():
    """``loss={"selection_ratio": r}`` reaches the data module that builds the selection
    vectors (before, the data module's own 0.95 was used whatever the loss said): the
    targets are ``score >= r * best`` of each query, and two ratios fit different routers."""
    from recsys_router.datasets.synthetic import make_synthetic
    d = make_synthetic(120, 4, 3, seed=0, binary=False)
    test = make_synthetic(30, 4, 3, seed=1, binary=False)
    s = d.scores.astype(np.float64)
    best = np.nanmax(s, axis=1, keepdims=True)
    preds = []
    for ratio in (0.95, 0.3):
        r = LightningRouter("recsys_router.models.mf_module:MFModule",
                            {"dim": 4, "loss": {"kind": "listwise", "selection_ratio": ratio}},
                            encoder_options={"dim": 16}, max_epochs=3, seed=0)
        dm = r._datamodule(d, None)
        dm.setup("fit")
        expect = (~np.isnan(s)) & (best > 0) & (np.nan_to_num(s, nan=-1.0) >= ratio * best)
        assert dm.selection_ratio == ratio
        np.testing.assert_array_equal(dm._train_dataset().arrays["sel"], expect.astype(np.float32))
        preds.append(r.fit(d).predict_scores(test))
    assert np.abs(preds[0] - preds[1]).max() > 1e-3


def test_utility_wtp_is_in_data_units_under_the_minmax_transform(monkeypatch):
    """On 0..10 grades (min-max scaled to [0, 1] targets) the ``utility`` loss's targets are
    the argmax of ``wtp * grade - cost`` (before, ``wtp`` multiplied the rescaled targets:
    with wtp 0.1 the dear LLM's 0.1 * 0.8..1.0 - 0.5 < 0 lost to the free one)."""
    from recsys_router.data import RoutingData
    from recsys_router.datasets.synthetic import make_synthetic
    from recsys_router.models import losses
    base = make_synthetic(64, 2, 2, seed=0)
    rng = np.random.default_rng(0)
    n = base.n_queries
    grades = np.stack([rng.integers(8, 11, n), rng.integers(0, 3, n)], 1).astype(float)
    costs = np.stack([np.full(n, 0.5), np.zeros(n)], 1)
    d = RoutingData(base.queries, base.llms, grades, costs)
    wtp = 0.1
    seen = []
    real = losses.utility_selection

    def spy(target, cost, mask, w, temperature=0.0):
        out = real(target, cost, mask, w, temperature)
        raw = 10.0 * target.double().numpy()            # the grades back (lo 0, hi 10)
        u = np.where(mask.numpy(), wtp * raw - cost.double().numpy(), -np.inf)
        expect = (u == u.max(axis=1, keepdims=True)).astype(np.float32)
        seen.append((out.numpy(), expect))
        return out
    monkeypatch.setattr(losses, "utility_selection", spy)
    r = make_router("mf", loss="utility", wtp=wtp, max_epochs=1, val_fraction=0,
                    encoder_options={"dim": 16}, dim=4).fit(d)
    assert r.score_scale_.method == "minmax" and (r.score_scale_.lo, r.score_scale_.hi) == (0, 10)
    assert seen and all(np.array_equal(got, expect) for got, expect in seen)
    assert sum(got[:, 0].sum() for got, _ in seen) == n   # the dear, better LLM every time
    assert r.module_kwargs()["loss"].wtp == wtp             # the router keeps the data units


def test_to_router_records_the_training_score_range_so_add_llm_takes_1_to_10_probes(sim_small):
    """``to_router`` on 1-10 grades sets ``score_range_`` (the train split's min/max, as
    ``Router.fit`` does) and the pool bookkeeping, so ``add_llm`` takes 1-10 probes; before,
    the range was unset, held to [0, 1], and the probes were refused."""
    from recsys_router.data import RoutingData
    graded = RoutingData(sim_small.queries, sim_small.llm_names, 1 + 9 * sim_small.scores,
                         costs=sim_small.costs)
    pool = graded.subset(llms=graded.llm_names[:-1])
    dm = RoutingDataModule.from_splits(pool.split((0.7, 0.1, 0.2), seed=0),
                                       encoder_options={"dim": 32}, batch_size=32)
    torch.manual_seed(0)
    module = MFModule(dm.n_llms, dm.embed_dim, dim=8, loss={"kind": "mse"})
    quiet_trainer(1).fit(module, datamodule=dm)
    router = module.to_router(dm)
    train = dm.splits["train"].scores
    assert router.score_range_ == (float(np.nanmin(train)), float(np.nanmax(train)))
    assert router.score_range_[1] > 1.0
    assert (router.core_llms_, router.probe_llms_, router.llm_info_) == (None, {}, {})
    new = graded.llm_names[-1]
    probes = RoutingData(graded.queries.iloc[:30].reset_index(drop=True), [new],
                         graded.scores[:30, -1:], costs=graded.costs[:30, -1:])
    assert np.nanmax(probes.scores) > 1.0              # probes on the 1-10 scale
    grown = router.add_llm(new, probes)
    assert grown.llm_names_ == list(pool.llm_names) + [new]
    test = graded.subset(queries=list(dm.splits["test"].query_ids))
    assert np.isfinite(grown.predict_scores(test)).all()
