"""Every model config x the synthetic data config, and x the real routerbench_zs config, runs
under LightningCLI (fast_dev_run);
every data config names a registered dataset; fit/validate/test/predict and DDP work."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from recsys_router.datamodules.routing_datamodule import RoutingDataModule
from recsys_router.cli import main
from recsys_router.lightning_cli import build_lightning_cli as build_cli
from recsys_router.datasets import available_datasets

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[1]
MODEL_CONFIGS = sorted((ROOT / "configs" / "models").glob("*.yaml"))
DATA_CONFIGS = sorted((ROOT / "configs" / "data").glob("*.yaml"))
SYNTHETIC = str(ROOT / "configs" / "data" / "synthetic.yaml")
LOGGED = str(ROOT / "configs" / "data" / "synthetic_logged.yaml")
TINY = ["--data.init_args.dataset_options={n_queries: 80, n_llms: 4, n_topics: 3, seed: 0}",
        "--data.init_args.encoder=hashing", "--data.init_args.encoder_options={dim: 32}",
        "--data.init_args.batch_size=16", "--trainer.accelerator=cpu"]
# LLM counts of the shared data (../shared/data/SOURCES.md)
SHARED_N_LLMS = {"routerbench_zs": 11, "routerdc_split2_model7": 7, "llmrouter": 9,
                 "routellm_mmlu": 2}


def _logger(tmp_path) -> list[str]:
    return ["--trainer.logger=CSVLogger", f"--trainer.logger.save_dir={tmp_path}",
            f"--trainer.default_root_dir={tmp_path}"]


def test_configs_exist():
    names = {p.stem for p in MODEL_CONFIGS}
    assert {"mf", "two_tower"} <= names
    assert {"synthetic", *SHARED_N_LLMS} <= {p.stem for p in DATA_CONFIGS}


@pytest.mark.parametrize("model_cfg", MODEL_CONFIGS, ids=lambda p: p.stem)
def test_every_model_config_runs_fast_dev_run(model_cfg, tmp_path):
    cli = build_cli(["fit", "-c", str(model_cfg), "-c", SYNTHETIC, *TINY,
                     "--trainer.fast_dev_run=true", *_logger(tmp_path)])
    assert cli.trainer.state.finished
    # sizes were linked from the data module, not written in YAML
    assert (cli.model.hparams["n_llms"], cli.model.hparams["embed_dim"]) == (4, 32)
    init_args = yaml.safe_load(model_cfg.read_text())["model"].get("init_args", {})
    assert not {"n_llms", "embed_dim"} & set(init_args)


@pytest.mark.parametrize("model_cfg", MODEL_CONFIGS, ids=lambda p: p.stem)
def test_every_model_config_trains_on_the_logged_feedback_config(model_cfg, tmp_path):
    """configs/data/synthetic_logged.yaml (a simulated log, loss ips) with each model config;
    two-tower's listwise default is switched to bce (logged losses are pointwise)."""
    extra = ["--model.init_args.loss.init_args.kind=bce"] if model_cfg.stem == "two_tower" else []
    cli = build_cli(["fit", "-c", str(model_cfg), "-c", LOGGED, *TINY, *extra,
                     "--trainer.fast_dev_run=true", *_logger(tmp_path)])
    assert cli.trainer.state.finished
    assert np.isfinite(float(cli.trainer.callback_metrics["train/loss"]))
    dm = cli.datamodule
    assert dm.feedback == "ips" and dm.logging_policy == "epsilon-greedy:0.1"
    train = dm.splits["train"]
    assert ((~np.isnan(train.scores)).sum(axis=1) == 1).all()  # one revealed LLM per query
    p = train.queries["propensity"].to_numpy()
    # epsilon-greedy 0.1 over 4 LLMs: 0.925 for the best single LLM, 0.025 for the others
    assert set(np.round(p, 6)) <= {0.925, 0.025}
    assert (~np.isnan(dm.splits["val"].scores)).all()  # val keeps every LLM's score


def test_logging_policy_needs_a_feedback_loss_and_a_simulable_policy():
    with pytest.raises(ValueError, match="set feedback"):
        RoutingDataModule(logging_policy="uniform")
    dm = RoutingDataModule(dataset_options={"n_queries": 40, "n_llms": 3}, feedback="ips",
                           logging_policy="router:knn")
    with pytest.raises(ValueError, match="router:NAME logging needs a fitted router"):
        dm.splits


