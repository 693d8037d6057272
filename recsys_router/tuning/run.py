"""``tune()``: one worker of a (possibly shared) hyperparameter study, end to end."""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path

import optuna
from optuna.trial import TrialState

from .objective import (LightningObjective, RouterObjective, TrialFailed, merge_yaml_configs,
                        metric_direction)
from .report import summary_table, write_best_config, write_plots, write_trials_csv
from .space import load_search_space
from .study import HEARTBEAT_GRACE, HEARTBEAT_INTERVAL, open_study, run_study, study_identity

__all__ = ["tune", "TuneResult", "NoTrialCompleted", "default_storage", "check_study_name",
           "MAX_STUDY_NAME"]

log = logging.getLogger(__name__)


@dataclass
class TuneResult:
    """What :func:`tune` did.

    Attributes
    ----------
    study : optuna.Study
    n_run : int
        Trials this worker ran.
    out_dir : Path
    best_config : Path or None
        ``out_dir/best_config.yaml`` (None when no completed trial is one of this tool's;
        with no completed trial at all :func:`tune` raises :class:`NoTrialCompleted`).
    plots : list of Path
    summary : str
        The summary table.
    """

    study: optuna.Study
    n_run: int
    out_dir: Path
    best_config: Path | None
    plots: list[Path] = field(default_factory=list)
    summary: str = ""


def default_storage(out_dir) -> str:
    """``sqlite:///<out_dir>/study.db`` (absolute paths give the four-slash form)."""
    return f"sqlite:///{Path(out_dir) / 'study.db'}"


#: longest study name (Optuna's RDB storages keep 512 characters)
MAX_STUDY_NAME = 512


def check_study_name(name: str, names_out: bool) -> str:
    """``name`` when it can name a study: a string of 1 to :data:`MAX_STUDY_NAME` characters
    without NUL or other control characters; when it also names the default ``--out`` folder
    (``names_out``), without ``/``, ``\\`` or ``..`` and not ``.``, so that the folder stays
    one level under ``tuning/``.

    Example
    -------
    >>> check_study_name("mf-rb", True)
    'mf-rb'
    >>> check_study_name("../x", True)
    Traceback (most recent call last):
    ...
    ValueError: --study-name '../x' names the default --out folder tuning/STUDY: it may not hold '/', '\\' or '..' (give --out, or another --study-name)
    """
    if not isinstance(name, str) or not name or len(name) > MAX_STUDY_NAME:
        raise ValueError(f"--study-name must be 1 to {MAX_STUDY_NAME} characters, got "
                         f"{str(name)[:40]!r}{'...' if len(str(name)) > 40 else ''}")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise ValueError(f"--study-name {name[:80]!r} holds a NUL or other control character")
    if names_out and ("/" in name or "\\" in name or ".." in name or name == "."):
        raise ValueError(f"--study-name {name[:80]!r} names the default --out folder tuning/STUDY: "
                         "it may not hold '/', '\\' or '..' (give --out, or another --study-name)")
    return name


