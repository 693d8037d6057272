"""Probe weights in add_llm (issue 12): each fit weighted as computed independently, hostile
weights rejected with nothing added, weights returned by the strategies and carried through
the probes CSV to ``onboard``; the adaptive criterion against a loop implementation."""

from __future__ import annotations

import copy
import json
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
import torch

from recsys_router.cli import main
from recsys_router.coldstart import probe_data
from recsys_router.coldstart.probes_input import probe_weights
from recsys_router.coldstart.selection import ProbeSession, select_probes
from recsys_router.data import RoutingData
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.errors import DataValidationError
from recsys_router.export.artifact import export_router, load_router
from recsys_router.models.base.llm_rows import fit_llm_row
from recsys_router.registry import make_router


@pytest.fixture(scope="module")
def sim():
    d = make_synthetic(200, 4, 3, seed=1)
    return d.subset(np.arange(160), llms=d.llm_names[:3]), d.subset(np.arange(160, 200))


def test_probe_weights_normalised_to_mean_one():
    d = RoutingData(["a", "b", "c"], ["new"], [[1.0], [0.0], [1.0]])
    np.testing.assert_allclose(probe_weights("new", d, [1, 2, 3]), [0.5, 1.0, 1.5])
    np.testing.assert_allclose(probe_weights("new", d, None), [1, 1, 1])
    np.testing.assert_allclose(probe_weights("new", d, np.array([0.0, 0.0, 2.0])), [0, 0, 3])


def _mean_one(weights) -> list[float]:
    """Weights scaled to mean 1 in exact rational arithmetic (a second implementation)."""
    exact = [Fraction(float(x)) for x in weights]
    mean = sum(exact) / len(exact)
    return [float(x / mean) for x in exact]


@pytest.mark.parametrize("weights", [[1e-320] * 3, [5e-324] * 3, [1e308] * 3, [1e308, 1e308, 1.0],
                                     [3e-320, 1e-320, 0.0], [2.5e-310, 5e-324, 1e-300]],
                         ids=["tiny", "smallest", "huge", "huge-and-one", "tiny-ratio", "mixed"])
def test_probe_weights_of_any_size_keep_their_ratios(weights):
    # w * (n / sum) overflowed: n / 3e-320 is inf, so every weight became inf; 1e308 three
    # times summed past the float range and was refused
    d = RoutingData(["a", "b", "c"], ["new"], [[1.0], [0.0], [1.0]])
    got = probe_weights("new", d, weights)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, _mean_one(weights), rtol=1e-15, atol=1e-300)
    if len(set(weights)) == 1:
        assert got.tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("router", ["knn", "mf"])
@pytest.mark.parametrize("tiny", [1e-320, 5e-324])
def test_equal_tiny_weights_predict_as_weights_of_one(sim, router, tiny):
    # knn: every weight inf, predictions NaN; mf: LBFGS raised a RuntimeError (overflow)
    train, test = sim
    new = test.llm_names[3]
    probes = test.subset(np.arange(10), llms=[new])
    base = make_router(router, **({"max_epochs": 1} if router == "mf" else {})).fit(train)
    ones = copy.deepcopy(base).add_llm(new, probes, weights=[1.0] * 10)
    got = copy.deepcopy(base).add_llm(new, probes, weights=[tiny] * 10)
    queries = test.subset(np.arange(10, 40), llms=ones.llm_names_)
    want = ones.predict_scores(queries)
    assert np.isfinite(want).all()
    np.testing.assert_array_equal(got.predict_scores(queries), want)
    assert got.llm_info_[new]["probe_mean"] == ones.llm_info_[new]["probe_mean"] \
        == pytest.approx(float(probes.scores[:, 0].mean()), rel=1e-6)


