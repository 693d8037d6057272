"""A throw-away PostgreSQL database per test (skips with a reason when no server answers).

The server is Debian's ``postgresql`` package (``.ci/run`` installs and starts it and creates
the role); the admin URL comes from ``$RECSYS_ROUTER_TEST_PG``.
"""

from __future__ import annotations

import os
import threading
import uuid
import warnings

import pytest
import sqlalchemy as sa

ADMIN_URL = os.environ.get("RECSYS_ROUTER_TEST_PG",
                           "postgresql+psycopg://recsys:recsys@127.0.0.1:5432/recsys_test")


@pytest.fixture
def pg_url():
    try:
        admin = sa.create_engine(ADMIN_URL, isolation_level="AUTOCOMMIT")
        with admin.connect() as c:
            c.execute(sa.text("SELECT 1"))
    except Exception as exc:  # noqa: BLE001 - any failure to reach the server means "absent"
        pytest.skip(f"no PostgreSQL server at {ADMIN_URL} ({type(exc).__name__}); "
                    "CI starts one in .ci/run")
    name = "rr_test_" + uuid.uuid4().hex[:12]
    with admin.connect() as c:
        c.execute(sa.text(f'CREATE DATABASE "{name}"'))
    base = ADMIN_URL.rsplit("/", 1)[0]
    yield f"{base}/{name}"
    with admin.connect() as c:
        c.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def open_while_read_locked(url: str, open_log) -> tuple[bool, dict]:
    """Run ``open_log()`` on a thread while another connection holds ``rr_decisions`` with
    a read (ACCESS SHARE) lock, released after up to 20 s. Returns ``(stuck, opened)``:
    whether the opener still waited when the lock was released, and ``{"log": ...,
    "warnings": [...]}`` with what it returned and the warnings it raised."""
    reader = sa.create_engine(url)
    opened: dict = {}

    def run():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            opened["log"] = open_log()
        opened["warnings"] = [str(w.message) for w in caught]
    with reader.connect() as conn:
        conn.exec_driver_sql("BEGIN")
        conn.exec_driver_sql("SELECT count(*) FROM rr_decisions").all()   # holds ACCESS SHARE
        t = threading.Thread(target=run, daemon=True)
        t.start()
        t.join(timeout=20)
        stuck = t.is_alive()
        conn.exec_driver_sql("ROLLBACK")
    t.join(timeout=60)
    reader.dispose()
    return stuck, opened
