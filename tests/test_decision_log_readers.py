"""Readers of a decision log (``ope --log``, ``log export``) never change it, the writer's
migration of an older log never blocks other services for long, and an exported CSV reads
back with the labels it was written with."""

from __future__ import annotations


import pytest
import sqlalchemy as sa

from recsys_router.cli import main
from recsys_router.feedback.store import DecisionLog, decision_row
from recsys_router.feedback.workflow import export_log, load_log

from pg_util import open_while_read_locked, pg_url  # noqa: F401 - fixture
from unprivileged import copy_with_pending_wal

ROW = dict(instance="i", artifact_sha=None, policy="argmax", policy_value=None, explore="none",
           candidates=["a", "b"], chosen="a", propensity=1.0, probs={"a": 1.0},
           scores={"a": 0.5, "b": 0.1}, costs={"a": 0.1, "b": 0.2}, log_text="full")


def _log(url: str, tasks, *, drop_task: bool = False, texts=None) -> None:
    """A log of one decision with feedback per task label (query texts ``texts``, default
    ``q0``, ``q1``...); ``drop_task``: as an older version wrote it (no ``task`` column)."""
    log = DecisionLog(url)
    texts = texts or [f"q{i}" for i in range(len(tasks))]
    log.insert_decisions([decision_row(decision_id=f"d{i}", text=texts[i], task=t, **ROW)
                          for i, t in enumerate(tasks)])
    for i in range(len(tasks)):
        log.add_feedback(f"d{i}", score=1.0)
    log.dispose()
    if drop_task:
        eng = sa.create_engine(url)
        with eng.begin() as conn:
            conn.exec_driver_sql("ALTER TABLE rr_decisions DROP COLUMN task")
        eng.dispose()


def _has_task_column(url: str) -> bool:
    eng = sa.create_engine(url)
    try:
        return "task" in {c["name"] for c in sa.inspect(eng).get_columns("rr_decisions")}
    finally:
        eng.dispose()


def test_an_older_postgresql_log_reads_over_a_read_only_connection(pg_url):  # noqa: F811
    """A read replica (or a role that may only SELECT): opening the log ran ALTER TABLE and
    failed with a raw InternalError, so ``ope --log`` could not read an older log there."""
    _log(pg_url, [None, None, None], drop_task=True)
    read_only = pg_url + "?options=-c%20default_transaction_read_only%3Don"
    data = load_log(read_only)
    assert data.n_queries == 3 and data.queries["task"].isna().all()
    assert not _has_task_column(pg_url)   # read, never altered


def test_a_reader_never_migrates_an_older_sqlite_log(tmp_path):
    url = f"sqlite:///{tmp_path / 'old.db'}"
    _log(url, [None, None], drop_task=True)
    assert export_log(url, tmp_path / "x.csv") == (2, 2) and load_log(url).n_queries == 2
    assert not _has_task_column(url)
    log = DecisionLog(url)   # a writer (serve --log-db) adds it
    assert log.has_task_column and _has_task_column(url)
    log.dispose()


def test_a_reader_refuses_a_database_that_holds_no_log(pg_url, capsys, tmp_path):  # noqa: F811
    """Reading created the tables in whatever database was named and reported 0 decisions."""
    assert main(["log", "export", "--db", pg_url, "--out", str(tmp_path / "x.csv")]) == 2
    assert not (tmp_path / "x.csv").exists()
    err = capsys.readouterr().err
    assert "--db 'postgresql+psycopg://recsys:***@" in err, err
    assert "not a decision log (no table rr_decisions, rr_feedback" in err, err
    eng = sa.create_engine(pg_url)
    assert sa.inspect(eng).get_table_names() == []
    eng.dispose()


def test_the_task_migration_waits_briefly_for_its_lock_then_logs_without_tasks(pg_url, monkeypatch):  # noqa: F811
    """A long read held ACCESS SHARE; the ALTER waited for ever, and every other service's
    INSERT queued behind it. Now it gives up after ALTER_LOCK_TIMEOUT, the writer logs
    without task labels (saying so), and another service's insert goes through."""
    monkeypatch.setattr("recsys_router.feedback.store.ALTER_LOCK_TIMEOUT", "300ms")
    _log(pg_url, [None], drop_task=True)
    stuck, opened = open_while_read_locked(pg_url, lambda: DecisionLog(pg_url))
    assert not stuck, "the writer waited for the reader's lock"
    log = opened["log"]
    assert not log.has_task_column and not _has_task_column(pg_url)
    assert any("could not be added" in w and "without their task labels" in w
               for w in opened["warnings"]), opened["warnings"]
    log.insert_decisions([decision_row(decision_id="d9", text="q", task="math", **ROW)])
    assert list(log.read()["decision_id"]) == ["d0", "d9"]
    log.dispose()
    log = DecisionLog(pg_url)    # the next start, with no reader in the way, adds it
    assert log.has_task_column and _has_task_column(pg_url)
    log.dispose()


