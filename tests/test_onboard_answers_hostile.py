"""``onboard --scores``: the answers file goes through the loaders' CSV reader, so a file that
pandas would read silently wrong is refused naming its line, and errors name file lines."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recsys_router.cli import main
from recsys_router.coldstart.onboard import read_answers
from recsys_router.errors import DataValidationError


def _write(tmp_path, content: str | bytes):
    p = tmp_path / "answers.csv"
    if isinstance(content, bytes):
        p.write_bytes(content)
    else:
        p.write_text(content, encoding="utf-8")
    return p


@pytest.mark.parametrize("content, message", [
    # pandas alone would make the first field the index: the texts become the query ids and
    # the scores come from the extra field
    ("query_id,text,score\nq1,first text,1,0.25\nq2,second text,0,0.75\n",
     r"answers.csv.*line 2 has 4 fields but the header has 3"),
    ("query_id,text,score,score\nq1,a,1,0\n", "the header names column 'score' twice"),
    (b"query_id,text,score\nq1,caf\xe9,1\n", r"row 2: byte 0xe9 is not UTF-8"),
    # errors name file lines: record 0 spans lines 2-4, so record 1 starts on line 5
    ('query_id,text,score\nq1,"a\nb\nc",1\nq2,plain,oops\n',
     r"answers.csv, row 5, column 'score': score 'oops' is not a finite number"),
    # a missing score and an infinite cost are shown as numbers, not as numpy reprs
    ("query_id,text,score\nq1,a,1\nq2,b,\n",
     r"answers.csv, row 3, column 'score': score nan is not a finite number"),
    ("query_id,text,score,cost\nq1,a,1,inf\n",
     r"answers.csv, row 2, column 'cost': cost inf is not a finite number"),
    ('query_id,text,score\nq1,"a\nb",1\nq1,again,0\n',
     r"row 4, column 'query_id': query 'q1' appears twice"),
    # an empty id on file line 4 (third record) is reported there, not as record 2
    ("query_id,text,score\nq1,hello,1\nq2,world,0\n,third,1\n",
     r"answers.csv, row 4, column 'query_id': empty query_id"),
    ("query_id,text,score\nq1,hello,1\n  ,world,0\n",
     r"answers.csv, row 3, column 'query_id': empty query_id '  '"),
    # one text answered twice (1 then 0) is one probe, not two: both lines are named
    ("text,score\nwhat is 2+2?,1\nother,1\nwhat is 2+2?,0\n",
     r"row 4, column 'text': probe text 'what is 2\+2\?' appears twice \(lines 2 and 4\)"),
    # a negative cost after a multi-line text: the file line (5), not the record index (1)
    ('query_id,text,score,cost\nq1,"a\nb\nc",1,0.001\nq2,plain,0,-1.0\n',
     r"answers.csv, row 5, column 'cost': cost -1.0 is negative; expected a cost >= 0"),
    # a text of spaces only is no probe text (the {text: score} form refuses it too); with
    # query ids the message says an empty cell takes the text from --data
    ('query_id,text,score\nq1,"a\nb",1\nq2," \t ",0\n',
     r"answers.csv, row 4, column 'text': text ' \\t ' is blank; expected the probe's query "
     r"text \(or an empty cell, to take it from --data by query_id\)"),
    ("text,score\nfine,0\n   ,1\n",
     r"answers.csv, row 3, column 'text': text '   ' is blank; expected the probe's query text$"),
    # a header alone is no probes (with a weight column it read as "every weight is 0")
    ("query_id,text,score,weight\n", r"answers.csv: no probe records \(at most a header line\)"),
])
def test_a_file_pandas_would_misread_is_refused_naming_its_line(tmp_path, content, message):
    with pytest.raises(DataValidationError, match=message):
        read_answers(_write(tmp_path, content), "new")


def test_a_good_file_still_reads(tmp_path):
    p = _write(tmp_path, 'query_id,text,score,cost,weight\nq1,"multi\nline",1,0.5,2\nq2,b,0,0.25,1\n')
    probes, weights = read_answers(p, "new")
    assert probes.query_ids == ["q1", "q2"]
    assert list(probes.texts) == ["multi\nline", "b"]
    assert probes.scores.ravel().tolist() == [1.0, 0.0]
    assert probes.costs.ravel().tolist() == [0.5, 0.25]
    assert weights.tolist() == [2.0, 1.0]


def test_probes_by_id_may_share_a_text_or_have_none(tmp_path):
    """Two query ids with one text (the shared data has such pairs) are two probes, and ids
    whose queries have no text in --data (a router that reads no text) still read: the
    repeated-text refusal is for files without ids only."""
    from recsys_router.data import RoutingData
    probes, _ = read_answers(_write(tmp_path, "query_id,text,score\nq1,same,1\nq2,same,0\n"), "new")
    assert probes.query_ids == ["q1", "q2"]
    data = RoutingData(["q1", "q2", "q3"], ["a"], [[1.0], [0.0], [1.0]])  # no texts
    probes, _ = read_answers(_write(tmp_path, "query_id,score\nq1,1\nq3,0\n"), "new", data=data)
    assert probes.query_ids == ["q1", "q3"] and probes.scores.ravel().tolist() == [1.0, 0.0]


def _binary_artifact(tmp_path):
    """A best-single artifact fitted on 0/1 scores (its training score range is [0, 1])."""
    from recsys_router.data import RoutingData
    from recsys_router.export.artifact import export_router
    from recsys_router.registry import make_router
    q = pd.DataFrame({"query_id": [f"q{i}" for i in range(6)],
                      "text": [f"question {i}" for i in range(6)]})
    d = RoutingData(q, ["a", "b"], np.array([[1, 0], [0, 1], [1, 1], [1, 0], [0, 0], [1, 0]],
                                           dtype=float))
    r = make_router("best-single").fit(d)
    export_router(r, tmp_path / "art", train_data=d)
    d.to_long().to_csv(tmp_path / "data.csv", index=False)
    return r


def test_a_probe_score_outside_the_training_range_is_refused(tmp_path, capsys):
    # one 7 among 0/1 training scores would outrank every fitted LLM on every query
    r = _binary_artifact(tmp_path)
    assert r.score_range_ == (0.0, 1.0)
    p = _write(tmp_path, "query_id,text,score\nq1,question 1,1\nq2,question 2,7\n")
    with pytest.raises(DataValidationError, match=r"answers.csv, row 3, column 'score': score 7 "
                       r"is off the pool's score scale \[0, 1\]"):
        read_answers(p, "new", score_range=r.score_range_)
    # a loaded artifact does not store the range: onboard takes --data's
    rc = main(["onboard", str(tmp_path / "art"), "--llm", "new", "--scores", str(p),
               "--data", str(tmp_path / "data.csv"), "--out", str(tmp_path / "new")])
    err = capsys.readouterr().err
    assert rc == 2 and "answers.csv, row 3, column 'score': score 7 is off the pool's score scale [0, 1]" in err
    assert not (tmp_path / "new").exists()
    with pytest.raises(ValueError, match=r"probe score -0.5 of 'new' on query 'probe-1' \(text 'question 2'\) is "
                       r"off the scale of the router's training scores \[0, 1\]"):
        r.add_llm("new", {"question 1": 1.0, "question 2": -0.5})
    assert r.llm_names_ == ["a", "b"]
    assert r.add_llm("new", {"question 1": 1.0, "question 2": 0.5}).llm_names_[-1] == "new"
