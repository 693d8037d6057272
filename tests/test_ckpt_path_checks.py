"""``fit|validate|test|predict --ckpt_path``: a checkpoint that does not fit the configured model
and data is refused as one error line naming it (exit 2) before its weights are loaded: trained
on the same LLMs in another order (each LLM's scores would be credited to another), on data of
another size, or for another model class than the config names."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from recsys_router.cli import main
from recsys_router.lightning_cli import build_lightning_cli as build_cli

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[1]
MF = str(ROOT / "configs" / "models" / "mf.yaml")
SYNTHETIC = str(ROOT / "configs" / "data" / "synthetic.yaml")
# 4 synthetic LLMs, named sim-llm-0 .. sim-llm-3 in this order
TINY = ["--data.init_args.dataset_options={n_queries: 80, n_llms: 4, n_topics: 3, seed: 0}",
        "--data.init_args.encoder=hashing", "--data.init_args.encoder_options={dim: 32}",
        "--data.init_args.batch_size=16", "--trainer.accelerator=cpu",
        "--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false"]
NAMES = [f"sim-llm-{i}" for i in range(4)]
COMMANDS = ("fit", "validate", "test", "predict")


def _base(tmp_path, model=MF) -> list[str]:
    return ["-c", model, "-c", SYNTHETIC, *TINY, "--trainer.logger=CSVLogger",
            f"--trainer.logger.save_dir={tmp_path}", f"--trainer.default_root_dir={tmp_path}"]


@pytest.fixture(scope="module")
def mf_ckpt(tmp_path_factory) -> Path:
    """The last.ckpt of a one-epoch MF fit on the 4 LLMs in their data order."""
    tmp = tmp_path_factory.mktemp("mf")
    cli = build_cli(["fit", *_base(tmp), "--trainer.max_epochs=1"])
    ckpt = Path(cli.trainer.log_dir) / "checkpoints" / "last.ckpt"
    assert torch.load(ckpt, map_location="cpu", weights_only=True)["llm_names"] == NAMES
    return ckpt


def _error_line(capsys, command: str) -> str:
    """The one error line ``recsys-router <command>`` printed (its prefix removed)."""
    out = capsys.readouterr()
    assert "Traceback" not in out.out + out.err
    lines = [ln for ln in out.err.splitlines() if ln.startswith("recsys-router ")]
    assert len(lines) == 1, out.err
    prefix = f"recsys-router {command}: error: "
    assert lines[0].startswith(prefix), lines[0]
    return lines[0][len(prefix):]


def _pool(names) -> str:
    return "--data.init_args.candidates=[" + ",".join(names) + "]"


@pytest.mark.parametrize("command", COMMANDS)
def test_the_same_llms_in_another_order_are_refused(command, mf_ckpt, tmp_path, capsys):
    """Before, the reversed pool loaded silently: the score column of sim-llm-0 held the
    scores learnt for sim-llm-3 (and so on)."""
    reversed_pool = list(reversed(NAMES))
    capsys.readouterr()
    assert main([command, *_base(tmp_path), _pool(reversed_pool),
                 f"--ckpt_path={mf_ckpt}"]) == 2
    assert _error_line(capsys, command) == (
        f"{mf_ckpt}: the checkpoint was trained on LLMs {NAMES} but the data module gives "
        f"{reversed_pool}: they differ first at position 0 (checkpoint 'sim-llm-0', data "
        "'sim-llm-3'), so each LLM's scores would be credited to another (check the data "
        "config: dataset, candidates, candidate_group, pool_size, group_method)")
    assert not (tmp_path / "lightning_logs").exists() or not list(
        (tmp_path / "lightning_logs").glob("*/checkpoints/*.ckpt"))


def test_a_pool_differing_later_names_that_position(mf_ckpt, tmp_path, capsys):
    swapped = [NAMES[0], NAMES[1], NAMES[3], NAMES[2]]
    assert main(["test", *_base(tmp_path), _pool(swapped), f"--ckpt_path={mf_ckpt}"]) == 2
    assert "they differ first at position 2 (checkpoint 'sim-llm-2', data 'sim-llm-3')" in \
        _error_line(capsys, "test")


@pytest.mark.parametrize("command", COMMANDS)
def test_the_same_llms_in_the_same_order_load(command, mf_ckpt, tmp_path):
    extra = ["--trainer.max_epochs=2"] if command == "fit" else []
    cli = build_cli([command, *_base(tmp_path), _pool(NAMES), *extra, f"--ckpt_path={mf_ckpt}"])
    assert cli.datamodule.llm_names == NAMES
    saved = torch.load(mf_ckpt, map_location="cpu", weights_only=True)["state_dict"]
    if command != "fit":  # the checkpoint's weights are the ones evaluated
        for key, value in cli.model.state_dict().items():
            torch.testing.assert_close(value, saved[key])


def test_a_checkpoint_without_recorded_names_loads_with_a_warning(mf_ckpt, tmp_path):
    raw = torch.load(mf_ckpt, map_location="cpu", weights_only=False)
    raw.pop("llm_names")
    old = tmp_path / "old.ckpt"
    torch.save(raw, old)
    with pytest.warns(UserWarning, match="records no LLM names"):
        cli = build_cli(["test", *_base(tmp_path), f"--ckpt_path={old}"])
    assert 0.0 <= float(cli.trainer.callback_metrics["test/mu_o"]) <= 1.0


@pytest.mark.parametrize("command,arg,says", [
    ("test", "--data.init_args.dataset_options={n_queries: 80, n_llms: 3, n_topics: 3, seed: 0}",
     "number of LLMs 4 in the checkpoint, 3 here"),
    ("fit", "--data.init_args.encoder_options={dim: 16}", "embedding width 32 in the checkpoint, 16 here"),
    ("predict", "--data.init_args.encoder_options={dim: 16}",
     "embedding width 32 in the checkpoint, 16 here"),
], ids=["n_llms-test", "width-fit", "width-predict"])
def test_a_checkpoint_of_data_of_another_size_is_one_line(command, arg, says, mf_ckpt, tmp_path,
                                                          capsys):
    """It was torch's many-line ``size mismatch for net...`` traceback from load_state_dict."""
    capsys.readouterr()
    assert main([command, *_base(tmp_path), arg, f"--ckpt_path={mf_ckpt}"]) == 2
    assert _error_line(capsys, command) == (
        f"{mf_ckpt}: the checkpoint does not fit this data: {says} (train on this data, or "
        "configure the data the checkpoint was trained on)")


