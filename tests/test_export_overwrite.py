"""Overwriting an artifact: a writer killed between its two renames loses nothing (the
next load or export puts the previous artifact back), and ``overwrite`` replaces only an
artifact or an empty folder, never a user's other files."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest
from kill_helpers import dead_pid

from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.export import ArtifactError, export_router, load_router
from recsys_router.export.artifact import clean_stale
from recsys_router.registry import make_router


@pytest.fixture(scope="module")
def data():
    return make_synthetic(40, 3, 2, seed=0)


def _export(data, out, shrink_router="best-single", **kw):
    return export_router(make_router(shrink_router, **kw).fit(data), out, train_data=data,
                         overwrite=True)


def _crash_state(tmp_path, data, new_complete=True):
    """The disk as an overwriting export leaves it when killed after moving the old
    artifact aside and before moving the new one in (pid of a dead process)."""
    out = tmp_path / "art"
    _export(data, out, "task-best")                     # the previous, good artifact
    before = (out / "manifest.json").read_bytes()
    dead = dead_pid()
    old = tmp_path / f".art.old-{dead}-x1"
    old.mkdir()
    os.replace(out, old / "a")
    new = tmp_path / f".art.tmp-{dead}-y2"
    _export(data, new, "best-single")                   # the finished new one
    if not new_complete:
        (new / "manifest.json").unlink()
    return out, before


def test_load_after_a_killed_overwrite_restores_the_previous_artifact(tmp_path, data):
    out, before = _crash_state(tmp_path, data)
    assert not out.exists()
    r = load_router(out)
    assert type(r.router).__name__ == "TaskBestRouter"
    assert (out / "manifest.json").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["art"]    # siblings removed


def test_export_without_overwrite_after_a_kill_sees_the_restored_artifact(tmp_path, data):
    out, before = _crash_state(tmp_path, data)
    with pytest.raises(ArtifactError, match="already exists"):
        export_router(make_router("best-single").fit(data), out, train_data=data)
    assert (out / "manifest.json").read_bytes() == before
    _export(data, out, "best-single")
    assert type(load_router(out).router).__name__ == "BestSingleRouter"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["art"]


def test_an_empty_folder_moved_aside_lets_the_finished_new_artifact_in(tmp_path, data):
    out = tmp_path / "art"
    dead = dead_pid()
    old = tmp_path / f".art.old-{dead}-x1"
    (old / "a").mkdir(parents=True)                     # the empty folder that was overwritten
    _export(data, tmp_path / f".art.tmp-{dead}-y2", "best-single")
    clean_stale(out)
    assert type(load_router(out).router).__name__ == "BestSingleRouter"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["art"]


def test_an_unfinished_new_artifact_is_never_moved_in(tmp_path, data):
    out = tmp_path / "art"
    dead = dead_pid()
    (tmp_path / f".art.old-{dead}-x1" / "a").mkdir(parents=True)
    half = tmp_path / f".art.tmp-{dead}-y2"
    _export(data, half, "best-single")
    (half / "manifest.json").unlink()                   # killed before the manifest was written
    clean_stale(out)
    assert list(tmp_path.iterdir()) == []


def test_live_writers_entries_are_left_alone(tmp_path, data):
    out = tmp_path / "art"
    _export(data, out)
    mine = tmp_path / f".art.old-{os.getpid()}-x1"
    mine.mkdir()
    os.replace(out, mine / "a")
    clean_stale(out)
    assert not out.exists() and (mine / "a" / "manifest.json").is_file()


def test_real_kill_between_the_renames(tmp_path, data):
    """A child process dies (os._exit) right after moving the old artifact aside."""
    out = tmp_path / "art"
    _export(data, out, "task-best")
    child = textwrap.dedent(f"""
        import os
        import recsys_router.export.artifact as art
        from recsys_router.datasets.synthetic import make_synthetic
        from recsys_router.registry import make_router
        real = os.replace
        def replace(a, b):
            real(a, b)
            os._exit(9)
        art.os.replace = replace
        d = make_synthetic(40, 3, 2, seed=0)
        art.export_router(make_router("best-single").fit(d), {str(out)!r}, train_data=d,
                          overwrite=True)
    """)
    assert subprocess.call([sys.executable, "-c", child]) == 9
    assert not out.exists()
    assert type(load_router(out).router).__name__ == "TaskBestRouter"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["art"]


def test_overwrite_refuses_a_folder_that_is_not_an_artifact(tmp_path, data):
    target = tmp_path / "results"
    (target / "runs").mkdir(parents=True)
    (target / "important.csv").write_text("a,b\n1,2\n")
    with pytest.raises(ArtifactError, match="results exists and is not a recsys-router artifact"):
        _export(data, target)
    assert (target / "important.csv").read_text() == "a,b\n1,2\n"
    assert (target / "runs").is_dir()
    (target / "manifest.json").write_text('{"format": "something else"}')
    with pytest.raises(ArtifactError, match="not a recsys-router artifact"):
        _export(data, target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]   # no temporaries left


def test_overwrite_refuses_an_artifact_holding_other_files(tmp_path, data):
    out = tmp_path / "art"
    _export(data, out)
    (out / "notes.txt").write_text("mine")
    with pytest.raises(ArtifactError, match=r"holds files that are not part of an artifact \(\['notes.txt'\]\)"):
        _export(data, out)
    assert (out / "notes.txt").read_text() == "mine"


def test_overwrite_refuses_a_symlink(tmp_path, data):
    real = tmp_path / "real"
    real.mkdir()
    (real / "keep.txt").write_text("x")
    (tmp_path / "art").symlink_to(real, target_is_directory=True)
    with pytest.raises(ArtifactError, match="symbolic link"):
        _export(data, tmp_path / "art")
    assert (real / "keep.txt").read_text() == "x"


def test_overwrite_replaces_an_empty_folder_and_an_artifact(tmp_path, data):
    out = tmp_path / "art"
    out.mkdir()
    _export(data, out, "task-best")
    assert type(load_router(out).router).__name__ == "TaskBestRouter"
    _export(data, out, "best-single")
    assert type(load_router(out).router).__name__ == "BestSingleRouter"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["art"]


def test_failed_second_rename_puts_the_old_artifact_back(tmp_path, data, monkeypatch):
    import recsys_router.export.artifact as art
    out = tmp_path / "art"
    _export(data, out, "task-best")
    real, calls = os.replace, []

    def replace(a, b):
        calls.append(b)
        if len(calls) == 2:
            raise OSError("disk full")
        real(a, b)
    monkeypatch.setattr(art.os, "replace", replace)
    with pytest.raises(OSError, match="disk full"):
        _export(data, out, "best-single")
    monkeypatch.undo()
    assert type(load_router(out).router).__name__ == "TaskBestRouter"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["art"]


@pytest.mark.parametrize("mask", [0o022, 0o027])
def test_artifacts_get_the_umask_permissions_not_owner_only(tmp_path, data, mask):
    """A service running as another user (same group) reads the artifact: its folder and
    files get mkdir/open's permissions under the umask, also after ``set_default_policy``
    rewrote the manifest (mkdtemp and mkstemp would give 0o700 and 0o600)."""
    import stat

    from recsys_router.export.artifact import set_default_policy
    old = os.umask(mask)
    try:
        (tmp_path / "plain").mkdir()
        (tmp_path / "plain.txt").write_text("x")
        want_dir = stat.S_IMODE((tmp_path / "plain").stat().st_mode)
        want_file = stat.S_IMODE((tmp_path / "plain.txt").stat().st_mode)
        assert (want_dir, want_file) == (0o777 & ~mask, 0o666 & ~mask)
        out = tmp_path / "art"
        for overwrite in (False, True):
            export_router(make_router("best-single").fit(data), out, train_data=data,
                          overwrite=overwrite)
            assert stat.S_IMODE(out.stat().st_mode) == want_dir
            assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in out.iterdir()} == {
                "manifest.json": want_file, "state.json": want_file, "weights.npz": want_file}
        set_default_policy(out, "wtp", 1.0)
        assert stat.S_IMODE((out / "manifest.json").stat().st_mode) == want_file
        assert load_router(out).manifest["default_policy"]["name"] == "wtp"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["art", "plain", "plain.txt"]
    finally:
        os.umask(old)
