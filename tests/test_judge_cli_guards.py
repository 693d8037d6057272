"""``judge simulate`` / ``replay`` argument checks: budgets, willingness to pay, thresholds,
router parameters naming no given router, and a replayed router never trained on a query the
stored records judged."""

from __future__ import annotations

import pandas as pd
import pytest

from recsys_router.cli import main
from recsys_router.datasets.resolve import resolve_dataset
from recsys_router.judge.routers import parse_router_params, replay_train, train_test
from recsys_router.judge.store import JudgeStore

DATA = ["--data", "synthetic", "-o", "n_queries=200", "-o", "n_llms=4"]


@pytest.mark.parametrize("extra,msg", [(["--budget", "-1"], "argument --budget: expected a finite number >= 0"),
                                       (["--wtp", "-0.5"], "argument --wtp: expected a finite number >= 0"),
                                       (["--threshold", "nan"], "argument --threshold: expected a finite number"),
                                       (["--budget", "inf"], "argument --budget: expected a finite number"),
                                       (["--n", "0"], "argument --n: expected a whole number >= 1")])
def test_simulate_refuses_bad_numbers_before_writing(tmp_path, capsys, extra, msg):
    with pytest.raises(SystemExit) as ei:
        main(["judge", "simulate", *DATA, "--routers", "random,best-single", "--db", str(tmp_path / "j.db"),
              *extra])
    assert ei.value.code == 2 and msg in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_router_params_must_name_given_routers(tmp_path, capsys):
    assert main(["judge", "simulate", *DATA, "--routers", "random,knn", "--db", str(tmp_path / "j.db"),
                 "--router-params", '{"knnn": {"k": 3}}']) == 2
    assert "--router-params names router(s) ['knnn'] that are not among the routers given" \
        in capsys.readouterr().err
    assert main(["judge", "simulate", *DATA, "--routers", "random,knn", "--db", str(tmp_path / "j.db"),
                 "--noise", "1.5"]) == 2
    assert list(tmp_path.iterdir()) == []
    assert parse_router_params('{"knn": {"k": 3}}', ["knn"]) == {"knn": {"k": 3}}


def test_replay_leaves_the_judged_queries_out_of_training(tmp_path, capsys):
    db = tmp_path / "j.db"
    assert main(["judge", "simulate", *DATA, "--routers", "random,best-single", "--n", "40", "--seed", "7",
                 "--db", str(db)]) == 0
    recs = JudgeStore(db).records()
    judged = {r.query_id for r in recs}
    data = resolve_dataset("synthetic", stack=True, n_queries=200, n_llms=4)
    plain, _ = train_test(data, test_size=0.3, seed=0)  # what replay --seed 0 trained on before
    overlap = judged & set(plain.query_ids)
    assert overlap  # the leak the check is about: other seed, other test split
    train, n_out = replay_train(data, recs, test_size=0.3, seed=0)
    assert n_out == len(overlap) and not judged & set(train.query_ids)
    assert sorted(train.query_ids) == sorted(set(plain.query_ids) - judged)
    capsys.readouterr()
    assert main(["judge", "replay", "--db", str(db), *DATA, "--router", "knn", "--seed", "0"]) == 0
    assert f"fitting 'knn' on {plain.n_queries - len(overlap)} train queries" in capsys.readouterr().err


def test_replay_out_is_written_atomically(tmp_path, capsys, monkeypatch):
    db, out = tmp_path / "j.db", tmp_path / "lb.csv"
    assert main(["judge", "simulate", *DATA, "--routers", "random,best-single", "--n", "10", "--db", str(db)]) == 0
    out.write_text("old leaderboard\n")

    def half_then_fail(self, path, **kw):  # a write that dies half-way (disk full, killed)
        with open(path, "w") as fh:
            fh.write("router,n_vo")
        raise OSError("no space left on device")
    monkeypatch.setattr(pd.DataFrame, "to_csv", half_then_fail)
    assert main(["judge", "replay", "--db", str(db), *DATA, "--router", "best-single", "--name", "b2",
                 "--out", str(out)]) != 0
    assert out.read_text() == "old leaderboard\n"  # was: the half-written file
    # no temporary left (replay reads j.db with SQLite's mode=ro, which may leave WAL side files)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name not in ("j.db-wal", "j.db-shm")) == ["j.db", "lb.csv"]


