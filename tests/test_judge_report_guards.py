"""The RouteJudge report with hostile router and LLM names (``$...$`` mathtext, a lone ``$``)
and its all-or-nothing folder: a failed report leaves the folder as it was."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recsys_router.judge import report as R
from recsys_router.judge.records import JudgeRecord

NAMES = ["r$\\foo$", "$x^{$", "plain"]  # the first two break matplotlib's mathtext parser


def _recs():
    out = []
    for i in range(6):
        ch = {NAMES[0]: "m$\\bar$", NAMES[1]: "y", NAMES[2]: "m$\\bar$" if i % 2 else "y"}
        out.append(JudgeRecord(f"q{i}", ch, "m$\\bar$", "y", "AB"[i % 2], ["m$\\bar$", "y"],
                               costs={"m$\\bar$": 1.0, "y": 2.0}, record_id=f"m{i}"))
    return out


def test_mathtext_names_are_drawn_as_written(tmp_path):
    paths = R.write_report(_recs(), tmp_path / "rep", n_boot=5, seed=0)
    assert {p.name for p in (tmp_path / "rep").iterdir()} == set(paths)
    assert all(p.parent == tmp_path / "rep" and p.stat().st_size > 0 for p in paths.values())
    assert sorted(pd.read_csv(paths["leaderboard.csv"])["router"]) == sorted(NAMES)
    assert [p.name for p in tmp_path.iterdir()] == ["rep"]  # no temporary folder left


def test_failed_report_leaves_the_folder_as_it_was(tmp_path, monkeypatch):
    out = tmp_path / "rep"
    R.write_report(_recs(), out, n_boot=5, seed=0)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    (out / "mine.txt").write_text("kept")

    def boom(*a, **k):
        raise RuntimeError("plot failed")
    monkeypatch.setattr(R, "_plot_cost", boom)  # the last plot: every CSV was written before it
    with pytest.raises(RuntimeError, match="plot failed"):
        R.write_report(_recs()[:4], out, n_boot=5, seed=1, title="other")
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.name != "mine.txt"} == before
    assert (out / "mine.txt").read_text() == "kept"
    with pytest.raises(RuntimeError):
        R.write_report(_recs(), tmp_path / "new", n_boot=5, seed=0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]


def test_md_table_escapes_by_hand():
    """The judge's tables go through the shared writer (its escaping: tests/test_markdown.py)."""
    assert R._md(pd.DataFrame({"r|c": ["#h"], "n": [0.5]})) == "| r\\|c | n |\n|---|---|\n| \\#h | 0.500 |"


def test_injected_names_stay_literal_in_the_markdown(tmp_path):
    evil = "r2\n\n# Injected heading\n![img](http://attacker.example/x.png)"
    recs = [JudgeRecord(f"q{i}", {"r1|evil": "x", evil: "y"}, "x", "y", "AB"[i % 2], ["x", "y"],
                        record_id=f"e{i}") for i in range(4)]
    paths = R.write_report(recs, tmp_path / "rep", n_boot=3, seed=0)
    lines = paths["leaderboard.md"].read_text(encoding="utf-8").splitlines()
    assert len(lines) == 4  # header, rule, one row per router: no line break got through
    cells = [len(line.replace("\\|", "").split("|")) for line in lines]
    assert len(set(cells)) == 1  # the "|" in "r1|evil" added no column
    report = paths["report.md"].read_text(encoding="utf-8")
    assert not [ln for ln in report.splitlines() if ln.lstrip().startswith("# Injected")]
    assert "![img]" not in report  # no image: its "[" is escaped
    assert "r1\\|evil" in report and "!\\[img](http://attacker.example/x.png)" in report


def test_no_bootstrap_shows_and_plots_plain_elo(tmp_path, monkeypatch):
    # one game, a's side wins: by hand with K=4 from 1000, E = 0.5 -> a 1002, b 998
    recs = [JudgeRecord("q", {"a": "x", "b": "y"}, "x", "y", "A", ["x", "y"], record_id="n0")]
    seen = []
    orig = R.plt.Axes.errorbar

    def spy(self, x, y, *args, **kw):
        seen.append(list(np.asarray(x, float)))
        return orig(self, x, y, *args, **kw)
    monkeypatch.setattr(R.plt.Axes, "errorbar", spy)
    paths = R.write_report(recs, tmp_path / "rep", n_boot=0, seed=0)
    lines = paths["leaderboard.md"].read_text(encoding="utf-8").splitlines()
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    assert "elo" in head and "elo_median" not in head
    rows = {cells[0]: cells for cells in ([c.strip() for c in ln.strip("|").split("|")] for ln in lines[2:])}
    assert rows["a"][head.index("elo")] == "1002" and rows["b"][head.index("elo")] == "998"
    assert seen == [[998.0, 1002.0]]  # plotted bottom-up (was: NaN medians, nothing drawn)
    assert "no bootstrap" in paths["report.md"].read_text(encoding="utf-8")


