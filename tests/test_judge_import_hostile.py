"""Hostile JSONL for ``judge import`` and a broken database for ``judge export``: one clear
line naming the file, line (or database and record id) and field, and nothing half-written."""

from __future__ import annotations

import json
import sqlite3

import pytest

from recsys_router.cli import main
from recsys_router.errors import DataValidationError
from recsys_router.judge.jsonl import read_jsonl
from recsys_router.judge.records import JudgeRecord
from recsys_router.judge.store import JudgeStore


def _good(i, **kw):
    return {"query": f"q{i}", "router_choices": {"r1": "x", "r2": "y"}, "llm_a": "x", "llm_b": "y",
            "label": "A", "feasible": ["x", "y"], "record_id": f"id{i}", **kw}


def _write(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows),
                    encoding="utf-8")
    return path


def _count(db):
    con = sqlite3.connect(db)
    try:
        return con.execute("select count(*) from records").fetchone()[0]
    finally:
        con.close()


@pytest.mark.parametrize("field,value,line", [
    ("task", {"a": 1}, 3), ("query_id", ["a"], 3), ("record_id", 5, 3), ("costs", [1, 2], 3),
    ("latencies", "fast", 3), ("metadata", [1, 2], 3), ("history", "hello", 3),
    ("feasible", "xy", 3), ("created_at", 12345, 3), ("label", True, 3), ("budget", float("inf"), 3),
    ("budget", -3, 3), ("router_choices", {"r1": "x", "r2": 5}, 3), ("router_choices", [["r1", "x"]], 3),
    ("llm_a", 7, 3),
    # an int too large for a float (math.isfinite raised OverflowError), lone surrogates
    # (sqlite raised UnicodeEncodeError when storing them)
    pytest.param("costs", {"x": 10 ** 400}, 3, id="costs-int-past-float"),
    pytest.param("budget", 10 ** 400, 3, id="budget-int-past-float"), ("query", "a\ud800b", 3),
    ("router_choices", {"r\udc00": "x", "r2": "y"}, 3), ("metadata", {"note": ["\udfff"]}, 3),
    # NaN/Infinity nested in free-form fields (was stored, then exported as non-JSON lines)
    pytest.param("metadata", {"a": {"b": [float("nan")]}}, 3, id="metadata-nested-nan"),
    pytest.param("history", [{"role": "user", "content": float("-inf")}], 3, id="history-infinity"),
    # a votes field contradicting the choices (r1 -> x, r2 -> y: one vote each) was accepted
    pytest.param("votes", {"x": 7, "y": 0}, 3, id="votes-contradict-choices")])