def test_simulate_report_that_is_a_file_is_refused_before_any_record(tmp_path, capsys):
    (tmp_path / "rep").write_text("mine")
    assert main(["judge", "simulate", *DATA, "--routers", "random,best-single", "--n", "5",
                 "--db", str(tmp_path / "j.db"), "--report", str(tmp_path / "rep")]) == 2
    assert f"--report {tmp_path / 'rep'}: exists and is not a folder" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]  # was: j.db with 5 records
    assert (tmp_path / "rep").read_text() == "mine"


@pytest.mark.parametrize("how", ["parent-is-a-file", "disk-full-while-writing", "publish-fails"])
def test_simulate_whose_report_fails_writes_no_record(tmp_path, capsys, monkeypatch, how):
    """``simulate --report``: the report is built in a temporary folder first and published in
    the records' transaction, so a report that cannot be written leaves the database as it
    was (here: the 4 records of an earlier run) and no report or temporary folder behind."""
    db = tmp_path / "j.db"
    assert main(["judge", "simulate", *DATA, "--routers", "random,best-single", "--n", "4", "--db", str(db)]) == 0
    report = tmp_path / "rep"
    if how == "parent-is-a-file":
        (tmp_path / "afile").write_text("mine")
        report = tmp_path / "afile" / "rep"
    elif how == "disk-full-while-writing":
        def full(self, path, **kw):
            raise OSError(28, "No space left on device")
        monkeypatch.setattr(pd.DataFrame, "to_csv", full)
    else:
        import recsys_router.judge.publish as R

        def no_rename(src, dst):
            raise OSError(30, "Read-only file system")
        monkeypatch.setattr(R.os, "replace", no_rename)
    before = sorted(p.name for p in tmp_path.iterdir())
    capsys.readouterr()
    assert main(["judge", "simulate", *DATA, "--routers", "random,best-single", "--n", "6", "--db", str(db),
                 "--report", str(report)]) != 0
    assert "recsys-router judge: error:" in capsys.readouterr().err
    with JudgeStore(db, read_only=True) as st:
        assert st.count() == 4  # was: 10, the 6 new records written before the report failed
    assert sorted(p.name for p in tmp_path.iterdir() if p.name not in ("j.db-wal", "j.db-shm")) == before
    if how == "parent-is-a-file":
        assert (tmp_path / "afile").read_text() == "mine"


def test_simulate_report_and_records_are_written_together(tmp_path, capsys):
    db, report = tmp_path / "j.db", tmp_path / "rep"
    assert main(["judge", "simulate", *DATA, "--routers", "random,best-single", "--n", "6", "--db", str(db),
                 "--report", str(report)]) == 0
    with JudgeStore(db, read_only=True) as st:
        ids = [r.record_id for r in st.records()]
    assert len(ids) == 6
    lb = pd.read_csv(report / "leaderboard.csv")
    assert sorted(lb["router"]) == ["best-single", "random"] and lb["n_voted"].sum() == 12
    assert sorted(p.name for p in tmp_path.iterdir() if p.name not in ("j.db-wal", "j.db-shm")) == ["j.db", "rep"]


def _failing_commit(monkeypatch):
    """Make the COMMIT of the ``--report`` transaction (the one with a ``before_commit``) fail
    as a full disk would, leaving every other transaction alone."""
    import sqlite3

    import sqlalchemy.engine.base as base

    orig_commit, orig_add = base.Connection._commit_impl, JudgeStore.add_many

    def failing(self):
        raise sqlite3.OperationalError("disk I/O error")

    def add_many(self, recs, **kw):
        if kw.get("before_commit") is None:
            return orig_add(self, recs, **kw)
        monkeypatch.setattr(base.Connection, "_commit_impl", failing)
        try:
            return orig_add(self, recs, **kw)
        finally:
            monkeypatch.setattr(base.Connection, "_commit_impl", orig_commit)
    monkeypatch.setattr(JudgeStore, "add_many", add_many)


