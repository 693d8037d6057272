"""What the routing proxy relays from a backend: the reply read up to a cap, and the event
stream line by line, each ``data:`` chunk's ``model`` renamed to the routed LLM.

A backend is configured by the operator but answers over the network, so its bytes are
untrusted: a reply over ``MAX_REPLY_BYTES`` is not read further (the proxy answers 502), a
streamed line over ``MAX_STREAM_LINE_BYTES`` (a stream that never sends a line end) and a
chunk that is not strict JSON end the relayed stream with an error event and ``[DONE]``.

Example
-------
>>> rewrite_sse_line(b'data: {"model": "m", "x": 1}', "a")
b'data: {"model": "a", "x": 1}'
"""

from __future__ import annotations

import json

import httpx

__all__ = ["MAX_REPLY_BYTES", "MAX_STREAM_LINE_BYTES", "BAD_CHUNK", "capped_reply",
           "relayed_lines", "rewrite_sse_line", "stream_error"]

#: the longest reply a backend may send (bytes, after content decoding); the proxy's 502 past it
MAX_REPLY_BYTES = 64 * 2**20
#: the longest line of a backend's event stream; the relayed stream ends with an error past it
MAX_STREAM_LINE_BYTES = 8 * 2**20

#: why a streamed chunk is not relayed (the non-streaming path answers such a reply with a 502)
BAD_CHUNK = ("sent a stream chunk that cannot be relayed (not JSON, a non-finite number or "
             "nesting too deep)")


async def capped_reply(resp: httpx.Response, limit: int | None = None) -> bytes | None:
    """The body of a streamed ``resp``, or None once it grows past ``limit`` bytes (default
    ``MAX_REPLY_BYTES``; the rest is never read). The response is closed either way."""
    limit = MAX_REPLY_BYTES if limit is None else limit
    body = bytearray()
    try:
        async for chunk in resp.aiter_bytes():
            if len(body) + len(chunk) > limit:   # checked before the (decoded) chunk is kept
                return None
            body += chunk
    finally:
        await resp.aclose()
    return bytes(body)


async def relayed_lines(resp: httpx.Response, llm: str, broken_off, limit: int | None = None):
    """The backend's event stream as relayed, line by line (each with its line end).

    A chunk :func:`rewrite_sse_line` refuses, a line longer than ``limit`` bytes (default
    ``MAX_STREAM_LINE_BYTES``) or a stream the backend breaks off (an ``httpx.HTTPError``;
    ``broken_off(exc)`` logs it and gives the reason the client sees) ends the relay with
    :func:`stream_error`. Each byte is scanned once for line ends, however the backend splits
    its chunks.
    """
    limit = MAX_STREAM_LINE_BYTES if limit is None else limit
    buf, scanned = bytearray(), 0
    try:
        async for chunk in resp.aiter_bytes():
            buf += chunk
            start = 0
            while (end := buf.find(b"\n", scanned)) >= 0:
                if end - start > limit:   # a whole long line can arrive in one decoded chunk
                    yield stream_error(llm, f"sent a stream line of more than {limit:,} bytes")
                    return
                out = rewrite_sse_line(bytes(buf[start:end]), llm)
                if out is None:
                    yield stream_error(llm, BAD_CHUNK)
                    return
                yield out + b"\n"
                start = scanned = end + 1
            del buf[:start]
            scanned = len(buf)
            if scanned > limit:
                yield stream_error(llm, f"sent a stream line of more than {limit:,} bytes")
                return
        if buf:
            out = rewrite_sse_line(bytes(buf), llm)
            yield stream_error(llm, BAD_CHUNK) if out is None else out
    except httpx.HTTPError as exc:  # the backend's stream broke off: say so, then [DONE]
        yield stream_error(llm, f"failed mid-stream: {broken_off(exc)}")


def stream_error(llm: str, what: str) -> bytes:
    """The event that ends a relayed stream early: an OpenAI-style ``{"error": ...}`` chunk
    (the OpenAI SDKs raise it) and ``data: [DONE]``; the leading blank line ends any event the
    backend left open.

    Example
    -------
    >>> lines = stream_error("a", "failed: timed out").split(b"\\n")
    >>> lines[0], json.loads(lines[1][5:])["error"]["message"], lines[2:]
    (b'', "backend for 'a' failed: timed out", [b'', b'data: [DONE]', b'', b''])
    """
    event = {"error": {"message": f"backend for {llm!r} {what}", "type": "backend_error", "code": 502}}
    return b"\ndata: " + json.dumps(event).encode() + b"\n\ndata: [DONE]\n\n"


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not standard JSON")


def rewrite_sse_line(line: bytes, llm: str) -> bytes | None:
    """One line of a backend's event stream as relayed: a ``data:`` line's JSON with ``model``
    set to ``llm``; other lines, empty data and ``[DONE]`` unchanged. None for a ``data:``
    line that is not strict JSON (not JSON, NaN/Infinity or a number past the float range,
    nesting too deep), which the relay does not pass on.

    Example
    -------
    >>> rewrite_sse_line(b'data: {"model": "m", "x": 1}', "a"), rewrite_sse_line(b"data: [1, NaN]", "a")
    (b'data: {"model": "a", "x": 1}', None)
    """
    if not line.startswith(b"data:"):
        return line
    payload = line[5:].strip()
    if payload == b"[DONE]" or not payload:
        return line
    try:
        obj = json.loads(payload, parse_constant=_refuse_constant)
        if isinstance(obj, dict) and "model" in obj:
            obj["model"] = llm
        return b"data: " + json.dumps(obj, allow_nan=False).encode()
    except (ValueError, RecursionError):  # JSONDecodeError, UnicodeDecodeError, inf from 1e400
        return None