def test_bad_field_names_file_line_field_and_writes_nothing(tmp_path, capsys, field, value, line):
    rows = [_good(1), _good(2), _good(3, **{field: value})]
    src = _write(tmp_path / "bad.jsonl", rows)
    db = tmp_path / "j.db"
    assert main(["judge", "import", "--db", str(db), "--jsonl", str(src)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"recsys-router judge: error: {src}, line {line}, column {field!r}: "), err
    assert "SQL" not in err and "Traceback" not in err and len(err.splitlines()) == 1
    # the two good lines before it were not imported either: the file is checked before the
    # database is opened, so not even an empty database (or its folder) is created
    assert not db.exists()


@pytest.mark.parametrize("text,what", [
    ("[" * 100_000 + "]" * 100_000, "nested 100000 deep"),
    ('{"query": "q", "metadata": ' + "[" * 65 + "]" * 65 + "}", "nested 66 deep"),
    ("[1, 2, 3]", "expected a JSON object"),
    ("{not json", "is not valid JSON"),
    # an unterminated string of 32,000 escaped quotes (a regex scan of it was quadratic)
    ('"' + '\\"' * 32_000, "is not valid JSON"),
    ('{"query": "[[[\\"{{{", "metadata": ' + "[" * 65 + "]" * 65 + "}", "nested 66 deep"),
    # more digits than Python converts to an int (a ValueError json.loads let through)
    pytest.param('{"query": "q", "budget": ' + "1" * 5000 + "}", "cannot be read as JSON",
                 id="int-of-5000-digits"),
    # a key given twice: json.loads kept the last, so router r1's first vote was silently lost
    pytest.param('{"query": "q", "router_choices": {"r1": "x", "r1": "y"}, "llm_a": "x", "llm_b": "y", '
                 '"label": "A", "feasible": ["x", "y"]}', r"cannot be read as JSON \(duplicate key 'r1'\)",
                 id="duplicate-key")])
def test_malformed_line(tmp_path, text, what):
    src = _write(tmp_path / "m.jsonl", [_good(1), text])
    st = JudgeStore(tmp_path / "j.db")
    with pytest.raises(DataValidationError, match=what) as ei:
        st.import_jsonl(src)
    assert f"{src}" in str(ei.value) and "line 2" in str(ei.value)
    assert st.count() == 0


def test_not_utf8_names_file_and_line(tmp_path):
    src = tmp_path / "n.jsonl"
    src.write_bytes(json.dumps(_good(1)).encode() + b"\n\xff\xfe bad\n")
    st = JudgeStore(tmp_path / "j.db")
    with pytest.raises(DataValidationError, match=r"n.jsonl: line 2: byte 0xff is not UTF-8"):
        st.import_jsonl(src)
    assert st.count() == 0


def test_numeric_record_id_is_refused_and_string_reimport_skips(tmp_path):
    db = tmp_path / "j.db"
    st = JudgeStore(db)
    with pytest.raises(DataValidationError, match="record_id must be a non-empty string"):
        st.import_jsonl(_write(tmp_path / "i.jsonl", [_good(1, record_id=5)]))
    src = _write(tmp_path / "s.jsonl", [_good(1, record_id="5"), _good(2)])
    assert st.import_jsonl(src) == 2
    assert st.import_jsonl(src) == 0  # the same ids again: skipped, not an IntegrityError
    assert sorted(r.record_id for r in st.records()) == ["5", "id2"]
    with pytest.raises(DataValidationError, match=r"d.jsonl, line 3, column 'record_id': record_id 'id3' is "
                                                  r"also on line 1"):
        st.import_jsonl(_write(tmp_path / "d.jsonl", [_good(3), _good(4), _good(3)]))
    assert _count(db) == 2


def test_failed_cli_import_creates_no_database_or_folder(tmp_path, capsys):
    db = tmp_path / "new" / "j.db"
    src = _write(tmp_path / "self.jsonl", [_good(1, llm_b="x")])
    assert main(["judge", "import", "--db", str(db), "--jsonl", str(src)]) == 2
    assert "line 1, column 'llm_b'" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["self.jsonl"]  # was: new/j.db, empty
    assert main(["judge", "import", "--db", str(db), "--jsonl", str(_write(tmp_path / "ok.jsonl", [_good(2)]))]) == 0
    assert _count(db) == 1


def test_import_is_one_transaction(tmp_path):
    """A database refusal mid-file (here a trigger) rolls back every earlier line."""
    db = tmp_path / "j.db"
    st = JudgeStore(db)
    con = sqlite3.connect(db)
    con.execute("create trigger no_q3 before insert on records when new.query = 'q3' "
                "begin select raise(abort, 'refused'); end")
    con.commit()
    con.close()
    with pytest.raises(DataValidationError, match=r"record 'id3' could not be stored .*nothing was written"):
        st.import_jsonl(_write(tmp_path / "a.jsonl", [_good(1), _good(2), _good(3)]))
    assert _count(db) == 0


def test_failed_export_keeps_the_good_file_and_names_db_and_record(tmp_path, capsys):
    db, out = tmp_path / "j.db", tmp_path / "out.jsonl"
    st = JudgeStore(db)
    st.add_many([JudgeRecord(**_good(i)) for i in range(5)])
    assert main(["judge", "export", "--db", str(db), "--out", str(out)]) == 0
    good = out.read_bytes()
    assert len(good.splitlines()) == 5
    con = sqlite3.connect(db)
    con.execute("update records set label = 'Z' where record_id = 'id3'")
    con.commit()
    con.close()
    capsys.readouterr()
    assert main(["judge", "export", "--db", str(db), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{db}, record 'id3', column 'label': label must be one of" in err
    assert out.read_bytes() == good
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".out")) == []


def test_long_record_ids_are_refused_when_stored_but_old_rows_still_read(tmp_path):
    db = tmp_path / "j.db"
    st = JudgeStore(db)
    long_id = "x" * 65
    with pytest.raises(DataValidationError, match="record_id must be at most 64 characters, got 65") as ei:
        st.import_jsonl(_write(tmp_path / "l.jsonl", [_good(1), _good(2, record_id=long_id)]))
    assert "line 2" in str(ei.value) and _count(db) == 0
    rec = JudgeRecord.from_dict(_good(3))
    rec.record_id = "y" * 84
    with pytest.raises(DataValidationError, match="at most 64"):
        st.add(rec)
    assert st.import_jsonl(_write(tmp_path / "ok.jsonl", [_good(4, record_id="z" * 64)])) == 1
    # a row an older version stored (SQLite does not enforce the column's width) still reads
    con = sqlite3.connect(db)
    con.execute("update records set record_id = ? where record_id = ?", ("w" * 84, "z" * 64))
    con.commit()
    con.close()
    assert [r.record_id for r in JudgeStore(db).records()] == ["w" * 84]
    out = tmp_path / "out.jsonl"
    assert main(["judge", "export", "--db", str(db), "--out", str(out)]) == 0
    assert json.loads(out.read_text())["record_id"] == "w" * 84


def test_export_refuses_a_stored_nan_and_keeps_the_file(tmp_path, capsys):
    """A NaN an older version stored in metadata: named, never written as a non-JSON line."""
    db, out = tmp_path / "j.db", tmp_path / "out.jsonl"
    JudgeStore(db).add_many([JudgeRecord(**_good(i)) for i in range(3)])
    assert main(["judge", "export", "--db", str(db), "--out", str(out)]) == 0
    good = out.read_bytes()
    con = sqlite3.connect(db)
    con.execute("""update records set metadata = '{"a": NaN}' where record_id = 'id1'""")
    con.commit()
    con.close()
    capsys.readouterr()
    assert main(["judge", "export", "--db", str(db), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{db}, record 'id1', column 'metadata': metadata holds a non-finite number (nan)" in err
    assert out.read_bytes() == good


def _digest(path) -> str:
    import hashlib
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("cmd", [["report", "--out", "{tmp}/rep"], ["export", "--out", "{tmp}/out.jsonl"],
                                 ["replay", "--router", "random"]])
def test_read_commands_refuse_a_foreign_sqlite_file_and_leave_it_unchanged(tmp_path, capsys, cmd):
    """``judge report/export/replay`` open the database read-only: an SQLite file of some other
    application gains no tables, keeps its journal mode and bytes, and is refused in one line."""
    db = tmp_path / "app.sqlite"
    con = sqlite3.connect(db)
    con.execute("create table users(name text)")
    con.execute("insert into users values ('ann')")
    con.commit()
    con.close()
    before = _digest(db)
    argv = ["judge", cmd[0], "--db", str(db), *[a.format(tmp=tmp_path) for a in cmd[1:]]]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{db}: not a RouteJudge database (no table records, router_choices, " \
                              "schema_info)" in err[0]
    assert _digest(db) == before and sorted(p.name for p in tmp_path.iterdir()) == ["app.sqlite"]
    con = sqlite3.connect(db)
    assert con.execute("pragma journal_mode").fetchone() == ("delete",)
    assert [r[0] for r in con.execute("select name from sqlite_master where type='table'")] == ["users"]
    con.close()


def test_read_only_store_reads_and_cannot_write(tmp_path):
    db = tmp_path / "j.db"
    with JudgeStore(db) as st:
        st.add_many([JudgeRecord(**_good(i)) for i in range(3)])
    before = _digest(db)
    with JudgeStore(db, read_only=True) as st:
        assert [r.record_id for r in st.records()] == ["id0", "id1", "id2"]
        with pytest.raises(Exception, match="readonly"):
            st.add(JudgeRecord(**_good(9)))
    assert _digest(db) == before and _count(db) == 3


@pytest.mark.parametrize("kind", ["not-sqlite", "truncated", "folder", "zero-version"])
@pytest.mark.parametrize("cmd", ["report", "export", "import"])
def test_broken_database_is_one_line_naming_the_file(tmp_path, capsys, kind, cmd):
    good = tmp_path / "good.db"
    with JudgeStore(good) as st:
        st.add_many([JudgeRecord(**_good(i, query="x" * 500)) for i in range(50)])
    db = tmp_path / "bad.db"
    expect = {"not-sqlite": "(DatabaseError: file is not a database)",
              "truncated": "(DatabaseError: database disk image is malformed)",
              "folder": "is a folder; expected a RouteJudge database (an SQLite file)",
              "zero-version": "schema version 'v1'"}[kind]
    if kind == "not-sqlite":
        db.write_text("hello\n")
    elif kind == "truncated":
        db.write_bytes(good.read_bytes()[:3000])
    elif kind == "folder":
        db.mkdir()
    else:
        db.write_bytes(good.read_bytes())
        con = sqlite3.connect(db)
        con.execute("update schema_info set value = 'v1' where key = 'version'")
        con.commit()
        con.close()
    jsonl = _write(tmp_path / "one.jsonl", [_good(1)])
    arg = {"report": ["--out", str(tmp_path / "rep")], "export": ["--out", str(tmp_path / "o.jsonl")],
           "import": ["--jsonl", str(jsonl)]}[cmd]
    assert main(["judge", cmd, "--db", str(db), *arg]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"recsys-router judge: error: {db}") and expect in err[0]
    assert "sqlalche.me" not in err[0] and not (tmp_path / "rep").exists() and not (tmp_path / "o.jsonl").exists()


@pytest.mark.parametrize("what,n,cap,ok", [("router", 99, 100, True), ("router", 100, 100, False),
                                           ("LLM", 998, 1000, True), ("LLM", 999, 1000, False)])
def test_import_caps_distinct_routers_and_llms(tmp_path, what, n, cap, ok):
    """One imported file may name at most 100 routers and 1,000 LLMs (the report's pairwise
    tables grow with the square of the router count); the line past the limit is named.
    Line k names k + 1 routers (r1 and one new) or k + 2 LLMs (x, y and one new) so far."""
    if what == "router":
        rows = [_good(i, router_choices={"r1": "x", f"router{i}": "y"}) for i in range(n)]
    else:
        rows = [_good(i, feasible=["x", "y", f"m{i}"]) for i in range(n)]
    path = _write(tmp_path / "many.jsonl", rows)
    if ok:
        assert len(read_jsonl(path)) == n
    else:
        with pytest.raises(DataValidationError) as exc:
            read_jsonl(path)
        assert str(exc.value) == (f"{path}, line {n}: the file names more than {cap} distinct {what}s "
                                  "(the limit for one import); split it or drop some")


def _names_file(path, what, prefix, n):
    """n records naming r1 and one new router each (``prefix``i), or x, y and one new LLM each."""
    if what == "router":
        rows = [_good(i, router_choices={"r1": "x", f"{prefix}{i}": "y"}, record_id=f"{prefix}{i}") for i in range(n)]
    else:
        rows = [_good(i, router_choices={"r1": "x"}, feasible=["x", "y", f"{prefix}{i}"], record_id=f"{prefix}{i}")
                for i in range(n)]
    return _write(path, rows)


@pytest.mark.parametrize("what,first,second,cap,ok", [("router", 50, 49, 100, True), ("router", 50, 50, 100, False),
                                                      ("LLM", 499, 499, 1000, True), ("LLM", 499, 500, 1000, False)])
def test_import_caps_the_database_totals_not_only_the_file(tmp_path, capsys, what, first, second, cap, ok):
    """Two files each within the limits: the second may not push the database past them.
    Routers: r1 + 50 (first) = 51, + 49 or 50 new = 100 or 101. LLMs: x, y + 499 = 501, + 499
    or 500 new = 1,000 or 1,001. A merged database's export then imports in one piece."""
    db = tmp_path / "j.db"
    a = _names_file(tmp_path / "a.jsonl", what, "a", first)
    b = _names_file(tmp_path / "b.jsonl", what, "b", second)
    assert main(["judge", "import", "--db", str(db), "--jsonl", str(a)]) == 0
    have = first + (1 if what == "router" else 2)
    if ok:
        assert main(["judge", "import", "--db", str(db), "--jsonl", str(b)]) == 0
        assert _count(db) == first + second
        assert main(["judge", "export", "--db", str(db), "--out", str(tmp_path / "all.jsonl")]) == 0
        assert main(["judge", "import", "--db", str(tmp_path / "copy.db"), "--jsonl", str(tmp_path / "all.jsonl")]) == 0
        assert _count(tmp_path / "copy.db") == first + second
        return
    capsys.readouterr()
    assert main(["judge", "import", "--db", str(db), "--jsonl", str(b)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"recsys-router judge: error: {b}: importing it would make {db} name {cap + 1} distinct "
                   f"{what}s, more than the {cap} one database may hold (it names {have} now, the file "
                   f"{cap + 1 - have} more); nothing was imported: import into another database")
    assert _count(db) == first


def test_database_past_the_limits_still_takes_records_with_known_names(tmp_path):
    """A database an older version merged past the limits: records naming no new router or LLM
    still import; one new name is refused."""
    db = tmp_path / "j.db"
    with JudgeStore(db) as st:  # as several older imports could build it
        st.add_many([JudgeRecord(**_good(i, router_choices={"r1": "x", f"a{i}": "y"}, record_id=f"a{i}"))
                     for i in range(120)])
    known = _write(tmp_path / "known.jsonl", [_good(0, router_choices={"r1": "y", "a7": "x"}, record_id="k0")])
    new = _write(tmp_path / "new.jsonl", [_good(0, router_choices={"r1": "y", "zz": "x"}, record_id="k1")])
    with JudgeStore(db) as st:
        assert st.import_jsonl(known) == 1
        with pytest.raises(DataValidationError, match=r"name 122 distinct routers, more than the 100 one "
                                                      r"database may hold \(it names 121 now, the file 1 more\)"):
            st.import_jsonl(new)
    assert _count(db) == 121
