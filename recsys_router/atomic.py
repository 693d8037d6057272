"""Atomic file writes whose leftovers do not outlive the process that made them.

A write goes to a hidden temporary ``.<name>.<pid>-<random>.tmp`` beside the target and is
moved into place with :func:`os.replace`, so a reader sees the old file or the new one,
never half of one. A process killed mid-write (SIGKILL, power loss) cannot clean up after
itself; its temporary carries its process id, and the next write to the same target removes
every such temporary whose process no longer runs (:func:`remove_stale_temps`).
:func:`remove_stale_siblings` is the one mechanism behind it, shared with writers that name
their temporaries differently (the artifact export's ``.NAME.tmp-PID-*`` folders).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
from pathlib import Path
from typing import Iterator

__all__ = ["temp_path", "remove_stale_temps", "remove_stale_siblings", "atomic_write", "pid_alive",
           "temp_dir", "replace_dir", "dir_temp_pattern", "restore_moved_aside"]


def temp_path(target) -> Path:
    """A fresh hidden temporary path beside ``target``, tagged with this process id.

    Example
    -------
    >>> p = temp_path("/data/out.parquet")
    >>> p.parent.as_posix(), p.name.startswith(f".out.parquet.{os.getpid()}-"), p.suffix
    ('/data', True, '.tmp')
    """
    target = Path(target)
    return target.with_name(f".{target.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")


def pid_alive(pid: int) -> bool:
    """True when a process with this id may exist (it may belong to another user).

    Ids that no process can have (``<= 0``, beyond the platform's range) are not alive; an
    answer the system cannot give (another ``OSError``) counts as alive, so a temporary is
    never removed on a guess.

    Example
    -------
    >>> pid_alive(os.getpid()), pid_alive(0), pid_alive(10**30)
    (True, False, False)
    """
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OverflowError:
        return False
    except OSError:  # PermissionError included: the process exists but is not ours
        return True
    return True


def remove_stale_siblings(target, pattern: re.Pattern) -> list[Path]:
    """Delete the siblings of ``target`` whose name matches ``pattern`` and whose process is gone.

    ``pattern`` is matched against whole names in ``target``'s folder and must capture the
    writer's process id in a group named ``pid``. Matching folders are removed with their
    contents; a matching symbolic link is unlinked, never followed; entries of live processes
    are kept.

    Parameters
    ----------
    target : path
        The file or folder the temporaries were written for.
    pattern : re.Pattern
        The temporaries' names, with a ``pid`` group.

    Returns
    -------
    list of Path
        What was removed.

    Example
    -------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> (d / ".a.tmp-999999999-x").mkdir()
    >>> pat = re.compile(r"^\\.a\\.tmp-(?P<pid>\\d+)-\\w+$")
    >>> [p.name for p in remove_stale_siblings(d / "a", pat)], os.listdir(d)
    (['.a.tmp-999999999-x'], [])
    """
    target = Path(target)
    removed = []
    try:
        entries = list(target.parent.iterdir())
    except OSError:
        return removed
    for p in entries:
        m = pattern.match(p.name)
        if not m or pid_alive(int(m.group("pid"))):
            continue
        try:
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
            removed.append(p)
        except FileNotFoundError:  # another process cleaned it first
            pass
    return removed


def remove_stale_temps(target) -> list[Path]:
    """Delete the temporaries of ``target`` left by processes that no longer run.

    Only names made by :func:`temp_path` for this very target are considered; temporaries of
    live processes (a concurrent writer) are kept.

    Returns
    -------
    list of Path
        What was removed.

    Example
    -------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / ".x.csv.999999999-ab12cd34.tmp").write_text("half")
    >>> [p.name for p in remove_stale_temps(d / "x.csv")], sorted(os.listdir(d))
    (['.x.csv.999999999-ab12cd34.tmp'], [])
    """
    target = Path(target)
    return remove_stale_siblings(
        target, re.compile(rf"^\.{re.escape(target.name)}\.(?P<pid>\d+)-[0-9a-f]+\.tmp$"))


@contextlib.contextmanager
def atomic_write(target) -> Iterator[Path]:
    """Yield a temporary path to write; on success move it onto ``target``.

    Stale temporaries of dead processes are removed first; on an exception the temporary is
    deleted and ``target`` is untouched. ``target`` must not be a folder.

    Example
    -------
    >>> import tempfile
    >>> out = Path(tempfile.mkdtemp()) / "a.txt"
    >>> with atomic_write(out) as tmp:
    ...     _ = tmp.write_text("done")
    >>> out.read_text(), [p.name for p in out.parent.iterdir()]
    ('done', ['a.txt'])
    """
    target = Path(target)
    if target.is_dir():
        raise IsADirectoryError(f"{target}: is a folder; expected a file path to write")
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temps(target)
    tmp = temp_path(target)
    try:
        yield tmp
        os.replace(tmp, target)
    finally:
        if tmp.is_dir() and not tmp.is_symlink():
            shutil.rmtree(tmp, ignore_errors=True)
        elif tmp.exists() or tmp.is_symlink():
            tmp.unlink()


def dir_temp_pattern(out, kinds: str = "tmp|old") -> re.Pattern:
    """The names :func:`temp_dir` (``.NAME.tmp-PID-HEX``) and :func:`replace_dir`
    (``.NAME.old-PID-HEX``) give the siblings of folder ``out``, with ``kind`` and ``pid``
    groups, for :func:`remove_stale_siblings`.

    Example
    -------
    >>> m = dir_temp_pattern(Path("res")).match(".res.old-42-0badc0de")
    >>> m["kind"], m["pid"]
    ('old', '42')
    """
    name = re.escape(Path(out).name)
    return re.compile(rf"^\.{name}\.(?P<kind>{kinds})-(?P<pid>\d+)-[A-Za-z0-9_]+$")


def restore_moved_aside(out, finished: str) -> Path | None:
    """Put back what a folder replacement killed between its two renames left beside a
    missing ``out``: the previous folder it had moved aside (``.NAME.old-PID-*/a``) or, when
    that was an empty folder, its new folder (``.NAME.tmp-PID-*``), whichever holds the file
    ``finished`` (the one its writer writes last). Only entries of dead processes are used.

    Returns
    -------
    Path or None
        ``out`` when a folder was put back.

    Example
    -------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> (d / ".res.old-999999999-0badc0de" / "a").mkdir(parents=True)
    >>> _ = (d / ".res.old-999999999-0badc0de" / "a" / "done.json").write_text("{}")
    >>> restore_moved_aside(d / "res", "done.json") == d / "res", os.listdir(d / "res")
    (True, ['done.json'])
    """
    out = Path(out)
    if out.exists() or out.is_symlink():
        return None
    try:
        entries = {p.name: p for p in out.parent.iterdir()}
    except OSError:
        return None
    pattern = dir_temp_pattern(out)
    olds = [p for n, p in sorted(entries.items()) if (m := pattern.match(n))
            and m["kind"] == "old" and not pid_alive(int(m["pid"]))]
    for old in olds:
        pid = pattern.match(old.name)["pid"]
        done = [p for n, p in sorted(entries.items()) if (m := pattern.match(n))
                and m["kind"] == "tmp" and m["pid"] == pid]
        for src in [old / "a"] + done:
            mark = src / finished
            if src.is_dir() and not src.is_symlink() and not mark.is_symlink() and mark.is_file():
                try:
                    os.rename(src, out)
                except OSError:
                    return None
                return out
    return None


def temp_dir(parent, prefix: str) -> Path:
    """A new empty folder in ``parent`` to build an output in before it is renamed into place,
    with the permissions ``mkdir`` would give (``0o777`` less the umask), not ``mkdtemp``'s
    owner-only ``0o700``, so the published folder reads like any other.

    Example
    -------
    >>> import tempfile
    >>> d = temp_dir(tempfile.mkdtemp(), ".out.tmp-")
    >>> d.is_dir() and d.name.startswith(".out.tmp-")
    True
    """
    while True:  # mkdir applies the umask itself; a name taken meanwhile draws another
        d = Path(parent) / f"{prefix}{secrets.token_hex(8)}"
        try:
            d.mkdir()
            return d
        except FileExistsError:
            continue



def replace_dir(tmp, out) -> None:
    """Rename the finished folder ``tmp`` to ``out``, replacing whatever ``out`` holds.

    A folder cannot be renamed onto a non-empty one, so an existing ``out`` is first moved
    aside into ``.<name>.old-<pid>-<random>/a`` (tagged with this process id, the way the
    artifact export's recovery expects), then ``tmp`` is moved in and the old one removed. If
    moving ``tmp`` in fails, the old ``out`` is put back before the error propagates, so
    ``out`` is never left missing by a failed replace.

    Parameters
    ----------
    tmp : path
        The new folder, a sibling of ``out`` (same file system).
    out : path
        Where it goes.

    Example
    -------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> (d / "out").mkdir(); _ = (d / "out" / "old.txt").write_text("old")
    >>> (d / "new").mkdir(); _ = (d / "new" / "new.txt").write_text("new")
    >>> replace_dir(d / "new", d / "out")
    >>> sorted(os.listdir(d)), os.listdir(d / "out")
    (['out'], ['new.txt'])
    """
    tmp, out = Path(tmp), Path(out)
    if not (out.exists() or out.is_symlink()):
        os.replace(tmp, out)
        return
    old = temp_dir(out.parent, f".{out.name}.old-{os.getpid()}-")
    os.replace(out, old / "a")
    try:
        os.replace(tmp, out)
    except BaseException:
        os.replace(old / "a", out)  # the previous folder stays in place (if this fails too,
        shutil.rmtree(old, ignore_errors=True)  # it stays in ``old`` for recovery)
        raise
    shutil.rmtree(old, ignore_errors=True)
