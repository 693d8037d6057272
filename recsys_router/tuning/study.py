"""Studies: storage, seeded sampler, pruners and the shared trial budget.

Several processes that open the same storage URL and study name share one study; the
``n_trials`` budget is a study total, so a killed or repeated run continues where it stopped.

A worker killed mid-trial leaves its trial RUNNING. Every RDB storage runs a heartbeat: a
RUNNING trial whose heartbeat is older than the grace period is failed by the next worker,
re-queued once more with the same parameters (up to ``max_retry`` times), and does not count
toward the budget; a worker that has spent the budget waits for RUNNING trials of other
workers to finish or go stale, so the study ends with every trial done.
"""

from __future__ import annotations

import logging
import time

import numpy as np
import optuna
from optuna.samplers import BaseSampler, TPESampler
from optuna.trial import TrialState

from .identity import IDENTITY_KEYS, _check_identity, _refuse_foreign, own_trial, study_identity
# the storage and the heartbeat of dead workers' trials; re-exported here (their public path)
from .storage import (HEARTBEAT_GRACE, HEARTBEAT_INTERVAL, MAX_RETRY, _fail_stale, _heartbeat,
                      make_storage, redact_url)

__all__ = ["TrialSeededSampler", "make_storage", "make_pruner", "open_study", "run_study",
           "OverBudget", "PRUNERS", "HEARTBEAT_INTERVAL", "HEARTBEAT_GRACE", "MAX_RETRY",
           "IDENTITY_KEYS", "study_identity", "own_trial", "trial_seed", "redact_url"]

log = logging.getLogger(__name__)
PRUNERS = ("median", "hyperband", "none")


class OverBudget(RuntimeError):
    """Raised for a trial numbered past the study budget (two workers asked at once)."""


def trial_seed(seed: int, number: int) -> int:
    """The sampler seed of trial ``number`` of a study seeded with ``seed``: a 32-bit word of
    ``numpy.random.SeedSequence([seed, number])``, so that distinct ``(seed, number)`` pairs
    give unrelated streams.

    Example
    -------
    >>> trial_seed(0, 7) == trial_seed(7, 0), trial_seed(0, 7) == trial_seed(0, 7)
    (False, True)
    """
    return int(np.random.SeedSequence([int(seed), int(number)]).generate_state(1, np.uint32)[0])