def test_a_weight_of_another_shape_is_named_when_the_sizes_agree(mf_ckpt, tmp_path, capsys):
    """A size not among the linked ones (here a hand-edited weight) is named by its weight."""
    raw = torch.load(mf_ckpt, map_location="cpu", weights_only=False)
    key, value = next((k, v) for k, v in raw["state_dict"].items() if v.ndim == 2)
    raw["state_dict"][key] = torch.zeros(value.shape[0] + 1, value.shape[1])
    bad = tmp_path / "bad.ckpt"
    torch.save(raw, bad)
    capsys.readouterr()
    assert main(["test", *_base(tmp_path), f"--ckpt_path={bad}"]) == 2
    assert _error_line(capsys, "test") == (
        f"{bad}: the checkpoint does not fit this data: weight {key} has shape "
        f"{(value.shape[0] + 1, value.shape[1])} in the checkpoint, {tuple(value.shape)} here "
        "(train on this data, or configure the data the checkpoint was trained on)")


@pytest.mark.parametrize("command", ["test", "fit"])
def test_a_checkpoint_of_another_model_class_is_refused(command, mf_ckpt, tmp_path, capsys):
    """``test -c mirt.yaml --ckpt_path <an MF checkpoint>`` evaluated the MFModule (the
    checkpoint's class replaced the configured one without a word)."""
    mirt = str(ROOT / "configs" / "models" / "mirt.yaml")
    capsys.readouterr()
    assert main([command, *_base(tmp_path, mirt), f"--ckpt_path={mf_ckpt}"]) == 2
    assert _error_line(capsys, command) == (
        f"{mf_ckpt}: the checkpoint holds a recsys_router.models.mf_module.MFModule but the "
        "config names the model recsys_router.models.irt_module.MIRTModule: give the model "
        "config the checkpoint was trained with")


@pytest.mark.parametrize("command,args,encoder,options", [
    ("test", ["--data.init_args.encoder=tfidf"], "tfidf", "{'dim': 32}"),
    ("fit", ["--data.init_args.encoder=tfidf"], "tfidf", "{'dim': 32}"),
    ("predict", ["--data.init_args.encoder_options={dim: 32, word_weight: 0.9}"], "hashing",
     "{'dim': 32, 'word_weight': 0.9}"),
], ids=["tfidf-test", "tfidf-fit", "hashing-options-predict"])
def test_a_checkpoint_of_another_encoder_of_the_same_width_is_refused(command, args, encoder, options,
                                                                      mf_ckpt, tmp_path, capsys):
    """Same width, another embedding space: the run used to go ahead and report numbers of
    weights reading inputs they were never trained on (second review R2D-3)."""
    capsys.readouterr()
    extra = ["--trainer.max_epochs=2"] if command == "fit" else []
    assert main([command, *_base(tmp_path), *args, *extra, f"--ckpt_path={mf_ckpt}"]) == 2
    assert _error_line(capsys, command) == (
        f"{mf_ckpt}: the checkpoint was trained on embeddings of encoder 'hashing' (options "
        f"{{'dim': 32}}) but the data module encodes with {encoder!r} (options {options}): its "
        "weights would read inputs from another space (configure the data module's encoder as "
        "the checkpoint's)")


