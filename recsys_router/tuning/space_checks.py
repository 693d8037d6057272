"""Checks of one search-space parameter's values that Optuna would otherwise fail on only in a
trial: float steps too fine for Optuna's decimal arithmetic or for floats to tell apart, and
whatever else Optuna's distributions refuse.

Each refusal is a :class:`~recsys_router.errors.DataValidationError` naming the search file
and the key. :mod:`recsys_router.tuning.space` runs them while parsing a search space.
"""

from __future__ import annotations

import math

from recsys_router.errors import DataValidationError

__all__ = ["MAX_FLOAT_STEPS", "check_float_step", "check_optuna_accepts"]

#: most grid points of a float range with a ``step`` (Optuna's decimal arithmetic on the
#: range failed, at the first trial, for a step of 1e-30 over 0..1)
MAX_FLOAT_STEPS = 10**9


def _fail(source, key, msg):
    raise DataValidationError(f"search space key {key!r}: {msg}", source=source)


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

