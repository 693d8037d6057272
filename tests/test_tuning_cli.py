"""End to end: `recsys-router tune` on tiny synthetic data (hashing encoder, 1-2 epochs):
trial records, best_config.yaml round trip through `recsys-router fit`, resume, two workers
sharing one SQLite study, a registry router (knn), and error messages."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import optuna
import pandas as pd
import pytest
import torch
import yaml

from recsys_router.cli import main
from recsys_router.tuning import TuningConfigError, tune
from tuning_data import one_torch_thread, synthetic_data_config  # noqa: F401 - autouse fixture

ROOT = Path(__file__).resolve().parents[1]
MF = str(ROOT / "configs" / "models" / "mf.yaml")
SYNTHETIC = str(ROOT / "configs" / "data" / "synthetic.yaml")
TINY = ["--data.init_args.dataset_options={n_queries: 200, n_llms: 4, n_topics: 3, seed: 0}",
        "--data.init_args.encoder_options={dim: 32}", "--trainer.max_epochs=2",
        "--trainer.limit_train_batches=2"]

optuna.logging.set_verbosity(optuna.logging.ERROR)


def _search(tmp_path, text: str) -> Path:
    path = tmp_path / "search.yaml"
    path.write_text(text)
    return path


MF_SEARCH = """
model.init_args.lr: {type: float, low: 1.0e-3, high: 1.0e-1, log: true}
model.init_args.loss.init_args.kind: {type: categorical, choices: [bce, utility]}
model.init_args.loss.init_args.temperature:
  {type: float, low: 0.1, high: 1.0, when: {model.init_args.loss.init_args.kind: utility}}
