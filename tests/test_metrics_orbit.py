"""ORBIT metrics: hand-worked budget sweep, nAUC (code and paper), QNC, RCI; the vectorised
sweep checked against a per-budget loop over recsys_router.policies.budget_policy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from recsys_router.errors import DataValidationError
from recsys_router.metrics import (DIRECTIONS, budget_choices, budget_grid, budget_sweep,
                                   nauc_code, nauc_paper, orbit_metrics, pareto_front, peak_score,
                                   qnc, rci)
from recsys_router.policies import budget_policy

# 3 queries x 2 LLMs: true scores/costs and a router's predictions
S = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])
C = np.array([[1.0, 3.0], [2.0, 4.0], [1.0, 3.0]])
PS = np.array([[0.9, 0.2], [0.3, 0.8], [0.6, 0.5]])
PC = np.array([[1.0, 3.0], [1.0, 3.0], [1.0, 3.0]])


def test_budget_grid():
    assert budget_grid(PC).tolist() == [1.0, 3.0]
    many = np.arange(250, dtype=float).reshape(125, 2)
    g = budget_grid(many)
    assert g.size == 100 and g[0] == 0.0 and g[-1] == 249.0
    assert g[1] == pytest.approx(249.0 / 99)          # linear quantile of 0..249 at 1/99


def test_budget_sweep_by_hand():
    cv = budget_sweep(PS, PC, S, C)
    # C=1: only LLM 0 fits -> costs 1, 2, 1 and scores 1, 0, 0
    # C=3: argmax predicted -> LLM 0, 1, 0 -> costs 1, 4, 1 and scores 1, 1, 0
    assert cv.budgets.tolist() == [1.0, 3.0]
    assert cv.costs == pytest.approx([4 / 3, 2.0])
    assert cv.qualities == pytest.approx([1 / 3, 2 / 3])
    assert cv.last_choices.tolist() == [0, 1, 0]


def test_orbit_metrics_by_hand():
    r = orbit_metrics(PS, PC, S, C)
    # best single: LLM 1, quality 2/3, mean cost 10/3
    assert (r["best_single_index"], r["best_single_quality"], r["best_single_cost"]) == \
        pytest.approx((1, 2 / 3, 10 / 3))
    assert r["front"] == pytest.approx(np.array([[4 / 3, 1 / 3], [2.0, 2 / 3]]))
    # code: (4/3, 1/3), (2, 2/3), (10/3, 2/3) / (10/3) -> x = .4, .6, 1
    #   area = .2 * (1/3 + 2/3) / 2 + .4 * 2/3 = 0.1 + 0.2666... = 11/30
    assert r["nauc"] == pytest.approx(11 / 30)
    # paper: (2 - 4/3) * (1/3 + 2/3) / 2 / (2 - 4/3) = 1/2
    assert r["nauc_paper"] == pytest.approx(0.5)
    assert r["peak"] == pytest.approx(2 / 3)
    assert (r["qnc"], r["rqnc"], r["qnc_reached"]) == pytest.approx((2.0, 0.6, True))
    assert (r["qnc_front"], r["rqnc_front"]) == pytest.approx((2.0, 0.6))
    # at C=3 query 2 goes to LLM 0 (score 0) while LLM 1 scores 1 -> 1 of 3 queries
    assert r["rci"] == pytest.approx(1 / 3) and r["rci_per_query"] == pytest.approx(1 / 3)
    assert r["quality_at_max_budget"] == pytest.approx(2 / 3)
    assert r["cost_at_max_budget"] == pytest.approx(2.0)


def test_oracle_sweep_by_hand():
    # predictions = truth: C=1 -> LLM 0 everywhere; C=3 -> best true score (cheapest on ties)
    r = orbit_metrics(S, C, S, C)
    assert r["curve"].budgets.tolist() == [1.0, 2.0, 3.0, 4.0]
    # C=2 also admits LLM 0 of query 1 (cost 2): same picks; C=3 admits LLM 1 of rows 0, 2
    assert r["curve"].qualities == pytest.approx([1 / 3, 1 / 3, 2 / 3, 1.0])
    assert r["curve"].costs == pytest.approx([4 / 3, 4 / 3, 2.0, 8 / 3])
    assert r["rci"] == 0.0 and r["peak"] == 1.0
    assert r["rqnc"] == pytest.approx(2.0 / (10 / 3))


def test_qnc_unreached():
    # a router predicting LLM 0 is always better never reaches LLM 1's quality
    ps = np.tile([1.0, 0.0], (3, 1))
    r = orbit_metrics(ps, PC, S, C)
    assert not r["qnc_reached"] and math.isnan(r["qnc"]) and math.isnan(r["rqnc"])
    assert not r["qnc_front_reached"]
    # a single-point front has no width: the paper's nAUC is undefined
    assert math.isnan(r["nauc_paper"])
    # code variant: (4/3, 1/3) and (10/3, 1/3) -> x = .4, 1 -> 0.6 * 1/3
    assert r["nauc"] == pytest.approx(0.2)
    assert qnc(np.array([[1.0, 0.5]]), 0.6, 2.0) == (pytest.approx(math.nan, nan_ok=True),) * 2 + (False,)


def test_pareto_front_strictly_rising_and_stable():
    f = pareto_front([2.0, 1.0, 1.0, 3.0, 4.0], [0.5, 0.4, 0.6, 0.6, 0.7])
    # sorted (stable): (1, .4), (1, .6), (2, .5), (3, .6), (4, .7) -> keep .4, .6, .7
    assert f.tolist() == [[1.0, 0.4], [1.0, 0.6], [4.0, 0.7]]


def test_nauc_and_peak_helpers_by_hand():
    front = np.array([[1.0, 0.5], [2.0, 1.0]])
    # (1, .5), (2, 1), (4, 1) / 4: .25 * .75 + .5 * 1 = 0.6875
    assert nauc_code(front, 4.0, 1.0) == pytest.approx(0.6875)
    assert nauc_paper(np.array([[1.0, 0.5], [3.0, 1.0]])) == pytest.approx(0.75)
    assert peak_score([0.1, 0.7, 0.3]) == 0.7


def test_rci_variants_differ_where_expected():
    s = np.array([[1.0, 1.0, 0.0]])
    c = np.array([[1.0, 2.0, 5.0]])
    # chosen LLM 1 is a best LLM but dearer than LLM 0 on this query -> counts per query;
    # ORBIT's code only counts the globally dearest LLM (LLM 2) -> fine there
    assert rci(s, c, np.array([1])) == 1.0
    assert rci(s, c, np.array([1]), variant="orbit_code") == 0.0
    # only the dearest LLM is best and it is chosen: fine in both
    s2, c2 = np.array([[0.0, 0.0, 1.0]]), np.array([[1.0, 2.0, 5.0]])
    assert rci(s2, c2, np.array([2])) == 0.0 and rci(s2, c2, np.array([2]), variant="orbit_code") == 0.0
    v, flags = rci(S, C, np.array([0, 1, 0]), per_query=True)
    assert flags.tolist() == [False, False, True] and v == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="variant"):
        rci(S, C, np.array([0, 1, 0]), variant="paper")


def test_tie_breaks_cheapest_vs_orbit_first():
    ps = np.array([[0.5, 0.5]])
    pc = np.array([[3.0, 1.0]])
    assert budget_choices(ps, pc, [3.0, 0.5]).tolist() == [[1, 1]]
    # ORBIT's code: first column among ties, column 0 when nothing fits
    assert budget_choices(ps, pc, [3.0, 0.5], tie_break="first").tolist() == [[0, 0]]


@pytest.mark.parametrize("seed", range(4))
def test_vectorised_sweep_matches_budget_policy_loop(seed):
    rng = np.random.default_rng(seed)
    n, m = 300, 6
    ps = np.round(rng.random((n, m)), 1)                   # many ties
    pc = rng.choice([0.1, 0.2, 0.5, 1.0, 2.0], size=(n, m)) * (1 + (seed % 2) * rng.random((n, m)))
    s, c = rng.random((n, m)), rng.random((n, m))
    cv = budget_sweep(ps, pc, s, c)
    assert cv.budgets.size == min(100, np.unique(pc).size)
    rows = np.arange(n)
    ch_first = budget_choices(ps, pc, cv.budgets, tie_break="first")
    for k, b in enumerate(cv.budgets):  # second implementation: one policy call per budget
        ch = budget_policy(ps, pc, b)
        assert cv.costs[k] == pytest.approx(c[rows, ch].mean())
        assert cv.qualities[k] == pytest.approx(s[rows, ch].mean())
        orbit = np.argmax(np.where(pc <= b, ps, -np.inf), axis=1)   # ORBIT's own expression
        assert np.array_equal(ch_first[:, k], orbit)
    assert np.array_equal(cv.last_choices, budget_policy(ps, pc, cv.budgets[-1]))
    below = budget_choices(ps, pc, [pc.min() / 2])[:, 0]
    assert np.array_equal(below, budget_policy(ps, pc, pc.min() / 2))


def test_directions_and_errors():
    for k in ("nauc", "nauc_paper", "peak"):
        assert DIRECTIONS[k] == "higher"
    for k in ("qnc", "rqnc", "rci", "rci_per_query"):
        assert DIRECTIONS[k] == "lower"
    with pytest.raises(DataValidationError, match="pred_costs has shape"):
        budget_sweep(PS, PC[:2], S, C)
    with pytest.raises(ValueError, match="tie_break"):
        budget_sweep(PS, PC, S, C, tie_break="coin")


def test_random_tie_break_is_seeded_and_stays_among_the_best():
    rng = np.random.default_rng(0)
    ps = rng.integers(0, 2, size=(500, 4)).astype(float)      # many ties
    pc = np.tile([1.0, 2.0, 3.0, 4.0], (500, 1))
    a = budget_choices(ps, pc, [4.0], tie_break="random", seed=3)[:, 0]
    b = budget_choices(ps, pc, [4.0], tie_break="random", seed=3)[:, 0]
    assert np.array_equal(a, b)
    assert np.all(ps[np.arange(500), a] == ps.max(axis=1))
    # among rows where all four tie, every LLM gets picked sometimes
    all_tied = (ps == ps[:, :1]).all(axis=1)
    assert set(a[all_tied].tolist()) == {0, 1, 2, 3}


def test_oracle_close_to_orbit_anchor_on_routerbench():
    """ORBIT's own oracle on routerbench_zs (shared/ANCHORS.md, 80% test split):
    nAUC 0.9519, Peak 0.975, rQNC 0.0346, RCI 0.120. Our split differs, so a band."""
    import glob

    import pandas as pd

    from conftest import shared_path
    folder = shared_path("routerbench_zs")
    df = pd.concat([pd.read_csv(f) for f in sorted(glob.glob(str(folder / "*.csv")))],
                   ignore_index=True)
    llms = list(df.columns[4:15])
    s = df[llms].to_numpy(float)
    c = df[[f"{x}|total_cost" for x in llms]].to_numpy(float)
    ok = np.isfinite(s).all(axis=1) & np.isfinite(c).all(axis=1)
    assert ok.sum() == 3150
    test = np.random.default_rng(0).permutation(3150)[630:]
    s, c = s[ok][test], c[ok][test]
    r = orbit_metrics(s, c, s, c, tie_break="random", seed=0)
    assert llms[r["best_single_index"]] == "gpt-4-1106-preview"
    assert 0.94 < r["nauc"] < 0.965 and 0.97 < r["peak"] < 0.98
    assert 0.03 < r["rqnc"] < 0.04 and 0.09 < r["rci"] < 0.15


def test_budget_choices_in_row_blocks_equal_the_policy_per_budget(monkeypatch):
    # blocks of 7 rows (the (rows x LLMs x budgets) mask bounded) give what budget_policy
    # gives budget by budget on the whole matrix
    import recsys_router.metrics.orbit as orbit
    rng = np.random.default_rng(4)
    ps, pc = rng.random((50, 6)).round(1), rng.random((50, 6)).round(1)
    grid = budget_grid(pc)
    monkeypatch.setattr(orbit, "_CHUNK_CELLS", 7 * 6 * grid.size)
    got = budget_choices(ps, pc, grid)
    assert got.shape == (50, grid.size)
    for j, c in enumerate(grid):
        assert got[:, j].tolist() == budget_policy(ps, pc, c).tolist()


def test_pareto_front_refuses_non_finite_points_and_nauc_paper_of_no_front_is_nan():
    """Review M-1: pareto_front dropped NaN points silently (an all-NaN curve gave an empty
    front) and nauc_paper of that empty front raised a bare IndexError."""
    with pytest.raises(DataValidationError, match=r"qualities\[1\] is nan"):
        pareto_front([1.0, 2.0], [0.5, np.nan])
    with pytest.raises(DataValidationError, match=r"costs\[0\] is nan"):
        pareto_front([np.nan, 2.0], [0.5, 0.7])
    with pytest.raises(DataValidationError, match=r"costs\[1\] is inf"):
        pareto_front([1.0, np.inf], [0.5, 0.7])
    assert math.isnan(nauc_paper(np.empty((0, 2))))
    with pytest.raises(DataValidationError, match=r"front row 1 is \[2.0, nan\]"):
        nauc_paper(np.array([[1.0, 0.5], [2.0, np.nan]]))
    # finite fronts unchanged: area of (1, .5)-(3, 1) is 2 * .75 = 1.5, over width 2
    assert nauc_paper(np.array([[1.0, 0.5], [3.0, 1.0]])) == pytest.approx(0.75)
