"""Operating points of each protocol: which policy settings a router is swept over.

Each function takes one router's predictions restricted to a candidate pool and returns
``(setting name, [(value, chosen pool column per query), ...])``. The grids and
policies are the metric modules' own (RouterBench's lambda grid, ORBIT's budget grid,
RouteLLM's thresholds), so the decisions are exactly those the metrics describe.
"""

from __future__ import annotations

import numpy as np

from ..metrics.base import entropy_bits
from ..metrics.orbit import budget_choices, budget_grid
from ..metrics.routerbench import default_lambdas
from ..policies import argmax_policy, wtp_policy

__all__ = ["argmax_settings", "wtp_settings", "budget_settings", "threshold_settings",
           "query_prob_entropy"]


def argmax_settings(scores, costs):
    """The single argmax operating point (``value`` NaN), cheapest predicted on ties.

    Example
    -------
    >>> name, pts = argmax_settings(np.array([[0.2, 0.9]]), None)
    >>> name, pts[0][1].tolist()
    ('argmax', [1])
    """
    return "argmax", [(np.nan, argmax_policy(scores, costs))]


def wtp_settings(scores, costs, n: int = 100):
    """RouterBench's willingness-to-pay sweep over :func:`~recsys_router.metrics.routerbench.default_lambdas`.

    Example
    -------
    >>> name, pts = wtp_settings(np.array([[0.5, 0.9]]), np.array([[0.1, 1.0]]), n=3)
    >>> name, pts[0][1].tolist(), pts[-1][1].tolist()
    ('wtp', [0], [1])
    """
    lam = default_lambdas(scores, costs, n=n)
    return "wtp", [(float(w), wtp_policy(scores, costs, float(w))) for w in lam]


def budget_settings(scores, costs, max_points: int = 100):
    """ORBIT's budget sweep over the router's own predicted costs (cheapest on ties).

    Example
    -------
    >>> s = np.array([[0.5, 0.9]]); c = np.array([[0.1, 1.0]])
    >>> [(b, ch.tolist()) for b, ch in budget_settings(s, c)[1]]
    [(0.1, [0]), (1.0, [1])]
    """
    b = budget_grid(costs, max_points)
    ch = budget_choices(scores, costs, b, tie_break="cheapest")
    return "budget", [(float(v), ch[:, k]) for k, v in enumerate(b)]


def threshold_settings(scores, strong: int, weak: int, n: int = 10):
    """RouteLLM's threshold sweep on the win score ``P_hat[strong] - P_hat[weak]``.

    Thresholds are the ``n + 1`` quantile edges of the win scores (RouteLLM's bins, repeated
    edges kept once since they give the same decisions and add no area); a
    query goes to the strong LLM when its win score is ``>= threshold``, except at the
    last edge where RouteLLM uses ``>``: that edge is stored as the next float above it,
    so ``>=`` holds for every stored value and the sweep ends at 0 % strong calls.

    Example
    -------
    >>> s = np.array([[0.9, 0.1], [0.5, 0.5], [0.2, 0.8]])
    >>> [ch.tolist() for t, ch in threshold_settings(s, 0, 1, n=2)[1]]
    [[0, 0, 0], [0, 0, 1], [1, 1, 1]]
    """
    s = np.asarray(scores, dtype=np.float64)
    win = np.nan_to_num(s[:, strong] - s[:, weak], nan=0.0)
    grid = np.quantile(win, np.linspace(0.0, 1.0, n + 1))
    grid[-1] = np.nextafter(grid[-1], np.inf)
    grid = np.unique(grid)  # repeated edges (tied scores) give identical decisions
    return "threshold", [(float(t), np.where(win >= t, strong, weak)) for t in grid]


def query_prob_entropy(probs: np.ndarray) -> np.ndarray:
    """Per-query entropy (bits) of selection probabilities renormalised over the pool.

    Example
    -------
    >>> query_prob_entropy(np.array([[0.25, 0.25, 0.5], [1.0, 0.0, 0.0]])).tolist()
    [1.5, 0.0]
    """
    p = np.clip(np.asarray(probs, dtype=np.float64), 0.0, None)
    tot = p.sum(axis=1, keepdims=True)
    p = np.divide(p, tot, out=np.zeros_like(p), where=tot > 0)
    return entropy_bits(p, axis=1) + 0.0
