"""The decision log: every routing decision and its feedback in a SQL database.

Any SQLAlchemy URL works; ``sqlite:///path.db`` (the default kind, put in WAL mode so
readers never block the writer) suits one service process, ``postgresql+psycopg://...``
several processes logging to one database. A bare path is taken as a SQLite file.

Tables (schema version :data:`SCHEMA_VERSION`, stored in ``rr_meta``)::

    rr_decisions  decision_id (PK), created_at (unix s), instance, artifact_sha, policy,
                  policy_value, explore, candidates (JSON list), chosen, propensity,
                  probs (JSON: LLM -> choice probability), scores, costs (JSON: LLM -> value),
                  query_text, query_hash
    rr_feedback   decision_id (PK, FK), created_at, score, thumbs, cost, latency_ms

Decisions are written by a background thread in batches (:class:`DecisionWriter`): a
request only appends to an in-memory queue. A batch is committed when it reaches
``batch_size`` rows or ``flush_ms`` after its first row, whichever is first; ``close()``
commits everything queued. So a clean shutdown loses nothing, and a ``kill -9`` loses at
most the decisions of the last ``flush_ms`` milliseconds, never more than
``max_pending`` rows (a request finding the queue full gets an error instead of being
logged silently late). A batch whose insert fails is retried :data:`WRITE_ATTEMPTS` - 1
times with exponential back-off (0.05, 0.1, 0.2, 0.4 s) and then dropped: at most
``batch_size`` decisions per failed batch, each counted (:meth:`DecisionWriter.status`:
failed attempts, dropped and rejected decisions, the last error, the queue depth), which
the service shows in ``GET /health`` and ``GET /metrics``. Feedback is written synchronously, one transaction per request, so
its answer (404 unknown id, 409 duplicate) is exact.
"""

from __future__ import annotations

import hashlib
import json
import queue
import threading
import time
import uuid

import pandas as pd
import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

__all__ = ["SCHEMA_VERSION", "WRITE_ATTEMPTS", "DecisionLog", "DecisionWriter", "LogFull", "UnknownDecision",
           "DuplicateFeedback", "describe_error", "normalise_url", "new_decision_id", "text_hash"]

SCHEMA_VERSION = 1
#: attempts to insert one batch of decisions before it is dropped (counted, not silent)
WRITE_ATTEMPTS = 5
_BACKOFF_S = 0.05  # first retry delay; doubles per attempt
_META = sa.MetaData()
META_T = sa.Table("rr_meta", _META, sa.Column("key", sa.String(64), primary_key=True),
                  sa.Column("value", sa.String(256), nullable=False))
