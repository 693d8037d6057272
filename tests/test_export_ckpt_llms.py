"""A checkpoint names the LLMs it was trained on, and ``export --ckpt`` refuses a rebuilt data
module whose LLMs differ; checkpoints from before ``group_method`` existed rebuild their
candidate group with the search they were trained with (``oracle-best``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from recsys_router.cli import main
from recsys_router.export import load_router

ROOT = Path(__file__).resolve().parents[1]
DM = "recsys_router.datamodules.routing_datamodule.RoutingDataModule"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    import torch
    torch.set_num_threads(1)
    tmp = tmp_path_factory.mktemp("ckpt")
    cfg = tmp / "data.yaml"
    cfg.write_text(
        f"data:\n  class_path: {DM}\n  init_args:\n"
        "    dataset: synthetic\n"
        "    dataset_options: {n_queries: 240, n_llms: 12, n_topics: 3, seed: 0}\n"
        "    encoder: hashing\n    encoder_options: {dim: 32}\n"
        "    split_ratios: [0.7, 0.15, 0.15]\n    mode: listwise\n"
        "    candidate_group: strong-to-weak\n    pool_size: 3\n"
        "trainer:\n  max_epochs: 1\n  accelerator: cpu\n  enable_progress_bar: false\n")
    out = tmp / "from_cfg"
    here = os.getcwd()
    os.chdir(tmp)  # Lightning writes lightning_logs/ under the current folder
    try:
        assert main(["export", "-c", str(ROOT / "configs/models/mf.yaml"), "-c", str(cfg),
                     "--out", str(out)]) == 0
    finally:
        os.chdir(here)
    ckpt = next(tmp.glob("**/checkpoints/last.ckpt"))
    return tmp, ckpt, load_router(out)


def _rewrite(src, dst, edit):
    import torch
    raw = torch.load(src, map_location="cpu", weights_only=False)
    edit(raw)
    torch.save(raw, dst)
    return dst


def _group(method):
    from recsys_router.datasets.synthetic import make_synthetic
    from recsys_router.pools import candidate_groups
    data = make_synthetic(n_queries=240, n_llms=12, n_topics=3, seed=0)
    train = data.split((0.7, 0.15, 0.15), seed=0)["train"]
    return candidate_groups(train, 3, seed=0, method=method,
                            groups=["strong-to-weak"])["strong-to-weak"]


def test_checkpoint_records_trained_llms(trained):
    import torch
    _, ckpt, art = trained
    raw = torch.load(ckpt, map_location="cpu", weights_only=False)
    assert raw["llm_names"] == art.router.llm_names_ == _group("routereval")


def test_export_refuses_other_llms(trained, tmp_path, capsys):
    _, ckpt, _ = trained
    def swap(raw):
        raw["llm_names"] = list(reversed(raw["llm_names"]))
    bad = _rewrite(ckpt, tmp_path / "swapped.ckpt", swap)
    out = tmp_path / "out"
    assert main(["export", "--ckpt", str(bad), "--trust-pickle", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "was trained on LLMs" in err and "group_method" in err
    assert not out.exists()


def test_old_checkpoint_rebuilds_oracle_best_group(trained, tmp_path):
    _, ckpt, _ = trained
    old, new = _group("oracle-best"), _group("routereval")
    if old == new:
        pytest.skip("both methods pick the same LLMs on this data; the test cannot tell them apart")
    def age(raw):  # what a checkpoint written before group_method and llm_names holds
        raw.pop("llm_names")
        raw["datamodule_hyper_parameters"].pop("group_method")
    aged = _rewrite(ckpt, tmp_path / "old.ckpt", age)
    out = tmp_path / "out"
    assert main(["export", "--ckpt", str(aged), "--trust-pickle", "--out", str(out)]) == 0
    assert load_router(out).router.llm_names_ == old