@pytest.mark.parametrize("bad, msg", [
    ([1.0, -1.0, 1.0], r"weight of probe 1 \('b'\) of 'new' is -1.0; expected a weight >= 0"),
    ([1.0, float("nan"), 1.0], r"weight of probe 1 \('b'\) of 'new' is nan"),
    ([1.0, float("inf"), 1.0], r"weight of probe 1 .* is inf"),
    ([1.0, 2.0], "2 probe weights given for 'new' but 3 probes"),
    ([0.0, 0.0, 0.0], "every probe weight of 'new' is 0"),
    (["1", 1.0, 1.0], r"weight of probe 0 \('a'\) of 'new' must be a number"),
    ([True, 1.0, 1.0], "must be a number"),
    ("abc", "must be a sequence"),
    ({"a": 1.0}, "must be a sequence"),
    (3.0, "must be a sequence"),
])
def test_probe_weights_reject_hostile_input(bad, msg):
    d = RoutingData(["a", "b", "c"], ["new"], [[1.0], [0.0], [1.0]])
    with pytest.raises(DataValidationError, match=msg):
        probe_weights("new", d, bad)


@pytest.mark.parametrize("name", ["best-single", "knn", "zero", "mf", "als"])
def test_bad_weights_add_nothing(sim, name):
    train, test = sim
    small = {"mf": {"max_epochs": 1}}
    r = make_router(name, **small.get(name, {})).fit(train)
    pred = r.predict_scores(test.subset(llms=train.llm_names))   # caches built on first use
    before = dict(r.__dict__)
    probes = test.subset(np.arange(6), llms=[test.llm_names[3]])
    for bad in ([1, 1, 1, 1, 1, -1], [1] * 5, [np.nan] * 6):
        with pytest.raises(DataValidationError):
            r.add_llm("new", probes, weights=bad)
        assert r.llm_names_ == train.llm_names and r.__dict__.keys() == before.keys()
        assert all(r.__dict__[k] is v for k, v in before.items())
        np.testing.assert_array_equal(r.predict_scores(test.subset(llms=train.llm_names)), pred)


def test_weighted_mean_of_mean_only_heads(sim):
    """Routers that predict a new LLM's mean (no text read): the weighted probe mean."""
    train, test = sim
    probes = test.subset(np.arange(8), llms=[test.llm_names[3]])
    y = probes.scores[:, 0].astype(float)
    w = np.array([4.0, 1, 1, 1, 1, 1, 1, 2])
    expected = float((w * y).sum() / w.sum())
    assert expected != pytest.approx(float(y.mean()))           # the weights matter here
    new = test.llm_names[3]
    for name in ("best-single", "zero"):
        r = make_router(name).fit(train).add_llm(new, probes, weights=w)
        pred = r.predict_scores(test.subset(llms=r.llm_names_))[:, -1]
        np.testing.assert_allclose(pred, expected, rtol=1e-9)   # a mean for every query
        assert r.llm_info_[new]["probe_mean"] == pytest.approx(expected)
        assert r.llm_info_[new]["weighted"] is True


def test_knn_head_weights_match_a_direct_computation(sim):
    """kNN probe head: s(x) = (sum_top v_i c_i y_i + ybar_v) / (sum_top v_i c_i + 1), c = cosine."""
    train, test = sim
    r = make_router("knn").fit(train)
    probes = test.subset(np.arange(15), llms=[test.llm_names[3]])
    w = np.linspace(0.2, 3.0, 15)
    r.add_llm(test.llm_names[3], probes, weights=w)
    queries = test.subset(np.arange(15, 40), llms=r.llm_names_)
    got = r.predict_scores(queries)[:, -1]
    unit = lambda a: a / np.linalg.norm(a, axis=1, keepdims=True)  # noqa: E731
    x, p = unit(r.encoder_.encode_data(queries)), unit(r.encoder_.encode_data(probes))
    y, v = probes.scores[:, 0].astype(float), w * 15 / w.sum()
    ybar = (v * y).sum() / v.sum()
    for i in range(queries.n_queries):
        cos = np.maximum(p @ x[i], 0.0)
        top = np.argsort(-cos, kind="stable")[:10]
        num = (v[top] * cos[top] * y[top]).sum() + ybar
        assert got[i] == pytest.approx(num / ((v[top] * cos[top]).sum() + 1.0), rel=1e-6)


