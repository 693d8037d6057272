"""Live mode of the voting page: forward the prompt to OpenAI-compatible backends.

``backends.yaml`` maps each LLM name to its endpoint (the same layout as the serving
proxy's file; the top-level ``backends:`` key is optional)::

    backends:
      gpt-4-1106-preview: {base_url: "https://api.openai.com/v1", model: gpt-4-1106-preview,
                           api_key_env: OPENAI_API_KEY}
      mistralai/mixtral-8x7b-chat: {base_url: "http://127.0.0.1:8001/v1", model: mixtral}
"""

from __future__ import annotations

import logging
import os
import time

import httpx

from ...serving.backends import REQUEST_ERRORS, chat_url, failure_reason, scrub_text, shown_url
from ...serving.backends import load_backends as read_backends
from ...serving.guards import check_text

__all__ = ["load_backends", "ask_backend", "BackendError", "MAX_ANSWER_CHARS", "MAX_USAGE_TOKENS"]

#: longest answer text (characters) a backend may return; a longer one is a 502
MAX_ANSWER_CHARS = 200_000
#: largest ``usage`` token count accepted from a backend (a whole number in [0, this])
MAX_USAGE_TOKENS = 10**9


log = logging.getLogger("recsys_router.judge")


class BackendError(RuntimeError):
    """A backend could not be reached or answered in an unexpected format."""


def load_backends(path: str | os.PathLike, known_llms: list[str] | None = None) -> dict[str, dict]:
    """Read ``backends.yaml`` as the proxy does (:func:`recsys_router.serving.backends.load_backends`:
    the same ``base_url`` rules; errors name the file and the entry, never the URL), with or
    without its top-level ``backends:`` key.

    Returns
    -------
    dict LLM name -> ``{"base_url", "model", "api_key_env"}``
    """
    return read_backends(path, known_llms, bare=True)


def ask_backend(backend: dict, prompt: str, history: list[dict] | None = None, *,
                timeout: float = 120.0) -> dict:
    """One chat completion; returns ``{"text", "latency", "prompt_tokens", "completion_tokens"}``.

    The reply is untrusted: the answer must be text of at most :data:`MAX_ANSWER_CHARS`
    characters that can be UTF-8 encoded and holds no NUL; ``usage`` token counts, when
    given, whole numbers in [0, :data:`MAX_USAGE_TOKENS`].

    Raises
    ------
    BackendError
        Missing API key variable, connection failure, non-2xx status, malformed body, or an
        answer or usage count outside those limits.
    """
    headers = {"content-type": "application/json"}
    env = backend.get("api_key_env")
    if env:
        key = os.environ.get(env)
        if not key:
            raise BackendError(f"environment variable {env} (API key for {backend['model']}) is not set")
        headers["authorization"] = f"Bearer {key}"
    body = {"model": backend["model"], "messages": [*(history or []), {"role": "user", "content": prompt}]}
    url = chat_url(backend["base_url"])   # the path before a query (?api-version=...)
    t0 = time.perf_counter()
    try:
        resp = httpx.post(url, json=body, headers=headers, timeout=timeout)
    except REQUEST_ERRORS as exc:   # the voter sees a reason; the server's log the masked URL
        log.warning("backend %s at %s failed: %s", backend["model"], shown_url(url),
                    scrub_text(f"{type(exc).__name__}: {exc}", url))
        raise BackendError(failure_reason(exc)) from None
    latency = time.perf_counter() - t0
    if resp.status_code // 100 != 2:
        raise BackendError(f"HTTP {resp.status_code}: {resp.text[:200]}")
    try:
        data = resp.json()
        text = data["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError, RecursionError):
        raise BackendError(f"not an OpenAI chat completion: {resp.text[:200]!r}") from None
    if not isinstance(text, str):
        raise BackendError("the answer (choices[0].message.content) is not text: "
                           f"{type(text).__name__}")
    if len(text) > MAX_ANSWER_CHARS:
        raise BackendError(f"the answer has {len(text)} characters (at most {MAX_ANSWER_CHARS})")
    try:
        check_text(text)
    except ValueError as exc:
        raise BackendError(f"the answer is not valid text ({exc})") from None
    usage = data.get("usage") if isinstance(data, dict) else None
    if usage is None:
        usage = {}
    if not isinstance(usage, dict):
        raise BackendError(f"'usage' is not an object: {type(usage).__name__}")
    counts = {k: _token_count(k, usage.get(k)) for k in ("prompt_tokens", "completion_tokens")}
    return {"text": text, "latency": latency, **counts}


def _token_count(key: str, v) -> int | None:
    """A ``usage`` token count: absent/null, or a whole number in [0, MAX_USAGE_TOKENS]
    (not a bool, string, float, NaN or infinity); else :class:`BackendError`."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_USAGE_TOKENS:
        shown = "an integer past 10**30" if isinstance(v, int) and abs(v) > 10**30 else repr(v)
        raise BackendError(f"usage.{key} must be a whole number in [0, {MAX_USAGE_TOKENS}], "
                           f"got {shown[:60]}")
    return v
