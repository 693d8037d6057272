"""Task-residual router: any CF router's predictions re-centred on per-task mean scores.

References
----------
* Feng, Shen & You, "GraphRouter: A Graph-based Router for LLM Selections", ICLR 2025
  (arXiv 2410.03834): the task of a query is known at routing time and is a node of its
  graph; here it is used as a prior instead.
* Koren, "Factorization meets the neighborhood", KDD 2008: baseline predictors (global,
  group and item biases) plus a factor model of the residual around them.

On benchmarks built from several tasks most of the routing signal is which LLM is best on
the *task* (``task-best``); a CF model's per-query predictions add within-task noise to it.
This router predicts

    s(q, j) = m(t(q), j) + alpha * (f(q, j) - c(t(q), j))

where ``m`` is the mean train score of LLM ``j`` on task ``t``, ``f`` the wrapped CF
router's prediction and ``c`` the mean of its predictions over the task's train queries.
``alpha = 0`` is ``task-best``; ``alpha = 1`` keeps the CF model's within-task ranking at
the task's mean level. With ``alpha="auto"`` it is chosen on a held-out part of the
training queries (never on test), then the CF router is refitted on all of them.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from recsys_router.data import RoutingData
from recsys_router.errors import ArgumentValueError
from recsys_router.hyperparams import (check_fraction, check_number, check_seed,
                                       held_out_count)
from recsys_router.router import Router
from recsys_router.state import FLOAT, STR, Arr, DictOf, ListOf, Opt, number_keys

from .inner_state import InnerRouterState
from .baselines._common import masked_group_means, safe_llm_means
from .baselines.simple import rows_or_default, task_groups, task_rows

__all__ = ["TaskResidualRouter", "ALPHA_GRID"]

#: values of ``alpha`` tried when ``alpha="auto"``
ALPHA_GRID = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5)


class TaskResidualRouter(InnerRouterState, Router):
    """A CF router's within-task deviations added to per-task mean scores.

    Parameters
    ----------
    base : str
        Registry name of the wrapped router (default ``"mf"``).
    base_params : dict, optional
        Its constructor parameters.
    alpha : float or "auto"
        Weight of the CF residual, or ``"auto"``: the :data:`ALPHA_GRID` value with the
        highest mean observed score of the argmax choice on ``val_fraction`` of the training
        queries.
    alphas : sequence of float, optional
        Grid for ``"auto"`` (default :data:`ALPHA_GRID`).
    val_fraction : float
        Share of training queries held out to choose ``alpha``.
    encoder : str or Encoder, optional
        Given to the wrapped router when it takes one.
    seed : int
        Seeds the held-out split and the wrapped router.

    Attributes
    ----------
    alpha_ : float
        The residual weight in use.
    val_scores_ : dict
        ``alpha -> held-out mean observed score`` (empty unless ``alpha="auto"``).
    router_ : Router
        The wrapped router, fitted on all training queries.

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> d = make_synthetic(120, 3, 2, seed=0)
    >>> r = TaskResidualRouter("knn", {"k": 5}, alpha=0.5).fit(d)
    >>> r.predict_scores(d).shape
    (120, 3)
    """

    uses_text = True
    uses_tasks = True

    _state_ = {"alpha_": FLOAT, "val_scores_": DictOf(Opt(FLOAT), 10_000),
               "tasks_": ListOf(STR, dim="n_tasks"),
               "task_means_": Arr("float64", ("n_tasks", "n_llms")),
               "task_centres_": Arr("float64", ("n_tasks", "n_llms")),
               "overall_means_": Arr("float64", ("n_llms",)),
               "overall_centre_": Arr("float64", ("n_llms",))}

    @classmethod
    def _from_state(cls, params, fields, arrays):
        router = super()._from_state(params, fields, arrays)
        router.val_scores_ = number_keys(router.val_scores_)
        return router

    def __init__(self, base: str = "mf", base_params: dict | None = None, alpha="auto",
                 alphas: Sequence[float] | None = None, val_fraction: float = 0.2,
                 encoder=None, seed: int = 0):
        self.base = base
        self.base_params = base_params
        self.alpha = alpha
        self.alphas = alphas
        self.val_fraction = val_fraction
        self.encoder = encoder
        self.seed = seed

    def _make(self) -> Router:
        from recsys_router.router_spec import resolve_router  # noqa: PLC0415 (imports models)
        return resolve_router(self.base, self.base_params, encoder=self.encoder,
                              seed=self.seed)[0]

    @staticmethod
    def _task_stats(router: Router, train: RoutingData):
        """(task names, task means (T, m), CF centres (T, m), overall means, overall centre)."""
        tasks, rows = task_groups(train)
        seen = rows >= 0
        overall = safe_llm_means(train.scores)
        means = masked_group_means(train.scores[seen], rows[seen], len(tasks), overall)
        pred = np.asarray(router.predict_scores(train), dtype=np.float64)
        centre_all = pred.mean(axis=0)
        centres = masked_group_means(pred[seen], rows[seen], len(tasks), centre_all)
        return tasks, means, centres, overall, centre_all

    @staticmethod
    def _combine(pred, rows, means, centres, overall, centre_all, alpha: float) -> np.ndarray:
        prior = rows_or_default(means, rows, overall)
        return prior + alpha * (pred - rows_or_default(centres, rows, centre_all))

    def _check_alphas(self) -> tuple[float, ...]:
        """``alpha`` and the ``alphas`` grid checked (numbers >= 0, never a bool or a string
        such as "0.5"); returns the grid."""
        if not (isinstance(self.alpha, str) and self.alpha == "auto"):
            check_number(self.alpha, "alpha (or 'auto')", low=0)
        if self.alphas is None:
            return ALPHA_GRID
        grid = self.alphas
        if isinstance(grid, np.ndarray) and grid.ndim == 1:  # np.linspace(...), np.array([...])
            grid = grid.tolist()
        if isinstance(grid, (str, bytes)) or not isinstance(grid, Sequence) \
                or not 1 <= len(grid) <= 1000:
            raise ArgumentValueError(f"alphas must be a list (or 1-d array) of 1 to 1000 numbers "
                                     f">= 0, got {str(self.alphas)[:80]!r}")
        return tuple(check_number(a, f"alphas[{i}]", low=0) for i, a in enumerate(grid))

    def _fit(self, train: RoutingData, val: RoutingData | None) -> None:
        check_fraction(self.val_fraction, "val_fraction")     # used or not, a valid share
        check_seed(self.seed)
        grid = self._check_alphas()                           # all before any fit
        self.val_scores_: dict[float, float] = {}
        alpha = self._choose(train, grid) if self.alpha == "auto" else float(self.alpha)
        self.alpha_ = float(alpha)
        self.router_ = self._make().fit(train, val)
        (self.tasks_, self.task_means_, self.task_centres_, self.overall_means_,
         self.overall_centre_) = self._task_stats(self.router_, train)

    def _choose(self, train: RoutingData, grid: tuple[float, ...]) -> float:
        if not 0 < self.val_fraction < 1:
            raise ValueError(f"val_fraction must be in (0, 1), got {self.val_fraction!r}")
        if train.n_queries < 20:
            return 1.0  # too few queries to hold any out: keep the CF model's ranking
        perm = np.random.default_rng(self.seed).permutation(train.n_queries)
        n_val = held_out_count(self.val_fraction, train.n_queries, 5, "task-residual")
        inner, held = train.subset(np.sort(perm[n_val:])), train.subset(np.sort(perm[:n_val]))
        router = self._make().fit(inner)
        stats = self._task_stats(router, inner)
        pred = np.asarray(router.predict_scores(held), dtype=np.float64)
        rows = task_rows(held, stats[0])
        truth = held.scores
        best, best_v = grid[0], -np.inf
        for a in grid:
            s = self._combine(pred, rows, *stats[1:], a)
            pick = np.argmax(np.where(np.isnan(truth), -np.inf, s), axis=1)
            v = float(np.nanmean(truth[np.arange(len(pick)), pick]))
            self.val_scores_[float(a)] = v
            if v > best_v + 1e-12:
                best, best_v = a, v
        return float(best)

    def _predict_scores(self, data: RoutingData) -> np.ndarray:
        pred = np.asarray(self.router_.predict_scores(data), dtype=np.float64)
        return self._combine(pred, task_rows(data, self.tasks_), self.task_means_,
                             self.task_centres_, self.overall_means_, self.overall_centre_,
                             self.alpha_)

    def _predict_costs(self, data: RoutingData) -> np.ndarray | None:
        """The wrapped router's predicted costs."""
        self._check_fitted()
        return self.router_.predict_costs(data)
