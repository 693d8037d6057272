"""RouterBench loaders: the real CSV folder (with its traps), small folders and pickles."""

from __future__ import annotations

import ast
import csv
import glob
import os

import numpy as np
import pandas as pd
import pytest
from conftest import shared_path

from recsys_router.datasets import load_dataset
from recsys_router.datasets.routerbench import load_routerbench, load_routerbench_zs
from recsys_router.errors import DataValidationError

LLMS = ["m-7b", "gpt-x"]


def _rows(path):
    """Second, simple reading of a RouterBench CSV with the csv module."""
    csv.field_size_limit(1 << 30)
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def real():
    return load_routerbench_zs(shared_path("routerbench_zs"), with_responses=True)


def test_real_counts_match_an_independent_count(real):
    folder = shared_path("routerbench_zs")
    rows = [r for f in sorted(glob.glob(os.path.join(folder, "*.csv"))) for r in _rows(f)]
    assert len(rows) == 3178
    distinct_prompts = {r["prompt"] for r in rows}          # the full prompt list as published
    llm_cols = [c for c in rows[0] if "|" not in c and f"{c}|total_cost" in rows[0]]
    assert len(llm_cols) == 11 and "oracle_model_to_route_to" not in llm_cols
    assert real.shape == (len(distinct_prompts), 11) == (3176, 11)
    assert sorted(real.llm_names) == sorted(llm_cols)
    empty_cells = sum(r[c] == "" for r in rows for c in llm_cols)
    assert empty_cells == 154 == int(np.isnan(real.scores).sum())
    assert sum(any(r[c] == "" for c in llm_cols) for r in rows) == 28


def test_real_tasks_splits_costs(real):
    s = real.summary()
    assert s["tasks"] == {"arc-challenge": 1484, "mbpp": 425, "winogrande": 1267}
    assert s["splits"] == {"test": 951, "train": 2225}
    assert real.costs is not None and np.all(real.costs[real.observed] >= 0)
    # the USD cost of one record, read independently
    row = _rows(os.path.join(shared_path("routerbench_zs"), "mbpp_test.csv"))[0]
    qi = real.query_ids.index(row["sample_id"])
    j = real.llm_names.index("gpt-4-1106-preview")
    assert real.costs[qi, j] == pytest.approx(float(row["gpt-4-1106-preview|total_cost"]), rel=1e-6)
    assert real.texts[qi] == ast.literal_eval(row["prompt"])[0]
    assert real.llms.set_index("name").loc["meta/llama-2-70b-chat", "size"] == 70


def test_real_duplicate_prompts_are_merged_into_train_and_listed(real):
    merged = real.meta["merged_records"]
    assert len(merged) == 2
    assert {m[1] for m in merged} == {"mbpp.dev.29", "mbpp.dev.58"}
    for kept, _, file in merged:
        assert file.endswith("mbpp_test.csv")
        assert real.queries.set_index("query_id").loc[kept, "split"] == "train"
    # the 14 repeated sample ids become two queries each, with hashed ids
    hashed = [q for q in real.query_ids if "#" in q]
    assert len(hashed) == 28


def test_real_responses_and_text_identity(real):
    r = real.responses
    assert r.shape == (3176, 11) and list(r.index) == real.query_ids
    row = _rows(os.path.join(shared_path("routerbench_zs"), "winograde_test.csv"))[3]
    assert r.loc[row["sample_id"], "claude-v2"] == ast.literal_eval(row["claude-v2|model_response"])[0]
    by_text = load_dataset("routerbench_zs", data_dir=shared_path(), identity="text")
    assert by_text.shape == (3162, 11) and not np.isnan(by_text.scores).any()


def _frame(prompts, ids, scores, evals=None):
    df = pd.DataFrame({"sample_id": ids, "prompt": prompts, "eval_name": evals or ["e"] * len(ids)})
    for j, m in enumerate(LLMS):
        df[m] = [s[j] for s in scores]
    for m in LLMS:
        df[f"{m}|model_response"] = [str([f"answer of {m} to {i}"]) for i in ids]
    for j, m in enumerate(LLMS):
        df[f"{m}|total_cost"] = [0.001 * (j + 1)] * len(ids)
    df["oracle_model_to_route_to"] = LLMS[0]
    return df