DECISIONS_T = sa.Table(
    "rr_decisions", _META,
    sa.Column("decision_id", sa.String(64), primary_key=True),
    sa.Column("created_at", sa.Float, nullable=False, index=True),
    sa.Column("instance", sa.String(128)),
    sa.Column("artifact_sha", sa.String(128)),
    sa.Column("policy", sa.String(32), nullable=False),
    sa.Column("policy_value", sa.Float),
    sa.Column("explore", sa.String(64), nullable=False),
    sa.Column("candidates", sa.Text, nullable=False),
    sa.Column("chosen", sa.String(512), nullable=False),
    sa.Column("propensity", sa.Float, nullable=False),
    sa.Column("probs", sa.Text, nullable=False),
    sa.Column("scores", sa.Text, nullable=False),
    sa.Column("costs", sa.Text),
    sa.Column("query_text", sa.Text),
    sa.Column("query_hash", sa.String(64)),
)
FEEDBACK_T = sa.Table(
    "rr_feedback", _META,
    sa.Column("decision_id", sa.String(64), sa.ForeignKey("rr_decisions.decision_id"),
              primary_key=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("score", sa.Float),
    sa.Column("thumbs", sa.String(8)),
    sa.Column("cost", sa.Float),
    sa.Column("latency_ms", sa.Float),
)


class LogFull(RuntimeError):
    """The decision queue is full (the database is not keeping up or is unreachable)."""


class UnknownDecision(KeyError):
    """Feedback for a decision id that the log does not hold."""


class DuplicateFeedback(ValueError):
    """A second feedback for the same decision."""


def normalise_url(url: str) -> str:
    """A SQLAlchemy URL from ``--log-db`` (a bare path becomes a SQLite file URL;
    ``postgresql://`` uses the psycopg 3 driver).

    Example
    -------
    >>> normalise_url("logs/decisions.db"), normalise_url("postgresql://u@h/db")
    ('sqlite:///logs/decisions.db', 'postgresql+psycopg://u@h/db')
    """
    url = str(url).strip()
    if not url:
        raise ValueError("--log-db: empty database URL")
    if "://" not in url:
        return f"sqlite:///{url}"
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def new_decision_id() -> str:
    """A fresh random decision id (32 hex digits)."""
    return uuid.uuid4().hex


def text_hash(text: str) -> str:
    """SHA-256 of a query text (what ``--log-text hash`` stores)."""
    return hashlib.sha256(str(text).encode("utf-8")).hexdigest()


class DecisionLog:
    """Connection to the decision-log database (creates and checks the schema).

    Parameters
    ----------
    url : str
        SQLAlchemy URL or SQLite path.

    Example
    -------
    >>> log = DecisionLog("sqlite://")         # in-memory
    >>> log.schema_version
    1
    """

    def __init__(self, url: str):
        self.url = normalise_url(url)
        kw: dict = {}
        if self.url.startswith("sqlite"):
            kw["connect_args"] = {"check_same_thread": False, "timeout": 30}
            if self.url in ("sqlite://", "sqlite:///:memory:"):
                kw["poolclass"] = sa.pool.StaticPool
        try:
            self.engine = sa.create_engine(self.url, future=True, **kw)
        except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError, ImportError) as exc:
            raise ValueError(f"--log-db {url!r}: not a usable database URL ({exc})") from exc
        if self.engine.dialect.name == "sqlite":
            sa.event.listen(self.engine, "connect", _sqlite_pragmas)
        try:
            self._init_schema()
        except sa.exc.OperationalError as exc:
            raise ValueError(f"--log-db {url!r}: cannot open the database "
                             f"({str(exc.orig).strip()})") from exc

    def _init_schema(self) -> None:
        with self.engine.begin() as conn:
            _META.create_all(conn, checkfirst=True)
            row = conn.execute(sa.select(META_T.c.value).where(META_T.c.key == "schema_version")).first()
            if row is None:
                try:
                    with conn.begin_nested():
                        conn.execute(META_T.insert().values(key="schema_version",
                                                            value=str(SCHEMA_VERSION)))
                except IntegrityError:  # another process created it at the same moment
                    row = conn.execute(sa.select(META_T.c.value)
                                       .where(META_T.c.key == "schema_version")).first()
            if row is not None and row[0] != str(SCHEMA_VERSION):
                raise ValueError(f"{self.url}: decision log has schema version {row[0]}; this "
                                 f"package reads version {SCHEMA_VERSION}")
        self.schema_version = SCHEMA_VERSION

    # ------------------------------------------------------------------ decisions
    def insert_decisions(self, rows: list[dict]) -> None:
        """Insert decision rows in one transaction."""
        if rows:
            with self.engine.begin() as conn:
                conn.execute(DECISIONS_T.insert(), rows)

    def has_decision(self, decision_id: str) -> bool:
        with self.engine.connect() as conn:
            return conn.execute(sa.select(DECISIONS_T.c.decision_id)
                                .where(DECISIONS_T.c.decision_id == decision_id)).first() is not None

    # ------------------------------------------------------------------ feedback
    def add_feedback(self, decision_id: str, *, score: float | None = None, thumbs: str | None = None,
                     cost: float | None = None, latency_ms: float | None = None) -> dict:
        """Record the outcome of a decision.

        Raises
        ------
        UnknownDecision
            No such decision in the database.
        DuplicateFeedback
            The decision already has feedback.
        """
        if (score is None) == (thumbs is None):
            raise ValueError("give exactly one of 'score' (in [0, 1]) or 'thumbs' (up|down)")
        if score is not None and not 0.0 <= float(score) <= 1.0:
            raise ValueError(f"score must be in [0, 1], got {score!r}")
        if thumbs is not None and thumbs not in ("up", "down"):
            raise ValueError(f"thumbs must be 'up' or 'down', got {thumbs!r}")
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
                raise DuplicateFeedback(decision_id) from None
        return row

    # ------------------------------------------------------------------ reading
    def read(self, *, with_feedback_only: bool = False) -> pd.DataFrame:
        """Decisions joined with their feedback, one row per decision, oldest first."""
        j = DECISIONS_T.outerjoin(FEEDBACK_T, DECISIONS_T.c.decision_id == FEEDBACK_T.c.decision_id)
        fb = [FEEDBACK_T.c.score.label("feedback_score"), FEEDBACK_T.c.thumbs,
              FEEDBACK_T.c.cost.label("feedback_cost"), FEEDBACK_T.c.latency_ms,
              FEEDBACK_T.c.created_at.label("feedback_at")]
        q = sa.select(*DECISIONS_T.c, *fb).select_from(j).order_by(DECISIONS_T.c.created_at,
                                                                    DECISIONS_T.c.decision_id)
        if with_feedback_only:
            q = q.where(FEEDBACK_T.c.decision_id.is_not(None))
        with self.engine.connect() as conn:
            return pd.DataFrame(conn.execute(q).mappings().all(),
                                columns=[c.name for c in DECISIONS_T.c] + [c.name for c in fb])

    def counts(self) -> tuple[int, int]:
        """(number of decisions, number of feedback rows)."""
        with self.engine.connect() as conn:
            return (conn.execute(sa.select(sa.func.count()).select_from(DECISIONS_T)).scalar_one(),
                    conn.execute(sa.select(sa.func.count()).select_from(FEEDBACK_T)).scalar_one())

    def dispose(self) -> None:
        self.engine.dispose()


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


