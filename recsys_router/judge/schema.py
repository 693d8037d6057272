"""The RouteJudge database's tables (SQLAlchemy Core) and how its SQLite file is opened
(read-write in WAL mode, or read-only; see :class:`~recsys_router.judge.store.JudgeStore`
for the schema's description)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import (Column, Float, ForeignKey, Index, Integer, MetaData, String, Table, Text,
                        create_engine, event)
from sqlalchemy.engine import Engine

from ..sqlite_files import read_only_engine as _read_only_engine
from ..sqlite_files import read_only_uri

__all__ = ["READ_ONLY", "SCHEMA_VERSION", "choices_t", "metadata", "open_engine", "read_only_engine", "read_only_uri",
           "records_t", "schema_info", "tokens_t"]

SCHEMA_VERSION = 1
#: execution option of a connection that only reads (a deferred transaction; see :func:`open_engine`)
READ_ONLY = "judge_read_only"

metadata = MetaData()
schema_info = Table("schema_info", metadata, Column("key", String(64), primary_key=True),
                    Column("value", Text, nullable=False))
records_t = Table(
    "records", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("record_id", String(64), nullable=False, unique=True),
    Column("query_id", String(256)), Column("query", Text, nullable=False),
    Column("history", Text), Column("task", String(256)), Column("budget", Float),
    Column("feasible", Text, nullable=False),
    Column("llm_a", String(256), nullable=False), Column("llm_b", String(256), nullable=False),
    Column("label", String(16), nullable=False),
    Column("cost_a", Float), Column("cost_b", Float),
    Column("latency_a", Float), Column("latency_b", Float),
    Column("costs", Text, nullable=False), Column("latencies", Text, nullable=False),
    Column("created_at", String(40), nullable=False), Column("judged_at", String(40), nullable=False),
    Column("metadata", Text, nullable=False),
)
Index("ix_records_task", records_t.c.task)
Index("ix_records_label", records_t.c.label)
Index("ix_records_judged_at", records_t.c.judged_at)
Index("ix_records_llm_a", records_t.c.llm_a)
Index("ix_records_llm_b", records_t.c.llm_b)
choices_t = Table(
    "router_choices", metadata,
    Column("record", Integer, ForeignKey("records.id", ondelete="CASCADE"), primary_key=True),
    Column("router", String(256), primary_key=True),
    Column("llm", String(256), nullable=False),
    Column("score", Float),
)
Index("ix_choices_router", choices_t.c.router)
Index("ix_choices_llm", choices_t.c.llm)
tokens_t = Table(
    "duel_tokens", metadata,
    Column("token", String(64), primary_key=True),
    Column("payload", Text, nullable=False),
    Column("issued_at", String(40), nullable=False),
    Column("used_at", String(40)),
    Column("record_id", String(64)),
    Column("client", String(256)),
)
Index("ix_tokens_used", tokens_t.c.used_at)


def open_engine(url: str) -> Engine:
    """A read-write engine on the SQLite ``url``: WAL journal (not for ``:memory:``), foreign
    keys on, every transaction ``BEGIN IMMEDIATE``, except on a connection given the execution
    option :data:`READ_ONLY` (``conn.execution_options(**{READ_ONLY: True})``), which only reads:
    a plain ``BEGIN`` then, which in WAL mode neither waits for nor holds up a writer."""
    eng = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})

    @event.listens_for(eng, "connect")
    def _on_connect(dbapi_conn, _rec):
        dbapi_conn.isolation_level = None  # let SQLAlchemy's begin event issue BEGIN
        cur = dbapi_conn.cursor()
        if ":memory:" not in url:
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
        cur.execute("PRAGMA foreign_keys=ON")
        cur.close()

    @event.listens_for(eng, "begin")
    def _on_begin(conn):  # a connection marked READ_ONLY reads in a deferred transaction
        conn.exec_driver_sql("BEGIN" if conn.get_execution_options().get(READ_ONLY) else "BEGIN IMMEDIATE")

    return eng


def read_only_engine(path: Path) -> tuple[Engine, bool]:
    """An engine on ``path`` opened with SQLite's ``mode=ro`` (see :func:`read_only_uri` for
    the ``immutable`` fallback; the flag is returned too): no statement can write the file,
    the journal mode is left as it is, and reads run in plain (deferred) transactions. (On a
    database in WAL mode SQLite may create its ``-wal``/``-shm`` side files where it can.)"""
    eng, immutable = _read_only_engine(path, "any judge command that writes")

    @event.listens_for(eng, "connect")
    def _on_connect(dbapi_conn, _rec):
        dbapi_conn.isolation_level = None

    @event.listens_for(eng, "begin")
    def _on_begin(conn):
        conn.exec_driver_sql("BEGIN")

    return eng, immutable
