"""Range checks of router hyperparameters: one clear ``ValueError`` naming the parameter and
the range it accepts, instead of a silent truncation or a fit that runs on nonsense.

Routers call these where they already validate (at fit time, or in a module's constructor),
e.g. ``check_number(self.k, "k", low=1, integer=True)``.
"""

from __future__ import annotations

import math
import numbers

from recsys_router.errors import ArgumentValueError

__all__ = ["check_number", "check_fraction", "check_width", "check_seed", "held_out_count",
           "MAX_WIDTH", "MAX_SEED"]

#: the largest layer width or embedding size a model accepts (a typo such as 10**9 would
#: otherwise try to allocate gigabytes before failing)
MAX_WIDTH = 65536

#: the largest seed accepted: numpy's and scikit-learn's ``random_state`` stop at 2**32 - 1
MAX_SEED = 2**32 - 1


def _describe(low, high, low_open: bool, high_open: bool, integer: bool) -> str:
    kind = "an integer" if integer else "a finite number"
    if low is not None and high is not None:
        return f"{kind} in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
    if low is not None:
        return f"{kind} {'>' if low_open else '>='} {low}"
    if high is not None:
        return f"{kind} {'<' if high_open else '<='} {high}"
    return kind


def check_number(value, name: str, *, low=None, high=None, low_open: bool = False,
                 high_open: bool = False, integer: bool = False, none: bool = False):
    """``value`` checked against a range; returns it as ``int`` (``integer``) or ``float``.

    Parameters
    ----------
    value
        The hyperparameter as given.
    name : str
        Its name, as the error says it.
    low, high : number, optional
        Bounds (inclusive unless ``low_open`` / ``high_open``).
    integer : bool
        Whether it must be a whole number (an ``int``, not ``2.5``, ``True`` or ``"3"``).
    none : bool
        Whether ``None`` is accepted (returned unchanged).

    Raises
    ------
    ArgumentValueError
        (a ``ValueError``) ``"<name> must be <what it accepts>, got <value>"``.

    Example
    -------
    >>> check_number(3, "k", low=1, integer=True)
    3
    >>> check_number(2.5, "k", low=1, integer=True)
    Traceback (most recent call last):
    ...
    recsys_router.errors.ArgumentValueError: k must be an integer >= 1, got 2.5
    >>> check_number(float("nan"), "penalty", low=0)
    Traceback (most recent call last):
    ...
    recsys_router.errors.ArgumentValueError: penalty must be a finite number >= 0, got nan
    """
    if value is None and none:
        return None
    want = _describe(low, high, low_open, high_open, integer) + (" or None" if none else "")
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
    if ok and integer:
        ok = isinstance(value, numbers.Integral)
    if ok:
        v = int(value) if integer else float(value)
        ok = math.isfinite(v) and not (
            (low is not None and (v <= low if low_open else v < low))
            or (high is not None and (v >= high if high_open else v > high)))
    if not ok:
        raise ArgumentValueError(f"{name} must be {want}, got {value!r}")
    return v


def check_fraction(value, name: str, *, zero: bool = False) -> float:
    """A share of queries in ``(0, 1)`` (``[0, 1)`` with ``zero``).

    Example
    -------
    >>> check_fraction(0.2, "val_fraction")
    0.2
    """
    return check_number(value, name, low=0, high=1, low_open=not zero, high_open=True)


def check_width(value, name: str) -> int:
    """A layer width or embedding size: an integer in ``[1, MAX_WIDTH]``.

    Example
    -------
    >>> check_width(64, "dim")
    64
    >>> check_width(10**9, "dim")
    Traceback (most recent call last):
    ...
    recsys_router.errors.ArgumentValueError: dim must be an integer in [1, 65536], got 1000000000
    """
    return check_number(value, name, low=1, high=MAX_WIDTH, integer=True)


def check_seed(value, name: str = "seed", *, none: bool = False):
    """A random seed: an integer in ``[0, MAX_SEED]`` (what numpy and scikit-learn accept),
    so ``1.5`` is not silently read as ``1`` and ``"a"`` fails at fit, not at route time.

    Example
    -------
    >>> check_seed(7)
    7
    >>> check_seed(1.5)
    Traceback (most recent call last):
    ...
    recsys_router.errors.ArgumentValueError: seed must be an integer in [0, 4294967295], got 1.5
    """
    return check_number(value, name, low=0, high=MAX_SEED, integer=True, none=none)


def held_out_count(fraction: float, n: int, minimum: int, owner: str) -> int:
    """Queries a router's own tuning split holds out: ``max(minimum, round(fraction * n))``
    of its ``n`` training queries, refused when that leaves none to fit on.

    Raises
    ------
    ArgumentValueError
        Naming ``owner`` (the router), ``val_fraction`` and the counts.

    Example
    -------
    >>> held_out_count(0.2, 50, 10, "cost-aware")
    10
    >>> held_out_count(0.99, 45, 10, "cost-aware")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    recsys_router.errors.ArgumentValueError: cost-aware: val_fraction=0.99 holds out 45 of ...
    """
    n_val = max(int(minimum), int(round(float(fraction) * int(n))))
    if n_val >= n:
        raise ArgumentValueError(f"{owner}: val_fraction={fraction!r} holds out {n_val} of the "
                                 f"{n} training queries and leaves none to fit on; expected a "
                                 f"smaller val_fraction")
    return n_val
