"""Killed writes leave nothing beside the target that survives the next write."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from kill_helpers import dead_pid, sigkill_when

from recsys_router.atomic import (atomic_write, pid_alive, remove_stale_temps, replace_dir,
                                  temp_path)
from recsys_router.cli import main
from recsys_router.datasets import load_dataset
from recsys_router.evaluation import atomic_dir

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def test_convert_killed_mid_write_leaves_nothing_after_the_next_run(tmp_path, capsys):
    out = tmp_path / "emb.parquet"
    ready = tmp_path / "ready"
    # a child writes through atomic_write, signals half-way, then waits to be killed
    code = textwrap.dedent(f"""
        import time
        from pathlib import Path
        from recsys_router.atomic import atomic_write
        with atomic_write(Path({str(out)!r})) as tmp:
            tmp.write_bytes(b"half of a parquet file")
            Path({str(ready)!r}).write_text(str(tmp))
            time.sleep(600)
    """)
    sigkill_when(subprocess.Popen([sys.executable, "-c", code]), ready.exists)
    left = Path(ready.read_text())
    assert left.exists() and left.parent == tmp_path and left.name.startswith(".emb.parquet.")
    assert not out.exists()
    # the next run removes the dead writer's temporary and writes the target
    assert main(["data", "convert", str(FIXTURES / "embedllm"), "--to", str(out)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["emb.parquet", "ready"]
    assert load_dataset(str(out)).shape == (5, 3)


def test_stale_temps_of_dead_pids_go_live_ones_and_others_stay(tmp_path):
    target = tmp_path / "x.csv"
    dead = tmp_path / f".x.csv.{dead_pid()}-0badc0de.tmp"
    dead.write_text("stale")
    dead_dir = tmp_path / f".x.csv.{dead_pid()}-00ff00ff.tmp"   # a half-written folder
    dead_dir.mkdir()
    (dead_dir / "part").write_text("x")
    live = tmp_path / f".x.csv.{os.getpid()}-12345678.tmp"       # a concurrent live writer
    live.write_text("busy")
    other = tmp_path / f".y.csv.{dead_pid()}-0badc0de.tmp"      # another target's temp
    other.write_text("not ours")
    plain = tmp_path / ".x.csv.notapid.tmp"
    plain.write_text("user file")
    removed = remove_stale_temps(target)
    assert sorted(p.name for p in removed) == sorted([dead.name, dead_dir.name])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, other.name, plain.name])


def test_failed_write_keeps_the_old_target_and_no_temp(tmp_path):
    target = tmp_path / "t.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_write(target) as tmp:
            tmp.write_text("new, half")
            raise RuntimeError("disk full")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["t.txt"]
    with pytest.raises(IsADirectoryError, match="is a folder"):
        with atomic_write(tmp_path):
            pass


def test_temp_names_are_unique_and_tagged():
    a, b = temp_path("/d/f.json"), temp_path("/d/f.json")
    assert a != b and a.name.startswith(f".f.json.{os.getpid()}-") and a.suffix == ".tmp"


def test_one_stale_mechanism_for_write_temps_and_export_folders(tmp_path):
    """``clean_stale`` (export folders) and ``remove_stale_temps`` (write temps) share
    ``remove_stale_siblings``: impossible pids count as dead instead of crashing, symbolic
    links are unlinked and never followed, and live writers' entries stay."""
    from recsys_router.export.artifact import clean_stale
    assert pid_alive(os.getpid()) and not pid_alive(0) and not pid_alive(-5)
    assert not pid_alive(10 ** 30)                      # beyond the platform's pid range
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("precious")
    work = tmp_path / "work"
    work.mkdir()
    dead = dead_pid()
    old = work / f".art.old-{dead}-q1"                 # export's backup folder
    (old / "a").mkdir(parents=True)
    huge = work / f".art.tmp-{10 ** 30}-zz"             # a pid no process can have
    huge.mkdir()
    link = work / f".art.tmp-{dead}-ln"                 # hostile: a link to a folder elsewhere
    link.symlink_to(outside, target_is_directory=True)
    live = work / f".art.tmp-{os.getpid()}-busy"
    live.mkdir()
    write_tmp = work / f".art.{dead}-0badc0de.tmp"      # an atomic_write temp of the same name
    write_tmp.write_text("half")
    removed = clean_stale(work / "art")
    assert sorted(p.name for p in removed) == sorted([old.name, huge.name, link.name])
    assert (outside / "keep.txt").read_text() == "precious"
    assert sorted(p.name for p in work.iterdir()) == sorted([live.name, write_tmp.name])
    (work / f".x.csv.{10 ** 30}-ab12cd34.tmp").write_text("half")
    assert [p.name for p in remove_stale_temps(work / "x.csv")] == [f".x.csv.{10 ** 30}-ab12cd34.tmp"]
    assert [p.name for p in remove_stale_temps(work / "art")] == [write_tmp.name]


@pytest.mark.parametrize("mask", [0o022, 0o027])
def test_published_folders_get_mkdir_permissions(tmp_path, mask):
    # mkdtemp makes owner-only (0o700) folders; a published report reads like any other folder
    import stat

    from recsys_router.atomic import temp_dir
    from recsys_router.evaluation.io import atomic_dir
    old = os.umask(mask)
    try:
        (tmp_path / "plain").mkdir()
        want = stat.S_IMODE((tmp_path / "plain").stat().st_mode)
        assert want == 0o777 & ~mask
        assert stat.S_IMODE(temp_dir(tmp_path, ".x.tmp-").stat().st_mode) == want
        with atomic_dir(tmp_path / "res") as d:
            (d / "a.txt").write_text("x")
        assert stat.S_IMODE((tmp_path / "res").stat().st_mode) == want
    finally:
        os.umask(old)


def _failing_second_replace(monkeypatch, tmp_name_part: str):
    """Make ``os.replace`` fail when it moves a folder named like ``tmp_name_part`` in."""
    real = os.replace

    def replace(src, dst):
        if tmp_name_part in Path(src).name:
            raise OSError(28, "No space left on device (simulated)")
        return real(src, dst)
    monkeypatch.setattr(os, "replace", replace)


def test_replace_dir_puts_the_old_folder_back_when_the_new_one_cannot_move_in(tmp_path,
                                                                              monkeypatch):
    out, new = tmp_path / "out", tmp_path / ".out.tmp-new"
    out.mkdir()
    (out / "old.txt").write_text("old")
    new.mkdir()
    (new / "new.txt").write_text("new")
    _failing_second_replace(monkeypatch, ".tmp-new")
    with pytest.raises(OSError, match="simulated"):
        replace_dir(new, out)
    assert (out / "old.txt").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".out.tmp-new", "out"]


def test_atomic_dir_keeps_the_previous_results_when_the_swap_fails(tmp_path, monkeypatch):
    out = tmp_path / "res"
    with atomic_dir(out) as tmp:
        (tmp / "a.txt").write_text("first")
    _failing_second_replace(monkeypatch, ".res.tmp-")
    with pytest.raises(OSError, match="simulated"):
        with atomic_dir(out) as tmp:
            (tmp / "a.txt").write_text("second")
    assert (out / "a.txt").read_text() == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["res"]
    monkeypatch.undo()
    with atomic_dir(out) as tmp:  # and a later run replaces them as usual
        (tmp / "a.txt").write_text("third")
    assert (out / "a.txt").read_text() == "third"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["res"]
