"""Markdown tables of untrusted names: the one table writer of every report.

Router, LLM, task and dataset names come from data files and records (untrusted). Written
into a Markdown table as they are, a name holding ``|`` adds a column, a line break ends the
row, ``<img onerror=...>`` is raw HTML, ``![...](...)`` an image and a leading ``#`` a
heading. Nothing else is escaped, so the same text reads well on a terminal too. :func:`md_text` makes any value literal text for one cell, :func:`md_line` for a line or
list item of its own (a lone ``-`` escaped too), and :func:`md_table`
writes a whole table with every label and cell passed through it; the evaluation report
(``recsys_router.evaluation.tables``) and the RouteJudge report (``recsys_router.judge.report``)
both write their tables with it.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Callable

import numpy as np
import pandas as pd

__all__ = ["md_text", "md_line", "md_table"]

#: characters replaced anywhere: ``|`` (a column), ``\\`` (an escape), a backtick (a code span),
#: ``[`` (a link or an image), and ``<``, ``>``, ``&`` as entities (raw HTML, an entity)
_ANYWHERE = {"\\": "\\\\", "|": "\\|", "`": "\\`", "[": "\\[",
             "<": "&lt;", ">": "&gt;", "&": "&amp;"}
#: a leading heading or list marker (after any spaces): ``#``, or ``-``, ``+``, ``*`` before a
#: space, or digits then ``.`` / ``)`` before a space or the end (a bare ``1.`` is an empty
#: list item); or a text that is a thematic-break run (two or more of one of ``-``, ``*``,
#: ``_``, spaces between: ``--`` after a list's ``- `` is a horizontal rule). So ``-``,
#: ``-0.5`` and ``0.500`` stay as they are; ``>`` is an entity and ``![`` an escaped ``[``.
_LEADING = re.compile(r"^(\s*)(?:(#)|([+*-])(?=\s)|(\d+)[.)](?=\s|\Z)"
                      r"|([-*_])(?=(?:[ \t]*\5)+[ \t]*\Z))")


def md_text(value) -> str:
    """``value`` as literal Markdown text for one table cell or one line.

    Only what could change the table or the page is escaped, so a name reads as it is
    (``mu_o``, ``CPT(50%)``, ``zero (LLM hull)`` unchanged): line breaks and other control
    characters become their visible escape (a newline reads ``\\n``), so a name cannot end
    the table row; ``|``, ``\\``, backticks and ``[`` get a backslash (no extra column, code
    span, link or image), ``<``, ``>`` and ``&`` become entities (no raw HTML), and a leading
    ``#`` or list marker (``-``, ``+``, ``*``, ``1.``) gets a backslash (no heading or list), as
    does a text that is a thematic-break run (``--``, ``***``, ``_ _``: no horizontal rule). Emphasis
    characters (``_``, ``*`` inside text) are left: they cannot break a row.

    Example
    -------
    >>> print(md_text("r|x\\n# h ![i](u) <b>mu_o</b>"))
    r\\|x\\\\n# h !\\[i](u) &lt;b&gt;mu_o&lt;/b&gt;
    >>> print(*map(md_text, ["# head", "1. item", "- x", "-0.5", "CPT(50%)"]))
    \\# head 1\\. item \\- x -0.5 CPT(50%)
    """
    out = []
    for ch in str(value):
        if unicodedata.category(ch)[0] == "C" or ch in "\u2028\u2029":
            ch = ch.encode("unicode_escape").decode("ascii")  # "\n" -> the two characters \ n
        out.append("".join(_ANYWHERE.get(c, c) for c in ch))
    text = "".join(out)
    match = _LEADING.match(text)
    if not match:
        return text
    at = match.end(4) if match.group(4) else match.end(1)  # before the marker, or its . / )
    return text[:at] + "\\" + text[at:]


#: a list marker that is the whole text (spaces around it allowed): after a list item's
#: ``- `` it opens an empty nested list item; in a table cell it is plain text (``-`` marks
#: a missing value there), so only :func:`md_line` escapes it
_LONE_MARKER = re.compile(r"^(\s*)[+*-]\s*\Z")


def md_line(value) -> str:
    """``value`` as literal Markdown text for one line of its own or a list item's text
    (``- {md_line(note)}``): :func:`md_text`, and a text that is a lone ``-``, ``*`` or ``+``
    gets a backslash too (``- -`` is an empty list inside a list item; ``#``, ``1.``, ``1)``
    and thematic breaks are escaped by :func:`md_text` already).

    Example
    -------
    >>> print(*map(md_line, ["-", "*", "+", "1.", "#", "-0.5", "a - b"]))
    \\- \\* \\+ 1\\. \\# -0.5 a - b
    """
    text = md_text(value)
    match = _LONE_MARKER.match(text)
    return text if not match else text[:match.end(1)] + "\\" + text[match.end(1):]


def md_table(df: pd.DataFrame, number: Callable[[object, float], str] | None = None,
             index: bool = False) -> str:
    """A GitHub Markdown table of ``df``, every column label and cell escaped (:func:`md_text`).

    Parameters
    ----------
    df : DataFrame
    number : callable, optional
        ``number(column_label, value) -> str`` formats a float cell (NumPy floats included);
        default ``{:.3f}``, NaN left empty. Its text is escaped like any other cell.
    index : bool
        Write the index as the first column(s).

    Returns
    -------
    str
        The header line, the ``|---|`` line and one line per row, each with exactly one cell
        per column.

    Example
    -------
    >>> print(md_table(pd.DataFrame({"a|b": ["<i>x</i>"], "n": [0.5]})))
    | a\\|b | n |
    |---|---|
    | &lt;i&gt;x&lt;/i&gt; | 0.500 |
    """
    if number is None:
        number = _default_number
    d = _with_index(df) if index else df
    labels = list(d.columns)
    lines = ["| " + " | ".join(md_text(c) for c in labels) + " |", "|" + "---|" * len(labels)]
    for _, row in d.iterrows():
        cells = [md_text(number(c, v) if isinstance(v, (float, np.floating)) else v)
                 for c, v in zip(labels, row.tolist())]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _with_index(df: pd.DataFrame) -> pd.DataFrame:
    """``df.reset_index()`` that allows an index level named like a column (a router called
    ``"router"`` in a table indexed by ``"router"``): both columns are kept."""
    names = [("index" if df.index.nlevels == 1 else f"level_{k}") if n is None else n
             for k, n in enumerate(df.index.names)]
    d = df.reset_index(drop=True)
    for k, name in enumerate(names):
        d.insert(k, name, df.index.get_level_values(k).to_numpy(), allow_duplicates=True)
    return d


def _default_number(_column, value: float) -> str:
    return "" if np.isnan(value) else f"{value:.3f}"
