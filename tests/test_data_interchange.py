"""Hostile inputs at the long-table interchange boundary: ``RoutingData.to_long``,
``write_long`` and reading the written file back (``load_generic``)."""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest
import pandas as pd

from recsys_router.data import RoutingData
from recsys_router.datasets._common import read_csv
from recsys_router.datasets.generic import load_generic, long_losses, write_long
from recsys_router.errors import DataValidationError

NAN = np.nan


def test_query_columns_named_like_record_columns_are_renamed_not_overwriting(tmp_path, caplog):
    # query columns 'score', 'model', 'cost' and the alias 'llm' next to the record columns
    q = pd.DataFrame({"query_id": ["q1", "q2"], "score": [0.5, 0.25], "model": ["judge", "judge"],
                      "llm": ["x", "y"], "query_score": [7, 8]})
    d = RoutingData(q, ["a", "b"], [[1, 0], [NAN, 1]], [[2, 3], [NAN, 4]])
    with caplog.at_level(logging.WARNING, logger="recsys_router.long_table"):
        long = d.to_long()
    # a column that does not clash keeps its name; a clashing one takes the next free name
    assert long.columns.tolist() == ["query_id", "model", "score", "cost", "query_query_score",
                                     "query_model", "query_llm", "query_score"]
    # the record columns hold the matrix, written by hand from the three observed cells
    assert long[["query_id", "model"]].values.tolist() == [["q1", "a"], ["q1", "b"], ["q2", "b"]]
    assert long["score"].tolist() == [1.0, 0.0, 1.0] and long["cost"].tolist() == [2.0, 3.0, 4.0]
    assert long["query_query_score"].tolist() == [0.5, 0.5, 0.25]
    assert long["query_score"].tolist() == [7, 7, 8]
    assert "'score'" in caplog.text and "'query_query_score'" in caplog.text
    back = load_generic(write_long(d, tmp_path / "d.csv"))
    np.testing.assert_array_equal(back.scores, d.scores)
    np.testing.assert_array_equal(back.costs, d.costs)
    assert back.llm_names == ["a", "b"]
    assert back.queries["query_model"].tolist() == ["judge", "judge"]


# ---------------------------------------------------------------- rows named in errors
def test_csv_error_names_the_file_line_of_a_multi_line_record(tmp_path):
    p = tmp_path / "m.csv"
    # line 1 header; record 1 spans lines 2-4 (quoted newlines); line 5 blank; record 2 is
    # line 6; record 3 (bad score) is line 7
    p.write_text('query_id,model,score,query_text\nq1,a,1,"one\ntwo\nthree"\n\n'
                 'q1,b,0,\nq2,a,oops,x\n', encoding="utf-8")
    with pytest.raises(DataValidationError) as err:
        load_generic(p)
    assert (err.value.row, err.value.column) == (7, "score") and "'oops'" in str(err.value)
    p.write_text('query_id,model,score,query_text\nq1,a,1,"one\ntwo"\nq1,a,0,\n', encoding="utf-8")
    with pytest.raises(DataValidationError, match=r"row 4: duplicate record .*also at row 2"):
        load_generic(p)
    p.write_text('query_id,model,score,query_text\nq1,a,1,"one\ntwo"\nq1,b,1,other\n',
                 encoding="utf-8")
    with pytest.raises(DataValidationError, match=r"row 4, column 'query_text': query 'q1' has "
                                                  r"two different texts \(rows 2 and 4"):
        load_generic(p)


def test_jsonl_error_names_the_file_line_despite_blank_lines(tmp_path):
    p = tmp_path / "b.jsonl"
    p.write_text('{"query_id": "q1", "model": "a", "score": 1}\n\n\n'
                 '{"query_id": "q1", "model": "b", "score": 0}\n'
                 '{"query_id": "q2", "model": "a", "score": "oops"}\n', encoding="utf-8")
    with pytest.raises(DataValidationError) as err:
        load_generic(p)
    assert (err.value.row, err.value.column) == (5, "score")