LABELS = ["1", "2024", "true", "None", "NA", "null", "nan", None, "math"]


TEXTS = ["q0", "a\rb", "c\nd", "e\r\nf", 'say "hi", then', "NA", "null", " ", "None"]


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_an_exported_log_reads_back_with_its_task_labels_and_texts(tmp_path, suffix):
    """The CSV export read task ids "1", "2024" as numbers (refused), "true" as a boolean
    (refused) and "None", "NA", "null" as no task (silently); a query text holding a bare
    carriage return was written unquoted and read back as a line end: its record split in two,
    the decision lost its feedback and a phantom decision took its place."""
    url = f"sqlite:///{tmp_path / 'log.db'}"
    _log(url, LABELS, texts=TEXTS)
    out = tmp_path / f"log{suffix}"
    assert export_log(url, out) == (len(LABELS), len(LABELS))
    data = load_log(str(out))
    assert [t if isinstance(t, str) else None for t in data.queries["task"]] == LABELS
    assert list(data.queries["text"]) == TEXTS
    assert list(data.query_ids) == [f"d{i}" for i in range(len(LABELS))]


def _snapshot_with_pending_wal(tmp_path):
    """``(folder, file)``: a copy of a WAL-mode log taken while its ``-wal`` still held all
    three decisions (a backup of a running ``serve --log-db``)."""
    live, snap = tmp_path / "live", tmp_path / "snap"
    live.mkdir()
    snap.mkdir()
    log = DecisionLog(f"sqlite:///{live / 'log.db'}")

    def write():
        log.insert_decisions([decision_row(decision_id=f"d{i}", text=f"q{i}", task=t, **ROW)
                              for i, t in enumerate([None, "math", None])])
        for i in range(3):
            log.add_feedback(f"d{i}", score=1.0)
    db = copy_with_pending_wal(log.engine, live / "log.db", snap, write)
    log.dispose()
    return snap, db


def test_a_reader_never_writes_a_sqlite_log(tmp_path):
    """A reader opened the file read-write: it folded a snapshot's -wal into the file (the
    file's bytes changed and the -wal was deleted)."""
    import hashlib
    snap, db = _snapshot_with_pending_wal(tmp_path)
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in snap.iterdir()}
    data = load_log(str(db))
    assert data.n_queries == 3                            # the rows still in the -wal are read
    assert export_log(str(db), tmp_path / "x.csv") == (3, 3)
    after = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in snap.iterdir()
             if p.name != "log.db-shm"}                   # SQLite's shared-memory index may appear
    assert after == before


def test_a_reader_reads_a_log_in_a_read_only_folder(tmp_path):
    """A clean WAL log on a read-only folder or mount: "unable to open database file"."""
    from unprivileged import unprivileged
    folder = tmp_path / "ro"
    folder.mkdir()
    url = f"sqlite:///{folder / 'log.db'}"
    _log(url, [None, "math"])
    assert sorted(p.name for p in folder.iterdir()) == ["log.db"]   # closed: no side file
    (folder / "log.db").chmod(0o444)
    folder.chmod(0o555)
    try:
        def reads():
            log = DecisionLog(url, read_only=True, flag="--log")
            assert log.immutable and len(log.read()) == 2
            log.dispose()
            assert load_log(url).n_queries == 2
        unprivileged(reads, folder)
    finally:
        folder.chmod(0o755)


def test_a_reader_refuses_a_snapshot_whose_pending_wal_it_cannot_open(tmp_path):
    """Where only ``immutable`` could open it, the rows in the -wal would be skipped: refused."""
    from unprivileged import unprivileged
    snap, db = _snapshot_with_pending_wal(tmp_path)
    db.chmod(0o444)
    snap.chmod(0o555)
    try:
        def refused():
            with pytest.raises(ValueError) as err:
                load_log(str(db))
            msg = str(err.value)
            assert msg.startswith("--log 'sqlite:///") and "write-ahead log log.db-wal holds changes" in msg
            assert "(serve --log-db, or sqlite3's 'PRAGMA wal_checkpoint(TRUNCATE)')" in msg
        unprivileged(refused, snap)
    finally:
        snap.chmod(0o755)


@pytest.mark.parametrize("form", ["sqlite+pysqlite:///{p}", "sqlite:///{p}?timeout=5",
                                  "sqlite:///file:{p}?mode=ro&uri=true"],
                         ids=["driver", "option", "uri"])
