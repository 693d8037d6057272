"""Probe answers and onboarding options: the per-text limit holds in every input form, an
unknown answers column is refused (as ``POST /llms`` refuses one), errors name the file line
and the file's column, and ``onboard --llm`` / ``--strategy`` are checked when parsed."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recsys_router.coldstart.onboard import ANSWER_COLUMNS, onboard_artifact, read_answers
from recsys_router.coldstart.probes_input import (MAX_PROBES, MAX_TEXT_LENGTH,
                                                   check_strategy_label, probe_data)
from recsys_router.data import RoutingData
from recsys_router.errors import DataValidationError

from cli_checks import fails_in_one_line

LONG = "w" * (MAX_TEXT_LENGTH + 1)


def _write(tmp_path, df: pd.DataFrame, name="answers.csv"):
    p = tmp_path / name
    df.to_csv(p, index=False)
    return p


def test_accepted_columns_are_those_probes_writes_plus_score_and_cost():
    assert ANSWER_COLUMNS == ("query_id", "text", "task", "score", "cost", "weight")


@pytest.mark.parametrize("col, bad", [("weight", "wieght"), ("cost", "Cost"), (None, "scores")])
def test_an_unknown_answers_column_is_refused_naming_file_and_column(tmp_path, col, bad):
    """A misspelt ``weight`` was dropped: the probes were fitted unweighted, exit 0."""
    df = pd.DataFrame({"query_id": ["q1", "q2"], "text": ["a", "b"], "score": [1.0, 0.0],
                       "cost": [0.1, 0.2], "weight": [2.0, 1.0]})
    df = df.rename(columns={col: bad}) if col else df.assign(**{bad: 1})
    with pytest.raises(DataValidationError) as err:
        read_answers(_write(tmp_path, df), "new")
    msg = str(err.value)
    assert msg.startswith(f"{tmp_path / 'answers.csv'}, column '{bad}': unknown column '{bad}'")
    assert "query_id, text, task, score, cost, weight" in msg


def test_the_columns_probes_writes_with_score_and_cost_still_read(tmp_path):
    df = pd.DataFrame({"query_id": ["q1", "q2"], "text": ["a", "b"], "task": ["t", "u"],
                       "weight": [2.0, 1.0], "score": [1.0, 0.0], "cost": [0.1, 0.2]})
    probes, weights = read_answers(_write(tmp_path, df), "new")
    assert probes.query_ids == ["q1", "q2"] and weights.tolist() == [2.0, 1.0]


@pytest.mark.parametrize("col, value", [("cost", "1e300"), ("cost", "-4e38"), ("score", "1e39")])
def test_a_value_beyond_float32_names_the_file_line_and_column(tmp_path, col, value):
    """Record 1 starts on file line 4 (record 0's text spans lines 2-3); the float32 check of
    the matrix named the record index (row 1) and column 'costs'."""
    p = tmp_path / "answers.csv"
    p.write_text('query_id,text,score,cost\nq1,"two\nlines",1,0.5\nq2,b,'
                 + ("0,{v}\n" if col == "cost" else "{v},0.5\n").format(v=value), encoding="utf-8")
    with pytest.raises(DataValidationError,
                       match=rf"answers\.csv, row 4, column '{col}': {col} \S+ is beyond the "
                             r"float32 range"):
        read_answers(p, "new")


def test_a_long_text_is_refused_in_the_answers_file_naming_its_line(tmp_path):
    df = pd.DataFrame({"query_id": ["q1", "q2", "q3"], "text": ["a", "b", LONG],
                       "score": [1.0, 0.0, 1.0]})
    with pytest.raises(DataValidationError,
                       match=rf"answers\.csv, row 4, column 'text': text has {len(LONG)} "
                             rf"characters; at most {MAX_TEXT_LENGTH} allowed"):
        read_answers(_write(tmp_path, df), "new")
    # exactly at the limit is accepted
    ok = df.assign(text=["a", "b", LONG[:-1]])
    assert len(read_answers(_write(tmp_path, ok), "new")[0].texts[2]) == MAX_TEXT_LENGTH


def test_a_long_text_looked_up_in_data_names_the_query_line(tmp_path):
    data = RoutingData(pd.DataFrame({"query_id": ["q1", "q2"], "text": ["a", LONG]}), ["x"],
                       [[1.0], [0.0]])
    p = tmp_path / "answers.csv"
    p.write_text("query_id,score\nq1,1\nq2,0\n", encoding="utf-8")
    with pytest.raises(DataValidationError,
                       match=r"answers\.csv, row 3, column 'query_id': the text of query 'q2' "
                             r"in --data has 100001 characters"):
        read_answers(p, "new", data)


def test_a_long_text_is_refused_in_a_dataframe_and_a_routingdata():
    """The {text: score} form refused it; a DataFrame or RoutingData carried it to add_llm."""
    df = pd.DataFrame({"query_id": ["a", "b"], "text": [LONG, "short"], "score": [1.0, 0.0]})
    with pytest.raises(DataValidationError, match=r"column 'text': probe query 'a': query text "
                                                  r"has 100001 characters; at most 100000"):
        probe_data("new", df)
    d = RoutingData(pd.DataFrame({"query_id": ["a", "b"], "text": ["short", LONG]}), ["new"],
                    [[1.0], [0.0]], source="mine.csv")
    with pytest.raises(DataValidationError, match=r"mine\.csv, row 1, column 'text': probe "
                                                  r"query 'b': query text has 100001"):
        probe_data("new", d)
    with pytest.raises(DataValidationError, match="query text has 100001 characters"):
        probe_data("new", {LONG: 1.0})   # unchanged


def test_too_many_probe_records_names_the_file(tmp_path):
    n = MAX_PROBES + 1
    p = tmp_path / "many.csv"
    p.write_text("text,score\n" + "".join(f"q{i},0.5\n" for i in range(n)), encoding="utf-8")
    with pytest.raises(DataValidationError,
                       match=rf"many\.csv: {n} probe records; at most {MAX_PROBES} allowed"):
        read_answers(p, "new")
    d = RoutingData([f"q{i}" for i in range(n)], ["new"], np.zeros((n, 1)), source="big.csv")
    with pytest.raises(DataValidationError, match=rf"big\.csv: {n} probes given"):
        probe_data("new", d)


def test_a_bad_llm_name_is_the_name_fault_not_the_file(tmp_path):
    p = _write(tmp_path, pd.DataFrame({"text": ["a"], "score": [1.0]}))
    for name in ("", "  "):
        with pytest.raises(ValueError, match="LLM name must be a non-empty string") as err:
            read_answers(p, name)
        assert "answers.csv" not in str(err.value)




@pytest.mark.parametrize("llm, needle", [
    ("", "LLM name must be a non-empty string, got ''"),
    ("   ", "LLM name must be a non-empty string"),
    ("a\nb", "contains a control character"),
    ("x" * 201, "201 characters long; at most 200"),
], ids=["empty", "blank", "line-break", "201-chars"])
def test_onboard_llm_is_checked_when_parsed(tmp_path, capsys, llm, needle):
    """It was reported as the answers file's 'row 0, column name' after the artifact loaded."""
    fails_in_one_line(["onboard", str(tmp_path / "art"), "--llm", llm, "--scores",
                  str(tmp_path / "a.csv"), "--out", str(tmp_path / "out")], capsys,
                 "argument --llm", needle)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("strategy, needle", [
    ("informative\nINJECTED LOG LINE", "contains a control character"),
    ("tab\there", "contains a control character"),
    ("s" * 101, "101 characters long; at most 100 allowed"),
    ("s" * 100_000, "100000 characters long"),
    ("", "non-empty label"),
    ("bad\udcffbyte", "cannot be UTF-8 encoded"),
], ids=["line-break", "tab", "101-chars", "100000-chars", "empty", "undecodable-byte"])
def test_onboard_strategy_is_checked_when_parsed(tmp_path, capsys, strategy, needle):
    """It was written into the manifest and llm_info_ unchecked (GET /llms shows it)."""
    fails_in_one_line(["onboard", str(tmp_path / "art"), "--llm", "new", "--scores",
                  str(tmp_path / "a.csv"), "--strategy", strategy, "--out",
                  str(tmp_path / "out")], capsys, "argument --strategy", needle)
    assert not (tmp_path / "out").exists()


def test_strategy_labels_at_the_bounds_are_accepted():
    assert check_strategy_label("s" * 100) == "s" * 100
    assert check_strategy_label("informativ") == "informativ"   # free text, as POST /llms
    assert check_strategy_label(" random ") == "random"


def test_onboard_artifact_checks_the_strategy_before_loading(tmp_path):
    """The library call refuses it too, before the (missing) artifact is even read."""
    d = RoutingData(["q"], ["new"], [[1.0]])
    with pytest.raises(ValueError, match="control character"):
        onboard_artifact(tmp_path / "missing", "new", d, tmp_path / "out", strategy="a\rb")