@pytest.mark.parametrize("data_cfg", DATA_CONFIGS, ids=lambda p: p.stem)
def test_every_data_config_names_a_dataset_and_valid_arguments(data_cfg):
    cfg = yaml.safe_load(data_cfg.read_text())["data"]
    assert cfg["class_path"] == "recsys_router.datamodules.routing_datamodule.RoutingDataModule"
    args = cfg["init_args"]
    valid = set(inspect.signature(RoutingDataModule.__init__).parameters) - {"self"}
    assert set(args) <= valid, set(args) - valid
    assert args["dataset"] in available_datasets() or args["dataset"] in SHARED_N_LLMS


@pytest.mark.parametrize("name", sorted(SHARED_N_LLMS))
def test_shared_data_configs_load_the_real_data(name):
    from conftest import shared_path
    data_dir = shared_path()
    args = yaml.safe_load((ROOT / "configs" / "data" / f"{name}.yaml").read_text())["data"]["init_args"]
    args = {**args, "encoder": "hashing", "encoder_options": {"dim": 16}, "data_dir": str(data_dir)}
    dm = RoutingDataModule(**args)
    assert dm.n_llms == SHARED_N_LLMS[name]
    assert {"train", "val", "test"} <= set(dm.splits)


def test_fit_then_validate_test_predict_from_the_checkpoint(tmp_path):
    base = ["-c", str(ROOT / "configs" / "models" / "mf.yaml"), "-c", SYNTHETIC, *TINY,
            *_logger(tmp_path)]
    assert main(["fit", *base, "--trainer.max_epochs=2", "--seed_everything=3"]) == 0
    (log_dir,) = [p for p in (tmp_path / "lightning_logs").iterdir() if p.is_dir()]
    metrics = pd.read_csv(log_dir / "metrics.csv")
    for col in ("val/mu_o", "val/v_b", "val/e_p", "val/aiq", "train/loss"):
        assert metrics[col].notna().sum() == 2, col          # logged once per epoch
    ckpts = sorted(p.name for p in (log_dir / "checkpoints").iterdir())
    assert "last.ckpt" in ckpts and any(c.startswith("epoch") for c in ckpts)
    assert yaml.safe_load((log_dir / "config.yaml").read_text())["seed_everything"] == 3
    ckpt = str(log_dir / "checkpoints" / "last.ckpt")
    for cmd in ("validate", "test"):
        cli = build_cli([cmd, *base, f"--ckpt_path={ckpt}"])
        key = "val/mu_o" if cmd == "validate" else "test/mu_o"
        assert 0.0 <= float(cli.trainer.callback_metrics[key]) <= 1.0
    out = tmp_path / "pred"
    cli = build_cli(["predict", *base, f"--ckpt_path={ckpt}", f"--predictions.output_dir={out}"])
    table = pd.read_csv(out / "predictions.csv")
    test = cli.datamodule.splits["test"]
    assert sorted(table["query_id"]) == sorted(test.query_ids)
    scores = table[test.llm_names].to_numpy()
    assert ((scores >= 0) & (scores <= 1)).all()
    assert (table["routed_llm"] == np.asarray(test.llm_names)[scores.argmax(axis=1)]).all()
    # the same numbers as the fitted router built from the checkpointed module
    router = cli.model.to_router(cli.datamodule)
    by_id = table.set_index("query_id").loc[test.query_ids, test.llm_names].to_numpy()
    np.testing.assert_allclose(by_id, router.predict_scores(test), rtol=1e-5, atol=1e-6)


