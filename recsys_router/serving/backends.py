"""The proxy's backends: ``backends.yaml`` read and checked, each backend's chat-completions URL,
and that URL as it may be shown.

A backend's ``base_url`` may hold credentials (``https://user:password@host/v1``) or a query
token (``?api-key=...``, Azure's ``?api-version=...``). The proxy's client never sees the URL
(a failed backend is named by its LLM and a generic reason); the server's log line shows it with
the user name, password and query values replaced by ``***``.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

import httpx
import yaml

__all__ = ["load_backends", "check_backend", "BackendSpecError", "base_url_problem", "chat_url",
           "shown_url", "scrub_text", "failure_reason", "REQUEST_ERRORS"]


def load_backends(path: str | os.PathLike, known_llms: list[str] | None = None, *,
                  bare: bool = False) -> dict:
    """Read and check ``backends.yaml`` (each entry as :func:`check_backend` checks it); errors
    name the file and the entry. ``known_llms``: when given, a backend for any other name is
    refused (the judge's fixed pool; ``serve`` passes none, so that a backend can wait for
    ``POST /llms`` to add its LLM). ``bare``: a mapping of LLM name -> backend without the
    top-level ``backends:`` key is taken too (the judge's live mode reads both layouts).

    Each ``base_url`` must be an ``http://`` or ``https://`` URL with a host (and a numeric port,
    when it has one) and no ``#fragment``; a query (``?api-version=...``) is kept and sent after
    the path: ``http://h/v1?k=v`` is called as ``http://h/v1/chat/completions?k=v``. An error
    names the backend, never shows its URL (which may hold credentials).

    Returns
    -------
    dict LLM name -> ``{"base_url", "model", "api_key_env"}``
    """
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: cannot read backends file ({exc})") from exc
    backends = (raw or {}).get("backends") if isinstance(raw, dict) else None
    if bare and not isinstance(backends, dict):
        backends = raw
    if not isinstance(backends, dict) or not backends:
        raise ValueError(f"{path}: expected a {'' if bare else 'top-level ' + repr('backends:') + ' '}"
                         "mapping of LLM name -> {base_url, model, api_key_env}")
    out = {}
    for name, spec in backends.items():
        try:
            out[str(name)] = check_backend(str(name), spec)
        except BackendSpecError as exc:
            raise ValueError(f"{path}: backend {name!r}: {exc}") from None
        if known_llms is not None and str(name) not in known_llms:
            raise ValueError(f"{path}: backend {name!r} is not an LLM of this router "
                             f"(its LLMs: {known_llms})")
    return out


class BackendSpecError(ValueError):
    """A backend entry that breaks a rule of :func:`check_backend`: ``field`` (``base_url``,
    ``model``, ``api_key_env``, or None for the entry as a whole) and ``reason`` (the words
    following the field; never the URL)."""

    def __init__(self, field: str | None, reason: str):
        super().__init__(f"{field} {reason}" if field else reason)
        self.field, self.reason = field, reason


def check_backend(name: str, spec) -> dict:
    """One backend entry (of ``backends.yaml`` or of ``POST /llms``) checked: a mapping with a
    ``base_url`` that :func:`base_url_problem` takes, an optional ``model`` (a non-empty
    string; the LLM's name when absent or null) and an optional ``api_key_env`` (the name of
    an environment variable, or null); other keys are ignored.

    Raises
    ------
    BackendSpecError
        Naming the field and what was expected, never the URL (it may hold credentials).

    Example
    -------
    >>> check_backend("gpt", {"base_url": "http://h/v1"})
    {'base_url': 'http://h/v1', 'model': 'gpt', 'api_key_env': None}
    """
    if not isinstance(spec, dict):
        raise BackendSpecError(None, "must be a mapping {base_url, model, api_key_env}, got "
                                     f"{type(spec).__name__}")
    if "base_url" not in spec:
        raise BackendSpecError("base_url", "is missing (a backend needs at least 'base_url')")
    why = base_url_problem(spec["base_url"])
    if why:
        raise BackendSpecError("base_url", why)
    model = name if spec.get("model") is None else spec["model"]
    if not isinstance(model, str) or not model.strip():
        raise BackendSpecError("model", "must be a non-empty string (the backend's model name; "
                                        f"quote a name YAML reads as a number), got {model!r}"[:300])
    env = spec.get("api_key_env")
    if env is not None and (not isinstance(env, str) or not env or "=" in env or "\0" in env):
        raise BackendSpecError("api_key_env", "must be the name of an environment variable "
                                              f"(a string without '=') or null, got {env!r}"[:300])
    # the URL as given: chat_url drops the path's trailing '/', never a query value's
    return {"base_url": spec["base_url"], "model": model, "api_key_env": env}


#: what a backend request may raise besides a response: httpx's errors, a URL it refuses when
#: the request is built, and a host name IDNA refuses (a ``UnicodeError``)
REQUEST_ERRORS = (httpx.HTTPError, httpx.InvalidURL, UnicodeError)


def base_url_problem(base) -> str | None:
    """What is wrong with a ``base_url`` (words following "base_url"; never the URL), or None."""
    if not isinstance(base, str):
        return f"must be a string, got {type(base).__name__}"
    ctrl = next((i for i, ch in enumerate(base) if ch < " " or ch == "\x7f"), None)
    if ctrl is not None:   # urlsplit would drop a tab or line break silently: what is written is called
        return f"must not hold a control character (U+{ord(base[ctrl]):04X} at character {ctrl})"
    if "#" in base:
        return ("must not hold a '#fragment' (it is never sent to a server; write a '#' of a "
                "password or query value as %23)")
    try:
        parts = urlsplit(base)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in [0, 65535]
    except ValueError:
        return "is not a valid URL (a port that is not a number, or a bracket left open)"
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return "must be an http:// or https:// URL with a host"
    try:   # what httpx itself refuses when the request is built (a control character, an IDNA host)
        httpx.Request("POST", chat_url(base))
    except Exception:  # noqa: BLE001 - InvalidURL, idna's UnicodeError, ...
        return "is not a URL an HTTP request can be sent to (a control character or an invalid host name)"
    return None


def chat_url(base_url: str) -> str:
    """The chat-completions URL of a backend: ``/chat/completions`` joined to the path of
    ``base_url``, its query (if any) kept after that; a fragment is dropped.

    Example
    -------
    >>> chat_url("http://h:9/v1"), chat_url("https://h/openai/d/?api-version=2024-02-01")
    ('http://h:9/v1/chat/completions', 'https://h/openai/d/chat/completions?api-version=2024-02-01')
    """
    p = urlsplit(base_url)
    return urlunsplit((p.scheme, p.netloc, p.path.rstrip("/") + "/chat/completions", p.query, ""))


def shown_url(url) -> str:
    """``url`` as a log line or an error may show it: a user name and password replaced by
    ``***``, every query value by ``***`` (a query part without ``=`` wholly), a fragment by
    ``#***``; scheme, host, port and path as given. A string that cannot be split is not shown.

    Example
    -------
    >>> shown_url("http://me:s3cret@10.0.0.5:9/v1?api-key=K&x")
    'http://***@10.0.0.5:9/v1?api-key=***&***'
    >>> shown_url("http://[::1/v1")
    '<a URL of 14 characters that cannot be parsed; not shown>'
    """
    if not isinstance(url, str):
        return f"<a {type(url).__name__}, not a URL>"
    try:
        p = urlsplit(url)
    except ValueError:
        return f"<a URL of {len(url)} characters that cannot be parsed; not shown>"
    user, at, host = p.netloc.rpartition("@")
    netloc = f"***@{host}" if at else host
    query = "&".join(part.partition("=")[0] + "=***" if "=" in part else "***"
                     for part in p.query.split("&")) if p.query else ""
    shown = urlunsplit((p.scheme, netloc, p.path, query, ""))
    return shown + ("#***" if "#" in url else "")


def scrub_text(text: str, url: str) -> str:
    """``text`` (an HTTP library's error message) with ``url`` shown as :func:`shown_url`
    shows it and every credential of it (user name, password, query values; as written and
    decoded) replaced by ``***``.

    Example
    -------
    >>> scrub_text("failed for http://me:pw@h/v1 (user me)", "http://me:pw@h/v1")
    'failed for http://***@h/v1 (user ***)'
    """
    text = text.replace(url, shown_url(url))
    try:
        p = urlsplit(url)
    except ValueError:
        return text
    user, at, _ = p.netloc.rpartition("@")
    secrets = set(user.split(":", 1)) if at else set()
    secrets |= {part.partition("=")[2] if "=" in part else part for part in p.query.split("&")}
    secrets |= {p.fragment}
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        for form in {secret, unquote(secret)}:
            text = text.replace(form, "***")
    return text


def failure_reason(exc: Exception) -> str:
    """A generic reason for a failed backend request, as the proxy's client may see it (no URL,
    host or library message).

    Example
    -------
    >>> failure_reason(httpx.ConnectError("All connection attempts failed"))
    'connection error'
    """
    if isinstance(exc, httpx.TimeoutException):
        return "timed out"
    if isinstance(exc, httpx.NetworkError):
        return "connection error"
    if isinstance(exc, httpx.ProtocolError):
        return "protocol error"
    if isinstance(exc, (httpx.InvalidURL, httpx.UnsupportedProtocol, UnicodeError)):
        return "invalid backend URL"
    return "request error"
