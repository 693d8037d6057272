"""Numbers read from data files as floats, and raw values shown in error messages.

JSON and CSV hold integers of any size: ``10**400`` is valid in both, but no float holds it
(``float(10**400)`` raises :class:`OverflowError`, which no loader expected). Here such an
integer becomes ``±inf``, so the loaders' checks for non-finite values refuse it with the
file, row and column named; :func:`shown` prints it without its hundreds of digits.

:data:`PROPENSITY_FLOOR` is the smallest logging propensity any reader of logged feedback
(the long-table loader, the decision-log reader, the off-policy estimators and the debiased
losses) accepts.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["to_floats", "shown", "PROPENSITY_FLOOR"]

#: smallest propensity (the logging policy's probability of the logged choice) accepted.
#: Off-policy estimators weight a logged outcome by ``w = pi / p <= 1 / p``: with
#: ``p >= 1e-12`` a weight is at most ``1e12``, the effective sample size's sum of squared
#: weights at most ``n * 1e24`` (finite for any log) and a weighted outcome ``w * r`` finite
#: for every ``|r| < 1e296``; a positive ``p`` below it (``1e-320``, a subnormal float) gives
#: ``1 / p = inf`` or an infinite square, so IPS, SNIPS, DR and the ESS would come out
#: inf/NaN. A logger serves a choice of probability below ``1e-12`` about once in a million
#: million decisions, so such a value is a logging error, not an observation.
PROPENSITY_FLOOR = 1e-12


def _one(value) -> float:
    if value is None or value is pd.NA:
        return np.nan
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return float(value)
        except OverflowError:
            return np.inf if value > 0 else -np.inf
    try:  # the rules pd.to_numeric applies to every other column ('1_000' is not a number)
        return float(pd.to_numeric(value, errors="coerce"))
    except (TypeError, ValueError, OverflowError):
        return np.nan


def to_floats(col: pd.Series) -> np.ndarray:
    """A column as float64 (no copy for a float column); what is not a number becomes NaN
    and an integer too large for a float ``±inf``.

    Example
    -------
    >>> to_floats(pd.Series([1, 10**400, "x", None, -10**400], dtype=object)).tolist()
    [1.0, inf, nan, nan, -inf]
    >>> to_floats(pd.Series(["1_000", "2.5", 10**400], dtype=object)).tolist()  # as pd.to_numeric
    [nan, 2.5, inf]
    """
    if col.dtype in (np.float32, np.float64):
        return col.to_numpy()
    try:
        return pd.to_numeric(col, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    except (OverflowError, TypeError, ValueError):  # an integer past float range (rare)
        return np.fromiter((_one(v) for v in col.to_numpy(dtype=object)), dtype=np.float64,
                           count=len(col))


def shown(value) -> str:
    """``repr`` of a raw value for an error message: numpy scalars as plain numbers
    (``-0.1``, not ``np.float64(-0.1)``), an integer of more than 30 digits by its size, and
    anything else cut to 60 characters.

    Example
    -------
    >>> shown(np.float64(-0.1)), shown(10**400), shown("n/a")
    ('-0.1', '(an integer of 401 digits)', "'n/a'")
    """
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 100:
        digits = len(str(abs(value))) if value.bit_length() < 14000 else None
        sign = "a negative" if value < 0 else "an"
        return (f"({sign} integer of {digits} digits)" if digits else
                f"({sign} integer of about {int(value.bit_length() * 0.30103) + 1} digits)")
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
