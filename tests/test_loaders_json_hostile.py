"""RouterDC and LLMRouter loaders on hostile hand-written folders: records without any
score, non-finite scores, fields named like the loader's own columns."""

from __future__ import annotations

import json
import logging

import numpy as np
import pytest

from recsys_router.datasets.llmrouter import load_llmrouter
from recsys_router.datasets.routerdc import load_routerdc
from recsys_router.errors import DataValidationError


def _dump(path, obj):
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


def test_routerdc_record_with_only_null_scores_is_reported(tmp_path, caplog):
    _dump(tmp_path / "t_train.json", [{"question": "A", "scores": {"x": 1, "y": 0}},
                                      {"question": "B", "scores": {"x": None, "y": None}},
                                      {"question": "C", "scores": {"x": None, "y": 0.5}}])
    with caplog.at_level(logging.WARNING):
        d = load_routerdc(tmp_path)
    assert d.query_ids == ["t_train:0", "t_train:2"]
    assert d.meta["unscored_prompts"] == ["t_train:1"]
    assert "1 questions have no observed score" in caplog.text and "t_train:1" in caplog.text
    np.testing.assert_array_equal(d.scores, [[1.0, 0.0], [np.nan, 0.5]])


def test_llmrouter_record_with_only_null_scores_is_reported(tmp_path):
    _dump(tmp_path / "dcrouter_train.json", [{"question": "A", "scores": {"x": 1}},
                                             {"question": "B", "scores": {"x": None}}])
    _dump(tmp_path / "dcrouter_test.json", [{"question": "C", "scores": {"x": None}}])
    d = load_llmrouter(tmp_path)
    assert d.query_ids == ["train:0"]
    assert d.meta["unscored_prompts"] == ["test:0", "train:1"]


@pytest.mark.parametrize("bad", [float("inf"), "-Infinity"])
def test_routerdc_infinite_score_names_file_record_and_llm(tmp_path, bad):
    f = _dump(tmp_path / "t.json", [{"question": "A", "scores": {"x": 1}},
                                    {"question": "B", "scores": {"x": 0, "y": bad}}])
    with pytest.raises(DataValidationError) as err:
        load_routerdc(tmp_path)
    assert err.value.source == str(f) and err.value.row == 1 and err.value.column == "scores.y"
    assert "not a finite number" in str(err.value) and repr(bad) in str(err.value)


def test_routerdc_fields_named_like_loader_columns_are_kept_apart(tmp_path, caplog):
    _dump(tmp_path / "t_test.json", [
        {"question": "A", "scores": {"x": 1}, "query_id": "mine", "text": "other text",
         "file": "f.txt", "task": "my-task", "split": "train", "score": 0.5},
        {"question": "B", "scores": {"x": 0}}])
    with caplog.at_level(logging.WARNING):
        d = load_routerdc(tmp_path)
    assert d.query_ids == ["t_test:0", "t_test:1"] and d.texts == ["A", "B"]
    assert d.queries["task"].tolist() == ["t", "t"] and d.queries["split"].tolist() == ["test"] * 2
    assert d.queries["file"].tolist() == ["t_test", "t_test"]
    row = d.queries.iloc[0]
    assert (row["field_query_id"], row["field_text"], row["field_file"], row["field_task"],
            row["field_split"], row["score"]) == ("mine", "other text", "f.txt", "my-task",
                                                  "train", 0.5)
    assert list(d.queries.columns).count("file") == 1
    assert "record fields ['file', 'query_id', 'split', 'task', 'text']" in caplog.text


