"""Where an export may write: the target folder's checks, and the tidying of what a killed
export left behind.

:func:`check_export_target` refuses a target that is not a folder, one that exists without
``overwrite``, and any folder but an empty one or an artifact (``--overwrite`` never deletes
a user's other files); :func:`clean_stale` puts back an artifact that an overwriting export
moved aside before it died and removes dead processes' temporary siblings. Both are
re-exported by :mod:`recsys_router.export.artifact`, whose :func:`export_router
<recsys_router.export.artifact.export_router>` and :func:`load_router
<recsys_router.export.artifact.load_router>` call them.

Example
-------
>>> import tempfile
>>> d = Path(tempfile.mkdtemp())
>>> clean_stale(d / "art")
[]
"""

from __future__ import annotations

import os
from pathlib import Path

from ..atomic import dir_temp_pattern, remove_stale_siblings, restore_moved_aside
from .safe_io import LimitError, read_json
from .verify import _FILES, LIMITS, ArtifactError

__all__ = ["check_export_target", "clean_stale"]


def clean_stale(out: Path) -> list[Path]:
    """Tidy what an export of ``out`` killed mid-way left behind (its process is gone).

    When ``out`` is missing because an overwriting export died between moving the old
    artifact aside and moving the new one in, the old artifact is put back first (or, if
    the folder it had moved aside was empty, its finished new artifact is moved in). Then
    the temporary siblings (``.NAME.tmp-PID-*``, ``.NAME.old-PID-*``) of dead processes are
    removed; the mechanism is :func:`recsys_router.atomic.remove_stale_siblings`.

    Returns
    -------
    list of Path
        The siblings removed.
    """
    out = Path(out)
    restore_moved_aside(out, "manifest.json")  # written last: the artifact is whole
    return remove_stale_siblings(out, dir_temp_pattern(out))


def _check_overwritable(out: Path) -> None:
    """Refuse to overwrite anything but an empty folder or an artifact (a folder holding
    only artifact files, with a manifest that says it is one): ``--overwrite`` never
    deletes a user's other files.

    The same rule as :func:`recsys_router.evaluation.io.check_out_dir` (replace only an empty
    folder or one of this tool's own folders holding nothing else), kept as its own check on
    purpose: an artifact is recognised by its verified ``manifest.json`` (read with the
    loader's size and depth limits) and a fixed file set, a results folder by a marker that
    lists whatever files that run wrote (or, for results of earlier versions, by their file
    names); an artifact is replaced only with ``overwrite``, results always; and the errors
    differ (:class:`ArtifactError` naming the folder, against ``ValueError`` naming the
    command-line option), which callers and tests rely on."""
    if out.is_symlink():
        raise ArtifactError(f"{out} is a symbolic link; overwrite replaces only a real folder")
    names = sorted(p.name for p in out.iterdir())
    if not names:
        return
    try:  # read_json refuses a missing file, a link or anything but a regular file too
        manifest = read_json(out / "manifest.json", max_bytes=LIMITS["manifest_bytes"], max_depth=16)
    except LimitError:
        manifest = None
    if not isinstance(manifest, dict) or manifest.get("format") != "recsys-router-artifact":
        raise ArtifactError(f"{out} exists and is not a recsys-router artifact (its manifest.json "
                            "is missing or not an artifact manifest); overwrite replaces only an "
                            "artifact or an empty folder: choose another output folder")
    extra = [n for n in names if n not in ("manifest.json", *_FILES)]
    if extra:
        raise ArtifactError(f"{out} holds files that are not part of an artifact "
                            f"({[n[:80] for n in extra[:5]]}); overwrite would delete them: move "
                            "them away or choose another output folder")


def check_export_target(out: str | os.PathLike, overwrite: bool = False) -> Path:
    """Check that an export may write the folder ``out`` (after tidying what a killed export
    of it left behind); :func:`export_router` calls it, and the CLI before any fitting.

    Raises
    ------
    ArtifactError
        ``out`` is not a folder, exists without ``overwrite``, or holds anything but an
        artifact (``--overwrite`` never deletes a user's other files).

    Example
    -------
    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp())
    >>> check_export_target(d / "new") == d / "new"
    True
    >>> check_export_target(d)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    recsys_router.export.verify.ArtifactError: ... already exists; pass overwrite=True (CLI: --overwrite)
    """
    out = Path(out)
    clean_stale(out)  # a killed overwrite's old artifact is put back before any check
    if out.exists() and not out.is_dir():
        raise ArtifactError(f"{out} exists and is not a directory")
    if out.exists() and not overwrite:
        raise ArtifactError(f"{out} already exists; pass overwrite=True (CLI: --overwrite)")
    if out.exists() or out.is_symlink():
        _check_overwritable(out)
    return out
