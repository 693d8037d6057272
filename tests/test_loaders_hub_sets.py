"""Hub-hosted formats (RouterEval, EmbedLLM, RouterBench pickle) on fixtures in their exact
published layouts, and the download path with huggingface_hub monkeypatched (no network)."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from recsys_router.datasets import load_dataset
from recsys_router.datasets import hub
from recsys_router.datasets.embedllm import load_embedllm
from recsys_router.datasets.routereval import load_routereval
from recsys_router.errors import DataValidationError

FIXTURES = Path(__file__).resolve().parent / "fixtures"


# ---------------------------------------------------------------- RouterEval
def _routereval_dict():
    """A tiny dict in the layout written by RouterEval's get_router_dataset.py."""
    idx = {"train_indices": np.array([4, 0, 2]), "val_indices": np.array([1]),
           "test_indices": np.array([3])}
    prompts = {f"{s}_prompt": np.array([f"prompt {i}" for i in idx[f"{s}_indices"]], dtype=object)
               for s in ("train", "val", "test")}

    def group(names, seed):
        rng = np.random.default_rng(seed)
        m = len(names)
        return {"model": np.array(names), "data": {
            "train_score": rng.integers(0, 2, (3, m)).astype(float),
            "val_score": rng.integers(0, 2, (1, m)).astype(float),
            "test_score": rng.integers(0, 2, (1, m)).astype(float)}}

    easy = {3: {"all_strong": group(["org/A-70B", "org/B-8x7b", "gpt-x"], 0),
                "all_weak": group(["org/C-1.5B", "org/D-7b-chat", "org/E-350m"], 1),
                "strong_to_weak": group(["org/A-70B", "org/C-1.5B", "gpt-x"], 2)},
            5: {g: group([f"m{k}-{k + 1}b" for k in range(5)], 3 + i)
                for i, g in enumerate(("all_strong", "all_weak", "strong_to_weak"))}}
    return {"easy": easy, "hard": {}, "split_index": idx, "prompt": prompts,
            "embedding": {"train_embed": np.zeros((3, 4))}}


@pytest.fixture
def routereval_dir(tmp_path):
    folder = tmp_path / "routereval" / "router_dataset"
    folder.mkdir(parents=True)
    raw = _routereval_dict()
    with open(folder / "arc_router_dataset.pkl", "wb") as fh:
        pickle.dump(raw, fh)
    return tmp_path / "routereval", raw


def test_routereval_one_group(routereval_dir):
    root, raw = routereval_dir
    d = load_routereval(root, difficulty="easy", m=3, group="all-strong", trust_pickle=True)
    entry = raw["easy"][3]["all_strong"]
    expected = np.vstack([entry["data"][f"{s}_score"] for s in ("train", "val", "test")])
    np.testing.assert_array_equal(d.scores, expected)
    assert d.query_ids == ["arc-4", "arc-0", "arc-2", "arc-1", "arc-3"]
    assert d.queries["split"].tolist() == ["train", "train", "train", "val", "test"]
    assert d.texts[0] == "prompt 4" and d.queries["task"].unique().tolist() == ["arc"]
    assert d.llms["size"].tolist()[:2] == [70.0, 56.0] and np.isnan(d.llms["size"].iloc[2])
    np.testing.assert_array_equal(d.costs[:, 0], 70.0)
    weak = load_dataset("routereval", data_dir=root.parent, difficulty="easy", m=3,
                        group="all_weak", trust_pickle=True)
    assert weak.llms["size"].tolist() == [1.5, 7.0, 0.35]


def test_routereval_dict_of_groups_and_errors(routereval_dir, tmp_path):
    root, raw = routereval_dir
    all_ = load_routereval(root / "router_dataset" / "arc_router_dataset.pkl", trust_pickle=True)
    assert sorted(all_) == sorted(f"easy/{m}/{g}" for m in (3, 5)
                                  for g in ("all_strong", "all_weak", "strong_to_weak"))
    assert set(load_routereval(root, m=5, trust_pickle=True)) == {"easy/5/all_strong", "easy/5/all_weak",
                                               "easy/5/strong_to_weak"}
    with pytest.raises(KeyError, match="available"):
        load_routereval(root, m=1000, trust_pickle=True)
    with pytest.raises(ValueError, match="group must be one of"):
        load_routereval(root, group="medium", trust_pickle=True)
    raw["easy"][3]["all_weak"]["data"]["val_score"] = np.zeros((2, 3))
    bad = tmp_path / "bad_router_dataset.pkl"
    bad.write_bytes(pickle.dumps(raw))
    with pytest.raises(DataValidationError) as ei:
        load_routereval(bad, trust_pickle=True)
    assert ei.value.column == "easy/3/all_weak/data/val_score" and "(1, 3)" in str(ei.value)
    del raw["split_index"]
    bad.write_bytes(pickle.dumps(raw))
    with pytest.raises(DataValidationError, match="missing key 'split_index'"):
        load_routereval(bad, trust_pickle=True)


