"""Client-side time limits for the decision log's calls to a network database (PostgreSQL).

A server that accepts connections and then stops answering (a frozen host, a network
partition) would hold every call forever: the server-side ``statement_timeout`` never
fires because the server never sees the statement, and TCP keeps the connection open. So
each call made through :meth:`CallDeadline.run` gets a deadline; a watchdog thread shuts
down the socket of every connection a call still holds at its deadline, which makes the
driver raise at once (the pool then drops that connection), and the call raises
:func:`timeout_error`. Connecting and waiting for a pooled connection are bounded by the
driver's ``connect_timeout`` and the pool's ``pool_timeout`` (:func:`engine_options`).
"""

from __future__ import annotations

import functools
import math
import os
import socket
import threading
import time

import sqlalchemy as sa

__all__ = ["CallDeadline", "DatabaseTimeout", "bounded", "engine_options", "timeout_error"]


class DatabaseTimeout(TimeoutError):
    """The database gave no answer within the decision log's time limit."""


def timeout_error(timeout_s: float) -> sa.exc.OperationalError:
    """The error a call that ran past its deadline raises (an ``OperationalError``: the
    database is unavailable, so the writer retries and ``POST /feedback`` answers 503)."""
    return sa.exc.OperationalError(None, None, DatabaseTimeout(
        f"no answer from the database within {timeout_s:g} s"))


def engine_options(url: str, timeout_s: float) -> dict:
    """``create_engine`` keywords bounding a PostgreSQL engine's waits by ``timeout_s``:
    connecting (``connect_timeout``, whole seconds, at least 2 as libpq counts; a URL's own
    ``connect_timeout`` is kept) and waiting for a free pooled connection (``pool_timeout``).

    Example
    -------
    >>> engine_options("postgresql+psycopg://u@h/db", 0.5)
    {'pool_timeout': 0.5, 'connect_args': {'connect_timeout': 2}}
    """
    out: dict = {"pool_timeout": float(timeout_s)}
    if "connect_timeout" not in sa.engine.make_url(url).query:
        out["connect_args"] = {"connect_timeout": max(2, math.ceil(timeout_s))}
    return out


def _shut(dbapi_conn) -> None:
    """Shut down the socket under ``dbapi_conn`` (a duplicate descriptor is shut down and
    closed; the driver's own descriptor then reads end-of-file and the driver raises)."""
    try:
        fd = os.dup(dbapi_conn.fileno())
    except (AttributeError, OSError, ValueError, TypeError):  # closed, or not a socket driver
        return
    s = socket.socket(fileno=fd)
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        s.close()


class CallDeadline:
    """Deadlines for the calls a thread makes on ``engine`` (see the module).

    Parameters
    ----------
    engine : sqlalchemy.engine.Engine
        A PostgreSQL engine (its connections must have ``fileno()``, as psycopg's have);
        every new connection gets ``statement_timeout`` = ``timeout_s`` on the server too.
    timeout_s : float
        Longest time of one call; a call already past it when its connection is made is
        stopped at once.
    """

    def __init__(self, engine, timeout_s: float):
        self.timeout_s = float(timeout_s)
        self._cond = threading.Condition()
        self._deadlines: dict[int, float] = {}   # thread id -> deadline of its running call
        self._conns: dict[int, list] = {}        # thread id -> connections its call holds
        self._expired: set[int] = set()          # threads whose call was stopped
        self._stopped = False
        sa.event.listen(engine, "connect", self._on_connect)
        sa.event.listen(engine, "checkout", self._on_checkout)
        sa.event.listen(engine, "checkin", self._on_checkin)
        self._watch = threading.Thread(target=self._watchdog, name="decision-log-deadline",
                                       daemon=True)
        self._watch.start()

    def _hold(self, dbapi_conn) -> None:
        """Count ``dbapi_conn`` as held by the running call of this thread (if any)."""
        tid = threading.get_ident()
        with self._cond:
            if tid in self._deadlines:
                held = self._conns.setdefault(tid, [])
                if not any(c is dbapi_conn for c in held):
                    held.append(dbapi_conn)
                self._cond.notify()   # a call already past its deadline is stopped now

    def _on_connect(self, dbapi_conn, _record) -> None:
        self._hold(dbapi_conn)
        with dbapi_conn.cursor() as cur:  # the server gives up on a slow statement too
            cur.execute(f"SET statement_timeout = {max(1, int(self.timeout_s * 1000))}")
        dbapi_conn.commit()

    def _on_checkout(self, dbapi_conn, _record, _proxy) -> None:
        self._hold(dbapi_conn)

    def _on_checkin(self, dbapi_conn, _record) -> None:
        with self._cond:
            for held in self._conns.values():
                if any(c is dbapi_conn for c in held):
                    held[:] = [c for c in held if c is not dbapi_conn]

    def _watchdog(self) -> None:
        with self._cond:
            while not (self._stopped and not self._deadlines):  # calls running still end in time
                now = time.monotonic()
                for tid, due in self._deadlines.items():
                    if due <= now and self._conns.get(tid):
                        self._expired.add(tid)
                        for c in self._conns.pop(tid):
                            _shut(c)
                    elif due <= now:
                        self._expired.add(tid)
                pending = [d for t, d in self._deadlines.items() if d > now]
                self._cond.wait(min(pending) - now if pending else None)

    def run(self, fn, *args, **kwargs):
        """``fn(*args, **kwargs)`` within the deadline; a call nested in another keeps the
        outer one's deadline.

        Raises
        ------
        sqlalchemy.exc.OperationalError
            The call was stopped at its deadline (:func:`timeout_error`).
        """
        tid = threading.get_ident()
        with self._cond:
            if tid in self._deadlines:
                nested = True
            else:
                nested = False
                self._deadlines[tid] = time.monotonic() + self.timeout_s
                self._cond.notify()
        if nested:
            return fn(*args, **kwargs)
        try:
            return fn(*args, **kwargs)
        except sa.exc.SQLAlchemyError as exc:
            with self._cond:
                stopped = tid in self._expired
            if stopped:
                raise timeout_error(self.timeout_s) from exc
            raise
        finally:
            with self._cond:
                self._deadlines.pop(tid, None)
                self._conns.pop(tid, None)
                self._expired.discard(tid)

    def stop(self) -> None:
        """End the watchdog thread once no call is running (the engine is being disposed)."""
        with self._cond:
            self._stopped = True
            self._cond.notify()


def bounded(method):
    """Run a :class:`~recsys_router.feedback.store.DecisionLog` method through its
    ``deadline`` (a :class:`CallDeadline`, or None: unbounded)."""
    @functools.wraps(method)
    def call(self, *args, **kwargs):
        deadline = getattr(self, "deadline", None)
        if deadline is None:
            return method(self, *args, **kwargs)
        return deadline.run(method, self, *args, **kwargs)
    return call
