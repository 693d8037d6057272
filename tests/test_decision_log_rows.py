"""A decision log's rows read as the store writes them (review s23 FEED r1, r2, r5): a missing
or repeated ``decision_id`` is named at its row as given in the column the log has, a
boolean propensity is refused as boolean scores and costs are, a row holding both a
``feedback_score`` and ``thumbs`` is refused as the store refuses it; and ``ope --policy``
refuses an infinite ``wtp`` when the command line is parsed (r6)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recsys_router.cli import main
from recsys_router.data import RoutingData
from recsys_router.feedback.logged import check_logged, log_to_data
from recsys_router.feedback.workflow import parse_target_policy


def _log(n: int = 4, **cols) -> pd.DataFrame:
    """``n`` decisions; row 0 has no feedback, the others score 0.0, 0.5, 1.0, ..."""
    frame = pd.DataFrame({"decision_id": [f"d{i}" for i in range(n)], "chosen": ["a", "b"] * (n // 2),
                          "propensity": [0.5] * n, "candidates": ['["a","b"]'] * n,
                          "feedback_score": [None] + [i / (n - 2) for i in range(n - 1)]})
    for col, values in cols.items():
        frame[col] = values
    return frame


def test_a_repeated_decision_id_is_named_at_its_row_as_given():
    # row 0 has no feedback; rows 2 and 3 (as given) share d2
    with pytest.raises(ValueError, match=r"^log.csv: row 3 \(decision_id 'd2'\): column "
                                         r"'decision_id': the id of row 2 again"):
        log_to_data(_log(decision_id=["d0", "d1", "d2", "d2"]), source="log.csv")
    # a repeat of a decision that has no feedback is the same error
    with pytest.raises(ValueError, match=r"^log.csv: row 2 \(decision_id 'd0'\): column "
                                         r"'decision_id': the id of row 0 again"):
        log_to_data(_log(decision_id=["d0", "d1", "d0", "d3"]), source="log.csv")


@pytest.mark.parametrize("missing", [None, np.nan, "", "   "])
def test_a_missing_decision_id_is_named_at_its_row_as_given(missing):
    with pytest.raises(ValueError, match=r"^log.csv: row 1: column 'decision_id' is empty"):
        log_to_data(_log(decision_id=pd.Series(["d0", missing, "d2", "d3"], dtype=object)),
                    source="log.csv")
    assert list(log_to_data(_log(), source="log.csv").query_ids) == ["d1", "d2", "d3"]


@pytest.mark.parametrize("column", [[True, True, True, True],
                                    pd.Series([0.5, True, 0.5, 0.5], dtype=object)])
def test_a_boolean_propensity_in_a_decision_log_is_refused(column):
    with pytest.raises(ValueError, match=r"^log.csv: row 1 \(decision_id 'd1'\): propensity True "
                                         r"is a boolean, not a number in \(0, 1\]"):
        log_to_data(_log(propensity=column), source="log.csv")


def test_a_boolean_propensity_in_logged_data_is_refused():
    d = RoutingData(pd.DataFrame({"query_id": ["q0", "q1"], "propensity": [0.5, True]}),
                    ["a", "b"], np.array([[1.0, np.nan], [np.nan, 0.0]]), name="t")
    assert d.queries["propensity"].tolist() == [0.5, True]
    with pytest.raises(ValueError, match=r"query 'q1' \(row 1\): propensity True is a boolean"):
        check_logged(d)


def test_a_subnormal_propensity_in_a_decision_log_is_refused_even_with_probs():
    # probs {"a": 1e-320, "b": 1.0} sum to 1 and agree with the propensity within 1e-6
    frame = _log(propensity=[0.5, 0.5, 1e-320, 0.5],
                 probs=['{"a": 0.5, "b": 0.5}'] * 2 + ['{"a": 1e-320, "b": 1.0}', '{"a": 0.5, "b": 0.5}'])
    with pytest.raises(ValueError, match=r"^log.csv: row 2 \(decision_id 'd2'\): propensity "
                                         r"1e-320 is below 1e-12"):
        log_to_data(frame, source="log.csv")


def test_a_row_with_both_a_score_and_thumbs_is_refused_as_the_store_refuses_it():
    # score 1.0 and thumbs down on row 1 (as given): the store takes exactly one of the two
    for thumbs in ("down", "up"):
        frame = _log(thumbs=[None, thumbs, None, None])
        with pytest.raises(ValueError, match=rf"^log.csv: row 1 \(decision_id 'd1'\): columns "
                                             rf"'feedback_score' and 'thumbs' both hold feedback "
                                             rf"\(0.0 and '{thumbs}'\)"):
            log_to_data(frame, source="log.csv")
    # thumbs only where no score is given: up = 1 on d0, and the scores 0, 0.5, 1 as given
    d = log_to_data(_log(thumbs=["up", None, None, None]), source="log.csv")
    assert check_logged(d)[1].tolist() == [1.0, 0.0, 0.5, 1.0]


@pytest.mark.parametrize("policy", ["wtp:inf", "wtp:1e400", "wtp:-inf", "wtp:nan", "budget:nan",
                                    "budget:-1"])
def test_a_non_finite_wtp_is_refused_by_the_policy_parser(policy):
    with pytest.raises(ValueError, match=r"policy must be argmax, wtp:LAMBDA \(a finite number"):
        parse_target_policy(policy)


def test_finite_wtp_and_an_infinite_budget_still_parse():
    assert parse_target_policy("wtp:0") == {"wtp": 0.0}
    assert parse_target_policy("wtp:1e300") == {"wtp": 1e300}
    assert parse_target_policy("budget:inf") == {"budget": float("inf")}
    assert parse_target_policy("budget:1e400") == {"budget": float("inf")}


@pytest.mark.parametrize("policy", ["wtp:inf", "wtp:1e400"])
def test_ope_refuses_an_infinite_wtp_when_the_command_line_is_parsed(policy, tmp_path, capsys):
    # the log does not exist and the router is untrained: the parser answers before either
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as exc:    # argparse's exit: the command never started
        main(["ope", "--log", str(tmp_path / "none.parquet"), "--router", "mf",
              "--policy", policy, "--out", str(out)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "argument --policy: policy must be argmax, wtp:LAMBDA (a finite number >= 0)" in err
    assert repr(policy) in err and "no such file" not in err and not out.exists()
