"""RouteLLM loaders on hostile hand-written folders: errors at the true file line (MMLU
records spanning lines, MT-Bench JSONL with blank lines), bad turns, repeated questions."""

from __future__ import annotations

import json

import numpy as np
import pytest

from recsys_router.datasets.routellm import load_routellm_mmlu, load_routellm_mtbench
from recsys_router.errors import DataValidationError


def _jsonl(path, records, blank_after=()):
    lines = []
    for k, rec in enumerate(records):
        lines.append(json.dumps(rec))
        if k in blank_after:
            lines.append("")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _judgements(folder, records, questions=None, blank_after=()):
    (folder / "mt_bench").mkdir(parents=True, exist_ok=True)
    _jsonl(folder / "mt_bench" / "judgements.jsonl", records, blank_after)
    if questions is not None:
        _jsonl(folder / "mt_bench" / "question.jsonl", questions)
    return folder


def _j(q, model, turn, score):
    return {"question_id": q, "model": model, "turn": turn, "score": score}


def test_mmlu_bad_boolean_names_the_line_of_the_field(tmp_path):
    (tmp_path / "mmlu").mkdir()
    # record 1 is line 2; record 2 starts on line 3, its prompt ends on line 5 with the grades
    (tmp_path / "mmlu" / "mmlu_x.csv").write_text(
        'prompt,a,b\none,True,False\n"two\nlines\nmore",maybe,True\n', encoding="utf-8")
    with pytest.raises(DataValidationError, match="'maybe' is not a boolean") as err:
        load_routellm_mmlu(tmp_path)
    assert (err.value.row, err.value.column) == (5, "a")


def test_mtbench_duplicate_judgement_names_both_file_lines(tmp_path):
    recs = [_j(1, "a", 1, 8), _j(1, "b", 1, -1), _j(1, "b", 1, 6), _j(1, "a", 1, 7)]
    # lines: 1 a; 2 blank; 3 b (failed, -1); 4 b; 5 blank; 6 a again
    _judgements(tmp_path, recs, blank_after=(0, 2))
    with pytest.raises(DataValidationError, match=r"row 6: duplicate record for query '1-t1' "
                                                  r"and LLM 'a' \(also at row 1\)"):
        load_routellm_mtbench(tmp_path)
    d = load_routellm_mtbench(tmp_path, duplicates="mean")
    np.testing.assert_array_equal(d.scores, [[7.5, 6.0]])


@pytest.mark.parametrize("turn, shown", [(None, "missing turn"), ("two", "turn 'two'"),
                                         (1.5, "turn 1.5"), (0, "turn 0")])
def test_mtbench_bad_turn_names_its_line(tmp_path, turn, shown):
    _judgements(tmp_path, [_j(1, "a", 1, 8), _j(1, "a", turn, 7)], blank_after=(0,))
    with pytest.raises(DataValidationError, match=f"{shown} is not a turn number") as err:
        load_routellm_mtbench(tmp_path)
    assert (err.value.row, err.value.column) == (3, "turn")


def test_mtbench_missing_question_id_is_refused(tmp_path):
    _judgements(tmp_path, [_j(1, "a", 1, 8), _j(None, "a", 1, 7)])
    with pytest.raises(DataValidationError, match="missing question_id") as err:
        load_routellm_mtbench(tmp_path)
    assert err.value.row == 2


def test_mtbench_repeated_question_records(tmp_path):
    q1 = {"question_id": 1, "category": "math", "turns": ["t1 text", "t2 text"]}
    q2 = {"question_id": 2, "category": "code", "turns": ["other"]}
    recs = [_j(1, "a", 1, 8), _j(2, "a", 1, 4)]
    _judgements(tmp_path, recs, questions=[q1, q2, q1])  # an identical repeat: kept once
    d = load_routellm_mtbench(tmp_path)
    assert d.texts == ["t1 text", "other"] and d.queries["task"].tolist() == ["math", "code"]
    _judgements(tmp_path, recs, questions=[q1, q2, {**q1, "category": "writing"}])
    with pytest.raises(DataValidationError, match=r"question_id 1 is given twice with different "
                                                  r"content \(lines 1 and 3\)") as err:
        load_routellm_mtbench(tmp_path)
    assert err.value.row == 3 and err.value.source.endswith("question.jsonl")


@pytest.mark.parametrize("grade, shown", [(42, "grade 42 is outside the MT-Bench scale"),
                                          (-5, "grade -5 is outside the MT-Bench scale"),
                                          (0, "grade 0 is outside the MT-Bench scale"),
                                          (10.5, "grade 10.5 is outside the MT-Bench scale"),
                                          (None, "no grade"),
                                          ("good", "grade 'good' is not a number"),
                                          (True, "grade True is not a number")])
def test_mtbench_grade_off_the_scale_names_its_line(tmp_path, grade, shown):
    # 42 loaded (routellm's /10 then gave 4.2, not in [0, 1]); -5 was dropped as a "-1"
    _judgements(tmp_path, [_j(1, "a", 1, 8), _j(1, "b", 1, 9), _j(2, "a", 1, grade)],
                blank_after=(0,))
    with pytest.raises(DataValidationError, match=shown) as err:
        load_routellm_mtbench(tmp_path)
    assert (err.value.row, err.value.column) == (4, "score")
    assert "expected a number from 1 to 10, or -1 for a judge failure" in str(err.value)


def test_mtbench_only_minus_one_is_a_judge_failure(tmp_path, caplog):
    _judgements(tmp_path, [_j(1, "a", 1, 8), _j(1, "b", 1, -1), _j(2, "a", 1, 1),
                           _j(2, "b", 1, 10), _j(3, "a", 1, 9.5), _j(3, "b", 1, -1.0)])
    with caplog.at_level("WARNING"):
        d = load_routellm_mtbench(tmp_path)
    assert "2 judgements with grade -1 (judge failure) treated as missing" in caplog.text
    assert d.meta["failed_judgements"] == 2
    np.testing.assert_array_equal(d.scores, [[8, np.nan], [1, 10], [9.5, np.nan]])
