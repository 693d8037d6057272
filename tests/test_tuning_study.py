"""Pruning callback (fake trial / fake trainer, and a real MedianPruner), the per-trial seeded
sampler, the study-total budget (resume, extension, over-budget guard), the summary table."""

from __future__ import annotations

import types

import numpy as np
import optuna
import pytest
import torch

from recsys_router.tuning import make_storage
from recsys_router.tuning import study as study_mod
from recsys_router.tuning.pruning import PruningCallback
from recsys_router.tuning.report import summary_table, write_best_config, write_plots
from recsys_router.tuning.study import TrialSeededSampler, make_pruner, open_study, run_study

optuna.logging.set_verbosity(optuna.logging.ERROR)


class FakeTrial:
    def __init__(self, prune_after: int | None):
        self.reports, self.prune_after = [], prune_after

    def report(self, value, step):
        self.reports.append((step, value))

    def should_prune(self):
        return self.prune_after is not None and len(self.reports) > self.prune_after


def _trainer(epoch, metrics, sanity=False):
    return types.SimpleNamespace(sanity_checking=sanity, current_epoch=epoch,
                                 callback_metrics={k: torch.tensor(v) for k, v in metrics.items()})


def test_pruning_callback_reports_each_epoch_and_prunes():
    trial = FakeTrial(prune_after=2)
    cb = PruningCallback(trial, "val/aiq")
    cb.on_validation_end(_trainer(0, {"val/aiq": 0.9}, sanity=True), None)  # sanity check: ignored
    assert trial.reports == []
    cb.on_validation_end(_trainer(0, {"val/aiq": 0.5, "val/mu_o": 0.1}), None)
    cb.on_validation_end(_trainer(1, {"val/aiq": 0.25}), None)
    assert trial.reports == [(0, 0.5), (1, 0.25)]
    with pytest.raises(optuna.TrialPruned, match="epoch 2"):
        cb.on_validation_end(_trainer(2, {"val/aiq": 0.125}), None)
    assert cb.reported == [(0, 0.5), (1, 0.25), (2, 0.125)]


def test_pruning_callback_warns_once_on_missing_metric():
    trial = FakeTrial(prune_after=0)
    cb = PruningCallback(trial, "val/aiq")
    with pytest.warns(UserWarning, match="val/mu_o"):
        cb.on_validation_end(_trainer(0, {"val/mu_o": 0.3}), None)
    cb.on_validation_end(_trainer(1, {"val/mu_o": 0.3}), None)  # no second warning, no prune
    assert trial.reports == []


def test_median_pruner_prunes_a_trial_below_the_median():
    study = optuna.create_study(direction="maximize", pruner=make_pruner("median"))
    for v in (0.8, 0.9, 0.7, 0.85, 0.95):  # 5 start-up trials, median at step 0 = 0.85
        t = study.ask()
        t.report(v, 0)
        study.tell(t, v)
    good = PruningCallback(study.ask(), "val/mu_o")
    good.on_validation_end(_trainer(0, {"val/mu_o": 0.86}), None)  # above the median: goes on
    bad = PruningCallback(study.ask(), "val/mu_o")
    with pytest.raises(optuna.TrialPruned):
        bad.on_validation_end(_trainer(0, {"val/mu_o": 0.84}), None)


def test_make_pruner_names():
    assert isinstance(make_pruner("hyperband"), optuna.pruners.HyperbandPruner)
    assert isinstance(make_pruner("none"), optuna.pruners.NopPruner)
    with pytest.raises(ValueError, match="median"):
        make_pruner("asha")


def _xy(trial):
    x = trial.suggest_float("x", -1.0, 1.0)
    c = trial.suggest_categorical("c", ["a", "b", "c"])
    return x * x + (c == "b")


def test_seeded_sampler_repeats_sequence_and_differs_by_trial_number():
    runs = []
    for _ in range(2):
        st = optuna.create_study(sampler=TrialSeededSampler(5, n_startup_trials=3))
        st.optimize(_xy, n_trials=5)  # 3 random start-up + 2 TPE trials
        runs.append([t.params for t in st.trials])
    assert runs[0] == runs[1]
    assert len({p["x"] for p in runs[0]}) == 5
    # the start-up draw of trial n is the draw of SeedSequence([seed, n]) (workers never share it)
    word = int(np.random.SeedSequence([5, 2]).generate_state(1, np.uint32)[0])
    solo = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=word))
    solo.optimize(_xy, n_trials=1)
    assert runs[0][2] == solo.trials[0].params
    other = optuna.create_study(sampler=TrialSeededSampler(6, n_startup_trials=3))
    other.optimize(_xy, n_trials=1)
    assert other.trials[0].params != runs[0][0]



