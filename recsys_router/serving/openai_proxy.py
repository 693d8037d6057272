"""OpenAI-compatible routing proxy: ``POST /v1/chat/completions`` with ``model: "router"``.

The last user message is routed; the request is forwarded to the chosen LLM's backend
(its base URL, model name and API key from ``backends.yaml``), streaming included, and
the answer says which LLM answered: header ``x-recsys-router-llm`` and the ``model``
field of the JSON body (or of every streamed chunk); header ``x-recsys-router-decision-id``
names the logged decision (for ``POST /feedback``).

Model names: ``router`` (the artifact's default policy), ``router-argmax`` (the best predicted
score, whatever the default policy), ``router-wtp-<lambda>``, ``router-budget-<C>``;
``router-wtp``/``router-budget`` without a value take the request's ``wtp``/``budget`` extra
field, which any other model refuses (400 naming it, see :func:`router_policy`). The extra field
``task`` is the routed message's task label, for a router that routes by task (as ``task`` in
``POST /route``). These extra fields are never forwarded to the backend.

It routes among the LLMs of the pool served now that have a backend: those of ``backends.yaml``
(which may name LLMs still to be added) and those given with ``POST /llms``
(:mod:`recsys_router.serving.llm_admin`).

``backends.yaml``::

    backends:
      gpt-4-1106-preview: {base_url: "http://127.0.0.1:9000/v1", model: gpt-4, api_key_env: OPENAI_API_KEY}
      mistralai/mixtral-8x7b-chat: {base_url: "http://127.0.0.1:9001/v1", model: mixtral}
"""

from __future__ import annotations

import json
import logging
import math
import os
import re

import httpx
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import StreamingResponse

from ..data import MAX_TASK_CHARS
from .backends import REQUEST_ERRORS, chat_url, failure_reason, load_backends, scrub_text, shown_url
from .guards import SafeJSONResponse, check_text, printable
from . import stream_relay
from .stream_relay import capped_reply, relayed_lines

__all__ = ["load_backends", "add_openai_routes", "router_policy", "parse_router_model", "check_chat_body",
           "request_task", "ROUTING_FIELDS", "routed_message"]

_MAX_MESSAGES = 1_000
_MAX_PARTS = 1_000

_log = logging.getLogger(__name__)


#: the value in a model name: ASCII decimal notation, optionally with an exponent (``float()``
#: would also take ``1_000``, padding spaces, ``inf`` and non-ASCII digits such as ``١٠``)
_NAME_NUMBER = re.compile(r"[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?")


def _field_value(body: dict, field: str) -> float | None:
    """The request's ``wtp`` or ``budget`` field: None when absent or null, else a finite JSON
    number >= 0 (an integer or a float, never a boolean or a numeric string, as in
    ``POST /route``); anything else is a 400 naming the field."""
    raw = body.get(field)
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise HTTPException(400, f"'{field}' must be a JSON number (an integer or a float) >= 0, "
                                 f"got {type(raw).__name__}")
    try:
        value = float(raw)
    except OverflowError:  # an integer of 400 digits: no float holds it
        value = math.inf
    if not math.isfinite(value) or value < 0:
        raise HTTPException(400, f"'{field}' must be a finite number >= 0"
                                 + (f", got {value:g}" if math.isfinite(value) else ""))
    return value


