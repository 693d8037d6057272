"""Atomic output folders: everything is written into a temporary sibling folder and
renamed into place at the end, so a reader never sees a half-written result.

A results folder carries a marker file (:data:`MARKER`) that lists the files written with
it. An existing output folder is replaced only when it is empty or such a results folder
holding nothing else (the rule :func:`recsys_router.export.export_router` applies to
artifacts): a folder of other files, the current folder, a file or a symbolic link is
refused by :func:`check_out_dir`, which the commands call before any work. The temporary
sibling is named ``.OUT.tmp-PID-*`` (the replaced folder is moved aside to
``.OUT.old-PID-*`` for a moment); one left by a killed process is removed by the next write
of the same folder (:func:`recsys_router.atomic.remove_stale_siblings`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path
from typing import Iterator

import numpy as np

from ..atomic import (dir_temp_pattern, remove_stale_siblings, replace_dir, restore_moved_aside,
                      temp_dir)

__all__ = ["atomic_dir", "write_json", "check_out_dir", "MARKER"]

#: the file every results folder carries: ``{"format": "recsys-router-results", "files": [...]}``
MARKER = ".recsys-router-results.json"
_FORMAT = "recsys-router-results"
_MARKER_MAX_BYTES = 1 << 20


def _marked_files(out: Path) -> list[str] | None:
    """The files the marker of ``out`` lists, or None when ``out`` has no valid marker."""
    marker = out / MARKER
    if marker.is_symlink() or not marker.is_file() or marker.stat().st_size > _MARKER_MAX_BYTES:
        return None
    try:
        doc = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
        return None
    files = doc.get("files")
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        return None
    return files


def check_out_dir(out: str | os.PathLike, option: str = "--out") -> Path:
    """Check that a results write may create or replace the folder ``out``.

    Allowed: a missing path, an empty folder, or a results folder written by this tool (it
    holds :data:`MARKER` and only the files that marker lists). Anything else would be
    deleted by the replacement and is refused.

    Artifacts follow the same rule through their own check
    (``recsys_router.export.target._check_overwritable``), on purpose not this one: an
    artifact is recognised by its ``manifest.json`` and fixed file set, not by
    :data:`MARKER`; it is replaced only with ``overwrite``; and its errors are
    ``ArtifactError``. Only results folders accept an earlier version's unmarked results.

    Parameters
    ----------
    out : path
        The output folder.
    option : str
        How the error messages name it (the command-line option).

    Returns
    -------
    pathlib.Path
        ``out`` made absolute.

    Raises
    ------
    ValueError
        ``out`` is a file, a symbolic link, the current folder (or holds it), a folder that
        is not a results folder, or a results folder holding other files.

    Example
    -------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "notes.txt").write_text("mine")
    >>> check_out_dir(d / "new") == d / "new"
    True
    >>> check_out_dir(d)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: --out ... exists and is not a recsys-router results folder ...
    """
    out = Path(out).absolute()
    if out.is_symlink():
        raise ValueError(f"{option} {out} is a symbolic link; results replace only a real folder: "
                         f"choose another {option} folder")
    if not out.exists():
        return out
    if not out.is_dir():
        raise ValueError(f"{option} {out} exists and is not a folder: choose another {option} "
                         "folder")
    here = Path.cwd().resolve()
    if out.resolve() == here or out.resolve() in here.parents:
        raise ValueError(f"{option} {out} is the current folder (or holds it); the results replace "
                         f"the whole {option} folder: name a new subfolder, e.g. {option} results")
    names = sorted(p.name for p in out.iterdir())
    if not names:
        return out
    files = _marked_files(out)
    if files is None and _unmarked_results(out, names):
        return out
    if files is None:
        raise ValueError(f"{option} {out} exists and is not a recsys-router results folder (its "
                         f"{MARKER} is missing or not a results marker, and it holds files an "
                         f"earlier version's results did not); the results replace only an earlier "
                         f"results folder or an empty folder: choose another {option} folder")
    extra = [n for n in names if n != MARKER and n not in files]
    if extra:
        raise ValueError(f"{option} {out} holds files that are not part of its results "
                         f"({[n[:80] for n in extra[:5]]}); replacing it would delete them: move "
                         f"them away or choose another {option} folder")
    return out


#: the files results writes made before folders carried :data:`MARKER` (plus ``*.png``)
_UNMARKED_NAMES = frozenset({"curves.csv", "decisions.parquet", "metrics.csv", "metrics.json",
                             "report.md", "timings.csv", "config.json", "summary.csv",
                             "regret.csv", "scaling.csv", "scaling.json", "ope.csv"})


def _unmarked_results(out: Path, names: list[str]) -> bool:
    """Whether a folder without :data:`MARKER` is a results folder of an earlier version: only
    plain files of the names those versions wrote, a table of results among them."""
    if not {"metrics.csv", "scaling.csv", "ope.csv"} & set(names):
        return False
    return all((n in _UNMARKED_NAMES or n.endswith(".png")) and (out / n).is_file()
               and not (out / n).is_symlink() for n in names)


@contextlib.contextmanager
def atomic_dir(out: str | os.PathLike, option: str = "--out") -> Iterator[Path]:
    """Yield a temporary folder next to ``out``; on success it replaces ``out``.

    ``out`` is checked with :func:`check_out_dir` on entry and again before the swap (a
    refused ``out`` is left as it was); the published folder gets :data:`MARKER`, listing
    what was written. On error the temporary folder is removed and ``out`` is left as it
    was. Temporaries of dead processes beside ``out`` are removed on entry.

    Parameters
    ----------
    out : path
        Final output folder (created, or replaced when :func:`check_out_dir` allows it).
    option : str
        How error messages name ``out``.

    Returns
    -------
    iterator of Path
        The temporary folder to write into.

    Raises
    ------
    ValueError
        ``out`` may not be replaced (see :func:`check_out_dir`).

    Example
    -------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()) / "res"
    >>> with atomic_dir(d) as tmp:
    ...     _ = (tmp / "a.txt").write_text("x")
    >>> (d / "a.txt").read_text(), sorted(p.name for p in d.iterdir())
    ('x', ['.recsys-router-results.json', 'a.txt'])
    """
    out = Path(out).absolute()
    restore_moved_aside(out, MARKER)  # a write killed between its renames: the old results
    out = check_out_dir(out, option)
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_siblings(out, dir_temp_pattern(out))
    tmp = temp_dir(out.parent, f".{out.name}.tmp-{os.getpid()}-")
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        check_out_dir(out, option)  # what another process put there meanwhile is not deleted
        files = sorted(p.name for p in tmp.iterdir() if p.name != MARKER)
        (tmp / MARKER).write_text(json.dumps({"format": _FORMAT, "files": files}, indent=1) + "\n",
                                  encoding="utf-8")
        replace_dir(tmp, out)  # a failed swap leaves the previous results in place
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return [_jsonable(v) for v in x.tolist()]
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        x = float(x)
        return x if np.isfinite(x) else None
    if isinstance(x, (np.bool_,)):
        return bool(x)
    return x


def write_json(path: str | os.PathLike, obj) -> None:
    """Write ``obj`` as indented JSON (NaN/inf become null, numpy types become Python)."""
    Path(path).write_text(json.dumps(_jsonable(obj), indent=2) + "\n")