def tune(configs, search, *, router: str | None = None, n_trials: int = 20,
         metric: str = "val/mu_o", direction: str | None = None, storage: str | None = None,
         study_name: str | None = None, timeout: float | None = None, seed: int = 0,
         pruner: str = "median", out_dir=None, overrides=(), top: int = 10,
         progress: bool = True, plots: bool = True, heartbeat_interval: int = HEARTBEAT_INTERVAL,
         heartbeat_grace: int = HEARTBEAT_GRACE) -> TuneResult:
    """Run one tuning worker and write the study's results.

    Parameters
    ----------
    configs : list of path
        LightningCLI configs (model + data), or for a registry router an optional router
        config plus a data config.
    search : path
        Search-space YAML (schema: :mod:`recsys_router.tuning`).
    router : str, optional
        Tune this registry router instead of a Lightning model (also implied by a
        ``router:`` key in the configs).
    n_trials : int
        Study total over every worker and earlier run (see :func:`run_study`).
    metric : str
        Validation metric to optimise (``val/mu_o``, ``val/aiq``, ``val/loss``...), checked
        before the first trial against what the objective reports; a study remembers it and
        a resumed study refuses another.
    direction : {"maximize", "minimize"}, optional
        Default: the metric's (:func:`~recsys_router.tuning.objective.metric_direction`:
        names ending in ``loss`` are minimised, registry metrics such as ``val/mu_o`` go their
        declared way; any other metric needs one). A direction that contradicts the
        metric's is refused.
    storage : str, optional
        Optuna storage URL (default :func:`default_storage` of ``out_dir``).
    study_name : str, optional
        Default: the search file's stem. Never holds NUL or control characters, nor (when it
        names the default ``out_dir``) ``/``, ``\\`` or ``..`` (:func:`check_study_name`). A study that exists in ``storage`` is resumed only
        for the same router (or model class), search space and configs (``overrides``
        included): it records them when created (:func:`~recsys_router.tuning.study.open_study`)
        and refuses a run of anything else.
    timeout : float, optional
        Seconds for this worker.
    seed : int
        Sampler seed; trial ``n`` of a Lightning model also trains with
        ``seed_everything = trial_seed(seed, n)``; a registry router trains with its
        config's ``params.seed`` (its default when not given) in every trial.
    pruner : {"median", "hyperband", "none"}
        Lightning models only (router fits have no epochs to prune on).
    out_dir : path, optional
        Default ``tuning/<study_name>``.
    overrides : list of str
        Extra LightningCLI arguments for every trial.
    top : int
        Rows of the summary table.
    progress, plots : bool
        Optuna's progress bar; PNG plots.
    heartbeat_interval, heartbeat_grace : int
        Seconds between heartbeats of a running trial, and the silence after which a RUNNING
        trial counts as its worker's death: it is then failed, re-queued with its parameters
        and does not count toward ``n_trials`` (see :func:`run_study`).

    Returns
    -------
    TuneResult

    Raises
    ------
    NoTrialCompleted
        No trial of the study completed: no ``best_config.yaml`` is written (``trials.csv``
        is), and a study this run created is removed from the storage.
    TuningConfigError, ValueError
        A config, search space, storage or study refused; refused before the study is opened
        when the configs (built once from the search space's first values) or the data fail.
    """
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise ValueError(f"top must be a whole number >= 1, got {top!r}")
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout must be a number of seconds > 0, got {timeout}")
    space = load_search_space(search)
    study_name = check_study_name(study_name or Path(search).stem, names_out=out_dir is None)
    out = Path(out_dir) if out_dir is not None else Path("tuning") / study_name
    if out.exists() and not out.is_dir() or out.is_symlink() and not out.exists():
        raise ValueError(f"--out {out} exists and is not a folder; tune writes best_config.yaml, "
                         "trials.csv, plots and trial folders into a folder: choose another --out")
    merged = merge_yaml_configs(configs)
    is_router = router is not None or "router" in merged
    if is_router:
        if overrides:
            raise ValueError(f"extra LightningCLI arguments {list(overrides)} do not apply to "
                             "registry routers; put them in the search space or the configs")
        objective = RouterObjective(router, configs, space, metric)
        tuned = objective.router
    else:
        objective = LightningObjective(configs, space, metric, out, seed=seed, overrides=overrides,
                                       prune=pruner != "none")
        model = merged.get("model")
        tuned = model.get("class_path", "model") if isinstance(model, dict) else "model"
    direction = metric_direction(metric, direction)  # after the objective checked the metric
    # the configs built once and the data loaded, before any study exists: a config every
    # trial would fail on is refused here, writing nothing
    fingerprint = objective.preflight()
    identity = study_identity(
        tuned, [asdict(p) for p in space.params],  # the file as parsed above
        {"configs": {k: v for k, v in merged.items() if k != "router"},
         "overrides": list(overrides)}, data=fingerprint)
    storage = storage or default_storage(out)  # SQLite makes the folder of its file (out)
    study = open_study(study_name, storage, direction=direction, seed=seed,
                       pruner="none" if is_router else pruner,
                       heartbeat_interval=heartbeat_interval, grace_period=heartbeat_grace,
                       metric=metric, identity=identity, search_keys=space.keys)
    # made by this run, with no earlier run's or other worker's trials (a study made before,
    # e.g. by `optuna create-study` for several workers, is never removed)
    fresh = getattr(study, "created_here", False) and not study.get_trials(deepcopy=False)
    out.mkdir(parents=True, exist_ok=True)  # after the checks above: a refused run makes nothing
    try:
        n_run = run_study(study, objective, n_trials, timeout=timeout, show_progress_bar=progress,
                          catch=(TrialFailed,))
    except Exception:
        _drop_unfinished(study, fresh, study.get_trials())  # the fixed rerun is not refused
        raise
    trials = study.get_trials()
    if not any(t.state == TrialState.COMPLETE for t in trials):
        write_trials_csv(study, out)
        dropped = _drop_unfinished(study, fresh, trials)
        raise NoTrialCompleted(_no_trial_message(study.study_name, trials, dropped, out))
    summary = summary_table(study, top=top)
    best = write_best_config(study, out, metric)
    write_trials_csv(study, out)
    written = write_plots(study, out) if plots else []
    return TuneResult(study, n_run, out, best, written, summary)


class NoTrialCompleted(ValueError):
    """Every trial of the study failed (or was pruned): there is no best config."""


def _drop_unfinished(study: optuna.Study, fresh: bool, trials) -> bool:
    """Delete ``study`` from its storage when this run created it (``fresh``: it had no trial
    when opened) and it holds no completed, running or queued trial: it records this run's
    configs, search space and data, and would refuse the corrected rerun as another run's.
    Returns whether it was deleted."""
    if not fresh:
        return False
    if any(t.state in (TrialState.COMPLETE, TrialState.RUNNING, TrialState.WAITING) for t in trials):
        return False  # another worker's trial: the study is in use
    try:
        optuna.delete_study(study_name=study.study_name, storage=study._storage)
    except Exception as exc:  # noqa: BLE001 - the error that stopped the run is the one to show
        log.warning("could not remove the failed study %r: %s", study.study_name, exc)
        return False
    return True


def _no_trial_message(name: str, trials, dropped: bool, out: Path) -> str:
    """Why ``tune`` wrote no best config: the trials' states, the first trial error, what
    became of the study."""
    errors = [t for t in trials if t.user_attrs.get("error")]
    first = f"; trial {errors[0].number}: {errors[0].user_attrs['error']}" if errors else ""
    then = ("the study was removed from the storage, so a rerun with the mistake fixed starts a "
            "new one" if dropped else "the study keeps them")
    states = ", ".join(sorted({t.state.name for t in trials}))
    return (f"no trial of study {name!r} completed ({len(trials)} trials"
            f"{': ' + states if trials else ''}{first[:600]}): no best config "
            f"written (trials.csv in {out} lists them); {then}")
