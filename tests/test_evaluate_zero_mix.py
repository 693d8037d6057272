"""evaluate() records the zero router through its own budget mix (its ``route_indices``),
not through a policy over its predictions (which are best-single's: the mean-score row and
the mean costs).

The tiny case: 4 LLMs with the same score and cost on every query, a (0.5, cost 1),
b (0.55, cost 2), c (0.9, cost 3), d (0.8, cost 4). The non-decreasing hull is a -> c (b lies
below the a-c edge, d scores less than c). At a per-query budget of 2.0 the zero router
sends each query to c with probability (2 - 1) / (3 - 1) = 0.5 and to a otherwise: mean
score 0.5 + 0.4 f and mean cost 1 + 2 f for the fraction f sent to c (0.70 and 2.0 at
f = 0.5). A budget policy over the predictions picks b at 2.0: 0.55.
"""

import numpy as np
import pandas as pd
import pytest

from recsys_router.data import RoutingData
from recsys_router.evaluation.runner import EvalConfig, evaluate

N_TRAIN, N_TEST = 400, 400


def _data():
    n = N_TRAIN + N_TEST
    s = np.tile([0.5, 0.55, 0.9, 0.8], (n, 1))
    c = np.tile([1.0, 2.0, 3.0, 4.0], (n, 1))
    split = np.where(np.arange(n) < N_TRAIN, "train", "test")
    q = pd.DataFrame({"query_id": [f"q{i}" for i in range(n)], "split": split})
    return RoutingData(q, list("abcd"), s, c)


@pytest.fixture(scope="module")
def result():
    return evaluate(_data(), EvalConfig(routers=["zero", "best-single"],
                                        protocols=["orbit", "routereval"],
                                        split_column="split", fallback=False), progress=False)


def _budget_curve(res, router):
    cu = res.curves
    pts = cu[(cu.protocol == "orbit") & (cu.router == router) & (cu.curve == "budget")]
    return {float(v): (float(x), float(y)) for v, x, y in zip(pts.setting_value, pts.x, pts.y)}


def test_zero_budget_point_is_its_hull_mix(result):
    dec = result.decisions
    at2 = dec[(dec.router == "zero") & (dec.protocol == "orbit") & (dec.setting == "budget")
              & (dec.setting_value == 2.0)]
    assert len(at2) == N_TEST
    chosen = at2.llm.astype(str)
    assert set(chosen) == {"a", "c"}                  # only the two hull LLMs around 2.0
    f = float((chosen == "c").mean())
    assert abs(f - 0.5) < 0.1                          # a fair coin per query (400 draws)
    # the costs really paid: each chosen LLM's own cost
    assert at2.cost.tolist() == [1.0 if x == "a" else 3.0 for x in chosen]
    x, y = _budget_curve(result, "zero")[2.0]
    assert y == pytest.approx(0.5 + 0.4 * f) and x == pytest.approx(1.0 + 2.0 * f)
    assert y == pytest.approx(0.70, abs=0.04)          # the mix's 0.70, not best-single's 0.55
    # best-single at the same budget: b alone
    assert _budget_curve(result, "best-single")[2.0] == pytest.approx((2.0, 0.55))


def test_zero_other_points_are_hull_vertices(result):
    curve = _budget_curve(result, "zero")
    assert curve[1.0] == pytest.approx((1.0, 0.5))     # below the mix: the cheapest vertex
    assert curve[3.0] == pytest.approx((3.0, 0.9))     # on c
    assert curve[4.0] == pytest.approx((3.0, 0.9))     # above the top vertex: c, not d
    m = result.metrics
    mu = m[(m.protocol == "routereval") & (m.router == "zero") & (m.metric == "mu_o")]
    assert mu["value"].item() == pytest.approx(0.9)    # no policy: the top hull vertex


def test_zero_under_missing_mask_routes_only_to_observed_llms():
    """With ``missing="mask"`` every query offers only its observed LLMs. The zero router
    was given the whole pool and sent queries to LLMs whose score they lack (recorded as NaN
    scores); each query is now decided among its own observed LLMs. Here c (the top hull
    vertex) is unobserved on every other test query: at budget 3.0 those queries get the
    mix of their own hull, a -> d (b, at slope 0.05 from a, lies below the a-d edge's 0.1),
    and the others c."""
    data = _data()
    s = data.scores.copy()
    hide = np.arange(N_TRAIN, N_TRAIN + N_TEST, 2)
    s[hide, 2] = np.nan
    masked = RoutingData(data.queries, list("abcd"), s, data.costs)
    res = evaluate(masked, EvalConfig(routers=["zero"], protocols=["orbit"], missing="mask",
                                      split_column="split", fallback=False), progress=False)
    dec = res.decisions
    at3 = dec[(dec.router == "zero") & (dec.setting == "budget") & (dec.setting_value == 3.0)]
    assert len(at3) == N_TEST and not at3.score.isna().any()
    by_query = dict(zip(at3.query_id.astype(str), at3.llm.astype(str)))
    hidden = {f"q{i}" for i in hide}
    assert all(by_query[q] != "c" for q in hidden)
    # without c the hull is a (0.5, 1) -> d (0.8, 4): budget 3.0 sends 2/3 of them to d
    got = [by_query[q] for q in hidden]
    assert set(got) == {"a", "d"}
    assert abs(got.count("d") / len(got) - 2 / 3) < 0.1      # 200 draws
    assert {llm for q, llm in by_query.items() if q not in hidden} == {"c"}
