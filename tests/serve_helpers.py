"""Helpers for tests of the router service: start-up of a service in a child process, raw
ASGI requests, and one mocked backend behind the OpenAI-compatible proxy."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import time

import httpx

__all__ = ["free_port", "wait_up", "raw_request", "mock_backend", "mocked_backends"]


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


def raw_request(app, path: str, headers: list[tuple[bytes, bytes]], chunks: list[bytes],
                method: str = "POST", stall: bool = False) -> tuple[int, bytes, int, dict]:
    """One request through the raw ASGI interface, headers and body chunks exactly as given;
    after the last chunk the client sends nothing more (never a disconnect). With ``stall``
    the last chunk says more is coming (a body that stops arriving).

    Returns the status, the response body, how many times the app called ``receive`` and the
    response headers (lower-case names)."""
    msgs = iter([{"type": "http.request", "body": c, "more_body": stall or i < len(chunks) - 1}
                 for i, c in enumerate(chunks)])
    out: list[dict] = []
    reads = 0

    async def receive():
        nonlocal reads
        reads += 1
        try:
            return next(msgs)
        except StopIteration:
            await asyncio.sleep(3600)  # a client that sends nothing more

    async def send(m):
        out.append(m)
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
             "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
             "headers": [(b"content-type", b"application/json")] + headers,
             "client": ("1.2.3.4", 1), "server": ("t", 80), "root_path": ""}
    asyncio.run(asyncio.wait_for(app(scope, receive, send), 30))
    start = next(m for m in out if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in out if m["type"] == "http.response.body")
    return start["status"], body, reads, {k.decode().lower(): v.decode("latin-1")
                                          for k, v in start.get("headers", [])}


def mock_backend(monkeypatch) -> dict:
    """Put one mocked backend (``httpx.MockTransport``) behind the proxy's ``httpx.AsyncClient``
    for the rest of the test.

    Returns a dict: ``"seen"`` lists the JSON bodies the backend received, in order; ``"raw"``
    (bytes), when set, is its whole reply, else it answers ``{"id": "x", "model": <the body's
    model>, "choices": []}``."""
    import recsys_router.serving.openai_proxy as proxy
    answer = {"raw": None, "seen": []}

    def handler(request):
        body = json.loads(request.content)
        answer["seen"].append(body)
        if answer["raw"] is not None:
            return httpx.Response(200, content=answer["raw"],
                                  headers={"content-type": "application/json"})
        return httpx.Response(200, json={"id": "x", "model": body["model"], "choices": []})

    real = httpx.AsyncClient
    monkeypatch.setattr(proxy.httpx, "AsyncClient",
                        lambda **kw: real(transport=httpx.MockTransport(handler), **kw))
    return answer


def mocked_backends(names) -> dict:
    """The ``backends`` setting that puts each LLM of ``names`` behind the mocked backend of
    :func:`mock_backend`, as model ``"m-" + name``."""
    return {n: {"base_url": "http://backend/v1", "model": "m-" + n, "api_key_env": None}
            for n in names}
