"""RouterEval metrics: hand-worked tiny cases, a Monte-Carlo check of r_o(p), random-router E_p."""

from __future__ import annotations

import math

import numpy as np
import pytest

from recsys_router.errors import DataValidationError
from recsys_router.metrics import (DIRECTIONS, REFERENCE_SCORES, expected_ro_mean, mean_prob_entropy,
                                   mu_o, oracle_choices, oracle_mean, routereval_metrics,
                                   selection_entropy, v_b, v_r)

# 3 queries x 2 LLMs; the router picks LLM 0, 0, 1 -> chosen scores 1, 0, 1
S = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
CH = np.array([0, 0, 1])


def test_mu_o_vr_vb_by_hand():
    assert mu_o(S, CH) == pytest.approx(2 / 3)
    assert v_r(S, CH, 0.5) == pytest.approx(4 / 3)                    # (2/3) / 0.5
    assert v_r(S, CH, benchmark="gsm8k") == pytest.approx((2 / 3) / 0.92)
    # both LLMs have test mean 2/3 -> V_B = 1
    assert v_b(S, CH) == pytest.approx(1.0)
    s2 = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])                # best single LLM 0: 2/3
    assert v_b(s2, np.array([0, 0, 1])) == pytest.approx(1.0 / (2 / 3))


def test_reference_table_has_the_12_benchmarks():
    assert len(REFERENCE_SCORES) == 12
    assert REFERENCE_SCORES["mmlu"] == 0.864 and REFERENCE_SCORES["gpqa"] == 0.397
    with pytest.raises(DataValidationError, match="no RouterEval reference"):
        v_r(S, CH, benchmark="not_a_benchmark")
    with pytest.raises(ValueError, match="exactly one"):
        v_r(S, CH, 0.5, benchmark="mmlu")
    with pytest.raises(DataValidationError, match="> 0"):
        v_r(S, CH, 0.0)


def test_selection_entropy_by_hand():
    # shares 2/3, 1/3 -> -(2/3 log2 2/3 + 1/3 log2 1/3) = 0.9182958340544896
    assert selection_entropy(CH, 2) == pytest.approx(0.9182958340544896)
    assert selection_entropy(np.array([1, 1, 1]), 4) == 0.0
    assert selection_entropy(np.array([0, 1, 2, 3]), 4) == pytest.approx(2.0)


def test_random_router_entropy_close_to_log2_m():
    m = 11
    choices = np.random.default_rng(0).integers(0, m, size=100_000)
    assert abs(selection_entropy(choices, m) - math.log2(m)) < 0.05


def test_mean_prob_entropy_by_hand():
    p = np.array([[0.5, 0.5], [0.25, 0.75]])
    # row 2: -(0.25 * -2 + 0.75 * log2 0.75) = 0.5 + 0.31127812 = 0.81127812
    assert mean_prob_entropy(p) == pytest.approx((1.0 + 0.8112781244591328) / 2)
    # softmax of (ln 3, 0) = (0.75, 0.25); softmax of (0, 0) = uniform
    raw = np.array([[math.log(3.0), 0.0], [0.0, 0.0]])
    assert mean_prob_entropy(raw, softmax=True) == pytest.approx((0.8112781244591328 + 1.0) / 2)
    with pytest.raises(DataValidationError, match="row 1"):
        mean_prob_entropy(np.array([[0.5, 0.5], [0.5, 0.6]]))


def test_oracle_choices_ties_go_to_cheapest():
    s = np.array([[1.0, 1.0, 0.0], [0.0, 0.5, 0.5], [0.0, 0.0, 0.0]])
    c = np.array([[3.0, 2.0, 1.0], [1.0, 3.0, 2.0], [2.0, 1.0, 3.0]])
    assert oracle_choices(s, c).tolist() == [1, 2, 1]
    assert oracle_choices(s).tolist() == [0, 1, 0]
    assert oracle_mean(s) == pytest.approx(0.5)                        # (1 + 0.5 + 0) / 3


def test_expected_ro_mean_by_hand_and_by_simulation():
    s = np.array([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]])
    # oracle mean 2/3; per-LLM means 2/3 and 1/3 -> uniform random 1/2
    assert expected_ro_mean(s, 0.25) == pytest.approx(0.25 * 2 / 3 + 0.75 * 0.5)
    assert expected_ro_mean(s, 1.0) == pytest.approx(2 / 3)
    # simulate r_o(0.3) on random data: oracle with prob p, else a uniform LLM
    rng = np.random.default_rng(1)
    big = rng.random((200, 5))
    reps, p = 2000, 0.3
    use_oracle = rng.random((reps, 200)) < p
    rand_pick = rng.integers(0, 5, size=(reps, 200))
    picks = np.where(use_oracle, big.argmax(axis=1)[None, :], rand_pick)
    sim = big[np.arange(200)[None, :], picks].mean()
    assert sim == pytest.approx(expected_ro_mean(big, p), abs=3e-3)
    with pytest.raises(ValueError):
        expected_ro_mean(s, 1.5)


def test_routereval_metrics_bundle_and_directions():
    r = routereval_metrics(S, CH, probs=np.full((3, 2), 0.5), reference=0.5)
    assert r["mu_o"] == pytest.approx(2 / 3) and r["v_r"] == pytest.approx(4 / 3)
    assert r["prob_entropy"] == pytest.approx(1.0)
    assert r["oracle_mean"] == pytest.approx(1.0) and r["best_single_mean"] == pytest.approx(2 / 3)
    assert math.isnan(routereval_metrics(S, CH)["v_r"])
    for k in ("mu_o", "v_r", "v_b", "e_p", "oracle_mean"):
        assert DIRECTIONS[k] == "higher"
    assert mu_o.direction == "higher"


def test_bad_inputs_name_the_problem():
    with pytest.raises(DataValidationError, match=r"choices\[1\] = 5"):
        mu_o(S, np.array([0, 5, 1]))
    with pytest.raises(DataValidationError, match="3 column indices"):
        mu_o(S, np.array([0, 1]))
    with pytest.raises(DataValidationError, match=r"scores\[0, 1\] is inf"):
        mu_o(np.array([[1.0, np.inf]]), np.array([0]))


def test_unobserved_cells_are_skipped_in_reduced_pools():
    # NaN = the LLM was not observed on that query (a per-query candidate pool)
    s = np.array([[1.0, np.nan], [0.0, 1.0], [np.nan, 0.0]])
    assert mu_o(s, np.array([0, 1, 1])) == pytest.approx(2 / 3)      # (1 + 1 + 0) / 3
    assert mu_o(s, np.array([0, 0, 0])) == pytest.approx(0.5)        # LLM 0 seen twice: (1 + 0) / 2
    assert oracle_mean(s) == pytest.approx(2 / 3)                    # (1 + 1 + 0) / 3
    r = routereval_metrics(s, np.array([0, 1, 1]))
    assert r["best_single_mean"] == pytest.approx(0.5) and r["v_b"] == pytest.approx(4 / 3)
