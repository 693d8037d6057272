"""The Platt map of ranking-loss logits: against a second implementation, and extreme logits."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from recsys_router.models.base.llm_rows import (calibrated_sigmoid, calibrates,
                                                fit_logit_calibration, ranking_calibration)


def test_platt_map_matches_an_unregularised_logistic_regression():
    rng = np.random.default_rng(0)
    z = rng.normal(size=2000) * 3
    y = (rng.random(2000) < 1 / (1 + np.exp(-(0.7 * z + 0.4)))).astype(float)
    a, b = fit_logit_calibration(z, y)
    ref = LogisticRegression(C=1e12, tol=1e-12, max_iter=10_000).fit(z[:, None], y)
    assert np.allclose([a, b], [ref.coef_[0, 0], ref.intercept_[0]], atol=1e-4)


def test_logits_in_a_narrow_band_away_from_zero_fit_the_maximum_likelihood_map():
    """A shift-free listwise loss may leave the logits in a band such as 5.13..5.155: Newton on
    the raw (z, 1) columns diverged to a = 1e-3 (the clamp), b = -4.6e10, every score 0 and every
    LLM tied."""
    rng = np.random.default_rng(0)
    z = 5.13 + 0.025 * rng.random(1050)
    y = (rng.random(1050) < 1 / (1 + np.exp(-40 * (z - 5.1425)))).astype(float)
    a, b = fit_logit_calibration(z, y)
    ref = LogisticRegression(C=1e12, tol=1e-12, max_iter=100_000).fit(z[:, None], y)
    assert np.allclose([a, b], [ref.coef_[0, 0], ref.intercept_[0]], rtol=1e-3), (a, b)
    scores = 1 / (1 + np.exp(-(a * z + b)))
    assert len(np.unique(scores)) == len(np.unique(z))           # the ranking is kept


def _reference(z, y):
    ref = LogisticRegression(C=1e12, tol=1e-12, max_iter=100_000).fit(z[:, None], y)
    return ref.coef_[0, 0], ref.intercept_[0]


@pytest.mark.parametrize("centre,n", [(30.0, 2000), (-40.0, 2000), (100.0, 50_000), (1000.0, 20_000)])
def test_saturated_logits_fit_the_maximum_likelihood_map(centre, n):
    """Logits all past +-30 (sigmoid 1.0 or 0.0 at the identity start): every Newton step
    overshot, the fit stopped at once and returned the identity map, every score tied."""
    rng = np.random.default_rng(1)
    z = centre + 3 * rng.standard_normal(n)
    y = (rng.random(n) < 1 / (1 + np.exp(-1.5 * (z - centre)))).astype(float)
    a, b = fit_logit_calibration(z, y)
    ra, rb = _reference(z - centre, y)                 # the same map, centred for sklearn
    assert np.allclose([a, b + a * centre], [ra, rb], rtol=1e-3, atol=1e-3), (a, b, ra, rb)
    scores = 1 / (1 + np.exp(-(a * z + b)))
    assert abs(scores.mean() - y.mean()) < 0.01 and len(np.unique(scores)) == len(np.unique(z))


@pytest.mark.parametrize("centre", [0.0, 5.0, 20.0, -20.0])
def test_anti_correlated_logits_keep_a_positive_slope_and_a_refitted_intercept(centre):
    """The slope was clamped to 1e-3 but the intercept fitted for the negative slope kept:
    b = 38.45 on a band at 20, every score 1.0."""
    rng = np.random.default_rng(2)
    z = centre + rng.standard_normal(5000)
    y = (rng.random(5000) < 1 / (1 + np.exp(2 * (z - centre)))).astype(float)   # falling with z
    a, b = fit_logit_calibration(z, y)
    assert a > 0
    scores = 1 / (1 + np.exp(-(a * z + b)))
    assert abs(scores.mean() - y.mean()) < 0.01                   # b fits the mean for that slope
    assert len(np.unique(scores)) == len(np.unique(z))


@pytest.mark.parametrize("case", ["separable", "all-ones", "all-zeros"])
def test_separable_or_constant_targets_leave_distinct_finite_scores(case):
    """The slope grew without limit on separable targets (a = 5409: 38 distinct scores of 1,000
    logits), and constant targets pushed b until the scores tied."""
    rng = np.random.default_rng(3)
    z = rng.standard_normal(1000) * 2
    y = {"separable": (z > 0.1).astype(float), "all-ones": np.ones(1000),
         "all-zeros": np.zeros(1000)}[case]
    a, b = fit_logit_calibration(z, y)
    assert np.isfinite([a, b]).all() and a > 0
    scores = 1 / (1 + np.exp(-(a * z + b)))
    assert len(np.unique(scores)) == len(np.unique(z))
    if case == "separable":   # still the steep map the data asks for, within the tie-free range
        assert ((scores > 0.5) == (z > 0.1)).mean() > 0.99


@pytest.mark.parametrize("case", ["outlier", "student-t"])
def test_a_far_out_logit_or_a_heavy_tail_does_not_flatten_the_map(case):
    """The tie-free range was checked on the single most extreme logit: one cell at z = 100
    among 200,000 took the slope from 2 to 0.25, squashing every other score."""
    rng = np.random.default_rng(4)
    z = rng.standard_normal(200_000) if case == "outlier" else rng.standard_t(5, 200_000)
    y = 1 / (1 + np.exp(-2 * z))                       # soft targets: the truth is a = 2, b = 0
    if case == "outlier":
        z, y = np.append(z, 100.0), np.append(y, 1.0)
    a, b = fit_logit_calibration(z, y)
    assert abs(a - 2) < 0.01 and abs(b) < 0.01, (a, b)


def test_rare_positives_keep_the_maximum_likelihood_intercept():
    """The intercept was clipped to +-13.8 at the mean logit: with a mean target of 1.5e-4
    the mean score came out 175 times too high."""
    rng = np.random.default_rng(5)
    z = rng.standard_normal(100_000)
    y = 1 / (1 + np.exp(-(8 * z - 30)))
    a, b = fit_logit_calibration(z, y)
    assert abs(a - 8) < 0.05 and abs(b + 30) < 0.2, (a, b)
    assert abs((1 / (1 + np.exp(-(a * z + b)))).mean() / y.mean() - 1) < 0.05


def test_extreme_logits_fit_without_overflow_warnings():
    """Logits of +-800 (a sharp ranking loss) overflow exp(); the fit stays finite and quiet."""
    z = np.array([-800.0, -500.0, -1.0, 0.0, 1.0, 500.0, 800.0])
    y = np.array([0.0, 0.0, 0.2, 0.5, 0.9, 1.0, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a, b = fit_logit_calibration(z, y)
    assert np.isfinite([a, b]).all() and a > 0


def _fit_cli(tmp_path, kind: str):
    """``recsys-router fit`` of configs/models/mf.yaml on tiny synthetic data with ``kind``."""
    from pathlib import Path

    from recsys_router.lightning_cli import build_lightning_cli
    root = Path(__file__).resolve().parents[1]
    args = ["-c", str(root / "configs/models/mf.yaml"), "-c", str(root / "configs/data/synthetic.yaml"),
            "--data.init_args.dataset_options={n_queries: 300, n_llms: 5, n_topics: 3, seed: 0}",
            "--data.init_args.encoder_options={dim: 32}", "--trainer.max_epochs=2",
            f"--model.init_args.loss.init_args.kind={kind}", "--seed_everything=0",
            f"--trainer.default_root_dir={tmp_path}", "--trainer.enable_progress_bar=false",
            "--trainer.enable_model_summary=false", "--trainer.logger=false",
            f"--checkpoint.dirpath={tmp_path / 'ckpt'}"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cli = build_lightning_cli(args, run=False)
        cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    return cli


def _router_val_metrics(cli) -> dict:
    """The routing metrics of the router the trained module exports, on the validation split."""
    from recsys_router.models.base.eval_metrics import epoch_metrics
    router = cli.model.to_router(cli.datamodule)
    val = cli.datamodule.splits["val"]
    return {f"val/{k}": float(v) for k, v in epoch_metrics(
        router.predict_scores(val), val.scores, val.costs, router.predict_costs(val)).items()}, router


def test_a_ranking_loss_is_validated_as_its_exported_router_routes(tmp_path):
    """``val/aiq`` of a listwise or utility module scored ``sigmoid(logit)``, while its exported
    router (and ``tune``'s best trial, once exported) routes by Platt-scaled logits: the tuned
    value was not the artifact's."""
    for kind in ("utility", "listwise"):
        cli = _fit_cli(tmp_path / kind, kind)
        want, router = _router_val_metrics(cli)
        assert router.logit_calib_ is not None
        got = {k: float(v) for k, v in cli.trainer.callback_metrics.items() if k in want}
        assert got.keys() == want.keys() and "val/aiq" in got
        assert all(abs(got[k] - want[k]) < 1e-6 for k in want), (kind, got, want)


def test_a_pointwise_loss_is_validated_on_its_sigmoid_as_before(tmp_path):
    cli = _fit_cli(tmp_path, "bce")
    want, router = _router_val_metrics(cli)
    assert router.logit_calib_ is None
    got = {k: float(v) for k, v in cli.trainer.callback_metrics.items() if k in want}
    assert all(abs(got[k] - want[k]) < 1e-6 for k in want), (got, want)


def test_the_sanity_check_before_training_fits_no_map(tmp_path, monkeypatch):
    """Lightning's two sanity-check batches are scored and discarded: a map fitted for them
    was a whole forward pass over the train split for nothing."""
    from recsys_router.models.base.router_module import RouterModule
    calls = []
    real = RouterModule._train_logit_calibration

    def counted(self):
        calls.append(bool(self.trainer.sanity_checking))
        return real(self)
    monkeypatch.setattr(RouterModule, "_train_logit_calibration", counted)
    _fit_cli(tmp_path, "listwise")
    assert calls == [False, False]          # one per validation epoch of the two, none for the check


class _RowsNet:
    """Stands for a network exposing LLM rows (the attributes ``supports_rows`` looks for)."""
    def llm_rows(self):
        raise AssertionError("not called")

    def score_rows(self, x, rows):
        raise AssertionError("not called")


def test_one_rule_decides_which_networks_get_a_platt_map():
    """The exported router and the module's validation epochs decide by one predicate (they
    each wrote their own): ranking losses on networks with LLM rows only."""
    net = _RowsNet()
    assert [calibrates(k, net) for k in ("bce", "mse", "listwise", "pairwise", "utility")] == \
        [False, False, True, True, True]
    assert not calibrates("listwise", object())           # no LLM rows: no map


def test_ranking_calibration_fits_only_where_the_rule_says_and_calibrated_sigmoid_applies_it():
    rng = np.random.default_rng(6)
    z = rng.standard_normal((400, 3))
    y = 1 / (1 + np.exp(-(1.5 * z + 0.5)))
    called = []

    def logits():
        called.append(1)
        return z
    assert ranking_calibration("bce", _RowsNet(), logits, y, seed=0) is None and not called
    ab = ranking_calibration("listwise", _RowsNet(), logits, y, seed=0)
    np.testing.assert_array_equal(ab, fit_logit_calibration(z, y, seed=0))
    np.testing.assert_allclose(ab, [1.5, 0.5], atol=1e-6)
    # by hand: sigmoid(2 * 0 - 2) = 1 / (1 + e^2), sigmoid(2 * 1 - 2) = 1/2; no map: sigmoid(z)
    np.testing.assert_allclose(calibrated_sigmoid(np.float32([0, 1]), np.array([2.0, -2.0])),
                               [1 / (1 + np.exp(2.0)), 0.5], rtol=1e-15)
    np.testing.assert_allclose(calibrated_sigmoid([0.0, np.log(3.0)], None), [0.5, 0.75], rtol=1e-15)
    assert calibrated_sigmoid(np.float32([0.0]), None).dtype == np.float64


def _ml_intercept(u, y, a):
    """The maximum-likelihood intercept for slope ``a``, independently: the root of the score
    equation ``sum sigmoid(a u + b) = sum y`` (increasing in ``b``) by bisection."""
    from scipy.optimize import brentq
    from scipy.special import expit
    return brentq(lambda b: float(np.sum(expit(a * u + b)) - np.sum(y)), -1e3, 1e3, xtol=1e-13)


def test_the_warm_started_slope_shrink_gives_the_cold_start_map(monkeypatch):
    """Each slope-shrink pass refitted the intercept from the mean target's logit; it now starts
    from the previous pass's ``b``. On separable targets (many passes) the map equals one whose
    every intercept is solved from scratch, independently."""
    import recsys_router.models.base.llm_rows as lr
    rng = np.random.default_rng(7)
    z = rng.standard_normal(20_000) * 3 + 1
    y = (z > 1.5).astype(float)
    starts = []
    real = lr._platt_intercept

    def spy(u, yy, a, b0=None):
        starts.append(b0)
        return real(u, yy, a, b0)
    monkeypatch.setattr(lr, "_platt_intercept", spy)
    a_got, b_got = lr.fit_logit_calibration(z, y)
    assert len(starts) > 5 and starts[0] is None and all(s is not None for s in starts[1:])
    # the cold-start reference: the same standardisation, first slope and shrink rule
    mu, sd = z.mean(), z.std()
    u = (z - mu) / sd
    u_lo, u_hi = np.quantile(u, [0.001, 0.999])
    a = max(lr._platt_newton(u, y, 1e-10 * len(u))[0], 1e-3)
    for _ in range(200):
        b = _ml_intercept(u, y, a)
        if a * u_hi + b <= 35.0 and a * u_lo + b >= -700.0:
            break
        a = max(a * 0.9, 1e-3)
    b = float(np.clip(b, -700.0 - a * u_lo, 35.0 - a * u_hi))
    np.testing.assert_allclose([a_got, b_got], [a / sd, b - a * mu / sd], rtol=1e-8)


@pytest.mark.parametrize("start", ["default", "zero", "previous slope's"])
def test_the_intercept_fit_reaches_the_maximum_likelihood_from_a_given_start(start):
    """``b0``: the mean target's logit (default), or a start such as the intercept of the
    slope one shrink pass before (``a / 0.9``), as the slope-shrink loop passes it."""
    from recsys_router.models.base.llm_rows import _platt_intercept
    rng = np.random.default_rng(8)
    u = rng.standard_normal(5000)
    y = (rng.random(5000) < 1 / (1 + np.exp(-(3 * u - 2)))).astype(float)
    for a in (0.5, 3.0, 12.0):
        b0 = {"default": None, "zero": 0.0, "previous slope's": _ml_intercept(u, y, a / 0.9)}[start]
        assert abs(_platt_intercept(u, y, a, b0) - _ml_intercept(u, y, a)) < 1e-7, (a, b0)
