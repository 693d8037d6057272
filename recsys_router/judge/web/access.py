"""Access control of the voting page's JSON API: an optional voter API key and a per-client
rate limit, plus error answers that never echo odd input.

Both apply to every ``/api/*`` request; the static pages (``/``, ``/stats``, ``/static``)
hold no data and stay open, so a browser can load the page and then send the key. The
client is the peer address of the connection (behind a reverse proxy, every voter shares
the proxy's address: give the proxy its own limit).
"""

from __future__ import annotations

import hmac
import math

from fastapi import FastAPI, Request

from ...serving.guards import SafeJSONResponse, TokenBucket, install_error_handlers
from ...serving.keys import check_api_key

__all__ = ["add_access_control", "client_of", "KEY_HEADER"]

KEY_HEADER = "x-api-key"


def client_of(request: Request) -> str:
    """The client identity used for rate limits and pending-duel caps: the peer address."""
    return request.client.host if request.client is not None else "unknown"


def _given_key(request: Request) -> str:
    auth = request.headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:]
    return request.headers.get(KEY_HEADER, "")


def add_access_control(app: FastAPI, *, api_key: str | None = None, rate: float | None = None,
                       burst: int = 20, prefix: str = "/api/") -> None:
    """Install the key check, the rate limit and the error handlers on ``app``.

    Parameters
    ----------
    app : FastAPI
    api_key : str, optional
        When given, ``/api/*`` requests need ``X-API-Key: KEY`` (or ``Authorization: Bearer
        KEY``); others get 401.
    rate : float, optional
        Requests per second allowed per client on ``/api/*`` (token bucket); beyond it 429
        with ``Retry-After``. None: no limit.
    burst : int
        Requests a client may send at once before the rate applies.
    prefix : str
        Path prefix that is protected.

    Example
    -------
    >>> add_access_control(FastAPI(), api_key="k", rate=5.0, burst=10)
    """
    bucket = TokenBucket(rate, burst) if rate is not None else None
    app.state.rate_limit = bucket
    key = None if api_key is None else check_api_key(api_key, "voter key", in_url=True).encode("utf-8")

    @app.middleware("http")
    async def _access(request: Request, call_next):
        if request.url.path.startswith(prefix):
            if bucket is not None:
                wait = bucket.take(client_of(request))
                if wait > 0:
                    return SafeJSONResponse({"detail": f"rate limit: at most {bucket.rate:g} requests/s "
                                                       f"(bursts of {bucket.burst}); retry in {wait:.1f} s"},
                                            status_code=429, headers={"Retry-After": str(math.ceil(wait))})
            if key is not None and not hmac.compare_digest(_given_key(request).encode("utf-8"), key):
                return SafeJSONResponse({"detail": "missing or wrong voter key (send 'X-API-Key: KEY'; "
                                                   "in a browser, open the page as /?key=KEY)"}, status_code=401)
        return await call_next(request)
    install_error_handlers(app, "detail")
