"""Ids, task/split labels and costs of a generic long table are read as written: JSONL ids
are not turned into floats, CSV labels are not turned into numbers, boolean costs are refused
(datasets/_json.py, datasets/generic.py, long_ids.py, long_table.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recsys_router.data import RoutingData
from recsys_router.datasets.generic import load_generic, write_long
from recsys_router.errors import DataValidationError

NAN = np.nan


def _write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ---- r1: JSONL ids keep their JSON value ----------------------------------------------------

def test_jsonl_integer_ids_beside_a_float_id_are_not_merged(tmp_path):
    # 2**53 + 1 and 2**53 are one float64; 0.5 made pandas read the whole column as floats
    p = _write(tmp_path, "d.jsonl", '{"query_id":9007199254740993,"model":"a","score":1}\n'
                                    '{"query_id":9007199254740992,"model":"b","score":0}\n'
                                    '{"query_id":0.5,"model":"a","score":0}\n')
    d = load_generic(p)
    assert d.query_ids == ["9007199254740993", "9007199254740992", "0.5"]
    assert d.llm_names == ["a", "b"]
    np.testing.assert_array_equal(d.scores, [[1, NAN], [NAN, 0], [0, NAN]])
    # with duplicates="mean" the two queries' scores were averaged as one duplicate
    p2 = _write(tmp_path, "m.jsonl", '{"query_id":9007199254740993,"model":"a","score":1}\n'
                                     '{"query_id":9007199254740992,"model":"a","score":0}\n'
                                     '{"query_id":0.5,"model":"a","score":0}\n')
    m = load_generic(p2, duplicates="mean")
    assert m.query_ids == ["9007199254740993", "9007199254740992", "0.5"]
    assert m.scores.tolist() == [[1.0], [0.0], [0.0]] and m.meta["merged_duplicates"] == 0


def test_jsonl_small_integer_ids_are_spelled_as_in_a_csv(tmp_path):
    p = _write(tmp_path, "e.jsonl", '{"query_id":1,"model":"a","score":1}\n'
                                    '{"query_id":2.5,"model":"a","score":0}\n')
    c = _write(tmp_path, "e.csv", "query_id,model,score\n1,a,1\n2.5,a,0\n")
    assert load_generic(p).query_ids == ["1", "2.5"] == load_generic(c).query_ids


def test_jsonl_equal_numbers_of_different_kinds_are_two_ids(tmp_path):
    # 1 == 1.0 in Python, yet the file wrote two different ids ('1' and '1.0')
    p = _write(tmp_path, "f.jsonl", '{"query_id":1,"model":"a","score":1}\n'
                                    '{"query_id":1.0,"model":"a","score":0}\n')
    d = load_generic(p)
    assert d.query_ids == ["1", "1.0"] and d.scores.tolist() == [[1.0], [0.0]]


@pytest.mark.parametrize("column, other", [("query_id", "model"), ("model", "query_id")])
def test_jsonl_number_and_text_spelling_one_id_are_refused_naming_both_lines(tmp_path, column,
                                                                             other):
    # the blank line 3 counts: rows are file lines
    p = _write(tmp_path, "g.jsonl", f'{{"{column}": "x", "{other}": "o1", "score": 1}}\n'
                                    f'{{"{column}": 7, "{other}": "o2", "score": 1}}\n\n'
                                    f'{{"{column}": "7", "{other}": "o3", "score": 1}}\n')
    with pytest.raises(DataValidationError) as err:
        load_generic(p)
    assert str(err.value) == (f"{p}, row 4, column '{column}': {column} 7 (row 2, an integer) "
                              f"and '7' (row 4, a text) are different values that would be one "
                              f"id '7'; write every {column} the same way (all as texts, or all "
                              f"as numbers)")


def test_jsonl_task_labels_beside_a_missing_one_stay_integers(tmp_path):
    p = _write(tmp_path, "t.jsonl", '{"query_id":"q1","model":"a","score":1,"task":1}\n'
                                    '{"query_id":"q2","model":"a","score":0,"task":2}\n'
                                    '{"query_id":"q3","model":"a","score":1}\n')
    d = load_generic(p)
    assert d.summary()["tasks"] == {"1": 1, "2": 1}
    assert d.split(ood_tasks=["2"], seed=0)["test"].query_ids == ["q2"]


# ---- r2: CSV labels are text ----------------------------------------------------------------

@pytest.mark.parametrize("column", ["task", "category", "eval_name"])
def test_csv_task_labels_are_read_as_text(tmp_path, column):
    p = _write(tmp_path, "tasks.csv", f"query_id,model,score,{column}\n"
                                      "q1,a,1,1\nq2,a,0,2\nq3,a,1,\nq4,a,1,2\nq5,a,0,007\n")
    d = load_generic(p)
    assert d.queries["task"].tolist() == ["1", "2", NAN, "2", "007"]
    assert d.summary()["tasks"] == {"007": 1, "1": 1, "2": 2}
    assert d.split(ood_tasks=["2"], seed=0)["test"].query_ids == ["q2", "q4"]


def test_csv_split_labels_are_read_as_text(tmp_path):
    # numeric-looking split labels stay as written, so a bad one is shown as written
    p = _write(tmp_path, "s.csv", "query_id,model,score,split\nq1,a,1,train\nq2,a,0,01\n")
    d = load_generic(p)
    assert d.queries["split"].tolist() == ["train", "01"]
    with pytest.raises(DataValidationError, match=r"split label '01'"):
        d.split(column="split")


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz", ".jsonl", ".parquet"])
def test_convert_round_trip_keeps_labels_exactly(tmp_path, suffix):
    q = pd.DataFrame({"query_id": ["a", "b", "c"], "task": ["01", "1.10", "007"],
                      "split": ["1", "train", "0"]})
    src = RoutingData(q, ["m1"], [[1], [0], [1]])
    back = load_generic(write_long(src, tmp_path / f"rt{suffix}"))
    assert back.queries["task"].tolist() == ["01", "1.10", "007"]
    assert back.queries["split"].tolist() == ["1", "train", "0"]


# ---- r4: boolean costs ----------------------------------------------------------------------

def test_jsonl_boolean_cost_is_refused_at_its_line(tmp_path):
    p = _write(tmp_path, "c.jsonl", '{"query_id":"q1","model":"a","score":1,"cost":0.5}\n\n'
                                    '{"query_id":"q1","model":"b","score":0,"cost":false}\n')
    with pytest.raises(DataValidationError) as err:
        load_generic(p)
    assert str(err.value) == (f"{p}, row 3, column 'cost': cost False is a boolean; expected a "
                              f"number >= 0 (a cost in USD, not true/false; 1 such records)")


def test_parquet_boolean_cost_column_is_refused(tmp_path):
    p = tmp_path / "c.parquet"
    pd.DataFrame({"query_id": ["q1", "q1"], "model": ["a", "b"], "score": [1.0, 0.0],
                  "cost": [True, False]}).to_parquet(p, index=False)
    with pytest.raises(DataValidationError, match=r"row 1, column 'cost': cost True is a "
                                                  r"boolean.*2 such records"):
        load_generic(p)


def test_boolean_scores_read_as_one_and_zero(tmp_path):
    # documented: a boolean score is a correct/incorrect outcome
    p = _write(tmp_path, "b.jsonl", '{"query_id":"q1","model":"a","score":true,"cost":1}\n'
                                    '{"query_id":"q1","model":"b","score":false,"cost":2}\n')
    d = load_generic(p)
    assert d.scores.tolist() == [[1.0, 0.0]] and d.costs.tolist() == [[1.0, 2.0]]
