"""Item cold start: probe input validation, native fits checked by hand, export round trip."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from recsys_router.coldstart import llm_table, probe_data
from recsys_router.coldstart.probes_input import MAX_PROBES
from recsys_router.data import RoutingData
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.errors import DataValidationError
from recsys_router.export.artifact import export_router, load_router
from recsys_router.registry import make_router


@pytest.fixture(scope="module")
def sim():
    return make_synthetic(200, 4, 3, seed=0).split((0.7, 0.3), seed=0)


def _probes(data: RoutingData, j: int, n: int = 30):
    texts = [str(t) for t in data.texts[:n]]
    return ({t: float(v) for t, v in zip(texts, data.scores[:n, j])},
            {t: float(c) for t, c in zip(texts, data.costs[:n, j])})


@pytest.mark.parametrize("bad, exc, msg", [
    ({1: 1.0}, DataValidationError, "non-empty string"),
    ({"q": float("inf")}, DataValidationError, "finite"),
    ({"q": None}, DataValidationError, "must be a number"),
    ({"q": True}, DataValidationError, "must be a number"),
    ([("q", 1.0)], TypeError, "mapping"),
    ({"q" * 100_001: 1.0}, DataValidationError, "at most"),
])
def test_probe_data_rejects_hostile_input(bad, exc, msg):
    with pytest.raises(exc, match=msg):
        probe_data("new", bad)


def test_probe_data_limits_and_names():
    with pytest.raises(DataValidationError, match="at most"):
        probe_data("new", {f"q{i}": 1.0 for i in range(MAX_PROBES + 1)})
    for name in ("", "a\x00b", "x" * 201, "\x7f", None):
        with pytest.raises(ValueError):
            probe_data(name, {"q": 1.0})


def test_probe_data_long_table_and_routing_data():
    df = pd.DataFrame({"query_id": ["a", "b", "a"], "model": ["new", "new", "old"],
                       "text": ["qa", "qb", "qa"], "score": [1.0, 0.0, 0.5]})
    d = probe_data("new", df)
    assert d.llm_names == ["new"] and d.scores.ravel().tolist() == [1.0, 0.0]
    with pytest.raises(DataValidationError, match="no row for model"):
        probe_data("other", df)
    with pytest.raises(DataValidationError, match="no numeric score"):
        probe_data("new", df.assign(score=["x", 0, 1]))
    rd = RoutingData(["a", "b"], ["new", "z"], [[1.0, 0.0], [np.nan, 1.0]])
    with pytest.raises(DataValidationError, match="'b' has no score"):
        probe_data("new", rd)


@pytest.mark.parametrize("blank", ["", "   ", "\t\n"])
def test_blank_probe_text_is_refused_on_every_input_path(sim, blank):
    """A blank text is refused as by the mapping form, naming the probe's query id; a
    missing text (None) is not blank (text-free routers take such probes)."""
    with pytest.raises(DataValidationError, match="probe 1: query text must be a non-empty"):
        probe_data("new", {"q a": 1.0, blank: 0.0})
    q = pd.DataFrame({"query_id": ["a", "b"], "text": ["what is 2+2?", blank]})
    rd = RoutingData(q, ["new"], [[1.0], [0.0]], source="probes.csv")
    msg = f"probes.csv, row 1, column 'text': probe query 'b': query text must be a non-empty string, got {blank!r}"
    with pytest.raises(DataValidationError, match="^" + re.escape(msg) + "$"):
        probe_data("new", rd)
    long = pd.DataFrame({"query_id": ["a", "b"], "model": "new", "text": ["what is 2+2?", blank],
                         "score": [1.0, 0.0]})
    with pytest.raises(DataValidationError, match="probe query 'b': query text must be a non-empty"):
        probe_data("new", long)
    r = make_router("knn").fit(sim["train"].subset(llms=sim["train"].llm_names[:3]))
    before = r.predict_scores(sim["test"].subset(llms=sim["test"].llm_names[:3]))
    with pytest.raises(DataValidationError, match="probe query 'b'"):
        r.add_llm("new", rd, price_in=1.0)
    assert r.llm_names_ == sim["train"].llm_names[:3]
    np.testing.assert_array_equal(r.predict_scores(sim["test"].subset(llms=sim["test"].llm_names[:3])),
                                  before)
    no_text = probe_data("new", RoutingData(["a", "b"], ["new"], [[1.0], [0.0]]))
    assert no_text.texts == [None, None]


def test_als_new_item_equals_weighted_least_squares(sim):
    """ALS's new LLM factor is the MAP (X'CX + sigma2 S^-1)^-1 (X'Cp + sigma2 S^-1 m) over the
    probes, (m, S) the mean and floored diagonal variance of the fitted LLMs' factors."""
    train, test = sim["train"], sim["test"]
    # fixed fold-in penalty: "auto" may fold every query of this small set to one factor
    r = make_router("als", factors=4, iterations=5, ridge_alpha=100.0).fit(
        train.subset(llms=train.llm_names[:3]))
    scores, costs = _probes(test, 3)
    r.add_llm("new", scores, costs)
    probes = probe_data("new", scores, costs)
    x = r.query_factors(probes)
    y = probes.scores[:, 0].astype(float)
    lo, hi = r.score_range_
    s = (y - lo) / (hi - lo)
    pool = r.predict_scores(RoutingData(probes.queries, r.llm_names_,
                                        np.full((len(y), 4), np.nan)))[:, :3]
    w, c = r.calib_[0][:3], r.calib_[1][:3]
    row_mean = np.clip(((pool - c) / w * w + c).mean(axis=1) - lo, 0, None) / (hi - lo)
    pos = (s > 0) & (s >= row_mean - 1e-12)
    conf = np.where(pos, 1 + r.alpha * s, 1.0)
    fitted = r.llm_factors_[:3]
    m, var = fitted.mean(axis=0), fitted.var(axis=0)
    prec = r.noise_var_ / np.maximum(var, max(var.mean(), 1e-4))
    a = (x * conf[:, None]).T @ x + np.diag(prec)
    expected = np.linalg.solve(a, (x * conf[:, None]).T @ pos.astype(float) + prec * m)
    np.testing.assert_allclose(r.llm_factors_[-1], expected, rtol=1e-3, atol=1e-4)


def test_mf_new_row_is_map_estimate(sim):
    """The MF row minimises BCE + prior (gradient ~0 there); the offset calibrates in the large."""
    import torch
    train, test = sim["train"], sim["test"]
    r = make_router("mf", dim=4, max_epochs=2, encoder_options={"dim": 32}).fit(
        train.subset(llms=train.llm_names[:3]))
    scores, costs = _probes(test, 3)
    r.add_llm("new", scores, costs)
    from recsys_router.models.base.llm_rows import prior_of
    mu, s2 = prior_of(r.llm_rows()[:3])
    row = torch.tensor(r.added_llm_rows_[0, :-1], dtype=torch.float32, requires_grad=True)
    beta = torch.tensor(r.added_llm_rows_[0, -1], dtype=torch.float32, requires_grad=True)
    probes = probe_data("new", scores, costs)
    x = torch.as_tensor(r.embed(probes), dtype=torch.float32)
    net = r.net_
    q = net.query_proj(x).detach()
    logit = q @ row[:-1] + row[-1] + beta
    y = torch.as_tensor(probes.scores[:, 0], dtype=torch.float32)
    loss = torch.nn.functional.binary_cross_entropy_with_logits(logit, y, reduction="sum") \
        + 0.5 * ((row - torch.as_tensor(mu, dtype=torch.float32)) ** 2
                 / torch.as_tensor(s2, dtype=torch.float32)).sum()
    loss.backward()
    assert float(row.grad.abs().max()) < 1e-2 and abs(float(beta.grad)) < 1e-2
    # the free offset calibrates in the large: mean predicted score on the probes = probe mean
    assert float(torch.sigmoid(logit).mean()) == pytest.approx(float(y.mean()), abs=1e-3)


def test_provenance_and_export_round_trip(sim, tmp_path):
    train, test = sim["train"], sim["test"]
    old = train.subset(llms=train.llm_names[:3])
    scores, costs = _probes(test, 3)
    small = {"mf": {"max_epochs": 1}, "graph": {"max_epochs": 1, "hidden": 8}}
    for name in ("best-single", "mf", "knn", "als", "graph", "zero"):
        r = make_router(name, **small.get(name, {})).fit(old)
        r.add_llm("new", scores, costs, provenance={"strategy": "random"})
        table = llm_table(r)
        assert table["origin"].tolist() == ["fit"] * 3 + ["onboarded"]
        assert table.set_index("name").loc["new", "n_probes"] == 30
        export_router(r, tmp_path / name, train_data=old)
        loaded = load_router(tmp_path / name)
        assert loaded.llm_names == old.llm_names + ["new"]
        probe_texts = [str(t) for t in test.texts[30:40]]
        a, _, _ = loaded.predict(probe_texts)
        np.testing.assert_allclose(a, r.predict_scores(loaded.to_data(probe_texts)), rtol=1e-6)
        assert loaded.router.llm_info_["new"]["strategy"] == "random"


@pytest.mark.parametrize("name", ["mf", "knn", "zero"])
def test_refit_forgets_onboarded_llms(sim, name):
    train, test = sim["train"], sim["test"]
    old = train.subset(llms=train.llm_names[:3])
    r = make_router(name, **({"max_epochs": 1} if name == "mf" else {})).fit(old)
    before = r.predict_scores(test.subset(llms=old.llm_names))
    scores, costs = _probes(test, 3)
    r.add_llm("new", scores, costs).fit(old)
    assert r.llm_names_ == old.llm_names and not r.llm_info_
    np.testing.assert_allclose(r.predict_scores(test.subset(llms=old.llm_names)), before, rtol=1e-6)



def test_a_price_without_pool_prices_asks_for_probe_costs(sim):
    """A pool with costs but no LLM prices (routerbench_zs, say) cannot scale a new LLM's
    price to its costs: the error says so, and probe costs work."""
    train, test = sim["train"], sim["test"]
    old = train.subset(llms=train.llm_names[:3])
    unpriced = RoutingData(old.queries, list(old.llm_names), old.scores, old.costs)
    scores, costs = _probes(test, 3)
    r = make_router("best-single").fit(unpriced)
    assert np.isnan(r.llm_prices_).all() and np.isfinite(r.mean_costs_).all()
    with pytest.raises(ValueError, match="pool's LLM prices are unknown.*add a cost column"):
        r.add_llm("new", scores, price_in=0.5, price_out=1.5)
    with pytest.raises(ValueError, match="needs probe costs or a price"):
        r.add_llm("new", scores)
    assert r.llm_names_ == old.llm_names  # all or nothing
    r.add_llm("new", scores, costs)
    assert r.llm_names_[-1] == "new"
    priced = make_router("best-single").fit(old)  # the same price works where prices are known
    priced.add_llm("new", scores, price_in=0.5, price_out=1.5)
    assert priced.llm_names_[-1] == "new"


@pytest.mark.parametrize("name", ["best-single", "als"])
def test_new_llm_cost_uses_the_probe_weights_as_its_score_does(sim, name):
    # by hand: weights 3:1 on costs 1 and 0 -> (3 * 1 + 1 * 0) / 4 = 0.75 (unweighted: 0.5)
    train = sim["train"]
    old = train.subset(llms=train.llm_names[:3])
    r = make_router(name).fit(old)
    r.add_llm("new", {"p one": 1.0, "p two": 0.0}, {"p one": 1.0, "p two": 0.0}, weights=[3, 1])
    assert r.llm_info_["new"]["probe_mean"] == pytest.approx(0.75)
    heads = getattr(r, "probe_llms_", None) or {}
    cost = heads["new"]["cost"] if "new" in heads else r.mean_costs_[-1]
    assert cost == pytest.approx(0.75)


def test_second_priced_llm_on_a_probe_router_is_costed_like_the_first():
    """A non-native router keeps its fitted columns' mean costs while its prices grow with the
    pool; a second LLM added by price alone was refused (arrays of 4 and 5 LLMs). Each new
    LLM's cost is the pool's median cost-per-price times its mean price, by hand here."""
    d = make_synthetic(100, 4, seed=0)
    llms = d.llms.copy()
    llms["input_price"], llms["output_price"] = [1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 6.0, 8.0]
    d = RoutingData(d.queries, llms, d.scores, d.costs)
    router = make_router("knn", encoder="hashing").fit(d)
    expected = float(np.median(d.mean_costs().astype(np.float64) / [1.5, 3.0, 4.5, 6.0])) * 2.25
    for k in range(3):
        probes = RoutingData(d.queries.iloc[:10], [f"new{k}"], np.full((10, 1), 0.5))
        router.add_llm(f"new{k}", probes, price_in=1.5, price_out=3.0)
        assert router.probe_llms_[f"new{k}"]["cost"] == pytest.approx(expected, rel=1e-12)
    assert router.llm_prices_.tolist() == [1.5, 3.0, 4.5, 6.0, 2.25, 2.25, 2.25]


def test_observed_range_matches_nan_min_max_without_a_copy():
    from recsys_router.coldstart.pool import observed_range
    rng = np.random.default_rng(0)
    s = rng.random((50, 7)).astype(np.float32)
    s[rng.random(s.shape) < 0.3] = np.nan
    assert observed_range(s) == (float(np.nanmin(s)), float(np.nanmax(s)))
    assert observed_range(np.full((3, 2), np.nan, np.float32)) is None
    assert observed_range(np.zeros((0, 2), np.float32)) is None


def test_probe_scores_are_held_to_the_scale_not_the_observed_extremes():
    """Scores within [0, 1] are held to [0, 1] (a fitted pool that never scored 0.95 does
    not refuse a 0.95, nor the float64 reading of its own float32 extremes); graded scores
    to their range widened by its width each side (a new LLM may grade 1 where the fitted
    ones never went below 1.5); a score off that scale is refused."""
    from recsys_router.coldstart.pool import outside_range, score_scale
    q = pd.DataFrame({"query_id": [f"q{i}" for i in range(6)], "text": [f"t {i}" for i in range(6)]})
    frac = RoutingData(q, ["a", "b"], np.array([[.15, .5], [.95, .5], [.5, .15], [.95, .95],
                                                [.15, .5], [.5, .95]]))
    r = make_router("best-single").fit(frac)
    assert r.score_range_ == (float(np.float32(.15)), float(np.float32(.95)))
    assert outside_range(np.array([0.15, 0.95, 0.0, 1.0]), r.score_range_).size == 0
    r.add_llm("new", {"t 0": 0.95, "t 1": 0.15, "t 2": 1.0})
    graded = RoutingData(q, ["a"], np.array([[1.5], [10.0], [4.0], [7.5], [9.0], [2.0]]))
    g = make_router("best-single").fit(graded)
    assert score_scale(g.score_range_) == (1.5 - 8.5, 10.0 + 8.5)
    g.add_llm("mixtral", {"t 0": 1.0, "t 1": 10.0, "t 2": 6.0})
    with pytest.raises(ValueError, match=r"probe score 30 of 'x'.* off the scale of the router's "
                       r"training scores \[-7, 18.5\] \(training scores 1.5-10\)"):
        g.add_llm("x", {"t 0": 30.0, "t 1": 5.0})
    assert g.llm_names_ == ["a", "mixtral"]


def test_unknown_score_range_message_fits_an_in_process_router():
    """With no recorded range the refusal names ``score_range_`` and how to set it, and does
    not claim an old artifact (the router may be in-process, never exported)."""
    from recsys_router.coldstart.pool import check_probe_range
    with pytest.raises(ValueError) as got:
        check_probe_range("x", np.array([0.5, 7.0]), None, ["'a'", "'b'"])
    text = str(got.value)
    assert "probe score 7 of 'x' on query 'b' is outside [0, 1]" in text
    assert "score_range_" in text and "--score-range" in text
    assert "written before" not in text
