"""The decision log: every routing decision and its feedback in a SQL database.

Any SQLAlchemy URL works; ``sqlite:///path.db`` (the default kind, put in WAL mode so
readers never block the writer) suits one service process, ``postgresql+psycopg://...``
several processes logging to one database. A bare path is taken as a SQLite file.

Tables (schema version :data:`SCHEMA_VERSION`, stored in ``rr_meta``; declared in
:mod:`~recsys_router.feedback.log_tables`)::

    rr_decisions  decision_id (PK), created_at (unix s), instance, artifact_sha, policy,
                  policy_value, explore, candidates (JSON list), chosen (TEXT: an LLM name
                  of any length; an older PostgreSQL log's VARCHAR(512) is widened when a
                  writer opens it), propensity,
                  probs (JSON: LLM -> choice probability), scores, costs (JSON: LLM -> value),
                  query_text, query_hash, task (the query's task label, when the request
                  gave one; added to an older log when a writer opens it)
    rr_feedback   decision_id (PK, FK), created_at, score, thumbs, cost, latency_ms

Decisions are written by a background thread in batches
(:class:`~recsys_router.feedback.writer.DecisionWriter`): a request only appends to an
in-memory queue. A batch is committed when it reaches ``batch_size`` rows or ``flush_ms``
after its first row, whichever is first; ``close()`` commits everything queued. So a clean
shutdown loses nothing, and a ``kill -9`` loses at most the decisions of the last
``flush_ms`` milliseconds, never more than ``max_pending`` rows (a request finding the queue
full gets an error instead of being logged silently late). A batch whose insert fails is
retried ``WRITE_ATTEMPTS - 1`` (4) times with exponential back-off (0.05, 0.1, 0.2, 0.4 s)
and then dropped: at most ``batch_size`` decisions per failed batch (a batch the database
refuses for a value in it, such as a NUL character PostgreSQL cannot store, is split until
only the refused rows are dropped), each counted
(``DecisionWriter.status``: failed attempts, dropped and rejected decisions, the last error,
the queue depth), which the service shows in ``GET /health`` and ``GET /metrics``. Feedback
is written synchronously, one transaction per request, so
its answer (not in the log, 409 duplicate) is exact.
"""

from __future__ import annotations

import math
import numbers
import time
import warnings
from urllib.parse import quote

import pandas as pd
import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from ..db_urls import redact_url, scrub_url, url_refusal
from ..errors import DataValidationError
from ..sqlite_files import read_only_engine, sqlite_file_path
from .db_deadline import CallDeadline, bounded, engine_options
from .log_tables import (DECISIONS_T, FEEDBACK_T, META_T, METADATA as _META, SCHEMA_LOCK_KEY,
                         SCHEMA_VERSION, TEXT_COLUMNS)
from .log_rows import decision_row, new_decision_id, text_hash
from .logged import feedback_error
from .writer import MAX_PENDING, WRITE_ATTEMPTS, DecisionWriter, LogFull, describe_error, is_value_error

__all__ = ["SCHEMA_VERSION", "ALTER_LOCK_TIMEOUT", "SCHEMA_LOCK_KEY", "TEXT_COLUMNS", "WRITE_ATTEMPTS",
           "MAX_PENDING", "DecisionLog", "DecisionWriter", "LogFull", "UnknownDecision", "DuplicateFeedback",
           "MissingLog", "describe_error", "is_value_error", "normalise_url", "new_decision_id", "text_hash",
           "decision_row"]

#: longest wait of PostgreSQL's ``ALTER TABLE`` migrating an older log (adding
#: its ``task`` column, widening its ``chosen`` column)
ALTER_LOCK_TIMEOUT = "3s"


class UnknownDecision(KeyError):
    """Feedback for a decision id that the log does not hold."""


class DuplicateFeedback(ValueError):
    """A second feedback for the same decision."""


class MissingLog(FileNotFoundError, ValueError):
    """A reader's SQLite decision log that does not exist (a log is read, never created)."""


def normalise_url(url: str, flag: str = "--log-db") -> str:
    """A SQLAlchemy URL from ``--log-db`` (a bare path becomes a SQLite file URL;
    ``postgresql://`` uses the psycopg 3 driver).

    Example
    -------
    >>> normalise_url("logs/decisions.db"), normalise_url("postgresql://u@h/db")
    ('sqlite:///logs/decisions.db', 'postgresql+psycopg://u@h/db')
    >>> normalise_url("log?v=2.db")
    'sqlite:///log%3Fv%3D2.db'
    """
    url = str(url).strip()
    if not url:
        raise ValueError(f"{flag}: empty database URL")
    if "://" not in url:  # a file name as it is: '?', '%' or '#' are its characters, not a query
        try:
            return "sqlite:///" + quote(url, safe="/\\:~")
        except UnicodeEncodeError:  # a name of bytes that are not UTF-8 (a lone surrogate here)
            raise ValueError(f"{flag} {url!r}: the file name is not UTF-8 text; give the log a "
                             "name that is") from None
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