@pytest.mark.parametrize("names", [("router", "task", "r3"), ("task", "router", "index")])
def test_routers_and_llms_named_like_the_table_axes(tmp_path, names):
    """Routers called ``router``/``task``/``index`` and an LLM called ``router`` (the index
    axes of the H2H, task and selection tables) used to stop the report at its Markdown."""
    a, b, c = names
    recs = [JudgeRecord(f"q{i}", {a: "router", b: "y", c: "router"}, "router", "y", lab, ["router", "y"],
                        task="task", record_id=f"n{i}") for i, lab in enumerate("ABA")]
    from recsys_router.cli import main
    from recsys_router.judge.store import JudgeStore
    JudgeStore(tmp_path / "j.db").add_many(recs)
    assert main(["judge", "report", "--db", str(tmp_path / "j.db"), "--out", str(tmp_path / "rep"),
                 "--n-boot", "5"]) == 0
    # a won records 1 and 3 against b (it chose the winner "router"), lost record 2; a and c always agree
    lines = (tmp_path / "rep" / "h2h.md").read_text().splitlines()
    row = {ln.split(" | ")[0].lstrip("| "): ln for ln in lines[2:]}
    order = lines[0].strip("| ").split(" | ")[1:]
    cells = dict(zip(order, row[a].strip("| ").split(" | ")[1:]))
    assert cells[b] == "0.667" and cells[c] == "0.500"
    sel = (tmp_path / "rep" / "report.md").read_text().split("## Selection distribution")[1]
    assert f"| {a} | 1.000 | 0.000 |" in sel and f"| {b} | 0.000 | 1.000 |" in sel


def test_many_routers_plot_the_first_30_by_elo_and_keep_the_full_csv(tmp_path):
    """The H2H heatmap grew with the square of the router count (one text per cell, a figure
    of (n + 3) x (0.9 n + 2.2) inches); it now shows the first 30 routers by Elo."""
    from PIL import Image
    names = [f"r{i:02d}" for i in range(35)]
    recs = [JudgeRecord(f"q{t}", {r: "xy"[(i + t) % 2] for i, r in enumerate(names)}, "x", "y", "AB"[t % 2],
                        ["x", "y"], record_id=f"t{t}") for t in range(4)]
    paths = R.write_report(recs, tmp_path / "rep", n_boot=0, seed=0)
    assert pd.read_csv(paths["h2h.csv"], index_col=0).shape == (35, 35)
    with Image.open(paths["h2h_heatmap.png"]) as im:  # a 30-router figure at 120 dpi
        assert im.size == (round((30 + 3.0) * 120), round((0.9 * 30 + 2.2) * 120))
    md = paths["report.md"].read_text().split("## Head-to-head")[1].split("## McNemar")[0]
    assert "show the first 30 of the 35 routers by Elo" in md
    rows = [ln for ln in md.splitlines() if ln.startswith("| r") and not ln.startswith("| router")]
    lb = pd.read_csv(paths["leaderboard.csv"])
    assert [ln.split(" | ")[0][2:] for ln in rows] == list(lb["router"][:30])


def test_csv_names_that_spreadsheets_run_as_formulas_start_with_a_quote(tmp_path):
    import csv
    hostile = ['=HYPERLINK("http://x","y")', "@SUM(1+1)", "-2+3", "+cmd", "\tt"]
    names = [*hostile, "plain"]
    recs = [JudgeRecord(f"q{t}", {r: ["=cmd|x", "y"][(i + t) % 2] for i, r in enumerate(names)}, "=cmd|x", "y",
                        "AB"[t % 2], ["=cmd|x", "y"], task="=task", record_id=f"c{t}") for t in range(4)]
    paths = R.write_report(recs, tmp_path / "rep", n_boot=0, seed=0)
    seen = set()
    for name, p in paths.items():
        if not name.endswith(".csv"):
            continue
        with open(p, newline="", encoding="utf-8") as fh:
            for row in csv.reader(fh):
                for cell in row:
                    try:
                        float(cell)
                        continue  # a number (-0.5) is no formula
                    except ValueError:
                        pass
                    assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), (name, cell)
                    seen.add(cell)
    assert {"'" + n for n in hostile} | {"'=cmd|x", "'=task", "plain"} <= seen
    lb = pd.read_csv(paths["leaderboard.csv"])
    assert sorted(lb["router"]) == sorted(["'" + n for n in hostile] + ["plain"])
    md = paths["leaderboard.md"].read_text()  # the Markdown keeps the names as they are (escaped)
    assert "@SUM(1+1)" in md and "'@SUM" not in md
    # a carriage return first too (not in the report above: an unquoted CR splits a CSV row)
    assert R.csv_safe(pd.DataFrame({"\rc": ["\rr", "-1"], "n": [-1.0, 2.0]})).to_dict("list") == \
        {"'\rc": ["'\rr", "'-1"], "n": [-1.0, 2.0]}


def test_no_disagreement_reports_without_runtime_warnings(tmp_path):
    """Routers that always chose the same LLM play no Elo/BT game: Bradley-Terry is NaN for
    all at once (it used to iterate 10,000 times on NaN and warn three times)."""
    import warnings
    from recsys_router.judge.rating import bradley_terry
    recs = [JudgeRecord(f"q{i}", {"r1": "x", "r2": "x"}, "x", "y", "AB"[i % 2], ["x", "y"], record_id=f"a{i}")
            for i in range(4)]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        bt = bradley_terry(recs)
        paths = R.write_report(recs, tmp_path / "rep", n_boot=5, seed=0)
    assert list(bt.index) == ["r1", "r2"] and bt.isna().all() and bt.name == "bt"
    lb = pd.read_csv(paths["leaderboard.csv"])
    assert lb["bt"].isna().all() and (lb["elo"] == 1000.0).all()
