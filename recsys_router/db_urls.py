"""Database URLs as they may be shown: a password (``USER:PASSWORD@``) or a query value (a
``?password=`` is another way to give one) never appears in an error, a warning or a log line.
Used by ``tune --storage`` (:mod:`recsys_router.tuning.storage`) and the decision log
(``serve --log-db``, ``ope --log``, :mod:`recsys_router.feedback`).
"""

from __future__ import annotations

import re

__all__ = ["redact_url", "scrub_url", "url_refusal", "AT_ADVICE", "SLASH_ADVICE"]

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]{0,40}")


def _parse(url: str):
    """SQLAlchemy's parse of ``url``, or None when it cannot parse it."""
    from sqlalchemy.engine import make_url  # noqa: PLC0415
    try:
        return make_url(url)
    except Exception:  # noqa: BLE001 - ArgumentError, or ValueError for a port such as ':abc'
        return None


def redact_url(url) -> str:
    """``url`` as it may be shown (errors, logs): the password and every query value
    (``?password=...`` is another way to give one) replaced by ``***``. A string SQLAlchemy
    cannot parse is never shown: only its scheme (when it starts with one) and its length.

    Example
    -------
    >>> redact_url("postgresql+psycopg://me:s3cret@db.example/studies?sslpassword=x")
    'postgresql+psycopg://me:***@db.example/studies?sslpassword=***'
    >>> redact_url("sqlite:////tmp/study.db")
    'sqlite:////tmp/study.db'
    >>> redact_url("postgresql://me:pa@ss@db.example/studies")
    "postgresql://... (a database URL of 40 characters whose password may hold an unescaped '@'; not shown)"
    >>> redact_url("me:s3cret@db.example/studies")
    '<a database URL of 28 characters that cannot be parsed; not shown>'
    """
    if not isinstance(url, str):
        return f"<a {type(url).__name__}, not a storage URL>"
    parsed = _parse(url)
    why = None   # why a URL SQLAlchemy parses is not shown (url_refusal refuses it too)
    if parsed is not None and _at_in_host(parsed, url):
        why = "password may hold an unescaped '@'"
    elif parsed is not None and _userinfo_unread(parsed, url):
        why = "user name or password may be read as its host, database or query"
    if why:
        return (f"{url.partition('://')[0]}://... (a database URL of {len(url)} characters "
                f"whose {why}; not shown)")
    if parsed is not None:
        from urllib.parse import quote  # noqa: PLC0415
        shown = parsed.set(query={}).render_as_string(hide_password=True)
        masked = "&".join(f"{quote(k, safe='')}=***" for k in sorted(parsed.query))
        return f"{shown}?{masked}" if masked else shown
    head, sep, _ = url.partition("://")
    scheme = f"{head}://... (" if sep and _SCHEME.fullmatch(head) else "<"
    end = ")" if scheme != "<" else ">"
    return f"{scheme}a database URL of {len(url)} characters that cannot be parsed; not shown{end}"


def _at_in_host(parsed, url: str) -> bool:
    """Whether part of the URL's password may have been read as something else: SQLAlchemy ends
    the password at the first ``@`` after it, so ``me:pa@ss@host`` is read as password ``pa``
    on host ``ss@host`` (and ``me:pa@s/s@host`` as host ``s``, database ``s@host``), and
    masking the password it found would show the rest. So a URL with a password and another
    ``@`` anywhere after the one ending it is taken as one (an ``@`` of a database name or
    query value too: written ``%40`` it is unambiguous). An ``@`` of the user name, before
    the password (Azure's ``user@server`` logins), is unambiguous: a user name holds no ``:``.

    Example
    -------
    >>> from sqlalchemy.engine import make_url
    >>> u = "postgresql://admin@srv:pw@db.example/x"
    >>> _at_in_host(make_url(u), u), _at_in_host(make_url(u + "@y"), u + "@y")
    (False, True)
    """
    if parsed.password is None:
        return False
    rest = url.partition("://")[2]
    # the user name ends at the first ':' and the password at the first '@' after that
    after_password = rest.partition(":")[2].partition("@")[2]
    return "@" in after_password


#: what to do about a URL that may hold a password SQLAlchemy does not read (:func:`_userinfo_unread`)
SLASH_ADVICE = ("SQLAlchemy reads no password in it but a ':' in its database name, a query key "
                "holding ':', '/' or '@', or a query whose first ':' and the '@' after it lie in "
                "different '&'-separated parts, which is how it reads a user name holding '/' or "
                "'?' and the password after it; write each '/' of the user name as %2F and each "
                "'?' as %3F (and a ':' or '@' of a database name or query value as %3A or %40)")


