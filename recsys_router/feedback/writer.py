"""The decision log's background writer: batches of decision rows committed off the request path.

A request only appends to an in-memory queue (:meth:`DecisionWriter.submit`); a thread
commits a batch when it reaches ``batch_size`` rows or ``flush_ms`` after its first row. A
batch whose insert fails because the database is locked or unreachable (or any other driver
error) is retried ``WRITE_ATTEMPTS - 1`` times with exponential back-off and then dropped. A
batch the database refuses for a value in it (:func:`is_value_error`: a PostgreSQL
``DataError`` such as a NUL character in a text, a duplicate key, a value the driver cannot
bind) is split in halves, each committed on its own, so that only the rows refused alone are
dropped: one bad request never loses the decisions of the others. Every failure is counted
(:meth:`DecisionWriter.status`) for ``GET /health`` and ``GET /metrics``.
"""

from __future__ import annotations

import queue
import threading
import time
import warnings
from typing import TYPE_CHECKING

import sqlalchemy as sa

if TYPE_CHECKING:  # pragma: no cover
    from .store import DecisionLog

__all__ = ["WRITE_ATTEMPTS", "MAX_PENDING", "DecisionWriter", "LogFull", "describe_error", "is_value_error"]

#: attempts to insert one batch of decisions before it is dropped (counted, not silent)
WRITE_ATTEMPTS = 5
_BACKOFF_S = 0.05  # first retry delay; doubles per attempt
#: most decision rows queued for the log by default (``max_pending``); a batch holds at most
#: this many (``serve --log-batch`` is checked against it when the command line is parsed)
MAX_PENDING = 10_000


class LogFull(RuntimeError):
    """The decision queue is full (the database is not keeping up or is unreachable)."""


def describe_error(exc: BaseException, limit: int = 300) -> str:
    """A short, shareable description of a write error: the exception type and the driver's
    first message line, without the SQL statement or its parameters (which hold query text).

    Example
    -------
    >>> import sqlalchemy as sa
    >>> describe_error(sa.exc.OperationalError("INSERT ...", {"q": "secret"}, Exception("database is locked")))
    'OperationalError: database is locked'
    """
    orig = getattr(exc, "orig", None)
    msg = str(orig if orig is not None else exc).strip().splitlines()
    first = msg[0] if msg else ""
    if "[SQL:" in first or "[parameters:" in first:
        first = first.split("[SQL:")[0].split("[parameters:")[0].strip()
    return f"{type(exc).__name__}: {first}"[:limit]


def is_value_error(exc: BaseException) -> bool:
    """Whether ``exc`` says the database (or its driver) refused a value of the statement, as
    opposed to being unavailable: a ``DataError`` (PostgreSQL: a NUL character in a text, a
    number out of range), or a value that could not be bound (``StatementError`` without a
    driver error, or a bare ``ValueError``/``TypeError``/``OverflowError``, such as SQLite's
    ``UnicodeEncodeError`` for a lone surrogate). Retrying the same value fails the same way.

    Example
    -------
    >>> is_value_error(sa.exc.DataError("INSERT ...", {}, Exception("NUL (0x00) bytes")))
    True
    >>> is_value_error(sa.exc.OperationalError("INSERT ...", {}, Exception("database is locked")))
    False
    """
    if isinstance(exc, sa.exc.DataError):
        return True
    if isinstance(exc, sa.exc.DBAPIError):  # operational, interface, internal, ...: not the value
        return False
    if isinstance(exc, sa.exc.StatementError):
        return isinstance(exc.orig, (ValueError, TypeError, OverflowError))
    return isinstance(exc, (ValueError, TypeError, OverflowError))


def _refused_rows(exc: BaseException) -> bool:
    """A refused value or a duplicate key: a fault of some rows, not of the database."""
    return is_value_error(exc) or isinstance(exc, sa.exc.IntegrityError)