class DecisionLog:
    """Connection to the decision-log database (creates and checks the schema).

    Parameters
    ----------
    url : str
        SQLAlchemy URL or SQLite path.
    read_only : bool
        Read the log only (``ope --log``, ``log export``): nothing is created or migrated, so a
        read replica or a read-only role serves; a missing log is an error.
    flag : str
        The option named by errors (``--log-db``, ``--log``, ``--db``).
    timeout_s : float, optional
        Time limit of every call to a PostgreSQL log: connecting, waiting for a pooled
        connection, each method's statements (server-side ``statement_timeout`` and a
        client-side deadline, :mod:`~recsys_router.feedback.db_deadline`); a call past it
        raises ``OperationalError`` (no answer within the limit). None: no limit (readers).

    Example
    -------
    >>> log = DecisionLog("sqlite://")         # in-memory
    >>> log.schema_version
    1
    """

    def __init__(self, url: str, *, read_only: bool = False, flag: str = "--log-db",
                 timeout_s: float | None = None):
        self.url = normalise_url(url, flag)
        self.read_only = bool(read_only)
        #: the URL as errors show it: never its password or query values (a bare path as typed)
        bare = "://" not in str(url)
        self.shown = f"sqlite:///{str(url).strip()}" if bare else redact_url(self.url)
        self.flag = flag
        refusal = url_refusal(self.url)  # the driver would read part of the password as the host
        if refusal:
            raise ValueError(f"{flag} {self.shown!r}: {refusal}")
        kw: dict = {}
        #: bounds every call to a PostgreSQL log when ``timeout_s`` is given (else None)
        self.deadline: CallDeadline | None = None
        bound = timeout_s is not None and self.url.startswith("postgresql")
        if bound:
            kw.update(engine_options(self.url, timeout_s))
        if self.url.startswith("sqlite"):
            kw["connect_args"] = {"check_same_thread": False, "timeout": 30}
            if self.url in ("sqlite://", "sqlite:///:memory:"):
                kw["poolclass"] = sa.pool.StaticPool
        #: a reader of a SQLite file opens it with SQLite's read-only mode (``immutable`` where
        #: a WAL log's side files cannot be made: a read-only folder or mount)
        self.immutable = False
        path = sqlite_file_path(self.url) if self.read_only else None
        try:
            if path is not None:
                self.engine = self._read_only_engine(path)
            else:
                self.engine = sa.create_engine(self.url, future=True, **kw)
        except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError, ImportError) as exc:
            raise ValueError(f"{flag} {self.shown!r}: not a usable database URL "
                             f"({scrub_url(str(exc), self.url)})") from None
        if self.engine.dialect.name == "sqlite" and path is None:
            sa.event.listen(self.engine, "connect", _sqlite_pragmas)
        if bound:
            self.deadline = CallDeadline(self.engine, timeout_s)
        try:
            if self.read_only:
                self._check_schema()
            else:
                self._init_schema()
        except sa.exc.DBAPIError as exc:  # cannot connect, read-only, no permission, ...
            self.dispose()
            raise ValueError(f"{flag} {self.shown!r}: cannot open the database "
                             f"({scrub_url(str(exc.orig).strip(), self.url)})") from None

    def _read_only_engine(self, path):
        """An engine reading the SQLite file ``path`` that can never write it (no journal
        mode switch, no checkpoint of a ``-wal`` beside it, no file created)."""
        if not path.is_file():   # as SQLite will open it (sqlite_file_path)
            raise MissingLog(f"{self.flag} {self.shown!r}: no such SQLite file (a decision log is "
                             "read, never created here)")
        try:
            engine, self.immutable = read_only_engine(path, "serve --log-db")
        except DataValidationError as exc:
            raise ValueError(f"{self.flag} {self.shown!r}: {exc}") from None
        return engine

    def _columns(self) -> set[str]:
        return {c["name"] for c in sa.inspect(self.engine).get_columns("rr_decisions")}

    def _check_version(self, conn) -> None:
        row = conn.execute(sa.select(META_T.c.value).where(META_T.c.key == "schema_version")).first()
        if row is not None and row[0] != str(SCHEMA_VERSION):
            raise ValueError(f"{self.shown}: decision log has schema version {row[0]}; this "
                             f"package reads version {SCHEMA_VERSION}")

    def _check_schema(self) -> None:
        """Reader: the log must exist; nothing is created or altered (a replica, a read-only
        role or file serves readers); an older log without ``task`` reads as untasked."""
        tables = set(sa.inspect(self.engine).get_table_names())
        missing = [t for t in ("rr_decisions", "rr_feedback") if t not in tables]
        if missing:
            self.engine.dispose()
            raise ValueError(f"{self.flag} {self.shown!r}: not a decision log (no table "
                             f"{', '.join(missing)}; a log is written by serve --log-db)")
        if "rr_meta" in tables:
            with self.engine.connect() as conn:
                self._check_version(conn)
        self.has_task_column = "task" in self._columns()
        self.schema_version = SCHEMA_VERSION

    @bounded
    def _init_schema(self) -> None:
        with self.engine.begin() as conn:
            if self.engine.dialect.name == "postgresql":
                # instances opening an empty log at once: checkfirst looks before its CREATEs,
                # so each would create the tables (a duplicate pg_type row failed all but one);
                # this lock, held until the commit, makes them take turns
                conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK_KEY})
            _META.create_all(conn, checkfirst=True)
            row = conn.execute(sa.select(META_T.c.value).where(META_T.c.key == "schema_version")).first()
            if row is None:
                try:
                    with conn.begin_nested():
                        conn.execute(META_T.insert().values(key="schema_version",
                                                            value=str(SCHEMA_VERSION)))
                except IntegrityError:  # another process created it at the same moment
                    pass
            self._check_version(conn)
        self.has_task_column = self._add_task_column()
        self._widen_chosen()
        self.schema_version = SCHEMA_VERSION

    @bounded
    def _add_task_column(self) -> bool:
        """Give a log written before the ``task`` column its column (nullable: its rows have
        no task); an older package still reads and writes the log, naming its own columns.

        On PostgreSQL the ``ALTER TABLE`` waits at most :data:`ALTER_LOCK_TIMEOUT` for its
        lock (a long read of the log holds it off, and every writer would queue behind a
        waiting ALTER). When the column cannot be added (the lock, no permission), the log
        is written without task labels and a warning says so; the next start tries again.
        Returns whether the column exists."""
        if "task" in self._columns():
            return True
        try:
            with self.engine.begin() as conn:
                if self.engine.dialect.name == "postgresql":
                    conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{ALTER_LOCK_TIMEOUT}'")
                conn.exec_driver_sql("ALTER TABLE rr_decisions ADD COLUMN task VARCHAR(1000)")
        except sa.exc.DBAPIError as exc:  # another process added it at the same moment, or not
            if "task" in self._columns():
                return True
            warnings.warn(f"{self.shown}: the decision log has no 'task' column and it could not "
                          f"be added ({scrub_url(describe_error(exc), self.url)}); decisions are "
                          "logged without their task labels until a restart adds it",
                          RuntimeWarning, stacklevel=3)
            return False
        return True

    @bounded
    def _widen_chosen(self) -> None:
        """Give an older PostgreSQL log's ``chosen`` column (``VARCHAR(512)``, which refused,
        so dropped, every decision for an LLM whose name is longer) the type ``TEXT``, as a
        new log has; the change rewrites no row. Its lock is waited for as in
        :meth:`_add_task_column`; when it cannot be had, a warning says so and the next start
        tries again. SQLite ignores declared lengths: nothing to change there."""
        if self.engine.dialect.name != "postgresql":
            return
        kind = {c["name"]: c["type"] for c in sa.inspect(self.engine).get_columns("rr_decisions")}
        length = getattr(kind.get("chosen"), "length", None)
        if length is None:
            return
        try:
            with self.engine.begin() as conn:
                conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{ALTER_LOCK_TIMEOUT}'")
                conn.exec_driver_sql("ALTER TABLE rr_decisions ALTER COLUMN chosen TYPE TEXT")
        except sa.exc.DBAPIError as exc:
            why = scrub_url(describe_error(exc), self.url)
            warnings.warn(f"{self.shown}: the decision log's 'chosen' column holds at most {length} "
                          f"characters and could not be widened ({why}); "
                          "a decision for an LLM with a longer name is dropped (counted in GET "
                          "/health) until a restart widens it", RuntimeWarning, stacklevel=3)

    # ------------------------------------------------------------------ decisions
    @bounded
    def insert_decisions(self, rows: list[dict]) -> None:
        """Insert decision rows in one transaction (a log without the ``task`` column, which
        could not be added, gets them without it)."""
        if rows and not self.has_task_column:
            rows = [{k: v for k, v in r.items() if k != "task"} for r in rows]
        if rows:
            with self.engine.begin() as conn:
                conn.execute(DECISIONS_T.insert(), rows)

    @bounded
    def has_decision(self, decision_id: str) -> bool:
        with self.engine.connect() as conn:
            return conn.execute(sa.select(DECISIONS_T.c.decision_id)
                                .where(DECISIONS_T.c.decision_id == decision_id)).first() is not None

    # ------------------------------------------------------------------ feedback
    @bounded
    def add_feedback(self, decision_id: str, *, score: float | None = None, thumbs: str | None = None,
                     cost: float | None = None, latency_ms: float | None = None) -> dict:
        """Record the outcome of a decision.

        Raises
        ------
        UnknownDecision
            No such decision in the database.
        DuplicateFeedback
            The decision already has other feedback. The same feedback again (equal score,
            thumbs, cost and latency: a client's retry after a 503 whose write went through)
            is no error: the stored row is returned with ``repeated`` True.
        """
        if (score is None) == (thumbs is None):
            raise ValueError("give exactly one of 'score' (in [0, 1]) or 'thumbs' (up|down)")
        err = feedback_error(score=score, thumbs=thumbs)   # the rule log_to_data applies too
        if err:
            raise ValueError(err)
        for name, v in (("cost", cost), ("latency_ms", latency_ms)):   # as POST /feedback
            if v is not None and not (isinstance(v, numbers.Real) and not isinstance(v, bool)
                                      and math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a finite number >= 0 or None, got {v!r}")
        row = {"decision_id": decision_id, "created_at": time.time(),
               "score": None if score is None else float(score), "thumbs": thumbs,
               "cost": None if cost is None else float(cost),
               "latency_ms": None if latency_ms is None else float(latency_ms)}
        with self.engine.begin() as conn:
            if conn.execute(sa.select(DECISIONS_T.c.decision_id)
                            .where(DECISIONS_T.c.decision_id == decision_id)).first() is None:
                raise UnknownDecision(decision_id)
            try:
                with conn.begin_nested():
                    conn.execute(FEEDBACK_T.insert().values(**row))
            except IntegrityError:
                cols = ("score", "thumbs", "cost", "latency_ms")
                old = conn.execute(sa.select(*(FEEDBACK_T.c[k] for k in cols + ("created_at",)))
                                   .where(FEEDBACK_T.c.decision_id == decision_id)).first()
                if old is None or any(old[i] != row[k] for i, k in enumerate(cols)):
                    raise DuplicateFeedback(decision_id) from None
                return {**row, "created_at": old[-1], "repeated": True}
        return {**row, "repeated": False}

    # ------------------------------------------------------------------ reading
    @bounded
    def read(self, *, with_feedback_only: bool = False) -> pd.DataFrame:
        """Decisions joined with their feedback, one row per decision, oldest first."""
        j = DECISIONS_T.outerjoin(FEEDBACK_T, DECISIONS_T.c.decision_id == FEEDBACK_T.c.decision_id)
        fb = [FEEDBACK_T.c.score.label("feedback_score"), FEEDBACK_T.c.thumbs,
              FEEDBACK_T.c.cost.label("feedback_cost"), FEEDBACK_T.c.latency_ms,
              FEEDBACK_T.c.created_at.label("feedback_at")]
        # an older log (read, never altered, by a reader) has no task column: none is selected
        dec = [c for c in DECISIONS_T.c if c.name != "task" or self.has_task_column]
        q = sa.select(*dec, *fb).select_from(j).order_by(DECISIONS_T.c.created_at,
                                                          DECISIONS_T.c.decision_id)
        if with_feedback_only:
            q = q.where(FEEDBACK_T.c.decision_id.is_not(None))
        with self.engine.connect() as conn:
            return pd.DataFrame(conn.execute(q).mappings().all(),
                                columns=[c.name for c in DECISIONS_T.c] + [c.name for c in fb])

    @bounded
    def counts(self) -> tuple[int, int]:
        """(number of decisions, number of feedback rows)."""
        with self.engine.connect() as conn:
            return (conn.execute(sa.select(sa.func.count()).select_from(DECISIONS_T)).scalar_one(),
                    conn.execute(sa.select(sa.func.count()).select_from(FEEDBACK_T)).scalar_one())

    def dispose(self) -> None:
        if self.deadline is not None:
            self.deadline.stop()
        self.engine.dispose()


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()
