"""Reading a SQLite database file without writing it: the RouteJudge database (``judge
report/export/replay``) and the decision log (``ope --log``, ``log export``).

SQLite's ``mode=ro`` opens a file so that no statement can write it. A database in WAL mode
also needs its ``-wal``/``-shm`` side files, which SQLite cannot create in a read-only folder or
mount; there the file is opened ``immutable=1`` instead (no side file, no lock), unless a
non-empty ``-wal`` beside it may hold committed rows not yet in the file.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from .errors import DataValidationError

__all__ = ["read_only_uri", "read_only_engine", "sqlite_file_path", "SIDE_FILE_ERRORS"]

#: SQLite's names for a read-only open that fails because the ``-wal``/``-shm`` side files of a
#: WAL database cannot be created (a read-only folder or mount, a read-only file)
SIDE_FILE_ERRORS = frozenset({"SQLITE_READONLY_DIRECTORY", "SQLITE_READONLY_CANTINIT", "SQLITE_CANTOPEN"})


def read_only_uri(path: Path, writer: str = "a command that writes it") -> tuple[str, bool]:
    """The URI to read ``path`` with, and whether it is opened ``immutable``.

    SQLite's ``mode=ro`` first; when that fails because SQLite cannot create a WAL database's
    side files (:data:`SIDE_FILE_ERRORS`: the folder, mount or file is read-only), the file is
    read with ``immutable=1`` instead, which opens no side file and takes no lock: it assumes
    nobody writes the database meanwhile (a writer's changes could then be read half-made).
    That fallback is refused when a non-empty ``-wal`` file lies beside the database: it may
    hold committed rows not yet folded into the file, which ``immutable`` would not see (the
    error suggests opening it once where it is writable, with ``writer``). Any other failure is
    left to the caller's first read, which names it.

    Example
    -------
    >>> import tempfile, os
    >>> p = Path(tempfile.mkdtemp()) / "x.db"
    >>> sqlite3.connect(p).execute("CREATE TABLE t (a)").connection.commit()
    >>> uri, immutable = read_only_uri(p)
    >>> uri.endswith("x.db?mode=ro"), immutable
    (True, False)
    """
    uri = path.resolve().as_uri() + "?mode=ro"
    try:
        con = sqlite3.connect(uri, uri=True, timeout=30)
        try:
            con.execute("SELECT count(*) FROM sqlite_master").fetchone()  # opens the WAL, if any
        finally:
            con.close()
        return uri, False
    except sqlite3.Error as exc:
        if getattr(exc, "sqlite_errorname", None) not in SIDE_FILE_ERRORS:
            return uri, False
        wal = Path(str(path.resolve()) + "-wal")  # beside the file SQLite opened, not a link to it
        if wal.is_file() and wal.stat().st_size > 0:
            raise DataValidationError(
                f"cannot open it read-only ({exc}): its write-ahead log {wal.name} holds changes not yet "
                f"folded into the database and SQLite cannot open it here; open the database once "
                f"where it is writable ({writer}, or sqlite3's 'PRAGMA wal_checkpoint(TRUNCATE)') "
                "and retry", source=str(path)) from None
    return uri + "&immutable=1", True


def read_only_engine(path: Path, writer: str = "a command that writes it"):
    """A SQLAlchemy engine reading ``path`` through :func:`read_only_uri` (no statement can
    write the file, no file is created, the journal mode is left as it is), and whether it is
    opened ``immutable``. Callers add their own connection hooks.

    Example
    -------
    >>> import tempfile
    >>> p = Path(tempfile.mkdtemp()) / "x.db"
    >>> sqlite3.connect(p).execute("CREATE TABLE t (a)").connection.commit()
    >>> eng, immutable = read_only_engine(p)
    >>> with eng.connect() as con:
    ...     con.exec_driver_sql("INSERT INTO t VALUES (1)")
    Traceback (most recent call last):
    ...
    sqlalchemy.exc.OperationalError: (sqlite3.OperationalError) attempt to write a readonly database
    ...
    """
    from sqlalchemy import create_engine  # noqa: PLC0415
    uri, immutable = read_only_uri(path, writer)
    return create_engine("sqlite://", creator=lambda: sqlite3.connect(
        uri, uri=True, check_same_thread=False, timeout=30)), immutable


def sqlite_file_path(url: str) -> Path | None:
    """The file a SQLite database URL names (any ``sqlite`` dialect and driver, ``?``
    options allowed, the ``file:`` form of ``uri=true`` too), as SQLite will open it, or None
    for another database, an in-memory one or a string that is not a URL SQLAlchemy parses.
    A plain URL's path is made absolute lexically (``sub/../x.db`` is ``./x.db``), as
    SQLAlchemy's driver does before SQLite opens it; a ``uri=true`` path goes to SQLite as
    written (a ``..`` after a symbolic link then leaves the link's target).

    Example
    -------
    >>> sqlite_file_path("sqlite+pysqlite:////tmp/d.db?timeout=5"), sqlite_file_path("sqlite:////tmp/a/../d.db")
    (PosixPath('/tmp/d.db'), PosixPath('/tmp/d.db'))
    >>> sqlite_file_path("sqlite:///file:d.db?mode=ro&uri=true"), sqlite_file_path("sqlite://")
    (PosixPath('d.db'), None)
    >>> sqlite_file_path("postgresql://u@h/db") is None
    True
    """
    from sqlalchemy.engine import make_url  # noqa: PLC0415
    try:
        u = make_url(url)
    except Exception:  # noqa: BLE001 - ArgumentError, or ValueError for a bad port
        return None
    if not u.drivername.split("+", 1)[0] == "sqlite" or not u.database or u.database == ":memory:":
        return None
    db = u.database
    uri = u.query.get("uri", ())
    if any(str(v).lower() in ("true", "1") for v in ((uri,) if isinstance(uri, str) else uri)):
        if db.startswith("file:"):
            from urllib.parse import unquote, urlsplit  # noqa: PLC0415
            db = unquote(urlsplit(db).path)
        if not db or db == ":memory:" or u.query.get("mode") == "memory":
            return None
        return Path(db)
    return Path(os.path.abspath(db))