"""


def test_tune_lightning_best_config_round_trip_and_resume(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    search = _search(tmp_path, MF_SEARCH)
    out = tmp_path / "out"
    url = f"sqlite:///{tmp_path / 'st.db'}"  # absolute path: four slashes
    assert url.startswith("sqlite:////")
    res = tune([MF, SYNTHETIC], search, n_trials=2, metric="val/aiq", storage=url, study_name="mf",
               out_dir=out, overrides=TINY, seed=3, progress=False)
    assert res.n_run == 2
    trials = res.study.trials
    for t in trials:
        assert t.state == optuna.trial.TrialState.COMPLETE
        cfg = yaml.safe_load(t.user_attrs["config"])
        # the sampled values reached the merged config, and the per-trial seed
        assert cfg["model"]["init_args"]["lr"] == pytest.approx(t.params["model.init_args.lr"])
        assert cfg["model"]["init_args"]["loss"]["init_args"]["kind"] == t.params[
            "model.init_args.loss.init_args.kind"]
        # trains with the trial's SeedSequence word, as its sampler does (seed + number gave
        # trial n of seed 3 the training stream of trial n + 3 of seed 0)
        word = int(np.random.SeedSequence([3, t.number]).generate_state(1, np.uint32)[0])
        assert cfg["seed_everything"] == word == t.user_attrs["seed"]
        assert cfg["trainer"]["max_epochs"] == 2
        assert Path(t.user_attrs["checkpoint_path"]).is_file()
        # last.ckpt, beside the trial's other checkpoints, holds the final (2nd) epoch
        assert t.user_attrs["checkpoint_path"] == str(Path(t.user_attrs["trial_dir"]) /
                                                      "checkpoints" / "last.ckpt")
        last = torch.load(t.user_attrs["checkpoint_path"], map_location="cpu", weights_only=False)
        assert last["epoch"] == 1
        assert t.user_attrs["metrics"]["val/aiq"] == t.value
        log = pd.read_csv(Path(t.user_attrs["trial_dir"]) / "lightning_logs" / "version_0" / "metrics.csv")
        per_epoch = log["val/aiq"].dropna().tolist()
        assert per_epoch[-1] == pytest.approx(t.value)  # the trial value is the last epoch's
        # the pruning callback reported every validation epoch to the trial
        assert sorted(t.intermediate_values) == [0, 1]
        assert [t.intermediate_values[e] for e in (0, 1)] == pytest.approx(per_epoch)
    best = max(trials, key=lambda t: t.value)
    assert res.best_config == out / "best_config.yaml"
    assert {p.name for p in res.plots} == {"history.png", "importance.png"}
    assert len(pd.read_csv(out / "trials.csv")) == 2
    assert res.summary.splitlines()[1].split()[:2] == [str(best.number), "COMPLETE"]

    # best_config.yaml runs as is with `recsys-router fit` and reproduces the best value
    run_dir = tmp_path / "rerun"
    run_dir.mkdir()
    monkeypatch.chdir(run_dir)
    assert main(["fit", "-c", str(res.best_config)]) == 0
    (version,) = (run_dir / "lightning_logs").iterdir()
    rerun = pd.read_csv(version / "metrics.csv")["val/aiq"].dropna().iloc[-1]
    assert rerun == pytest.approx(best.value, abs=1e-6)

    # resume: the same study with a total of 3 runs only the missing trial
    res2 = tune([MF, SYNTHETIC], search, n_trials=3, metric="val/aiq", storage=url, study_name="mf",
                out_dir=out, overrides=TINY, seed=3, progress=False, plots=False)
    assert res2.n_run == 1
    assert [t.number for t in res2.study.trials] == [0, 1, 2]


def test_two_workers_share_one_sqlite_study(tmp_path):
    search = _search(tmp_path, MF_SEARCH)
    db = tmp_path / "shared.db"
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "recsys_router.cli.tune", "-c", MF, "-c", SYNTHETIC,
           "--search", str(search), "--n-trials", "4", "--metric", "val/mu_o",
           "--storage", f"sqlite:///{db}", "--study-name", "shared", "--pruner", "none",
           "--out", str(tmp_path / "out"), "--no-plots", "--no-progress", *TINY,
           "--trainer.max_epochs=1"]
    procs = [subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (so, se) in zip(procs, outs):
        assert p.returncode == 0, se[-3000:]
    ran = [int(so.split(" run here")[0].rsplit(", ", 1)[1]) for so, _ in outs]
    study = optuna.load_study(study_name="shared", storage=f"sqlite:///{db}")
    in_budget = [t for t in study.trials if not t.user_attrs.get("over_budget")]
    numbers = sorted(t.number for t in in_budget)
    assert numbers == [0, 1, 2, 3]                    # distinct, no gaps, total = 4
    assert sum(ran) == 4
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in in_budget)
    assert len({t.user_attrs["seed"] for t in in_budget}) == 4
    assert len({tuple(sorted(t.params.items())) for t in in_budget}) == 4


def test_tune_registry_router_knn(tmp_path):
    from recsys_router.registry import make_router
    data_cfg = synthetic_data_config(tmp_path / "data.yaml", dim=64, n_queries=300, n_llms=4, n_topics=3)
    res = tune([data_cfg], ROOT / "configs" / "search" / "knn.yaml", router="knn", n_trials=3,
               metric="val/mu_o", out_dir=tmp_path / "out", seed=0, progress=False, plots=False)
    assert len(res.study.trials) == 3 and res.n_run == 3
    cfg = yaml.safe_load(res.best_config.read_text())
    assert cfg["router"] == "knn" and cfg["params"]["k"] == res.study.best_params["params.k"]
    # independent check of the recorded value: refit the best router and score by hand
    from recsys_router.datamodules.routing_datamodule import RoutingDataModule
    splits = RoutingDataModule(**cfg["data"]["init_args"]).splits
    router = make_router(cfg["router"], **cfg["params"]).fit(splits["train"], splits["val"])
    val = splits["val"]
    pred, cost = router.predict_scores(val), np.broadcast_to(router.predict_costs(val), val.scores.shape)
    ok = np.isfinite(val.scores).all(1) & np.isfinite(val.costs).all(1)
    choice = [min(np.flatnonzero(p == p.max()), key=lambda j: (c[j], j)) for p, c in zip(pred[ok], cost[ok])]
    assert res.study.best_value == pytest.approx(val.scores[ok][np.arange(ok.sum()), choice].mean())


def test_cli_errors_name_the_problem(tmp_path, capsys):
    bad = _search(tmp_path, "model.init_args.lr: {type: float, low: 0.1, high: 0.01}\n")
    assert main(["tune", "-c", MF, "-c", SYNTHETIC, "--search", str(bad), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "'model.init_args.lr'" in err and "low must be < high" in err and str(bad) in err
    typo = _search(tmp_path, "params.kk: {type: int, low: 1, high: 5}\n")
    assert main(["tune", "--router", "knn", "-c", SYNTHETIC, "--search", str(typo),
                 "--out", str(tmp_path)]) == 2
    assert "did you mean params.k" in capsys.readouterr().err


def test_lightning_rejects_unknown_argument_before_training(tmp_path):
    search = _search(tmp_path, "model.init_args.not_an_arg: {type: int, low: 1, high: 3}\n")
    with pytest.raises(TuningConfigError, match="not_an_arg"):
        tune([MF, SYNTHETIC], search, n_trials=1, out_dir=tmp_path / "o", overrides=TINY,
             progress=False, plots=False)


def test_tune_help_names_the_trial_seed(capsys):
    """``tune --help`` says how a trial's seed is made now (it said ``seed+n``)."""
    with pytest.raises(SystemExit) as e:
        main(["tune", "--help"])
    assert e.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    # it said "samples and trains with": a registry router trains with its params.seed
    assert "trial n samples with trial_seed(seed, n)" in text
    assert "a Lightning model trains with seed_everything=trial_seed(seed, n)" in text
    assert "seed+n" not in text