def router_policy(model: str, body: dict) -> tuple[str | None, float | None]:
    """``(policy, value)`` asked for by a ``router[-policy[-value]]`` model name and the
    request's ``wtp``/``budget`` fields: ``(None, None)`` for ``router`` (the artifact's
    default policy), ``("argmax", None)`` for ``router-argmax`` (the best predicted score,
    whatever the default policy), ``("wtp", lambda)`` or ``("budget", C)``.

    A value in the name is written in ASCII decimal notation (``250``, ``0.5``, ``1e-3``);
    any other spelling, such as ``1_000``, `` 5``, ``inf`` or non-ASCII digits, is a 400
    naming the model. A ``wtp`` or ``budget`` field (null counts as absent) must be a finite
    JSON number >= 0 whatever the model, else a 400 naming the field; and only
    ``router-wtp`` / ``router-budget`` (without a value in the name) read it: beside any other
    model it is a 400 naming the field, never ignored (``router`` with ``budget: 0`` would
    route by the default policy while ``POST /route`` with it routes by budget).

    Example
    -------
    >>> router_policy("router-argmax", {}), router_policy("router-budget", {"budget": 2})
    (('argmax', None), ('budget', 2.0))
    """
    shown = repr(printable(model, 100))
    kind, raw = None, None
    if model != "router":
        parts = model.split("-", 2)
        if parts[0] != "router" or len(parts) < 2 or parts[1] not in ("argmax", "wtp", "budget"):
            raise HTTPException(400, f"model must be 'router', 'router-argmax', 'router-wtp-<lambda>' or "
                                     f"'router-budget-<C>', got {shown}")
        kind, raw = parts[1], (parts[2] if len(parts) == 3 else None)
        if kind == "argmax" and raw is not None:
            raise HTTPException(400, f"model must be 'router', 'router-argmax', 'router-wtp-<lambda>' or "
                                     f"'router-budget-<C>', got {shown}")
    given = {f: _field_value(body, f) for f in ("wtp", "budget")}
    for f, v in given.items():
        if v is not None and not (kind == f and raw is None):
            raise HTTPException(400, f"the request's '{f}' field is read only with model "
                                     f"'router-{f}' (no value in the name); model {shown} does not "
                                     f"use it: give the policy once, as model 'router-{f}' with "
                                     f"the field, or 'router-{f}-<value>'")
    if kind in (None, "argmax"):
        return kind, None
    if raw is None:
        if given[kind] is None:
            raise HTTPException(400, f"{shown}: the {kind} value must be a number (in the model "
                                     f"name in ASCII decimal notation such as 250, 0.5 or 1e-3, "
                                     f"or the request's '{kind}' field as a JSON number)")
        return kind, given[kind]
    if _NAME_NUMBER.fullmatch(raw) is None:
        raise HTTPException(400, f"{shown}: the {kind} value must be a number (in the model name "
                                 f"in ASCII decimal notation such as 250, 0.5 or 1e-3, or the "
                                 f"request's '{kind}' field as a JSON number)")
    value = float(raw)  # ASCII digits: at worst inf (1e999, 400 nines), never an error
    if not math.isfinite(value) or value < 0:
        raise HTTPException(400, f"{shown}: the {kind} value must be a finite number >= 0")
    return kind, value


def parse_router_model(model: str, body: dict) -> tuple[float | None, float | None]:
    """``(wtp, budget)`` from a ``router[-policy[-value]]`` model name and the request's
    fields, with :func:`router_policy`'s checks; ``router`` and ``router-argmax`` both give
    ``(None, None)`` (:func:`router_policy` tells them apart).

    Example
    -------
    >>> parse_router_model("router-wtp-1e3", {}), parse_router_model("router-budget", {"budget": 2})
    ((1000.0, None), (None, 2.0))
    """
    kind, value = router_policy(model, body)
    return (value if kind == "wtp" else None), (value if kind == "budget" else None)


def _message_text(m, i: int) -> str:
    """Text of ``messages[i]``; any other shape than the chat format is a 400."""
    where = f"messages[{i}]"
    if not isinstance(m, dict):
        raise HTTPException(400, f"{where} must be an object with 'role' and 'content', "
                                 f"got {type(m).__name__}")
    role = m.get("role")
    if not isinstance(role, str) or not role:
        raise HTTPException(400, f"{where}.role must be a non-empty string")
    c = m.get("content")
    if c is None:
        if role == "user":
            raise HTTPException(400, f"{where}.content is missing (a user message needs content)")
        return ""
    if isinstance(c, str):
        return c
    if not isinstance(c, list):
        raise HTTPException(400, f"{where}.content must be a string or a list of content parts, "
                                 f"got {type(c).__name__}")
    if len(c) > _MAX_PARTS:
        raise HTTPException(400, f"{where}.content has {len(c)} parts; the limit is {_MAX_PARTS}")
    texts = []
    for k, part in enumerate(c):
        if not isinstance(part, dict):
            raise HTTPException(400, f"{where}.content[{k}] must be an object with 'type', "
                                     f"got {type(part).__name__}")
        kind = part.get("type")
        if not isinstance(kind, str):
            raise HTTPException(400, f"{where}.content[{k}].type must be a string")
        if kind == "text" or "text" in part:
            if not isinstance(part.get("text"), str):
                raise HTTPException(400, f"{where}.content[{k}].text must be a string")
            texts.append(part["text"])
    return " ".join(texts)


