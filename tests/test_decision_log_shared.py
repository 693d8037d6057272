"""One decision log shared by several service instances (PostgreSQL).

Instances opening an empty log at the same moment all start; the PostgreSQL tests skip with
a reason when no server answers (``pg_util``)."""

from __future__ import annotations

import threading
import uuid

import sqlalchemy as sa

from recsys_router.feedback.store import DecisionLog
from pg_util import pg_url  # noqa: F401 - fixture


def _schema_url(url: str, name: str) -> str:
    """``url`` with its own empty schema ``name`` as the search path (created here)."""
    eng = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with eng.connect() as c:
        c.execute(sa.text(f'CREATE SCHEMA "{name}"'))
    eng.dispose()
    return f"{url}?options=-csearch_path%3D{name}"


def _tables(url: str, schema: str) -> list[str]:
    eng = sa.create_engine(url)
    with eng.connect() as c:
        rows = c.execute(sa.text("SELECT tablename FROM pg_tables WHERE schemaname = :s "
                                 "ORDER BY tablename"), {"s": schema}).scalars().all()
    eng.dispose()
    return list(rows)


def test_instances_opening_an_empty_postgresql_log_at_once_all_start(pg_url):  # noqa: F811
    # several trials: each one a fresh empty schema opened by 6 threads released together
    # (the old code failed most trials: a duplicate pg_type row of a table being created)
    n = 6
    for trial in range(4):
        schema = f"race_{trial}_{uuid.uuid4().hex[:6]}"
        url = _schema_url(pg_url, schema)
        gate, results = threading.Barrier(n), [None] * n

        def open_log(k):
            gate.wait()
            try:
                log = DecisionLog(url)
                results[k] = ("ok", log.schema_version)
                log.dispose()
            except Exception as exc:  # noqa: BLE001 - the outcome is what is checked
                results[k] = ("failed", f"{type(exc).__name__}: {exc}")
        threads = [threading.Thread(target=open_log, args=(k,)) for k in range(n)]
        [t.start() for t in threads]
        [t.join(60) for t in threads]
        assert results == [("ok", 1)] * n, (trial, results)
        assert _tables(pg_url, schema) == ["rr_decisions", "rr_feedback", "rr_meta"]
        eng = sa.create_engine(url)
        with eng.connect() as c:  # one version row, whoever wrote it
            assert c.execute(sa.text("SELECT key, value FROM rr_meta")).all() == [("schema_version", "1")]
        eng.dispose()
