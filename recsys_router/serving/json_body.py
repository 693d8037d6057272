"""JSON request bodies of the HTTP services: a key given twice is refused, and in the router
service a body sent under another content type.

Python's ``json`` (and so FastAPI) keeps the last value of a repeated key without a word:
``{"budget": 0, "budget": 1000}`` would route with a budget of 1000 while a log or a proxy in
front may have read 0. :class:`JSONBodyRoute` answers such a body with a 422 naming the key,
before the endpoint runs; the router service and the RouteJudge voting page route every
endpoint through it. The router service's :class:`JSONOnlyRoute` also answers a body sent
without ``Content-Type: application/json`` with a 415 (FastAPI refused it with a 422 that
never named the content type, while the OpenAI proxy read it as JSON; a browser page may send
``text/plain`` to another site without asking first, never ``application/json``).
"""

from __future__ import annotations

import json

from fastapi import Request
from fastapi.routing import APIRoute

from ..json_keys import RepeatedKey, unique_keys
from .guards import SafeJSONResponse, printable

__all__ = ["repeated_key", "is_json_type", "JSONBodyRoute", "JSONOnlyRoute"]


def repeated_key(body: bytes | str) -> str | None:
    """The first key that an object of the JSON document ``body`` names twice (at any depth),
    else None; a body that is not valid JSON is None too (left to the endpoint's own parse).

    Example
    -------
    >>> repeated_key(b'{"budget": 0, "budget": 1000}')
    'budget'
    >>> repeated_key(b'{"messages": [{"role": "user", "role": "system"}]}')
    'role'
    >>> repeated_key(b'{"a": {"b": 1}, "b": 2}') is None, repeated_key(b"{oops") is None
    (True, True)
    """
    try:
        json.loads(body, object_pairs_hook=unique_keys)
    except RepeatedKey as exc:
        return exc.key
    except (ValueError, RecursionError):
        return None
    return None


def is_json_type(content_type: str | None) -> bool:
    """Whether a ``Content-Type`` header names JSON: ``application/json`` or
    ``application/<anything>+json``, parameters such as ``charset`` allowed, case ignored.

    Example
    -------
    >>> is_json_type("application/json; charset=utf-8"), is_json_type("application/merge-patch+json")
    (True, True)
    >>> is_json_type("text/plain"), is_json_type(None), is_json_type("application/jsonx")
    (False, False, False)
    """
    media = (content_type or "").split(";", 1)[0].strip().lower()
    kind, _, sub = media.partition("/")
    return kind == "application" and (sub == "json" or (sub.endswith("+json") and len(sub) > 5))


class JSONBodyRoute(APIRoute):
    """A route whose JSON body may not name a key twice: a 422 ``{error_field: message}``
    naming the key (cut to 100 characters), before the endpoint reads the body. Other
    malformed bodies are left to the endpoint (FastAPI's validation, or its own parse).

    Set it as ``app.router.route_class`` before adding the routes; a subclass may change
    :attr:`error_field` (the key of the JSON error answer).

    Example
    -------
    >>> from fastapi import FastAPI
    >>> app = FastAPI()
    >>> app.router.route_class = JSONBodyRoute
    """

    error_field = "error"
    #: refuse a request body whose ``Content-Type`` is not JSON (415); an empty one is left
    #: to the endpoint (a 400 or 422 saying what is missing)
    require_json_type = False

    def get_route_handler(self):
        handler = super().get_route_handler()
        field, json_only = self.error_field, self.require_json_type

        async def checked(request: Request):
            body = await request.body()  # cached: the endpoint reads the same bytes
            if json_only and body and not is_json_type(request.headers.get("content-type")):
                given = request.headers.get("content-type")
                got = f"got {printable(given, 100)!r}" if given else "none was given"
                return SafeJSONResponse({field: f"the request body must be JSON sent with "
                                                f"'Content-Type: application/json'; {got}"},
                                        status_code=415)
            if body:
                key = repeated_key(body)
                if key is not None:
                    return SafeJSONResponse(
                        {field: f"the request body names the key {printable(key, 100)!r} more "
                                "than once; give each field once"}, status_code=422)
            return await handler(request)
        return checked


class JSONOnlyRoute(JSONBodyRoute):
    """:class:`JSONBodyRoute` that also answers a request body whose ``Content-Type`` is not
    JSON (see :func:`is_json_type`; missing included) with a 415 naming ``application/json``,
    before parsing it. A request without a body (``DELETE /llms/{name}``) needs no type."""

    require_json_type = True