def check_chat_body(body) -> str:
    """Check a chat-completions body and return the text to route (the last user message);
    :func:`routed_message` says which message it is.

    Every malformed shape is an ``HTTPException(400)`` naming the field: a body that is not
    an object, ``model`` not a string, ``stream`` not a boolean, ``messages`` not a non-empty
    list, a message that is not an object or lacks a string ``role``, content that is not a
    string or a list of part objects, a text part whose ``text`` is not a string.

    Example
    -------
    >>> check_chat_body({"model": "router", "messages": [{"role": "user", "content": "hi"}]})
    'hi'
    """
    return routed_message(body)[1]


def routed_message(body) -> tuple[int, str]:
    """``(i, text)``: the index in ``messages`` of the message :func:`check_chat_body` routes,
    and its text; the same checks and errors.

    Example
    -------
    >>> routed_message({"messages": [{"role": "user", "content": "hi"},
    ...                              {"role": "assistant", "content": "hello"}]})
    (0, 'hi')
    """
    if not isinstance(body, dict):
        raise HTTPException(400, "request body must be a JSON object")
    if not isinstance(body.get("model", ""), str):
        raise HTTPException(400, "'model' must be a string")
    if not isinstance(body.get("stream", False), bool):
        raise HTTPException(400, "'stream' must be true or false")
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise HTTPException(400, "'messages' must be a non-empty list of {role, content}")
    if len(msgs) > _MAX_MESSAGES:
        raise HTTPException(400, f"'messages' has {len(msgs)} entries; the limit is {_MAX_MESSAGES}")
    texts = [_message_text(m, i) for i, m in enumerate(msgs)]
    try:
        json.dumps(body, ensure_ascii=False, allow_nan=False).encode("utf-8")
    except UnicodeEncodeError:
        raise HTTPException(422, "the request contains text that cannot be UTF-8 encoded "
                                 "(a lone surrogate)") from None
    except (ValueError, RecursionError):  # non-finite numbers, nesting: not forwardable as JSON
        raise HTTPException(400, "the request cannot be forwarded as JSON (non-finite number "
                                 "or nesting too deep)") from None
    for i in range(len(msgs) - 1, -1, -1):
        if msgs[i]["role"] == "user" and texts[i].strip():
            return i, texts[i]
    raise HTTPException(400, "no user message with text content to route")


#: the request's routing fields, read by the router and never forwarded to the backend
ROUTING_FIELDS = ("wtp", "budget", "task")


def request_task(body: dict) -> str | None:
    """The routed message's task label: the request's ``task`` field (a string, as in
    ``POST /route``; read by a router that routes by task, logged with the decision, and
    never forwarded), or None without one. Anything else is a 400 naming the field; text that
    cannot be UTF-8 encoded or holds a NUL is a 422.

    Example
    -------
    >>> request_task({"task": "math"}), request_task({}), request_task({"task": None})
    ('math', None, None)
    """
    task = body.get("task")
    if task is None:
        return None
    if not isinstance(task, str):
        raise HTTPException(400, f"'task' must be a string (the query's task label) or null, "
                                 f"got {type(task).__name__}")
    if len(task) > MAX_TASK_CHARS:
        raise HTTPException(400, f"'task' has {len(task)} characters; the limit is {MAX_TASK_CHARS}")
    try:
        check_text(task)
    except ValueError as exc:
        raise HTTPException(422, f"task: {exc}") from None
    return task


