"""A real ``recsys-router serve`` process against clients that stop sending a body.

A client that sent the headers and part of a body, then nothing, was never timed out, kept
SIGTERM from stopping the server (so the decision log's flush on shutdown never ran) and,
without the API key, still had its body buffered. Now the body has a deadline
(``--body-timeout-s``: 408), shutdown waits at most ``--graceful-timeout-s`` for running
requests, a wrong key is a 401 before any body byte is read, and ``--limit-concurrency``
answers 503 beyond its count of open connections.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx

from recsys_router.feedback.store import DecisionLog
from serve_helpers import free_port, wait_up
from test_feedback_service import knn_artifact  # noqa: F401 - the kNN artifact fixture

ROOT = Path(__file__).resolve().parents[1]
KEY = "k3y"
AUTH = {"Authorization": f"Bearer {KEY}"}


def _serve(art, *extra) -> tuple[subprocess.Popen, int]:
    port = free_port()
    cmd = [sys.executable, "-c", "import sys; from recsys_router.cli import main; sys.exit(main())",
           "serve", str(art), "--port", str(port), *extra]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "OPENBLAS_NUM_THREADS": "1",
                                 "RECSYS_ROUTER_API_KEY": KEY})
    wait_up(f"http://127.0.0.1:{port}", proc, 120.0)
    return proc, port


def _stall(port: int, key: bool = True) -> socket.socket:
    """A connection that sends the headers of a 100-byte POST /route and 9 bytes of it."""
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /route HTTP/1.1\r\nHost: x\r\n" + (f"Authorization: Bearer {KEY}\r\n".encode()
              if key else b"") + b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
              b'{"query":')
    return s


def _answer(s: socket.socket, wait_s: float = 30.0) -> bytes:
    """Everything the server sends until it closes the connection (at most ``wait_s`` each read)."""
    s.settimeout(wait_s)
    got = b""
    while chunk := s.recv(65536):
        got += chunk
    return got


def _route(port: int, n: int) -> None:
    with httpx.Client(timeout=60) as h:
        for i in range(n):
            r = h.post(f"http://127.0.0.1:{port}/route", json={"query": f"q {i}"}, headers=AUTH)
            assert r.status_code == 200, r.text


def _stop(proc: subprocess.Popen, within_s: float = 30.0) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=within_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"the server did not stop within {within_s:g} s of SIGTERM") from None


def test_sigterm_with_stalled_bodies_exits_and_flushes_the_log(tmp_path, knn_artifact):  # noqa: F811
    """Bodies that never arrive, a body deadline far away: shutdown still ends after the
    graceful timeout, and the decisions queued in the log (never flushed by time) are written."""
    url = f"sqlite:///{tmp_path / 'd.db'}"
    proc, port = _serve(knn_artifact, "--log-db", url, "--log-batch", "1000", "--log-flush-ms",
                        "600000", "--body-timeout-s", "600", "--graceful-timeout-s", "1",
                        "--limit-concurrency", "4")
    stalled = []
    try:
        _route(port, 5)
        assert DecisionLog(url).counts()[0] == 0  # all still queued
        stalled.append(_stall(port))
        # answered after the server read the stalled request's headers (sent first)
        assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200
        stalled += [_stall(port), _stall(port)]
        # three stalled connections and this one: the fourth of --limit-concurrency 4
        assert httpx.get(f"http://127.0.0.1:{port}/health").status_code == 503
        _stop(proc)  # was: still running 30 s after SIGTERM, until the client left
        assert DecisionLog(url).counts()[0] == 5
        for s in stalled:  # the server closed them
            assert not _answer(s).startswith(b"HTTP/1.1 200")
    finally:
        for s in stalled:
            s.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_body_deadline_and_key_before_the_body_over_http(tmp_path, knn_artifact):  # noqa: F811
    url = f"sqlite:///{tmp_path / 'd.db'}"
    proc, port = _serve(knn_artifact, "--log-db", url, "--log-batch", "1000", "--log-flush-ms",
                        "600000", "--body-timeout-s", "0.5")
    try:
        unauth = _answer(_stall(port, key=False))  # answered at once, the connection closed
        assert unauth.startswith(b"HTTP/1.1 401") and b"connection: close" in unauth.lower()
        late = _answer(_stall(port))  # was: no answer after 120 s
        assert late.startswith(b"HTTP/1.1 408") and b"connection: close" in late.lower()
        assert late.endswith(b'{"error":"request body not received within 0.5 s"}')
        _route(port, 3)
        m = httpx.get(f"http://127.0.0.1:{port}/metrics", headers=AUTH).text
        assert 'recsys_router_requests_total{endpoint="/route",status="408"} 1' in m
        assert 'recsys_router_requests_total{endpoint="/route",status="401"} 1' in m
        _stop(proc)
        assert DecisionLog(url).counts()[0] == 3
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
