"""``tune`` checks what it can before the first trial: the metric (against what the
objective reports; a resumed study keeps its metric), --top and --timeout; and a
configuration error raised in a trial is reported in one line, without Optuna printing its
traceback."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import optuna
import pytest

from recsys_router.cli import main
from recsys_router.tuning import TuningConfigError, tune
from recsys_router.tuning.objective import TuningConfigError as TCE
from recsys_router.tuning.study import open_study, run_study
from tuning_data import synthetic_data_config

ROOT = Path(__file__).resolve().parents[1]
KNN = ROOT / "configs" / "search" / "knn.yaml"
MF = str(ROOT / "configs" / "models" / "mf.yaml")
SYNTHETIC = str(ROOT / "configs" / "data" / "synthetic.yaml")


@pytest.fixture
def data_cfg(tmp_path):
    return synthetic_data_config(tmp_path / "data.yaml", dim=32, n_queries=200, n_llms=3, n_topics=2)


def _tune(cfg, out, metric, n):
    return tune([cfg], KNN, router="knn", n_trials=n, metric=metric, out_dir=out, seed=0,
                progress=False, plots=False)


def test_resumed_study_refuses_another_metric(tmp_path, data_cfg):
    out = tmp_path / "out"
    assert _tune(data_cfg, out, "val/aiq", 1).study.user_attrs["metric"] == "val/aiq"
    with pytest.raises(ValueError, match=r"optimises val/aiq, not val/mu_o"):
        _tune(data_cfg, out, "val/mu_o", 2)
    res = _tune(data_cfg, out, "val/aiq", 2)  # the same metric resumes
    assert len(res.study.trials) == 2 and res.n_run == 1


def test_open_study_keeps_the_first_metric():
    storage = optuna.storages.InMemoryStorage()
    open_study("s", storage, metric="val/mu_o")
    assert open_study("s", storage, metric="val/mu_o").user_attrs == {"metric": "val/mu_o"}
    with pytest.raises(ValueError, match="in InMemoryStorage optimises val/mu_o, not val/v_b"):
        open_study("s", storage, metric="val/v_b")


def test_unknown_metric_is_refused_before_any_trial(tmp_path, data_cfg, capsys):
    out = tmp_path / "out"
    assert main(["tune", "--router", "knn", "-c", str(data_cfg), "--search", str(KNN), "--metric", "val/nope",
                 "--out", str(out), "--no-plots", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == ("recsys-router tune: error: --metric 'val/nope' is not a metric a registry "
                           "router reports; expected one of ['val/mu_o', 'val/v_b', 'val/e_p', 'val/aiq']")
    assert not out.exists()
    with pytest.raises(TuningConfigError, match="is not a metric MFModule .a RouterModule. reports"):
        tune([MF, SYNTHETIC], KNN.parent / "mf.yaml", metric="val/nope", out_dir=tmp_path / "o2",
             n_trials=1, progress=False, plots=False)
    assert not (tmp_path / "o2").exists()


def test_config_error_in_a_trial_logs_no_traceback():
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.setFormatter(logging.Formatter("%(message)s"))
    lg = logging.getLogger("optuna.study._optimize")
    lg.addHandler(handler)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study = optuna.create_study()

        def objective(trial):
            raise TCE("metric 'val/aiq' was not logged; available: ['val/mu_o']")
        with pytest.raises(TCE, match="was not logged"):
            run_study(study, objective, 1, show_progress_bar=False)
    finally:
        lg.removeHandler(handler)
    text = buf.getvalue()
    assert "Trial 0 failed" in text and "was not logged" in text and "Traceback" not in text
    assert not lg.filters  # the filter is removed again


@pytest.mark.parametrize("flag,value,msg", [("--top", "-2", "expected a whole number >= 1"),
                                            ("--timeout", "-5", "expected a finite number > 0"),
                                            ("--timeout", "nan", "expected a finite number"),
                                            ("--n-trials", "0", "expected a whole number >= 1")])
def test_counts_checked_when_parsed(tmp_path, data_cfg, capsys, flag, value, msg):
    with pytest.raises(SystemExit) as ei:
        main(["tune", "--router", "knn", "-c", str(data_cfg), "--search", str(KNN), flag, value,
              "--out", str(tmp_path / "o")])
    assert ei.value.code == 2 and f"argument {flag}: {msg}" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
    with pytest.raises(ValueError, match="top must be a whole number >= 1"):
        tune([data_cfg], KNN, router="knn", top=0, out_dir=tmp_path / "o")


@pytest.mark.parametrize("metric, expect", [
    ("val/loss", "minimize"), ("train/loss", "minimize"), ("val/bpr_loss", "minimize"),
    ("val/mu_o", "maximize"), ("val/aiq", "maximize"), ("val/qnc", "minimize"),
    ("cpt50", "minimize"), ("val/nauc", "maximize")])
def test_direction_defaults_to_the_metrics(metric, expect):
    from recsys_router.metrics import DIRECTIONS
    from recsys_router.tuning.objective import metric_direction
    name = metric.rsplit("/", 1)[-1]
    declared = "lower" if name.endswith("loss") else DIRECTIONS[name]
    assert expect == {"lower": "minimize", "higher": "maximize"}[declared]
    assert metric_direction(metric) == expect
    assert metric_direction(metric, expect) == expect        # the same one, given, is fine
    other = "maximize" if expect == "minimize" else "minimize"
    with pytest.raises(TuningConfigError, match=f"--direction {other} contradicts --metric"):
        metric_direction(metric, other)


def test_a_metric_of_no_known_direction_needs_one():
    from recsys_router.tuning.objective import metric_direction
    for metric in ("val/my_custom", "val/prob_entropy"):   # unknown; declared "none"
        with pytest.raises(TuningConfigError, match="give --direction maximize or --direction"):
            metric_direction(metric)
        assert metric_direction(metric, "minimize") == "minimize"


def test_tune_minimises_a_loss_by_default(tmp_path, monkeypatch):
    """``--metric val/loss`` without ``--direction`` makes a minimising study (it maximised)."""
    import recsys_router.tuning.run as run_mod
    seen = []   # no training needed; with no completed trial tune now raises NoTrialCompleted
    monkeypatch.setattr(run_mod, "run_study", lambda study, *a, **k: seen.append(study) or 0)
    with pytest.raises(run_mod.NoTrialCompleted):
        tune([MF, SYNTHETIC], KNN.parent / "mf.yaml", metric="val/loss", out_dir=tmp_path / "o",
             n_trials=1, progress=False, plots=False)
    assert seen[0].direction == optuna.study.StudyDirection.MINIMIZE


def test_cli_refuses_maximising_a_loss_in_one_line(tmp_path, capsys):
    out = tmp_path / "out"
    rc = main(["tune", "-c", MF, "-c", SYNTHETIC, "--search", str(KNN.parent / "mf.yaml"),
               "--metric", "val/loss", "--direction", "maximize", "--out", str(out),
               "--n-trials", "1", "--no-plots", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and err.strip() == (
        "recsys-router tune: error: --direction maximize contradicts --metric 'val/loss': lower is "
        "better for it (drop --direction, or give --direction minimize)")
    assert not out.exists()
