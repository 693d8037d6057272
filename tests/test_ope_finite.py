"""Off-policy estimates are finite numbers or an error, never a silent inf/NaN (review s23
FEED r3), and a SNIPS interval counts the resamples where SNIPS is undefined instead of
dropping them (r4). Values are computed by hand or by a plain loop over the same draws."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recsys_router.feedback import ope
from recsys_router.feedback.ope import check_propensities, effective_sample_size, estimate_all
from recsys_router.feedback.report import ope_markdown

ONE_HOT = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])


@pytest.mark.parametrize("tiny", [1e-320, 1e-200, 1e-13])
def test_a_propensity_below_the_floor_is_refused_naming_the_row(tiny):
    assert ope.PROPENSITY_FLOOR == 1e-12
    with pytest.raises(ValueError, match=rf"row 2: propensity {tiny!r} is below 1e-12"):
        check_propensities([0.5, 0.5, tiny])
    with pytest.raises(ValueError, match=rf"row 2: propensity {tiny!r} is below 1e-12"):
        estimate_all([1.0, 0.0, 0.5], [0.5, 0.5, tiny], ONE_HOT, [0, 1, 0],
                     q=np.full((3, 2), 0.5), n_boot=50, seed=0)


def test_the_floor_itself_gives_finite_estimates_by_hand():
    # w = [1 / 1e-12, 0, 1 / 0.5] = [1e12, 0, 2]; r = [1, 0, 0.5]
    out = estimate_all([1.0, 0.0, 0.5], [1e-12, 0.5, 0.5], ONE_HOT, [0, 1, 0], n_boot=0)
    assert out["ips"]["value"] == pytest.approx((1e12 + 1.0) / 3, rel=1e-12)
    assert out["snips"]["value"] == pytest.approx((1e12 + 1.0) / (1e12 + 2.0), rel=1e-12)
    # (1e12 + 2)^2 / (1e24 + 4)
    assert out["ess"] == pytest.approx((1e12 + 2.0) ** 2 / (1e24 + 4.0), rel=1e-12)


@pytest.mark.parametrize("given", [[0.5, True, 0.5], np.array([0.5, True, 0.5], dtype=object),
                                   pd.Series([0.5, True, 0.5], dtype=object)])
def test_a_boolean_propensity_is_refused_not_read_as_one(given):
    with pytest.raises(ValueError, match=r"row 1: propensity True is a boolean"):
        check_propensities(given)
    with pytest.raises(ValueError, match=r"row 1: propensity True is a boolean"):
        estimate_all([1.0, 0.0, 0.5], given, ONE_HOT, [0, 1, 0], n_boot=0)


def test_effective_sample_size_of_huge_weights_does_not_overflow():
    # (1e200 + 1e200)^2 / (1e400 + 1e400) = 2, though 1e200 squared is past float64
    assert effective_sample_size([1e200, 1e200, 0.0]) == pytest.approx(2.0, rel=1e-12)
    # (3 + 1)^2 / (9 + 1) = 1.6, unchanged for ordinary weights
    assert effective_sample_size([3.0, 1.0]) == pytest.approx(1.6, rel=1e-15)
    assert effective_sample_size([0.0, 0.0]) == 0.0
    assert np.isnan(effective_sample_size([np.inf, 1.0]))


def test_a_weighted_outcome_past_float64_is_an_error_naming_the_row():
    # w_0 = 1e12 (propensity 1e-12), r_0 = 1e300: w r = 1e312 is not a float64
    with pytest.raises(ValueError, match=r"row 0: IPS's term .* not a finite number .*"
                                         r"importance weight 1000000000000.0, outcome 1e\+300"):
        estimate_all([1e300, 0.0, 0.0], [1e-12, 0.5, 0.5], ONE_HOT, [0, 1, 0], n_boot=0)


def test_an_average_past_float64_is_an_error_not_inf():
    # every term 1e308 is finite, their sum (2e308) is not
    with pytest.raises(ValueError, match=r"IPS estimate: the average of per-decision terms as "
                                         r"large as 1e\+308 overflows float64"):
        estimate_all([1e308, 1e308], [1.0, 1.0], np.array([[1.0, 0.0], [1.0, 0.0]]), [0, 0],
                     n_boot=0)


def test_percentile_interval_counts_undefined_resamples_at_the_worst_case():
    b = np.array([0.1, 0.2, 0.3, 0.4, 0.0])
    # all defined: numpy's linear percentile (positions 1 and 3 of the sorted five)
    assert ope.percentile_interval(b, np.ones(5, bool), 0.5) == (0.1, 0.3)
    # the 0.0 undefined: lower bound at position 1 of [-inf, .1, .2, .3, .4] = 0.1,
    # upper at position 3 of [.1, .2, .3, .4, +inf] = 0.4 (dropping it gave [0.175, 0.325])
    assert ope.percentile_interval(b, np.array([1, 1, 1, 1, 0], bool), 0.5) == (0.1, 0.4)
    # two undefined: position 1 of [-inf, -inf, ...] is undefined
    lo, hi = ope.percentile_interval(b, np.array([1, 1, 1, 0, 0], bool), 0.5)
    assert np.isnan(lo) and np.isnan(hi)


def _snips_boots(r, w, n, n_boot, seed):
    """SNIPS of each resample by a plain loop over the draws estimate_all makes."""
    idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    vals, defined = [], []
    for ix in idx:
        num = sum(w[i] * r[i] for i in ix)
        den = sum(w[i] for i in ix)
        vals.append(num / den if den > 0 else 0.0)
        defined.append(den > 0)
    return np.array(vals), np.array(defined)


def test_snips_interval_of_the_reviewers_case_is_undefined_and_counted():
    # one decision of 40 in overlap (ESS 1): resamples that miss it have no SNIPS
    n = 40
    a = np.zeros(n, int)
    a[0] = 1
    pi = np.tile([0.0, 1.0], (n, 1))
    r = np.zeros(n)
    r[0] = 0.7
    r[1:] = np.linspace(0, 1, n - 1)
    out = estimate_all(r, np.full(n, 0.5), pi, a, n_boot=1000, seed=0)
    _, defined = _snips_boots(r, np.where(a == 1, 2.0, 0.0), n, 1000, 0)
    assert out["snips"]["undefined_resamples"] == int((~defined).sum()) == 342
    assert np.isnan(out["snips"]["lo"]) and np.isnan(out["snips"]["hi"])
    assert out["snips"]["value"] == pytest.approx(0.7)
    assert out["ips"]["undefined_resamples"] == 0 and np.isfinite(out["ips"]["lo"])


def test_snips_interval_with_few_undefined_resamples_is_widened_not_conditioned():
    # four decisions of 40 in overlap: 14 of 1000 resamples draw none of them
    n = 40
    a = np.zeros(n, int)
    a[:4] = 1
    pi = np.tile([0.0, 1.0], (n, 1))
    r = np.linspace(0, 1, n)
    w = np.where(a == 1, 2.0, 0.0)
    out = estimate_all(r, np.full(n, 0.5), pi, a, n_boot=1000, seed=0)
    vals, defined = _snips_boots(r, w, n, 1000, 0)
    assert out["snips"]["undefined_resamples"] == int((~defined).sum()) == 14
    # worst case: the undefined below every value for the lower bound, above for the upper
    big = 1e9
    lo = np.quantile(np.where(defined, vals, -big), 0.025)
    hi = np.quantile(np.where(defined, vals, big), 0.975)
    assert out["snips"]["lo"] == pytest.approx(lo, abs=1e-12)
    assert out["snips"]["hi"] == pytest.approx(hi, abs=1e-12)
    dropped = np.quantile(vals[defined], [0.025, 0.975])
    assert lo <= dropped[0] and hi >= dropped[1] and (lo, hi) != tuple(dropped)


def test_the_report_says_how_many_resamples_were_undefined():
    rows = [{"outcome": "score", "estimator": e, "value": v, "lo": lo, "hi": hi, "ess": 1.0,
             "n": 40, "refit": 0, "unsupported": 0, "biased": False, "undefined_resamples": u}
            for e, v, lo, hi, u in (("ips", 0.035, 0.0, 0.1, 0),
                                    ("snips", 0.7, np.nan, np.nan, 342))]
    text = ope_markdown(pd.DataFrame(rows), "t", n_boot=1000)
    assert "| score | SNIPS | 0.7000 | undefined |" in text
    assert "SNIPS (score): 342 of 1000 bootstrap resamples hold no decision" in text
    assert "interval is undefined" in text and "[nan" not in text