def describe_error(exc: BaseException, limit: int = 300) -> str:
    """A short, shareable description of a write error: the exception type and the driver's
    first message line, without the SQL statement or its parameters (which hold query text).

    Example
    -------
    >>> describe_error(sa.exc.OperationalError("INSERT ...", {"q": "secret"}, Exception("database is locked")))
    'OperationalError: database is locked'
    """
    orig = getattr(exc, "orig", None)
    msg = str(orig if orig is not None else exc).strip().splitlines()
    first = msg[0] if msg else ""
    if "[SQL:" in first or "[parameters:" in first:
        first = first.split("[SQL:")[0].split("[parameters:")[0].strip()
    return f"{type(exc).__name__}: {first}"[:limit]


def decision_row(*, decision_id: str, instance: str, artifact_sha: str | None, policy: str,
                 policy_value: float | None, explore: str, candidates: list[str], chosen: str,
                 propensity: float, probs: dict, scores: dict, costs: dict | None, text: str,
                 log_text: str) -> dict:
    """One ``rr_decisions`` row (JSON-encodes the per-LLM fields; keeps the text as
    ``log_text`` says: ``full``, ``hash`` or ``none``)."""
    return {"decision_id": decision_id, "created_at": time.time(), "instance": instance,
            "artifact_sha": artifact_sha, "policy": policy,
            "policy_value": None if policy_value is None else float(policy_value),
            "explore": explore, "candidates": json.dumps(list(candidates)), "chosen": chosen,
            "propensity": float(propensity), "probs": json.dumps(probs), "scores": json.dumps(scores),
            "costs": None if costs is None else json.dumps(costs),
            "query_text": text if log_text == "full" else None,
            "query_hash": text_hash(text) if log_text in ("full", "hash") else None}


