"""Decision policies: turn predicted scores and costs into one chosen LLM per query.

All policies are pure, vectorised numpy functions over ``(n_queries, n_llms)`` arrays
(costs may also be one ``(n_llms,)`` vector, every query's) and return integer column
indices. Ties go to the cheaper LLM (by predicted cost),
then to the lower column index, so decisions are deterministic.
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = ["check_policy_values", "check_wtp", "argmax_policy", "wtp_policy", "budget_policy", "apply_policy", "POLICIES",
           "fill_unknown_costs"]


def _policy_inputs(scores, costs, mask) -> tuple[np.ndarray, np.ndarray | None,
                                                  np.ndarray | None]:
    """``(scores, costs, mask)`` checked and broadcast to the scores' ``(n_queries, n_llms)``:
    float64 scores and costs (a per-LLM cost vector repeated on every row), a bool mask (a
    strictly 0/1 integer mask converted; any other is refused, as ``v[~mask]`` on integers
    would index columns). A mask must allow at least one LLM on every query: a row with no
    allowed LLM has no answer a policy could give (it would return a masked-out column).

    Raises
    ------
    ValueError
        Naming ``scores``, ``costs`` or ``mask`` (and the first query whose mask row allows
        no LLM) and what was expected.
    """
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 2:
        raise ValueError(f"scores: expected a 2-D array (n_queries, n_llms), got shape {s.shape}")
    c = None
    if costs is not None:
        c = np.asarray(costs, dtype=np.float64)
        try:
            c = np.broadcast_to(c, s.shape)
        except ValueError:
            raise ValueError(f"costs: expected shape (n_llms,) or (n_queries, n_llms) = "
                             f"{s.shape}, got {c.shape}") from None
    m = None
    if mask is not None:
        m = np.asarray(mask)
        if m.dtype != bool:
            if not (np.issubdtype(m.dtype, np.integer) and np.isin(m, (0, 1)).all()):
                raise ValueError(f"mask: expected a bool array (or integers 0/1), got dtype "
                                 f"{m.dtype}")
            m = m.astype(bool)
        vector = m.ndim == 1
        try:
            m = np.broadcast_to(m, s.shape)
        except ValueError:
            raise ValueError(f"mask: expected shape (n_llms,) or (n_queries, n_llms) = "
                             f"{s.shape}, got {m.shape}") from None
        if vector and s.shape[0] and not m.any():
            raise ValueError("mask: allows no LLM (every entry False); expected at least one "
                             "allowed (True) LLM")
        empty = ~m.any(axis=1)
        if empty.any():
            i = int(np.flatnonzero(empty)[0])
            raise ValueError(f"mask: row {i} (query {i}) allows no LLM; expected at least one "
                             f"allowed (True) LLM per query ({int(empty.sum()):,} of "
                             f"{len(empty):,} rows allow none)")
    return s, c, m


def _tiebreak_argmax(values: np.ndarray, costs: np.ndarray | None, mask: np.ndarray | None) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64).copy()
    v[np.isnan(v)] = -np.inf
    if mask is not None:
        v[~mask] = -np.inf
    best = v.max(axis=1, keepdims=True)
    tied = (v == best)
    if mask is not None:
        # a row whose allowed values are all NaN ties its allowed columns only (a row with
        # no allowed column comes only from budget_policy's "fits", which handles it)
        tied = np.where(mask.any(axis=1, keepdims=True), tied & mask, tied)
    if costs is None:
        return tied.argmax(axis=1)
    c = np.where(tied, np.nan_to_num(np.asarray(costs, dtype=np.float64), nan=np.inf), np.inf)
    # the cheapest tied column; a row whose tied columns all lack a cost keeps the first tied
    return np.where(np.isfinite(c).any(axis=1), c.argmin(axis=1), tied.argmax(axis=1))


def argmax_policy(scores: np.ndarray, costs: np.ndarray | None = None,
                  mask: np.ndarray | None = None) -> np.ndarray:
    """Pick ``argmax_j P_hat[i, j]`` (cheapest among ties).

    Parameters
    ----------
    scores : ndarray, shape (n_queries, n_llms)
        Predicted performance.
    costs : ndarray, shape (n_queries, n_llms) or (n_llms,), optional
        Predicted costs, used only to break ties (any other shape: a ``ValueError`` naming
        ``costs``, in every policy).
    mask : ndarray of bool, shape (n_llms,) or (n_queries, n_llms), optional
        Allowed candidates (integers 0/1 are read as bool; any other dtype or shape is a
        ``ValueError`` naming ``mask``, in every policy). Every query must allow at least
        one LLM: a row (or a ``(n_llms,)`` mask) with none is a ``ValueError`` naming
        ``mask`` and the row, in every policy; leave such queries out before routing.

    Returns
    -------
    ndarray of int, shape (n_queries,)

    Example
    -------
    >>> argmax_policy(np.array([[0.2, 0.9, 0.9]]), np.array([[1., 3., 2.]])).tolist()
    [2]
    """
    s, c, m = _policy_inputs(scores, costs, mask)
    return _tiebreak_argmax(s, c, m)


def check_policy_values(wtp=None, budget=None) -> None:
    """Refuse a ``wtp`` or ``budget`` that is not a real number (a string such as ``"10"``, a
    boolean, ...) with a one-line ``ValueError`` naming it, before numpy sees it (the HTTP
    service refuses the same values). ``None`` means not given; the ranges are checked by
    the policies.

    Example
    -------
    >>> check_policy_values(wtp=2.0, budget=np.array(3.0))
    >>> check_policy_values(wtp=True)
    Traceback (most recent call last):
    ...
    ValueError: wtp must be a number, got bool True
    """
    for name, v in (("wtp", wtp), ("budget", budget)):
        if isinstance(v, np.ndarray) and v.ndim == 0 and v.dtype.kind in "iuf":
            continue  # a numpy 0-d number (np.array(2.0)) is a number
        if v is not None and (isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real)):
            raise ValueError(f"{name} must be a number, got {type(v).__name__} {v!r}")


def check_wtp(wtp) -> None:
    """Refuse a ``wtp`` (lambda) that is not a finite number >= 0 (see
    :func:`check_policy_values` for the type), with a one-line ``ValueError``.

    Example
    -------
    >>> check_wtp(2.0)
    >>> check_wtp(float("inf"))
    Traceback (most recent call last):
    ...
    ValueError: wtp (lambda) must be a finite number >= 0, got inf
    """
    check_policy_values(wtp=wtp)
    if wtp is None or not np.isfinite(wtp) or wtp < 0:
        raise ValueError(f"wtp (lambda) must be a finite number >= 0, got {wtp!r}")


def wtp_policy(scores: np.ndarray, costs: np.ndarray, wtp: float,
               mask: np.ndarray | None = None) -> np.ndarray:
    """RouterBench willingness-to-pay: ``argmax_j lambda * P_hat[i, j] - c_hat[i, j]``.

    A large ``wtp`` (lambda) buys quality; ``wtp = 0`` picks the cheapest LLM. An LLM whose
    predicted cost is NaN (unknown) is taken only when no allowed LLM of the row has a known
    one (the row then takes the best predicted score), as :func:`budget_policy` never counts
    an unknown cost as fitting.

    Any finite ``wtp`` is exact: a row where ``lambda * P_hat`` overflows float64 (``wtp``
    near 1e308 with scores above 1, such as a 1-10 judge scale) is ranked by
    ``P_hat - c_hat / lambda`` instead, the same order divided by ``lambda > 0``, so it takes
    the best predicted score (the cheapest among ties) rather than every utility turning
    infinite and the cost tie-break picking the cheapest LLM. Other rows are computed as
    ``lambda * P_hat - c_hat``, unchanged.

    Example
    -------
    >>> s = np.array([[0.5, 0.9]]); c = np.array([[0.1, 1.0]])
    >>> wtp_policy(s, c, 1.0).tolist(), wtp_policy(s, c, 10.0).tolist()
    ([0], [1])
    """
    check_wtp(wtp)
    if costs is None:
        raise ValueError("costs: the wtp policy needs predicted costs, got None")
    s, c, m = _policy_inputs(scores, costs, mask)
    c = np.nan_to_num(c, nan=np.inf)
    with np.errstate(invalid="ignore", over="ignore"):
        prod = wtp * s
        util = prod - c
        over = (np.isinf(prod) & np.isfinite(s)).any(axis=1)
        if over.any():  # wtp > 0 here: dividing the row by it keeps its order, without overflow
            util[over] = s[over] - c[over] / wtp
    return _no_known_cost_by_score(_tiebreak_argmax(util, c, m), s, c, m)


def budget_policy(scores: np.ndarray, costs: np.ndarray, budget: float,
                  mask: np.ndarray | None = None) -> np.ndarray:
    """ORBIT budget policy: best predicted score among LLMs with a known (finite)
    ``c_hat <= C`` (an unknown, NaN, cost never fits, even ``C = inf``); the cheapest
    allowed LLM when none fits (the best predicted score when no allowed LLM has a
    known cost, as :func:`wtp_policy` does).

    Example
    -------
    >>> s = np.array([[0.5, 0.9], [0.5, 0.9]]); c = np.array([[0.1, 1.0], [0.1, 0.2]])
    >>> budget_policy(s, c, 0.5).tolist(), budget_policy(s, c, 0.05).tolist()
    ([0, 1], [0, 0])
    """
    check_policy_values(budget=budget)
    if budget is None or np.isnan(budget):
        raise ValueError(f"budget must be a number, got {budget!r}")
    if costs is None:
        raise ValueError("costs: the budget policy needs predicted costs, got None")
    s, c, m = _policy_inputs(scores, costs, mask)
    c = np.nan_to_num(c, nan=np.inf)
    allowed = np.ones(s.shape, dtype=bool) if m is None else m.copy()
    fits = allowed & np.isfinite(c) & (c <= budget)   # an unknown cost never fits, whatever C
    choice = _tiebreak_argmax(s, c, fits)
    none_fit = ~fits.any(axis=1)
    if none_fit.any():
        choice[none_fit] = _tiebreak_argmax(-np.where(allowed, c, np.inf)[none_fit], None, None)
    return _no_known_cost_by_score(choice, s, c, allowed)


def _no_known_cost_by_score(choice: np.ndarray, scores, costs: np.ndarray,
                            allowed: np.ndarray | None) -> np.ndarray:
    """Rows where no allowed LLM has a known (finite) cost take the best predicted score."""
    c = costs if allowed is None else np.where(allowed, costs, np.inf)
    rows = np.flatnonzero(~np.isfinite(c).any(axis=1))
    if len(rows):
        choice[rows] = _tiebreak_argmax(np.asarray(scores, dtype=np.float64)[rows], None,
                                        None if allowed is None else allowed[rows])
    return choice


def fill_unknown_costs(costs: np.ndarray, known: np.ndarray | None = None) -> np.ndarray:
    """Costs a router predicts with every unknown one set to the dearest known one of its row.

    An LLM with no recorded cost is never predicted cheaper than an LLM whose cost is known
    (treating it as free would hand it every query at a small budget or ``wtp = 0``), and the
    prediction stays finite, as the evaluation requires. A row with no known cost keeps 0
    for every unknown one (nothing to compare: the policies then rank by score alone).

    Parameters
    ----------
    costs : ndarray, shape (n_llms,) or (n_queries, n_llms)
        Predicted costs; NaN (or any non-finite value) is unknown.
    known : ndarray of bool, shape (n_llms,), optional
        Columns whose cost is known (e.g. an LLM with an observed training cost); the others
        are unknown whatever their value. Default: the finite entries.

    Returns
    -------
    ndarray of float64, the shape of ``costs``

    Example
    -------
    >>> fill_unknown_costs(np.array([0.1, np.nan, 0.3])).tolist()
    [0.1, 0.3, 0.3]
    >>> fill_unknown_costs(np.array([[1.0, 2.0]]), known=np.array([True, False])).tolist()
    [[1.0, 1.0]]
    """
    c = np.array(costs, dtype=np.float64)
    ok = np.isfinite(c)
    if known is not None:
        ok &= np.asarray(known, dtype=bool)
    top = np.where(ok, c, -np.inf).max(axis=-1, keepdims=True) if c.shape[-1] else c
    return np.where(ok, c, np.where(np.isfinite(top), top, 0.0))


POLICIES = {"argmax": argmax_policy, "wtp": wtp_policy, "budget": budget_policy}


def apply_policy(scores: np.ndarray, costs: np.ndarray | None, *, wtp: float | None = None,
                 budget: float | None = None, mask: np.ndarray | None = None) -> tuple[np.ndarray, str]:
    """Dispatch on which parameter is given; returns ``(choices, policy_name)``.

    ``wtp`` and ``budget`` are mutually exclusive; with neither, argmax is used.
    """
    if wtp is not None and budget is not None:
        raise ValueError("give either wtp or budget, not both")
    if wtp is not None:
        if costs is None:
            raise ValueError("the wtp policy needs predicted costs; this router/dataset has none")
        return wtp_policy(scores, costs, wtp, mask), "wtp"
    if budget is not None:
        if costs is None:
            raise ValueError("the budget policy needs predicted costs; this router/dataset has none")
        return budget_policy(scores, costs, budget, mask), "budget"
    return argmax_policy(scores, costs, mask), "argmax"
