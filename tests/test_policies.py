"""Decision policies on hostile inputs: integer masks, unknown costs at an infinite budget,
per-LLM cost vectors. Expected choices worked out by hand on 1-3 query cases."""

from __future__ import annotations

import numpy as np
import pytest

from recsys_router.policies import apply_policy, argmax_policy, budget_policy, wtp_policy

S = np.array([[0.9, 0.5, 0.1]])
C = np.array([[3.0, 2.0, 1.0]])


@pytest.mark.parametrize("policy", [
    lambda s, c, m: argmax_policy(s, c, m),
    lambda s, c, m: wtp_policy(s, c, 10.0, m),
    lambda s, c, m: budget_policy(s, c, 5.0, m),
])
def test_an_integer_0_1_mask_allows_its_ones_only(policy):
    # column 0 (best, and within budget / best utility) is masked out; of 1 and 2, column 1
    # has the higher score (10 * 0.5 - 2 = 3 > 10 * 0.1 - 1 = 0): every policy picks 1.
    # Read as integer indices, [0, 1, 1] masked columns 0 and 1 (~[0, 1, 1] = [-1, -2, -2])
    mask = np.array([0, 1, 1])
    assert policy(S, C, mask).tolist() == [1]
    assert policy(S, C, mask.reshape(1, 3)).tolist() == [1]
    assert policy(S, C, mask.astype(bool)).tolist() == [1]


@pytest.mark.parametrize("mask, what", [
    (np.array([0, 2, 1]), "dtype int"),
    (np.array([0.0, 1.0, 1.0]), "dtype float64"),
    (np.array([True, False]), r"shape \(n_llms,\) or \(n_queries, n_llms\) = \(1, 3\), got \(2,\)"),
])
def test_a_mask_that_is_not_bool_or_0_1_or_of_the_wrong_shape_is_refused(mask, what):
    for call in (lambda: argmax_policy(S, C, mask), lambda: wtp_policy(S, C, 1.0, mask),
                 lambda: budget_policy(S, C, 1.0, mask), lambda: apply_policy(S, C, mask=mask)):
        with pytest.raises(ValueError, match=rf"^mask: expected .*{what}"):
            call()


def test_an_unknown_cost_never_fits_even_an_infinite_budget():
    # column 0 has the best score but an unknown (NaN) cost; column 1 (known, 2.0) fits any
    # budget; the docstring: an unknown cost never counts as fitting -> 1, at C = inf too
    s, c = np.array([[0.9, 0.5]]), np.array([[np.nan, 2.0]])
    assert budget_policy(s, c, 10.0).tolist() == [1]
    assert budget_policy(s, c, np.inf).tolist() == [1]
    # no known cost in the row at all: the best predicted score, whatever the budget
    assert budget_policy(s, np.array([[np.nan, np.nan]]), np.inf).tolist() == [0]


def test_a_per_llm_cost_vector_is_every_rows_cost_in_every_policy():
    s = np.array([[0.5, 0.9], [0.9, 0.5]])
    c = np.array([0.1, 1.0])
    # wtp 1: row 0: 0.5 - 0.1 = 0.4 > 0.9 - 1 = -0.1 -> 0; row 1: 0.8 > -0.5 -> 0
    # wtp 10: row 0: 4.9 < 8.0 -> 1; row 1: 8.9 > 4.0 -> 0
    assert wtp_policy(s, c, 1.0).tolist() == [0, 0]
    assert wtp_policy(s, c, 10.0).tolist() == [1, 0]
    assert wtp_policy(s, c, 10.0).tolist() == wtp_policy(s, np.tile(c, (2, 1)), 10.0).tolist()
    # budget 0.5: only column 0 fits -> [0, 0]; argmax ties broken by the cheaper column
    assert budget_policy(s, c, 0.5).tolist() == [0, 0]
    assert argmax_policy(np.array([[0.7, 0.7]]), np.array([2.0, 1.0])).tolist() == [1]


@pytest.mark.parametrize("costs", [np.array([1.0, 2.0, 3.0]), np.ones((2, 2)), np.ones((1, 2, 2))])
def test_costs_of_the_wrong_shape_are_refused_naming_costs(costs):
    s = np.array([[0.5, 0.9]])
    for call in (lambda: argmax_policy(s, costs), lambda: wtp_policy(s, costs, 1.0),
                 lambda: budget_policy(s, costs, 1.0)):
        with pytest.raises(ValueError, match=r"^costs: expected shape \(n_llms,\) or "
                                             r"\(n_queries, n_llms\) = \(1, 2\), got"):
            call()


