"""Reference routers: random, oracle, r_o (oracle mixed with random), best-single and
task-best (the best LLM per task).

References
----------
- RouterEval: Huang et al., "RouterEval: A Comprehensive Benchmark for Routing LLMs to
  Explore Model-level Scaling Up in LLMs", arXiv:2503.10657 (2025). The oracle, random and
  ``r_o(p)`` routers follow its ``router/R_o/r_o_router.py``: with probability ``p`` a query
  goes to its best LLM, otherwise to an LLM drawn uniformly.
- RouterBench: Hu et al., "RouterBench: A Benchmark for Multi-LLM Routing System",
  arXiv:2403.12031 (2024): the oracle and the best single model (BSM) reference points.
"""

from __future__ import annotations

import numpy as np

from recsys_router.data import RoutingData
from recsys_router.hyperparams import check_seed
from recsys_router.policies import argmax_policy, fill_unknown_costs
from recsys_router.router import Router
from recsys_router.state import INT, STR, Arr, ListOf, Size

from ._common import masked_group_means, nan_col_means, query_uniforms, safe_llm_means

__all__ = ["RandomRouter", "OracleRouter", "ROracleRouter", "BestSingleRouter", "TaskBestRouter",
           "truth_scores", "task_groups", "task_rows", "rows_or_default"]


def truth_scores(data: RoutingData) -> np.ndarray:
    """Ground-truth scores with unobserved cells set below every observed score.

    An oracle cannot know an unobserved outcome, so such cells rank last (they get
    ``min(observed) - 1``; ``-1`` when nothing is observed).
    """
    s = data.scores.astype(np.float64)
    obs = ~np.isnan(s)
    low = (float(s[obs].min()) - 1.0) if obs.any() else -1.0
    return np.where(obs, s, low)


def _truth_costs(router: Router, data: RoutingData) -> np.ndarray | None:
    """True per-query costs of ``data`` where known, the router's mean train cost elsewhere.

    When no LLM has a recorded training cost there is no mean to fall back on: an unknown
    cell gets the dearest known cost of its query
    (:func:`~recsys_router.policies.fill_unknown_costs`), never 0 (free, which handed it the
    query at a small budget or willingness to pay); finite, as the evaluation requires.
    """
    base = None if router.mean_costs_ is None else Router._predict_costs(router, data)
    if data.costs is None:
        return base
    c = data.costs.astype(np.float64)
    if base is None:
        return np.nan_to_num(c, nan=0.0)
    if not np.isfinite(np.asarray(router.mean_costs_, np.float64)).any():
        return fill_unknown_costs(c)
    return np.where(np.isnan(c), base, c)


class RandomRouter(Router):
    """Uniformly random router (seeded).

    Each query gets iid uniform pseudo-scores derived from ``(seed, query_id, LLM
    column)``, so the argmax over any candidate subset is uniform over that subset and a
    query is routed the same way alone or in a batch.

    Parameters
    ----------
    seed : int
        Random seed.

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> d = make_synthetic(50, 4, 2, seed=0)
    >>> RandomRouter(seed=1).fit(d).route(d).shape
    (50,)
    """

    _state_ = {"n_llms_": Size("n_llms")}

    def __init__(self, seed: int = 0):
        self.seed = seed

    def _freeze_params(self):
        self.seed_ = check_seed(self.seed)  # fixed at fit: set_params cannot change it

    def _fit(self, train, val):
        self.n_llms_ = train.n_llms

    def _predict_scores(self, data):
        return query_uniforms(data.query_ids, self.seed_, self.n_llms_)

    def _selection_probs(self, data):
        """Uniform probabilities ``1 / n_llms`` for every query."""
        self._check_fitted()
        return np.full((data.n_queries, self.n_llms_), 1.0 / self.n_llms_)


