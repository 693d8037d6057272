"""Kill a child process with SIGKILL at a chosen moment (tests of interrupted work)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Callable

from recsys_router.atomic import pid_alive


def dead_pid() -> int:
    """The pid of a child process that has already exited (a writer that died)."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    assert not pid_alive(p.pid)
    return p.pid


def sigkill_when(child: subprocess.Popen, ready: Callable[[], bool], timeout: float = 300) -> None:
    """Poll ``ready()`` every 50 ms while ``child`` runs; SIGKILL it as soon as it is true.

    Fails (with the child's stderr when captured) if the child exits first or ``timeout``
    seconds pass; the child is never left running.
    """
    try:
        deadline = time.monotonic() + timeout
        while not ready():
            if child.poll() is not None:
                err = child.stderr.read()[-3000:] if child.stderr else ""
                raise AssertionError(f"child exited with {child.returncode} first: {err}")
            assert time.monotonic() < deadline, "the moment to kill never came"
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(timeout=60)