class TrialSeededSampler(BaseSampler):
    """TPE whose random state is reset before every trial to :func:`trial_seed` of
    ``(seed, trial.number)``.

    The sample of a trial is then a function of the seed, its number and the finished
    trials only: one worker with the same seed repeats the same sequence, concurrent
    workers (different trial numbers) never draw the same random start-up points, and
    neither do studies with different seeds (``seed + number`` gave trial ``n`` of seed 7
    the draw of trial ``n + 7`` of seed 0).

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
        if isinstance(seed, bool) or int(seed) != seed or seed < 0:
            raise ValueError(f"sampler seed must be a whole number >= 0, got {seed!r}")
        self.seed = int(seed)
        self.tpe_options = dict(tpe_options)
        self._inner = TPESampler(seed=self.seed, **self.tpe_options)

    def before_trial(self, study, trial) -> None:
        self._inner = TPESampler(seed=trial_seed(self.seed, trial.number), **self.tpe_options)
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
               pruner: str = "median", heartbeat_interval: int = HEARTBEAT_INTERVAL,
               grace_period: int = HEARTBEAT_GRACE, metric: str | None = None,
               identity: dict[str, str] | None = None,
               search_keys=None) -> optuna.Study:
    """Create the study, or load it when the storage already has one of that name.

    A storage URL is opened with :func:`make_storage` (``heartbeat_interval`` and
    ``grace_period`` in seconds). With ``metric``, the study remembers what it optimises
    (user attribute ``metric``, set by the first worker) and refuses another (two workers
    that create the study in the same instant with different metrics are not caught).

    With ``identity`` (user attributes :data:`IDENTITY_KEYS`: the router or model tuned, a
    hash of the search space, a hash of the configs and the fingerprint of the data's
    train/val splits), the study remembers what its trials
    tune and refuses a run of anything else: its trials would be mixed with theirs. A study
    that has trials but none of these attributes is accepted (with a logged warning, and gets
    this run's attributes) only when it looks like one of an older recsys-router: every
    finished trial carries the trial attributes ``config`` and ``overrides`` this tool
    records, some trial carries them, and no trial has a parameter outside ``search_keys``.
    Any other such study (made by another tool) is refused, and nothing is written to it.

    Parameters
    ----------
    study_name : str
    storage : str, optuna storage or None
        URL (see :func:`make_storage`), a storage object, or None (in memory).
    direction : {"maximize", "minimize"}
    seed : int
        Sampler seed (:class:`TrialSeededSampler`).
    pruner : {"median", "hyperband", "none"}
    heartbeat_interval, grace_period : int
        Seconds (RDB URLs only).
    metric : str, optional
        What the study optimises.
    identity : dict, optional
        ``{"router": ..., "search_space_hash": ..., "config_hash": ...}`` (and optionally
        ``"data_fingerprint"``), from :func:`study_identity`.
    search_keys : iterable of str, optional
        The search space's keys (Optuna parameter names), for the check of a study without
        ``identity`` attributes (not checked when None).

    Returns
    -------
    optuna.Study

    Raises
    ------
    ValueError
        An existing study optimises in the other direction or another metric, tunes
        another router, search space or configs, or was made by another tool.

    Example
    -------
    >>> st = optuna.storages.InMemoryStorage()
    >>> _ = open_study("s", st, identity={"router": "knn", "search_space_hash": "a",
    ...                                   "config_hash": "b"})
    >>> open_study("s", st, identity={"router": "svm", "search_space_hash": "a",
    ...                               "config_hash": "b"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: study 's' in InMemoryStorage was created for another run: router knn, not svm; ...
    """
    if direction not in ("maximize", "minimize"):
        raise ValueError(f"direction must be 'maximize' or 'minimize', got {direction!r}")
    # shown in every refusal below: never with the URL's password
    where = redact_url(storage) if isinstance(storage, str) else "in-memory storage" \
        if storage is None else type(storage).__name__
    if isinstance(storage, str) or storage is None:
        storage = make_storage(storage, heartbeat_interval, grace_period)
    existed = study_name in optuna.get_all_study_names(storage)
    study = optuna.create_study(study_name=study_name, storage=storage,
                                direction=direction, sampler=TrialSeededSampler(seed),
                                pruner=make_pruner(pruner), load_if_exists=True)
    have = study.direction.name.lower()
    if have != direction:
        raise ValueError(f"study {study_name!r} in {where} was created to {have}, not {direction}")
    if identity:  # before anything is written to the study
        _refuse_foreign(study, identity, search_keys, study_name, where)
    if metric is not None:
        stored = study.user_attrs.get("metric")
        if stored is None:
            study.set_user_attr("metric", metric)
            stored = study.user_attrs["metric"]  # read back from the storage
        if stored != metric:
            raise ValueError(f"study {study_name!r} in {where} optimises {stored}, not {metric}; "
                             "its trials' values cannot be compared with another metric (use "
                             "another --study-name or --storage)")
    if identity:
        _check_identity(study, identity, study_name, where)
    study.created_here = not existed   # tune removes only a study it made (and left empty)
    return study


def _spent(trials) -> list:
    """Trials that use the budget: all but those re-queued after their worker died (listed in
    a retry's ``retry_history``) and those refused as past the budget."""
    retried = {n for t in trials for n in t.system_attrs.get("retry_history", ())}
    return [t for t in trials if t.number not in retried and not t.user_attrs.get("over_budget")]


def _budget_used(study) -> int:
    return len(_spent(study.get_trials(deepcopy=False)))


def _count(study, state) -> int:
    return len(study.get_trials(deepcopy=False, states=(state,)))


def _todo(study, n_trials: int) -> int:
    """Trials still to run: new ones up to the budget plus queued retries (WAITING trials
    count as spent, but someone has to run them)."""
    return max(0, n_trials - _budget_used(study)) + _count(study, TrialState.WAITING)


def run_study(study: optuna.Study, objective, n_trials: int, timeout: float | None = None,
              show_progress_bar: bool = True, catch=()) -> int:
    """Run trials until the study holds ``n_trials`` finished trials (over every worker).

    Parameters
    ----------
    study : optuna.Study
    objective : callable
        ``objective(trial) -> float``.
    n_trials : int
        Study total: trials of every state, earlier runs and other workers included, except
        trials of dead workers that were re-queued (they are replaced by their retry). A trial
        preceded by ``n_trials`` such trials (two workers asked in the same instant) is not
        run: it is recorded FAIL with the user attribute ``over_budget``. With a heartbeat
        (RDB storage), a worker whose budget is spent while other trials still run waits for
        them (polling at most every 5 s) and runs the retries of those that go stale.
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
    if timeout is not None and not timeout > 0:
        raise ValueError(f"timeout must be a number of seconds > 0, got {timeout}")
    heartbeat = _heartbeat(study)
    if heartbeat:
        _fail_stale(study)
    if _todo(study, n_trials) == 0 and not (heartbeat and _count(study, TrialState.RUNNING)):
        log.warning("study %r already has %d trials (budget %d): nothing to run", study.study_name,
                    _budget_used(study), n_trials)
        return 0
    ran = []

    def guarded(trial):
        trials = study.get_trials(deepcopy=False)
        before = sum(1 for t in _spent(trials) if t.number < trial.number)
        if before >= n_trials:
            trial.set_user_attr("over_budget", True)
            raise OverBudget(f"trial {trial.number} is past the budget of {n_trials} trials")
        ran.append(trial.number)
        return objective(trial)

    def stop_when_spent(study, _trial):
        if _todo(study, n_trials) == 0:
            study.stop()

    quiet = _NoTraceback()  # the tool reports these errors itself, in one line
    optuna_log = logging.getLogger("optuna.study._optimize")
    optuna_log.addFilter(quiet)
    try:
        return _run(study, guarded, stop_when_spent, ran, n_trials, timeout, heartbeat,
                    show_progress_bar, catch)
    finally:
        optuna_log.removeFilter(quiet)


class _NoTraceback(logging.Filter):
    """Drop the traceback of Optuna's 'Trial N failed' warning when the error is one the tool
    reports itself (a bad configuration: the command's one-line error; a trial refused past
    the budget): the warning keeps its one-line message. A trial whose training crashed
    (:class:`~recsys_router.tuning.objective.TrialFailed`) keeps its traceback."""

    def __init__(self):
        super().__init__()
        from .objective import TuningConfigError  # noqa: PLC0415
        self.types = (TuningConfigError, OverBudget)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], self.types):
            record.exc_info = record.exc_text = None
        return True


def _run(study, guarded, stop_when_spent, ran, n_trials, timeout, heartbeat, show_progress_bar,
         catch) -> int:
    """The worker loop of :func:`run_study`."""
    start = time.monotonic()
    rdb = getattr(study._storage, "_backend", study._storage)
    poll = max(0.2, min(5.0, float(getattr(rdb, "heartbeat_interval", None) or 5)))
    while True:
        left = None if timeout is None else timeout - (time.monotonic() - start)
        if left is not None and left <= 0:
            break
        if heartbeat:
            _fail_stale(study)
        todo = _todo(study, n_trials)
        if todo > 0:
            n_before = len(ran)
            study.optimize(guarded, n_trials=todo, timeout=left, callbacks=[stop_when_spent],
                           catch=(OverBudget, *catch), show_progress_bar=show_progress_bar)
            if len(ran) > n_before:
                continue
            break  # every trial asked for was past the budget: other workers have it
        if not (heartbeat and _count(study, TrialState.RUNNING)):
            break
        time.sleep(poll)  # other workers' trials: wait until they finish or go stale
    return len(ran)
