"""API keys of the services (the router service's ``--api-key``, the judge's voter key):
checked when a service starts, so a key no client could send reliably is refused then rather
than answered with 401 forever.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

__all__ = ["check_api_key", "ApiKey"]


def check_api_key(key: str | None, what: str = "API key", *, in_url: bool = False) -> str | None:
    """``key`` (None: no key) checked when a service starts: visible ASCII characters only
    (codes 33 to 126). A header carries bytes: a client sends a non-ASCII key as UTF-8 or as
    latin-1 as it pleases (the service would answer 401 to one of them forever), and a space
    at either end is stripped on the way, so such a key could never be matched reliably. The
    error names the position, never the key. ``in_url``: the key is also typed into a page's
    address (the judge's ``/?key=KEY``), where ``+``, ``&``, ``#`` and ``%`` change it, so those
    are refused too.

    Example
    -------
    >>> check_api_key("s3cret-Key_1")
    's3cret-Key_1'
    >>> check_api_key("cl\u00e9")
    Traceback (most recent call last):
    ...
    ValueError: API key: character 3 is not a visible ASCII character (letters, digits and punctuation; no spaces): a client could not send it reliably
    """
    if key is None:
        return None
    if not isinstance(key, str):
        raise ValueError(f"{what}: expected a string, got {type(key).__name__}")
    bad = next((i for i, ch in enumerate(key) if not 33 <= ord(ch) <= 126), None)
    if bad is not None:
        raise ValueError(f"{what}: character {bad + 1} is not a visible ASCII character (letters, "
                         "digits and punctuation; no spaces): a client could not send it reliably")
    bad = next((i for i, ch in enumerate(key) if ch in "+&#%"), None) if in_url else None
    if bad is not None:
        raise ValueError(f"{what}: character {bad + 1} is one of + & # %, which a page address "
                         "(/?key=KEY) changes; use letters, digits and other punctuation")
    return key


#: an API key field checked by :func:`check_api_key` (a ``ValueError`` naming the field)
ApiKey = Annotated[str, AfterValidator(check_api_key)]

