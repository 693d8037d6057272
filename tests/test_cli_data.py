"""``recsys-router data`` commands through ``recsys_router.cli.main``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from recsys_router.cli import main
from recsys_router.datasets import load_dataset
from recsys_router.datasets.synthetic import make_synthetic

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def test_info_synthetic_is_marked_simulated_and_uses_seed(capsys):
    assert main(["data", "info", "synthetic", "--seed", "3", "--n-queries", "40", "--n-llms", "3"]) == 0
    out = capsys.readouterr().out
    assert "SIMULATED" in out.splitlines()[1]
    assert "queries   40" in out and "LLMs      3" in out
    d = make_synthetic(40, 3, seed=3)
    mean0 = d.scores[:, 0].mean()
    line = next(ln for ln in out.splitlines() if ln.startswith("sim-llm-0 "))
    assert f"{mean0:.4f}" in line
    assert main(["data", "info", "synthetic", "--seed", "4", "--n-queries", "40", "--n-llms", "3",
                 "--json"]) == 0
    js = json.loads(capsys.readouterr().out)
    other = make_synthetic(40, 3, seed=4)
    assert js["simulated"] is True and js["n_queries"] == 40
    assert js["llms"][1]["mean_score"] == pytest.approx(float(other.scores[:, 1].mean()))


def test_info_real_fixture_json(capsys):
    assert main(["data", "info", str(FIXTURES / "embedllm"), "--json"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert js["n_queries"] == 5 and js["n_llms"] == 3 and js["simulated"] is False
    assert js["n_observed"] == 12 and js["density"] == pytest.approx(12 / 15)
    assert js["splits"] == {"test": 2, "train": 2, "val": 1}
    assert [r["n_observed"] for r in js["llms"]] == [4, 5, 3]


def test_info_text_lists_tasks_and_splits(capsys):
    assert main(["data", "info", str(FIXTURES / "embedllm"), "-o", "duplicates=mean"]) == 0
    out = capsys.readouterr().out
    assert "SIMULATED" not in out
    assert "splits (3): test (2), train (2), val (1)" in out
    assert "asdiv (1)" in out and "density 0.8000" in out


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz", ".parquet", ".jsonl"])
def test_convert_round_trip(tmp_path, capsys, suffix):
    out = tmp_path / f"emb{suffix}"
    assert main(["data", "convert", str(FIXTURES / "embedllm"), "--to", str(out)]) == 0
    assert "wrote 12 records" in capsys.readouterr().out
    a, b = load_dataset(str(FIXTURES / "embedllm")), load_dataset(str(out))
    assert a.query_ids == b.query_ids and a.llm_names == b.llm_names and a.texts == b.texts
    np.testing.assert_array_equal(a.scores, b.scores)
    assert [p.name for p in tmp_path.iterdir()] == [out.name]


def test_convert_synthetic_with_seed(tmp_path, capsys):
    out = tmp_path / "sim.parquet"
    assert main(["data", "convert", "synthetic", "--seed", "9", "--n-queries", "30", "--to", str(out)]) == 0
    np.testing.assert_array_equal(load_dataset(str(out)).scores, make_synthetic(30, seed=9).scores)


def test_errors_are_clean(tmp_path, capsys):
    assert main(["data", "info", str(tmp_path / "missing.csv")]) == 2
    assert "unknown dataset" in capsys.readouterr().err
    assert main(["data", "info", str(FIXTURES / "embedllm"), "--n-queries", "5"]) == 2
    assert "synthetic" in capsys.readouterr().err
    assert main(["data", "convert", "synthetic", "--to", str(tmp_path / "x.xlsx")]) == 2
    assert "unsupported output type" in capsys.readouterr().err
    bad = tmp_path / "bad.csv"
    bad.write_text("query_id,model,score\nq,m,high\n")
    assert main(["data", "info", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "bad.csv" in err and "row 2" in err


def test_download_command(tmp_path, capsys, monkeypatch):
    import huggingface_hub
    seen = {}

    def fake(repo_id, repo_type, local_dir, allow_patterns, revision=None, token=None):
        seen["repo"] = repo_id
        return local_dir

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake)
    assert main(["data", "download", "routereval", "--cache-dir", str(tmp_path)]) == 0
    assert seen["repo"] == "linggm/RouterEval" and (tmp_path / "routereval").is_dir()
    assert str(tmp_path / "routereval") in capsys.readouterr().out

    def offline(**kwargs):
        raise OSError("no network")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    assert main(["data", "download", "embedllm", "--cache-dir", str(tmp_path)]) == 1
    assert "RZ412/EmbedLLM" in capsys.readouterr().err


def test_list(capsys):
    assert main(["data", "list"]) == 0
    out = capsys.readouterr().out
    for name in ("generic", "routerbench", "routerbench_zs", "routereval", "embedllm", "llmrouter",
                 "routerdc", "routellm", "routellm_mmlu", "routellm_gsm8k", "routellm_mtbench",
                 "synthetic"):
        assert any(line.split()[0] == name for line in out.splitlines()), name


def test_unknown_loader_option_is_a_clean_error(capsys):
    assert main(["data", "info", "embedllm", "-o", "colour=red"]) == 2
    err = capsys.readouterr().err
    assert "colour" in err and "duplicates" in err


def test_a_folder_name_is_found_in_the_data_dir(tmp_path, capsys, monkeypatch):
    """A name that is no registered dataset is looked for as a folder in --data-dir (the
    shared pools cruxeval and bfcl_v1 are such folders); only a plain name, and the error
    names the folders searched."""
    d = make_synthetic(30, 3, seed=0)
    (tmp_path / "data" / "mypool").mkdir(parents=True)
    d.to_long().to_csv(tmp_path / "data" / "mypool" / "records.csv", index=False)
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    got = load_dataset("mypool", data_dir=tmp_path / "data")
    assert got.n_queries == 30 and list(got.llm_names) == list(d.llm_names)
    assert main(["data", "info", "mypool", "--data-dir", str(tmp_path / "data")]) == 0
    assert "mypool/records.csv" in capsys.readouterr().out
    with pytest.raises(ValueError, match=r"unknown dataset 'nopool' \(and no such file or folder "
                                         r"here nor in \[.*data'\]\)"):
        load_dataset("nopool", data_dir=tmp_path / "data")
    (tmp_path / "data" / "sub").mkdir()
    (tmp_path / "data" / "mypool").rename(tmp_path / "data" / "sub" / "mypool")
    with pytest.raises(ValueError, match=r"unknown dataset 'sub/mypool' \(and no such file "
                                         r"or folder here\)"):
        load_dataset("sub/mypool", data_dir=tmp_path / "data")  # not a plain name: not looked up
