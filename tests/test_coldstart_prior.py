"""The Gaussian prior of an onboarded LLM's row (mf, two-tower, mirt, nirt) comes from the
trained LLMs still in the pool: a removed one no longer shapes it, onboarded ones never do
(the rule of ALS/BPR), and a loaded artifact onboards as the router it was exported from."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from recsys_router.coldstart import probe_data
from recsys_router.data import RoutingData
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.export.artifact import export_router, load_router
from recsys_router.models.base.llm_rows import fit_llm_row
from recsys_router.registry import make_router

SMALL = {"mf": {"dim": 4, "max_epochs": 2}, "two-tower": {"max_epochs": 2},
         "mirt": {"max_epochs": 2}, "nirt": {"max_epochs": 2}}


@pytest.fixture(scope="module")
def data():
    return make_synthetic(120, 4, 3, seed=3, binary=True)


def _probes(data, j: int, lo: int, n: int = 15):
    texts = [str(t) for t in data.texts[lo:lo + n]]
    return {t: float(s) for t, s in zip(texts, data.scores[lo:lo + n, j])}


def _trained_rows(r) -> np.ndarray:
    with torch.no_grad():
        return r.net_.llm_rows().double().numpy()


def _hand_prior(rows: np.ndarray):
    """Mean and floored diagonal variance computed directly (population variance)."""
    n = len(rows)
    mu = [sum(rows[i, p] for i in range(n)) / n for p in range(rows.shape[1])]
    var = [sum((rows[i, p] - mu[p]) ** 2 for i in range(n)) / n for p in range(rows.shape[1])]
    floor = max(sum(var) / len(var), 1e-4)
    return np.array(mu), np.array([max(v, floor) for v in var])


@pytest.fixture
def priors(monkeypatch):
    """The prior rows every ``fit_llm_row`` call of ``add_llm`` receives, in order."""
    import recsys_router.models.base.llm_rows as llm_rows
    seen, real = [], llm_rows.fit_llm_row

    def spy(net, x, y, prior_rows, **kw):
        seen.append(np.array(prior_rows, copy=True))
        return real(net, x, y, prior_rows, **kw)

    monkeypatch.setattr(llm_rows, "fit_llm_row", spy)
    return seen


@pytest.mark.parametrize("name", list(SMALL))
def test_prior_leaves_out_removed_and_onboarded_llms(data, name, priors):
    r = make_router(name, **SMALL[name]).fit(data)
    trained = _trained_rows(r)
    r.remove_llm("sim-llm-0")
    r.add_llm("a", _probes(data, 2, 0), price_in=1.0)
    np.testing.assert_array_equal(priors[-1], trained[1:])
    r.remove_llm("sim-llm-2")
    r.add_llm("b", _probes(data, 3, 15), price_in=1.0)
    np.testing.assert_array_equal(priors[-1], trained[[1, 3]])      # "a" is not in it
    for gone in ("sim-llm-1", "sim-llm-3", "b"):
        r.remove_llm(gone)
    r.add_llm("c", _probes(data, 1, 30), price_in=1.0)            # only "a" was left
    np.testing.assert_array_equal(priors[-1], r.added_llm_rows_[:1, :-1])
    assert r.llm_names_ == ["a", "c"] and len(priors) == 3


def test_mirt_row_is_map_under_prior_of_remaining_llms(data):
    """After removing a trained LLM the onboarded row is the MAP under (mu, s2) of the three
    trained LLMs left (computed by hand), not of all four."""
    r = make_router("mirt", max_epochs=3).fit(data)
    # binary scores: the probes enter unscaled and the logits uncalibrated
    assert r.score_scale_.method == "identity" and getattr(r, "logit_calib_", None) is None
    trained = _trained_rows(r)
    r.remove_llm("sim-llm-0")
    scores = _probes(data, 2, 0)
    r.add_llm("new", scores, price_in=1.0)
    got = r.added_llm_rows_[-1]
    probes = probe_data("new", scores)
    x, y = r.embed(probes), probes.scores[:, 0]
    np.testing.assert_allclose(got, fit_llm_row(r.net_, x, y, trained[1:]), atol=1e-9)
    assert np.abs(got - fit_llm_row(r.net_, x, y, trained)).max() > 1e-3   # the old prior differs
    # stationarity of BCE + prior at the fitted row, with the hand-computed prior
    mu, s2 = _hand_prior(trained[1:])
    row = torch.tensor(got[:-1], dtype=torch.float32, requires_grad=True)
    beta = torch.tensor(got[-1], dtype=torch.float32, requires_grad=True)
    xt = torch.as_tensor(x, dtype=torch.float32)
    logit = r.net_.score_rows(xt, row[None, :])[:, 0] + beta
    loss = torch.nn.functional.binary_cross_entropy_with_logits(
        logit, torch.as_tensor(y, dtype=torch.float32), reduction="sum") \
        + 0.5 * ((row - torch.as_tensor(mu, dtype=torch.float32)) ** 2
                 / torch.as_tensor(s2, dtype=torch.float32)).sum()
    loss.backward()
    assert float(row.grad.abs().max()) < 1e-2 and abs(float(beta.grad)) < 1e-2


@pytest.mark.parametrize("name", ["mf", "mirt"])
def test_loaded_artifact_onboards_as_in_process_after_removals(data, name, tmp_path, priors):
    train = data.subset(np.arange(80))
    test = data.subset(np.arange(80, 120))
    r = make_router(name, **SMALL[name]).fit(train)
    r.add_llm("a", _probes(test, 1, 0), price_in=1.0)
    r.remove_llm("sim-llm-0")
    priors.clear()
    export_router(r, tmp_path / name, train_data=train)
    loaded = load_router(tmp_path / name).router
    for router in (r, loaded):
        router.add_llm("b", _probes(test, 3, 15), price_in=1.0)
    np.testing.assert_array_equal(priors[1], priors[0])
    np.testing.assert_array_equal(priors[1], _trained_rows(r)[1:])
    np.testing.assert_allclose(loaded.added_llm_rows_, r.added_llm_rows_, rtol=1e-6, atol=1e-7)
    pool = RoutingData(test.queries, r.llm_names_, np.full((test.n_queries, 5), np.nan))
    np.testing.assert_allclose(loaded.predict_scores(pool), r.predict_scores(pool), rtol=1e-6, atol=1e-7)
    assert loaded.llm_names_ == r.llm_names_ == ["sim-llm-1", "sim-llm-2", "sim-llm-3", "a", "b"]