@pytest.mark.parametrize("col", ["score", "cost"])
def test_value_beyond_float32_is_refused_at_its_line(tmp_path, col):
    p = tmp_path / "big.csv"
    rows = ["q1,a,1,0.5", "q1,b,0,0.5", "q2,a,1,0.5", "q2,b,1e39,1e39"]
    if col == "cost":
        rows[3] = "q2,b,1,1e39"
    p.write_text("query_id,model,score,cost\n" + "\n".join(rows) + "\n", encoding="utf-8")
    with pytest.raises(DataValidationError, match=rf"{col} 1e\+39 is beyond the float32 range"
                       ) as err:
        load_generic(p)
    assert (err.value.row, err.value.column) == (5, col)
    scores = [[1, 0], [1, 1e39]] if col == "score" else [[1, 0], [1, 1]]
    costs = [[1, 0], [1, 1e39]] if col == "cost" else None
    with pytest.raises(DataValidationError, match=r"1e\+39 at query index 1, LLM index 1") as err:
        RoutingData(["q1", "q2"], ["a", "b"], scores, costs)
    assert err.value.row == 1


def test_matrix_float32_range_edges():
    # the cast comes first; the float64 check runs only where a cell became infinite or hit
    # the float32 limit: a value just beyond the limit (it rounds down to it) is still refused,
    # the limit itself, NaN, infinities (refused later as non-finite) and float32 input are not
    import warnings
    from recsys_router.long_table import F32_MAX, float32_matrix
    just_over = F32_MAX * (1 + 1e-9)
    with pytest.raises(DataValidationError, match=re.escape(f"score {-just_over!r} at query "
                                                            f"index 1, LLM index 0 is beyond")) as err:
        float32_matrix([[np.nan, 1.0], [-just_over, 1e39]], "scores", None, None)
    assert (err.value.row, err.value.column) == (1, "scores")
    with pytest.raises(DataValidationError, match=r"1e\+300 at query index 0, LLM index 1"):
        float32_matrix(np.array([[None, 1e300]], dtype=object), "costs", None, None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ok = float32_matrix([[F32_MAX, -F32_MAX, np.nan], [np.inf, -np.inf, 0.5]], "scores",
                            (2, 3), None)
        assert ok.dtype == np.float32 and ok.tolist()[0][:2] == [F32_MAX, -F32_MAX]
        assert np.isnan(ok[0, 2]) and np.isinf(ok[1, :2]).all() and ok[1, 2] == 0.5
        assert float32_matrix(np.full((2, 2), np.nan), "scores", None, None).shape == (2, 2)
        assert float32_matrix(np.zeros((0, 3)), "scores", (0, 3), None).shape == (0, 3)
        with pytest.raises(DataValidationError, match="must be a 2-D"):
            float32_matrix([1.0, 1e39], "scores", None, None)


# ---------------------------------------------------------------- CSV missing values
def test_csv_keeps_na_like_ids_and_texts_as_text(tmp_path):
    src = tmp_path / "s.jsonl"
    src.write_text('{"query_id": "NA", "model": "a", "score": 1, "query_text": "None"}\n'
                   '{"query_id": "q2", "model": "a", "score": 0, "query_text": "null", '
                   '"task": "NaN"}\n', encoding="utf-8")
    d = load_generic(src)
    back = load_generic(write_long(d, tmp_path / "s.csv"))
    assert back.query_ids == ["NA", "q2"] and back.texts == ["None", "null"]
    assert pd.isna(back.queries["task"].iloc[0]) and back.queries["task"].iloc[1] == "NaN"
    # an empty field is still missing, and NA spellings in a cost field still mean unknown
    p = tmp_path / "c.csv"
    p.write_text("query_id,model,score,cost,task\nq1,a,1,NA,\nq1,b,0,,t\n", encoding="utf-8")
    d = load_generic(p)
    assert np.isnan(d.costs).all() and d.queries["task"].tolist() == ["t"]


def test_csv_header_naming_a_column_twice_is_refused(tmp_path):
    p = tmp_path / "dup.csv"
    p.write_text("query_id,model,score,score\nq1,a,1,0\n", encoding="utf-8")
    with pytest.raises(DataValidationError) as err:
        load_generic(p)
    assert (err.value.source, err.value.row, err.value.column) == (str(p), 1, "score")
    assert "names column 'score' twice" in str(err.value)
    # blank header names (an unnamed index column) may repeat
    p.write_text(",,query_id,model,score\n0,0,q1,a,1\n", encoding="utf-8")
    assert read_csv(p).columns.tolist() == ["Unnamed: 0", "Unnamed: 1", "query_id", "model",
                                            "score"]


# ---------------------------------------------------------------- what a long table cannot hold
def test_write_long_warns_of_what_it_cannot_hold(tmp_path, caplog):
    llms = pd.DataFrame({"name": ["a", "b", "c"], "input_price": [1.0, 2.0, 3.0],
                         "size": [7, 13, 70]})
    d = RoutingData(["q1", "q2", "q3"], llms, [[1, 0, NAN], [NAN, NAN, NAN], [0, 1, NAN]])
    assert long_losses(d) == [
        "1 queries with no observed score have no record and are not written: ['q2']",
        "1 LLMs with no observed score have no record and are not written: ['c']",
        "LLM columns ['input_price', 'size'] have no place in the long format and are not "
        "written"]
    with caplog.at_level(logging.WARNING, logger="recsys_router.datasets.generic"):
        back = load_generic(write_long(d, tmp_path / "a.parquet"))
    assert back.shape == (2, 2) and "['q2']" in caplog.text and "['c']" in caplog.text
    caplog.clear()
    write_long(d, tmp_path / "b.csv", warn=False)
    assert caplog.text == ""
    full = RoutingData(["q1"], ["a"], [[1.0]])
    assert long_losses(full) == []


def test_a_cost_on_an_unobserved_score_is_reported_as_not_written(tmp_path, caplog):
    # q1/b has a cost (0.2) but no score: the long format has no record for it
    d = RoutingData(["q1", "q2"], ["a", "b"], [[1.0, NAN], [0.0, 1.0]],
                    costs=[[0.1, 0.2], [0.3, 0.4]])
    assert long_losses(d) == ["1 costs on cells with no observed score have no record and are "
                              "not written (first: query 'q1', LLM 'b')"]
    with caplog.at_level(logging.WARNING, logger="recsys_router.datasets.generic"):
        back = load_generic(write_long(d, tmp_path / "c.csv"))
    assert "1 costs on cells with no observed score" in caplog.text
    assert np.isnan(back.costs[0, 1]) and back.costs[1].tolist() == pytest.approx([0.3, 0.4])
    nan_cost = RoutingData(["q1", "q2"], ["a", "b"], [[1.0, NAN], [0.0, 1.0]],
                           costs=[[0.1, NAN], [0.3, 0.4]])  # no cost on the unobserved cell
    assert long_losses(nan_cost) == []


def test_cli_convert_counts_what_it_wrote_and_says_what_it_left_out(tmp_path, capsys):
    from recsys_router.cli import main
    (tmp_path / "rl" / "mmlu").mkdir(parents=True)
    # three MMLU items; the second has neither LLM graded
    (tmp_path / "rl" / "mmlu" / "mmlu_x.csv").write_text(
        'prompt,m-7b,gpt-x\n"one\ntwo",True,False\nthree,,\nfour,False,True\n', encoding="utf-8")
    out = tmp_path / "o.csv"
    assert main(["data", "convert", str(tmp_path / "rl"), "-o", "benchmark=mmlu", "--to",
                 str(out)]) == 0
    got = capsys.readouterr()
    assert "wrote 4 records (2 queries x 2 LLMs)" in got.out
    assert ("note: 1 queries with no observed score have no record and are not written: "
            "['mmlu/x/1']") in got.err
    assert "LLM columns ['size']" in got.err  # m-7b: 7 (billions), parsed from the name
    assert load_generic(out).query_ids == ["mmlu/x/0", "mmlu/x/2"]


def test_csv_error_names_the_line_of_the_field_after_a_multi_line_text(tmp_path):
    p = tmp_path / "f.csv"
    # record 2 starts on line 3; its text spans lines 3-4, so its score is on line 4
    p.write_text('query_id,query_text,model,score\nq1,x,a,1\nq2,"two\nlines",a,oops\n',
                 encoding="utf-8")
    with pytest.raises(DataValidationError) as err:
        load_generic(p)
    assert (err.value.row, err.value.column) == (4, "score")
    p.write_text('query_id,query_text,model,score\nq1,"two\nlines",,1\n', encoding="utf-8")
    with pytest.raises(DataValidationError, match="empty model") as err:
        load_generic(p)
    assert err.value.row == 3


@pytest.mark.parametrize("col, bad, shown", [("input_price", "five dollars", "'five dollars'"),
                                             ("output_price", np.inf, "inf"),
                                             ("size", "70B", "'70B'"), ("size", -np.inf, "-inf")])
def test_llm_prices_and_sizes_must_be_finite_numbers(col, bad, shown):
    llms = pd.DataFrame({"name": ["a", "b"], col: [1.0, bad]})
    with pytest.raises(DataValidationError, match=rf"{col} {shown} for LLM 'b' is not a finite "
                                                  rf"number >= 0|negative {col} -inf") as err:
        RoutingData(["q1"], llms, [[1, 0]])
    assert (err.value.row, err.value.column) == (1, col)
    ok = RoutingData(["q1"], pd.DataFrame({"name": ["a", "b"], col: ["0.5", None]}), [[1, 0]])
    assert ok.llms[col].iloc[0] == 0.5 and np.isnan(ok.llms[col].iloc[1])


# ---------------------------------------------------------------- per-query labels and texts
@pytest.mark.parametrize("col", ["split", "task"])
def test_conflicting_labels_of_one_query_are_refused_naming_both_rows(tmp_path, col):
    p = tmp_path / "l.csv"
    p.write_text(f"query_id,model,score,{col}\nq1,a,1,x\nq2,a,0,x\nq1,b,0,\nq1,c,1,y\n",
                 encoding="utf-8")
    with pytest.raises(DataValidationError, match=rf"query 'q1' has two different {col} labels, "
                                                  rf"'x' \(row 2\) and 'y'") as err:
        load_generic(p)
    assert (err.value.row, err.value.column) == (5, col)
    df = pd.DataFrame({"query_id": ["q1", "q1"], "model": ["a", "b"], "score": [1.0, 0.0],
                       col: ["x", "y"]})
    d = RoutingData.from_long(df, labels="first")  # documented opt-out: the first label
    assert d.queries[col].tolist() == ["x"]


def _labelled_long(labels, dtype=None) -> pd.DataFrame:
    n = len(labels)
    return pd.DataFrame({"query_id": ["q1", "q2"] * (n // 2) + ["q1"] * (n % 2),
                         "model": [f"m{i}" for i in range(n)], "score": [1.0] * n,
                         "task": pd.Series(labels, dtype=dtype)})


def test_labels_are_compared_as_strings_and_missing_ones_ignored(caplog):
    # integer codes stand for the labels' strings: 1 and "1" (and np.int64(1)) are one label,
    # None / NaN / pd.NA no label; 1 vs 1.0, True vs 1 and -0.0 vs 0.0 are different strings
    same = [(1, "x"), ("1", None), (np.int64(1), np.nan), (None, pd.NA), ("1", "x")]
    d = RoutingData.from_long(_labelled_long([v for pair in same for v in pair], object))
    assert d.queries["task"].tolist() == [1, "x"]
    for a, b, shown in [(1, 1.0, "'1' (row 0) and '1.0'"), (True, 1, "'True' (row 0) and '1'"),
                        (-0.0, 0.0, "'-0.0' (row 0) and '0.0'")]:
        df = _labelled_long([a, "x", None, "x", b], object)
        with pytest.raises(DataValidationError, match=re.escape(
                f"query 'q1' has two different task labels, {shown} (1 such queries)")) as err:
            RoutingData.from_long(df)
        assert (err.value.row, err.value.column) == (4, "task")
    with pytest.raises(DataValidationError, match=re.escape("'-0.0' (row 0) and '0.0'")):
        RoutingData.from_long(_labelled_long([-0.0, 1.0, 0.0], float))
    RoutingData.from_long(_labelled_long([2.5, np.nan, np.nan, 1.0, 2.5], float))
    # labels="first" keeps the first and logs how many queries clash
    with caplog.at_level("WARNING", logger="recsys_router"):
        d = RoutingData.from_long(_labelled_long(["a", "b", "c", "d", "a", "x"]), labels="first")
    assert d.queries["task"].tolist() == ["a", "b"]
    assert "2 queries carry different task labels" in caplog.text


@pytest.mark.parametrize("kind", ["category", "str", "object"])
def test_label_clash_names_the_first_clashing_query_and_rows(kind):
    # q2's clash (rows 3 and 5) is found although q1's first label (row 0) comes earlier:
    # the query named is the clashing one whose first label comes first; categorical columns
    # with unused categories and 1 / "1" categories behave like plain strings
    labels = ["a", "b", None, "b", "a", "c", "a", "b"]
    col = pd.Series(labels, dtype=object)
    if kind == "category":
        col = col.astype(pd.CategoricalDtype(["unused", "c", "b", "a", "zz"]))
    elif kind == "str":
        col = col.astype("string")
    df = pd.DataFrame({"query_id": ["q1", "q2", "q3", "q2", "q1", "q2", "q1", "q4"],
                       "model": list("abcdefgh"), "score": 1.0, "task": col})
    with pytest.raises(DataValidationError, match=re.escape(
            "query 'q2' has two different task labels, 'b' (row 1) and 'c' (1 such queries)")) as err:
        RoutingData.from_long(df)
    assert err.value.row == 5
    cat = pd.Series(pd.Categorical([1, "1", None, 1], categories=pd.Index([1, "1", "x"], dtype=object)))
    d = RoutingData.from_long(pd.DataFrame({"query_id": ["q1"] * 4, "model": list("abcd"),
                                            "score": 1.0, "task": cat}))
    assert d.queries["task"].astype(object).tolist() == [1]


@pytest.mark.parametrize("text, kind", [(["hello"], "list"), ({"role": "user"}, "dict"),
                                        (42, "int"), (True, "bool")])
def test_query_text_must_be_a_string(tmp_path, text, kind):
    import json
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps({"query_id": "q0", "model": "a", "score": 1, "query_text": "fine"})
                 + "\n\n" + json.dumps({"query_id": "q1", "model": "a", "score": 1,
                                        "query_text": text}) + "\n", encoding="utf-8")
    with pytest.raises(DataValidationError, match=f"query_text must be a string or null, got "
                                                  f"{kind}") as err:
        load_generic(p)
    assert (err.value.row, err.value.column) == (3, "query_text")


def test_lone_surrogate_escape_names_the_line(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_text('{"query_id": "q1", "model": "a", "score": 1, "query_text": "\\ud83d\\ude00"}\n'
                 '\n{"query_id": "q2", "model": "a", "score": 1, "query_text": "x \\ud83d y"}\n',
                 encoding="utf-8")
    with pytest.raises(DataValidationError, match="lone UTF-16 surrogate") as err:
        load_generic(p)
    assert err.value.row == 3
    p.write_text('{"query_id": "q1", "model": "a", "score": 1, "query_text": "\\ud83d\\ude00"}\n'
                 '{"query_id": "q2", "model": "a", "score": 1, "query_text": "a\\\\ud83d"}\n',
                 encoding="utf-8")
    assert load_generic(p).texts == ["\U0001F600", "a\\ud83d"]  # a pair; an escaped backslash


@pytest.mark.parametrize("column", ["query_text", "prompt", "text"])
def test_csv_texts_of_digits_stay_texts(tmp_path, column):
    # pandas would read a column of digit strings as integers, which the text check refuses
    p = tmp_path / "t.csv"
    p.write_text(f"query_id,model,score,{column}\nq1,a,1,1984\nq1,b,0,1984\nq2,a,0,0042\nq2,b,1,0042\n")
    assert load_generic(p).queries["text"].tolist() == ["1984", "0042"]
    d = RoutingData(pd.DataFrame({"query_id": ["q1", "q2"], "text": ["1984", "2001"]}), ["a", "b"],
                    [[1.0, 0.0], [0.0, 1.0]])
    write_long(d, tmp_path / "rt.csv")
    assert load_generic(tmp_path / "rt.csv").queries["text"].tolist() == ["1984", "2001"]


def test_lone_surrogate_line_skips_an_escaped_backslash_before_it(tmp_path):
    from recsys_router.datasets._json import read_json
    p = tmp_path / "r.json"
    # line 2 holds "\\udc00" (a backslash, then letters), line 3 the lone "\ud800"
    p.write_text('[\n{"question": "path C:\\\\udc00 ok"},\n{"question": "bad \\ud800 here"}\n]\n',
                 encoding="utf-8")
    with pytest.raises(DataValidationError, match="lone UTF-16 surrogate") as err:
        read_json(p)
    assert err.value.row == 3 and "record 1 of the list" in str(err.value)
    p.write_text('[{"question": "path C:\\\\udc00 ok"}]', encoding="utf-8")
    assert read_json(p) == [{"question": "path C:\\udc00 ok"}]


# ------------------------------------------------ one id in two spellings (whitespace, NFC/NFD)
@pytest.mark.parametrize("column, a, b, kind", [
    ("model", "gpt-4", "gpt-4 ", "LLMs"),
    ("model", "gpt-4", " gpt-4", "LLMs"),
    ("model", "caf\u00e9", "cafe\u0301", "LLMs"),          # NFC and NFD of one name
    ("query_id", "q2", "q2\t", "queries"),
    ("task", "math", "math ", "tasks"),
])
def test_two_spellings_of_one_id_are_refused_naming_both_rows(tmp_path, capsys, column, a, b,
                                                              kind):
    from recsys_router.cli import main
    rows = [{"query_id": "q1", "model": "m", "score": 1, "task": "code"},
            {"query_id": "q2", "model": "m", "score": 0, "task": "code"},
            {"query_id": "q3", "model": "m", "score": 1, "task": "code"}]
    rows[1][column], rows[2][column] = a, b
    if column == "query_id":
        rows[2]["model"] = "n"                  # not a duplicate (q2, m) record either way
    f = tmp_path / "t.jsonl"                    # JSONL keeps surrounding whitespace as written
    import json
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataValidationError) as ei:
        load_generic(f)
    msg = str(ei.value)
    assert ei.value.row == 3 and ei.value.column == column   # JSONL rows are file lines
    assert f"{column} {a!r} (row 2) and {b!r} (row 3)" in msg and f"two different {kind}" in msg
    main(["data", "info", str(f)])
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and repr(b) in err and "row 3" in err


def test_an_id_with_spaces_that_collides_with_none_is_kept_as_written(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("query_id,model,score,task\nq1, gpt-4 ,1, math\nq2,caf\u00e9,0,code\n"
                 "q2,cafe\u0301x,1,code\n")
    d = load_generic(f)
    assert d.llm_names == [" gpt-4 ", "caf\u00e9", "cafe\u0301x"]
    assert d.queries["task"].tolist() == [" math", "code"]


def test_ood_tasks_cannot_miss_a_task_spelled_with_a_trailing_space(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("query_id,model,score,task\n" + "".join(
        f"q{i},a,1,{t}\n" for i, t in enumerate(["math", "code", "math ", "code"])))
    with pytest.raises(DataValidationError, match=r"task 'math' \(row 2\) and 'math ' \(row 4\)"):
        load_generic(f)


@pytest.mark.parametrize("cost, shown", [("-0.1", "cost -0.1 is not"), ("inf", "cost inf is not"),
                                         ("$0.1", "cost '$0.1' is not")])
def test_cost_errors_show_the_plain_number(tmp_path, cost, shown):
    # numpy's repr leaked into the message: "cost np.float64(-0.1) is not a number >= 0"
    f = tmp_path / "c.csv"
    f.write_text(f"query_id,model,score,cost\nq1,a,1,0.5\nq2,a,0,{cost}\n")
    with pytest.raises(DataValidationError) as ei:
        load_generic(f)
    assert shown in str(ei.value) and "np." not in str(ei.value)
    assert (ei.value.row, ei.value.column) == (3, "cost")
