"""Start-up helpers for tests that run the router service in a child process."""

from __future__ import annotations

import socket
import subprocess
import time

import httpx

__all__ = ["free_port", "wait_up"]


def free_port() -> int:
    """A loopback TCP port that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(url: str, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    """Poll ``url/health`` until it answers 200; fail with the server's stderr tail if
    ``proc`` exits first, and kill it if it is not up within ``timeout`` seconds."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited: {proc.stderr.read().decode()[-2000:]}")
        try:
            if httpx.get(url + "/health", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"server did not come up in {timeout:g} s")
