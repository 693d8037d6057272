"""EmbedLLM loader on hostile copies of the fixture: repeated ids in the order files, ids
that are not int64 whole numbers, infinite labels, multi-line records, the splits option."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from recsys_router.datasets.embedllm import load_embedllm
from recsys_router.errors import DataValidationError

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture
def folder(tmp_path):
    shutil.copytree(FIXTURES / "embedllm", tmp_path / "e")
    return tmp_path / "e"


def test_conflicting_prompt_ids_are_refused_naming_both_lines(folder):
    # question_order.csv: header line 1; prompt 0 spans lines 2-4; prompt 1 is line 5
    with open(folder / "question_order.csv", "a", encoding="utf-8") as fh:
        fh.write("1,A completely different question?\n")  # line 9
    with pytest.raises(DataValidationError, match=r"prompt_id 1 is listed twice with different "
                                                  r"prompts \(lines 5 and 9\)") as err:
        load_embedllm(folder)
    assert err.value.row == 9 and err.value.source == str(folder / "question_order.csv")


def test_identical_repeated_prompt_id_is_kept_once(folder):
    with open(folder / "question_order.csv", "a", encoding="utf-8") as fh:
        fh.write("1,Which planet is known as the red planet?\n")
    d = load_embedllm(folder)
    assert d.texts[1] == "Which planet is known as the red planet?" and d.n_queries == 5


def test_conflicting_model_ids_are_refused(folder):
    with open(folder / "model_order.csv", "a", encoding="utf-8") as fh:
        fh.write("2,Qwen/Qwen1.5-7B-Chat\n")  # line 5; model 2 is line 4
    with pytest.raises(DataValidationError, match=r"model_id 2 is listed twice with different "
                                                  r"model_names \(lines 4 and 5\)"):
        load_embedllm(folder)


@pytest.mark.parametrize("bad", ["inf", "99999999999999999999", "-9223372036854775809", "1.5",
                                 ""])
def test_prompt_id_not_an_int64_whole_number(folder, bad):
    lines = (folder / "test.csv").read_text(encoding="utf-8").splitlines()
    lines[2] = lines[2].replace("1,3,1,", f"1,{bad},1,", 1)  # file line 3
    assert lines[2].startswith(f"1,{bad},1,")
    (folder / "test.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataValidationError, match="is not an integer id") as err:
        load_embedllm(folder)
    assert (err.value.row, err.value.column) == (3, "prompt_id")
    assert err.value.source == str(folder / "test.csv")


def test_ids_at_the_int64_edge_are_distinct_prompts(folder):
    big = (1 << 63) - 1
    (folder / "test.csv").write_text(f"model_id,prompt_id,label\n0,{big},1\n0,{big - 1},0\n",
                                     encoding="utf-8")
    d = load_embedllm(folder, splits="test")
    assert d.query_ids == [str(big), str(big - 1)]
    np.testing.assert_array_equal(d.scores[:, 0], [1, 0])


def test_infinite_label_and_errors_after_multi_line_records(folder):
    # train.csv: prompt 0's three records span lines 2-4, 5-7 and 8-10; line 11 is next
    lines = (folder / "train.csv").read_text(encoding="utf-8").split("\n")
    assert lines[10].startswith("0,1,0,")
    lines[10] = lines[10].replace("0,1,0,", "0,1,inf,", 1)
    (folder / "train.csv").write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(DataValidationError, match="label inf is not a finite number") as err:
        load_embedllm(folder)
    assert (err.value.row, err.value.column) == (11, "label")
    assert err.value.source == str(folder / "train.csv")
    lines[10] = lines[10].replace("0,1,inf,", "7,1,0,", 1)
    (folder / "train.csv").write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(DataValidationError, match="model_id 7 is not in model_order.csv") as err:
        load_embedllm(folder)
    assert err.value.row == 11


def test_splits_option_takes_a_comma_string_and_refuses_unknown_names(folder):
    d = load_embedllm(folder, splits="train, test")
    assert sorted(set(d.queries["split"])) == ["test", "train"] and d.n_queries == 4
    assert load_embedllm(folder, splits=["val"]).query_ids == ["2"]
    for bad in ("train,tset", ["train", "validation"], ""):
        with pytest.raises(ValueError, match="splits must name some of train, val, test"):
            load_embedllm(folder, splits=bad)


# ------------------------------------------------ no order files: names and texts from records
def _records_only(tmp_path, train, test):
    d = tmp_path / "bare"
    d.mkdir()
    head = "prompt_id,model_id,label,model_name,prompt\n"
    (d / "train.csv").write_text(head + train, encoding="utf-8")
    (d / "test.csv").write_text(head + test, encoding="utf-8")
    return d


def test_without_model_order_one_model_id_under_two_names_is_refused(tmp_path):
    d = _records_only(tmp_path, "0,0,1,gpt-4,What is 2+2?\n1,1,0,claude,Capital?\n",
                      "1,0,1,gpt-4,Capital?\n2,0,1,\"mistral\n7b\",Name a prime.\n")
    with pytest.raises(DataValidationError) as err:
        load_embedllm(d)
    msg = str(err.value)
    # record 2 of test.csv starts on line 3 (its quoted name spans lines 3-4)
    assert (err.value.source, err.value.row) == (str(d / "test.csv"), 3)
    assert ("model_id 0 has two different model_names, 'gpt-4' (train.csv line 2) and "
            "'mistral\\n7b' (line 3)") in msg and "model_order.csv" in msg


def test_without_question_order_one_prompt_id_with_two_texts_is_refused(tmp_path):
    d = _records_only(tmp_path, "0,0,1,gpt-4,What is 2+2?\n1,0,0,gpt-4,Capital?\n",
                      "0,1,0,claude,Translate 'cat' to German.\n")
    with pytest.raises(DataValidationError) as err:
        load_embedllm(d)
    assert (err.value.source, err.value.row) == (str(d / "test.csv"), 2)
    assert ("prompt_id 0 has two different prompts, 'What is 2+2?' (train.csv line 2) and "
            "\"Translate 'cat' to German.\" (line 2)") in str(err.value)
    assert "question_order.csv" in str(err.value)


def test_without_order_files_consistent_records_still_load(tmp_path):
    d = _records_only(tmp_path, "0,0,1,gpt-4,What is 2+2?\n1,1,0,claude,Capital?\n",
                      "0,1,0,claude,What is 2+2?\n")
    data = load_embedllm(d)
    assert data.llm_names == ["gpt-4", "claude"]
    assert data.texts == ["What is 2+2?", "Capital?"]
    np.testing.assert_array_equal(data.scores, [[1, 0], [np.nan, 0]])
