"""ORBIT's Routing Collapse Index (RCI), from the chosen LLMs and what each decision paid.

Reference: Lai, Hu, Ye, "RouteJudge: An Open Platform for Reproducible and
Preference-Aware LLM Routing" (ORBIT toolbox), arXiv:2606.18774; code
LAMDA-Model-Reuse/ORBIT @ d33cb0b, ``methods/base.py``. :mod:`.orbit` re-exports
:func:`rci` and reports both variants at the largest budget of its sweep.

A router that pays more than its chosen LLM's cost on a query (a cascade pays every LLM it
tried, :meth:`~recsys_router.router.Router.decide`) paid for answers it did not use: RCI
counts such a query as routed badly in both variants. For every other router the paid cost
is the chosen LLM's cost and both variants are ORBIT's.
"""

from __future__ import annotations

import numpy as np

from .base import DIRECTIONS, as_choices, as_matrix, chosen, metric, observed_means

__all__ = ["rci"]

DIRECTIONS["rci_per_query"] = "lower"


def _paid(paid, c: np.ndarray, ch: np.ndarray) -> np.ndarray:
    """Per-query paid cost: ``paid`` validated, or the chosen LLMs' costs when None."""
    if paid is None:
        return chosen(c, ch)
    p = np.asarray(paid, dtype=np.float64)
    if p.shape != ch.shape:
        raise ValueError(f"paid must hold one cost per query, shape {ch.shape}, got {p.shape}")
    if np.isinf(p).any() or (p < 0).any():
        raise ValueError("paid costs must be finite and >= 0 (NaN: unknown)")
    return p


@metric("rci", "lower")
def rci(scores: np.ndarray, costs: np.ndarray, choices: np.ndarray, *, variant: str = "per_query",
        per_query: bool = False, paid: np.ndarray | None = None):
    """Routing Collapse Index: share of queries routed badly.

    With ``p_i`` the cost decision ``i`` paid (``paid``; default the chosen LLM's cost
    ``c[i,ch_i]``):

    ``variant="per_query"``: ``RCI = mean_i [ s[i,ch_i] < max_j s_ij  or
    p_i > min { c_ij : s_ij = max_j s_ij } ]``.
    ``variant="orbit_code"``: with ``D`` = LLMs of maximal mean test cost and ``B_i`` the
    query's best LLMs, a query is fine when ``ch_i in B_i``, (``ch_i not in D`` or
    ``B_i subset of D``) and ``p_i <= c[i,ch_i]`` (nothing paid beyond the answer used);
    ``RCI`` = share of the others. An unknown paid or chosen cost (NaN) is never "more".

    A query with no observed score at all (a row of NaN) has no best LLM to route to: it is
    left out of RCI altogether (of the share and, in ``"orbit_code"``, of the LLMs' mean test
    costs that decide ``D``), as :func:`~recsys_router.metrics.routereval.mu_o` and
    :func:`~recsys_router.metrics.routereval.oracle_mean` leave it out; its flag is False.
    RCI is NaN when no query has an observed score.

    Parameters
    ----------
    scores, costs : ndarray, shape (n_queries, n_llms)
        True scores and costs.
    choices : ndarray of int, shape (n_queries,)
        Choices (ORBIT uses those at its largest budget).
    variant : {"per_query", "orbit_code"}
    per_query : bool
        Also return the 0/1 flag per query.
    paid : ndarray, shape (n_queries,), optional
        Cost each decision paid (NaN: unknown); None: the chosen LLMs' costs.

    Returns
    -------
    float, or (float, ndarray of bool) when ``per_query``
        The flags have one entry per query (False for a query left out), so RCI is their
        mean over the queries with an observed score.

    Example
    -------
    >>> s = np.array([[1., 1.], [1., 0.], [0., 1.]]); c = np.array([[1., 2.], [1., 2.], [2., 1.]])
    >>> rci(s, c, np.array([1, 0, 0])), rci(s, c, np.array([1, 0, 0]), variant="orbit_code")
    (0.6666666666666666, 0.6666666666666666)
    >>> rci(s, c, np.array([0, 0, 1]), variant="orbit_code", paid=np.array([1., 1., 3.]))
    0.3333333333333333
    """
    s = as_matrix(scores, "scores", allow_nan=True)          # NaN: not observed
    c = as_matrix(costs, "costs", s.shape, nonnegative=True, allow_nan=True)
    ch = as_choices(choices, s.shape[0], s.shape[1])
    p = _paid(paid, c, ch)
    if variant not in ("per_query", "orbit_code"):
        raise ValueError(f"variant must be 'per_query' or 'orbit_code', got {variant!r}")
    seen = ~np.isnan(s).all(axis=1)   # queries with a best LLM; the others are left out
    flags = np.zeros(s.shape[0], dtype=bool)
    if not seen.any():
        return (float("nan"), flags) if per_query else float("nan")
    s, c, ch, p = s[seen], c[seen], ch[seen], p[seen]
    top = np.max(np.where(np.isnan(s), -np.inf, s), axis=1, keepdims=True)
    is_best = s == top
    chosen_best = chosen(is_best, ch)
    if variant == "per_query":
        cheapest_best = np.where(is_best, np.nan_to_num(c, nan=np.inf), np.inf).min(axis=1)
        bad = ~chosen_best | (p > cheapest_best)
    else:
        mc = np.nan_to_num(observed_means(c), nan=-np.inf)
        dear = mc == mc.max()
        only_dear_best = ~(is_best & ~dear[None, :]).any(axis=1)
        bad = ~(chosen_best & (~dear[ch] | only_dear_best)) | (p > chosen(c, ch))
    flags[seen] = bad
    value = float(bad.mean())
    return (value, flags) if per_query else value