def test_ddp_two_cpu_processes(tmp_path):
    """``--trainer.strategy=ddp --trainer.devices=2 --trainer.accelerator=cpu`` (gloo)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "recsys_router.cli.lightning", "fit",
           "-c", str(ROOT / "configs" / "models" / "two_tower.yaml"), "-c", SYNTHETIC, *TINY,
           *_logger(tmp_path), "--trainer.max_epochs=1", "--trainer.strategy=ddp",
           "--trainer.devices=2", "--trainer.enable_progress_bar=false"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "distributed_backend=gloo" in proc.stderr + proc.stdout
    (log_dir,) = [p for p in (tmp_path / "lightning_logs").iterdir() if p.is_dir()]
    metrics = pd.read_csv(log_dir / "metrics.csv")
    assert metrics["val/mu_o"].notna().sum() == 1


@pytest.mark.parametrize("model_cfg", MODEL_CONFIGS, ids=lambda p: p.stem)
def test_every_model_config_trains_on_the_shared_data(model_cfg, tmp_path):
    """Each model config with the real routerbench_zs data config: one training and one
    validation batch (fast_dev_run), sizes linked from the real data (11 LLMs)."""
    from conftest import shared_path
    data_dir = shared_path("routerbench_zs")
    cli = build_cli(["fit", "-c", str(model_cfg), "-c", str(ROOT / "configs" / "data" /
                                                          "routerbench_zs.yaml"),
                     f"--data.init_args.data_dir={data_dir.parent}",
                     "--data.init_args.encoder=hashing", "--data.init_args.encoder_options={dim: 32}",
                     "--trainer.accelerator=cpu", "--trainer.fast_dev_run=true",
                     *_logger(tmp_path)])
    assert cli.trainer.state.finished
    assert (cli.model.hparams["n_llms"], cli.model.hparams["embed_dim"]) == (11, 32)
    assert np.isfinite(float(cli.trainer.callback_metrics["train/loss"]))


def test_ddp_test_metrics_equal_one_process_on_the_same_checkpoint(tmp_path):
    """DDP (2 CPU processes) test metrics of a checkpoint equal the 1-process ones, on a test
    split of odd size: the DistributedSampler pads rank 1 with a repeated query, which must
    not be scored twice."""
    tiny = [a.replace("n_queries: 80", "n_queries: 90") for a in TINY]
    base = ["-c", str(ROOT / "configs" / "models" / "mf.yaml"), "-c", SYNTHETIC, *tiny]
    assert main(["fit", *base, *_logger(tmp_path / "fit"), "--trainer.max_epochs=2",
                 "--trainer.enable_progress_bar=false"]) == 0
    (log_dir,) = [p for p in (tmp_path / "fit" / "lightning_logs").iterdir() if p.is_dir()]
    ckpt = f"--ckpt_path={log_dir / 'checkpoints' / 'last.ckpt'}"
    one = build_cli(["test", *base, *_logger(tmp_path / "one"), ckpt])
    assert len(one.datamodule.splits["test"]) % 2 == 1      # padding happens under DDP
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "recsys_router.cli.lightning", "test", *base,
           *_logger(tmp_path / "ddp"), ckpt, "--trainer.strategy=ddp", "--trainer.devices=2",
           "--trainer.enable_progress_bar=false"]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (ddp_dir,) = [p for p in (tmp_path / "ddp" / "lightning_logs").iterdir() if p.is_dir()]
    ddp = pd.read_csv(ddp_dir / "metrics.csv").iloc[-1]
    for key in ("test/mu_o", "test/v_b", "test/aiq"):
        assert float(ddp[key]) == pytest.approx(float(one.trainer.callback_metrics[key]),
                                                abs=1e-6), key


@pytest.mark.parametrize("split", ["val", "train"])
def test_predict_split_writes_that_splits_queries_and_scores(split, tmp_path):
    """``--predictions.split`` is linked to the data module's ``predict_split``: the rows are
    that split's queries with that split's predicted scores (they were the test queries'
    scores under the split's ids)."""
    out = tmp_path / "pred"
    cli = build_cli(["predict", "-c", str(ROOT / "configs" / "models" / "mf.yaml"), "-c", SYNTHETIC,
                     *TINY, *_logger(tmp_path), f"--predictions.output_dir={out}",
                     f"--predictions.split={split}"])
    assert cli.datamodule.predict_split == split
    data = cli.datamodule.splits[split]
    table = pd.read_csv(out / "predictions.csv", dtype={"query_id": str})
    assert sorted(table["query_id"]) == sorted(data.query_ids)
    router = cli.model.to_router(cli.datamodule)
    by_id = table.set_index("query_id").loc[data.query_ids, data.llm_names].to_numpy()
    np.testing.assert_allclose(by_id, router.predict_scores(data), rtol=1e-5, atol=1e-6)


def test_test_without_test_or_val_split_names_the_splits(tmp_path):
    args = ["test", "-c", str(ROOT / "configs" / "models" / "mf.yaml"), "-c", SYNTHETIC, *TINY,
            *_logger(tmp_path), "--data.init_args.split_ratios=[1.0, 0.0, 0.0]",
            "--data.init_args.carve_val=false"]
    with pytest.raises(Exception, match=r"no 'test' split \(nor 'val'\); splits: \['train'\]"):
        build_cli(args)


def test_lightning_commands_report_a_data_error_in_one_line_exit_2(tmp_path, capsys):
    """A bad data file under fit/validate/test/predict: one line naming file, row and column,
    exit 2 (was a traceback and exit 1); ``--debug`` re-raises it."""
    from recsys_router.errors import DataValidationError
    bad = tmp_path / "bad.csv"
    bad.write_text("query_id,model,score\nq1,a,1\nq1,b,abc\nq2,a,0\nq2,b,1\n")
    args = ["-c", str(ROOT / "configs" / "models" / "mf.yaml"), f"--data.init_args.dataset={bad}",
            "--data.init_args.encoder=hashing", *_logger(tmp_path)]
    for cmd in ("fit", "predict"):
        assert main([cmd, *args]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"recsys-router {cmd}: error: {bad}, row 3, column 'score': score 'abc' "
                       "is not a finite number (1 such records)"]
    with pytest.raises(DataValidationError, match="row 3, column 'score'"):
        main(["--debug", "fit", *args])


def test_last_ckpt_is_the_final_epoch_when_the_best_epoch_is_not(tmp_path):
    """Monitoring ``epoch`` (always a checkpoint candidate) with mode min makes epoch 0 the best
    for sure; last.ckpt must still be epoch 1 at the final step (it stayed at epoch 0: a
    monitored checkpoint's save_last is only rewritten with a new top-k checkpoint)."""
    cli = build_cli(["fit", "-c", str(ROOT / "configs" / "models" / "mf.yaml"), "-c", SYNTHETIC,
                     *TINY, *_logger(tmp_path), "--trainer.max_epochs=2",
                     "--early_stopping.patience=10", "--checkpoint.monitor=epoch",
                     "--checkpoint.mode=min"])
    n_train = cli.datamodule.splits["train"].n_queries
    steps = 2 * -(-n_train // 16)                      # 2 epochs of ceil(n / batch 16) steps
    folder = Path(cli.trainer.checkpoint_callback.best_model_path).parent
    assert Path(cli.trainer.checkpoint_callback.best_model_path).name.startswith("epoch000-")
    assert sorted(p.name for p in folder.iterdir())[-1] == "last.ckpt"
    last = torch.load(folder / "last.ckpt", map_location="cpu", weights_only=False)
    assert (last["epoch"], last["global_step"]) == (1, steps)
    final = cli.model.state_dict()
    assert all(torch.equal(last["state_dict"][k], v.cpu()) for k, v in final.items())


@pytest.mark.parametrize("name", ["routerbench_zs", "llmrouter"])
def test_data_configs_use_the_published_split_with_a_tenth_of_train_as_val(name):
    """routerbench_zs and llmrouter ship a train/test split: the configs test on exactly the
    published test queries and carve 10% of the published train queries as val (they made a
    random 80/10/10 split)."""
    from conftest import shared_path
    from recsys_router.datasets import load_dataset
    data_dir = shared_path()
    args = yaml.safe_load((ROOT / "configs" / "data" / f"{name}.yaml").read_text())["data"]["init_args"]
    dm = RoutingDataModule(**{**args, "encoder": "hashing", "encoder_options": {"dim": 16},
                              "data_dir": str(data_dir)})
    q = load_dataset(name, data_dir=str(data_dir)).queries
    split = q["split"].astype(str).str.lower()
    published = {s: set(q.loc[split == s, "query_id"].astype(str)) for s in ("train", "test")}
    assert set(dm.splits["test"].query_ids) == published["test"]
    train, val = set(dm.splits["train"].query_ids), set(dm.splits["val"].query_ids)
    assert train | val == published["train"] and not train & val
    assert len(val) == round(0.1 * len(published["train"]))


def _evil_module(tmp_path, monkeypatch, name: str) -> Path:
    """Write an importable module ``name`` whose import touches ``tmp_path/imported``; the
    marker's path (it must never exist: nothing may import the module)."""
    (tmp_path / f"{name}.py").write_text("import pathlib\npathlib.Path(__file__)"
                                         ".with_name('imported').touch()\nclass Evil: pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path / "imported"


def _ckpt_hostile_base(tmp_path) -> list[str]:
    return ["-c", str(ROOT / "configs" / "models" / "mf.yaml"), "-c", SYNTHETIC, *TINY,
            *_logger(tmp_path)]


def _fitted_ckpt(tmp_path) -> tuple[Path, dict]:
    """An mf checkpoint of a one-epoch fit, and its raw contents."""
    cli = build_cli(["fit", *_ckpt_hostile_base(tmp_path), "--trainer.max_epochs=1"])
    ckpt = Path(cli.trainer.checkpoint_callback.best_model_path)
    return ckpt, torch.load(ckpt, map_location="cpu", weights_only=False)


def test_ckpt_path_with_a_foreign_loss_class_is_refused_before_any_import(tmp_path, capsys,
                                                                           monkeypatch):
    """``test --ckpt_path``: LightningCLI parses the checkpoint's hyperparameters into the
    model config, and jsonargparse would import a loss ``class_path`` the file names; the
    router CLI refuses it first (one line, exit 2) and imports nothing."""
    import sys
    marker = _evil_module(tmp_path, monkeypatch, "evil_ckpt_mod")
    base = _ckpt_hostile_base(tmp_path)
    _, raw = _fitted_ckpt(tmp_path)
    assert raw["hyper_parameters"]["loss"]["kind"] == "bce"       # kept as plain data
    raw["hyper_parameters"]["loss"] = {"class_path": "evil_ckpt_mod.Evil", "init_args": {}}
    torch.save(raw, tmp_path / "evil.ckpt")
    capsys.readouterr()
    assert main(["test", *base, f"--ckpt_path={tmp_path / 'evil.ckpt'}"]) == 2
    assert "class_path 'evil_ckpt_mod.Evil' is not a known loss" in capsys.readouterr().err
    assert "evil_ckpt_mod" not in sys.modules and not marker.exists()


def test_a_loss_selection_ratio_unlike_the_data_modules_is_refused(tmp_path):
    """The data module builds the targets from its own selection_ratio; a config whose loss
    names another one is refused (before, the loss's value was silently unused)."""
    mf = str(ROOT / "configs" / "models" / "mf.yaml")
    loss_ratio = "--model.init_args.loss.init_args.selection_ratio=0.5"
    with pytest.raises(ValueError, match=r"selection_ratio=0\.5 but the data module has "
                                         r"selection_ratio=0\.95"):
        build_cli(["fit", "-c", mf, "-c", SYNTHETIC, *TINY, loss_ratio,
                   "--trainer.fast_dev_run=true", *_logger(tmp_path)])
    from recsys_router.cli import main
    rc = main(["fit", "-c", mf, "-c", SYNTHETIC, *TINY, loss_ratio, "--trainer.fast_dev_run=true",
               *_logger(tmp_path)])
    assert rc == 2  # one error line, like the other config data errors
    cli = build_cli(["fit", "-c", mf, "-c", SYNTHETIC, *TINY, loss_ratio,
                     "--data.init_args.selection_ratio=0.5", "--trainer.fast_dev_run=true",
                     *_logger(tmp_path)])
    assert cli.trainer.state.finished
    assert cli.model.loss_fn.selection_ratio == cli.datamodule.selection_ratio == 0.5


def test_ckpt_path_is_read_once_and_a_foreign_model_class_is_refused(tmp_path, capsys,
                                                                     monkeypatch):
    """``--ckpt_path``: the router CLI reads the checkpoint's hyperparameters once (it read
    them, then LightningCLI read the file again) and refuses a model ``_class_path`` outside
    recsys_router.models before jsonargparse imports it (it imported the module, then said it
    was no RouterModule); the loss check still fires (see the test above)."""
    import sys
    marker = _evil_module(tmp_path, monkeypatch, "evil_model_mod")
    base = _ckpt_hostile_base(tmp_path)
    ckpt, raw = _fitted_ckpt(tmp_path)
    assert raw["hyper_parameters"]["_class_path"] == "recsys_router.models.mf_module.MFModule"
    calls = []
    load = torch.load

    def spy(f, *args, **kw):
        calls.append(str(getattr(f, "name", f)))
        return load(f, *args, **kw)
    monkeypatch.setattr(torch, "load", spy)
    cli = build_cli(["test", *base, f"--ckpt_path={ckpt}"])
    assert 0.0 <= float(cli.trainer.callback_metrics["test/mu_o"]) <= 1.0
    assert type(cli.model).__name__ == "MFModule"
    assert calls.count(str(ckpt)) == 2  # the hyperparameters once, the weights once (Trainer)
    monkeypatch.setattr(torch, "load", load)
    for bad in ("evil_model_mod.Evil", "os.system", 3):
        raw["hyper_parameters"]["_class_path"] = bad
        torch.save(raw, tmp_path / "evil.ckpt")
        capsys.readouterr()
        assert main(["test", *base, f"--ckpt_path={tmp_path / 'evil.ckpt'}"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1] == (f"recsys-router test: error: {tmp_path / 'evil.ckpt'}: hyper_parameters."
                           f"_class_path {bad!r} is not a RouterModule under recsys_router.models. "
                           "(train with recsys-router fit)")
    assert "evil_model_mod" not in sys.modules and not marker.exists()


def test_ckpt_path_with_class_path_init_args_and_a_nested_foreign_loss_is_one_line(
        tmp_path, capsys, monkeypatch):
    """A checkpoint whose hyperparameters are a ``class_path`` / ``init_args`` section (no
    ``_class_path``, which LightningCLI always writes) with a foreign loss nested in
    ``init_args`` is refused as one line (it was an ImportDenied traceback, exit 1); and
    should such a class path reach the parser, its import refusal is one line too."""
    import sys
    marker = _evil_module(tmp_path, monkeypatch, "evil_nested_mod")
    ckpt = tmp_path / "nested.ckpt"
    torch.save({"hyper_parameters": {
        "class_path": "recsys_router.models.mf_module.MFModule",
        "init_args": {"dim": 4, "loss": {"class_path": "evil_nested_mod.Evil"}}}}, ckpt)
    capsys.readouterr()
    assert main(["test", *_ckpt_hostile_base(tmp_path), f"--ckpt_path={ckpt}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"recsys-router test: error: {ckpt}: hyper_parameters has class_path/init_args "
                   "but no _class_path: not a checkpoint of recsys-router fit"]
    # the parser's own refusal (jsonargparse's ImportDenied, no ArgumentError) is one line too
    import recsys_router.lightning_cli as lcli
    monkeypatch.setattr(lcli, "_check_ckpt_hparams", lambda *a: None)
    assert main(["test", *_ckpt_hostile_base(tmp_path), f"--ckpt_path={ckpt}"]) == 2
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if ln.strip()]
    assert len(err) == 1 and "class_path 'evil_nested_mod.Evil' is refused" in err[0], err
    assert "evil_nested_mod" not in sys.modules and not marker.exists()


@pytest.mark.parametrize("content,says", [
    ({"hyper_parameters": [1, 2]}, "hyper_parameters must be a mapping, got list"),
    ([1, 2, 3], "a checkpoint must be a mapping, got list"),
    (b"not a checkpoint at all",
     "not a torch checkpoint that loads as plain data (weights_only; UnpicklingError)"),
], ids=["hparams_list", "toplevel_list", "garbage"])
def test_a_malformed_ckpt_path_file_is_one_line_naming_it(tmp_path, capsys, content, says):
    """A checkpoint that is no mapping, whose hyper_parameters are no mapping, or that is no
    torch file at all: one line naming the file, exit 2 (were TypeError, AttributeError and
    UnpicklingError tracebacks)."""
    ckpt = tmp_path / "bad.ckpt"
    if isinstance(content, bytes):
        ckpt.write_bytes(content)
    else:
        torch.save(content, ckpt)
    capsys.readouterr()
    assert main(["test", *_ckpt_hostile_base(tmp_path), f"--ckpt_path={ckpt}"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"recsys-router test: error: {ckpt}: {says}"]


def test_a_numeric_dataset_option_override_given_as_text_is_read_as_its_number(tmp_path):
    """``--data.init_args.dataset_options.n_queries=50`` reaches the loader as the string
    '50' (a TypeError in make_synthetic); it is read as the int make_synthetic declares, and
    text that is no number is one error naming the option."""
    from recsys_router.datasets import load_dataset
    from recsys_router.errors import ArgumentValueError
    cli = build_cli(["fit", "-c", str(ROOT / "configs" / "models" / "mf.yaml"), "-c", SYNTHETIC,
                     *TINY, "--data.init_args.dataset_options.n_queries=50",
                     "--trainer.fast_dev_run=true", *_logger(tmp_path)])
    assert cli.datamodule.dataset_options["n_queries"] == "50"  # as the parser gives it
    assert sum(s.n_queries for s in cli.datamodule.splits.values()) == 50
    by_text = load_dataset("synthetic", n_queries="30", n_llms="3", specialisation="2", seed="4")
    by_number = load_dataset("synthetic", n_queries=30, n_llms=3, specialisation=2.0, seed=4)
    assert by_text.shape == (30, 3)
    assert np.array_equal(by_text.scores, by_number.scores, equal_nan=True)
    with pytest.raises(ArgumentValueError, match=r"^dataset option 'n_llms' must be int, got 'x'$"):
        load_dataset("synthetic", n_queries=30, n_llms="x")
