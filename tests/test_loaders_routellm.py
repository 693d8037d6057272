"""RouteLLM loaders: real MMLU / GSM8K / MT-Bench counts re-derived with the csv and json
modules, turn handling, the combined dataset and bad input."""

from __future__ import annotations

import csv
import json
from collections import defaultdict

import numpy as np
import pytest
from conftest import shared_path

from recsys_router.datasets import load_dataset
from recsys_router.datasets.routellm import (load_routellm, load_routellm_gsm8k, load_routellm_mmlu,
                                             load_routellm_mtbench)
from recsys_router.errors import DataValidationError

GPT4, MIXTRAL = "gpt-4-1106-preview", "mistralai/Mixtral-8x7B-Instruct-v0.1"


def test_mmlu_real():
    folder = shared_path("routellm", "mmlu")
    n, correct = 0, defaultdict(int)
    for f in sorted(folder.glob("mmlu_*.csv")):
        with open(f, newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                n += 1
                for m in (GPT4, MIXTRAL):
                    correct[m] += row[m] == "True"
    d = load_routellm_mmlu(shared_path("routellm"))
    assert d.shape == (n, 2) == (14042, 2)
    assert len(d.summary()["tasks"]) == 57 and d.is_binary
    for m in (GPT4, MIXTRAL):
        assert int(d.scores[:, d.llm_names.index(m)].sum()) == correct[m]
    assert d.meta["repeated_prompt_texts"] == 105


def test_gsm8k_real_with_responses():
    d = load_dataset("routellm_gsm8k", data_dir=shared_path(), with_responses=True)
    assert d.shape == (1319, 2) and d.llm_names == [MIXTRAL, GPT4]
    with open(shared_path("routellm", "gsm8k", "gsm8k_responses.csv"), newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    assert d.scores[7, 1] == (rows[7][GPT4] == "True")
    assert d.responses.loc["gsm8k/7", GPT4] == rows[7][f"{GPT4}_response"]
    assert d.texts[7] == rows[7]["prompt"]


@pytest.fixture(scope="module")
def judgements():
    grades = defaultdict(list)
    with open(shared_path("routellm", "mt_bench", "judgements.jsonl"), encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            grades[(str(r["question_id"]), r["model"])].append((r["turn"], r["score"]))
    return grades


def test_mtbench_real_mean_over_turns(judgements):
    d = load_routellm_mtbench(shared_path("routellm"))
    assert d.shape == (80, 2)
    for (qid, model), g in list(judgements.items())[:40]:
        expected = np.mean([s for _, s in g])
        assert d.scores[d.query_ids.index(qid), d.llm_names.index(model)] == pytest.approx(expected)
    assert d.summary()["tasks"]["coding"] == 10 and d.has_text


def test_mtbench_real_separate_turns(judgements):
    d = load_routellm_mtbench(shared_path("routellm", "mt_bench"), turns="separate")
    assert d.shape == (160, 2)
    (qid, model), g = next(iter(judgements.items()))
    for turn, score in g:
        assert d.scores[d.query_ids.index(f"{qid}-t{turn}"), d.llm_names.index(model)] == score
    with open(shared_path("routellm", "mt_bench", "question.jsonl"), encoding="utf-8") as fh:
        q = {str(r["question_id"]): r for r in map(json.loads, fh)}
    assert d.texts[d.query_ids.index(f"{qid}-t2")] == q[qid]["turns"][1]


def test_combined_real():
    d = load_dataset("routellm", data_dir=shared_path())
    assert d.shape == (14042 + 1319 + 80, 2)
    assert 0 <= np.nanmin(d.scores) and np.nanmax(d.scores) <= 1
    assert load_routellm(shared_path("routellm"), benchmark="mt_bench", turns="separate").n_queries == 160
    with pytest.raises(ValueError, match="benchmark must be one of"):
        load_routellm(shared_path("routellm"), benchmark="hellaswag")


def test_bad_boolean_and_failed_judgement(tmp_path):
    (tmp_path / "mmlu").mkdir()
    (tmp_path / "mmlu" / "mmlu_x.csv").write_text("prompt,a,b\nq1,True,False\nq2,maybe,True\n")
    with pytest.raises(DataValidationError) as ei:
        load_routellm_mmlu(tmp_path)
    assert ei.value.row == 3 and ei.value.column == "a" and "mmlu_x.csv" in str(ei.value)
    (tmp_path / "mt_bench").mkdir()
    lines = [{"question_id": 1, "model": "a", "score": 8, "turn": 1},
             {"question_id": 1, "model": "a", "score": -1, "turn": 2},
             {"question_id": 1, "model": "b", "score": 4, "turn": 1},
             {"question_id": 1, "model": "b", "score": 6, "turn": 2}]
    (tmp_path / "mt_bench" / "judgements.jsonl").write_text("\n".join(map(json.dumps, lines)))
    d = load_routellm_mtbench(tmp_path)
    assert d.scores.tolist() == [[8.0, 5.0]] and d.meta["failed_judgements"] == 1
    lines.append({"question_id": 1, "model": "b", "score": 2, "turn": 2})
    (tmp_path / "mt_bench" / "judgements.jsonl").write_text("\n".join(map(json.dumps, lines)))
    with pytest.raises(DataValidationError, match="duplicate record"):
        load_routellm_mtbench(tmp_path)
    assert load_routellm_mtbench(tmp_path, duplicates="mean").scores.tolist() == [[8.0, 4.0]]
    with pytest.raises(FileNotFoundError):
        load_routellm_gsm8k(tmp_path)
