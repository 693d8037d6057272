"""Every registered router exports to a pickle-free artifact and reloads to identical decisions.

Parametrised over ``available_routers()``: a router added to the registry is checked here
without editing this file (fast settings below keep Lightning/MLP routers to one short epoch).
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch

from recsys_router.export import export_router, load_router
from recsys_router.registry import available_routers, make_router, router_factory
from router_contract import ENCODER_OPTION_PARAMS, other_encoder
from router_contract_params import assert_params_fixed, unreadable_params

#: fast hyperparameters per router (only keys the router takes are used)
FAST = {"max_epochs": 1, "epochs": 3, "encoder_options": {"dim": 32}, "hidden": 8,
        "iterations": 3, "dim": 8}
#: routers whose route() has no willingness-to-pay mode
NO_WTP: set = set()


def _make(name: str):
    valid = set(make_router(name).get_params())
    params = {k: v for k, v in FAST.items() if k in valid}
    if name == "logged":  # the wrapped router gets the fast settings
        params["params"] = {"max_epochs": 1, "dim": 8, "encoder_options": {"dim": 32}}
    if name == "graph":
        params["hidden"] = 8
    elif "hidden" in params and name != "graph":
        params.pop("hidden")  # other routers' `hidden` is a list of widths
    return make_router(name, **params)


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.mark.parametrize("name", available_routers())
def test_export_reload_identical(name, sim_split, tmp_path):
    tr, va, te = sim_split["train"], sim_split["val"], sim_split["test"]
    if getattr(router_factory(name), "needs_logged_feedback", False):  # one revealed LLM per query
        from recsys_router.feedback.bandit import simulate_log
        tr = simulate_log(tr, np.full(tr.scores.shape, 1.0 / tr.n_llms), seed=0)[0]
        va = None
    router = _make(name).fit(tr, va)
    out = export_router(router, tmp_path / name, train_data=tr, metrics={"test/mu_o": 0.25})
    loaded = load_router(out)
    assert type(loaded.router) is type(router)
    budget = float(np.median(np.nanmean(tr.costs, axis=0)))
    settings = [{}, {"budget": budget}, {"candidates": tr.llm_names[1:4]}]
    if name not in NO_WTP:
        settings += [{"wtp": 50.0}, {"wtp": 1e4, "candidates": tr.llm_names[:2]}]
    for kw in settings:
        np.testing.assert_array_equal(loaded.router.route(te, **kw), router.route(te, **kw),
                                      err_msg=f"{name} {kw}")
    np.testing.assert_allclose(loaded.router.predict_scores(te), router.predict_scores(te),
                               rtol=1e-6, atol=1e-9)
    c0, c1 = router.predict_costs(te), loaded.router.predict_costs(te)
    np.testing.assert_allclose(c1, c0, rtol=1e-6, atol=1e-12)
    # the loaded router predicts with the stored encoder: another one set afterwards (the
    # next fit's) changes nothing
    if "encoder" in loaded.router.get_params():
        moved = copy.deepcopy(loaded.router).set_params(
            encoder=other_encoder(loaded.router, te.texts[:20]),
            **{k: {"dim": 7} for k in ENCODER_OPTION_PARAMS if k in router.get_params()})
        np.testing.assert_array_equal(moved.predict_scores(te), loaded.router.predict_scores(te))
    # and every other hyperparameter prediction reads is restored from the stored parameters
    # (``_freeze_params`` on load), never read from the parameters afterwards
    assert_params_fixed(loaded.router, te)
    # an export made after set_params stores the parameters as of fit (never reading the
    # new ones, which here fail on any use): it loads to the same router
    moved = copy.deepcopy(router).set_params(**unreadable_params(router))
    again = load_router(export_router(moved, tmp_path / "moved", train_data=tr)).router
    assert again.get_params() == loaded.router.get_params()
    np.testing.assert_array_equal(again.predict_scores(te), loaded.router.predict_scores(te))
    # the ExportedRouter answers for a RoutingData as the router itself does
    res = loaded.route(te, budget=budget)
    assert [r["llm"] for r in res] == list(router.route(te, budget=budget))
    # raw texts: the same decisions as the in-memory router on the same (hashed-id) queries
    if not router.uses_ground_truth:
        texts = list(dict.fromkeys(te.texts))[:25]
        by_text = [r["llm"] for r in loaded.route(texts)]
        assert by_text == list(router.route(loaded.to_data(texts))), name
        assert [r["llm"] for r in loaded.route(texts[:1])] == by_text[:1]  # batch == single
    else:
        with pytest.raises(ValueError, match="ground-truth"):
            loaded.route(["a text"])
    # manifest: class, parameters, pool, fingerprint, metrics, checksums; no pickle anywhere
    man = json.loads((out / "manifest.json").read_text())
    assert man["router_class"].endswith(":" + type(router).__qualname__)
    assert set(man["router_params"]) == set(router.get_params())
    assert [x["name"] for x in man["llms"]] == tr.llm_names
    np.testing.assert_allclose([x["mean_cost"] for x in man["llms"]], np.nanmean(tr.costs, axis=0),
                               rtol=1e-6)
    assert man["metrics"] == {"test/mu_o": 0.25} and set(man["files"]) == {"state.json", "weights.npz"}
    with np.load(out / "weights.npz", allow_pickle=False) as npz:
        for k in npz.files:
            assert npz[k].dtype != object


@pytest.mark.parametrize("name", available_routers())
def test_changed_pool_round_trips(name, sim_split, tmp_path):
    """An LLM added after fitting (and a fitted one removed) survives export and reload:
    pool, per-LLM state and probe heads are declared state, not constants."""
    tr, te = sim_split["train"], sim_split["test"]
    base = tr.subset(llms=tr.llm_names[:4])
    if getattr(router_factory(name), "needs_logged_feedback", False):  # one revealed LLM per query
        from recsys_router.feedback.bandit import simulate_log
        base = simulate_log(base, np.full(base.scores.shape, 1.0 / base.n_llms), seed=0)[0]
    router = _make(name).fit(base)
    new = tr.llm_names[4]
    n = 30
    texts = [str(t) for t in te.texts[:n]]
    scores = {t: float(v) for t, v in zip(texts, te.scores[:n, 4])}
    costs = {t: float(c) for t, c in zip(texts, te.costs[:n, 4])}
    router.add_llm(new, scores, costs, provenance={"note": "contract"})
    router.remove_llm(base.llm_names[1])
    out = export_router(router, tmp_path / name, train_data=base)
    loaded = load_router(out)
    assert loaded.llm_names == router.llm_names_ and new in loaded.llm_names
    assert loaded.router.llm_info_[new]["note"] == "contract"
    pool = te.subset(llms=router.llm_names_)
    np.testing.assert_allclose(loaded.router.predict_scores(pool), router.predict_scores(pool),
                               rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(loaded.router.llm_mean_costs(), router.llm_mean_costs(),
                               rtol=1e-6, atol=1e-12)
    np.testing.assert_array_equal(loaded.router.route(pool), router.route(pool))


def test_lightning_score_scale_round_trips(sim_split, tmp_path):
    """A Lightning router trained on scores outside [0, 1] maps its outputs back to that scale;
    the fitted score scale is declared state, so the reloaded router predicts the same."""
    from recsys_router.data import RoutingData
    tr, te = sim_split["train"], sim_split["test"]
    graded = RoutingData(tr.queries, tr.llms, tr.scores * 10.0, tr.costs, name="graded")
    router = _make("mf").fit(graded)
    assert router.score_scale_.method != "identity"
    loaded = load_router(export_router(router, tmp_path / "mf", train_data=graded)).router
    assert loaded.score_scale_.to_state() == router.score_scale_.to_state()
    np.testing.assert_allclose(loaded.predict_scores(te), router.predict_scores(te),
                               rtol=1e-6, atol=1e-9)
    assert loaded.predict_scores(te).max() > 1.0
