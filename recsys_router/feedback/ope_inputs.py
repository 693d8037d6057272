"""The inputs of the off-policy estimators (:mod:`recsys_router.feedback.ope`), checked:
logging propensities, logged actions, target choice probabilities, reward-model predictions
and the number of bootstrap resamples. Every error names the first bad row and what was
expected; :mod:`~recsys_router.feedback.ope` re-exports the public names.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..long_columns import _boolean_rows
from ..numeric import PROPENSITY_FLOOR, shown

__all__ = ["PROPENSITY_FLOOR", "check_propensities", "bad_propensities", "propensity_problem",
           "whole_actions", "check_n_boot",
           "row_sum_tolerance", "check_target_probs", "check_q"]


def check_propensities(p, source: str = "log") -> np.ndarray:
    """Propensities as float64, each in [:data:`PROPENSITY_FLOOR`, 1]; a clear error naming
    the first bad row.

    A boolean (``True`` would read as 1, a deterministic logger) is refused, as a boolean
    score or cost is; a positive propensity below :data:`PROPENSITY_FLOOR` (1e-12) is refused
    because its importance weight ``1 / p`` (or the weight's square in the effective sample
    size) would overflow to inf and turn IPS, SNIPS, DR and the ESS into inf/NaN.

    Example
    -------
    >>> check_propensities([0.5, 1.0]).tolist()
    [0.5, 1.0]
    >>> check_propensities([0.5, 1e-320])
    Traceback (most recent call last):
    ...
    ValueError: log: row 1: propensity 1e-320 is below 1e-12, the smallest propensity accepted (PROPENSITY_FLOOR): its importance weight 1/p or that weight's square would overflow (1 such rows)
    """
    given = p.to_numpy() if isinstance(p, pd.Series) else \
        p if isinstance(p, np.ndarray) else np.asarray(p, dtype=object)  # a list keeps its bools
    flat = given.ravel()
    flags = _boolean_rows(pd.Series(flat))
    if flags.any():
        r = int(np.flatnonzero(flags)[0])
        raise ValueError(f"{source}: row {r}: {propensity_problem(flat[r], 1.0)} "
                         f"({int(flags.sum())} such rows)")
    p = given.astype(np.float64)
    bad = bad_propensities(p)
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        v = float(p[r])
        tail = "" if 0 < v < PROPENSITY_FLOOR else \
            "; off-policy estimators and debiased losses divide by it"
        raise ValueError(f"{source}: row {r}: {propensity_problem(v, v)} "
                         f"({int(bad.sum())} such rows){tail}")
    return p


def bad_propensities(p: np.ndarray) -> np.ndarray:
    """Mask of the float propensities outside [:data:`PROPENSITY_FLOOR`, 1] (NaN included).

    Example
    -------
    >>> bad_propensities(np.array([1.0, 1e-12, 1e-13, 0.0, np.nan, 1.5])).tolist()
    [False, False, True, True, True, True]
    """
    with np.errstate(invalid="ignore"):
        return ~(np.isfinite(p) & (p >= PROPENSITY_FLOOR) & (p <= 1))


def propensity_problem(raw, value: float) -> str | None:
    """Why a propensity given as ``raw`` (read as the float ``value``) is refused, or None:
    a boolean, a positive number below :data:`PROPENSITY_FLOOR`, or anything else outside
    (0, 1] (NaN, text read as NaN, infinities).

    Example
    -------
    >>> propensity_problem(True, 1.0)
    'propensity True is a boolean, not a number in (0, 1]'
    >>> propensity_problem("50%", float("nan")), propensity_problem(0.5, 0.5)
    ("propensity '50%' must be in (0, 1]", None)
    """
    if isinstance(raw, (bool, np.bool_)):
        return f"propensity {bool(raw)!r} is a boolean, not a number in (0, 1]"
    if 0 < value < PROPENSITY_FLOOR:
        return (f"propensity {shown(raw)} is below {PROPENSITY_FLOOR:g}, the smallest propensity "
                "accepted (PROPENSITY_FLOOR): its importance weight 1/p or that weight's square "
                "would overflow")
    if not (np.isfinite(value) and 0 < value <= 1):
        return f"propensity {shown(raw)} must be in (0, 1]"
    return None


def whole_actions(logged_action) -> np.ndarray:
    """Logged actions as int64; a value that is not a whole number (``1.7``, NaN, text) is
    an error naming its row, never truncated."""
    given = np.asarray(logged_action)
    if given.dtype.kind in "iu":
        return given.astype(np.int64)
    try:
        f = given.astype(np.float64)
    except (TypeError, ValueError):
        f = None
    ok = None if f is None or given.dtype.kind == "b" else np.isfinite(f) & (f == np.round(f))
    if ok is None or not ok.all():
        i = 0 if ok is None or given.ndim == 0 else int(np.flatnonzero(~ok.ravel())[0])
        shown = given.ravel()[i] if given.ndim else given
        shown = shown.item() if isinstance(shown, np.generic) else shown
        raise ValueError(f"row {i}: logged action {shown!r} is not a whole number (the column "
                         f"of the logged LLM)")
    return f.astype(np.int64)


def check_n_boot(n_boot) -> None:
    """``n_boot`` must be a whole number >= 0 (0: no intervals); a ValueError says so."""
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 0:
        raise ValueError(f"n_boot must be a whole number >= 0 (0 = no intervals), got {n_boot!r}")


def row_sum_tolerance(dtype, n_cols: int) -> float:
    """How far from 1 a row of ``n_cols`` probabilities of ``dtype`` may sum from rounding
    alone: ``max(1e-9, 8 * n_cols * eps)`` with ``eps`` the dtype's machine epsilon (float64
    for a non-float dtype).

    Example
    -------
    >>> row_sum_tolerance(np.float64, 4)
    1e-09
    >>> row_sum_tolerance(np.float32, 10) == 80 * float(np.finfo(np.float32).eps)
    True
    """
    dt = np.dtype(dtype)
    eps = float(np.finfo(dt if np.issubdtype(dt, np.floating) else np.float64).eps)
    return max(1e-9, 8 * max(int(n_cols), 1) * eps)


def check_target_probs(pi, tol: float | None = None) -> None:
    """Target choice probabilities (n, L): finite, each in [0, 1], each row summing to 1
    within ``tol`` (by default :func:`row_sum_tolerance` of the given dtype and L, so a
    float32 softmax passes; sums are taken in float64); a ValueError names the first bad row.

    Example
    -------
    >>> check_target_probs(np.array([[0.25, 0.75], [1.0, 0.0]]))
    >>> check_target_probs(np.array([[3.0, 0.0]]))
    Traceback (most recent call last):
    ...
    ValueError: target probabilities: row 0: [3.0, 0.0] must be finite, each in [0, 1], summing to 1 (sum 3.0; 1 such rows)
    """
    given = np.asarray(pi)
    pi = given.astype(np.float64)
    if tol is None:
        tol = row_sum_tolerance(given.dtype, pi.shape[1] if pi.ndim == 2 else 1)
    with np.errstate(invalid="ignore"):
        total = pi.sum(axis=1)
        bad = ~(np.isfinite(pi).all(axis=1) & ((pi >= 0) & (pi <= 1)).all(axis=1)
                & (np.abs(total - 1.0) <= tol))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        row = pi[i].tolist()
        shown = str(row if len(row) <= 8 else row[:8] + ["..."])
        raise ValueError(f"target probabilities: row {i}: {shown} must be finite, each in [0, 1], "
                         f"summing to 1 (sum {float(total[i])!r}; {int(bad.sum())} such rows)")


def check_q(q, shape) -> np.ndarray:
    """Reward-model predictions as float64 of ``shape``, all finite, else a ValueError."""
    q = np.asarray(q, np.float64)
    if q.shape != shape:
        raise ValueError(f"reward model predictions have shape {q.shape}, expected {shape}")
    if not np.isfinite(q).all():
        raise ValueError("reward model predictions are not all finite")
    return q
