"""``onboard --scores``: the answers file goes through the loaders' CSV reader, so a file that
pandas would read silently wrong is refused naming its line, and errors name file lines."""

from __future__ import annotations

import pytest

from recsys_router.coldstart.onboard import read_answers
from recsys_router.errors import DataValidationError


def _write(tmp_path, text: str):
    p = tmp_path / "answers.csv"
    p.write_text(text, encoding="utf-8")
    return p


def test_a_record_with_an_extra_field_is_refused_not_shifted(tmp_path):
    # pandas alone would make the first field the index: the texts become the query ids and
    # the scores come from the extra field
    p = _write(tmp_path, "query_id,text,score\nq1,first text,1,0.25\nq2,second text,0,0.75\n")
    with pytest.raises(DataValidationError, match=r"answers.csv.*line 2 has 4 fields but the "
                                                  r"header has 3"):
        read_answers(p, "new")


def test_a_header_naming_a_column_twice_is_refused(tmp_path):
    p = _write(tmp_path, "query_id,text,score,score\nq1,a,1,0\n")
    with pytest.raises(DataValidationError, match="the header names column 'score' twice"):
        read_answers(p, "new")


def test_not_utf8_is_refused(tmp_path):
    p = tmp_path / "answers.csv"
    p.write_bytes(b"query_id,text,score\nq1,caf\xe9,1\n")
    with pytest.raises(DataValidationError, match=r"row 2: byte 0xe9 is not UTF-8"):
        read_answers(p, "new")


def test_errors_name_the_file_line_after_multi_line_texts(tmp_path):
    # record 0 spans lines 2-4 (a quoted text with two line breaks); record 1 starts on line 5
    p = _write(tmp_path, 'query_id,text,score\nq1,"a\nb\nc",1\nq2,plain,oops\n')
    with pytest.raises(DataValidationError, match=r"answers.csv, row 5, column 'score': score "
                                                  r"'oops' is not a finite number"):
        read_answers(p, "new")
    p = _write(tmp_path, 'query_id,text,score\nq1,"a\nb",1\nq1,again,0\n')
    with pytest.raises(DataValidationError, match=r"row 4, column 'query_id': query 'q1' appears "
                                                  r"twice"):
        read_answers(p, "new")


def test_a_good_file_still_reads(tmp_path):
    p = _write(tmp_path, 'query_id,text,score,cost,weight\nq1,"multi\nline",1,0.5,2\nq2,b,0,0.25,1\n')
    probes, weights = read_answers(p, "new")
    assert probes.query_ids == ["q1", "q2"]
    assert list(probes.texts) == ["multi\nline", "b"]
    assert probes.scores.ravel().tolist() == [1.0, 0.0]
    assert probes.costs.ravel().tolist() == [0.5, 0.25]
    assert weights.tolist() == [2.0, 1.0]