def test_seeds_0_and_1_share_no_start_up_point():
    """``seed + n`` gave seed 1 trial n the draw of seed 0 trial n + 1: nine shared points."""
    def points(seed):
        st = optuna.create_study(sampler=TrialSeededSampler(seed, n_startup_trials=10))
        st.optimize(_xy, n_trials=10)
        return [(t.params["x"], t.params["c"]) for t in st.trials]
    a, b = points(0), points(1)
    assert len(set(a)) == 10 and len(set(b)) == 10
    assert not set(a) & set(b)
    assert points(0) == a                      # the same seed still repeats its sequence
    with pytest.raises(ValueError, match="sampler seed must be a whole number >= 0, got -1"):
        TrialSeededSampler(-1)


def test_budget_is_a_study_total_and_resumes(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    calls = []

    def objective(trial):
        calls.append(trial.number)
        return _xy(trial)

    st = open_study("b", url, direction="minimize", seed=0, pruner="none")
    assert run_study(st, objective, 3, show_progress_bar=False) == 3
    again = open_study("b", url, direction="minimize", seed=0, pruner="none")  # a second process
    assert run_study(again, objective, 3, show_progress_bar=False) == 0      # budget already spent
    assert run_study(again, objective, 5, show_progress_bar=False) == 2      # extend the total
    assert calls == [0, 1, 2, 3, 4]
    assert [t.number for t in again.trials] == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="minimize, not maximize"):
        open_study("b", url, direction="maximize")


def test_trial_numbered_past_budget_is_not_run(monkeypatch):
    st = optuna.create_study()
    st.optimize(_xy, n_trials=2)
    # a stale count (another worker created trial 1 after we looked) lets us ask once more
    monkeypatch.setattr(study_mod, "_budget_used", lambda s: 1)
    calls = []
    assert run_study(st, lambda t: calls.append(t) or 0.0, 2, show_progress_bar=False) == 0
    assert calls == []
    last = st.trials[-1]
    assert last.number == 2 and last.state == optuna.trial.TrialState.FAIL
    assert last.user_attrs["over_budget"] is True


def test_summary_table_orders_by_value_and_state():
    st = optuna.create_study(direction="maximize")
    dist = {"model.init_args.lr": optuna.distributions.FloatDistribution(0, 1)}
    for v in (0.2, 0.7):
        st.add_trial(optuna.trial.create_trial(params={"model.init_args.lr": v}, distributions=dist, value=v))
    st.add_trial(optuna.trial.create_trial(params={"model.init_args.lr": 0.5}, distributions=dist,
                                           state=optuna.trial.TrialState.PRUNED,
                                           intermediate_values={0: 0.4, 1: 0.3}))
    lines = summary_table(st).splitlines()
    assert lines[0].split() == ["trial", "state", "value", "params"]
    assert [ln.split()[:3] for ln in lines[1:]] == [["1", "COMPLETE", "0.7"], ["0", "COMPLETE", "0.2"],
                                                    ["2", "PRUNED", "0.3"]]
    assert lines[3].endswith("(epoch 1)  lr=0.5")
    assert len(summary_table(st, top=1).splitlines()) == 2


def test_plots_skip_importance_gracefully(tmp_path):
    st = optuna.create_study()
    assert write_best_config(st, tmp_path) is None  # no completed trial: nothing written
    dist = {"x": optuna.distributions.FloatDistribution(0, 1)}
    st.add_trial(optuna.trial.create_trial(params={"x": 0.5}, distributions=dist, value=1.0))
    assert [p.name for p in write_plots(st, tmp_path / "one")] == ["history.png"]
    st.add_trial(optuna.trial.create_trial(params={"x": 0.5}, distributions=dist, value=2.0))
    assert [p.name for p in write_plots(st, tmp_path / "same")] == ["history.png"]  # nothing varies
    st.add_trial(optuna.trial.create_trial(params={"x": 0.1}, distributions=dist, value=0.5))
    written = write_plots(st, tmp_path / "vary")
    assert [p.name for p in written] == ["history.png", "importance.png"]
    assert all(p.stat().st_size > 1000 for p in written)


@pytest.mark.parametrize("url,db,folders", [
    ("sqlite:///file:newdir/s.db?uri=true", "newdir/s.db", ["newdir"]),   # uri=true's file: form
    ("sqlite:///sub/../s2.db", "s2.db", []),                                # '..' taken lexically
    ("sqlite:///deep/er/s3.db", "deep/er/s3.db", ["deep", "deep/er"]),
])
def test_storage_makes_the_folder_of_the_file_sqlite_opens(tmp_path, monkeypatch, url, db, folders):
    """The folder came from the text after ':///': a 'file:newdir' folder for the uri=true
    form (and SQLite then could not open newdir/s.db), an empty 'sub' for 'sub/../s2.db'."""
    monkeypatch.chdir(tmp_path)
    study = optuna.create_study(storage=make_storage(url), study_name="s")
    study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=1)
    assert (tmp_path / db).is_file()
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_dir()) == folders
