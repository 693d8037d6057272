"""RouterBench's cascading router with a noisy judge.

Reference
---------
Hu et al., "RouterBench: A Benchmark for Multi-LLM Routing System", arXiv:2403.12031
(2024), cascading router (their ``routers/run_cascading_router.py``): LLMs are tried from
cheapest to dearest; a judge accepts an answer when its score reaches a threshold (by
default the 0.95 quantile of the scores, "top 5 % performance"); the judge is wrong with
probability ``epsilon`` (RouterBench sweeps 0 ... 0.8); a maximum total cost per query
stops the chain. The paid cost is the sum over every LLM tried.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from recsys_router.data import RoutingData
from recsys_router.hyperparams import check_number, check_seed
from recsys_router.policies import check_policy_values, check_wtp, fill_unknown_costs
from recsys_router.router import Router
from recsys_router.state import FLOAT, Arr

from ._common import query_uniforms

__all__ = ["CascadeRouter"]


class CascadeRouter(Router):
    """Cascade: try LLMs in ascending mean train cost until the (noisy) judge accepts.

    For each query, LLM ``j`` of the chain is tried (its cost on the query is paid) and the
    judge accepts when ``score >= threshold``; with probability ``epsilon`` the verdict is
    flipped (seeded per query and LLM, so batch-invariant). An LLM without a result on a
    query (an unobserved cell) is skipped on that query's chain: neither tried nor paid. The
    first LLM with a result is always tried; a later one is tried only if the total cost so
    far plus its cost stays ``<= T`` (``T = min(max_cost, budget, wtp * threshold)``, see
    :meth:`decide`); otherwise the chain stops. The answer used is that of the last LLM tried.

    Costs are the routed data's true per-query costs, and the judge reads the routed data's
    true scores, so this router ``uses_ground_truth``. Its realised cost is not the chosen
    LLM's cost: :meth:`decide` (the hook ``evaluate`` records decisions through) and
    :meth:`route_with_costs` return it. Where the routed data does not know a cost (a NaN
    cell, or data without costs) the chain's cap checks use that LLM's mean train cost (its
    estimate), but the query's paid cost is unknown (NaN) once the chain tried that LLM: as
    for every router whose chosen cell has no cost, ``evaluate`` leaves the query out of its
    mean costs (calibration charges the estimate instead, as it does for every router).

    Parameters
    ----------
    threshold : float, optional
        Acceptance threshold on the score. Default: the ``threshold_quantile`` quantile of
        all observed train scores (fixed at fit time).
    threshold_quantile : float
        Quantile used when ``threshold`` is None (RouterBench: 0.95).
    max_cost : float, optional
        Cap ``T`` on the total cost per query (None = no cap). RouterBench sweeps
        0.001 ... 100.
    epsilon : float
        Judge error rate in [0, 1] (RouterBench: 0, 0.01, ..., 0.8).
    seed : int
        Seed of the judge errors.

    Example
    -------
    >>> d = RoutingData(["q"], ["a", "b"], [[0., 1.]], [[1., 2.]])
    >>> names, cost = CascadeRouter(threshold=1.0).fit(d).route_with_costs(d)
    >>> names.tolist(), cost.tolist()
    (['b'], [3.0])
    """

    uses_ground_truth = True
    own_costs = True
    _state_ = {"threshold_": FLOAT, "chain_": Arr("int64", ("n_llms",), index_of="n_llms")}

    def __init__(self, threshold: float | None = None, threshold_quantile: float = 0.95,
                 max_cost: float | None = None, epsilon: float = 0.0, seed: int = 0):
        self.threshold = threshold
        self.threshold_quantile = threshold_quantile
        self.max_cost = max_cost
        self.epsilon = epsilon
        self.seed = seed

    def _freeze_params(self):
        # fixed at fit: set_params cannot change them
        if not 0.0 <= float(self.epsilon) <= 1.0:
            raise ValueError(f"cascade: epsilon must be in [0, 1], got {self.epsilon!r}")
        self.epsilon_ = float(self.epsilon)
        self.seed_ = check_seed(self.seed)
        self.max_cost_ = check_number(self.max_cost, "cascade: max_cost", low=0.0,
                                      none=True)

    def _fit(self, train, val):
        if self.mean_costs_ is None or not np.isfinite(self.mean_costs_).any():
            raise ValueError("the cascade router orders LLMs by cost and needs costs in the "
                             f"training data ({train.name!r} has none)")
        if self.threshold is not None:
            self.threshold_ = check_number(self.threshold, "threshold (or None)")
        else:
            if not 0.0 <= float(self.threshold_quantile) <= 1.0:
                raise ValueError(f"threshold_quantile must be in [0, 1], got {self.threshold_quantile!r}")
            obs = train.scores[train.observed].astype(np.float64)
            if not obs.size:
                raise ValueError("cascade: no observed train score to set the threshold from")
            self.threshold_ = float(np.quantile(obs, float(self.threshold_quantile)))
        self.chain_ = self._chain(self.mean_costs_)

    native_add_llm = True

    @staticmethod
    def _chain(mean_costs) -> np.ndarray:
        mc = np.nan_to_num(np.asarray(mean_costs, np.float64), nan=np.inf)
        return np.lexsort((np.arange(len(mc)), mc)).astype(np.int64)

    def _add_llm(self, name, probes, cost, weights):
        """A new LLM takes its place in the cost-ordered chain (its answers are accepted by the
        same threshold as everyone's; its probe scores and weights are not used)."""
        self.chain_ = self._chain(np.append(self.mean_costs_, cost))

    def _remove_llm(self, j):
        self.chain_ = self._chain(np.delete(self.mean_costs_, j))

    # ------------------------------------------------------------------ the cascade
    def _costs_of(self, data: RoutingData) -> np.ndarray:
        mc = fill_unknown_costs(np.asarray(self.mean_costs_, dtype=np.float64))
        base = np.broadcast_to(mc, data.shape)
        if data.costs is None:
            return base.copy()
        c = data.costs.astype(np.float64)
        return np.where(np.isnan(c), base, c)

    def _run(self, data: RoutingData, budget: float | None,
             candidates: Sequence[str] | None) -> tuple[np.ndarray, np.ndarray]:
        choice, paid, _ = self._chain_run(data, budget, candidates)
        return choice, paid

    def _chain_run(self, data: RoutingData, budget: float | None,
                   candidates: Sequence[str] | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(choice, paid, tried)``: the column whose answer is used, the cost paid (NaN where
        a tried LLM's cost is unknown or nothing was tried) and which LLMs were tried, per query."""
        self._check_fitted()
        self._check_llms(data)
        mask = self.candidate_mask(candidates)
        chain = self.chain_ if mask is None else self.chain_[mask[self.chain_]]
        caps = [c for c in (self.max_cost_, budget) if c is not None]
        if any(np.isnan(c) for c in caps):
            raise ValueError(f"cost caps must be numbers, got max_cost={self.max_cost_!r}, budget={budget!r}")
        cap = min(caps) if caps else np.inf
        s = data.scores.astype(np.float64)
        c = self._costs_of(data)
        # where the routed data does not know a cost, the cap checks use the mean train cost
        # (the cascade's estimate), but what was paid there is unknown
        known = np.zeros(data.shape, dtype=bool) if data.costs is None else ~np.isnan(data.costs)
        flip = query_uniforms(data.query_ids, self.seed_, data.n_llms, stream=3) < self.epsilon_
        n = data.n_queries
        # an LLM without a result on a query (an unobserved cell) is not on that query's
        # chain: it is neither tried nor paid, and the chain goes on to the next one
        avail = ~np.isnan(s)
        started = np.zeros(n, dtype=bool)
        done = np.zeros(n, dtype=bool)
        spent = np.zeros(n)
        tried = np.zeros(data.shape, dtype=bool)
        choice = np.full(n, chain[0], dtype=np.int64)
        for j in chain:
            done |= started & avail[:, j] & (spent + c[:, j] > cap)
            run = ~done & avail[:, j]
            if not (~done).any():
                break
            spent[run] += c[run, j]
            tried[run, j] = True
            choice[run] = j
            started |= run
            accepted = np.where(avail[:, j], (s[:, j] >= self.threshold_) ^ flip[:, j], False)
            done |= run & accepted
        paid = np.where((tried & ~known).any(axis=1), np.nan, spent)
        paid[~started] = np.nan  # no candidate has a result on the query: no decision was paid
        return choice, paid, tried

    def route_with_costs(self, data: RoutingData, *, wtp: float | None = None,
                         budget: float | None = None,
                         candidates: Sequence[str] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Route and return ``(chosen LLM names, realised cost per query)`` (see :meth:`decide`).

        The realised cost sums the costs of every LLM tried on the query (NaN where one of
        them has no known cost in ``data``).
        """
        choice, paid = self.decide(data, wtp=wtp, budget=budget, candidates=candidates)
        return np.asarray(self.llm_names_, dtype=object)[choice], paid

    def decide(self, data, *, wtp=None, budget=None, candidates=None):
        """Column of the LLM whose answer is used and the cost paid, per query.

        The cascade runs under the cap ``T = min(max_cost, budget, wtp * threshold_)`` and
        pays the sum over every LLM tried. A willingness to pay ``wtp`` (lambda) per unit of
        score caps the total at what an answer the judge accepts is worth to the caller
        (lambda times the acceptance threshold; 0 when the threshold is not positive): a rule
        fixed before any answer is seen, as a real cascade must decide (the first LLM is
        always tried). An LLM without a result on a query (an unobserved cell) is skipped on
        that query's chain. The paid cost is NaN where a tried LLM's cost is unknown in
        ``data`` (the cap checks use its mean train cost) or no candidate has a result.
        """
        check_policy_values(wtp, budget)
        if wtp is not None:
            check_wtp(wtp)   # as every router's wtp policy: an infinite cap would be none
            t = float(self.threshold_)
            cap = float(wtp) * t if t > 0 else 0.0
            budget = cap if budget is None else min(float(budget), cap)
        return self._run(data, budget, candidates)

    def answer_costs(self, data, answers, *, candidates=None):
        """Cost paid per query when the answer of LLM column ``answers[i]`` is used after the
        cascade ran (no policy, ``max_cost`` only): every LLM it tried, plus the answer's LLM
        where that one was not tried. RouteLLM's threshold sweep uses the cascade's verdict
        (where its chain ends), so each of its decisions pays for the chain that gave it.

        Example
        -------
        >>> d = RoutingData(["q"], ["a", "b", "c"], [[0., 1., 1.]], [[1., 2., 4.]])
        >>> r = CascadeRouter(threshold=1.0).fit(d)
        >>> r.decide(d)[1].tolist(), r.answer_costs(d, [1]).tolist(), r.answer_costs(d, [2]).tolist()
        ([3.0], [3.0], [7.0])
        """
        _, paid, tried = self._chain_run(data, None, candidates)
        a = np.asarray(answers, dtype=np.int64)
        rows = np.arange(data.n_queries)
        c = np.full(data.shape, np.nan) if data.costs is None else data.costs.astype(np.float64)
        return paid + np.where(tried[rows, a], 0.0, c[rows, a])

    def route_indices(self, data, *, wtp=None, budget=None, candidates=None):
        """Column of the LLM whose answer is used (see :meth:`decide`); ``budget`` caps the
        total cost per query."""
        return self.decide(data, wtp=wtp, budget=budget, candidates=candidates)[0]

    def _predict_costs(self, data):
        """The cost paid when the cascade ends on each LLM: the query's costs (true where
        known, mean train cost otherwise, as :meth:`decide` charges) summed along the chain
        up to it over the LLMs the query's chain can try, so sweeps built on these costs
        reach every cap the cascade can use. An LLM the chain skips on the query (no result
        there) adds nothing: its cell holds the total paid when the chain passes it. A query
        on which no LLM has a result is charged the full chain.

        Example
        -------
        >>> d = RoutingData(["q"], ["a", "b", "c"], [[0., float("nan"), 1.]], [[1., 2., 4.]])
        >>> CascadeRouter(threshold=1.0).fit(d).predict_costs(d).tolist()
        [[1.0, 1.0, 5.0]]
        """
        c = self._costs_of(data)[:, self.chain_]
        on = ~np.isnan(data.scores[:, self.chain_])
        on |= ~on.any(axis=1, keepdims=True)
        out = np.empty_like(c)
        out[:, self.chain_] = np.cumsum(np.where(on, c, 0.0), axis=1)
        return out

    def policy_values(self, data: RoutingData, policy: str) -> np.ndarray:
        """The values of ``policy`` (``"budget"`` or ``"wtp"``) at which some query's decision
        can change on ``data``: each query's running chain totals as caps (divided by the
        threshold for ``wtp``, whose cap is ``wtp * threshold_``). Calibration searches these.

        Example
        -------
        >>> d = RoutingData(["q"], ["a", "b"], [[0., 1.]], [[1., 2.]])
        >>> r = CascadeRouter(threshold=0.5).fit(d)
        >>> r.policy_values(d, "budget").tolist(), r.policy_values(d, "wtp").tolist()
        ([1.0, 3.0], [2.0, 6.0])
        """
        caps = np.unique(self._predict_costs(data))
        caps = caps[np.isfinite(caps)]
        if policy == "budget":
            return caps
        t = float(self.threshold_)
        return caps / t if t > 0 else np.zeros(1)

    def _predict_scores(self, data):
        """One-hot of the LLM the cascade ends on (with ``max_cost`` only)."""
        choice, _ = self._run(data, None, None)
        out = np.zeros(data.shape)
        out[np.arange(data.n_queries), choice] = 1.0
        return out
