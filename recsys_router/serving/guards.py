"""Input guards shared by the HTTP services (router service and RouteJudge voting page).

* :data:`SafeStr`: a pydantic string type that refuses text which cannot be UTF-8 encoded
  (lone surrogates, e.g. from a ``"\\ud800"`` JSON escape) or holds a NUL character (which
  PostgreSQL text columns cannot store), so such text is a 422 at request validation and
  never reaches a model, a database or a log.
* :class:`SafeJSONResponse`: JSON responses that can always be written (ASCII-escaped).
* :func:`validation_message`: a one-line 422 message that never echoes the input.
* :func:`route_label`: the route-table template a request matched, else ``"other"``
  (bounded metric labels).
* :class:`TokenBucket`: a per-client rate limit with a bounded client table.
* :func:`content_length`: a request's declared ``Content-Length``, parsed without ``int()`` on
  a huge string (ASCII digits only).
* :class:`BodyLimit`: request bodies over a size limit (counted in bytes received) are a 413
  before the app reads them, a malformed ``Content-Length`` a 400, and a body that does not
  arrive whole within a deadline a 408.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import OrderedDict
from typing import Annotated, Iterable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import AfterValidator
from starlette.exceptions import HTTPException  # FastAPI's own subclasses it; body parse errors use it
from starlette.responses import JSONResponse
from starlette.routing import Match

__all__ = ["check_text", "SafeStr", "SafeJSONResponse", "validation_message", "printable",
           "route_label", "TokenBucket", "install_error_handlers", "content_length", "BodyLimit"]


def check_text(text: str) -> str:
    """Return ``text`` if it can be UTF-8 encoded and holds no NUL character, else raise
    ``ValueError`` saying where not.

    Parameters
    ----------
    text : str
        A string from a request.

    Returns
    -------
    str
        ``text`` unchanged.

    Example
    -------
    >>> check_text("caf\\u00e9")
    'café'
    >>> check_text("a\\ud800")
    Traceback (most recent call last):
    ...
    ValueError: text cannot be UTF-8 encoded: lone surrogate U+D800 at character 1
    >>> check_text("a\\x00b")
    Traceback (most recent call last):
    ...
    ValueError: text holds a NUL character (U+0000) at character 1
    """
    nul = text.find("\x00")
    if nul >= 0:
        raise ValueError(f"text holds a NUL character (U+0000) at character {nul}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"text cannot be UTF-8 encoded: lone surrogate "
                         f"U+{ord(text[exc.start]):04X} at character {exc.start}") from None
    return text


SafeStr = Annotated[str, AfterValidator(check_text)]
"""A request string that must be valid Unicode (UTF-8 encodable) without NUL characters."""


def printable(text: str, limit: int = 200) -> str:
    """``text`` cut to ``limit`` characters with unencodable characters escaped (``\\ud800``).

    Example
    -------
    >>> printable("a\\ud800b")
    'a\\\\ud800b'
    """
    text = str(text)
    cut = text[:limit] + ("..." if len(text) > limit else "")
    return cut.encode("utf-8", "backslashreplace").decode("utf-8")


class SafeJSONResponse(JSONResponse):
    """A JSON response rendered with ASCII escapes, so odd text in a message can never
    turn an error answer into a 500."""

    def render(self, content) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False,
                          separators=(",", ":")).encode("ascii")


def validation_message(errors: Iterable[dict], max_errors: int = 5) -> str:
    """One line from pydantic/FastAPI validation errors: ``loc: msg; ...``. The input values
    are never echoed (they may be huge, non-finite or not valid Unicode).

    Example
    -------
    >>> validation_message([{"loc": ("body", "budget"), "msg": "Input should be a finite number"}])
    'invalid request: budget: Input should be a finite number'
    """
    errors = list(errors)
    msgs = []
    for e in errors[:max_errors]:
        loc = ".".join(printable(x, 60) for x in e.get("loc", ()) if x != "body")
        msgs.append(f"{loc or 'body'}: {printable(e.get('msg', 'invalid'))}")
    more = f"; and {len(errors) - max_errors} more" if len(errors) > max_errors else ""
    return "invalid request: " + "; ".join(msgs) + more


def install_error_handlers(app: FastAPI, field: str) -> None:
    """Answer validation errors (422) and ``HTTPException`` with ``{field: message}`` through
    :class:`SafeJSONResponse` (headers such as ``Retry-After`` kept), and any other
    exception with a JSON 500 naming only its type.

    Example
    -------
    >>> install_error_handlers(FastAPI(), "error")
    """
    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError):
        return SafeJSONResponse({field: validation_message(exc.errors())}, status_code=422)

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException):
        return SafeJSONResponse({field: exc.detail}, status_code=exc.status_code,
                                headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def _crash(request: Request, exc: Exception):  # a bug: a JSON 500, no traceback
        return SafeJSONResponse({field: f"internal error ({type(exc).__name__})"}, status_code=500)


def route_label(routes, scope) -> str:
    """The path template of the first route in ``routes`` matching ``scope`` (a full match
    or a method mismatch), else ``"other"``: metric labels come from the route table only.

    Example
    -------
    >>> from starlette.routing import Route
    >>> routes = [Route("/llms/{name}", lambda r: None, methods=["DELETE"])]
    >>> route_label(routes, {"type": "http", "path": "/llms/gpt-4", "method": "DELETE"})
    '/llms/{name}'
    >>> route_label(routes, {"type": "http", "path": "/etc/passwd", "method": "GET"})
    'other'
    """
    for r in routes:
        try:
            match, _ = r.matches(scope)
        except Exception:  # noqa: BLE001 - a route that cannot judge the path does not match
            continue
        if match != Match.NONE:
            return getattr(r, "path", None) or "other"
    return "other"


class TokenBucket:
    """Per-client token-bucket rate limit: ``burst`` requests at once, refilled at ``rate``
    per second. At most ``max_clients`` buckets are kept; the least recently seen client
    is forgotten first (it comes back with a full bucket).

    Parameters
    ----------
    rate : float
        Requests per second per client (> 0).
    burst : int
        Bucket size (>= 1).
    max_clients : int
        Most clients remembered.
    clock : callable
        Seconds, monotonic (tests pass a fake clock).

    Example
    -------
    >>> now = [0.0]
    >>> tb = TokenBucket(rate=1.0, burst=2, clock=lambda: now[0])
    >>> [tb.take("ip") for _ in range(3)]
    [0.0, 0.0, 1.0]
    >>> now[0] = 1.0; tb.take("ip")
    0.0
    """

    def __init__(self, rate: float, burst: int, max_clients: int = 100_000, clock=time.monotonic):
        if not rate > 0 or burst < 1:
            raise ValueError(f"rate limit needs rate > 0 and burst >= 1, got rate={rate}, burst={burst}")
        self.rate, self.burst, self.max_clients, self.clock = float(rate), int(burst), int(max_clients), clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, client: str) -> float:
        """Spend one token of ``client``: 0.0 if allowed, else the seconds until one is free."""
        with self._lock:
            now = self.clock()
            tokens, last = self._buckets.pop(client, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - last) * self.rate)
            wait = 0.0
            if tokens >= 1.0:
                tokens -= 1.0
            else:
                wait = (1.0 - tokens) / self.rate
            self._buckets[client] = (tokens, now)
            while len(self._buckets) > self.max_clients:
                self._buckets.popitem(last=False)
            return wait

    def __len__(self) -> int:
        return len(self._buckets)


_DIGITS = frozenset(b"0123456789")


def content_length(headers, limit: int) -> int | None:
    """The ``Content-Length`` a request declares, read from its ASGI ``headers`` (pairs of
    bytes) without calling ``int()`` on a long string.

    The value must be ASCII digits (``"+10"``, ``"-1"``, ``"1e3"`` and ``"\\xb2"`` are
    malformed); leading zeros are dropped. A number with more digits than ``limit`` is over
    the limit whatever its value and is returned as ``limit + 1``. The header may be repeated
    only with the same number.

    Parameters
    ----------
    headers : iterable of (bytes, bytes)
        The request's headers, as an ASGI scope holds them.
    limit : int
        The largest body the caller takes (>= 0).

    Returns
    -------
    int or None
        None without a ``Content-Length``; else the declared size, or ``limit + 1`` for a
        number too long to be within the limit.

    Raises
    ------
    ValueError
        A malformed value or two different values (one line; the value is not echoed).

    Example
    -------
    >>> content_length([(b"content-length", b"0042")], 1000)
    42
    >>> content_length([(b"content-length", b"0" * 5000 + b"31")], 1000)
    31
    >>> content_length([(b"content-length", b"9" * 5000)], 1000)
    1001
    >>> content_length([(b"content-length", b"+10")], 1000)
    Traceback (most recent call last):
    ...
    ValueError: Content-Length is not a whole number of bytes in ASCII digits
    """
    found = None
    for k, v in headers or ():
        if k.lower() != b"content-length":
            continue
        v = bytes(v).strip(b" \t")
        if not v or not _DIGITS.issuperset(v):
            raise ValueError("Content-Length is not a whole number of bytes in ASCII digits")
        v = v.lstrip(b"0") or b"0"
        if found is not None and v != found:
            raise ValueError("Content-Length is given twice with different values")
        found = v
    if found is None:
        return None
    if len(found) > len(str(int(limit))):
        return int(limit) + 1
    return int(found)  # at most as many digits as the limit


class BodyLimit:
    """ASGI middleware: a request body over ``limit`` bytes gets a 413 before the app sees it.

    The limit holds on the bytes actually received, whatever ``Content-Length`` says: the body
    is read up front, at most ``limit`` bytes, in linear time whatever the chunk sizes, and
    handed to the app whole. A well-formed ``Content-Length`` over the limit is refused without
    reading the body (``check_declared``, else left to the app: the router service's guard
    refuses it first); a malformed or conflicting one (see :func:`content_length`; a raw ASGI
    server may pass any) is a 400; a missing or lying one changes nothing. With ``timeout_s``
    the whole body must arrive within that many seconds of the first read, else 408, so a
    client that stops sending holds no request (nor a server's graceful shutdown) for long.

    Parameters
    ----------
    app : ASGI application
    limit : int
        Most bytes of a request body.
    field : str
        Key of the error message in the JSON answer.
    check_declared : bool
        Also refuse a declared ``Content-Length`` over the limit without reading the body.
    timeout_s : float, optional
        Seconds the whole body may take to arrive (None: no deadline).

    Example
    -------
    >>> app.add_middleware(BodyLimit, limit=1_000_000, timeout_s=30.0)   # doctest: +SKIP
    """

    def __init__(self, app, limit: int, field: str = "error", check_declared: bool = False,
                 timeout_s: float | None = None):
        self.app, self.limit, self.field, self.check_declared = app, int(limit), field, check_declared
        self.timeout_s = None if timeout_s is None else float(timeout_s)

    async def _answer(self, scope, receive, send, status: int, message: str):
        # the body was not read to its end: the connection cannot carry another request
        resp = SafeJSONResponse({self.field: message}, status_code=status,
                                headers={"connection": "close"})
        await resp(scope, receive, send)

    async def _refuse(self, scope, receive, send):
        await self._answer(scope, receive, send, 413,
                           f"request body exceeds the limit of {self.limit} bytes")

    async def _read(self, receive) -> list[bytes] | None:
        """The body's chunks; None when it exceeds the limit; a non-request message (a
        disconnect) as the last item."""
        parts, size, more = [], 0, True
        while more:
            msg = await receive()
            if msg["type"] != "http.request":
                parts.append(msg)
                return parts
            chunk = msg.get("body", b"")
            parts.append(chunk)
            size += len(chunk)
            more = msg.get("more_body", False)
            if size > self.limit:
                return None
        return parts

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope.get("method") in ("GET", "HEAD", "OPTIONS"):
            return await self.app(scope, receive, send)
        try:
            declared = content_length(scope.get("headers"), self.limit)
        except ValueError as exc:
            return await self._answer(scope, receive, send, 400, str(exc))
        if declared is not None and declared > self.limit:
            if self.check_declared:
                return await self._refuse(scope, receive, send)
            return await self.app(scope, receive, send)
        try:
            if hasattr(asyncio, "timeout"):  # Python 3.11+: no extra task per request
                async with asyncio.timeout(self.timeout_s):
                    parts = await self._read(receive)
            else:
                parts = await asyncio.wait_for(self._read(receive), self.timeout_s)
        except asyncio.TimeoutError:
            return await self._answer(scope, receive, send, 408,
                                      f"request body not received within {self.timeout_s:g} s")
        if parts is None:
            return await self._refuse(scope, receive, send)
        if parts and isinstance(parts[-1], dict):
            first = parts[-1]  # a disconnect: the app sees it
        else:
            first = {"type": "http.request", "body": b"".join(parts), "more_body": False}
        sent = False

        async def replay():
            nonlocal sent
            if not sent:
                sent = True
                return first
            return await receive()
        await self.app(scope, replay, send)
