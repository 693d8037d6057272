"""RouteJudge SQLite store: schema, atomic writes, tokens, JSONL round trips."""

from __future__ import annotations

import json
import sqlite3

import pytest
from sqlalchemy.exc import IntegrityError

from recsys_router.errors import DataValidationError
from recsys_router.judge.records import JudgeRecord
from recsys_router.judge.store import SCHEMA_VERSION, JudgeStore, TokenError


def _rec(label="A", **kw):
    base = dict(query="2+2?", router_choices={"r1": "x", "r2": "y", "r3": "z"}, llm_a="x", llm_b="y",
                label=label, feasible=["x", "y", "z"], task="math", budget=0.5,
                costs={"x": 0.1, "y": 0.2, "z": 0.3}, latencies={"x": 1.5, "y": 0.5},
                history=[{"role": "user", "content": "hello"}], metadata={"source": "test"})
    base.update(kw)
    return JudgeRecord(**base)


def test_schema_tables_indexes(tmp_path):
    st = JudgeStore(tmp_path / "j.db")
    assert st.schema_version == SCHEMA_VERSION
    con = sqlite3.connect(tmp_path / "j.db")
    tables = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
    assert {"schema_info", "records", "router_choices", "duel_tokens"} <= tables
    idx = {r[0] for r in con.execute("select name from sqlite_master where type='index'")}
    assert {"ix_records_task", "ix_choices_router", "ix_records_llm_a"} <= idx
    con.execute("update schema_info set value='99' where key='version'")
    con.commit()
    con.close()
    st.close()
    with pytest.raises(DataValidationError, match="schema version 99 is newer"):
        JudgeStore(tmp_path / "j.db")


def test_roundtrip_and_rows(tmp_path):
    st = JudgeStore(tmp_path / "j.db")
    recs = [_rec(), _rec("tie", llm_a="z", llm_b="x"), _rec("both_bad")]
    assert st.add_many(recs) == 3
    again = JudgeStore(tmp_path / "j.db")  # reopening loses nothing
    assert again.records() == recs
    assert again.records(task="math") == recs and again.records(task="other") == []
    assert again.comparison_counts() == {"x": 3, "y": 2, "z": 1}
    con = sqlite3.connect(tmp_path / "j.db")
    rows = con.execute("select router, llm, score from router_choices join records on records.id = "
                       "router_choices.record where records.record_id = ? order by router",
                       (recs[0].record_id,)).fetchall()
    assert rows == [("r1", "x", 1.0), ("r2", "y", 0.0), ("r3", "z", None)]
    assert con.execute("select cost_a, cost_b, latency_a from records where record_id = ?",
                       (recs[1].record_id,)).fetchone() == (0.3, 0.1, None)


class _Exploding(JudgeRecord):
    @property
    def attribution(self):  # raised after the records row was inserted
        raise RuntimeError("boom")


def test_one_transaction_or_nothing(tmp_path):
    st = JudgeStore(tmp_path / "j.db")
    rec = _rec()
    st.add(rec)
    with pytest.raises(IntegrityError):
        st.add(_rec(record_id=rec.record_id))  # duplicate id
    with pytest.raises(RuntimeError, match="boom"):
        st.add(_Exploding(**{k: getattr(_rec(), k) for k in JudgeRecord.__dataclass_fields__}))
    con = sqlite3.connect(tmp_path / "j.db")
    assert con.execute("select count(*) from records").fetchone() == (1,)
    assert con.execute("select count(*) from router_choices").fetchone() == (3,)


def test_tokens(tmp_path):
    st = JudgeStore(tmp_path / "j.db")
    st.issue_token("t1", {"k": 1})
    assert st.get_token("t1") == {"k": 1}
    with pytest.raises(ValueError):
        st.redeem("t1", lambda p: _rec(label="nope"))  # failing build: nothing written, token still usable
    assert st.count() == 0 and st.get_token("t1") == {"k": 1}
    rec = st.redeem("t1", lambda p: _rec(metadata=p))
    assert st.records() == [rec]
    for fn in (lambda: st.redeem("t1", lambda p: _rec()), lambda: st.get_token("t1")):
        with pytest.raises(TokenError) as ei:
            fn()
        assert ei.value.status == 409
    with pytest.raises(TokenError) as ei:
        st.redeem("nope", lambda p: _rec())
    assert ei.value.status == 404
    assert st.count() == 1


def test_jsonl_roundtrip(tmp_path):
    st = JudgeStore(tmp_path / "a.db")
    recs = [_rec(), _rec("B")]
    st.add_many(recs)
    assert st.export_jsonl(tmp_path / "r.jsonl") == 2
    lines = (tmp_path / "r.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["attribution"] == {"r1": 1.0, "r2": 0.0, "r3": None}
    other = JudgeStore(tmp_path / "b.db")
    assert other.import_jsonl(tmp_path / "r.jsonl") == 2
    assert other.records() == recs
    assert other.import_jsonl(tmp_path / "r.jsonl") == 0  # already there
    with pytest.raises(DataValidationError, match="already stored"):
        other.import_jsonl(tmp_path / "r.jsonl", skip_existing=False)


def test_jsonl_bad_line_writes_nothing(tmp_path):
    good = json.dumps(_rec().to_dict())
    bad = json.loads(good)
    bad["label"] = "C"
    (tmp_path / "bad.jsonl").write_text(good + "\n" + json.dumps(bad) + "\n")
    st = JudgeStore(tmp_path / "c.db")
    with pytest.raises(DataValidationError, match=r"bad.jsonl, line 2.*label must be one of"):
        st.import_jsonl(tmp_path / "bad.jsonl")
    (tmp_path / "bad2.jsonl").write_text(good + "\n{not json\n")
    with pytest.raises(DataValidationError, match="line 2 is not valid JSON"):
        st.import_jsonl(tmp_path / "bad2.jsonl")
    assert st.count() == 0
