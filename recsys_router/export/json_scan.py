"""Linear pre-scan of an untrusted JSON text, run before it is parsed.

:func:`json_scan` measures, without parsing and in time linear in the text whatever its
content, the two things that make parsing expensive: the nesting depth (a deep document can
exhaust the parser's stack) and the number of structural marks ``{ [ , :`` outside strings
(each value after the first in a container, each key and each container costs a Python
object of 24-70 bytes however few bytes it takes in the file: ``{},`` is 3 bytes and a
dict of 64, so a file of them takes about 22x its size once parsed). A reader refuses a
text over either cap before :func:`json.loads` sees it.

Example
-------
>>> json_scan(b'{"a": [1, 2], "b": "{,:"}')
(2, 6)
"""

from __future__ import annotations

import numpy as np

__all__ = ["json_scan", "json_depth"]

_QUOTE, _BACKSLASH = ord('"'), ord("\\")
#: +1 for an opening bracket, -1 for a closing one, 0 for any other byte
_STEP = np.zeros(256, dtype=np.int8)
_STEP[[ord("["), ord("{")]] = 1
_STEP[[ord("]"), ord("}")]] = -1
#: the marks counted as items: both opening brackets, the comma and the colon
_MARK = np.zeros(256, dtype=bool)
_MARK[[ord("["), ord("{"), ord("]"), ord("}"), ord(","), ord(":")]] = True
_COUNTED = np.zeros(256, dtype=bool)
_COUNTED[[ord("["), ord("{"), ord(","), ord(":")]] = True
_SCAN_CHUNK = 1 << 18


def json_scan(raw: bytes, chunk: int = _SCAN_CHUNK) -> tuple[int, int]:
    r"""``(depth, items)`` of a JSON text: its deepest ``[`` / ``{`` nesting and how many
    ``{``, ``[``, ``,`` and ``:`` it holds outside strings, in one linear pass.

    The text is scanned in chunks of ``chunk`` bytes carrying three values across chunk
    boundaries: whether the scan is inside a string, the length of the run of backslashes
    that ends the previous chunk, and the current depth. A ``"`` preceded by an odd run of
    backslashes is escaped; the others open or close a string; brackets, commas and colons
    count outside strings only. Every step is a vectorised numpy pass over one chunk, so
    the work is proportional to the size of ``raw`` whatever its content (a crafted
    unterminated string of escaped quotes included) and the extra memory is a small
    multiple of ``chunk``.

    On a text that :func:`json.loads` accepts the depth is its exact nesting depth and
    ``items + 1`` bounds the number of values and keys it holds (each one is the first of
    the document, or follows a ``[``, ``{``, ``,`` or ``:``); on any other text both are at
    least what the parser meets before it finds the error (the two read the same prefix
    the same way), so caps on them hold either way.

    Parameters
    ----------
    raw : bytes
        The JSON text.
    chunk : int
        Bytes per vectorised step (tests use tiny chunks to cross boundaries).

    Returns
    -------
    tuple of int
        The deepest nesting (0 for a text without brackets) and the item count.

    Example
    -------
    >>> json_scan(b'[{}, {}, {"k": []}]')
    (3, 8)
    >>> json_scan(rb'["a\\", ["\"[[,"]]')
    (2, 3)
    """
    view = memoryview(raw).cast("B")
    depth = best = items = 0
    in_string = 0   # 1 inside a string at the start of the chunk
    run = 0         # backslashes ending the previous chunk
    for start in range(0, len(view), chunk):
        b = np.frombuffer(view[start:start + chunk], dtype=np.uint8)
        quotes = np.flatnonzero(b == _QUOTE)
        plain = np.flatnonzero(b != _BACKSLASH)   # positions that end a run of backslashes
        if len(quotes):
            k = np.searchsorted(plain, quotes)       # each quote's own place in ``plain``
            prev = plain[np.maximum(k - 1, 0)]
            runs = np.where(k > 0, quotes - 1 - prev, quotes + run)
            real = quotes[(runs & 1) == 0]
        else:
            real = quotes
        marks = np.flatnonzero(_MARK[b])
        if len(marks):
            inside = (np.searchsorted(real, marks) + in_string) & 1
            outside = b[marks[inside == 0]]
            items += int(np.count_nonzero(_COUNTED[outside]))
            steps = _STEP[outside].astype(np.int64)
            if len(steps):
                levels = np.cumsum(steps)
                best = max(best, depth + int(levels.max()))
                depth += int(levels[-1])
        in_string = (in_string + len(real)) & 1
        run = len(b) - 1 - int(plain[-1]) if len(plain) else run + len(b)
    return best, items


def json_depth(raw: bytes, chunk: int = _SCAN_CHUNK) -> int:
    r"""The nesting depth of :func:`json_scan` alone.

    Example
    -------
    >>> json_depth(b'{"a": [[1], "[[["]}')
    3
    >>> json_depth(rb'["a\\", ["\"[["]]')
    2
    """
    return json_scan(raw, chunk)[0]
