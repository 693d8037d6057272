"""Markdown tables of untrusted names: the one table writer of every report.

Router, LLM, task and dataset names come from data files and records (untrusted). Written
into a Markdown table as they are, a name holding ``|`` adds a column, a line break ends the
row, ``<img onerror=...>`` is raw HTML, ``![...](...)`` an image and a leading ``#`` a
heading. :func:`md_text` makes any value literal text for one cell, and :func:`md_table`
writes a whole table with every label and cell passed through it; the evaluation report
(``recsys_router.evaluation.tables``) and the RouteJudge report (``recsys_router.judge.report``)
both write their tables with it.
"""

from __future__ import annotations

import unicodedata
from typing import Callable

import numpy as np
import pandas as pd

__all__ = ["md_text", "md_table"]

#: characters with a Markdown meaning (emphasis, links, images, headings, HTML, table cells,
#: GitHub's ``$`` math); a backslash before each makes it literal text
_MD_SPECIAL = frozenset("\\`*_{}[]()#!|<>~&$")


def md_text(value) -> str:
    """``value`` as literal Markdown text for one table cell.

    Line breaks and other control characters become their visible escape (a newline reads
    ``\\n``), so a name cannot end the table row; each Markdown special character (see
    ``_MD_SPECIAL``: ``|`` would add a column, ``![...](...)`` an image, ``<...>`` HTML) is
    escaped with a backslash.

    Example
    -------
    >>> print(md_text("r|x\\n# h ![i](u)"))
    r\\|x\\\\n\\# h \\!\\[i\\]\\(u\\)
    """
    out = []
    for ch in str(value):
        if unicodedata.category(ch)[0] == "C" or ch in "\u2028\u2029":
            ch = ch.encode("unicode_escape").decode("ascii")  # "\n" -> the two characters \ n
        out.append("".join("\\" + c if c in _MD_SPECIAL else c for c in ch))
    return "".join(out)


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
    | \\<i\\>x\\</i\\> | 0.500 |
    """
    if number is None:
        number = _default_number
    d = df.reset_index() if index else df
    labels = list(d.columns)
    lines = ["| " + " | ".join(md_text(c) for c in labels) + " |", "|" + "---|" * len(labels)]
    for _, row in d.iterrows():
        cells = [md_text(number(c, v) if isinstance(v, (float, np.floating)) else v)
                 for c, v in zip(labels, row.tolist())]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _default_number(_column, value: float) -> str:
    return "" if np.isnan(value) else f"{value:.3f}"
