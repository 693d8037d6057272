"""RouterBench metrics: hand-worked points, hull, AIQ; NDCH cross-checked against scipy."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial import ConvexHull

from recsys_router.errors import DataValidationError
from recsys_router.metrics import (DIRECTIONS, aiq, aiq_code, aiq_many, default_lambdas, hull_value,
                                   interpolate, llm_points, ndch, routerbench_metrics,
                                   shared_domain, wtp_sweep, zero_router)

# 3 queries x 2 LLMs (LLM 0 cheap, LLM 1 dear)
S = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
C = np.array([[1.0, 3.0], [1.0, 3.0], [1.0, 3.0]])
PS = np.array([[0.9, 0.8], [0.2, 0.9], [0.5, 0.6]])


def test_llm_points_by_hand():
    s = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    c = np.array([[1.0, 4.0], [1.0, 2.0], [1.0, 3.0]])
    assert llm_points(s, c) == pytest.approx(np.array([[1.0, 2 / 3], [3.0, 2 / 3]]))


def test_wtp_sweep_by_hand():
    # lambda 0: cheapest everywhere -> (1, 1/3)
    # lambda 10: utilities (8, 5), (1, 6), (4, 3) -> choices 0, 1, 0 -> (5/3, 2/3)
    # lambda 100: (89, 77), (19, 87), (49, 57) -> choices 0, 1, 1 -> (7/3, 1)
    pts = wtp_sweep(PS, C, S, C, [0.0, 10.0, 100.0])
    assert pts == pytest.approx(np.array([[1.0, 1 / 3], [5 / 3, 2 / 3], [7 / 3, 1.0]]))
    # a candidate mask restricting to LLM 0 gives its point at every lambda
    masked = wtp_sweep(PS, C, S, C, [0.0, 100.0], mask=np.array([True, False]))
    assert masked == pytest.approx(np.array([[1.0, 1 / 3], [1.0, 1 / 3]]))


def test_ndch_by_hand():
    pts = np.array([[1, .2], [2, .5], [3, .6], [4, .9], [5, .85], [2, .1], [.5, .05]])
    # (1, .2) is collinear with (.5, .05)-(2, .5); (3, .6) is below (2, .5)-(4, .9);
    # (5, .85) is after the top; (2, .1) shares a cost with a better point
    assert ndch(pts) == pytest.approx(np.array([[.5, .05], [2, .5], [4, .9]]))
    assert ndch(np.array([[1.0, 0.3]])).tolist() == [[1.0, 0.3]]
    # a dominated cheap point with higher quality than everything: hull is that single point
    assert ndch(np.array([[1.0, 0.9], [2.0, 0.5], [3.0, 0.8]])).tolist() == [[1.0, 0.9]]


def _ndch_scipy(points: np.ndarray) -> np.ndarray:
    """Second construction: scipy's hull, vertices on/above the leftmost-rightmost chord,
    then the part from the cheapest vertex up to the highest one."""
    v = points[ConvexHull(points).vertices]
    v = v[np.argsort(v[:, 0])]
    left, right = v[0], v[-1]
    chord = left[1] + (right[1] - left[1]) * (v[:, 0] - left[0]) / (right[0] - left[0])
    upper = v[v[:, 1] >= chord - 1e-12]
    return upper[:int(np.argmax(upper[:, 1])) + 1]


@pytest.mark.parametrize("seed", range(25))
def test_ndch_matches_scipy_convex_hull(seed):
    rng = np.random.default_rng(seed)
    pts = rng.random((int(rng.integers(4, 60)), 2))
    if seed % 2:  # make quality mostly rise with cost, like real routers
        pts[:, 1] = np.sqrt(pts[:, 0]) + 0.1 * pts[:, 1]
    assert ndch(pts) == pytest.approx(_ndch_scipy(pts))


def test_hull_value_extensions():
    h = np.array([[2.0, 0.4], [4.0, 0.8]])
    # below 2: towards (0, 0); between: linear; beyond 4: flat
    assert hull_value(h, [0.0, 1.0, 3.0, 5.0]) == pytest.approx([0.0, 0.2, 0.6, 0.8])


def test_aiq_by_hand():
    h = np.array([[2.0, 0.4], [4.0, 0.8]])
    # on [1, 5]: int_1^2 0.2x dx = 0.3; int_2^4 = 2 * 0.6 = 1.2; int_4^5 0.8 = 0.8 -> 2.3 / 4
    assert aiq(h, (1.0, 5.0)) == pytest.approx(0.575)
    assert aiq(h, (3.0, 3.0)) == pytest.approx(0.6)
    with pytest.raises(ValueError, match="domain"):
        aiq(h, (5.0, 1.0))


def test_aiq_uses_a_shared_domain():
    a, b = np.array([[1.0, 0.5]]), np.array([[2.0, 1.0]])
    assert shared_domain([a, b]) == (1.0, 2.0)
    # a flat at 0.5 on [1, 2]; b rises 0.5 -> 1 from (0, 0) towards (2, 1): mean 0.75
    assert aiq_many([a, b]) == pytest.approx([0.5, 0.75])
    assert aiq_many([a, b], domain=(0.0, 2.0)) == pytest.approx([(0.25 + 0.5) / 2, 0.5])


def test_aiq_code_variant_by_hand():
    a = np.array([[2.0, 0.4], [4.0, 0.8]])
    b = np.array([[1.0, 0.5]])
    # x_max = 4; a: 2 * (0.4 + 0.8) / 2 = 1.2 (+0 for the appended point) -> 0.3
    # b: (1, .5) -> (4, .5): 3 * 0.5 = 1.5 -> 0.375 (nothing below the cheapest point)
    assert aiq_code([a, b]) == pytest.approx([0.3, 0.375])
    assert DIRECTIONS["aiq_code"] == "higher"


def test_zero_router_by_hand():
    s = np.array([[0.0, 0.6, 1.0, 0.5]])
    c = np.array([[1.0, 2.0, 3.0, 2.5]])
    z = zero_router(s, c)
    assert z == pytest.approx(np.array([[1.0, 0.0], [2.0, 0.6], [3.0, 1.0]]))
    # (0.0 + 0.6) / 2 + (0.6 + 1.0) / 2 = 1.1 over a width of 2
    assert aiq(z, (1.0, 3.0)) == pytest.approx(0.55)


def test_interpolate():
    assert interpolate(np.array([[2.0, 1.0], [0.0, 0.0]]), [0.5, 1.0]) == pytest.approx([0.25, 0.5])
    assert np.isnan(interpolate(np.array([[0.0, 0.0], [2.0, 1.0]]), [3.0])).all()


def test_routerbench_metrics_by_hand():
    r = routerbench_metrics(PS, C, S, C, [0.0, 10.0, 100.0])
    # points (1, 1/3), (5/3, 2/3), (7/3, 1) are collinear -> hull = the two ends
    assert r["hull"] == pytest.approx(np.array([[1.0, 1 / 3], [7 / 3, 1.0]]))
    # LLM points (1, 1/3), (3, 2/3); shared domain [1, 3]
    assert r["domain"] == (1.0, 3.0)
    # router: rises 1/3 -> 1 over [1, 7/3] (area 4/3 * 2/3 = 8/9), then flat 1 over [7/3, 3] (2/3)
    assert r["aiq"] == pytest.approx((8 / 9 + 2 / 3) / 2)
    # zero: 1/3 -> 2/3 over [1, 3] -> mean 1/2
    assert r["zero_aiq"] == pytest.approx(0.5)
    # RouterBench's code: x_max = 3; router (1, 1/3) -> (7/3, 1) -> (3, 1): 8/9 + 2/3 over 3;
    # zero hull (1, 1/3), (3, 2/3): 2 * 1/2 = 1 over 3
    assert r["aiq_code"] == pytest.approx((8 / 9 + 2 / 3) / 3)
    assert r["zero_aiq_code"] == pytest.approx(1 / 3)
    assert DIRECTIONS["aiq"] == "higher"


def test_default_lambdas_cover_both_extremes():
    rng = np.random.default_rng(0)
    ps, pc = rng.random((50, 4)), np.tile([0.1, 0.5, 1.0, 2.0], (50, 1))
    lam = default_lambdas(ps, pc, n=30)
    pts = wtp_sweep(ps, pc, ps, pc, lam)
    assert pts[0, 0] == pytest.approx(0.1)                              # always cheapest
    assert pts[-1, 1] == pytest.approx(ps.max(axis=1).mean())           # always best predicted


def test_bad_points():
    with pytest.raises(DataValidationError, match=r"\(k, 2\)"):
        ndch(np.array([1.0, 2.0, 3.0]))
    with pytest.raises(DataValidationError, match="row 1"):
        ndch(np.array([[1.0, 2.0], [np.nan, 1.0]]))
    with pytest.raises(DataValidationError, match="cost >= 0"):
        llm_points(S, -C)


def test_llm_points_mean_cost_over_observed_cells_only():
    """Review M-2: an LLM's cost was averaged over every query, its quality over the queries
    where it was observed. LLM 1 is observed on query 1 only (score 1, cost 4): its point is
    (4, 1), not ((2 + 4) / 2, 1) = (3, 1); LLM 0 is (mean(1, 1), mean(1, 0)) = (1, 0.5)."""
    s = np.array([[1.0, np.nan], [0.0, 1.0]])
    c = np.array([[1.0, 2.0], [1.0, 4.0]])
    assert llm_points(s, c).tolist() == [[1.0, 0.5], [4.0, 1.0]]
    assert zero_router(s, c).tolist() == [[1.0, 0.5], [4.0, 1.0]]
