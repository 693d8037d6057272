"""Atomic output folders: everything is written into a temporary sibling folder and
renamed into place at the end, so a reader never sees a half-written result."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path
from typing import Iterator

import numpy as np

from ..atomic import replace_dir, temp_dir

__all__ = ["atomic_dir", "write_json"]


@contextlib.contextmanager
def atomic_dir(out: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary folder next to ``out``; on success it replaces ``out``.

    On error the temporary folder is removed and ``out`` is left as it was.

    Parameters
    ----------
    out : path
        Final output folder (created or replaced).

    Returns
    -------
    iterator of Path
        The temporary folder to write into.

    Example
    -------
    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()) / "res"
    >>> with atomic_dir(d) as tmp:
    ...     _ = (tmp / "a.txt").write_text("x")
    >>> (d / "a.txt").read_text()
    'x'
    """
    out = Path(out).absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_dir(out.parent, f".{out.name}.tmp-")
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if out.exists() and not out.is_dir():
        shutil.rmtree(tmp, ignore_errors=True)
        raise FileExistsError(f"output path {out} exists and is not a folder")
    try:
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
