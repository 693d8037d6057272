"""RouterDC and LLMRouter loaders: real folders (counts re-derived with plain json) and
small hand-written folders for merge rules and bad input."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from conftest import shared_path

from recsys_router.datasets import load_dataset
from recsys_router.datasets.llmrouter import estimate_costs, load_llmrouter
from recsys_router.datasets.routerdc import load_routerdc
from recsys_router.errors import DataValidationError


def _dump(path, obj):
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


# ---------------------------------------------------------------- RouterDC
@pytest.fixture(scope="module")
def routerdc_records():
    folder = shared_path("routerdc_split2_model7")
    return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("*.json"))}


def test_routerdc_real_counts(routerdc_records):
    total = sum(len(v) for v in routerdc_records.values())
    per_file = sum(len({r["question"] for r in v}) for v in routerdc_records.values())
    distinct = len({r["question"] for v in routerdc_records.values() for r in v})
    assert (total, per_file, distinct) == (20600, 20589, 20565)
    d = load_dataset("routerdc", data_dir=shared_path())
    assert d.shape == (distinct, 7) and d.density == 1.0
    assert len(d.meta["merged_records"]) == total - distinct
    f = load_routerdc(shared_path("routerdc_split2_model7"), identity="file")
    assert f.shape == (per_file, 7)
    assert sorted(d.summary()["tasks"]) == ["MATH_prealgebra", "arc_challenge", "arc_easy", "ceval",
                                           "cmmlu", "gsm8k", "humaneval", "javascript", "mbpp", "mmlu"]
    rec = routerdc_records["gsm8k-test"][5]
    i = d.texts.index(rec["question"])
    assert d.queries["split"].iloc[i] == "test" and d.queries["task"].iloc[i] == "gsm8k"
    for llm, s in rec["scores"].items():
        assert d.scores[i, d.llm_names.index(llm)] == pytest.approx(s)


def test_routerdc_merge_rules(tmp_path):
    _dump(tmp_path / "t_train.json", [{"question": "A", "scores": {"x": 1, "y": 0}, "cluster_id": 3},
                                      {"question": "B", "scores": {"x": 0, "y": 1}}])
    _dump(tmp_path / "t_test.json", [{"question": "A", "scores": {"x": 0, "y": 0}},
                                     {"question": "C", "scores": {"x": 0.25, "y": 1}}])
    _dump(tmp_path / "other.json", [{"question": "C", "scores": {"x": 1, "y": 1}}])
    d = load_routerdc(tmp_path)
    # files read train, unsplit, test: C first comes from other.json (no split)
    assert d.query_ids == ["t_train:0", "t_train:1", "other:0"]
    assert d.queries["split"].tolist() == ["train", "train", None]
    assert d.queries["task"].tolist() == ["t", "t", "other"]
    assert d.scores.tolist() == [[1, 0], [0, 1], [1, 1]]
    assert d.queries["cluster_id"].tolist()[0] == 3
    m = load_routerdc(tmp_path, duplicates="mean")
    assert m.scores[0].tolist() == [0.5, 0] and m.scores[2].tolist() == [0.625, 1]
    assert load_routerdc(tmp_path, identity="file").n_queries == 5


@pytest.mark.parametrize("records,column", [
    ([{"question": "A", "scores": [1, 0]}], "scores"),
    ([{"question": "", "scores": {"x": 1}}], "question"),
    ([{"question": "A", "scores": {"x": 1}}, {"question": "B", "scores": {"x": "high"}}], "scores.x")])
def test_routerdc_bad_records_are_located(tmp_path, records, column):
    _dump(tmp_path / "bad.json", records)
    with pytest.raises(DataValidationError) as ei:
        load_routerdc(tmp_path / "bad.json")
    assert ei.value.column == column and "bad.json" in str(ei.value)
    # one-line file: every record starts on line 1; the message counts records from 1
    assert ei.value.row == 1 and f"(record {len(records)} of the list)" in str(ei.value)


def test_routerdc_invalid_json_is_located(tmp_path):
    (tmp_path / "x.json").write_text('[{"question": "A",\n "scores": }]')
    with pytest.raises(DataValidationError) as ei:
        load_routerdc(tmp_path / "x.json")
    assert ei.value.row == 2


# ---------------------------------------------------------------- LLMRouter
def test_llmrouter_real_counts_tasks_and_cost():
    folder = shared_path("llmrouter")
    train = json.loads((folder / "dcrouter_train.json").read_text())
    test = json.loads((folder / "dcrouter_test.json").read_text())
    both = {r["question"] for r in train} & {r["question"] for r in test}
    assert (len(train), len(test), len(both)) == (5608, 500, 119)
    d = load_llmrouter(folder)
    assert d.shape == (5608 + 500 - 119, 9) == (5989, 9)
    assert d.summary()["splits"] == {"train": 5608, "test": 381}
    assert d.meta["queries_without_task"] == 0 and len(d.summary()["tasks"]) == 14
    llm = json.loads((folder / "default_llm.json").read_text())
    q = d.texts[10]
    j = d.llm_names.index("llama3-chatqa-1.5-70b")
    p_in, p_out = llm["llama3-chatqa-1.5-70b"]["input_price"], llm["llama3-chatqa-1.5-70b"]["output_price"]
    expected = (math.ceil(len(q) / 4) * p_in + 256 * p_out) / 1e6
    assert d.costs[10, j] == pytest.approx(expected, rel=1e-6)
    assert d.llms.set_index("name").loc["gemma-2-9b-it", "size"] == 9
    # a question in both files keeps its train scores
    qtext = sorted(both)[0]
    rec = next(r for r in train if r["question"] == qtext)
    i = d.texts.index(qtext)
    assert d.queries["split"].iloc[i] == "train"
    assert [d.scores[i, d.llm_names.index(k)] for k in rec["scores"]] == pytest.approx(
        list(rec["scores"].values()))


def test_llmrouter_small_folder(tmp_path):
    _dump(tmp_path / "dcrouter_train.json", [{"question": "abcdefgh", "scores": {"a": 1, "b": 0}}])
    _dump(tmp_path / "dcrouter_test.json", [{"question": "xyz", "scores": {"a": 0, "b": 1}}])
    _dump(tmp_path / "default_llm.json", {"a": {"size": "70B", "feature": "big", "input_price": 1.0,
                                                "output_price": 2.0},
                                          "b": {"size": "7B", "feature": "small", "input_price": 0.1,
                                                "output_price": 0.1}})
    (tmp_path / "default_query_test.jsonl").write_text(
        json.dumps({"task_name": "t2", "query": "xyz", "metric": "em"}) + "\n")
    d = load_dataset(str(tmp_path), output_tokens=10)
    assert d.name == "llmrouter" and d.shape == (2, 2)
    assert d.queries["task"].tolist()[1] == "t2" and d.meta["queries_without_task"] == 1
    np.testing.assert_allclose(d.costs, [[(2 * 1.0 + 10 * 2.0) / 1e6, (2 * 0.1 + 10 * 0.1) / 1e6],
                                         [(1 * 1.0 + 10 * 2.0) / 1e6, (1 * 0.1 + 10 * 0.1) / 1e6]],
                               rtol=1e-6)
    assert d.llms["description"].tolist() == ["big", "small"]
    _dump(tmp_path / "default_llm.json", {"a": {"input_price": "cheap"}})
    with pytest.raises(DataValidationError, match="input_price 'cheap' is not a number"):
        load_llmrouter(tmp_path)


def test_estimate_costs_by_hand():
    c = estimate_costs(["a" * 9, "b"], [1.0, 3.0], [0.0, 1.0], output_tokens=100)
    np.testing.assert_allclose(c * 1e6, [[3, 3 * 3 + 100], [1, 3 + 100]])
