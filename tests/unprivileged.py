"""Running a test's check where file modes bind, even as root: a read-only folder must refuse
the process a new file (the read-only judge database and decision-log tests).

Root ignores file modes, so when the tests run as root the check runs in a forked child that
has dropped the capabilities that let root bypass them (``CAP_DAC_OVERRIDE``,
``CAP_DAC_READ_SEARCH``, ``CAP_FOWNER``): the kernel then refuses its writes into a read-only
folder as it does any other user's (the child checks that first).

:func:`copy_with_pending_wal` makes the database those tests open: a copy of a SQLite file in
WAL mode taken while its ``-wal`` still holds committed changes.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import sys
import traceback

import pytest

__all__ = ["unprivileged", "copy_with_pending_wal"]

_DAC_CAPS = (1, 2, 3)  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER


def _drop_file_mode_bypass() -> None:
    """Remove the capabilities that let root ignore file modes from this process's effective set."""
    libc = ctypes.CDLL(None, use_errno=True)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    head, data = Header(0x20080522, 0), (Data * 2)()  # _LINUX_CAPABILITY_VERSION_3
    if libc.capget(ctypes.byref(head), data) != 0:
        raise OSError(ctypes.get_errno(), "capget failed")
    for cap in _DAC_CAPS:
        data[0].effective &= ~(1 << cap) & 0xFFFFFFFF
    if libc.capset(ctypes.byref(head), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


def unprivileged(fn, locked_dir) -> None:
    """Run ``fn()`` where the modes of ``locked_dir`` bind: here when not root, else in a
    forked child without the capabilities above; an assertion failing there fails here."""
    if os.geteuid() != 0:
        fn()
        return
    if not sys.platform.startswith("linux"):
        pytest.skip("running as root off Linux: file modes cannot be made to bind")
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        os.close(rd)
        try:
            _drop_file_mode_bypass()
            try:  # the folder must now refuse this process a new file, or the test proves nothing
                (locked_dir / "probe").write_text("x")
                msg = "SKIP: dropping CAP_DAC_OVERRIDE did not make the read-only folder refuse writes"
            except PermissionError:
                fn()
                msg = "OK"
        except OSError as exc:
            msg = f"SKIP: cannot drop root's file-mode capabilities here ({exc})"
        except BaseException:  # noqa: BLE001 - handed to the parent as text
            msg = "FAIL: " + traceback.format_exc()
        os.write(wr, msg.encode())
        os.close(wr)
        os._exit(0)
    os.close(wr)
    chunks = []
    while chunk := os.read(rd, 65536):
        chunks.append(chunk)
    os.close(rd)
    os.waitpid(pid, 0)
    msg = b"".join(chunks).decode() or "FAIL: the child ended without a word"
    if msg.startswith("SKIP: "):
        pytest.skip(msg[6:])
    assert msg == "OK", msg


def copy_with_pending_wal(engine, live_db, dest_dir, write):
    """Copy ``live_db`` and its ``-wal`` into ``dest_dir`` while the changes ``write()`` makes
    are still only in the ``-wal`` (as a backup of a running service would).

    A connection of ``engine`` (the SQLAlchemy engine of ``live_db``) is held open around
    ``write()`` and the copy, so SQLite does not fold the ``-wal`` back into the file; the
    caller closes its store afterwards. Fails unless the copied ``-wal`` holds something.

    Returns the path of the copied database in ``dest_dir``."""
    wal = live_db.with_name(live_db.name + "-wal")
    with engine.connect():  # held open: the -wal is folded back only when the last one closes
        write()
        shutil.copy(live_db, dest_dir / live_db.name)
        shutil.copy(wal, dest_dir / wal.name)
    assert (dest_dir / wal.name).stat().st_size > 0, f"the copy of {wal} is empty"
    return dest_dir / live_db.name
