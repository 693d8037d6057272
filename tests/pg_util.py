"""A throw-away PostgreSQL database per test (skips with a reason when no server answers).

The server is Debian's ``postgresql`` package (``.ci/run`` installs and starts it and creates
the role); the admin URL comes from ``$RECSYS_ROUTER_TEST_PG``.
"""

from __future__ import annotations

import os
import uuid

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