def _folder(tmp_path, files: dict):
    for name, df in files.items():
        df.to_csv(tmp_path / name)  # leading unnamed index column, as published
    return tmp_path


def test_small_folder_traps(tmp_path):
    train = _frame([str(["p1"]), str(["p2"]), str(["p3", "p3"])], ["a.1", "a.2", "a.2"],
                   [[1, 0], [0, 1], [np.nan, 1]])
    test = _frame([str(["p1"]), str(["p4"])], ["a.9", "a.4"], [[0, 0], [1, np.nan]])
    d = load_routerbench_zs(_folder(tmp_path, {"e_test.csv": test, "e_train.csv": train}),
                            with_responses=True)
    # p1 appears in train and test -> one query in train with the train scores
    assert d.shape == (4, 2)
    q = d.queries.set_index("query_id")
    assert q.loc["a.1", "split"] == "train"
    np.testing.assert_array_equal(d.scores[d.query_ids.index("a.1")], [1, 0])
    assert d.meta["merged_records"] == [("a.1", "a.9", str(tmp_path / "e_test.csv"))]
    assert sum(i.startswith("a.2#") for i in d.query_ids) == 2
    assert d.responses.loc["a.4", "gpt-x"] == "answer of gpt-x to a.4"
    assert d.llms["size"].tolist()[0] == 7
    assert load_routerbench_zs(tmp_path, duplicates="mean").scores[0].tolist() == [0.5, 0]
    with pytest.raises(DataValidationError, match="duplicate record"):
        load_routerbench_zs(tmp_path, duplicates="error")


def test_prompt_not_a_list_names_file_row_column(tmp_path):
    bad = _frame([str(["ok"]), "just text"], ["x.1", "x.2"], [[1, 0], [0, 1]])
    _folder(tmp_path, {"e_train.csv": bad})
    with pytest.raises(DataValidationError) as ei:
        load_routerbench_zs(tmp_path)
    assert ei.value.row == 3 and ei.value.column == "prompt"
    assert "e_train.csv" in str(ei.value) and "not a list" in str(ei.value)


def test_non_numeric_score_is_located(tmp_path):
    bad = _frame([str(["a"]), str(["b"])], ["x.1", "x.2"], [[1, 0], [0, "yes"]])
    _folder(tmp_path, {"e_test.csv": bad})
    with pytest.raises(DataValidationError) as ei:
        load_routerbench_zs(tmp_path)
    assert ei.value.row == 3 and ei.value.column == "gpt-x" and "e_test.csv" in str(ei.value)


def test_pickle_and_folder_resolution(tmp_path):
    df = _frame([["q one"], ["q two"], "plain text prompt"], ["s1", "s2", "s3"],
                [[1, 0], [0.5, 1], [0, 0]], evals=["mmlu", "gsm8k", "gsm8k"])
    folder = tmp_path / "routerbench"
    folder.mkdir()
    df.to_pickle(folder / "routerbench_0shot.pkl")
    d = load_dataset("routerbench", data_dir=tmp_path, trust_pickle=True)
    assert d.shape == (3, 2) and d.texts == ["q one", "q two", "plain text prompt"]
    assert d.summary()["tasks"] == {"gsm8k": 2, "mmlu": 1}
    np.testing.assert_allclose(d.costs[:, 1], 0.002)
    assert load_dataset(str(folder / "routerbench_0shot.pkl"), trust_pickle=True).shape == (3, 2)
    with pytest.raises(FileNotFoundError, match="routerbench_5shot.pkl"):
        load_routerbench(folder, shots=5)
    pd.Series([1, 2]).to_pickle(tmp_path / "routerbench_bad.pkl")
    with pytest.raises(DataValidationError, match="expected a pandas DataFrame"):
        load_routerbench(tmp_path / "routerbench_bad.pkl", trust_pickle=True)
