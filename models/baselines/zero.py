"""RouterBench's Zero router: mix the LLMs on their cost-quality convex hull.

Reference
---------
Hu et al., "RouterBench: A Benchmark for Multi-LLM Routing System", arXiv:2403.12031
(2024), section on the Zero router and the non-decreasing convex hull (their
``evaluation/AIQ.py``). The Zero router ignores the query: it takes each LLM's
(mean cost, mean score) point, keeps the non-decreasing upper convex hull, and reaches
any cost between two hull vertices by routing a random fraction of queries to each.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from recsys_router.hyperparams import check_seed
from recsys_router.metrics.routerbench import ndch_indices
from recsys_router.policies import check_policy_values
from recsys_router.router import Router
from recsys_router.state import STR, Arr, ListOf

from ._common import nan_col_means, query_uniforms

__all__ = ["ZeroRouter", "nondecreasing_hull"]


def nondecreasing_hull(costs: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Indices of the non-decreasing upper convex hull of points ``(costs[j], scores[j])``,
    LLMs with a non-finite cost or score left out
    (:func:`recsys_router.metrics.routerbench.ndch_indices`, the one hull of the package).

    Vertices are returned in ascending cost. The hull starts at the cheapest point (the
    best-scoring one among equally cheap points) and stops at the highest-scoring point;
    points on or below a hull edge (including collinear ones) are dropped.

    Example
    -------
    >>> nondecreasing_hull(np.array([1., 2., 3., 4.]), np.array([.5, .55, .9, .8])).tolist()
    [0, 2]
    """
    c = np.asarray(costs, dtype=np.float64)
    s = np.asarray(scores, dtype=np.float64)
    ok = np.flatnonzero(np.isfinite(c) & np.isfinite(s))
    if not len(ok):
        raise ValueError("no LLM has both a finite mean cost and a finite mean score")
    return ok[ndch_indices(np.column_stack([c[ok], s[ok]]))]


