"""RouterBench loaders on hostile small folders and frames: costs validated like scores,
errors at the file line of multi-line records, query ids that would collide."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recsys_router.datasets._common import text_hash
from recsys_router.datasets.routerbench import load_routerbench_zs, routerbench_frame_to_data
from recsys_router.errors import DataValidationError

LLMS = ["m-7b", "gpt-x"]


def _frame(prompts, ids, scores, costs=None):
    """A wide RouterBench frame; a prompt literal with triple quotes may hold real newlines,
    so its CSV record spans several lines."""
    df = pd.DataFrame({"sample_id": ids, "prompt": prompts, "eval_name": ["e"] * len(ids)})
    for j, m in enumerate(LLMS):
        df[m] = [s[j] for s in scores]
    for j, m in enumerate(LLMS):
        df[f"{m}|total_cost"] = [c[j] for c in costs] if costs else [0.001 * (j + 1)] * len(ids)
    return df


def _write(tmp_path, df, name="e_test.csv"):
    df.to_csv(tmp_path / name)  # leading unnamed index column, as published
    return tmp_path


@pytest.mark.parametrize("cost, shown", [("n/a", "'n/a'"), (-0.5, "-0.5"), ("inf", "inf"),
                                         ("NaN", "'NaN'")])
def test_bad_cost_names_file_line_and_column(tmp_path, cost, shown):
    df = _frame([str(["a"]), "['''b\nsecond line''']", str(["c"])], ["x.1", "x.2", "x.3"],
                [[1, 0], [0, 1], [1, 1]], costs=[[0.1, 0.2], [0.1, 0.2], [0.1, cost]])
    _write(tmp_path, df)
    with pytest.raises(DataValidationError) as err:
        load_routerbench_zs(tmp_path)
    # header line 1, x.1 line 2, x.2 lines 3-4 (newline in its prompt), x.3 line 5
    assert err.value.source == str(tmp_path / "e_test.csv")
    assert (err.value.row, err.value.column) == (5, "gpt-x|total_cost")
    assert f"cost {shown} is not a finite number >= 0" in str(err.value)


def test_score_past_float_range_names_file_line_and_column(tmp_path):
    # whole-number columns: pandas keeps a 401-digit value as an int (was a bare OverflowError)
    df = _frame([str(["a"]), str(["b"])], ["x.1", "x.2"], [[1, 0], ["-1" + "0" * 400, 1]])
    _write(tmp_path, df)
    with pytest.raises(DataValidationError) as err:
        load_routerbench_zs(tmp_path)
    assert (err.value.row, err.value.column) == (3, "m-7b")
    assert "score (a negative integer of 401 digits) is not a finite number" in str(err.value)
    df = _frame([str(["a"]), str(["b"])], ["x.1", "x.2"], [[1, 0], [0, 1]],
                costs=[[1, 2], [3, "1" + "0" * 400]])
    _write(tmp_path, df)
    with pytest.raises(DataValidationError) as err:
        load_routerbench_zs(tmp_path)
    assert (err.value.row, err.value.column) == (3, "gpt-x|total_cost")
    assert "cost (an integer of 401 digits) is not a finite number >= 0" in str(err.value)


def test_infinite_score_and_empty_cost(tmp_path):
    df = _frame(["['''a\nb\nc''']", str(["d"])], ["x.1", "x.2"], [[1, 0], [0, "-inf"]],
                costs=[[0.1, np.nan], [0.3, 0.4]])
    _write(tmp_path, df)
    with pytest.raises(DataValidationError, match="score -inf is not a finite number") as err:
        load_routerbench_zs(tmp_path)
    assert (err.value.row, err.value.column) == (5, "gpt-x")  # x.1 spans lines 2-4
    df = _frame(["['''a\nb''']", str(["d"])], ["x.1", "x.2"], [[1, 0], [0, 1]],
                costs=[[0.1, np.nan], [0.3, 0.4]])
    d = load_routerbench_zs(_write(tmp_path, df))
    np.testing.assert_allclose(d.costs, [[0.1, np.nan], [0.3, 0.4]])  # empty = unknown cost


def test_error_row_of_a_record_after_a_multi_line_prompt(tmp_path):
    df = _frame(["['''a\n\nb''']", "not a list"], ["x.1", "x.2"], [[1, 0], [0, 1]])
    _write(tmp_path, df)
    with pytest.raises(DataValidationError) as err:
        load_routerbench_zs(tmp_path)
    assert (err.value.row, err.value.column) == (5, "prompt")  # x.1 spans lines 2-4


def test_generated_id_equal_to_another_sample_id_is_refused():
    # s1 has two prompts, so its records get ids 's1#<hash of the prompt>'; a third record's
    # sample_id is exactly the id the first prompt gets
    h = text_hash(pd.Series(["What is 2+2?"]), 8).iloc[0]
    frame = _frame(["['What is 2+2?']", "['Name a prime.']", "['Capital of France?']"],
                   ["s1", "s1", f"s1#{h}"], [[1, 0], [0, 1], [0, 1]])
    with pytest.raises(DataValidationError, match=rf"query id 's1#{h}' would name two "
                                                  rf"different prompts: the record at crafted, "
                                                  rf"row 1 and this one") as err:
        routerbench_frame_to_data(frame, source="crafted", name="rb", rows=np.array([1, 2, 3]))
    assert (err.value.row, err.value.column) == (3, "sample_id")
    # without the clash: three queries, ids as documented
    frame.loc[2, "sample_id"] = "s2"
    d = routerbench_frame_to_data(frame, source="crafted", name="rb")
    h2 = text_hash(pd.Series(["Name a prime."]), 8).iloc[0]
    assert d.query_ids == [f"s1#{h}", f"s1#{h2}", "s2"] and len(d.queries) == 3
