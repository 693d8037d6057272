"""Checks of one search-space parameter's values that Optuna would otherwise fail on, or get
wrong, only in a trial: int bounds past what TPE's float64 arithmetic handles, float bounds past
float range, float steps too fine for Optuna's decimal arithmetic or for floats to tell apart,
and categorical choices that differ in type but are equal in Python.

Each refusal is a :class:`~recsys_router.errors.DataValidationError` naming the search file
and the key. :mod:`recsys_router.tuning.space` runs them while parsing a search space.
"""

from __future__ import annotations

import json
import math
import sys

from recsys_router.errors import DataValidationError

__all__ = ["MAX_FLOAT_STEPS", "MAX_INT_BOUND", "check_int_bounds", "check_float_bounds",
           "check_float_step", "check_optuna_accepts", "refuse_equal_choices"]

#: most grid points of a float range with a ``step`` (Optuna's decimal arithmetic on the
#: range failed, at the first trial, for a step of 1e-30 over 0..1)
MAX_FLOAT_STEPS = 10**9
#: largest magnitude of an int bound: TPE samples ints in float64, whose arithmetic breaks down
#: on wider ranges (NaN acquisition values from about 2**47 on a log scale and 2**51 on a
#: linear one; past 2**63 the first TPE trial crashed)
MAX_INT_BOUND = 2**40
_FLOAT_MAX = sys.float_info.max


def _fail(source, key, msg):
    raise DataValidationError(f"search space key {key!r}: {msg}", source=source)


def _short(value) -> str:
    """``repr(value)``, or the size of an integer too long to print (Python refuses to write
    one of over 4,300 digits)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"{'a negative' if value < 0 else 'an'} integer of {value.bit_length()} bits"
    return repr(value)


def check_int_bounds(source, key, low: int, high: int) -> None:
    """Refuse int bounds beyond +-:data:`MAX_INT_BOUND`.

    Example
    -------
    >>> check_int_bounds("s.yaml", "k", -2**40, 2**40)
    >>> check_int_bounds("s.yaml", "k", 0, 2**70)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    recsys_router.errors.DataValidationError: s.yaml: search space key 'k': int bounds must lie within ...
    """
    if not (abs(low) <= MAX_INT_BOUND and abs(high) <= MAX_INT_BOUND):
        _fail(source, key, f"int bounds must lie within -2**40..2**40 (+-{MAX_INT_BOUND:,}; the "
                           "sampler computes in float64), got "
                           f"low={_short(low)}, high={_short(high)}")


def check_float_bounds(source, key, low, high, name: str | None = None) -> None:
    """Refuse float bounds (or, with ``name``, that one value, given as both) written as
    integers past float range (``10**400``)."""
    if any(isinstance(v, int) and abs(v) > _FLOAT_MAX for v in (low, high)):
        if name is not None:
            _fail(source, key, f"{name} must be a finite number, got {name}={_short(low)} (past "
                               "float range)")
        _fail(source, key, f"low and high must be finite numbers, got low={_short(low)}, "
                           f"high={_short(high)} (past float range)")


def check_float_step(source, key, low, high, step) -> None:
    """Refuse a float ``step`` that makes more than :data:`MAX_FLOAT_STEPS` grid points, or one
    below the spacing of floats at the bounds (its grid points would not be distinct numbers)."""
    count = (high - low) / step
    if not count <= MAX_FLOAT_STEPS:  # also catches an overflow to infinity
        _fail(source, key, f"step {step!r} divides low={low!r}..high={high!r} into {count:.3g} "
                           f"steps; at most {MAX_FLOAT_STEPS:.0e} are allowed (use a larger step, "
                           "or no step)")
    spacing = math.ulp(max(abs(low), abs(high)))
    if step < 2 * spacing:
        _fail(source, key, f"step {step!r} is below twice the spacing of floats near "
                           f"{max(abs(low), abs(high))!r} ({spacing!r}): its grid points are not "
                           "distinct numbers")


def check_optuna_accepts(source, key, kind, low, high, log, step) -> None:
    """Build the Optuna distribution a trial will build, so that whatever Optuna refuses is
    refused here, naming the file and key, and not in the first trial."""
    import warnings  # noqa: PLC0415

    from optuna.distributions import FloatDistribution, IntDistribution  # noqa: PLC0415
    try:
        with warnings.catch_warnings():  # "range is not divisible by step": said again per trial
            warnings.simplefilter("ignore")
            if kind == "float":
                FloatDistribution(float(low), float(high), log=log,
                                  step=None if step is None else float(step))
            else:
                IntDistribution(int(low), int(high), log=log, step=1 if step is None else int(step))
    except Exception as exc:  # noqa: BLE001 - any refusal of Optuna's is this key's error
        _fail(source, key, f"Optuna refuses this range ({type(exc).__name__}: {str(exc)[:200]})")


def _frozen(value):
    """A hashable stand-in for a choice, equal (``==``, same hash) to another's exactly when
    the choices are equal: lists become tagged tuples, mappings tagged frozensets of items."""
    if isinstance(value, list):
        return (list, tuple(_frozen(v) for v in value))
    if isinstance(value, dict):
        return (dict, frozenset((k, _frozen(v)) for k, v in value.items()))
    return value


def refuse_equal_choices(source, key, choices) -> None:
    """Refuse choices that differ in type but are equal in Python (``0`` and ``false``, ``1``
    and ``1.0``, ``[1]`` and ``[true]``): Optuna records the first choice equal to the one
    drawn, and ``when`` conditions could not tell them apart."""
    seen: dict = {}
    for choice in choices:
        first = seen.setdefault(_frozen(choice), choice)
        if first is not choice:
            _fail(source, key, f"'choices' {json.dumps(first)} and {json.dumps(choice)} are equal "
                               "in Python: Optuna records the first of equal choices, so a trial "
                               "of the other would be recorded wrongly; keep one of them")