@pytest.mark.parametrize("options", ["{dim: 32, word_weight: 0.5, char_ngrams: [3, 5]}",
                                     "{dim: 32, cache: false, batch_size: 64}"],
                         ids=["defaults-written-out", "cache-and-batch-size"])
def test_the_same_encoder_written_out_in_full_resumes(mf_ckpt, tmp_path, options):
    """The checkpoint's encoder identity decides, not how the options are written: the
    defaults spelt out, or settings that do not change the embeddings (the cache, the batch
    size), give the same hashing encoder."""
    assert "hashing-v1(dim=32" in torch.load(mf_ckpt, map_location="cpu", weights_only=True)["encoder_identity"]
    cli = build_cli(["test", *_base(tmp_path), f"--data.init_args.encoder_options={options}",
                     f"--ckpt_path={mf_ckpt}"])
    assert 0.0 <= float(cli.trainer.callback_metrics["test/mu_o"]) <= 1.0


def test_an_older_checkpoint_is_compared_by_its_recorded_encoder_name(mf_ckpt, tmp_path, capsys):
    raw = torch.load(mf_ckpt, map_location="cpu", weights_only=False)
    raw.pop("encoder_identity")
    old = tmp_path / "old.ckpt"
    torch.save(raw, old)
    with pytest.warns(UserWarning, match="records no encoder identity"):  # options written otherwise
        build_cli(["test", *_base(tmp_path), "--data.init_args.encoder_options={dim: 32, word_weight: 0.5}",
                   f"--ckpt_path={old}"])
    capsys.readouterr()
    assert main(["test", *_base(tmp_path), "--data.init_args.encoder=tfidf", f"--ckpt_path={old}"]) == 2
    assert "its weights would read inputs from another space" in _error_line(capsys, "test")


def test_a_tfidf_checkpoint_on_other_texts_is_refused(tmp_path, capsys):
    """tfidf learns its basis from the training texts: the same settings fitted on other data
    are another space."""
    tf = ["--data.init_args.encoder=tfidf"]
    cli = build_cli(["fit", *_base(tmp_path / "a"), *tf, "--trainer.max_epochs=1"])
    ckpt = Path(cli.trainer.log_dir) / "checkpoints" / "last.ckpt"
    build_cli(["test", *_base(tmp_path / "b"), *tf, f"--ckpt_path={ckpt}"])  # the same data: loads
    capsys.readouterr()
    other = "--data.init_args.dataset_options={n_queries: 80, n_llms: 4, n_topics: 3, seed: 1}"
    assert main(["test", *_base(tmp_path / "c"), *tf, other, f"--ckpt_path={ckpt}"]) == 2
    line = _error_line(capsys, "test")
    assert "encodes with 'tfidf' (options {'dim': 32}), fitted differently (identity 'tfidf-v1(" in line
    assert line.endswith("its weights would read inputs from another space (configure the data "
                         "module's encoder as the checkpoint's)")


def test_encoder_check_by_hand():
    from types import SimpleNamespace as NS

    from recsys_router.models.base.checkpoint_checks import check_encoder

    def dm(spec, identity, options=None):
        return NS(hparams={"encoder": spec, "encoder_options": options}, encoder=NS(identity=identity))

    check_encoder({}, dm("tfidf", "t"), "x.ckpt")                    # nothing recorded: no check
    check_encoder({"encoder_identity": "h"}, NS(hparams={}), "x.ckpt")   # no encoder here
    minilm = "onnx:all-MiniLM-L6-v2|int8|norm=1"
    with pytest.warns(UserWarning, match="another variant of the same model"):
        check_encoder({"datamodule_hyper_parameters": {"encoder": "minilm"}, "encoder_identity": minilm},
                      dm("minilm:torch", "st:sentence-transformers/all-MiniLM-L6-v2|norm=1"), "x.ckpt")
    # a precomputed table is known by its contents, not by where it was read from
    check_encoder({"encoder_identity": "precomputed:/old/place/e.npy@0123abcd"},
                  dm("precomputed:/new/e.npy", "precomputed:/new/e.npy@0123abcd"), "x.ckpt")
    with pytest.raises(ValueError, match="another space"):
        check_encoder({"encoder_identity": "precomputed:/a/e.npy@0123abcd"},
                      dm("precomputed:/a/e.npy", "precomputed:/a/e.npy@99999999"), "x.ckpt")
