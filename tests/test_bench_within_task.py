"""benchmarks/bench_within_task.py: its estimators against hand computations and brute force,
and its command line against bad arguments (clean error, nothing written)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.bench_within_task import (centre_rows, eb_task_means, knn_residual,  # noqa: E402
                                          main, r2_loo, realised, ridge_fit)
from recsys_router.models.components.ridge import ridge_loo  # noqa: E402


def test_eb_task_means_by_hand():
    # one LLM, task 0 scores (1, 1, 1, 0), task 1 scores (0, 0, 0, 1); a second LLM all 1
    s = np.array([[1, 1], [1, 1], [1, 1], [0, 1], [0, 1], [0, 1], [0, 1], [1, 1]], float)
    rows = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    means, g, lam = eb_task_means(s, rows, 2)
    # LLM 0: g = 0.5; task means 0.75, 0.25; within SS = 2 tasks x 0.75 over 8 - 2 = 6 dof
    s2 = 1.5 / 6
    tau2 = (4 * 0.25 ** 2 + 4 * 0.25 ** 2) / 8 - s2 * (2 - 1) / 8
    lam0 = s2 / tau2
    assert lam0 == pytest.approx(8.0)
    assert g[0] == pytest.approx(0.5) and lam[0] == pytest.approx(lam0)
    assert means[0, 0] == pytest.approx((3 + lam0 * 0.5) / (4 + lam0))
    assert means[1, 0] == pytest.approx((1 + lam0 * 0.5) / (4 + lam0))
    # LLM 1 never varies: no within-task noise, lambda 0, plain means
    assert lam[1] == pytest.approx(0.0) and means[:, 1] == pytest.approx([1.0, 1.0])
    plain, _, lam_p = eb_task_means(s, rows, 2, shrink=False)
    assert plain[:, 0] == pytest.approx([0.75, 0.25]) and not lam_p.any()


def test_eb_task_means_fall_back_to_overall_where_a_task_never_saw_an_llm():
    s = np.array([[1.0, np.nan], [0.0, 0.5], [1.0, 1.0]])
    plain, g, _ = eb_task_means(s, np.array([0, 1, 1]), 3, shrink=False)
    assert g == pytest.approx([2 / 3, 0.75])
    assert plain[0] == pytest.approx([1.0, 0.75])      # task 0 never saw LLM 1
    assert plain[2] == pytest.approx(g)                # task 2 has no query at all


def test_ridge_fit_fills_missing_residuals_with_zero_and_returns_loo_residuals():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(25, 4))
    y = x @ rng.normal(size=(4, 3)) + rng.normal(0, 0.5, size=(25, 3))
    y[3, 1] = np.nan
    w, b, loo = ridge_fit(x, y)
    filled = np.where(np.isnan(y), 0.0, y)
    coef, _, pred = ridge_loo(x, filled)
    assert w == pytest.approx(coef[:-1]) and b == pytest.approx(coef[-1])
    assert loo == pytest.approx(filled - pred)


def test_knn_residual_by_hand():
    x_train = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    resid = np.array([[1.0, np.nan], [3.0, 2.0], [5.0, 7.0]])
    got = knn_residual(x_train, resid, np.array([[2.0, 2.0]]), k=2)
    # the two nearest are rows 0 and 1, cos = 1/sqrt(2) each; LLM 1 misses row 0
    c = 1 / np.sqrt(2)
    assert got[0] == pytest.approx([(c * 1 + c * 3) / (2 * c + 1), (c * 2) / (c + 1)])
    # the far row (cos -1) only enters with weight 0
    assert knn_residual(x_train, resid, np.array([[1.0, 0.0]]), k=3)[0, 0] == pytest.approx(
        (1 * 1 + 0 * 3 + 0 * 5) / (1 + 1))


def test_centre_rows_and_r2_loo():
    r = np.array([[1.0, 3.0, np.nan], [2.0, 2.0, 5.0]])
    assert np.allclose(centre_rows(r), [[-1, 1, np.nan], [-1, -1, 2]], equal_nan=True)
    y = np.array([[1.0, 0.0], [3.0, 2.0], [np.nan, 4.0]])
    assert r2_loo(y, np.zeros((3, 2))) == pytest.approx(1.0)
    # loo residuals equal to the deviations from the column means: R2 = 0
    dev = np.array([[-1.0, -2.0], [1.0, 0.0], [0.0, 2.0]])
    assert r2_loo(y, dev) == pytest.approx(0.0)


def test_realised_picks_among_observed_and_breaks_ties_by_cost():
    truth = np.array([[0.0, 1.0, np.nan], [1.0, 0.0, 0.5]])
    pred = np.array([[0.2, 0.2, 9.0], [0.7, 0.7, 0.1]])
    costs = np.array([[3.0, 1.0, 0.0], [5.0, 1.0, 0.0]])
    assert realised(pred, truth, costs).tolist() == [1.0, 0.0]
    # a query with no observed LLM has nothing to pick: NaN (the policies refuse a mask row
    # that allows no LLM, so it is left out of the pick), the others as above
    got = realised(np.vstack([pred, pred[:1]]), np.vstack([truth, np.full(3, np.nan)]),
                   np.vstack([costs, costs[:1]]))
    assert got[:2].tolist() == [1.0, 0.0] and np.isnan(got[2])


@pytest.mark.parametrize("args, message", [
    (["--folds", "1"], "--folds: expected a whole number >= 2"),
    (["--repeats", "0"], "--repeats: expected a whole number >= 1"),
    (["--datasets", "no_such_set"], "--datasets: unknown dataset 'no_such_set'"),
    (["--datasets", " , "], "--datasets: expected a comma-separated list of dataset names"),
])
def test_bad_arguments_fail_cleanly_and_write_nothing(tmp_path, capsys, args, message):
    out = tmp_path / "res"
    base = ["--datasets", "synthetic", "--encoder", "hashing", "--out", str(out)]
    with pytest.raises(SystemExit) as exc:  # refused when the command line is parsed
        main(base + args)
    assert exc.value.code == 2 and message in capsys.readouterr().err
    assert not out.exists() or not any(out.iterdir())


def test_runs_on_the_simulator_and_writes_both_files(tmp_path, capsys):
    out = tmp_path / "res"
    main(["--datasets", "synthetic", "--encoder", "hashing", "--folds", "3", "--repeats", "1",
          "--out", str(out)])
    assert sorted(p.name for p in out.iterdir()) == ["within_task.csv", "within_task.md"]
    text = capsys.readouterr().out
    assert "| synthetic | task-best |" in text and "interaction part" in text