# ---------------------------------------------------------------- EmbedLLM
def test_embedllm_fixture():
    d = load_embedllm(FIXTURES / "embedllm")
    assert d.query_ids == ["0", "1", "2", "3", "4"]
    assert d.llm_names == ["meta-llama/Llama-2-7b-chat-hf", "mistralai/Mixtral-8x7B-Instruct-v0.1",
                           "Qwen/Qwen1.5-1.8B-Chat"]
    np.testing.assert_array_equal(d.scores, [[1, 1, 0], [0, 1, 1], [1, 0, np.nan], [0, 1, 1],
                                             [np.nan, 1, np.nan]])
    assert d.queries["split"].tolist() == ["train", "train", "val", "test", "test"]
    assert d.queries["task"].tolist()[:2] == ["asdiv", "mmlu_astronomy"]
    assert d.texts[0] == "What is 2 + 3?\nA. 4\nB. 5" and d.texts[2] == 'Is the sentence "the cat sat" grammatical?'
    assert d.meta["merged_duplicates"] == 1
    assert load_embedllm(FIXTURES / "embedllm", duplicates="mean").scores[1, 2] == 0.5
    assert load_embedllm(FIXTURES / "embedllm", splits=("test",)).n_queries == 2


def test_embedllm_without_orders_and_bad_rows(tmp_path):
    folder = tmp_path / "e"
    shutil.copytree(FIXTURES / "embedllm", folder)
    (folder / "question_order.csv").unlink()
    d = load_embedllm(folder)  # texts from the prompt column
    assert d.texts[3] == "What is the boiling point of water at sea level in Celsius?"
    text = (folder / "test.csv").read_text().replace("2,3,1,mmlu_high", "2,3,x,mmlu_high")
    (folder / "test.csv").write_text(text)
    with pytest.raises(DataValidationError) as ei:
        load_embedllm(folder)
    assert ei.value.row == 4 and ei.value.column == "label" and "test.csv" in str(ei.value)
    (folder / "test.csv").write_text("model_id,prompt_id,label\n7,3,1\n")
    with pytest.raises(DataValidationError, match="model_id 7 is not in model_order.csv"):
        load_embedllm(folder)
    (folder / "test.csv").write_text("model_id,label\n1,1\n")
    with pytest.raises(DataValidationError, match="missing required column 'prompt_id'"):
        load_embedllm(folder)


# ---------------------------------------------------------------- download
def test_missing_hub_dataset_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setenv("RECSYS_ROUTER_CACHE", str(tmp_path / "cache"))
    with pytest.raises(FileNotFoundError) as ei:
        load_dataset("embedllm", data_dir=tmp_path)
    msg = str(ei.value)
    assert "recsys-router data download embedllm" in msg and "RZ412/EmbedLLM" in msg
    assert "RZ412/EmbedLLM" in hub.hub_hint("embedllm")


def test_download_path_with_fake_hub(tmp_path, monkeypatch):
    import huggingface_hub
    calls = []

    def fake_snapshot_download(repo_id, repo_type, local_dir, allow_patterns, revision=None, token=None):
        calls.append((repo_id, repo_type, list(allow_patterns)))
        shutil.copytree(FIXTURES / "embedllm", local_dir, dirs_exist_ok=True)
        return local_dir

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    monkeypatch.setenv("RECSYS_ROUTER_CACHE", str(tmp_path / "cache"))
    d = load_dataset("embedllm", data_dir=tmp_path / "empty", download=True)
    assert d.shape == (5, 3)
    assert calls == [("RZ412/EmbedLLM", "dataset", ["train.csv", "val.csv", "test.csv", "model_order.csv", "question_order.csv"])]
    # afterwards the cache is found without downloading again
    assert load_dataset("embedllm", data_dir=tmp_path / "empty").shape == (5, 3)
    assert len(calls) == 1
    assert hub.download_dataset("embedllm", tmp_path / "c2") == tmp_path / "c2" / "embedllm"


def test_download_failure_and_non_hub_names(tmp_path, monkeypatch):
    import huggingface_hub

    def offline(**kwargs):
        raise OSError("Name or service not known")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    with pytest.raises(ConnectionError) as ei:
        hub.download_dataset("routerbench", tmp_path)
    assert "withmartian/routerbench" in str(ei.value) and "routerbench_0shot.pkl" in str(ei.value)
    with pytest.raises(ValueError, match="not on the Hugging Face hub"):
        hub.download_dataset("routerdc", tmp_path)
    with pytest.raises(ValueError, match="unknown dataset"):
        hub.download_dataset("nope", tmp_path)


def test_pickle_prompt_types(tmp_path):
    df = pd.DataFrame({"sample_id": ["a", "b"], "prompt": [["x"], ("y", "y")], "eval_name": "e",
                       "m": [1.0, 0.0], "m|total_cost": [0.1, 0.2], "m|model_response": [["r1"], ["r2"]]})
    df.to_pickle(tmp_path / "routerbench_0shot.pkl")
    d = load_dataset(str(tmp_path), with_responses=True, trust_pickle=True)  # folder recognised by its pickle
    assert d.texts == ["x", "y"] and d.responses["m"].tolist() == ["r1", "r2"]
