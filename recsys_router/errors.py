"""Exceptions raised by recsys-router.

Every validation error names where the problem is (source file, row, column or
field) and what was expected, so a user can fix the input without reading code.
"""

from __future__ import annotations

__all__ = ["DataValidationError", "ConfigArgumentError", "ArgumentValueError", "NotFittedError",
           "RepeatedNameError", "where", "few"]


def where(source: str | None = None, row: int | None = None, column: str | None = None) -> str:
    """Format a location prefix such as ``"data.csv, row 12, column 'score': "``.

    Parameters
    ----------
    source : str, optional
        File path or dataset name.
    row : int, optional
        Row number in the source (0-based data row; headers are not counted).
    column : str, optional
        Column or field name.

    Returns
    -------
    str
        A prefix ending in ``": "``, or an empty string when nothing is known.

    Example
    -------
    >>> where("a.csv", 3, "score")
    "a.csv, row 3, column 'score': "
    """
    parts = []
    if source:
        parts.append(str(source))
    if row is not None:
        parts.append(f"row {row}")
    if column is not None:
        parts.append(f"column {column!r}")
    return (", ".join(parts) + ": ") if parts else ""


def few(names, limit: int = 10, width: int = 100) -> str:
    """At most ``limit`` items of ``names`` for an error message, each ``repr`` cut to
    ``width`` characters, and how many were left out: a message about a long list stays
    short whatever the list holds.

    Parameters
    ----------
    names : sequence
        The items (LLM names, keys...).
    limit : int
        Most items shown.
    width : int
        Most characters of each item's ``repr``.

    Returns
    -------
    str
        ``"['a', 'b']"``, or ``"['a', 'b', ...] (5 in all)"`` when some were left out.

    Example
    -------
    >>> few(["a", "b"])
    "['a', 'b']"
    >>> few([str(i) for i in range(5)], limit=2)
    "['0', '1', ...] (5 in all)"
    >>> few(["x" * 50], width=8)
    "['xxxx...]"
    """
    names = list(names)
    shown = []
    for n in names[:limit]:
        text = repr(n)
        shown.append(text if len(text) <= width else text[:width - 3] + "...")
    more = f", ...] ({len(names):,} in all)" if len(names) > limit else "]"
    return "[" + ", ".join(shown) + more


class DataValidationError(ValueError):
    """Input data broke a rule; the message says where and what was expected."""

    def __init__(self, message: str, *, source: str | None = None, row: int | None = None,
                 column: str | None = None):
        self.message, self.source, self.row, self.column = message, source, row, column
        super().__init__(where(source, row, column) + message)

    def at(self, *, source: str | None = None, row: int | None = None) -> "DataValidationError":
        """The same error (message and column) located at ``source`` / ``row`` instead, for a
        caller that knows where the checked value came from.

        Example
        -------
        >>> str(DataValidationError("bad", column="x").at(source="f.jsonl", row=3))
        "f.jsonl, row 3, column 'x': bad"
        """
        return DataValidationError(self.message, source=source, row=row, column=self.column)


class ConfigArgumentError(ValueError):
    """A command-line argument or config value was refused (a wrong type, a value a
    constructor rejected, an unknown key, a ``class_path`` outside the project); the message
    names the argument (e.g. ``--data.init_args.val_fraction``) and what was expected."""

    def __init__(self, message: str, argument: str | None = None):
        self.argument = argument
        super().__init__(f"{argument}: {message}" if argument else message)


class ArgumentValueError(ValueError):
    """A constructor or hyperparameter check refused a value it was given (``lr must be a
    finite number > 0, got -1``): a deliberate refusal, which the Lightning CLI reports as one
    line naming the argument. Any other ``ValueError`` raised while building the model or the
    data module may be a bug and keeps a ``--debug`` hint."""


class RepeatedNameError(ValueError):
    """A list that must name each LLM once (a request's ``candidates``) names one more than
    once; the message names the repeated LLM(s). The service answers it with a 422."""


class NotFittedError(RuntimeError):
    """A router was used before ``fit`` was called."""