@pytest.mark.parametrize("existing", [False, True])
def test_simulate_report_is_taken_back_when_the_commit_fails(tmp_path, capsys, monkeypatch, existing):
    """The report is published just before the records' COMMIT; when that COMMIT fails, the
    publication is undone: a new report folder is removed, and in an existing one the files it
    replaced get their old contents back, the files it added go and the user's stay."""
    db, report = tmp_path / "j.db", tmp_path / "rep"
    assert main(["judge", "simulate", *DATA, "--routers", "random,best-single", "--n", "4", "--db", str(db)]) == 0
    if existing:
        report.mkdir()
        (report / "leaderboard.csv").write_text("old table")
        (report / "notes.txt").write_text("mine")
    _failing_commit(monkeypatch)
    capsys.readouterr()
    assert main(["judge", "simulate", *DATA, "--routers", "random,best-single", "--n", "6", "--db", str(db),
                 "--report", str(report)]) == 2
    assert "disk I/O error" in capsys.readouterr().err
    with JudgeStore(db, read_only=True) as st:
        assert st.count() == 4
    left = sorted(p.name for p in tmp_path.iterdir() if p.name not in ("j.db-wal", "j.db-shm"))
    if existing:  # was: 14 new report files beside the user's, and the old table overwritten
        assert left == ["j.db", "rep"]
        assert sorted(p.name for p in report.iterdir()) == ["leaderboard.csv", "notes.txt"]
        assert (report / "leaderboard.csv").read_text() == "old table"
        assert (report / "notes.txt").read_text() == "mine"
    else:  # was: the whole report folder published with no record behind it
        assert left == ["j.db"]


def test_staged_report_unpublish_by_hand(tmp_path):
    """:class:`StagedReport` directly: publish into a folder holding one old file, then leave
    the block with an error; a second publish that succeeds keeps the new files."""
    from recsys_router.judge.records import JudgeRecord
    from recsys_router.judge.report import stage_report

    recs = [JudgeRecord(query=f"q{i}", router_choices={"r1": "x", "r2": "y"}, llm_a="x", llm_b="y",
                        label="A" if i % 2 else "B", feasible=["x", "y"], record_id=f"id{i}") for i in range(4)]
    out = tmp_path / "rep"
    out.mkdir()
    (out / "report.md").write_text("old")
    with pytest.raises(RuntimeError, match="later step"):
        with stage_report(recs, out, n_boot=0) as staged:
            paths = staged.publish()
            assert (out / "report.md").read_text() != "old" and len(paths) > 5
            raise RuntimeError("later step")
    assert sorted(p.name for p in out.iterdir()) == ["report.md"]
    assert (out / "report.md").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]  # no temporary folder left
    with stage_report(recs, out, n_boot=0) as staged:
        paths = staged.publish()
    assert sorted(p.name for p in out.iterdir()) == sorted(paths)
    assert (out / "report.md").read_text() != "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]


def test_a_failed_take_back_keeps_the_old_versions(tmp_path, monkeypatch):
    """When putting an old file back fails (a rename refused mid-restore), the old versions not
    restored are moved beside the folder and named in a warning, never deleted with the
    temporary folder."""
    import recsys_router.judge.publish as P
    from recsys_router.judge.records import JudgeRecord
    from recsys_router.judge.report import stage_report

    recs = [JudgeRecord(query=f"q{i}", router_choices={"r1": "x", "r2": "y"}, llm_a="x", llm_b="y",
                        label="A" if i % 2 else "B", feasible=["x", "y"], record_id=f"id{i}") for i in range(4)]
    out = tmp_path / "rep"
    out.mkdir()
    (out / "report.md").write_text("old report")
    (out / "h2h.csv").write_text("old h2h")
    real = P.os.replace

    def refuse_putting_back_report(src, dst):
        if str(src).endswith(".replaced/report.md"):
            raise OSError(5, "Input/output error")
        return real(src, dst)

    with pytest.warns(RuntimeWarning, match=r"could not take the report back for report\.md "
                                            r"\(Input/output error\); the old versions not "
                                            r"restored are kept in "):
        with pytest.raises(RuntimeError, match="commit failed"):
            with stage_report(recs, out, n_boot=0) as staged:
                staged.publish()
                monkeypatch.setattr(P.os, "replace", refuse_putting_back_report)
                raise RuntimeError("commit failed")
    assert (out / "h2h.csv").read_text() == "old h2h"  # restored
    kept = [p for p in tmp_path.iterdir() if p.name.startswith(".rep.replaced-")]
    assert len(kept) == 1 and (kept[0] / "report.md").read_text() == "old report"
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]
