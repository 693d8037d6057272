"""``tune`` before and after its trials: a config every trial would fail on is refused before
a study exists (nothing written), a study whose trials all failed does not block the
corrected rerun, a resumed study on changed data is refused (data fingerprint), no completed
trial is an error (exit 2, no best_config.yaml), plots replace their files atomically, and
``--seed``'s help says what a registry router trains with."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import optuna
import pandas as pd
import pytest
import yaml

from recsys_router.cli import main
from recsys_router.data import RoutingData
from recsys_router.tuning import NoTrialCompleted, RouterObjective, TuningConfigError, tune
from recsys_router.tuning.preflight import splits_fingerprint
from recsys_router.tuning.report import write_plots
from tuning_data import one_torch_thread, synthetic_data_config  # noqa: F401 - autouse fixture

ROOT = Path(__file__).resolve().parents[1]
MF = str(ROOT / "configs" / "models" / "mf.yaml")
TINY = ["--trainer.max_epochs=1", "--trainer.limit_train_batches=2"]

optuna.logging.set_verbosity(optuna.logging.ERROR)


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _data(tmp_path):
    return synthetic_data_config(tmp_path / "data.yaml", dim=16, n_queries=100, n_llms=3, n_topics=2)


def _storage_studies(out: Path) -> list[str]:
    return [s.study_name for s in optuna.get_all_study_summaries(f"sqlite:///{out / 'study.db'}")]


def test_lightning_config_typo_is_refused_before_a_study_and_fixed_rerun_runs(tmp_path, capsys):
    """r4: ``dimm: 8`` was found by trial 0 after the study recorded this config's hash; the
    rerun with ``dim: 8`` was refused as another run's."""
    data = _data(tmp_path)
    search = _write(tmp_path / "s.yaml", "model.init_args.lr: {type: float, low: 0.001, high: 0.1}\n")
    model = _write(tmp_path / "model.yaml", "model:\n  class_path: "
                   "recsys_router.models.mf_module.MFModule\n  init_args: {dimm: 8}\n")
    out = tmp_path / "out"
    args = ["tune", "-c", str(model), "-c", str(data), "--search", str(search), "--n-trials", "1",
            "--out", str(out), "--no-plots", "--no-progress", *TINY]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "dimm" in err and "no such argument" in err and "recsys-tune-" not in err, err
    assert not out.exists()
    _write(model, "model:\n  class_path: recsys_router.models.mf_module.MFModule\n"
                  "  init_args: {dim: 8}\n")
    assert main(args) == 0, capsys.readouterr().err
    assert (out / "best_config.yaml").is_file()


def test_config_error_in_a_trial_drops_the_fresh_study(tmp_path, monkeypatch):
    """A config error only a trial finds (here forced on every call) stops the run; the study
    it created holds no completed trial and is removed, so the rerun starts afresh."""
    data = _data(tmp_path)
    search = _write(tmp_path / "s.yaml", "params.k: {type: int, low: 1, high: 5}\n")
    out = tmp_path / "out"
    real_call = RouterObjective.__call__

    def broken(self, trial):
        raise TuningConfigError("the router refused its params")

    monkeypatch.setattr(RouterObjective, "__call__", broken)
    with pytest.raises(TuningConfigError, match="refused its params"):
        tune([data], search, router="knn", n_trials=2, out_dir=out, progress=False, plots=False)
    assert _storage_studies(out) == []
    monkeypatch.setattr(RouterObjective, "__call__", real_call)
    res = tune([data], search, router="knn", n_trials=2, out_dir=out, progress=False, plots=False)
    assert [t.state for t in res.study.trials] == [optuna.trial.TrialState.COMPLETE] * 2


