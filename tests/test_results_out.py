"""``--out`` of the results commands (evaluate, demo, scaling, coldstart, bandit, ope): an
existing folder is replaced only when it is this tool's own results folder (or empty), the
check comes before any work, and a killed write leaves nothing that outlives the next one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from kill_helpers import dead_pid

from recsys_router.cli import main
import recsys_router.evaluation.io as eio
from recsys_router.evaluation.io import atomic_dir

EVAL = ["evaluate", "--data", "synthetic", "--data-option", "n_queries=120", "--routers",
        "best-single", "--protocol", "routereval", "--no-progress", "--no-plots", "--seed", "0"]


def test_evaluate_refuses_a_folder_of_user_files_and_leaves_it_untouched(tmp_path, capsys):
    user = tmp_path / "mydata"
    user.mkdir()
    (user / "NOTES.txt").write_text("precious notes")
    assert main([*EVAL, "--out", str(user)]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "not a recsys-router results folder" in err
    assert "Traceback" not in err and "choose another --out folder" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mydata"]
    assert [p.name for p in user.iterdir()] == ["NOTES.txt"]
    assert (user / "NOTES.txt").read_text() == "precious notes"


def test_out_dot_is_refused_for_scaling(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.txt").write_text("keep")
    rc = main(["scaling", "--data", "synthetic", "--data-option", "n_queries=120", "--subsets", "2",
               "--max-m", "3", "--seed", "0", "--out", "."])
    assert rc == 2
    err = capsys.readouterr().err
    assert "--out" in err and "current folder" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.txt"]


def test_the_current_folder_is_refused_even_when_empty(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="current folder"):
        eio.check_out_dir(".")
    with pytest.raises(ValueError, match="current folder"):
        eio.check_out_dir("..")


def test_rerunning_into_the_tools_own_results_folder_replaces_it(tmp_path, capsys):
    out = tmp_path / "results" / "ev"
    assert main([*EVAL, "--out", str(out)]) == 0
    marker = json.loads((out / eio.MARKER).read_text())
    assert marker["format"] == "recsys-router-results" and "metrics.csv" in marker["files"]
    (out / "metrics.csv").write_text("stale")
    assert main([*EVAL, "--out", str(out)]) == 0   # what README commands and benchmarks do
    assert (out / "metrics.csv").read_text() != "stale"
    assert sorted(p.name for p in out.parent.iterdir()) == ["ev"]


def test_a_results_folder_with_extra_user_files_is_refused(tmp_path, capsys):
    out = tmp_path / "ev"
    assert main([*EVAL, "--out", str(out)]) == 0
    (out / "my_notes.md").write_text("mine")
    capsys.readouterr()
    assert main([*EVAL, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "my_notes.md" in err and "would delete them" in err
    assert (out / "my_notes.md").read_text() == "mine" and (out / "metrics.csv").exists()


def test_a_forged_or_broken_marker_does_not_make_a_results_folder(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    (out / "a.txt").write_text("x")
    for text in ("not json", json.dumps({"format": "other", "files": ["a.txt"]}),
                 json.dumps({"format": "recsys-router-results", "files": "a.txt"})):
        (out / eio.MARKER).write_text(text)
        with pytest.raises(ValueError, match="not a recsys-router results folder"):
            eio.check_out_dir(out)
    link = tmp_path / "link"
    link.symlink_to(out)
    with pytest.raises(ValueError, match="symbolic link"):
        eio.check_out_dir(link)


def _no_work(*args, **kwargs):
    raise AssertionError("the work started before --out was checked")


def test_a_file_at_out_is_refused_before_any_work(tmp_path, monkeypatch, capsys):
    import recsys_router.cli.evaluate as cli_eval
    import recsys_router.feedback.workflow as workflow
    afile = tmp_path / "afile"
    afile.write_text("x")
    monkeypatch.setattr(cli_eval, "_load", _no_work)        # loading the data comes first
    monkeypatch.setattr(workflow, "load_log", _no_work)
    for argv in ([*EVAL, "--out", str(afile)],
                 [*EVAL[:7], "--protocol", "coldstart", "--out", str(afile)],
                 [*EVAL[:7], "--protocol", "bandit", "--out", str(afile)],
                 ["demo", "--out", str(afile)],
                 ["scaling", "--data", "synthetic", "--out", str(afile)],
                 ["ope", "--log", str(tmp_path / "log.parquet"), "--router", "mf",
                  "--out", str(afile)]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "--out" in err and "exists and is not a folder" in err, (argv, err)
    assert afile.read_text() == "x" and sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


def test_a_stale_temporary_of_a_dead_process_is_removed_by_the_next_write(tmp_path):
    dead, live = dead_pid(), os.getpid()
    stale = tmp_path / f".res.tmp-{dead}-0123abcd"
    stale_old = tmp_path / f".res.old-{dead}-0123abcd"
    running = tmp_path / f".res.tmp-{live}-89abcdef"
    for d in (stale, stale_old, running):
        d.mkdir()
        (d / "metrics.csv").write_text("half")
    with atomic_dir(tmp_path / "res") as tmp:
        assert tmp.name.startswith(f".res.tmp-{live}-")
        (tmp / "a.txt").write_text("x")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([running.name, "res"])


def test_a_sigkilled_results_write_leaves_nothing_after_the_next_write(tmp_path):
    child = textwrap.dedent("""
        import os, signal
        from recsys_router.evaluation.io import atomic_dir
        with atomic_dir("res") as tmp:
            (tmp / "metrics.csv").write_text("half")
            os.kill(os.getpid(), signal.SIGKILL)
    """)
    r = subprocess.run([sys.executable, "-c", child], cwd=tmp_path)
    assert r.returncode == -9
    left = [p.name for p in tmp_path.iterdir()]
    assert len(left) == 1 and left[0].startswith(".res.tmp-")
    with atomic_dir(tmp_path / "res") as tmp:
        (tmp / "metrics.csv").write_text("done")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["res"]
    assert (tmp_path / "res" / "metrics.csv").read_text() == "done"


def test_results_of_an_earlier_version_without_a_marker_are_replaced(tmp_path):
    """Folders written before the marker existed hold only the names those writes used: they
    are replaced (with a marker from then on); one file of another name keeps them refused."""
    out = tmp_path / "old"
    out.mkdir()
    for name in ("metrics.csv", "report.md", "curves.csv", "cost_quality.png"):
        (out / name).write_text("x")
    assert eio.check_out_dir(out) == out.absolute()
    with atomic_dir(out) as tmp:
        (tmp / "metrics.csv").write_text("new")
    assert sorted(p.name for p in out.iterdir()) == sorted([eio.MARKER, "metrics.csv"])
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "metrics.csv").write_text("x")
    (mine / "syn.csv").write_text("my data")
    with pytest.raises(ValueError, match="not a recsys-router results folder"):
        eio.check_out_dir(mine)
    plots = tmp_path / "plots"  # pictures alone are no results
    plots.mkdir()
    (plots / "a.png").write_text("x")
    with pytest.raises(ValueError, match="not a recsys-router results folder"):
        eio.check_out_dir(plots)


def test_results_moved_aside_by_a_killed_swap_are_put_back(tmp_path):
    """A write killed between its two renames leaves ``out`` missing and the previous results
    in ``.OUT.old-PID-HEX/a``; the next write puts them back first and then replaces them as
    usual (before, the stale-temporary cleanup deleted them)."""
    out = tmp_path / "res"
    with atomic_dir(out) as tmp:
        (tmp / "metrics.csv").write_text("old")
    aside = tmp_path / f".res.old-{dead_pid()}-0badc0de"
    aside.mkdir()
    out.rename(aside / "a")
    assert not out.exists()
    from recsys_router.atomic import restore_moved_aside
    assert restore_moved_aside(out, eio.MARKER) == out
    assert (out / "metrics.csv").read_text() == "old"
    out.rename(aside / "a")  # killed again; this time the next write recovers it itself
    with atomic_dir(out) as tmp:
        assert (out / "metrics.csv").read_text() == "old"
        (tmp / "metrics.csv").write_text("new")
    assert (out / "metrics.csv").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["res"]