class OracleRouter(Router):
    """Oracle: each query goes to the LLM with the best ground-truth score.

    Reads the scores (and costs) of the data being routed (``uses_ground_truth``). Ties
    go to the LLM that was cheapest *on that query* (true cost when the data has costs,
    else the mean train cost), then to the lower column. Unobserved cells rank last.

    Example
    -------
    >>> d = RoutingData(["q"], ["a", "b", "c"], [[1., 0., 1.]], [[3., 1., 2.]])
    >>> OracleRouter().fit(d).route(d).tolist()
    ['c']
    """

    uses_ground_truth = True
    _state_ = {"n_llms_": Size("n_llms")}

    def __init__(self):
        pass

    def _fit(self, train, val):
        self.n_llms_ = train.n_llms

    def _predict_scores(self, data):
        return truth_scores(data)

    def _predict_costs(self, data):
        """True per-query costs of ``data`` (mean train cost where unknown)."""
        self._check_fitted()
        return _truth_costs(self, data)


class ROracleRouter(Router):
    """RouterEval's ``r_o(p)``: the oracle with probability ``p``, uniform random otherwise.

    The coin and the random draw are seeded per query (batch-invariant). ``p = 1`` is the
    oracle and ``p = 0`` the random router. The expected mean score has the closed form
    :meth:`expected_score`.

    Parameters
    ----------
    p : float
        Probability of routing a query like the oracle, in [0, 1]. RouterEval reports
        ``r_o(0.5)``; its script default is ``p = 1``.
    seed : int
        Random seed.

    Example
    -------
    >>> d = RoutingData(["q1", "q2"], ["a", "b"], [[1., 0.], [0., 1.]])
    >>> ROracleRouter(p=1.0).fit(d).route(d).tolist()
    ['a', 'b']
    """

    uses_ground_truth = True
    _state_ = {"n_llms_": Size("n_llms")}

    def __init__(self, p: float = 0.5, seed: int = 0):
        self.p = p
        self.seed = seed

    def _freeze_params(self):
        # fixed at fit: set_params cannot change them
        if not 0.0 <= float(self.p) <= 1.0:
            raise ValueError(f"r_o: p must be in [0, 1], got {self.p!r}")
        self.p_ = float(self.p)
        self.seed_ = check_seed(self.seed)

    def _fit(self, train, val):
        self.n_llms_ = train.n_llms

    def oracle_mask(self, data: RoutingData) -> np.ndarray:
        """Boolean per query: True where the oracle branch was drawn."""
        self._check_fitted()
        return query_uniforms(data.query_ids, self.seed_, 1, stream=1)[:, 0] < self.p_

    def _predict_scores(self, data):
        rand = query_uniforms(data.query_ids, self.seed_, self.n_llms_)
        return np.where(self.oracle_mask(data)[:, None], truth_scores(data), rand)

    def _predict_costs(self, data):
        """True per-query costs of ``data`` (mean train cost where unknown)."""
        self._check_fitted()
        return _truth_costs(self, data)

    def _selection_probs(self, data):
        """``p * onehot(oracle choice) + (1 - p) / n_llms`` per query."""
        self._check_fitted()
        self._check_llms(data)
        pick = argmax_policy(truth_scores(data), _truth_costs(self, data))
        probs = np.full((data.n_queries, self.n_llms_), (1.0 - self.p_) / self.n_llms_)
        probs[np.arange(data.n_queries), pick] += self.p_
        return probs

    @staticmethod
    def expected_score(data: RoutingData, p: float) -> float:
        """Closed-form expected mean score of ``r_o(p)`` on ``data``.

        ``p * oracle_mean + (1 - p) * mean_j(mean_i s_ij)``, where ``oracle_mean`` is the
        mean over queries of the best observed score and the second term is what a uniform
        random pick scores on average (exact for a fully observed matrix).

        Example
        -------
        >>> d = RoutingData(["q1", "q2"], ["a", "b"], [[1., 0.], [1., 1.]])
        >>> ROracleRouter.expected_score(d, 0.5)
        0.875
        """
        s = data.scores.astype(np.float64)
        has = ~np.isnan(s).all(axis=1)
        oracle = float(np.nanmax(s[has], axis=1).mean())
        rand = float(np.nanmean(nan_col_means(s, fallback=np.nan)))
        return float(p) * oracle + (1.0 - float(p)) * rand


