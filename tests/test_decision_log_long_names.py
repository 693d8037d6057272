"""A decision for an LLM whose name is longer than 512 characters is logged whole, on SQLite
and PostgreSQL alike. PostgreSQL's ``chosen`` column was ``VARCHAR(512)``: the database refused
the row, the writer dropped it (``/health`` degraded) and that LLM's traffic never reached
the log, OPE or feedback training, while nothing else limits an LLM name (data, artifact,
``/route``). A log written with the old column is widened when a writer opens it."""

from __future__ import annotations


import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from recsys_router.data import RoutingData
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.export import export_router, load_router
from recsys_router.feedback.store import DecisionLog, decision_row
from recsys_router.serving import ServiceConfig, create_app
from toy_routers import WordRouter

from pg_util import open_while_read_locked, pg_url  # noqa: F401 - fixture

LONG = "org/" + "x" * 600           # 604 characters
ROW = dict(instance="i", artifact_sha=None, policy="argmax", policy_value=None, explore="none",
           propensity=1.0, scores={"a": 0.5}, costs=None, log_text="none")


@pytest.fixture(scope="module")
def long_named(tmp_path_factory):
    d = make_synthetic(80, 3, 2, seed=0)
    d = RoutingData(d.queries, [LONG, "short-a", "short-b"], d.scores, d.costs, name="long names")
    out = tmp_path_factory.mktemp("art") / "word"
    export_router(WordRouter().fit(d), out, train_data=d)
    return load_router(out)


def _column_type(url: str) -> tuple[str, int | None]:
    eng = sa.create_engine(url)
    try:
        with eng.connect() as conn:
            return tuple(conn.execute(sa.text(
                "SELECT data_type, character_maximum_length FROM information_schema.columns "
                "WHERE table_name = 'rr_decisions' AND column_name = 'chosen'")).one())
    finally:
        eng.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def log_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'log.db'}"
    return request.getfixturevalue("pg_url")


def test_a_604_character_llm_name_is_logged_whole(long_named, log_url):
    assert len(LONG) == 604 and long_named.llm_names[0] == LONG
    cfg = ServiceConfig(log_db=log_url, log_text="full", log_flush_ms=20)
    with TestClient(create_app(long_named, cfg)) as c:
        ids = []
        for cand in ([LONG], ["short-a"]):
            r = c.post("/route", json={"query": "hello there", "candidates": cand})
            assert r.status_code == 200 and r.json()["llm"] == cand[0]
            ids.append(r.json()["decision_id"])
        c.app.state.feedback_loop.writer.flush()
        health = c.get("/health").json()
        assert health["status"] == "ok", health
        assert (health["decision_log"]["written"], health["decision_log"]["dropped"]) == (2, 0)
        assert c.post("/feedback", json={"decision_id": ids[0], "score": 1.0}).status_code == 200
    df = DecisionLog(log_url).read()
    assert dict(zip(df["decision_id"], df["chosen"])) == {ids[0]: LONG, ids[1]: "short-a"}
    assert df.set_index("decision_id").loc[ids[0], "feedback_score"] == 1.0


def _old_postgresql_log(url: str) -> None:
    """A log as the versions before this fix wrote it: ``chosen VARCHAR(512)``, one row."""
    log = DecisionLog(url)
    log.dispose()
    eng = sa.create_engine(url)
    with eng.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE rr_decisions ALTER COLUMN chosen TYPE VARCHAR(512)")
    eng.dispose()
    eng = sa.create_engine(url)   # rows written as before, without a writer's migration
    with eng.begin() as conn:
        conn.execute(sa.text("INSERT INTO rr_decisions (decision_id, created_at, policy, explore, "
                             "candidates, chosen, propensity, probs, scores) VALUES ('old', 1.0, "
                             "'argmax', 'none', '[\"a\"]', 'a', 1.0, '{\"a\": 1.0}', '{}')"))
        with pytest.raises(sa.exc.DataError, match="character varying\\(512\\)"):
            with conn.begin_nested():
                conn.execute(sa.text("INSERT INTO rr_decisions (decision_id, created_at, policy, "
                                     "explore, candidates, chosen, propensity, probs, scores) "
                                     "VALUES ('long', 2.0, 'argmax', 'none', '[]', :c, 1.0, '{}', "
                                     "'{}')"), {"c": LONG})
    eng.dispose()
    assert _column_type(url) == ("character varying", 512)


def test_an_older_postgresql_log_is_widened_by_a_writer_only(pg_url):  # noqa: F811
    _old_postgresql_log(pg_url)
    DecisionLog(pg_url, read_only=True).dispose()          # a reader never alters a log
    assert _column_type(pg_url) == ("character varying", 512)
    log = DecisionLog(pg_url)                                # a writer (serve --log-db) widens it
    assert _column_type(pg_url) == ("text", None)
    log.insert_decisions([decision_row(decision_id="d1", candidates=[LONG], chosen=LONG,
                                       probs={LONG: 1.0}, text="q", **ROW)])
    df = log.read()
    assert list(df["decision_id"]) == ["old", "d1"] and list(df["chosen"]) == ["a", LONG]
    log.dispose()
    DecisionLog(pg_url).dispose()                            # widened once: nothing to do again
    assert _column_type(pg_url) == ("text", None)


def test_the_widening_waits_briefly_for_its_lock_then_warns(pg_url, monkeypatch):  # noqa: F811
    """As the task-column migration: a long read holds the table; the writer gives up after
    ALTER_LOCK_TIMEOUT with a warning naming the column, and the next start widens it."""
    monkeypatch.setattr("recsys_router.feedback.store.ALTER_LOCK_TIMEOUT", "300ms")
    _old_postgresql_log(pg_url)
    stuck, opened = open_while_read_locked(pg_url, lambda: DecisionLog(pg_url))
    assert not stuck, "the writer waited for the reader's lock"
    assert any("'chosen' column holds at most 512 characters and could not be widened" in w
               and "until a restart widens it" in w for w in opened["warnings"]), opened["warnings"]
    opened["log"].dispose()
    assert _column_type(pg_url) == ("character varying", 512)
    DecisionLog(pg_url).dispose()
    assert _column_type(pg_url) == ("text", None)
