"""Shared pieces of the metrics package: metric directions, input checks, small helpers.

Every metric function is registered with :func:`metric`, which records in
:data:`DIRECTIONS` whether a larger value is better (``"higher"``), a smaller one
(``"lower"``), or neither (``"none"``, for descriptive quantities such as a cost), and
attaches the same string as ``fn.direction``.

Inputs follow one convention across the package: ``scores`` and ``costs`` are true
(observed) matrices of shape ``(n_queries, n_llms)``; ``pred_scores``/``pred_costs``
are a router's predictions of the same shape; ``choices`` is an int vector of column
indices, one per query. Metrics need complete matrices: drop queries with a missing
score first (see :func:`complete_rows`), as ORBIT and RouterEval do.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from ..errors import DataValidationError

__all__ = ["observed_means", "observed_costs", "DIRECTIONS", "metric", "as_matrix", "as_choices", "chosen", "entropy_bits",
           "complete_rows", "finite_curve", "best_single", "BestSingle", "reaches", "REACH_RTOL"]

#: metric name -> "higher" | "lower" | "none" (filled by the :func:`metric` decorator)
DIRECTIONS: dict[str, str] = {}
_VALID_DIRECTIONS = ("higher", "lower", "none")


def metric(name: str, direction: str) -> Callable:
    """Register a metric's name and direction; attach them as ``.metric_name``/``.direction``.

    Parameters
    ----------
    name : str
        Key under which the metric is reported (e.g. ``"mu_o"``).
    direction : {"higher", "lower", "none"}
        Whether a larger value is better, a smaller one, or neither.

    Returns
    -------
    callable
        A decorator returning the function unchanged apart from the two attributes.

    Example
    -------
    >>> @metric("demo_metric", "higher")
    ... def demo(x):
    ...     return x
    >>> demo.direction, DIRECTIONS["demo_metric"]
    ('higher', 'higher')
    >>> del DIRECTIONS["demo_metric"]
    """
    if direction not in _VALID_DIRECTIONS:
        raise ValueError(f"direction of metric {name!r} must be one of {_VALID_DIRECTIONS}, "
                         f"got {direction!r}")

    def deco(fn: Callable) -> Callable:
        fn.metric_name = name
        fn.direction = direction
        DIRECTIONS[name] = direction
        return fn

    return deco


def as_matrix(a, name: str, shape: tuple[int, int] | None = None, *,
              allow_nan: bool = False, nonnegative: bool = False) -> np.ndarray:
    """Validate a (queries x LLMs) matrix and return it as float64.

    Parameters
    ----------
    a : array-like
        The matrix.
    name : str
        Argument name, used in error messages (e.g. ``"scores"``).
    shape : tuple of int, optional
        Required shape.
    allow_nan : bool
        Whether NaN cells are accepted (infinite values never are).
    nonnegative : bool
        Whether negative values are rejected (costs).

    Returns
    -------
    ndarray of float64, shape (n_queries, n_llms)

    Example
    -------
    >>> as_matrix([[1, 0]], "scores").dtype
    dtype('float64')
    """
    arr = np.asarray(a, dtype=np.float64)
    if arr.ndim != 2:
        raise DataValidationError(f"{name} must be a 2-D (queries x LLMs) array, got shape {arr.shape}",
                                  column=name)
    if shape is not None and arr.shape != tuple(shape):
        raise DataValidationError(f"{name} has shape {arr.shape}, expected {tuple(shape)} "
                                  f"(queries x LLMs, same as scores)", column=name)
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise DataValidationError(f"{name} is empty (shape {arr.shape}); expected at least one query "
                                  f"and one LLM", column=name)
    bad = np.isinf(arr) if allow_nan else ~np.isfinite(arr)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        what = "a finite number" if allow_nan else \
            "a finite number (drop queries with missing values first, e.g. with complete_rows)"
        raise DataValidationError(f"{name}[{i}, {j}] is {arr[i, j]}; expected {what}", row=int(i),
                                  column=name)
    if nonnegative and (arr < 0).any():
        i, j = np.argwhere(arr < 0)[0]
        raise DataValidationError(f"{name}[{i}, {j}] is {arr[i, j]}; expected a cost >= 0",
                                  row=int(i), column=name)
    return arr


def finite_curve(values: np.ndarray, name: str, hint: str = "") -> None:
    """Refuse a curve vector holding NaN or inf: a DataValidationError names ``name`` and the
    first bad index (``hint`` is appended to the message).

    Example
    -------
    >>> finite_curve(np.array([0.5, np.nan]), "qualities")
    Traceback (most recent call last):
    ...
    recsys_router.errors.DataValidationError: column 'qualities': qualities[1] is nan; expected a finite curve value
    """
    bad = ~np.isfinite(values)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DataValidationError(f"{name}[{i}] is {values[i]}; expected a finite curve value{hint}",
                                  column=name)


def as_choices(choices, n_queries: int, n_llms: int, name: str = "choices") -> np.ndarray:
    """Validate chosen column indices: int vector of length ``n_queries`` in ``[0, n_llms)``.

    Integer arrays are taken as they are; a float array only when every entry is a whole
    number (``1.0``). Each index is checked against ``[0, n_llms)`` before it is converted,
    so an out-of-range value is reported as given (``1e+20``, not what an int64 cast makes
    of it). A boolean array (a mask, not indices), a text or object array and a NaN, infinite
    or fractional entry are refused. Every refusal is a
    :class:`~recsys_router.errors.DataValidationError` naming ``name`` (and the first bad
    index where one entry is at fault).

    Example
    -------
    >>> as_choices([0, 1], 2, 2).tolist()
    [0, 1]
    >>> as_choices(np.array([1e20, 0.0]), 2, 2)
    Traceback (most recent call last):
    ...
    recsys_router.errors.DataValidationError: row 0, column 'choices': choices[0] = 1e+20 is not a valid LLM index; expected 0..1
    """
    c = np.asarray(choices)
    if c.ndim != 1 or c.shape[0] != n_queries:
        raise DataValidationError(f"{name} must be a 1-D array of {n_queries} column indices (one per "
                                  f"query), got shape {c.shape}", column=name)
    if not c.size:
        return c.astype(np.int64)
    if c.dtype.kind not in "iuf":
        what = "booleans (a mask, not column indices)" if c.dtype.kind == "b" else f"dtype {c.dtype}"
        raise DataValidationError(f"{name} must hold integer column indices, got {what}", column=name)
    if c.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(c) | (c % 1 != 0)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise DataValidationError(f"{name}[{i}] = {c[i].item()!r}; expected a whole-number column "
                                      f"index", row=i, column=name)
    bad = (c < 0) | (c >= n_llms)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DataValidationError(f"{name}[{i}] = {c[i].item()!r} is not a valid LLM index; expected "
                                  f"0..{n_llms - 1}", row=i, column=name)
    return c.astype(np.int64)


def chosen(values: np.ndarray, choices: np.ndarray) -> np.ndarray:
    """Per-query value of the chosen LLM: ``values[i, choices[i]]``.

    Example
    -------
    >>> chosen(np.array([[1., 2.], [3., 4.]]), np.array([1, 0])).tolist()
    [2.0, 3.0]
    """
    return values[np.arange(values.shape[0]), choices]


def entropy_bits(p: np.ndarray, axis: int = -1) -> np.ndarray:
    """Shannon entropy in bits along ``axis``: ``H = -sum_k p_k log2 p_k`` (``0 log 0 = 0``).

    Example
    -------
    >>> float(entropy_bits(np.array([0.5, 0.5])))
    1.0
    """
    p = np.asarray(p, dtype=np.float64)
    logs = np.log2(np.where(p > 0, p, 1.0))
    return np.abs(-(p * logs).sum(axis=axis)) + 0.0


def complete_rows(scores: np.ndarray, costs: np.ndarray | None = None) -> np.ndarray:
    """Boolean mask of queries whose scores (and costs, when given) are all observed.

    Example
    -------
    >>> complete_rows(np.array([[1., np.nan], [0., 1.]])).tolist()
    [False, True]
    """
    ok = np.isfinite(np.asarray(scores, dtype=np.float64)).all(axis=1)
    if costs is not None:
        ok &= np.isfinite(np.asarray(costs, dtype=np.float64)).all(axis=1)
    return ok


class BestSingle(NamedTuple):
    """The best single LLM on a test set: column ``index``, mean ``quality`` and mean ``cost``."""
    index: int
    quality: float
    cost: float


def observed_means(values: np.ndarray) -> np.ndarray:
    """Per-column mean over the observed (non-NaN) cells; NaN for a column with none.

    Example
    -------
    >>> observed_means(np.array([[1., np.nan], [0., np.nan]])).tolist()
    [0.5, nan]
    """
    ok = ~np.isnan(values)
    n = ok.sum(axis=0)
    tot = np.where(ok, values, 0.0).sum(axis=0)
    return np.divide(tot, n, out=np.full(values.shape[1], np.nan), where=n > 0)


def best_single(scores: np.ndarray, costs: np.ndarray | None = None) -> BestSingle:
    """The LLM with the highest mean test score (ties: lower mean cost, then lower index).

    With per-query candidate pools (NaN = the LLM was not observed on that query) each
    LLM's means, of score and of cost, run over the queries where its score was observed
    (a cost given on an unobserved cell is ignored); an LLM never observed is never the best.

    ORBIT's code keeps the first LLM with the highest mean (no cost tie-break); the two agree
    unless two LLMs have exactly equal mean scores.

    Parameters
    ----------
    scores : ndarray, shape (n_queries, n_llms)
    costs : ndarray, shape (n_queries, n_llms), optional
        When absent the returned cost is NaN.

    Returns
    -------
    BestSingle

    Example
    -------
    >>> best_single(np.array([[1., 1.], [0., 1.]]), np.array([[1., 2.], [1., 2.]]))
    BestSingle(index=1, quality=1.0, cost=2.0)
    """
    s = as_matrix(scores, "scores", allow_nan=True)
    q = observed_means(s)
    if costs is None:
        c = np.full(s.shape[1], np.nan)
        key = np.zeros(s.shape[1])
    else:
        cm = observed_costs(s, as_matrix(costs, "costs", s.shape, allow_nan=True))
        c = observed_means(cm)
        key = np.nan_to_num(c, nan=np.inf)
    order = np.lexsort((np.arange(s.shape[1]), key, -np.nan_to_num(q, nan=-np.inf)))
    j = int(order[0])
    # the chosen column's means are summed as a router's mu_o sums its chosen values (one
    # contiguous vector), so a router that always picks this LLM gets exactly this quality
    return BestSingle(j, _vector_mean(s[:, j]), float(c[j]) if costs is None else
                      _vector_mean(cm[:, j]))


def observed_costs(scores: np.ndarray, costs: np.ndarray) -> np.ndarray:
    """``costs`` with every cell whose score is unobserved (NaN) set to NaN, so that an
    LLM's mean cost runs over the same queries as its mean score.

    Example
    -------
    >>> observed_costs(np.array([[1., np.nan], [0., 1.]]), np.array([[1., 2.], [1., 4.]])).tolist()
    [[1.0, nan], [1.0, 4.0]]
    """
    return np.where(np.isnan(scores), np.nan, costs)


def _vector_mean(column: np.ndarray) -> float:
    v = column[~np.isnan(column)]
    return float(v.mean()) if len(v) else float("nan")


#: relative tolerance of :func:`reaches` (float rounding of means, not a quality margin)
REACH_RTOL = 1e-12


def reaches(values, target: float) -> np.ndarray:
    """Whether each value reaches ``target``: ``v >= target - REACH_RTOL * max(1, |target|)``.

    A target built from means (the best single LLM's, or ``q_weak + p (q_strong - q_weak)``)
    can come out a rounding step above a curve point that equals it exactly; an exact ``>=``
    would then report a reached target as never reached.

    Example
    -------
    >>> 0.7 + 0.1 >= 0.8, reaches(np.array([0.7 + 0.1, 0.79]), 0.8).tolist()
    (False, [True, False])
    """
    tol = REACH_RTOL * max(1.0, abs(float(target)))
    return np.asarray(values, dtype=np.float64) >= float(target) - tol
