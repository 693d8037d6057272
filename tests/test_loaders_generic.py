"""Generic long table: round trip through every format, aliases, text rules, located errors."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pytest

from recsys_router.data import RoutingData
from recsys_router.datasets import load_dataset
from recsys_router.datasets._common import parse_size, task_split_from_stem
from recsys_router.datasets.generic import detect_generic, load_generic, write_long
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.errors import DataValidationError


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz", ".parquet", ".jsonl"])
def test_round_trip_every_format(tmp_path, suffix):
    d = make_synthetic(60, 4, 3, seed=5)
    d.scores[5, 2] = np.nan  # a missing cell (not in the first query, so LLM order is kept)
    d.queries["split"] = np.where(np.arange(60) % 3 == 0, "test", "train")
    path = write_long(d, tmp_path / f"out{suffix}")
    e = load_dataset(str(path))
    assert e.query_ids == d.query_ids and e.llm_names == d.llm_names
    np.testing.assert_array_equal(e.scores, d.scores)
    obs = d.observed
    np.testing.assert_allclose(e.costs[obs], d.costs[obs], rtol=1e-6)
    assert np.isnan(e.costs[5, 2])  # cost of an unobserved cell is not written
    assert e.texts == d.texts
    assert e.queries["task"].tolist() == d.queries["task"].tolist()
    assert e.queries["split"].tolist() == d.queries["split"].tolist()
    assert not list(tmp_path.glob(".*tmp"))  # atomic write left no temp file


def test_text_given_once_and_aliases(tmp_path):
    p = _write(tmp_path, "a.csv", "query_id,llm,score,prompt,category\n"
                                  "q1,m1,1,hello,math\nq1,m2,0,,\nq2,m2,0.5,bye,code\n")
    d = load_generic(p)
    assert d.query_ids == ["q1", "q2"] and d.llm_names == ["m1", "m2"]
    assert d.texts == ["hello", "bye"]
    assert d.queries["task"].tolist() == ["math", "code"]
    np.testing.assert_array_equal(d.scores, [[1, 0], [np.nan, 0.5]])
    assert d.costs is None


def test_conflicting_texts_name_both_rows(tmp_path):
    p = _write(tmp_path, "a.csv", "query_id,model,score,query_text\n"
                                  "q1,m1,1,hello\nq2,m1,1,x\nq1,m2,0,HELLO\n")
    with pytest.raises(DataValidationError) as ei:
        load_generic(p)
    msg = str(ei.value)
    assert "a.csv" in msg and "rows 2 and 4" in msg and "'q1'" in msg and "query_text" in msg


def test_non_numeric_score_names_file_line_and_column(tmp_path):
    p = _write(tmp_path, "bad.csv", "query_id,model,score\nq1,m1,1\nq1,m2,abc\n")
    with pytest.raises(DataValidationError) as ei:
        load_generic(p)
    assert ei.value.row == 3 and ei.value.column == "score" and "bad.csv" in str(ei.value)
    assert "'abc'" in str(ei.value)


def test_missing_column(tmp_path):
    p = _write(tmp_path, "m.csv", "query_id,model,value\nq1,m1,1\n")
    with pytest.raises(DataValidationError, match="missing required column 'score'"):
        load_generic(p)


def test_jsonl_bad_line_is_located(tmp_path):
    p = _write(tmp_path, "x.jsonl", '{"query_id": "a", "model": "m", "score": 1}\n{oops\n')
    with pytest.raises(DataValidationError) as ei:
        load_generic(p)
    assert ei.value.row == 2 and "x.jsonl" in str(ei.value)


def test_duplicates_error_then_modes(tmp_path):
    p = _write(tmp_path, "d.csv", "query_id,model,score,cost\nq,m,1,0.1\nq,n,0,0.2\nq,m,0,0.3\n")
    with pytest.raises(DataValidationError) as ei:
        load_generic(p)
    assert ei.value.row == 4 and "also at row 2" in str(ei.value)
    assert load_generic(p, duplicates="first").scores[0, 0] == 1
    assert load_generic(p, duplicates="last").scores[0, 0] == 0
    mean = load_generic(p, duplicates="mean")
    assert mean.scores[0, 0] == 0.5 and mean.costs[0, 0] == pytest.approx(0.2)


def test_query_ids_stay_strings(tmp_path):
    p = _write(tmp_path, "z.csv", "query_id,model,score\n007,m,1\n7,m,0\n")
    assert load_generic(p).query_ids == ["007", "7"]


def test_detect_and_gz_jsonl(tmp_path):
    recs = [{"query_id": "a", "model": "m", "score": 1.0}, {"query_id": "b", "model": "m", "score": 0.0}]
    p = tmp_path / "r.jsonl.gz"
    with gzip.open(p, "wt", encoding="utf-8") as fh:
        fh.write("\n".join(json.dumps(r) for r in recs))
    assert detect_generic(p)
    assert load_dataset(str(p)).scores[:, 0].tolist() == [1.0, 0.0]
    other = _write(tmp_path, "o.csv", "a,b\n1,2\n")
    assert not detect_generic(other)
    with pytest.raises(ValueError, match="cannot tell which dataset format"):
        load_dataset(str(other))


def test_large_parquet_is_vectorised(tmp_path):
    # 200k records: a row loop would take many seconds; vectorised reading takes well under one
    n_q, n_l = 20000, 10
    df = pd.DataFrame({"query_id": np.repeat([f"q{i}" for i in range(n_q)], n_l),
                       "model": np.tile([f"m{j}" for j in range(n_l)], n_q),
                       "score": np.arange(n_q * n_l) % 2, "cost": 0.5})
    p = tmp_path / "big.parquet"
    df.to_parquet(p)
    d = load_generic(p)
    assert d.shape == (n_q, n_l)
    assert d.scores[123, 4] == (123 * n_l + 4) % 2


@pytest.mark.parametrize("name,expected", [
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", 56.0), ("meta-llama/Llama-2-70b-chat-hf", 70.0),
    ("Qwen/Qwen1.5-1.8B-Chat", 1.8), ("meta-llama/Meta-Llama-3.1-8B", 8.0),
    ("bigscience/bloom-560m", 0.56), ("gpt-4-1106-preview", np.nan), ("Qwen2.5-7B", 7.0),
    ("some/model-7bit", np.nan), ("8x22b", 176.0), ("7B", 7.0)])
def test_parse_size(name, expected):
    got = parse_size(name)
    assert (np.isnan(got) and np.isnan(expected)) or got == expected


@pytest.mark.parametrize("stem,expected", [
    ("mmlu_train", ("mmlu", "train")), ("gsm8k-test", ("gsm8k", "test")),
    ("arc_challenge_test", ("arc_challenge", "test")), ("ceval", ("ceval", None)),
    ("x_validation", ("x", "val")), ("MATH_prealgebra", ("MATH_prealgebra", None))])
def test_task_split_from_stem(stem, expected):
    assert task_split_from_stem(stem) == expected


def test_routingdata_round_trip_keeps_extra_query_columns(tmp_path):
    d = RoutingData(pd.DataFrame({"query_id": ["a", "b"], "text": ["x", "y"], "source": ["s1", "s2"]}),
                    ["m1", "m2"], [[1, 0], [0, 1]])
    e = load_generic(write_long(d, tmp_path / "e.parquet"))
    assert e.queries["source"].tolist() == ["s1", "s2"]


@pytest.mark.parametrize("col, text", [
    ("query_id", "query_id,model,score\nq1,a,1\nq2,a,1\nq3,a,1\n   ,a,0\n"),
    ("model", "query_id,model,score\nq1,a,1\nq1,b,1\nq1,c,1\nq2, ,0\n"),
])
def test_whitespace_only_id_names_the_file_line_and_column(tmp_path, col, text):
    # header = line 1, so the blank record is file line 5 (not matrix row 3)
    p = _write(tmp_path, "d.csv", text)
    with pytest.raises(DataValidationError, match=rf"d\.csv, row 5, column '{col}': empty {col}"):
        load_generic(p)


@pytest.mark.parametrize("bad, what", [
    ("0", r"propensity 0.0 must be in \(0, 1\]"), ("1.5", r"propensity 1.5 must be in \(0, 1\]"),
    ("abc", "propensity 'abc' is not a number"), ("50%", "propensity '50%' is not a number"),
    ("", "no propensity on this record")])
def test_bad_propensity_names_its_file_line_and_raw_value(tmp_path, bad, what):
    # the bad record is the third one, on file line 4 (query index 2 once loaded)
    p = _write(tmp_path, "log.csv", "query_id,model,score,propensity\nq1,a,1,0.5\nq2,b,0,0.5\n"
                                    f"q3,a,1,{bad}\n")
    with pytest.raises(DataValidationError,
                       match=rf"log\.csv, row 4, column 'propensity': {what}"):
        load_generic(p)


def test_check_logged_shows_a_non_numeric_propensity_as_given():
    from recsys_router.feedback.logged import check_logged
    q = pd.DataFrame({"query_id": ["q1", "q2"], "propensity": [0.5, "abc"]})
    d = RoutingData(q, ["a"], [[1.0], [0.0]])
    with pytest.raises(ValueError, match=r"query 'q2' \(row 1\): propensity 'abc' is not a number"):
        check_logged(d)


def test_a_folder_holding_one_long_table_is_detected(tmp_path):
    """``--data folder`` finds the generic format when the folder's only table file is a long
    table (as ``load_generic`` reads it); two tables are ambiguous and are not claimed."""
    folder = tmp_path / "pool"
    folder.mkdir()
    (folder / "pool.csv").write_text("query_id,model,score\nq1,a,1\nq1,b,0\nq2,a,0\nq2,b,1\n")
    (folder / "NOTES.txt").write_text("not a table\n")
    assert detect_generic(folder)
    data = load_dataset(str(folder))
    assert data.llm_names == ["a", "b"] and data.scores.tolist() == [[1.0, 0.0], [0.0, 1.0]]
    (folder / "other.csv").write_text("query_id,model,score\nq3,a,1\n")
    assert not detect_generic(folder)
    with pytest.raises(ValueError, match="cannot tell which dataset format"):
        load_dataset(str(folder))
    (folder / "other.csv").unlink()
    (folder / "pool.csv").write_text("id,wide_a,wide_b\nq1,1,0\n")  # not a long table
    assert not detect_generic(folder)