class _Scalar(torch.nn.Module):
    """A one-parameter LLM row: logit = x * r (plus the fitted offset)."""

    def llm_rows(self):
        return torch.tensor([[0.5], [1.5]])

    def score_rows(self, x, rows):
        return x[:, :1] * rows[:, 0][None, :]


def test_weighted_map_matches_brute_force_grid():
    x = np.array([[1.0], [-0.5], [2.0], [0.3], [-1.2]])
    y = np.array([1.0, 0.0, 1.0, 0.0, 1.0])
    v = np.array([4.0, 0.2, 0.2, 4.0, 0.2])
    got = fit_llm_row(_Scalar(), x, y, np.array([[0.5], [1.5]]), weights=v, steps=200)
    # objective: sum_i v_i BCE(sigmoid(x_i r + b), y_i) + (r - 1)^2 / (2 * 0.25), on a grid
    r, b = np.meshgrid(np.linspace(-3, 5, 801), np.linspace(-4, 4, 801), indexing="ij")
    z = x[:, 0][:, None, None] * r + b
    bce = np.logaddexp(0, z) - y[:, None, None] * z
    obj = (v[:, None, None] * bce).sum(axis=0) + (r - 1.0) ** 2 / (2 * 0.25)
    i, j = np.unravel_index(np.argmin(obj), obj.shape)
    assert got[0] == pytest.approx(r[i, j], abs=0.02) and got[1] == pytest.approx(b[i, j], abs=0.02)
    plain = fit_llm_row(_Scalar(), x, y, np.array([[0.5], [1.5]]), steps=200)
    assert abs(plain[0] - got[0]) > 0.05                       # the weights changed the fit


def test_weight_two_equals_a_duplicated_probe():
    x = np.array([[1.0], [-0.5], [2.0], [0.3]])
    y = np.array([1.0, 0.0, 0.0, 1.0])
    rows = np.array([[0.5], [1.5]])
    w = fit_llm_row(_Scalar(), x, y, rows, weights=np.array([2.0, 1, 1, 1]), steps=200)
    dup = fit_llm_row(_Scalar(), np.vstack([x[:1], x]), np.append(y[:1], y), rows, steps=200)
    np.testing.assert_allclose(w, dup, atol=1e-4)


@pytest.mark.parametrize("name", ["als", "bpr"])
def test_implicit_weighted_item_equals_duplicated_probes(sim, name):
    """ALS/BPR: weight 2 on a probe gives the factor of that probe given twice."""
    train, test = sim
    r = make_router(name, factors=4, iterations=5).fit(train)
    probes = test.subset(np.arange(12), llms=[test.llm_names[3]])
    cost = 0.0
    a = copy.deepcopy(r)
    a._add_llm("new", probes, cost, np.array([2.0] + [1.0] * 11))
    twice = RoutingData(pd.DataFrame({"query_id": ["dup"] + list(probes.query_ids),
                                      "text": [probes.texts[0]] + list(probes.texts)}),
                        ["new"], np.vstack([probes.scores[:1], probes.scores]))
    b = copy.deepcopy(r)
    b._add_llm("new", twice, cost, np.ones(13))
    np.testing.assert_allclose(a.llm_factors_[-1], b.llm_factors_[-1], rtol=1e-3, atol=1e-5)


def test_strategies_return_weights(sim):
    train, _ = sim
    r = make_router("best-single").fit(train)
    rows, w = select_probes(r, train, 10, "informative", seed=0, return_weights=True)
    from sklearn.cluster import KMeans
    from recsys_router.coldstart.selection import score_profiles
    labels = KMeans(n_clusters=10, n_init=3, random_state=0).fit(score_profiles(r, train)).labels_
    # each probe stands for its cluster's size / the probes taken from that cluster (k-means
    # may leave clusters empty: the largest ones then give further probes, 10 in all)
    assert len(rows) == len(set(rows.tolist())) == 10
    raw = np.array([(labels == labels[i]).sum() / (labels[rows] == labels[i]).sum()
                    for i in rows], dtype=float)
    np.testing.assert_allclose(w, raw * len(rows) / raw.sum())
    rows, w = select_probes(r, train, 16, "stratified", seed=0, return_weights=True)
    tasks = np.asarray(train.tasks, dtype=str)
    picked = pd.Series(tasks[rows]).value_counts()
    total = pd.Series(tasks).value_counts()
    raw = np.array([total[t] / picked[t] for t in tasks[rows]])
    np.testing.assert_allclose(w, raw * 16 / raw.sum())
    for s in ("random",):
        _, w = select_probes(r, train, 7, s, return_weights=True)
        np.testing.assert_allclose(w, 1.0)