class DecisionWriter:
    """Batches decision rows and commits them from a background thread.

    Parameters
    ----------
    log : DecisionLog
        Anything with ``insert_decisions(rows)`` (:class:`recsys_router.feedback.store.DecisionLog`).
    batch_size : int
        Commit as soon as this many rows are queued.
    flush_ms : float
        ... or this long after the oldest queued row arrived.
    max_pending : int
        Most rows queued; :meth:`submit` raises :class:`LogFull` beyond it.
    """

    def __init__(self, log: DecisionLog, batch_size: int = 256, flush_ms: float = 200.0,
                 max_pending: int = MAX_PENDING):
        if batch_size < 1 or flush_ms <= 0 or max_pending < batch_size:
            raise ValueError(f"need batch_size >= 1, flush_ms > 0 and max_pending >= batch_size, got "
                             f"batch_size={batch_size!r}, flush_ms={flush_ms!r}, "
                             f"max_pending={max_pending!r}")
        self.log, self.batch_size, self.flush_s = log, int(batch_size), float(flush_ms) / 1000.0
        self._q: queue.Queue = queue.Queue(maxsize=int(max_pending))
        self._pending: set[str] = set()
        self._dropped_ids: dict[str, None] = {}   # the latest max_pending dropped, oldest first
        self._lock = threading.Lock()
        self._closed = False
        self._abandoned = False    # close() gave up waiting: the rest is dropped, not tried
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

    def was_dropped(self, decision_id: str) -> bool:
        """Whether this writer dropped ``decision_id`` (one of its latest ``max_pending``
        dropped decisions): it is not in the log and never will be."""
        with self._lock:
            return decision_id in self._dropped_ids

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
            if stop or self._abandoned:   # close() gave up (its stop mark may not have fit)
                self._drain()
                return

    def _insert(self, batch: list[dict]) -> BaseException | None:
        """Insert ``batch``; None once it is committed, else the last error. An unavailable
        database is retried with back-off (up to ``WRITE_ATTEMPTS`` inserts); a refused value
        or duplicate key is not (the same rows fail the same way)."""
        last: BaseException | None = None
        for attempt in range(WRITE_ATTEMPTS):
            if self._abandoned:
                return last or LogFull("the decision log was closed before this batch was written")
            try:
                self.log.insert_decisions(batch)
                return None
            except Exception as exc:  # noqa: BLE001 - locked, connection lost, a driver bug: the
                # writer thread must survive any of them, and each one is counted
                with self._lock:
                    self.failed_attempts += 1
                    self.failing = True
                    self.last_error, self.last_error_at = describe_error(exc), time.time()
                last = exc
                if _refused_rows(exc):
                    return exc
                if attempt < WRITE_ATTEMPTS - 1:
                    time.sleep(_BACKOFF_S * 2 ** attempt)
        return last

    def _commit(self, batch: list[dict]) -> None:
        err = self._insert(batch)
        if err is not None and len(batch) > 1 and _refused_rows(err):
            # a row of the batch was refused: commit the halves on their own, so only the
            # rows refused alone are dropped (log2(batch) extra inserts per bad row)
            mid = len(batch) // 2
            self._commit(batch[:mid])
            self._commit(batch[mid:])
            return
        with self._lock:
            if err is None:
                self.written += len(batch)
                self.failing = False
            else:
                self.dropped += len(batch)
                for r in batch:
                    self._dropped_ids[r["decision_id"]] = None
                while len(self._dropped_ids) > self._q.maxsize:
                    del self._dropped_ids[next(iter(self._dropped_ids))]
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

    def close(self, timeout: float | None = None) -> int:
        """Commit everything queued and stop the thread (idempotent). With ``timeout``, wait
        at most that many seconds: rows still uncommitted then are given up (never tried
        again; the thread, a daemon, ends once the attempt it is in ends, which may still
        commit the batch the database is holding, and counts the rest as dropped) and a
        ``RuntimeWarning`` says how many. Returns the number of rows uncommitted when the
        wait ended."""
        if self._closed:
            return 0
        self._closed = True
        end = None if timeout is None else time.monotonic() + timeout
        try:   # a full queue makes room only as batches commit: the put counts in the timeout
            self._q.put(None, timeout=timeout)
        except queue.Full:
            pass
        self._thread.join(None if end is None else max(0.0, end - time.monotonic()))
        if not self._thread.is_alive():
            return 0
        with self._lock:
            self._abandoned = True
            lost = len(self._pending)
        warnings.warn(f"decision log: {lost} queued decision(s) were not committed within "
                      f"{timeout:g} s of shutdown (the database did not take them); the batch "
                      "the database is holding may still be written, the others are not logged",
                      RuntimeWarning, stacklevel=2)
        return lost
