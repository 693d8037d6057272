"""Studies: storage, seeded sampler, pruners and the shared trial budget.

Several processes that open the same storage URL and study name share one study; the
``n_trials`` budget is a study total, so a killed or repeated run continues where it stopped.
"""

from __future__ import annotations

import logging
import time
import warnings
from pathlib import Path

import optuna
from optuna.samplers import BaseSampler, TPESampler

__all__ = ["TrialSeededSampler", "make_storage", "make_pruner", "open_study", "run_study",
           "OverBudget", "PRUNERS"]

log = logging.getLogger(__name__)
PRUNERS = ("median", "hyperband", "none")


class OverBudget(RuntimeError):
    """Raised for a trial numbered past the study budget (two workers asked at once)."""


class TrialSeededSampler(BaseSampler):
    """TPE whose random state is reset to ``seed + trial.number`` before every trial.

    The sample of a trial is then a function of the seed, its number and the finished
    trials only: one worker with the same seed repeats the same sequence, and concurrent
    workers (different trial numbers) never draw the same random start-up points.

    Parameters
    ----------
    seed : int
    **tpe_options
        Passed to :class:`optuna.samplers.TPESampler` (``n_startup_trials``...).

    Example
    -------
    >>> s = TrialSeededSampler(3, n_startup_trials=2)
    >>> study = optuna.create_study(sampler=s)
    >>> study.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    >>> a = [t.params["x"] for t in study.trials]
    >>> study2 = optuna.create_study(sampler=TrialSeededSampler(3, n_startup_trials=2))
    >>> study2.optimize(lambda t: t.suggest_float("x", 0, 1), n_trials=2)
    >>> a == [t.params["x"] for t in study2.trials]
    True
    """

    def __init__(self, seed: int = 0, **tpe_options):
        self.seed = int(seed)
        self.tpe_options = dict(tpe_options)
        self._inner = TPESampler(seed=self.seed, **self.tpe_options)

    def before_trial(self, study, trial) -> None:
        self._inner = TPESampler(seed=self.seed + int(trial.number), **self.tpe_options)
        self._inner.before_trial(study, trial)

    def infer_relative_search_space(self, study, trial):
        return self._inner.infer_relative_search_space(study, trial)

    def sample_relative(self, study, trial, search_space):
        return self._inner.sample_relative(study, trial, search_space)

    def sample_independent(self, study, trial, param_name, param_distribution):
        return self._inner.sample_independent(study, trial, param_name, param_distribution)

    def after_trial(self, study, trial, state, values) -> None:
        self._inner.after_trial(study, trial, state, values)

    def reseed_rng(self) -> None:
        self._inner.reseed_rng()


def make_storage(url: str | None):
    """An Optuna storage for ``url`` (None: in memory).

    SQLite (``sqlite:///rel.db``, ``sqlite:////abs/path.db``) gets a 60 s lock timeout and its
    folder created; every RDB URL (PostgreSQL, MySQL...) gets a heartbeat, so trials of a
    killed process are marked FAIL once they miss it for 3 minutes.
    """
    if url is None:
        return None
    if not isinstance(url, str) or "://" not in url:
        raise ValueError(f"--storage must be a database URL such as sqlite:///studies.db, got {url!r}")
    engine_kwargs = {}
    if url.startswith("sqlite"):
        engine_kwargs = {"connect_args": {"timeout": 60}}
        path = url.split(":///", 1)[1] if ":///" in url else ""
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
    from sqlalchemy.exc import SQLAlchemyError

    for attempt in range(6):  # workers starting together race to create the schema: retry
        try:
            with warnings.catch_warnings():  # heartbeat_interval is flagged experimental
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs,
                                                  heartbeat_interval=60, grace_period=180)
        except SQLAlchemyError:
            if attempt == 5:
                raise
            time.sleep(0.5 * (attempt + 1))


def make_pruner(name: str):
    """``median`` (MedianPruner, 5 start-up trials), ``hyperband`` (epochs as resource) or ``none``."""
    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=0)
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner(min_resource=1, max_resource="auto", reduction_factor=3)
    if name == "none":
        return optuna.pruners.NopPruner()
    raise ValueError(f"pruner must be one of {list(PRUNERS)}, got {name!r}")


def open_study(study_name: str, storage=None, direction: str = "maximize", seed: int = 0,
               pruner: str = "median") -> optuna.Study:
    """Create the study, or load it when the storage already has one of that name.

    Raises
    ------
    ValueError
        An existing study optimises in the other direction.
    """
    if direction not in ("maximize", "minimize"):
        raise ValueError(f"direction must be 'maximize' or 'minimize', got {direction!r}")
    study = optuna.create_study(study_name=study_name, storage=make_storage(storage)
                                if isinstance(storage, str) or storage is None else storage,
                                direction=direction, sampler=TrialSeededSampler(seed),
                                pruner=make_pruner(pruner), load_if_exists=True)
    have = study.direction.name.lower()
    if have != direction:
        raise ValueError(f"study {study_name!r} in {storage} was created to {have}, not {direction}")
    return study


def _budget_used(study) -> int:
    return len(study.get_trials(deepcopy=False))


def run_study(study: optuna.Study, objective, n_trials: int, timeout: float | None = None,
              show_progress_bar: bool = True, catch=()) -> int:
    """Run trials until the study holds ``n_trials`` trials (a total over every worker).

    Parameters
    ----------
    study : optuna.Study
    objective : callable
        ``objective(trial) -> float``.
    n_trials : int
        Study total: trials of every state, earlier runs and other workers included. A trial
        whose number is ``>= n_trials`` (two workers asked in the same instant) is not run:
        it is recorded FAIL with the user attribute ``over_budget``.
    timeout : float, optional
        Seconds for this process.
    show_progress_bar : bool
    catch : tuple of exception types
        Exceptions that fail one trial without stopping the study.

    Returns
    -------
    int
        Trials run by this call.
    """
    if n_trials < 1:
        raise ValueError(f"n_trials must be >= 1, got {n_trials}")
    remaining = n_trials - _budget_used(study)
    if remaining <= 0:
        log.warning("study %r already has %d trials (budget %d): nothing to run", study.study_name,
                    _budget_used(study), n_trials)
        return 0
    ran = []

    def guarded(trial):
        if trial.number >= n_trials:
            trial.set_user_attr("over_budget", True)
            raise OverBudget(f"trial {trial.number} is past the budget of {n_trials} trials")
        ran.append(trial.number)
        return objective(trial)

    def stop_when_spent(study, _trial):
        if _budget_used(study) >= n_trials:
            study.stop()

    study.optimize(guarded, n_trials=remaining, timeout=timeout, callbacks=[stop_when_spent],
                   catch=(OverBudget, *catch), show_progress_bar=show_progress_bar)
    return len(ran)