class ZeroRouter(Router):
    """Zero router: query-agnostic mixing of the hull LLMs (RouterBench).

    * ``budget=C`` (per-query cost): if ``C`` lies between the mean costs ``c_a < c_b`` of
      two neighbouring hull LLMs, a query goes to ``b`` with probability
      ``(C - c_a) / (c_b - c_a)`` and to ``a`` otherwise, so the *expected* cost is ``C``
      and the expected score is the hull's linear interpolation. Below the cheapest hull
      LLM every query goes to it; above the top one, to the top one. Draws are seeded per
      query (batch-invariant); individual queries may exceed ``C``.
    * ``wtp=lambda``: the hull vertex maximising ``lambda * mean_score - mean_cost``
      (a linear objective is maximised at a vertex, so no mixing is needed); where
      ``lambda * mean_score`` overflows float64 the same order is read from
      ``mean_score - mean_cost / lambda``.
    * neither: the top hull vertex (the best mean score).

    ``candidates`` recomputes the hull over the candidate LLMs only. Needs costs.

    Parameters
    ----------
    seed : int
        Seed of the per-query mixing draws.

    Example
    -------
    >>> from recsys_router.data import RoutingData
    >>> d = RoutingData(["q"], list("abcd"), [[.5, .55, .9, .8]], [[1., 2., 3., 4.]])
    >>> ZeroRouter().fit(d).budget_mix(2.5)
    {'a': 0.25, 'c': 0.75}
    """

    _state_ = {"mean_scores_": Arr("float64", ("n_llms",), missing=True),  # NaN: never scored
               "hull_": Arr("int64", ("n_hull",), index_of="n_llms"),
               "hull_llms_": ListOf(STR, dim="n_hull")}

    def __init__(self, seed: int = 0):
        self.seed = seed

    def _freeze_params(self):
        self.seed_ = check_seed(self.seed)  # fixed at fit: set_params cannot change it

    def _fit(self, train, val):
        if self.mean_costs_ is None or not np.isfinite(self.mean_costs_).any():
            raise ValueError("the zero router needs per-query costs in the training data "
                             f"({train.name!r} has none)")
        means = nan_col_means(train.scores, fallback=np.nan)
        self.mean_scores_ = means
        self.hull_ = nondecreasing_hull(self.mean_costs_, means)
        self.hull_llms_ = [self.llm_names_[j] for j in self.hull_]

    native_add_llm = True

    def _set_hull(self, means: np.ndarray, costs: np.ndarray, names: list[str]) -> None:
        self.mean_scores_ = means
        self.hull_ = nondecreasing_hull(costs, means)
        self.hull_llms_ = [names[j] for j in self.hull_]

    def _add_llm(self, name, probes, cost, weights):
        """A new LLM enters with its (probe-weighted) mean probe score and estimated mean cost;
        the hull is recomputed."""
        mean = float(np.average(probes.scores[:, 0], weights=weights))
        self._set_hull(np.append(self.mean_scores_, mean),
                       np.append(self.mean_costs_, cost), list(self.llm_names_) + [name])

    def _remove_llm(self, j):
        self._set_hull(np.delete(self.mean_scores_, j), np.delete(self.mean_costs_, j),
                       [n for i, n in enumerate(self.llm_names_) if i != j])

    def _hull_for(self, candidates: Sequence[str] | None) -> np.ndarray:
        mask = self.candidate_mask(candidates)
        if mask is None:
            return self.hull_
        cols = np.flatnonzero(mask)
        return cols[nondecreasing_hull(self.mean_costs_[cols], self.mean_scores_[cols])]

    def _predict_scores(self, data):
        low = np.nanmin(self.mean_scores_) - 1.0 if np.isfinite(self.mean_scores_).any() else 0.0
        row = np.where(np.isnan(self.mean_scores_), low, self.mean_scores_)
        return np.broadcast_to(row, (data.n_queries, len(row))).copy()

    def budget_mix(self, budget: float, candidates: Sequence[str] | None = None) -> dict[str, float]:
        """Routing distribution ``{llm: probability}`` the router uses at a cost budget.

        Returns
        -------
        dict
            One entry (a hull vertex) or two neighbouring hull LLMs with their probabilities.
        """
        self._check_fitted()
        check_policy_values(budget=budget)
        if budget is None or np.isnan(budget):
            raise ValueError(f"budget must be a number, got {budget!r}")
        hull = self._hull_for(candidates)
        hc = self.mean_costs_[hull]
        if budget <= hc[0] or len(hull) == 1:
            return {self.llm_names_[hull[0]]: 1.0}
        if budget >= hc[-1]:
            return {self.llm_names_[hull[-1]]: 1.0}
        k = int(np.searchsorted(hc, budget, side="right"))  # hc[k-1] <= budget < hc[k]
        t = float((budget - hc[k - 1]) / (hc[k] - hc[k - 1]))
        if t == 0.0:
            return {self.llm_names_[hull[k - 1]]: 1.0}
        return {self.llm_names_[hull[k - 1]]: 1.0 - t, self.llm_names_[hull[k]]: t}

    def expected_score(self, budget: float, candidates: Sequence[str] | None = None) -> float:
        """Expected mean score (by train means) of the mix used at ``budget``."""
        mix = self.budget_mix(budget, candidates)
        idx = {n: i for i, n in enumerate(self.llm_names_)}
        return float(sum(p * self.mean_scores_[idx[n]] for n, p in mix.items()))

    def route_indices(self, data, *, wtp=None, budget=None, candidates=None):
        """Column chosen per query (see the class docstring for the three modes)."""
        self._check_fitted()
        self._check_llms(data)
        check_policy_values(wtp, budget)
        if wtp is not None and budget is not None:
            raise ValueError("give either wtp or budget, not both")
        hull = self._hull_for(candidates)
        n = data.n_queries
        if budget is not None:
            mix = self.budget_mix(budget, candidates)
            idx = {name: i for i, name in enumerate(self.llm_names_)}
            cols = [idx[name] for name in mix]
            if len(cols) == 1:
                return np.full(n, cols[0], dtype=np.int64)
            u = query_uniforms(data.query_ids, self.seed_, 1, stream=2)[:, 0]
            return np.where(u < mix[self.llm_names_[cols[1]]], cols[1], cols[0]).astype(np.int64)
        if wtp is not None:
            if not np.isfinite(wtp) or wtp < 0:
                raise ValueError(f"wtp (lambda) must be a finite number >= 0, got {wtp!r}")
            with np.errstate(over="ignore"):
                util = wtp * self.mean_scores_[hull] - self.mean_costs_[hull]
            if np.isinf(util).any():  # lambda * score past float64: the same order, divided
                util = self.mean_scores_[hull] - self.mean_costs_[hull] / wtp
            best = hull[int(np.flatnonzero(util == util.max())[0])]  # ascending cost: cheapest tie
            return np.full(n, best, dtype=np.int64)
        return np.full(n, hull[-1], dtype=np.int64)