class BestSingleRouter(Router):
    """Best single model (BSM): the LLM with the highest mean train score, for every query.

    Predicted scores are the LLMs' mean train scores (the same row for each query), so
    ``wtp``/``budget`` policies pick the best LLM affordable by mean cost. An LLM never
    observed in training gets a score below every observed mean.

    Example
    -------
    >>> d = RoutingData(["q1", "q2"], ["a", "b"], [[1., 0.], [0., 0.]])
    >>> BestSingleRouter().fit(d).route(d).tolist()
    ['a', 'a']
    """

    _state_ = {"mean_scores_": Arr("float64", ("n_llms",)), "best_index_": INT, "best_llm_": STR}

    def __init__(self):
        pass

    def _fit(self, train, val):
        self.mean_scores_ = safe_llm_means(train.scores)
        costs = None if self.mean_costs_ is None else self.mean_costs_[None, :]
        #: column of the best LLM (highest mean score, cheapest mean cost on ties)
        self.best_index_ = int(argmax_policy(self.mean_scores_[None, :], costs)[0])
        self.best_llm_ = self.llm_names_[self.best_index_]

    def _predict_scores(self, data):
        return np.broadcast_to(self.mean_scores_, (data.n_queries, len(self.mean_scores_))).copy()


def _task_keys(data: RoutingData) -> list[str]:
    return ["" if t is None or (isinstance(t, float) and np.isnan(t)) else str(t)
            for t in data.tasks]


def task_rows(data: RoutingData, tasks: list[str]) -> np.ndarray:
    """Index of each query's task label in ``tasks`` (-1: no label, or not in ``tasks``)."""
    index = {t: i for i, t in enumerate(tasks)}
    return np.array([index.get(k, -1) for k in _task_keys(data)], dtype=np.int64)


def task_groups(data: RoutingData) -> tuple[list[str], np.ndarray]:
    """The sorted task labels of ``data`` and each query's index among them (-1: none)."""
    tasks = sorted(set(_task_keys(data)) - {""})
    return tasks, task_rows(data, tasks)


def rows_or_default(table: np.ndarray, rows: np.ndarray, default: np.ndarray) -> np.ndarray:
    """``table[rows[i]]`` per query, ``default`` where ``rows[i] < 0``: shape (n, m)."""
    out = np.broadcast_to(default, (len(rows), len(default))).astype(np.float64)
    known = rows >= 0
    out[known] = table[rows[known]]
    return out


class TaskBestRouter(Router):
    """Best LLM per task: each query goes to the LLM with the highest mean train score on
    the query's task (its ``task`` label, e.g. the benchmark it comes from).

    The per-task form of the best single model: it needs the task of a new query at
    routing time (as GraphRouter does) and nothing of its text. Predicted scores are the
    task's mean train scores per LLM (the LLM's overall mean where the task never saw
    it); a task unseen in training, or a query without one, gets the overall means (the
    best single model's row).

    Example
    -------
    >>> import pandas as pd
    >>> d = RoutingData.from_long(pd.DataFrame({
    ...     "query_id": ["q1", "q1", "q2", "q2", "q3", "q3"], "model": ["a", "b"] * 3,
    ...     "score": [1., 0., 0., 1., 0., 1.], "task": ["x", "x", "y", "y", "y", "y"]}))
    >>> TaskBestRouter().fit(d).route(d).tolist()
    ['a', 'b', 'b']
    """

    uses_tasks = True

    _state_ = {"tasks_": ListOf(STR, dim="n_tasks"), "mean_scores_": Arr("float64", ("n_llms",)),
               "task_means_": Arr("float64", ("n_tasks", "n_llms"))}

    def __init__(self):
        pass

    def _fit(self, train, val):
        self.tasks_, rows = task_groups(train)
        self.mean_scores_ = safe_llm_means(train.scores)
        seen = rows >= 0
        self.task_means_ = masked_group_means(train.scores[seen], rows[seen], len(self.tasks_),
                                              self.mean_scores_)

    def _predict_scores(self, data):
        return rows_or_default(self.task_means_, task_rows(data, self.tasks_), self.mean_scores_)
