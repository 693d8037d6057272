"""SQLite storage of judged comparisons (SQLAlchemy Core).

Schema (version :data:`SCHEMA_VERSION`, kept in table ``schema_info``):

* ``records``: one row per judged comparison (query, task, budget, duel pair, label,
  costs/latencies of the shown LLMs, timestamps, JSON for feasible set / history /
  all known costs / metadata); indexed on task, label, judged time and each side.
* ``router_choices``: one row per (record, router): the chosen LLM and the attributed
  score (NULL = not participating); indexed on router and LLM.
* ``duel_tokens``: one-time tokens issued with a duel by the voting page; consumed in
  the same transaction that writes the record, so a replayed token changes nothing. Each
  remembers the client it was issued to; unvoted tokens older than the page's TTL are
  refused (410) and their duel dropped, their id kept :data:`EXPIRED_KEEP_S` more seconds
  so a late vote still reads as expired, not unknown; and a client may hold only so many
  unvoted ones at a time. (The
  ``client`` column is added in place to databases made before it; old code ignores it.)

Every record is written in one transaction (``BEGIN IMMEDIATE``) or not at all.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Iterable, Iterator

from sqlalchemy import create_engine, func, inspect, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError

from ..atomic import atomic_write
from ..errors import DataValidationError
from .jsonl import MAX_IMPORT_LLMS, MAX_IMPORT_ROUTERS, read_jsonl
from .records import JudgeRecord, utc_now
from .schema import (SCHEMA_VERSION, choices_t, metadata, open_engine, read_only_engine, records_t,
                     schema_info)
from .tokens import EXPIRED_KEEP_S, TokenError, TokenStore

__all__ = ["EXPIRED_KEEP_S", "JudgeStore", "SCHEMA_VERSION", "TokenError"]


class JudgeStore(TokenStore):
    """A RouteJudge database.

    Parameters
    ----------
    path : str or Path
        SQLite file (created with the schema when absent) or ``":memory:"``.
    read_only : bool
        Open an existing database for reading only (``judge report``, ``export``,
        ``replay``): SQLite's ``mode=ro``, no schema created or upgraded, the journal mode
        left as it is. A file without the RouteJudge tables is refused. A WAL database whose
        side files cannot be created (a read-only folder or mount) is read ``immutable``
        (:attr:`immutable` is then True): nobody may write it meanwhile.

    Raises
    ------
    DataValidationError
        ``path`` is a folder, not an SQLite database (corrupt or truncated), not a RouteJudge
        database (``read_only``), or of a newer schema version: one line naming the file.

    Example
    -------
    >>> st = JudgeStore(":memory:")
    >>> st.count()
    0
    """

    def __init__(self, path: str | Path, *, read_only: bool = False):
        self.path = str(path)
        self.read_only = read_only
        #: read with SQLite's ``immutable=1`` (a read-only WAL database; see :func:`_read_only_uri`)
        self.immutable = False
        memory = self.path == ":memory:"
        if not memory and Path(self.path).is_dir():
            raise DataValidationError("is a folder; expected a RouteJudge database (an SQLite file)",
                                      source=self.path)
        if read_only and (memory or not Path(self.path).is_file()):
            raise DataValidationError("no such database file; expected an existing RouteJudge database",
                                      source=self.path)
        if read_only:
            self.engine, self.immutable = read_only_engine(Path(self.path))
        elif memory:
            from sqlalchemy.pool import StaticPool
            self.engine = create_engine("sqlite://", connect_args={"check_same_thread": False},
                                        poolclass=StaticPool)
        else:
            Path(self.path).resolve().parent.mkdir(parents=True, exist_ok=True)
            self.engine = open_engine(f"sqlite:///{Path(self.path).resolve()}")
        try:
            self._check_schema() if read_only else self._init_schema()
        except SQLAlchemyError as exc:
            self.engine.dispose()
            raise self._db_error(exc, "open") from None
        except DataValidationError:
            self.engine.dispose()
            raise

    def _db_error(self, exc: SQLAlchemyError, what: str = "read") -> DataValidationError:
        """One line naming the database for an SQLite error (no SQL, no link)."""
        orig = getattr(exc, "orig", None) or exc
        msg = str(orig).splitlines()[0] if str(orig) else ""
        return DataValidationError(f"cannot {what} it as a RouteJudge database ({type(orig).__name__}: {msg}); "
                                   "expected an SQLite file written by recsys-router judge", source=self.path)

    # ------------------------------------------------------------------ schema
    def _init_schema(self) -> None:
        with self.engine.begin() as conn:
            metadata.create_all(conn)
            if "client" not in {c["name"] for c in inspect(conn).get_columns("duel_tokens")}:
                conn.exec_driver_sql("ALTER TABLE duel_tokens ADD COLUMN client VARCHAR(256)")
            conn.exec_driver_sql("CREATE INDEX IF NOT EXISTS ix_tokens_client ON duel_tokens (client, used_at)")
            row = conn.execute(select(schema_info.c.value).where(schema_info.c.key == "version")).first()
            if row is None:
                conn.execute(schema_info.insert().values(key="version", value=str(SCHEMA_VERSION)))
                conn.execute(schema_info.insert().values(key="created_at", value=utc_now()))
            else:
                self._check_version(row)

    def _check_schema(self) -> None:
        """Read-only: the RouteJudge tables must be there and the version supported."""
        with self.engine.connect() as conn:
            names = set(inspect(conn).get_table_names())
            missing = sorted({"schema_info", "records", "router_choices"} - names)
            if missing:
                raise DataValidationError(
                    f"not a RouteJudge database (no table {', '.join(missing)}); expected a database "
                    "written by recsys-router judge simulate, serve or import", source=self.path)
            row = conn.execute(select(schema_info.c.value).where(schema_info.c.key == "version")).first()
        self._check_version(row)

    def _check_version(self, row) -> None:
        """The stored schema version must be a whole number this code supports."""
        version = None if row is None else str(row[0])
        if version is None or not version.isdigit():
            raise DataValidationError(f"not a RouteJudge database (schema version {version!r}); expected "
                                      "a whole number", source=self.path, column="schema_info")
        if int(version) > SCHEMA_VERSION:
            raise DataValidationError(
                f"database schema version {version} is newer than this recsys-router supports "
                f"({SCHEMA_VERSION}); upgrade recsys-router", source=self.path, column="schema_info")

    @property
    def schema_version(self) -> int:
        with self.engine.connect() as conn:
            return int(conn.execute(select(schema_info.c.value)
                                    .where(schema_info.c.key == "version")).scalar_one())

    def close(self) -> None:
        """Close the database's connections (SQLite then folds its write-ahead log back)."""
        self.engine.dispose()

    def __enter__(self) -> "JudgeStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ writing
    @staticmethod
    def _insert(conn: Connection, rec: JudgeRecord) -> int:
        row = {
            "record_id": rec.record_id, "query_id": rec.query_id, "query": rec.query,
            "history": None if rec.history is None else json.dumps(rec.history),
            "task": rec.task, "budget": rec.budget, "feasible": json.dumps(list(rec.feasible)),
            "llm_a": rec.llm_a, "llm_b": rec.llm_b, "label": rec.label,
            "cost_a": rec.costs.get(rec.llm_a), "cost_b": rec.costs.get(rec.llm_b),
            "latency_a": rec.latencies.get(rec.llm_a), "latency_b": rec.latencies.get(rec.llm_b),
            "costs": json.dumps(rec.costs), "latencies": json.dumps(rec.latencies),
            "created_at": rec.created_at, "judged_at": rec.judged_at,
            "metadata": json.dumps(rec.metadata),
        }
        pk = conn.execute(records_t.insert().values(**row)).inserted_primary_key[0]
        attr = rec.attribution
        conn.execute(choices_t.insert(), [{"record": pk, "router": r, "llm": m, "score": attr[r]}
                                          for r, m in rec.router_choices.items()])
        return pk

    def add(self, rec: JudgeRecord) -> str:
        """Write one record in one transaction; returns its ``record_id``."""
        rec.validate()
        rec.check_storable()
        with self.engine.begin() as conn:
            self._insert(conn, rec)
        return rec.record_id

    def add_many(self, recs: Iterable[JudgeRecord], *, skip_existing: bool = False,
                 source: str | None = None, before_commit: Callable[[], object] | None = None,
                 import_limits: bool = False) -> int:
        """Write records in one transaction (all or nothing); returns how many were written.

        With ``skip_existing``, records whose ``record_id`` is already stored are left out;
        otherwise a stored id raises :class:`DataValidationError` and nothing is written.
        ``source`` names where the records came from in error messages. ``before_commit`` is
        called once every record is written, before the transaction commits: if it raises,
        nothing is written (``judge simulate --report`` publishes its report there). With
        ``import_limits`` (``judge import``), the database may name at most
        :data:`~recsys_router.judge.jsonl.MAX_IMPORT_ROUTERS` routers and
        :data:`~recsys_router.judge.jsonl.MAX_IMPORT_LLMS` LLMs afterwards, the limits of one
        imported file, so its export imports again in one piece (:meth:`_check_totals`).
        """
        recs = list(recs)
        for rec in recs:
            rec.validate(source=source)
            rec.check_storable(source=source)
        n = 0
        with self.engine.begin() as conn:
            have = set(conn.execute(select(records_t.c.record_id)).scalars())
            if import_limits:
                self._check_totals(conn, recs, source)
            for rec in recs:
                if rec.record_id in have:
                    if skip_existing:
                        continue
                    raise DataValidationError(f"record_id {rec.record_id!r} is already stored in "
                                              f"{self.path}", source=source, column="record_id")
                try:
                    self._insert(conn, rec)
                except SQLAlchemyError as exc:  # a database refusal: say which record, no SQL
                    raise DataValidationError(
                        f"record {rec.record_id!r} could not be stored in {self.path} "
                        f"({type(getattr(exc, 'orig', exc)).__name__}: {getattr(exc, 'orig', exc)}); "
                        "nothing was written", source=source) from None
                have.add(rec.record_id)
                n += 1
            if before_commit is not None:
                before_commit()
        return n

    def _check_totals(self, conn: Connection, recs: list[JudgeRecord], source: str | None) -> None:
        """Refuse records that would make the database name more distinct routers or LLMs
        than one imported file may (a database already past a limit, from an older version,
        may still take records that add no new name)."""
        try:
            routers = set(conn.execute(select(choices_t.c.router).distinct()).scalars())
            llms = set(conn.exec_driver_sql(
                "SELECT llm_a FROM records UNION SELECT llm_b FROM records UNION SELECT llm FROM "
                "router_choices UNION SELECT j.value FROM records, json_each(records.feasible) AS j").scalars())
        except SQLAlchemyError as exc:
            raise self._db_error(exc) from None
        new_routers = {r for rec in recs for r in rec.router_choices}
        new_llms = {m for rec in recs for m in (rec.llm_a, rec.llm_b, *rec.feasible, *rec.router_choices.values())}
        for what, names, new, cap in (("router", routers, new_routers, MAX_IMPORT_ROUTERS),
                                      ("LLM", llms, new_llms, MAX_IMPORT_LLMS)):
            total = len(names | new)
            if total > cap and total > len(names):
                raise DataValidationError(
                    f"importing it would make {self.path} name {total} distinct {what}s, more than the {cap} "
                    f"one database may hold (it names {len(names)} now, the file {total - len(names)} "
                    "more); nothing was imported: import into another database", source=source)

    # ------------------------------------------------------------------ reading
    def count(self) -> int:
        """Number of stored records."""
        try:
            with self.engine.connect() as conn:
                return int(conn.execute(select(func.count()).select_from(records_t)).scalar_one())
        except SQLAlchemyError as exc:
            raise self._db_error(exc) from None

    def comparison_counts(self) -> dict[str, int]:
        """How often each LLM was shown (as A or B) in stored records."""
        out: dict[str, int] = {}
        with self.engine.connect() as conn:
            for col in (records_t.c.llm_a, records_t.c.llm_b):
                for m, n in conn.execute(select(col, func.count()).group_by(col)):
                    out[m] = out.get(m, 0) + int(n)
        return out

    def records(self, *, task: str | None = None) -> list[JudgeRecord]:
        """All records in insertion order (optionally of one task)."""
        return list(self.iter_records(task=task))

    def iter_records(self, *, task: str | None = None) -> Iterator[JudgeRecord]:
        """Stored records in insertion order; a stored row that is no longer a valid record
        raises :class:`DataValidationError` naming the database and its ``record_id``."""
        q = select(records_t).order_by(records_t.c.id)
        if task is not None:
            q = q.where(records_t.c.task == task)
        try:
            with self.engine.connect() as conn:
                rows = conn.execute(q).all()
                ch: dict[int, dict[str, str]] = {}
                for pk, r, m in conn.execute(select(choices_t.c.record, choices_t.c.router, choices_t.c.llm)
                                             .order_by(choices_t.c.record, choices_t.c.router)):
                    ch.setdefault(pk, {})[r] = m
        except SQLAlchemyError as exc:
            raise self._db_error(exc) from None
        for row in rows:
            src = f"{self.path}, record {row.record_id!r}"
            try:
                yield JudgeRecord(
                    query=row.query, router_choices=ch.get(row.id, {}), llm_a=row.llm_a, llm_b=row.llm_b,
                    label=row.label, feasible=json.loads(row.feasible), task=row.task, query_id=row.query_id,
                    history=None if row.history is None else json.loads(row.history), budget=row.budget,
                    costs=json.loads(row.costs), latencies=json.loads(row.latencies),
                    created_at=row.created_at, judged_at=row.judged_at,
                    metadata=json.loads(row.metadata), record_id=row.record_id)
            except DataValidationError as exc:
                raise exc.at(source=src) from None
            except (ValueError, TypeError, RecursionError) as exc:
                raise DataValidationError(f"stored row is not a valid record ({type(exc).__name__}: "
                                          f"{exc})", source=src) from None

    # ------------------------------------------------------------------ JSONL
    def export_jsonl(self, path: str | Path) -> int:
        """Write every record as one JSON object per line (atomically: a failed export leaves
        an existing file as it was); returns the count.

        Every line is strict JSON: a row an older version stored with a NaN or infinite
        number (in its metadata, say) raises :class:`DataValidationError` naming the database,
        the record id and the field, and nothing is written."""
        n = 0
        with atomic_write(path) as tmp:
            with open(tmp, "w", encoding="utf-8") as fh:
                for rec in self.iter_records():
                    rec.check_json(source=f"{self.path}, record {rec.record_id!r}")
                    fh.write(json.dumps(rec.to_dict(), ensure_ascii=False, allow_nan=False) + "\n")
                    n += 1
        return n

    def import_jsonl(self, path: str | Path, *, skip_existing: bool = True) -> int:
        """Read records from JSONL (validated in full first) and add them in one transaction;
        returns how many were added.

        The whole file is read and checked first (:func:`~recsys_router.judge.jsonl.read_jsonl`):
        a malformed line (not UTF-8, not JSON, nested deeper than
        :data:`~recsys_router.judge.jsonl.MAX_JSON_DEPTH`, a field of the wrong type, a
        ``record_id`` already on an earlier line) raises :class:`DataValidationError` naming
        the file and line (1-based; both lines for a repeated id) before anything is
        written, and the file is written all or nothing. Records whose ``record_id`` is
        already stored are skipped (or raise when ``skip_existing=False``). The database may
        name at most as many routers and LLMs afterwards as one file may (``import_limits`` of
        :meth:`add_many`).
        """
        recs = read_jsonl(path)
        return self.add_many(recs, skip_existing=skip_existing, source=str(path), import_limits=True)
