"""A `tune` worker killed with SIGKILL mid-trial: after a restart the stale RUNNING trial is
failed once its heartbeat is older than the grace period, retried with its parameters, not
counted toward --n-trials, and the study ends with every trial complete."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from kill_helpers import sigkill_when

from recsys_router.tuning import make_storage, open_study, run_study

ROOT = Path(__file__).resolve().parents[1]
MF = str(ROOT / "configs" / "models" / "mf.yaml")
SYNTHETIC = str(ROOT / "configs" / "data" / "synthetic.yaml")
SEARCH = "model.init_args.lr: {type: float, low: 1.0e-3, high: 1.0e-1, log: true}\n"
TINY = ["--data.init_args.dataset_options={n_queries: 200, n_llms: 4, n_topics: 3, seed: 0}",
        "--data.init_args.encoder_options={dim: 32}", "--trainer.max_epochs=1",
        "--trainer.limit_train_batches=2"]


def _running(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as con:
            return con.execute("SELECT COUNT(*) FROM trials WHERE state = 'RUNNING'").fetchone()[0]
    except sqlite3.OperationalError:  # schema not created yet
        return 0


def test_killed_worker_trial_is_failed_retried_and_not_counted(tmp_path):
    search = tmp_path / "search.yaml"
    search.write_text(SEARCH)
    db = tmp_path / "st.db"
    url = f"sqlite:///{db}"
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "recsys_router.cli.tune", "-c", MF, "-c", SYNTHETIC,
           "--search", str(search), "--n-trials", "2", "--storage", url, "--study-name", "s",
           "--pruner", "none", "--out", str(tmp_path / "out"), "--no-plots", "--no-progress",
           "--heartbeat-interval", "1", "--heartbeat-grace", "3", "--seed", "0", *TINY]
    first = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    sigkill_when(first, lambda: _running(db) > 0, timeout=400)   # mid-trial
    study = optuna.load_study(study_name="s", storage=url)
    stale = [t for t in study.trials if t.state == optuna.trial.TrialState.RUNNING]
    assert len(stale) == 1                                   # killed mid-trial
    stale_trial = stale[0]
    # restart at once: the worker waits out the grace period, fails and retries the trial
    second = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=500)
    assert second.returncode == 0, second.stderr[-3000:]
    study = optuna.load_study(study_name="s", storage=url)
    states = {t.number: t.state for t in study.trials}
    assert states[stale_trial.number] == optuna.trial.TrialState.FAIL
    complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(complete) == 2                                # every trial of the budget done
    assert not [t for t in study.trials if t.state == optuna.trial.TrialState.RUNNING]
    retries = [t for t in complete if stale_trial.number in t.system_attrs.get("retry_history", [])]
    # re-run with whatever the dead trial had sampled (nothing when it died before sampling)
    assert len(retries) == 1
    assert {k: retries[0].params[k] for k in stale_trial.params} == stale_trial.params
    assert len(study.trials) == 3                            # 2 counted + the dead one
    assert "3 trials in total" in second.stdout


def test_stale_trial_in_process(tmp_path):
    """The same bookkeeping without subprocesses: a RUNNING trial whose heartbeat stopped."""
    url = f"sqlite:///{tmp_path / 'h.db'}"
    study = open_study("h", url, direction="minimize", seed=0, pruner="none",
                       heartbeat_interval=1, grace_period=2)
    dead = study.ask()                                       # RUNNING, never told
    dead.suggest_float("x", 0, 1)
    study._storage.record_heartbeat(dead._trial_id)          # its worker beat once, then died
    seen = []

    def objective(trial):
        seen.append(trial.number)
        return trial.suggest_float("x", 0, 1)

    t0 = time.monotonic()
    assert run_study(study, objective, 2, show_progress_bar=False) == 2
    assert time.monotonic() - t0 >= 2                        # waited for the grace period
    trials = study.get_trials()
    assert trials[dead.number].state == optuna.trial.TrialState.FAIL
    retry = [t for t in trials if dead.number in t.system_attrs.get("retry_history", [])]
    assert len(retry) == 1 and retry[0].params == {"x": dead.params["x"]}
    assert sum(t.state == optuna.trial.TrialState.COMPLETE for t in trials) == 2
    assert run_study(study, objective, 2, show_progress_bar=False) == 0


def test_heartbeat_settings_are_checked(tmp_path):
    url = f"sqlite:///{tmp_path / 'x.db'}"
    with pytest.raises(ValueError, match="must be longer than the heartbeat interval"):
        make_storage(url, heartbeat_interval=5, grace_period=5)
    with pytest.raises(ValueError, match="whole number of seconds"):
        make_storage(url, heartbeat_interval=0)