def _llmrouter(tmp_path, prices, query="A"):
    _dump(tmp_path / "dcrouter_train.json", [{"question": "A", "scores": {"x": 1, "y": 0}}])
    _dump(tmp_path / "default_llm.json", {"x": {"input_price": prices[0], "output_price": 1.0},
                                          "y": {"input_price": prices[1], "output_price": 2.0}})
    (tmp_path / "default_query_train.jsonl").write_text(
        "\n" + json.dumps({"task_name": "t", "query": query}) + "\n", encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("bad, shown", [("Infinity", "'Infinity' is not a finite number >= 0"),
                                        (float("inf"), "inf is not a finite number >= 0"),
                                        ("NaN", "'NaN' is not a finite number >= 0"),
                                        (-1, "-1 is not a finite number >= 0"),
                                        (True, "True is not a number")])
def test_llmrouter_bad_price_names_the_price_field(tmp_path, bad, shown):
    _llmrouter(tmp_path, [0.5, bad])
    with pytest.raises(DataValidationError, match=f"input_price {shown}") as err:
        load_llmrouter(tmp_path)
    assert err.value.source == str(tmp_path / "default_llm.json")
    assert err.value.column == "y.input_price"


def test_llmrouter_null_price_is_unknown_and_list_query_refused(tmp_path):
    d = load_llmrouter(_llmrouter(tmp_path, [0.5, None]))
    assert d.llms["input_price"].tolist()[0] == 0.5 and np.isnan(d.llms["input_price"][1])
    assert d.queries["task"].tolist() == ["t"]
    _llmrouter(tmp_path, [0.5, 1.0], query=["A", "B"])
    with pytest.raises(DataValidationError, match="query must be a string, got list") as err:
        load_llmrouter(tmp_path)
    assert err.value.row == 2 and err.value.source.endswith("default_query_train.jsonl")


def test_routerdc_lone_surrogate_names_file_line_and_record(tmp_path):
    f = tmp_path / "t.json"
    f.write_text('[{"question": "A \\ud83d\\ude00", "scores": {"x": 1}},\n'
                 ' {"question": "B \\udc00", "scores": {"x": 0}}]', encoding="utf-8")
    with pytest.raises(DataValidationError, match=r"lone UTF-16 surrogate\) is not text \(record "
                                                  r"1 of the list") as err:
        load_routerdc(tmp_path)
    assert err.value.row == 2 and err.value.source == str(f)


# ---------------------------------------------------------------- a JSON key given twice
def test_routerdc_score_given_twice_names_file_line_and_key(tmp_path):
    f = tmp_path / "mmlu_train.json"
    f.write_text('[{"question": "1?", "scores": {"m1": 1, "m2": 0}},\n'
                 ' {"question": "2+2?",\n'
                 '  "scores": {"m1": 1,\n'
                 '             "m1": 0, "m2": 1}}]', encoding="utf-8")
    with pytest.raises(DataValidationError) as err:
        load_routerdc(tmp_path)
    # the repeated key sits in the object that opens on line 3
    assert err.value.row == 3 and err.value.source == str(f)
    assert "names the key 'm1' twice" in str(err.value)


def test_llmrouter_query_field_given_twice_names_the_jsonl_line(tmp_path):
    _llmrouter(tmp_path, [0.5, 1.0])
    q = tmp_path / "default_query_train.jsonl"
    q.write_text('\n{"task_name": "t", "task_name": "u", "query": "A"}\n', encoding="utf-8")
    with pytest.raises(DataValidationError, match="names the key 'task_name' twice") as err:
        load_llmrouter(tmp_path)
    assert err.value.row == 2 and err.value.source == str(q)


@pytest.mark.parametrize("line, key", [
    ('{"query_id": "q1", "model": "a", "score": 1, "score": 0}', "score"),
    ('{"query_id": "q1", "model": "b", "model": "c", "score": 1}', "model"),
    ('{"query_id": "q1", "model": "a", "score": 1, "meta": {"k": 1, "k": 2}}', "k"),
])
def test_generic_jsonl_key_given_twice_names_the_line(tmp_path, line, key):
    from recsys_router.datasets.generic import load_generic
    f = tmp_path / "t.jsonl"
    f.write_text('{"query_id": "q0", "model": "a", "score": 1}\n\n' + line + "\n")
    with pytest.raises(DataValidationError, match=f"names the key '{key}' twice") as err:
        load_generic(f)
    assert err.value.row == 3 and err.value.source == str(f)


def test_routerdc_score_past_float_range_is_located(tmp_path):
    f = tmp_path / "t_train.json"
    f.write_text('[{"question": "A", "scores": {"x": 1, "y": 0}},\n'
                 ' {"question": "B", "scores": {"x": 0, "y": 1' + "0" * 400 + '}}]')
    with pytest.raises(DataValidationError, match=r"score \(an integer of 401 digits\) for LLM "
                                                  r"'y' is not a finite number") as err:
        load_routerdc(tmp_path)
    assert err.value.source == str(f) and err.value.column == "scores.y"
    # 5,000 digits: past what Python turns into an int at all (was a bare ValueError)
    f.write_text('[{"question": "A", "scores": {"x": 1' + "0" * 5000 + '}}]')
    with pytest.raises(DataValidationError, match="cannot be read as JSON .*4300 digits") as err:
        load_routerdc(tmp_path)
    assert err.value.source == str(f)


@pytest.mark.parametrize("option, shown", [
    ("chars_per_token=0",
     "dataset option 'chars_per_token' must be a finite number in (0, 1000000000.0], got 0"),
    ("chars_per_token=-4", "dataset option 'chars_per_token' must be"),
    ("chars_per_token=1e300", "dataset option 'chars_per_token' must be"),
    ("output_tokens=-1e9",
     "dataset option 'output_tokens' must be a finite number in [0, 1000000000.0], got -1"),
    ("output_tokens=1e308", "dataset option 'output_tokens' must be"),
])
def test_llmrouter_bad_cost_option_names_the_option_not_the_data(tmp_path, capsys, option, shown):
    # these were reported as "invalid cost inf ... row 0, column 'x|cost'" of the folder
    from recsys_router.cli import main
    folder = _llmrouter(tmp_path, [0.5, 1.0])
    assert main(["data", "info", str(folder), "-o", option]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and shown in err and "row" not in err, err
    key, value = option.split("=")
    with pytest.raises(ValueError, match=f"dataset option '{key}'"):
        load_llmrouter(folder, **{key: float(value)})
    assert main(["data", "info", str(folder), "-o", "chars_per_token=2",
                 "-o", "output_tokens=0"]) == 0


def test_routerdc_errors_name_the_file_line_and_record_number(tmp_path):
    # was "row 2" (the 0-based list index) for a record starting on line 16
    recs = [{"question": "q a", "scores": {"m1": 1, "m2": 0}},
            {"question": "q b", "scores": {"m1": 1, "m2": 0}},
            {"question": "q c", "scores": {"m1": "bad", "m2": 0}}]
    f = tmp_path / "mmlu_train.json"
    f.write_text(json.dumps(recs, indent=2))
    starts = [k for k, ln in enumerate(f.read_text().splitlines(), 1) if ln == "  {"]
    assert len(starts) == 3
    with pytest.raises(DataValidationError, match=r"'bad' for LLM 'm1' is not a number "
                                                  r"\(record 3 of the list\)") as err:
        load_routerdc(tmp_path)
    assert err.value.row == starts[2] and err.value.column == "scores.m1"
    recs[2]["scores"]["m1"], recs[0]["question"] = 0, ""
    f.write_text(json.dumps(recs, indent=2))
    with pytest.raises(DataValidationError, match=r"\(record 1 of the list\)") as err:
        load_routerdc(tmp_path)
    assert err.value.row == starts[0] and err.value.column == "question"
