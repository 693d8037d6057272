"""The one Markdown table writer (``recsys_router.markdown``) with hostile names, and the two
reports that use it: the evaluation report (it wrote names unescaped) and RouteJudge's."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from recsys_router.data import RoutingData
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.evaluation import EvalConfig, evaluate, markdown_table, write_results
from recsys_router.judge import report as judge_report
from recsys_router.judge.records import JudgeRecord
from recsys_router.markdown import md_table, md_text

#: names from untrusted data: a column separator, a line break, raw HTML, code spans, a heading
HOSTILE = ["a|b", "x\ny", "<img src=x onerror=alert(1)>", "`code`", "# head", "ok"]


def _cells(line: str) -> int:
    """Cells of one table line as a Markdown renderer splits it (``\\|`` is no separator)."""
    return len(re.split(r"(?<!\\)\|", line.strip())[1:-1])


def _raw(text: str) -> list[str]:
    """Unescaped ``<``, backticks and ``|`` inside a cell: raw HTML or code spans."""
    return re.findall(r"(?<!\\)[<`]", text)


def _check_table(text: str, n_rows: int, n_cols: int) -> None:
    lines = text.splitlines()
    assert len(lines) == 2 + n_rows, lines  # header, rule, one line per row: no line break got in
    assert [_cells(ln) for ln in lines] == [n_cols] * len(lines), lines
    assert not _raw(text)
    assert not any(ln.startswith("#") for ln in lines)


def test_md_text_escapes_by_hand():
    assert md_text("a|b") == "a\\|b"
    assert md_text("x\ny") == "x\\\\ny"  # the newline shows as the two characters \ n, escaped
    assert md_text("![i](u)") == "!\\[i](u)"  # no link, so no image
    assert md_text("<b>*$x$*</b>") == "&lt;b&gt;*$x$*&lt;/b&gt;"  # no raw HTML
    assert md_text("a & b &lt;") == "a &amp; b &amp;lt;"
    assert md_text("`c`") == "\\`c\\`"
    assert md_text("plain-name.v2") == "plain-name.v2"
    # a heading or list marker only where it starts the text; numbers and names unchanged
    assert [md_text(t) for t in ("# h", " #h", "- x", "+ x", "* x", "12. x", "3) x")] == [
        "\\# h", " \\#h", "\\- x", "\\+ x", "\\* x", "12\\. x", "3\\) x"]
    assert [md_text(t) for t in ("-", "-0.5", "0.500", "1.5", "a - b", "x # y")] == [
        "-", "-0.5", "0.500", "1.5", "a - b", "x # y"]


def test_md_text_leaves_names_and_metric_labels_readable():
    """Only what could break a table or add HTML is escaped: ``_`` inside a word and
    parentheses are plain text (they printed as ``mu\\_o`` and ``CPT\\(50%\\)``)."""
    for text in ("mu_o", "V_B", "CPT(50%)", "zero (LLM hull)", "r_o(p=0.5)", "nAUC (code)",
                 "gpt-4-1106-preview", "topic_1 -x router", "a*b_c~d$e{f}"):
        assert md_text(text) == text


def test_md_table_keeps_one_cell_per_column_with_hostile_names():
    df = pd.DataFrame({"router": HOSTILE, "x|y": np.linspace(0, 1, len(HOSTILE)),
                       "<script>": HOSTILE[::-1]})
    text = md_table(df)
    _check_table(text, len(HOSTILE), 3)
    assert text.splitlines()[0] == "| router | x\\|y | &lt;script&gt; |"
    assert text.splitlines()[2] == "| a\\|b | 0.000 | ok |"
    assert text.splitlines()[3] == "| x\\\\ny | 0.200 | \\# head |"


def test_evaluation_markdown_table_escapes_names_and_keeps_number_formats():
    df = pd.DataFrame({"router": ["LLM:a|b", "<img src=x onerror=alert(1)>"], "mu": [0.5, np.nan],
                       "fit s": [1.23456, np.nan]})
    assert markdown_table(df).splitlines() == [
        "| router | mu | fit s |", "|---|---|---|",
        "| LLM:a\\|b | 0.5000 | 1.235 |",
        "| &lt;img src=x onerror=alert(1)&gt; | - | - |"]
    _check_table(markdown_table(df), 2, 3)


def test_evaluation_report_with_hostile_llm_and_dataset_names(tmp_path):
    d = make_synthetic(120, 4, 2, seed=2, with_text=False)
    llms = d.llms.copy()
    llms["name"] = ["a|b", "x\ny", "<img src=x onerror=alert(1)>", "`code`"]
    evil = RoutingData(d.queries, llms, d.scores, d.costs, name="ds\n# <script>alert(1)</script>")
    res = evaluate(evil, EvalConfig(["oracle", "best-single"]), progress=False)
    write_results(res, tmp_path / "o", plots=False)
    report = (tmp_path / "o" / "report.md").read_text(encoding="utf-8")
    assert not _raw(report.replace("`decisions.parquet`", "").replace(
        "`recsys_router.evaluation.metrics_from_decisions`", ""))  # the report's own code spans
    lines = report.splitlines()
    assert lines[0].startswith("# Routing evaluation: ds\\\\n# &lt;script&gt;")
    assert [ln for ln in lines if ln.startswith("# ")] == [lines[0]]  # no injected heading
    notes = lines[lines.index("## Notes") + 2:lines.index("## Leaderboard") - 1]
    assert notes and all(ln.startswith("- ") for ln in notes)  # a name's line break stays in its note
    assert any("strong=x\\\\ny" in ln for ln in notes), notes
    tables, cur = [], []
    for ln in lines + [""]:
        if ln.startswith("|"):
            cur.append(ln)
        elif cur:
            tables.append(cur)
            cur = []
    assert len(tables) >= 3
    for t in tables:  # every line of a table has its header's number of cells
        assert len({_cells(ln) for ln in t}) == 1, t


def test_judge_report_tables_use_the_shared_writer():
    df = pd.DataFrame({"r|c": ["#h", "`x`"], "n": [0.5, np.nan]})
    assert judge_report._md(df) == md_table(df)
    assert judge_report._md(df) == "| r\\|c | n |\n|---|---|\n| \\#h | 0.500 |\n| \\`x\\` |  |"


def test_judge_leaderboard_with_hostile_router_names(tmp_path):
    routers = ["r|1", "r\n2", "<img src=x onerror=alert(1)>", "`r4`"]
    recs = [JudgeRecord(f"q{i}", {r: "xy"[(i + k) % 2] for k, r in enumerate(routers)}, "x", "y",
                        "AB"[i % 2], ["x", "y"], record_id=f"e{i}") for i in range(6)]
    paths = judge_report.write_report(recs, tmp_path / "rep", n_boot=3, seed=0)
    text = paths["leaderboard.md"].read_text(encoding="utf-8")
    _check_table(text, len(routers), _cells(text.splitlines()[0]))
    assert _cells(text.splitlines()[0]) >= 10
    assert [ln.split(" | ")[0] for ln in text.splitlines()[2:]] == [
        "| " + md_text(r) for r in pd.read_csv(paths["leaderboard.csv"])["router"]]


def test_the_terminal_leaderboard_is_the_readmes_format(capsys, tmp_path):
    """``recsys-router evaluate`` prints the leaderboard as README.md shows it: metric labels
    and router names without Markdown backslashes (it printed ``mu\\_o``, ``CPT\\(50%\\)``)."""
    from pathlib import Path

    from recsys_router.cli.evaluate import _print_leaderboard
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    header = next(ln for ln in readme.splitlines() if ln.startswith("| router | mu_o | V_B"))
    labels = [c.strip() for c in header.strip("|").split("|")]
    rows = [["zero (LLM hull)", *[np.nan] * (len(labels) - 2), ""],
            ["r_o(p=0.5)", *[0.5] * (len(labels) - 2), "yes"]]
    _print_leaderboard(pd.DataFrame(rows, columns=labels), tmp_path, False, 1.0)
    lines = capsys.readouterr().out.splitlines()
    assert header in lines
    assert "| zero (LLM hull) | " + " | ".join(["-"] * (len(labels) - 2)) + " |  |" in lines
    assert any(ln.startswith("| r_o(p=0.5) | 0.5000 | ") for ln in lines)


def test_a_note_that_is_a_thematic_break_or_a_bare_number_marker_renders_as_text():
    """``- --`` was a horizontal rule, ``- ***`` a rule inside a list item and ``- 1.`` an
    empty ordered list (the evaluation report writes its notes as ``- {md_text(note)}``)."""
    md = pytest.importorskip("markdown_it").MarkdownIt("commonmark")  # rich's own dependency
    by_hand = {"--": "\\--", "---": "\\---", "***": "\\***", "___": "\\___", "- -": "\\- -",
               " _ _ ": " \\_ _ ", "1.": "1\\.", "12)": "12\\)", "-": "-", "__init__": "__init__",
               "--x": "--x", "-*": "-*"}
    assert {note: md_text(note) for note in by_hand} == by_hand
    for note in ["--", "---", "***", "___", "- - -", "* * *", "1.", "1)", " -- "]:
        html = md.render(f"- {md_text(note)}\n")
        assert html == f"<ul>\n<li>{note.strip()}</li>\n</ul>\n", (note, html)


def _report_notes(notes):
    """The ``## Notes`` lines of the evaluation report rendered for ``notes``."""
    from types import SimpleNamespace

    from recsys_router.evaluation.report import render_report
    cfg = SimpleNamespace(split_column="split", folds=1, split=None, ood_tasks=None, seed=0,
                          encoder=None, pools=["all"])
    res = SimpleNamespace(config=cfg, metrics=pd.DataFrame({"pool": []}), simulated=False,
                          dataset="d", info={}, notes=list(notes), timings=None)
    lines = render_report(res, pd.DataFrame({"router": []}), []).splitlines()
    return lines[lines.index("## Notes") + 2:lines.index("## Leaderboard") - 1]


def test_a_note_that_is_a_lone_list_marker_renders_as_text():
    """``- -`` (likewise ``- *``, ``- +``) was an empty list nested in the note's item; ``#``
    and ``1.`` were escaped already. Table cells keep a bare ``-`` (a missing value)."""
    notes = ["-", "*", "+", "1.", "#", " - ", "-0.5"]
    assert _report_notes(notes) == ["- \\-", "- \\*", "- \\+", "- 1\\.", "- \\#", "-  \\- ",
                                    "- -0.5"]
    md = pytest.importorskip("markdown_it").MarkdownIt("commonmark")
    for note, line in zip(notes, _report_notes(notes)):
        assert md.render(line + "\n") == f"<ul>\n<li>{note.strip()}</li>\n</ul>\n", (note, line)
    assert md_text("-") == "-" and md_table(pd.DataFrame({"a": ["-"]})).splitlines()[-1] == "| - |"