def test_adaptive_criterion_matches_a_loop(sim):
    """ProbeSession picks argmin_i sum_o w_o Var_{post(i, answer = p_io)}(m), m_l = mean_i p_il."""
    train, _ = sim
    r = make_router("best-single").fit(train)
    s = ProbeSession(r, train.subset(np.arange(40)))
    s.record(0.9 if s.next() % 2 else 0.1)
    s.next()
    s.record(0.3)
    p, w = s.profiles, s.weights
    m = p.mean(axis=0)
    want = np.zeros(len(p))
    for i in range(len(p)):
        for o in range(p.shape[1]):
            post = w * np.exp(-0.5 * ((p[i, o] - p[i]) / 0.25) ** 2)
            post /= post.sum()
            want[i] += w[o] * (post @ (m - post @ m) ** 2)
    np.testing.assert_allclose(s.expected_variance(), want, rtol=1e-6, atol=1e-12)
    nxt = s.next()
    masked = want.copy()
    masked[s.asked] = np.inf
    assert masked[nxt] == pytest.approx(masked.min(), rel=1e-6)


def test_probes_csv_weights_round_trip_through_onboard(tmp_path):
    d = make_synthetic(240, 5, 3, seed=0)
    d.to_long().to_csv(tmp_path / "data.csv", index=False)
    old = d.subset(llms=d.llm_names[:4])
    r = make_router("knn").fit(old)
    export_router(r, tmp_path / "art", train_data=old)
    assert main(["probes", str(tmp_path / "art"), "--data", str(tmp_path / "data.csv"), "--k", "12",
                 "--strategy", "informative", "--seed", "0", "--out", str(tmp_path / "p.csv")]) == 0
    probes = pd.read_csv(tmp_path / "p.csv", dtype={"query_id": str})
    assert "weight" in probes.columns and probes["weight"].mean() == pytest.approx(1.0, abs=1e-5)
    assert probes["weight"].std() > 0
    col = dict(zip(d.query_ids, d.scores[:, 4]))
    answers = probes.assign(score=[col[q] for q in probes["query_id"]], cost=0.001)
    answers.to_csv(tmp_path / "a.csv", index=False)
    assert main(["onboard", str(tmp_path / "art"), "--llm", "new", "--scores", str(tmp_path / "a.csv"),
                 "--data", str(tmp_path / "data.csv"), "--out", str(tmp_path / "new")]) == 0
    art = load_router(tmp_path / "new")
    prov = {p["name"]: p["provenance"] for p in
            json.loads((tmp_path / "new" / "manifest.json").read_text())["llms"]}
    assert prov["new"]["weighted"] is True
    # the same add in process, with the file's weights, gives the exported predictions
    pr = probe_data("new", RoutingData(probes[["query_id", "text"]], ["new"],
                                       answers[["score"]].to_numpy(float),
                                       answers[["cost"]].to_numpy(float)))
    direct = copy.deepcopy(r).add_llm("new", pr, weights=probes["weight"].to_numpy())
    unweighted = copy.deepcopy(r).add_llm("new", pr)
    texts = [str(t) for t in d.texts[:30]]
    got = art.predict(texts)[0][:, -1]
    np.testing.assert_allclose(got, direct.predict_scores(art.to_data(texts))[:, -1], rtol=1e-6)
    assert not np.allclose(got, unweighted.predict_scores(art.to_data(texts))[:, -1])