def test_all_trials_failing_exits_2_without_best_config_and_fixed_rerun_runs(tmp_path, capsys):
    """r6: a float range for knn's integer ``k`` fails every trial; that exited 0 with 'no
    trial completed'. Now exit 2, the first error named, no best_config.yaml, and the study
    this run created is removed so the corrected search space is not refused."""
    data = _data(tmp_path)
    search = _write(tmp_path / "s.yaml", "params.k: {type: float, low: 1, high: 5}\n")
    out = tmp_path / "out"
    args = ["tune", "--router", "knn", "-c", str(data), "--search", str(search), "--n-trials", "3",
            "--study-name", "s", "--out", str(out), "--no-plots", "--no-progress"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "no trial of study 's' completed (3 trials: FAIL; trial 0:" in err, err
    assert "k must be an integer" in err and "removed from the storage" in err
    assert not (out / "best_config.yaml").exists()
    csv = pd.read_csv(out / "trials.csv")
    assert list(csv["state"]) == ["FAIL"] * 3
    assert _storage_studies(out) == []
    _write(search, "params.k: {type: int, low: 1, high: 5}\n")
    assert main(args) == 0, capsys.readouterr().err
    assert (out / "best_config.yaml").is_file()


def test_resumed_study_with_no_completed_trial_keeps_it_and_exits_2(tmp_path):
    """A study that had trials before this run is not removed, even when none completed."""
    data = _data(tmp_path)
    search = _write(tmp_path / "s.yaml", "params.k: {type: float, low: 1, high: 5}\n")
    out = tmp_path / "out"
    with pytest.raises(NoTrialCompleted):
        tune([data], search, router="knn", n_trials=1, out_dir=out, progress=False, plots=False,
             study_name="s")
    assert _storage_studies(out) == []  # fresh and failed: removed
    storage = f"sqlite:///{tmp_path / 'keep.db'}"
    optuna.create_study(study_name="s", storage=storage, direction="maximize")
    study = optuna.load_study(study_name="s", storage=storage)
    study.add_trial(optuna.trial.create_trial(state=optuna.trial.TrialState.FAIL,
                                              params={"params.k": 2.0},
                                              distributions={"params.k": optuna.distributions
                                                             .FloatDistribution(1, 5)},
                                              user_attrs={"config": "x", "overrides": []}))
    with pytest.raises(NoTrialCompleted, match="the study keeps them"):
        tune([data], search, router="knn", n_trials=2, out_dir=out, progress=False, plots=False,
             study_name="s", storage=storage)
    assert len(optuna.load_study(study_name="s", storage=storage).trials) == 2


def _csv_data(path: Path, seed: int) -> None:
    assert main(["data", "convert", "synthetic", "--n-queries", "120", "--n-llms", "3",
                 "--n-topics", "2", "--seed", str(seed), "--to", str(path)]) == 0


def test_a_study_made_before_the_run_is_never_removed(tmp_path):
    """A study created beforehand (e.g. `optuna create-study` for several workers) had no
    trials when tune opened it, so tune took it for its own and deleted it when every trial
    failed (review D5-3); only a study this run created is removed."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    data = synthetic_data_config(tmp_path / "data.yaml", dim=16, n_queries=60, n_llms=3, n_topics=2)
    (tmp_path / "s.yaml").write_text("params.k: {type: float, low: 1, high: 5}\n")  # all fail
    storage = f"sqlite:///{tmp_path / 'shared.db'}"
    made = optuna.create_study(study_name="team", storage=storage, direction="maximize")
    made.set_user_attr("owner", "alice")
    with pytest.raises(NoTrialCompleted):
        tune([str(data)], str(tmp_path / "s.yaml"), router="knn", n_trials=2,
             out_dir=tmp_path / "out", progress=False, plots=False, study_name="team",
             storage=storage)
    kept = optuna.load_study(study_name="team", storage=storage)
    assert kept.user_attrs["owner"] == "alice" and len(kept.trials) == 2
    with pytest.raises(NoTrialCompleted):   # a study the run made itself is removed
        tune([str(data)], str(tmp_path / "s.yaml"), router="knn", n_trials=2,
             out_dir=tmp_path / "out2", progress=False, plots=False, study_name="mine",
             storage=storage)
    assert optuna.get_all_study_names(storage) == ["team"]


def test_resume_on_changed_data_is_refused(tmp_path, capsys):
    """r5: the same config over a data file whose contents changed resumed silently."""
    csv = tmp_path / "data.csv"
    _csv_data(csv, 0)
    data = _write(tmp_path / "d.yaml", yaml.safe_dump({"data": {
        "class_path": "recsys_router.datamodules.routing_datamodule.RoutingDataModule",
        "init_args": {"dataset": str(csv), "encoder": "hashing", "encoder_options": {"dim": 16},
                      "split_ratios": [0.8, 0.1, 0.1], "seed": 0}}}))
    search = _write(tmp_path / "s.yaml", "params.k: {type: int, low: 1, high: 20}\n")
    out = tmp_path / "out"
    args = ["tune", "--router", "knn", "-c", str(data), "--search", str(search), "--out", str(out),
            "--no-plots", "--no-progress"]
    assert main([*args, "--n-trials", "2"]) == 0
    stored = optuna.load_study(study_name="s", storage=f"sqlite:///{out / 'study.db'}")
    assert len(stored.user_attrs["data_fingerprint"]) == 16
    shutil.copy(csv, tmp_path / "a.csv")
    _csv_data(csv, 1)  # other scores under the same path and config
    capsys.readouterr()
    assert main([*args, "--n-trials", "4"]) == 2
    err = capsys.readouterr().err
    assert "created for another run: data (fingerprint of the train/val splits' contents" in err
    assert len(optuna.load_study(study_name="s", storage=f"sqlite:///{out / 'study.db'}").trials) == 2
    shutil.copy(tmp_path / "a.csv", csv)  # the original data back: resumes
    assert main([*args, "--n-trials", "4"]) == 0
    assert len(optuna.load_study(study_name="s", storage=f"sqlite:///{out / 'study.db'}").trials) == 4


def _routing(texts, scores, costs=None) -> RoutingData:
    return RoutingData(pd.DataFrame({"query_id": [f"q{i}" for i in range(len(texts))],
                                     "text": texts}), ["m1", "m2"], np.array(scores, float),
                       None if costs is None else np.array(costs, float))


def test_splits_fingerprint_sees_texts_scores_costs_and_splits():
    base = _routing(["a", "b"], [[1, 0], [0, 1]])
    fp = splits_fingerprint({"train": base, "val": base})
    assert fp == splits_fingerprint({"train": _routing(["a", "b"], [[1, 0], [0, 1]]),
                                     "val": _routing(["a", "b"], [[1, 0], [0, 1]])})
    others = [
        {"train": _routing(["a", "c"], [[1, 0], [0, 1]]), "val": base},      # a text
        {"train": base, "val": _routing(["a", "b"], [[1, 0], [1, 1]])},      # a score
        {"train": base, "val": _routing(["a", "b"], [[1, 0], [0, 1]], [[1, 1], [1, 2]])},  # costs
        {"train": base},                                                     # no val split
        {"train": base, "val": base, "test": _routing(["z"], [[0, 0]])},     # test: not read
    ]
    got = [splits_fingerprint(s) for s in others]
    assert got[:4] == [g for g in got[:4] if g != fp] and len(set(got[:4])) == 4
    assert got[4] == fp


def _plot_study():
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=0))
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=3)
    return study


def test_plot_that_fails_part_way_leaves_the_previous_file(tmp_path, monkeypatch):
    """r7: savefig wrote onto history.png itself; a write failing part-way left 6 bytes."""
    from matplotlib.figure import Figure
    study = _plot_study()
    assert write_plots(study, tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert before["history.png"][:4] == b"\x89PNG"

    def failing(self, fname, *a, **k):
        Path(fname).write_bytes(b"\x89PNG\r\n")  # a partial write, then the failure
        raise RuntimeError("disk full")

    monkeypatch.setattr(Figure, "savefig", failing)
    assert write_plots(study, tmp_path) == []
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # no temporaries


def test_tune_seed_help_says_what_routers_train_with(capsys):
    with pytest.raises(SystemExit):
        main(["tune", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "a Lightning model trains with seed_everything=trial_seed(seed, n)" in text
    assert "a registry router trains with its config's params.seed" in text
