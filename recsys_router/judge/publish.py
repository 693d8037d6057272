"""Publishing a staged RouteJudge report into its folder, and taking it back.

A report is written in full into a temporary folder beside ``out_dir``
(:func:`recsys_router.judge.report.stage_report`); :meth:`StagedReport.publish` then renames
that folder into place when ``out_dir`` does not exist yet, else moves the files in one by
one, each replacing its old version, which is kept aside. When the caller's next step fails
(``judge simulate --report`` commits its records after publishing), leaving the ``with``
block with the error takes the publication back: a folder it created is removed, replaced
files get their old versions back and added files are removed. Should a file fail to go back
(a rename refused mid-restore), the old versions not yet restored are never deleted: their
folder is moved beside ``out_dir`` and a warning names it.
"""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

__all__ = ["StagedReport"]


class StagedReport:
    """A report written in full into ``tmp``, not yet moved to ``final`` (see the module).

    Example
    -------
    >>> with stage_report(records, "rep/") as staged:  # doctest: +SKIP
    ...     staged.publish()
    ...     store.commit()  # raising here takes the report back
    """

    def __init__(self, tmp: Path, final: Path, names: list[str]):
        self.tmp, self.final, self.names = tmp, final, names
        self.published = False
        self._undo: tuple[bool, list[str], Path | None] | None = None

    def publish(self) -> dict[str, Path]:
        """Move the files into ``final`` (see the module docstring); returns their paths."""
        self._undo = _publish(self.tmp, self.final, self.names)
        self.published = True
        return {name: self.final / name for name in self.names}

    def unpublish(self) -> None:
        """Take :meth:`publish` back (see the module docstring); nothing when it did not run."""
        if self._undo is None:
            return
        created, added, backup = self._undo
        self._undo, self.published = None, False
        _restore(self.final, self.names, created, added, backup)

    def __enter__(self) -> "StagedReport":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        try:
            if exc_type is not None:
                self.unpublish()
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)  # after os.replace of the folder: gone already


def _publish(tmp: Path, final: Path, names) -> tuple[bool, list[str], Path | None]:
    """Move the finished files of ``tmp`` into ``final``. Returns what :func:`_restore` needs:
    whether ``final`` was created here, the names that were new in it, and the folder (inside
    ``tmp``) holding the versions replaced."""
    if not final.exists():
        try:
            os.replace(tmp, final)
            return True, list(names), None
        except OSError:  # created meanwhile by someone else: move file by file
            pass
    created = not final.exists()
    final.mkdir(parents=True, exist_ok=True)
    backup = tmp / ".replaced"
    backup.mkdir()
    added: list[str] = []
    try:
        for name in names:
            if (final / name).exists():
                os.replace(final / name, backup / name)  # kept until the caller's step succeeds
            else:
                added.append(name)
            os.replace(tmp / name, final / name)
    except BaseException:
        _restore(final, names, created, added, backup)
        raise
    return created, added, backup


def _restore(final: Path, names, created: bool, added: list[str], backup: Path | None) -> None:
    """Undo a publication (see the module docstring)."""
    if created:  # a folder made here: nothing of anyone's in it
        shutil.rmtree(final, ignore_errors=True)
        return
    failed = []
    for name in names:
        try:
            if backup is not None and (backup / name).exists():
                os.replace(backup / name, final / name)
            elif name in added:
                (final / name).unlink(missing_ok=True)
        except OSError as exc:
            failed.append(f"{name} ({exc.strerror or exc})")
    if failed and backup is not None and any(backup.iterdir()):
        kept = final.absolute().parent / f".{final.name}.replaced-{os.getpid()}-{id(backup):x}"
        os.replace(backup, kept)  # out of the temporary folder, which is deleted next
        warnings.warn(f"{final}: could not take the report back for {', '.join(failed)[:300]}; "
                      f"the old versions not restored are kept in {kept}", RuntimeWarning,
                      stacklevel=3)
