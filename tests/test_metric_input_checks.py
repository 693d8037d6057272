"""Inputs the metric functions and the decision recomputation used to take silently (review
METR r2-r6): a hull out of cost order, empty or NaN budgets, choices that are not column
indices, queries with no observed score in RCI, repeated LLM reference rows.

Each expected value is worked by hand on a 1-3 query case in the comments."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recsys_router.errors import DataValidationError
from recsys_router.evaluation.recompute import split_block
from recsys_router.metrics import (aiq, aiq_code, budget_choices, budget_sweep, hull_value, mu_o,
                                   orbit_metrics, rci, selection_entropy)

HULL = np.array([[1.0, 0.5], [3.0, 0.9]])


def test_a_sorted_hull_gives_the_hand_worked_values():
    # at cost 2: halfway from 0.5 to 0.9 -> 0.7; below 1: the segment to (0, 0) -> 0.25 at 0.5;
    # AIQ over (0, 4): 0.5 * 1 * 0.5 + (0.5 + 0.9) / 2 * 2 + 0.9 * 1 = 2.55, / 4 = 0.6375;
    # RouterBench's code: trapz of (1, .5) (3, .9) (3, .9) = 1.4, / x_max 3
    assert hull_value(HULL, [2.0, 0.5]).tolist() == pytest.approx([0.7, 0.25])
    assert aiq(HULL, (0.0, 4.0)) == pytest.approx(0.6375)
    assert aiq_code([HULL]).tolist() == pytest.approx([1.4 / 3])


@pytest.mark.parametrize("hull, row, costs", [
    (HULL[::-1], 1, "cost 1.0 after 3.0 in row 0"),                        # dearest first
    (np.array([[1.0, 0.5], [1.0, 0.6], [2.0, 0.7]]), 1, "cost 1.0 after 1.0 in row 0"),  # one cost twice
    (np.array([[1.0, 0.1], [3.0, 0.5], [2.0, 0.9]]), 2, "cost 2.0 after 3.0 in row 1"),
])
def test_a_hull_out_of_cost_order_is_refused_naming_hull_and_the_row(hull, row, costs):
    # before: np.interp read the rows as given -> hull_value 0.6 instead of 0.7 at cost 2,
    # aiq 0.3625 instead of 0.6375, aiq_code -0.1333 (a negative AIQ) for HULL[::-1]
    for call in (lambda: hull_value(hull, [2.0]), lambda: aiq(hull, (0.0, 4.0))):
        with pytest.raises(DataValidationError, match=rf"hull row {row} has {costs}; expected "
                                                      r"strictly increasing costs") as e:
            call()
        assert (e.value.row, e.value.column) == (row, "hull")
    with pytest.raises(DataValidationError, match=rf"hulls\[1\] row {row} has {costs}"):
        aiq_code([HULL, hull])


S2 = np.array([[0.5, 0.9], [0.2, 0.3]])
C2 = np.array([[1.0, 2.0], [1.0, 2.0]])


@pytest.mark.parametrize("budgets, what", [
    ([], "budgets is empty; expected at least one budget"),
    (np.array([]), "budgets is empty"),
    ([2.0, np.nan], r"budgets\[1\] is nan; expected a number"),
    ([np.nan], r"budgets\[0\] is nan"),
])
def test_empty_or_nan_budgets_are_refused_naming_budgets(budgets, what):
    # before: [] was a bare IndexError; [2, nan] sorted nan last and made it the "largest
    # budget": quality_at_max_budget 0.35 (both queries on the cheapest LLM) instead of 0.6
    for call in (lambda: budget_sweep(S2, C2, S2, C2, budgets=budgets),
                 lambda: budget_choices(S2, C2, budgets),
                 lambda: orbit_metrics(S2, C2, S2, C2, budgets=budgets)):
        with pytest.raises(DataValidationError, match=what) as e:
            call()
        assert e.value.column == "budgets"


def test_an_infinite_budget_is_still_a_budget_every_cost_fits():
    # budgets [2, inf] (given unsorted): both queries take LLM 1 (best predicted, cost 2
    # fits): cost 2, quality (0.9 + 0.3) / 2 = 0.6 at both budgets
    cv = budget_sweep(S2, C2, S2, C2, budgets=[np.inf, 2.0])
    assert cv.budgets.tolist() == [2.0, np.inf]
    assert cv.costs.tolist() == [2.0, 2.0]
    assert cv.qualities.tolist() == pytest.approx([0.6, 0.6])
    assert budget_choices(S2, C2, [0.5, np.inf]).tolist() == [[0, 1], [0, 1]]


SC = np.array([[1.0, 0.0], [0.0, 1.0]])


@pytest.mark.parametrize("choices, what", [
    # before: "choices[0] = -9223372036854775808" (the int64 cast of 1e20) and a RuntimeWarning
    (np.array([1e20, 0.0]), r"choices\[0\] = 1e\+20 is not a valid LLM index; expected 0..1"),
    (np.array([0, 2**64 - 1], dtype=np.uint64),
     r"choices\[1\] = 18446744073709551615 is not a valid LLM index"),
    (np.array([-1.0, 0.0]), r"choices\[0\] = -1.0 is not a valid LLM index"),
    (np.array([0.0, 0.5]), r"choices\[1\] = 0.5; expected a whole-number column index"),
    (np.array([np.inf, 0.0]), r"choices\[0\] = inf; expected a whole-number"),
    # before: numpy's bare TypeError from isfinite
    (np.array(["1", "0"]), "choices must hold integer column indices, got dtype <U1"),
    (np.array([1, 0], dtype=object), "got dtype object"),
    # before: accepted as the column indices 1 and 0
    (np.array([True, False]), r"got booleans \(a mask, not column indices\)"),
])
def test_choices_that_are_not_column_indices_are_refused_as_given(choices, what):
    for call in (lambda: mu_o(SC, choices), lambda: selection_entropy(choices, 2),
                 lambda: rci(SC, np.ones((2, 2)), choices)):
        with pytest.raises(DataValidationError, match=what) as e:
            call()
        assert e.value.column == "choices"


def test_whole_number_choices_of_any_numeric_dtype_are_read():
    # [1, 0] on SC: 0 + 0 -> mu_o 0; [0, 1]: 1 + 1 -> 1 (float 1.0 and uint8 read as ints)
    assert mu_o(SC, np.array([1.0, 0.0])) == 0.0
    assert mu_o(SC, np.array([0, 1], dtype=np.uint8)) == 1.0
    assert selection_entropy(np.array([0.0, 1.0]), 2) == 1.0


def test_rci_leaves_out_a_query_with_no_observed_score():
    # query 0 has nothing observed; choices [0, 0] route query 1 to its best (LLM 0): 0 of
    # 1 counted query routed badly -> 0.0 (before: 0.5, query 0 counted as bad), as mu_o and
    # oracle_mean leave query 0 out; choices [0, 1] route query 1 badly -> 1.0
    s = np.array([[np.nan, np.nan], [1.0, 0.0]])
    c = np.ones((2, 2))
    for variant in ("per_query", "orbit_code"):
        assert rci(s, c, [0, 0], variant=variant) == 0.0
        value, flags = rci(s, c, [0, 1], variant=variant, per_query=True)
        assert (value, flags.tolist()) == (1.0, [False, True])
    assert mu_o(s, [0, 0]) == 1.0


def test_rci_orbit_code_reads_the_dearest_llm_from_the_counted_queries_only():
    # queries 1, 2: both LLMs score 1; costs LLM 0 = 2, LLM 1 = 1. Query 0 is unobserved but
    # has costs (0, 100). Over queries 1, 2 the dearest LLM (mean test cost) is LLM 0 (2 vs 1):
    # choosing LLM 1 is fine (0.0), choosing LLM 0 while a cheaper best exists is bad (1.0).
    # Counting query 0 would make LLM 1 the dearest (34 vs 4/3) and flip both (before: 1.0
    # for choices [1, 1, 1], with query 0 counted as bad too)
    s = np.array([[np.nan, np.nan], [1.0, 1.0], [1.0, 1.0]])
    c = np.array([[0.0, 100.0], [2.0, 1.0], [2.0, 1.0]])
    assert rci(s, c, [1, 1, 1], variant="orbit_code") == 0.0
    assert rci(s, c, [0, 0, 0], variant="orbit_code") == 1.0
    # per query: the cheapest best costs 1, paid 1 (fine) or 2 (bad)
    assert rci(s, c, [1, 1, 1]) == 0.0
    assert rci(s, c, [0, 0, 0]) == 1.0


def test_rci_is_nan_when_no_query_has_an_observed_score():
    s = np.full((2, 2), np.nan)
    assert np.isnan(rci(s, np.ones((2, 2)), [0, 1]))
    value, flags = rci(s, np.ones((2, 2)), [0, 1], variant="orbit_code", per_query=True)
    assert np.isnan(value) and flags.tolist() == [False, False]
    with pytest.raises(ValueError, match="variant must be"):
        rci(s, np.ones((2, 2)), [0, 1], variant="nope")


def _ref(q, llm, score, cost):
    return dict(dataset="d", protocol="orbit", pool="all", group="all", fold="0",
                router="LLM:" + llm, setting="single", setting_value=np.nan, query_id=q, llm=llm,
                score=score, cost=cost, prob_entropy=np.nan)


@pytest.mark.parametrize("extra", [_ref("q1", "a", 0.0, 5.0), _ref("q1", "a", 1.0, 1.0)])
def test_split_block_refuses_a_repeated_reference_row_naming_query_and_llm(extra):
    rows = [_ref("q1", "a", 1.0, 1.0), _ref("q1", "b", 0.0, 2.0), _ref("q2", "a", 0.0, 1.0),
            _ref("q2", "b", 1.0, 2.0)]
    # the four distinct rows build S = [[1, 0], [0, 1]], C = [[1, 2], [1, 2]]
    b = split_block(pd.DataFrame(rows))
    assert b.scores.tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert b.costs.tolist() == [[1.0, 2.0], [1.0, 2.0]]
    # before: the last (q1, a) row replaced the first silently (S[0, 0] = 0, C[0, 0] = 5)
    with pytest.raises(ValueError, match=r"^LLM reference rows: query 'q1' with LLM 'a' appears "
                                         r"in 2 rows; expected one row per \(query, LLM\)"):
        split_block(pd.DataFrame(rows[:2] + [extra] + rows[2:]))
