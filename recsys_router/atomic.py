"""Atomic file writes whose leftovers do not outlive the process that made them.

A write goes to a hidden temporary ``.<name>.<pid>-<random>.tmp`` beside the target and is
moved into place with :func:`os.replace`, so a reader sees the old file or the new one,
never half of one. A process killed mid-write (SIGKILL, power loss) cannot clean up after
itself; its temporary carries its process id, and the next write to the same target removes
every such temporary whose process no longer runs (:func:`remove_stale_temps`).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
from pathlib import Path
from typing import Iterator

__all__ = ["temp_path", "remove_stale_temps", "atomic_write", "pid_alive"]


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
    """True when a process with this id exists (it may belong to another user)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
    pattern = re.compile(rf"^\.{re.escape(target.name)}\.(\d+)-[0-9a-f]+\.tmp$")
    removed = []
    try:
        entries = list(target.parent.iterdir())
    except OSError:
        return removed
    for p in entries:
        m = pattern.match(p.name)
        if not m or pid_alive(int(m.group(1))):
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
