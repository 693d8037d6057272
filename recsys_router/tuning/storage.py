"""The storage of a tuning study: opening a database URL, and failing the trials of workers
that died.

Every RDB storage (SQLite, PostgreSQL, MySQL...) runs a heartbeat: a RUNNING trial whose
heartbeat is older than the grace period is failed by the next worker and re-queued with
the same parameters (up to ``max_retry`` times). :mod:`recsys_router.tuning.study`, which
opens and runs the studies, re-exports :func:`make_storage` and the heartbeat constants
(their public path).
"""

from __future__ import annotations

import time
import warnings
from datetime import datetime

import optuna
from optuna.storages import RetryHeartbeatStaleTrialCallback
from optuna.trial import TrialState

from ..db_urls import _parse, redact_url, scrub_url, url_refusal  # redact_url: public here too
from ..sqlite_files import sqlite_file_path

__all__ = ["make_storage", "redact_url", "HEARTBEAT_INTERVAL", "HEARTBEAT_GRACE", "MAX_RETRY"]

HEARTBEAT_INTERVAL = 60   # seconds between heartbeats of a running trial
HEARTBEAT_GRACE = 180     # a RUNNING trial silent this long belongs to a dead worker
MAX_RETRY = 3             # re-runs of a trial whose worker died
_URL_FORMS = ("sqlite:///relative/path.db, sqlite:////absolute/path.db, "
              "postgresql://USER:PASSWORD@HOST/DB or mysql://USER:PASSWORD@HOST/DB")

def make_storage(url: str | None, heartbeat_interval: int = HEARTBEAT_INTERVAL,
                 grace_period: int = HEARTBEAT_GRACE, max_retry: int = MAX_RETRY):
    """An Optuna storage for ``url`` (None: in memory).

    SQLite (``sqlite:///rel.db``, ``sqlite:////abs/path.db``) gets a 60 s lock timeout and its
    folder created. Every RDB URL (SQLite, PostgreSQL, MySQL...) gets a heartbeat every
    ``heartbeat_interval`` seconds: a trial whose heartbeat is older than ``grace_period``
    seconds is failed by the next worker and re-queued with its parameters, at most
    ``max_retry`` times (:class:`optuna.storages.RetryHeartbeatStaleTrialCallback`).
    """
    if url is None:
        return None
    if not isinstance(url, str) or "://" not in url:
        raise ValueError(f"--storage must be a database URL ({_URL_FORMS}), got "
                         f"{redact_url(url)}")
    for name, value in (("heartbeat interval", heartbeat_interval), ("heartbeat grace", grace_period)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a whole number of seconds >= 1, got {value!r}")
    if grace_period <= heartbeat_interval:
        raise ValueError(f"heartbeat grace ({grace_period} s) must be longer than the heartbeat "
                         f"interval ({heartbeat_interval} s)")
    shown = redact_url(url)  # never the password: errors and logs end up in CI logs and bug reports
    parsed = _parse(url)
    if parsed is None:
        raise ValueError(f"--storage {shown!r}: not a database URL SQLAlchemy can parse; "
                         f"expected {_URL_FORMS}")
    refusal = url_refusal(url)  # the driver would read part of the password as host or database
    if refusal:
        raise ValueError(f"--storage {shown!r}: {refusal}")
    engine_kwargs = {}
    if url.startswith("sqlite"):
        engine_kwargs = {"connect_args": {"timeout": 60}}
        path = sqlite_file_path(url)  # the file SQLite opens (uri=true's file: form, '..' lexically)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
    from sqlalchemy.exc import ArgumentError, SQLAlchemyError

    for attempt in range(6):  # workers starting together race to create the schema: retry
        try:
            with warnings.catch_warnings():  # heartbeat_interval is flagged experimental
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return optuna.storages.RDBStorage(
                    url, engine_kwargs=engine_kwargs, heartbeat_interval=heartbeat_interval,
                    grace_period=grace_period,
                    heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=max_retry))
        except (ArgumentError, ImportError) as exc:  # not a URL it can open: retrying cannot help
            what = "its database driver is not installed" if isinstance(exc, ImportError) else \
                "not a database URL SQLAlchemy can open"
            raise ValueError(f"--storage {shown!r}: {what} ({type(exc).__name__}: "
                             f"{scrub_url(str(exc), url)[:200]}); expected {_URL_FORMS}") from None
        except SQLAlchemyError as exc:
            if attempt == 5:  # the driver's message may quote the connection string
                raise ValueError(f"--storage {shown!r}: cannot open the database "
                                 f"({type(exc).__name__}: {scrub_url(str(exc), url)[:500]})") from None
            time.sleep(0.5 * (attempt + 1))


def _heartbeat(study) -> bool:
    from optuna.storages._heartbeat import is_heartbeat_enabled
    return is_heartbeat_enabled(study._storage)


def _fail_stale(study) -> None:
    """Fail (and re-queue) RUNNING trials of dead workers: Optuna's check for trials whose
    heartbeat stopped, plus trials that never beat at all (killed between creation and their
    first heartbeat) and started longer than the grace period ago."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)
    storage = study._storage
    rdb = getattr(storage, "_backend", storage)  # create_study wraps the RDB storage in a cache
    grace = getattr(rdb, "grace_period", None)
    if grace is None or not hasattr(rdb, "scoped_session"):
        return
    from optuna.storages._rdb import models
    from optuna.storages._rdb.storage import _create_scoped_session
    now = datetime.now()  # datetime_start is the creating worker's local time
    with _create_scoped_session(rdb.scoped_session) as session:
        silent = [t.trial_id for t in session.query(models.TrialModel)
                  .filter(models.TrialModel.state == TrialState.RUNNING,
                          models.TrialModel.study_id == study._study_id).all()
                  if not t.heartbeats and t.datetime_start is not None
                  and (now - t.datetime_start).total_seconds() > grace]
    callback = storage.get_heartbeat_stale_trial_callback()
    for trial_id in silent:
        try:
            if not storage.set_trial_state_values(trial_id, state=TrialState.FAIL):
                continue
        except optuna.exceptions.UpdateFinishedTrialError:  # another worker got there first
            continue
        if callback is not None:
            callback(study, storage.get_trial(trial_id))