def add_openai_routes(app: FastAPI, served, cfg) -> None:
    """Add ``GET /v1/models`` and ``POST /v1/chat/completions`` to ``app``.

    Parameters
    ----------
    app : FastAPI
        The router service (its ``state.route_texts`` routes one request).
    served : ServedRouter
        The served artifact. Each request reads one snapshot, ``served.current``, and routes
        among the LLMs of that pool which have a backend in that snapshot's
        ``proxy_backends``; it is a 503 when none has one. ``POST /llms`` with a ``backend``
        adds an LLM and its backend in one snapshot; an LLM added without one (and not named
        in ``backends.yaml``) is never routed to by the proxy, and its 201 says so.
        ``DELETE /llms/{name}`` removes the LLM (and a backend given with ``POST /llms``).
    cfg : ServiceConfig
        ``backends`` (LLM name -> base URL, model, API key variable: the start-up backends,
        ``served``'s first ``proxy_backends``) and the timeout. A backend may name an LLM not
        in the pool yet (one ``POST /llms`` will add): it waits for it, and one warning line
        names every such backend (so that a misspelt name is seen).
    """
    waiting = [n for n in cfg.backends if n not in served.current.llm_names]
    if waiting:
        shown = ", ".join(repr(printable(n, 100)) for n in waiting[:20])
        _log.warning("backends name %d LLM(s) not in the served pool, used once POST /llms adds "
                     "them (or misspelt?): %s%s", len(waiting), shown,
                     f" and {len(waiting) - 20} more" if len(waiting) > 20 else "")

    @app.get("/v1/models")
    async def models():
        ids = ["router", "router-argmax", "router-wtp", "router-budget"]
        return {"object": "list", "data": [{"id": i, "object": "model", "owned_by": "recsys-router"}
                                           for i in ids]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        try:
            body = await request.json()
        except (ValueError, RecursionError):  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            raise HTTPException(400, "request body is not valid JSON (or nests too deep)") from None
        at, text = routed_message(body)
        policy, value = router_policy(body.get("model", ""), body)
        wtp, budget = (value if policy == "wtp" else None), (value if policy == "budget" else None)
        task = request_task(body)
        snap = served.current  # the pool this request is routed in, whatever /llms does meanwhile
        backends = snap.proxy_backends   # of the same snapshot as the pool
        candidates = [n for n in snap.llm_names if n in backends]
        if not candidates:
            raise HTTPException(503, "no LLM of the served pool has a backend (see backends.yaml, "
                                     "POST /llms's 'backend' and GET /llms)")
        result = (await app.state.route_texts([text], wtp, budget, candidates, snap,
                                              fields=[f"messages[{at}].content"],
                                              tasks=None if task is None else [task],
                                              argmax=policy == "argmax"))[0]
        llm = result["llm"]
        be = backends[llm]
        fwd = {k: v for k, v in body.items() if k not in ROUTING_FIELDS}
        fwd["model"] = be["model"]
        headers = {"content-type": "application/json"}
        if be.get("api_key_env"):
            key = os.environ.get(be["api_key_env"])
            if key:
                headers["authorization"] = f"Bearer {key}"
        route_headers = {"x-recsys-router-llm": llm, "x-recsys-router-policy": result["policy"],
                         "x-recsys-router-decision-id": result["decision_id"]}
        url = chat_url(be["base_url"])
        client = httpx.AsyncClient(timeout=cfg.backend_timeout_s)
        if fwd.get("stream"):
            try:
                resp = await client.send(client.build_request("POST", url, json=fwd, headers=headers),
                                         stream=True)
            except REQUEST_ERRORS as exc:
                await client.aclose()
                raise _backend_failed(llm, url, exc) from None

            async def relay():
                try:
                    async for out in relayed_lines(resp, llm,
                                                   lambda e: _logged_reason(llm, url, e)):
                        yield out
                finally:
                    await resp.aclose()
                    await client.aclose()
            return StreamingResponse(relay(), status_code=resp.status_code,
                                     media_type="text/event-stream", headers=route_headers)
        try:   # read as a stream, so that a reply over the cap is never held whole
            resp = await client.send(client.build_request("POST", url, json=fwd, headers=headers),
                                     stream=True)
            body = await capped_reply(resp)
        except REQUEST_ERRORS as exc:
            raise _backend_failed(llm, url, exc) from None
        finally:
            await client.aclose()
        if body is None:
            raise HTTPException(502, f"backend for {llm!r} sent a reply of more than "
                                     f"{stream_relay.MAX_REPLY_BYTES:,} bytes")
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            raise HTTPException(502, f"backend for {llm!r} returned non-JSON "
                                     f"(status {resp.status_code})") from None
        if isinstance(data, dict) and resp.status_code < 400:
            data["model"] = llm
        try:  # ASCII escapes: a lone surrogate is relayed as \ud83d, never a failed write
            return SafeJSONResponse(data, status_code=resp.status_code, headers=route_headers)
        except (ValueError, RecursionError):  # NaN/Infinity or nesting: not standard JSON
            raise HTTPException(502, f"backend for {llm!r} returned JSON that cannot be relayed "
                                     "(a non-finite number or nesting too deep)") from None


def _logged_reason(llm: str, url: str, exc: Exception) -> str:
    """Log a failed backend request (the URL and the library's message, credentials masked)
    and return the generic reason the client may see."""
    _log.warning("backend for %r at %s failed: %s: %s", llm, shown_url(url), type(exc).__name__,
                 scrub_text(str(exc), url))
    return failure_reason(exc)


def _backend_failed(llm: str, url: str, exc: Exception) -> HTTPException:
    """The 502 for a backend request that failed: the LLM name and a generic reason, never the
    URL (which may hold credentials), its host or the library's message."""
    return HTTPException(502, f"backend for {llm!r} failed: {_logged_reason(llm, url, exc)}")