@pytest.mark.parametrize("mask, where", [
    (np.array([[False, False], [True, True]]), r"row 0 \(query 0\) allows no LLM"),
    (np.array([[True, False], [0, 0]], dtype=bool), r"row 1 \(query 1\) allows no LLM"),
    (np.array([0, 0]), r"allows no LLM \(every entry False\)"),
])
def test_a_mask_row_that_allows_no_llm_is_refused_naming_mask_and_the_row(mask, where):
    # before: row 0 of the first mask got column 0 from argmax (a masked-out LLM) and column 0
    # from wtp and budget: an answer the mask forbids, without a word
    s = np.array([[0.5, 0.9], [0.2, 0.3]])
    c = np.array([[1.0, 2.0], [1.0, 2.0]])
    for call in (lambda: argmax_policy(s, c, mask), lambda: wtp_policy(s, c, 1.0, mask),
                 lambda: budget_policy(s, c, 1.5, mask), lambda: apply_policy(s, c, mask=mask),
                 lambda: apply_policy(s, c, budget=1.5, mask=mask)):
        with pytest.raises(ValueError, match=rf"^mask: {where}; expected at least one allowed"):
            call()


def test_a_mask_allowing_one_llm_per_row_still_routes_there():
    # each row allows one column only: every policy must take it (row 0: 1, row 1: 0), even
    # the budget policy when that column does not fit (its fallback: the cheapest allowed)
    s = np.array([[0.9, 0.1], [0.9, 0.1]])
    c = np.array([[1.0, 9.0], [1.0, 9.0]])
    mask = np.array([[False, True], [True, False]])
    assert argmax_policy(s, c, mask).tolist() == [1, 0]
    assert wtp_policy(s, c, 1.0, mask).tolist() == [1, 0]
    assert budget_policy(s, c, 2.0, mask).tolist() == [1, 0]
    # no queries at all: nothing to refuse, nothing chosen
    assert argmax_policy(np.empty((0, 2)), None, np.array([False, False])).tolist() == []


def test_a_huge_wtp_on_a_1_to_10_scale_buys_the_best_score_not_the_cheapest():
    """wtp * score overflowed to +inf on every LLM of a 1-10 scale (1e308 * 2 > float64 max),
    so the cost tie-break took the cheapest LLM: column 0 (score 2.0) instead of 9.5. The
    order of lambda * s - c for lambda -> inf is the score order, cheaper among equal scores."""
    s = np.array([[2.0, 9.5],      # best score is dearer: 1
                  [9.5, 9.5],      # equal scores: the cheaper, 1
                  [1.0, 9.5],      # a free LLM beside the best: still the best score, 1
                  [-9.5, -2.0]])   # negative scores overflow to -inf: the higher one, 1
    c = np.array([[0.001, 0.01], [0.01, 0.001], [0.0, 0.01], [0.001, 0.01]])
    for wtp in (1e308, 1.7976931348623157e308):
        assert wtp_policy(s, c, wtp).tolist() == [1, 1, 1, 1]
    assert wtp_policy(s[:1], c[:1], 1e300).tolist() == [1]   # no overflow: as before
    # a mask still holds on an overflowing row
    assert wtp_policy(s[:1], c[:1], 1e308, np.array([[True, False]])).tolist() == [0]
    # an unknown (NaN) cost is still never taken over a known one, however large wtp is
    assert wtp_policy(np.array([[2.0, 9.5]]), np.array([[0.001, np.nan]]), 1e308).tolist() == [0]


def test_wtp_decisions_for_ordinary_values_match_lambda_s_minus_c_row_by_row():
    """Rows without overflow keep the arithmetic lambda * s - c exactly: compared with a plain
    per-row loop (first maximum, cheaper among ties) on scores from 1 to 10."""
    rng = np.random.default_rng(0)
    s = np.round(rng.uniform(1, 10, (200, 5)), 1)   # one decimal: many exact ties
    c = np.round(rng.uniform(0, 1, (200, 5)), 2)
    for wtp in (0.0, 0.01, 0.1, 1.0, 7.0, 1e6, 1e300):
        expect = []
        for i in range(len(s)):
            util = [wtp * s[i, j] - c[i, j] for j in range(5)]
            best = max(util)
            tied = [j for j in range(5) if util[j] == best]
            expect.append(min(tied, key=lambda j: (c[i, j], j)))
        assert wtp_policy(s, c, wtp).tolist() == expect, wtp
