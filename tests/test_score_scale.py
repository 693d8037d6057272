"""Score-scale recognition and transforms: one test per kind on data made to have it."""

import numpy as np
import pytest

from recsys_router.score_scale import ScoreScale, choose_score_scale


def test_binary_scores_stay_as_they_are():
    s = np.array([[0.0, 1.0, np.nan], [1.0, 1.0, 0.0]])
    sc = choose_score_scale(s)
    assert (sc.kind, sc.method) == ("binary", "identity")
    np.testing.assert_array_equal(sc.transform(s), s)


def test_fractions_stay_as_they_are():
    rng = np.random.default_rng(0)
    s = rng.integers(0, 11, size=(50, 6)) / 10.0       # fraction of 10 samples correct
    sc = choose_score_scale(s)
    assert (sc.kind, sc.method) == ("fraction", "identity")
    np.testing.assert_allclose(sc.transform(s), s)


def test_grades_one_to_ten_are_min_max_scaled():
    s = np.array([[1.0, 10.0, 4.0], [7.0, np.nan, 1.0]])
    sc = choose_score_scale(s)
    assert (sc.kind, sc.method) == ("grades", "minmax")
    # by hand: (g - 1) / 9
    np.testing.assert_allclose(sc.transform(s), [[0.0, 1.0, 3 / 9], [6 / 9, np.nan, 0.0]])
    np.testing.assert_allclose(sc.inverse(np.array([0.0, 0.5, 1.0])), [1.0, 5.5, 10.0])


def test_skewed_continuous_scores_are_rank_transformed():
    rng = np.random.default_rng(1)
    s = np.clip(rng.exponential(0.05, size=(400, 5)), 0, 1)   # mostly near 0
    s[0, 0] = np.nan
    sc = choose_score_scale(s)
    assert (sc.kind, sc.method) == ("skewed", "rank")
    t = sc.transform(s)
    obs = ~np.isnan(s)
    # second implementation of the mid-rank CDF: (#below + #equal/2) / n, by sorting
    flat = s[obs]
    ref = np.array([(np.sum(flat < v) + 0.5 * np.sum(flat == v)) / flat.size for v in flat])
    inner = (flat > flat.min()) & (flat < flat.max())    # the extremes are pinned to 0 and 1
    np.testing.assert_allclose(t[obs][inner], ref[inner], atol=1e-12)
    assert t[obs].min() == 0.0 and t[obs].max() == 1.0 and np.isnan(t[0, 0])
    # targets spread over [0, 1]: about uniform, unlike the raw scores
    assert abs(np.median(t[obs]) - 0.5) < 0.02 and np.median(flat) < 0.05
    # order is kept, and the inverse returns the observed values
    np.testing.assert_allclose(sc.inverse(t[obs]), flat, atol=1e-12)


def test_continuous_outside_unit_interval_is_min_max_scaled():
    s = np.linspace(-2.0, 2.0, 30).reshape(6, 5)
    sc = choose_score_scale(s)
    assert (sc.kind, sc.method) == ("continuous", "minmax")
    np.testing.assert_allclose(sc.transform(s), (s + 2.0) / 4.0)


def test_forced_method_and_describe():
    s = np.array([[0.0, 1.0], [1.0, 0.0]])
    sc = choose_score_scale(s, method="rank")
    assert sc.kind == "binary" and sc.method == "rank"
    assert "0/1 scores" in sc.describe()


@pytest.mark.parametrize("bad, msg", [
    (np.full((2, 2), np.nan), "no observed"),
    (np.array([[0.0, np.inf]]), "infinite"),
])
def test_bad_training_scores_give_clear_errors(bad, msg):
    with pytest.raises(ValueError, match=msg):
        choose_score_scale(bad)


def test_unknown_method_is_an_error():
    with pytest.raises(ValueError, match="score transform must be"):
        choose_score_scale(np.zeros((2, 2)), method="log")


def test_state_round_trip_and_hostile_states():
    sc = choose_score_scale(np.clip(np.random.default_rng(2).exponential(0.05, 300), 0, 1))
    back = ScoreScale.from_state(sc.to_state())
    x = np.linspace(0, 1, 17)
    np.testing.assert_allclose(back.transform(x), sc.transform(x))
    for state in ("rank", {"kind": "binary", "method": "exec"},
                  {**sc.to_state(), "knots_x": [1.0, 0.0], "knots_y": [0.0, 1.0]},
                  {**sc.to_state(), "knots_y": [0.0]},
                  {**sc.to_state(), "knots_x": list(range(3000)), "knots_y": list(range(3000))}):
        with pytest.raises(ValueError, match="score scale state"):
            ScoreScale.from_state(state)


@pytest.mark.parametrize("field, value", [
    ("knots_y", [0.0, float("nan"), 1.0]), ("knots_y", [0.0, 0.5, 7.0]),
    ("knots_y", [float("nan")] * 3), ("knots_y", [-0.5, 0.5, 1.0]), ("knots_y", [0.0, 0.8, 0.4]),
    ("skewness", float("nan")), ("n_levels", -1), ("n_levels", 2.5), ("n_levels", True)])
def test_stored_state_with_bad_knots_or_counts_is_refused(field, value):
    state = {"kind": "skewed", "method": "rank", "lo": 0.0, "hi": 1.0,
             "knots_x": [0.0, 0.5, 1.0], "knots_y": [0.0, 0.5, 1.0], "skewness": 2.0,
             "n_levels": 3}
    good = ScoreScale.from_state(state)
    # mid-way between knots 0.5 and 1.0 of x maps mid-way between 0.5 and 1.0 of y
    np.testing.assert_allclose(good.transform(np.array([0.75])), [0.75])
    with pytest.raises(ValueError, match=f"score scale state: {field}"):
        ScoreScale.from_state({**state, field: value})


@pytest.mark.parametrize("kind", ["binary", "fraction", "grades", "skewed"])
def test_lightning_router_trains_on_every_scale_and_predicts_on_it(kind):
    from recsys_router.data import RoutingData
    from recsys_router.datasets.synthetic import make_synthetic
    from recsys_router.registry import make_router
    base = make_synthetic(240, 4, 2, seed=3, binary=False)
    p = base.scores.astype(np.float64)
    s = {"binary": (np.random.default_rng(0).random(p.shape) < p).astype(float),
         "fraction": np.round(p * 10) / 10,
         "grades": 1 + np.round(9 * p),
         "skewed": p ** 8}[kind]
    d = RoutingData(base.queries, base.llms, s.astype(np.float32), base.costs)
    r = make_router("mf", encoder_options={"dim": 32}, max_steps=40, seed=0).fit(d)
    assert r.score_scale_.kind == kind
    pred = r.predict_scores(d)
    assert pred.min() >= s.min() - 1e-9 and pred.max() <= s.max() + 1e-9   # the data's scale
    if kind in ("grades", "skewed"):      # mapped back from [0, 1] targets
        assert pred.max() > 1.0 if kind == "grades" else pred.max() < 1.0