#: SQLAlchemy's split of a URL (``sqlalchemy.engine.url``'s pattern), for the parts as written
_RAW_PARTS = re.compile(r"[\w+]+://(?:[^:/]*(?::[^@]*)?@)?(?:(?:\[[^/?]+\]|[^/:?]+)?(?::[^/?]*)?)?"
                        r"(?:/(?P<database>[^?]*))?(?:\?(?P<query>.*))?", re.S)


def _userinfo_unread(parsed, url: str) -> bool:
    """Whether a ``USER:PASSWORD@`` may have been read as something else, with no password to
    mask. SQLAlchemy's user name stops at a ``/`` or ``:``, so ``dom/me:pw@host/db`` is read
    as host ``dom`` and database ``me:pw@host/db``; a ``?`` in the user name
    (``d?om/me:pw=1@host``) makes the rest a query, whose keys are shown. Taken as one: no
    password read, not SQLite (a file path may hold anything), and a ``:`` in the database
    name or a ``:``, ``/`` or ``@`` in a query key (a database name such as ``my:db`` is taken
    as one too: written ``my%3Adb`` it is not). Query values are never shown, but a password
    holding ``&`` and ``=`` (``dom/me?x=a:b&S3CRET=1@host``) puts a piece of itself in a key:
    so is a query whose first ``:`` and the next ``@`` after it have a ``&`` between them
    (``application_name=etl:job@host`` holds both in one value and passes).

    Example
    -------
    >>> from sqlalchemy.engine import make_url
    >>> u = "postgresql://dom/me:pw@host/db"
    >>> _userinfo_unread(make_url(u), u), _userinfo_unread(make_url("postgresql://h:5432/d@x"), "postgresql://h:5432/d@x")
    (True, False)
    """
    if parsed.password is not None or parsed.drivername.split("+", 1)[0] == "sqlite":
        return False
    # the parts as written (SQLAlchemy decodes %3A to ':'); its own pattern matches every URL it parsed
    m = _RAW_PARTS.match(url)
    if ":" in (m.group("database") or ""):
        return True
    # a password ends at the first '@' after the ':' that starts it
    password, at, _ = (m.group("query") or "").partition(":")[2].partition("@")
    if at and "&" in password:
        return True
    return any(set(str(k)) & set(":/@") for k in parsed.query)


#: what to do about a URL whose password's end cannot be told (see :func:`_at_in_host`)
AT_ADVICE = ("the URL has a password and more than one '@', so where the password ends is "
             "ambiguous; write each '@' of the password (and of the database name or query) as %40")


def url_refusal(url: str) -> str | None:
    """Why ``url`` must be refused before connecting, or None: :data:`AT_ADVICE` when its
    password's end cannot be told (:func:`_at_in_host`), :data:`SLASH_ADVICE` when it may hold
    a password SQLAlchemy does not read as one (:func:`_userinfo_unread`). A URL SQLAlchemy
    cannot parse is left to the caller (None).

    Example
    -------
    >>> url_refusal("postgresql://me:pa@ss@db/x") == AT_ADVICE, url_refusal("postgresql://me:pa%40ss@db/x")
    (True, None)
    >>> url_refusal("postgresql://dom/me:pw@db/x") == SLASH_ADVICE, url_refusal("postgresql://dom%2Fme:pw@db/x")
    (True, None)
    """
    parsed = _parse(url) if isinstance(url, str) else None
    if parsed is not None and _at_in_host(parsed, url):
        return AT_ADVICE
    if parsed is not None and _userinfo_unread(parsed, url):
        return SLASH_ADVICE
    return None


def scrub_url(text: str, url: str) -> str:
    """``text`` (a driver's error message, say) with ``url``, its password and its query values
    (as given and as decoded) replaced, so that no credential of ``url`` is shown.

    Example
    -------
    >>> scrub_url("cannot connect to postgresql://me:s3cret@db/x (password s3cret)",
    ...           "postgresql://me:s3cret@db/x")
    'cannot connect to postgresql://me:***@db/x (password ***)'
    """
    if not isinstance(url, str):
        return text
    from urllib.parse import quote  # noqa: PLC0415
    text = text.replace(url, redact_url(url))
    parsed = _parse(url)
    secrets = [] if parsed is None else [parsed.password or ""] + [
        v for vals in parsed.query.values() for v in ((vals,) if isinstance(vals, str) else vals)]
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
        for form in {secret, quote(secret, safe="")}:
            text = text.replace(form, "***")
    return text