class DecisionWriter:
    """Batches decision rows and commits them from a background thread.

    Parameters
    ----------
    log : DecisionLog
    batch_size : int
        Commit as soon as this many rows are queued.
    flush_ms : float
        ... or this long after the oldest queued row arrived.
    max_pending : int
        Most rows queued; :meth:`submit` raises :class:`LogFull` beyond it.
    """

    def __init__(self, log: DecisionLog, batch_size: int = 256, flush_ms: float = 200.0,
                 max_pending: int = 10_000):
        if batch_size < 1 or flush_ms <= 0 or max_pending < batch_size:
            raise ValueError("need batch_size >= 1, flush_ms > 0 and max_pending >= batch_size")
        self.log, self.batch_size, self.flush_s = log, int(batch_size), float(flush_ms) / 1000.0
        self._q: queue.Queue = queue.Queue(maxsize=int(max_pending))
        self._pending: set[str] = set()
        self._lock = threading.Lock()
        self._closed = False
        self.written = 0
        self.failed_attempts = 0   # inserts that raised (each retry counts)
        self.dropped = 0           # decisions given up after WRITE_ATTEMPTS failed inserts
        self.rejected = 0          # decisions refused at submit (queue full or closed)
        self.failing = False       # whether the latest insert attempt failed
        self.last_error: str | None = None
        self.last_error_at: float | None = None
        self._thread = threading.Thread(target=self._run, name="decision-writer", daemon=True)
        self._thread.start()

    def submit(self, rows: list[dict]) -> None:
        """Queue rows (all or none) for the next batch."""
        if self._closed:
            with self._lock:
                self.rejected += len(rows)
            raise LogFull("the decision log is closed")
        with self._lock:
            if self._q.qsize() + len(rows) > self._q.maxsize:
                self.rejected += len(rows)
                raise LogFull(f"decision log queue is full ({self._q.maxsize} rows waiting); "
                              "the database is not keeping up")
            for r in rows:
                self._pending.add(r["decision_id"])
                self._q.put_nowait(r)

    def is_pending(self, decision_id: str) -> bool:
        """Whether a decision is queued here but not yet committed."""
        with self._lock:
            return decision_id in self._pending

    def _run(self) -> None:
        while True:
            first = self._q.get()
            if first is None:
                return
            batch, deadline, stop = [first], time.monotonic() + self.flush_s, False
            while len(batch) < self.batch_size:
                try:
                    item = self._q.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
                batch.append(item)
            self._commit(batch)
            if stop:
                self._drain()
                return

    def _commit(self, batch: list[dict]) -> None:
        ok = False
        for attempt in range(WRITE_ATTEMPTS):
            try:
                self.log.insert_decisions(batch)
                ok = True
                break
            except Exception as exc:  # noqa: BLE001 - locked, connection lost, a driver bug: the
                # writer thread must survive any of them, and each one is counted
                with self._lock:
                    self.failed_attempts += 1
                    self.failing = True
                    self.last_error, self.last_error_at = describe_error(exc), time.time()
                if attempt < WRITE_ATTEMPTS - 1:
                    time.sleep(_BACKOFF_S * 2 ** attempt)
        with self._lock:
            if ok:
                self.written += len(batch)
                self.failing = False
            else:
                self.dropped += len(batch)
            # dropped rows are no longer pending: feedback on them is an honest 404
            self._pending.difference_update(r["decision_id"] for r in batch)

    def status(self) -> dict:
        """Counters of the writer: ``written``, ``failed_attempts``, ``dropped``,
        ``rejected`` (refused with a 503, so never served unlogged), ``queued`` (rows waiting),
        ``failing``, ``last_error``, ``last_error_at`` and ``writer_alive``; ``ok`` is False
        once a decision was dropped (this instance's log has a gap: until restart), while
        inserts are failing, or when the writer thread has died."""
        with self._lock:
            out = {"written": self.written, "failed_attempts": self.failed_attempts,
                   "dropped": self.dropped, "rejected": self.rejected, "queued": self._q.qsize(),
                   "failing": self.failing, "last_error": self.last_error,
                   "last_error_at": self.last_error_at,
                   "writer_alive": self._thread.is_alive() or self._closed}
        out["ok"] = not out["failing"] and out["dropped"] == 0 and out["writer_alive"]
        return out

    def _drain(self) -> None:
        rest = []
        while True:
            try:
                item = self._q.get_nowait()
            except queue.Empty:
                break
            if item is not None:
                rest.append(item)
        for s in range(0, len(rest), self.batch_size):
            self._commit(rest[s:s + self.batch_size])

    def flush(self, timeout: float = 30.0) -> None:
        """Wait until every row queued so far is committed."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self._lock:
                if not self._pending:
                    return
            time.sleep(0.005)
        raise TimeoutError(f"decision log: rows still queued after {timeout} s")

    def close(self) -> None:
        """Commit everything queued and stop the thread (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._q.put(None)
        self._thread.join()
