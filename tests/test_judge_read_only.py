"""The read-only judge commands (``report``, ``export``, ``replay``) on a WAL database that
SQLite cannot create side files beside (a read-only folder and file).

The condition is made with ``chmod``. Root ignores file modes, so when the tests run as root
the reads run in a forked child that has dropped the capabilities that let root bypass them
(``CAP_DAC_OVERRIDE``, ``CAP_DAC_READ_SEARCH``, ``CAP_FOWNER``): the kernel then refuses its
writes into the read-only folder as it does any other user's (the child checks that first).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3

import pytest

from recsys_router.cli import main
from recsys_router.errors import DataValidationError
from recsys_router.judge.records import JudgeRecord
from recsys_router.judge.store import JudgeStore
from unprivileged import copy_with_pending_wal, unprivileged as _unprivileged

DATA = ["--data", "synthetic", "-o", "n_queries=200", "-o", "n_llms=4"]


def _rec(i: int) -> JudgeRecord:
    return JudgeRecord(query=f"q{i}", router_choices={"r1": "x", "r2": "y"}, llm_a="x", llm_b="y",
                       label="A", feasible=["x", "y"], record_id=f"id{i}")


@pytest.fixture
def locked(tmp_path):
    """(folder, database): a WAL judge database of 6 simulated records on synthetic data."""
    folder = tmp_path / "ro"
    folder.mkdir()
    db = folder / "j.db"
    assert main(["judge", "simulate", *DATA, "--routers", "random,best-single", "--n", "6", "--db", str(db)]) == 0
    con = sqlite3.connect(db)
    assert con.execute("pragma journal_mode").fetchone() == ("wal",)
    con.close()
    yield folder, db
    folder.chmod(0o755)
    db.chmod(0o644)


def _lock(folder, db):
    assert sorted(p.name for p in folder.iterdir()) == ["j.db"]  # closed: no side file left
    db.chmod(0o444)
    folder.chmod(0o555)


def test_read_commands_read_a_wal_database_in_a_read_only_folder(locked, tmp_path):
    folder, db = locked
    with JudgeStore(db) as st:
        ids = [r.record_id for r in st.records()]
    assert len(ids) == 6
    _lock(folder, db)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    out = tmp_path / "out"
    out.mkdir()

    def reads():
        with pytest.raises(sqlite3.OperationalError):  # the condition: SQLite's mode=ro alone fails
            con = sqlite3.connect(db.resolve().as_uri() + "?mode=ro", uri=True)
            try:
                con.execute("select count(*) from records").fetchone()
            finally:
                con.close()
        with JudgeStore(db, read_only=True) as st:
            assert st.immutable
            assert [r.record_id for r in st.records()] == ids
            assert st.count() == 6
        assert main(["judge", "export", "--db", str(db), "--out", str(out / "e.jsonl")]) == 0
        lines = (out / "e.jsonl").read_text().splitlines()
        assert [json.loads(x)["record_id"] for x in lines] == ids
        assert main(["judge", "report", "--db", str(db), "--out", str(out / "rep"), "--n-boot", "0"]) == 0
        assert (out / "rep" / "leaderboard.csv").is_file()
        assert main(["judge", "replay", "--db", str(db), *DATA, "--router", "best-single", "--name", "b2",
                     "--out", str(out / "lb.csv")]) == 0
        rows = (out / "lb.csv").read_text().splitlines()[1:]
        assert sorted(r.split(",")[0] for r in rows) == ["b2", "best-single", "random"]

    _unprivileged(reads, folder)
    assert sorted(p.name for p in folder.iterdir()) == ["j.db"]
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def test_a_writable_wal_database_is_not_read_immutable(locked):
    folder, db = locked
    with JudgeStore(db, read_only=True) as st:
        assert not st.immutable and st.count() == 6


def _locked_copy_with_pending_log(tmp_path, n: int):
    """``(folder, database)``: a copy of a judge database of ``n`` records taken while its
    write-ahead log ``j.db-wal`` still held them (not folded back), in a read-only folder."""
    live, copy = tmp_path / "live", tmp_path / "copy"
    live.mkdir()
    copy.mkdir()
    st = JudgeStore(live / "j.db")
    db = copy_with_pending_wal(st.engine, live / "j.db", copy,
                               lambda: st.add_many([_rec(i) for i in range(n)]))
    st.close()
    db.chmod(0o444)
    copy.chmod(0o555)
    return copy, db


def test_pending_write_ahead_log_is_refused_not_skipped(tmp_path):
    """A ``-wal`` file with committed records not yet in the database: ``immutable`` would not
    see them (records silently missing), so the read is refused, naming the log."""
    copy, db = _locked_copy_with_pending_log(tmp_path, 2)
    try:
        def refused():
            with pytest.raises(DataValidationError) as exc:
                JudgeStore(db, read_only=True)
            msg = str(exc.value)
            assert msg.startswith(f"{db}: cannot open it read-only (") and \
                "write-ahead log j.db-wal holds changes not yet folded into the database" in msg

        _unprivileged(refused, copy)
    finally:
        copy.chmod(0o755)
        db.chmod(0o644)
    with JudgeStore(db, read_only=True) as st:  # where SQLite can open the log: all of it is read
        assert not st.immutable and [r.record_id for r in st.records()] == ["id0", "id1"]


def test_pending_write_ahead_log_is_found_through_a_symbolic_link(tmp_path):
    """``--db`` a symbolic link to such a database: SQLite opens the link's target, so the
    pending log is looked for beside the target (it was looked for beside the link, not found,
    and the database was read ``immutable`` without the log's records)."""
    links = tmp_path / "links"
    links.mkdir()
    copy, db = _locked_copy_with_pending_log(tmp_path, 3)
    link = links / "judge.db"
    link.symlink_to(db)
    try:
        def refused():
            with pytest.raises(DataValidationError) as exc:
                JudgeStore(link, read_only=True)
            assert "write-ahead log j.db-wal holds changes not yet folded" in str(exc.value)
            assert main(["judge", "export", "--db", str(link), "--out", str(links / "e.jsonl")]) == 2
            assert not (links / "e.jsonl").exists()

        _unprivileged(refused, copy)
    finally:
        copy.chmod(0o755)
        db.chmod(0o644)
    with JudgeStore(link, read_only=True) as st:  # writable again: all three records are read
        assert not st.immutable and [r.record_id for r in st.records()] == ["id0", "id1", "id2"]