@pytest.mark.parametrize("weight, msg", [
    ([-1.0] + [1.0] * 9, "weight -1.0 is negative"),
    (["x"] + [1.0] * 9, "weight 'x' is not a finite number"),
    ([float("nan")] + [1.0] * 9, "is not a finite number"),
    ([0.0] * 10, "every weight is 0"),
])
def test_onboard_bad_weights_write_nothing(tmp_path, capsys, weight, msg):
    d = make_synthetic(60, 3, 2, seed=0)
    d.to_long().to_csv(tmp_path / "data.csv", index=False)
    old = d.subset(llms=d.llm_names[:2])
    export_router(make_router("best-single").fit(old), tmp_path / "art", train_data=old)
    pd.DataFrame({"query_id": d.query_ids[:10], "score": 1.0, "weight": weight}) \
        .to_csv(tmp_path / "a.csv", index=False)
    rc = main(["onboard", str(tmp_path / "art"), "--llm", "new", "--scores", str(tmp_path / "a.csv"),
               "--data", str(tmp_path / "data.csv"), "--out", str(tmp_path / "new")])
    err = capsys.readouterr().err
    assert rc == 2 and msg in err and "a.csv" in err
    assert not (tmp_path / "new").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".new")]


def test_listwise_two_tower_is_calibrated_and_onboards_on_the_same_scale():
    """A ranking loss leaves sigmoid(logit) uncalibrated: the router's Platt map makes its mean
    predicted score over the training cells the observed mean (the intercept's optimality
    condition), and the onboarded LLM, fitted in the calibrated space, predicts on its
    probes their (weighted) mean."""
    from recsys_router.models.base.training import rescored
    d = make_synthetic(300, 4, 3, seed=2)
    old = d.subset(np.arange(240), llms=d.llm_names[:3])
    r = make_router("two-tower", max_epochs=3, encoder_options={"dim": 64}).fit(old)
    assert r.logit_calib_ is not None and r.logit_calib_[0] > 0
    y = rescored(old, r.score_scale_).scores
    z = r.predict_logits(old)
    raw = 1 / (1 + np.exp(-z))
    cal = 1 / (1 + np.exp(-(r.logit_calib_[0] * z + r.logit_calib_[1])))
    assert cal.mean() == pytest.approx(float(np.nanmean(y)), abs=1e-4)
    np.testing.assert_allclose(r.predict_scores(old), r.to_data_scale(cal), rtol=1e-9)
    assert abs(raw.mean() - np.nanmean(y)) > 0.01 or abs(r.logit_calib_[0] - 1) > 0.05
    probes = d.subset(np.arange(240, 280), llms=[d.llm_names[3]])
    w = np.linspace(0.5, 1.5, 40)
    r.add_llm(d.llm_names[3], probes, weights=w)
    p = r.predict_scores(d.subset(np.arange(240, 280)))[:, -1]
    target = np.average(rescored(probes, r.score_scale_).scores[:, 0], weights=w)
    assert np.average(p, weights=w) == pytest.approx(target, abs=2e-3)
    # a pointwise loss needs no map
    assert make_router("mf", max_epochs=1).fit(old).logit_calib_ is None


def test_graph_offset_calibrates_the_weighted_probe_mean(sim):
    """graph: the new node's logit offset makes its weighted mean prediction on the probes the
    weighted probe mean (the equal-weight mean would differ)."""
    train, test = sim
    r = make_router("graph", max_epochs=1, hidden=8).fit(train)
    new = test.llm_names[3]
    probes = test.subset(np.arange(20), llms=[new])
    w = np.where(np.arange(20) < 5, 4.0, 0.5)
    r.add_llm(new, probes, weights=w)
    p = r.predict_scores(test.subset(np.arange(20), llms=r.llm_names_))[:, -1]
    y = probes.scores[:, 0].astype(float)
    assert np.average(p, weights=w) == pytest.approx(np.average(y, weights=w), abs=2e-3)
    assert abs(np.average(y, weights=w) - y.mean()) > 0.01