def test_a_reader_takes_every_sqlite_url_form_and_never_creates_the_file(tmp_path, form):
    """Only ``sqlite:///PATH`` was checked: another spelling of a missing file created an
    empty one, and an existing one given with ``?`` options was refused as missing."""
    missing = tmp_path / "typo.db"
    with pytest.raises(FileNotFoundError, match="no such SQLite file"):
        load_log(form.format(p=missing))
    assert not missing.exists()
    with pytest.raises(ValueError, match="no such SQLite file"):
        DecisionLog(form.format(p=missing), read_only=True, flag="--log")
    assert not missing.exists()
    real = tmp_path / "log.db"
    _log(f"sqlite:///{real}", [None, "math"])
    assert load_log(form.format(p=real)).n_queries == 2


@pytest.mark.parametrize("name", ["log?v=2.db", "my%20log.db", "a#b.db"], ids=["question-mark", "percent", "hash"])
def test_a_bare_log_path_names_the_same_file_for_writer_and_reader(tmp_path, monkeypatch, name):
    """``serve --log-db 'log?v=2.db'`` wrote the file ``log`` (the rest read as a URL query) and
    ``my%20log.db`` wrote ``my log.db``; ``ope --log`` with the same words then refused them,
    or, with a file of the literal name beside, read the other file silently."""
    monkeypatch.chdir(tmp_path)
    other = name.split("?")[0].replace("%20", " ").split("#")[0]
    _log(other if other != name else "decoy.db", [None])          # a file the old code read instead
    _log(name, [None, "math", None])                               # serve --log-db NAME
    assert (tmp_path / name).is_file()
    assert load_log(name).n_queries == 3
    assert export_log(name, tmp_path / "x.csv") == (3, 3)


def test_a_dot_dot_log_path_names_one_file_for_writer_and_reader(tmp_path, monkeypatch, capsys):
    """SQLite takes 'sub/../x.db' lexically (./x.db, with no 'sub' folder): serve wrote it and
    ope refused it as missing; errors showed a typed name percent-encoded."""
    monkeypatch.chdir(tmp_path)
    _log("sub/../x.db", [None, "math"])
    assert (tmp_path / "x.db").is_file() and not (tmp_path / "sub").exists()
    assert load_log("sub/../x.db").n_queries == 2
    assert export_log("sub/../x.db", tmp_path / "x.csv") == (2, 2)
    with pytest.raises(ValueError) as err:
        DecisionLog("нет/журнала.db", read_only=True, flag="--log")
    assert str(err.value).startswith("--log 'sqlite:///нет/журнала.db': no such SQLite file")


def test_a_log_name_that_is_not_utf8_is_refused_naming_the_option(tmp_path):
    """A Linux file name with byte 0xff (a lone surrogate in Python's argv) gave a bare codec
    error naming neither the option nor the file."""
    with pytest.raises(ValueError) as err:
        DecisionLog(str(tmp_path / "log\udcff.db"), flag="--log-db")
    msg = str(err.value)
    assert msg.startswith("--log-db '") and "the file name is not UTF-8 text" in msg


def test_a_uri_log_path_with_dot_dot_after_a_symlink_is_read_where_sqlite_wrote_it(tmp_path, monkeypatch):
    """With uri=true SQLite gets the path as written and follows a symbolic link before '..':
    the writer used far/x.db while the readers, taking '..' lexically, refused the log or read
    ./x.db instead."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "far" / "deep").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "far" / "deep")
    _log("decoy.db", [None])
    (tmp_path / "decoy.db").rename(tmp_path / "x.db")              # ./x.db: not the log
    url = "sqlite:///file:link/../x.db?uri=true"
    _log(url, [None, "math", None])
    assert (tmp_path / "far" / "x.db").is_file()
    assert load_log(url).n_queries == 3
    assert export_log(url, tmp_path / "o.csv") == (3, 3)


@pytest.mark.parametrize("spec", [" a.db ", "sqlite:///file:a.db?uri=true&uri=true"], ids=["spaces", "repeated-uri"])
def test_odd_spellings_name_the_writers_file(tmp_path, monkeypatch, spec):
    """The writer strips surrounding spaces and honours a repeated uri=true; the readers'
    existence check did neither and refused the log (or looked for ./file:a.db)."""
    monkeypatch.chdir(tmp_path)
    _log(spec, [None, "math"])
    assert (tmp_path / "a.db").is_file()
    assert load_log(spec).n_queries == 2
    assert export_log(spec, tmp_path / "o.csv") == (2, 2)
