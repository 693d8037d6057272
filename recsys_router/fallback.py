"""The safe fallback: a learned router that does not beat the simple baselines on held-out
training queries hands those queries to the better baseline.

:class:`SafeFallbackRouter` wraps any router. ``fit(train)`` holds out *training* queries
(seeded, stratified by task): one inner-validation part of ``val_fraction`` of each task
(``inner_folds=1``; tasks too small for a query of their own, such as two-query tasks at
0.2, are pooled and give at most one each), or ``inner_folds`` folds so that every training query is held out
once. It fits the wrapped router on the rest without showing it the held-out part (a
Lightning router's early stopping picks its checkpoint on its own tenth of the rest: were
it the held-out part, the comparison below would favour the router) and records, per
held-out query, the realised
score (true score of the chosen LLM among the query's observed ones) of three choices,
each chosen as routing chooses (:func:`~recsys_router.inner_validation.realised_scores`:
the highest prediction, ties to the router's cheaper predicted cost):

* the wrapped router (argmax of its predicted scores);
* ``best-single``: the LLM with the highest mean inner-train score;
* ``task-best``: the LLM with the highest mean inner-train score on the query's task.

**The rule** (:func:`~recsys_router.inner_validation.paired_decision`): on a set of held-out
queries, the baseline is ``task-best`` only when it beats ``best-single`` beyond the noise
(the same paired test on their difference), else ``best-single``: with dozens of LLMs a
per-task argmax from a part of the queries often picks a lucky LLM, and a lead within the
noise does not show it is a better one (a task with enough queries keeps the all-queries
choice unless the other baseline leads beyond the noise on its own queries). ``d_i`` is the router's realised score minus the
baseline's.

That comparison over *all* held-out queries gives the verdict (``default``) every task
follows: the queries go to the baseline when ``mean(d) < -verdict_z * SE(d)``
(``SE = sd(d) / sqrt(n)``). ``verdict_z="auto"`` (the default) reads the training data:

* **no costs** (quality is the whole objective, as in RouterEval's ``mu_o``):
  ``verdict_z = -1``, the router is kept only when it *leads* the baseline by at least one
  standard error on the mean (a tie in routing, ``SE = 0``, keeps it). The fallback's task is
  that a learned router does not lose to the baselines out of the box: with the router kept
  whenever its held-out mean was at least the baseline's (``verdict_z = 0``), 12 of the 15
  router-folds kept on inner leads of under one SE on the shared no-cost sets scored below
  their baseline on the test fold (mean -0.011); ``verdict_z = 1.645`` (keep unless it loses
  beyond the noise) kept routers that lost by about one inner SE (cruxeval's graph);
* **costs** (a budget sweep decides): ``verdict_z = z``, the router is kept unless it loses
  beyond the noise, and by default (``verdict_metric="auto"``) what it must not lose is its
  budget sweep's nAUC against the baseline's (a paired bootstrap SE;
  :mod:`recsys_router.fallback_nauc`), the tasks' departures likewise; ``verdict_metric="mu_o"``
  compares the top choices' ``d_i`` as above. A router's value there lies in trading quality
  for cost along the sweep: on the ORBIT split of routerbench_zs, the mu_o comparison at
  ``verdict_z = 0`` sent mf, mirt and the cost-aware routers to best-single (GPT-4) and cut
  the best nAUC from 0.83 to 0.82 (``benchmarks/README.md``).

**The top choice with costs.** A router kept within the noise on priced data keeps its
trade-offs along the sweep, but its *top* choice (its LLM with no budget, what RouterEval's
``mu_o`` scores) must then still earn its place: on the held-out queries the router keeps,
that choice faces the no-cost rule (``top_z="auto"``: lead the better baseline by one SE).
Where it does not, each such query's prediction for the baseline's LLM is raised just above
the router's best (:func:`promote_top`; of LLMs tied on the baseline's mean, the one the
router predicts cheaper, as routing and best-single pick); every other prediction is
unchanged, so budgets below that LLM's cost route as the router does, and the top of the
sweep goes where the baseline sends it. ``fallback_["top"]`` records the outcome, ``fallback_["top_check"]`` the
comparison.

A task with at least ``min_task_queries`` held-out queries departs from it only on
significant evidence of its own in the opposite direction (``z = 1.645``, a one-sided
paired test at 5 %): under a "router" verdict it
falls back when its baseline beats the router on its own queries (``mean(d) < -z SE``);
under a fall-back verdict it keeps the router when the router beats the task's better
baseline on its own queries (``mean(d) > z SE``). Such a task that falls back goes to the
better of the two baselines on its own queries; smaller tasks, queries without a task and
tasks the held-out part did not see follow the verdict, baseline included. So a router that
loses overall falls back everywhere unless a task shows it winning beyond the noise, and a
task never leaves the verdict on a difference the noise explains.

``fallback_`` records every decision with its means, difference, SE, query count and the
reason in words (``why``); the verdict, the tasks' departures and the top check are
:mod:`recsys_router.fallback_rule`'s functions of the held-out realised scores. The
baselines used at prediction time are refitted on all training queries; so is the wrapped
router, unless (with one inner split) it holds out its own validation split (``holds_out_val``:
Lightning routers with ``val_fraction > 0``, whose early stopping already fits on a part):
then the router fitted on the inner-train part is kept, which saves a second fit. Routers
that hold out queries only to tune a setting (task-residual, cost-aware, ``--auto``) are
refitted. The fitted wrapper exports
like any router (``_state_``: the baselines' means, the record and the wrapped router as a
nested part).

Reference: the "never worse than the best single model" guard of routing benchmarks
(Hu et al., "RouterBench", arXiv:2403.12031, 2024, section 5) made per task, with a
one-sided paired test (Dror et al., ACL 2018) deciding what "worse" means.
"""

from __future__ import annotations

import numpy as np

from .data import RoutingData
from .errors import ArgumentValueError
from .fallback_nauc import resolve_verdict_metric
from .fallback_pools import (InnerFold, PoolInner, add_fold_scores, decide_record, empty_scores,
                             pool_scores)
from .fallback_rule import decide_all, decide_top
from .fallback_scores import TOP_MARGIN, baseline_means, promote_top
from .fallback_state import MAX_TASKS, FallbackStateChecks
from .fallback_text import fallback_summary
from .hyperparams import check_number, check_seed
from .inner_validation import (AUTO_INNER_FOLDS, check_inner_folds, check_z,
                               inner_splits, paired_decision, realised_scores,
                               stratified_holdout, task_keys)
from .router import Router
from .router_state import InnerRouterState
from .state import JSON_ANY, STR, Arr, ListOf

__all__ = ["SafeFallbackRouter", "stratified_holdout", "realised_scores", "fallback_summary",
           "task_keys", "paired_decision", "baseline_means", "promote_top", "MIN_TASK_QUERIES",
           "Z", "VERDICT_Z", "AUTO_INNER_FOLDS", "TOP_MARGIN"]

MIN_VAL_QUERIES = 5
#: held-out queries a task needs to be decided on its own (smaller ones are pooled)
MIN_TASK_QUERIES = 30
#: standard errors a baseline must lead by (one-sided 5 %): baseline choice, task departures
Z = 1.645
#: standard errors by which a baseline must beat the router on all held-out queries when the
#: training data has no costs (``verdict_z="auto"``; with costs: :data:`Z`); negative: the
#: router must lead the baseline by that many standard errors to be kept
VERDICT_Z = -1.0


def _priced(train: RoutingData | None) -> bool:
    """Whether the training data has at least one observed (finite) cost."""
    costs = None if train is None else train.costs
    return costs is not None and bool(np.isfinite(costs).any())


class SafeFallbackRouter(FallbackStateChecks, InnerRouterState, Router):
    """Wrap a router with the safe fallback (the rule is in the module docstring).

    Parameters
    ----------
    router : Router
        The learned router to guard (cloned on every fit; never fitted itself).
    val_fraction : float
        Share of each task's training queries held out (with ``inner_folds=1``).
    seed : int
        Seeds the inner split(s).
    enabled : bool
        False: fit the wrapped router on all training queries and never fall back.
    z : float
        Standard errors of the per-task departures from the verdict and of the baseline
        choice (task-best only when it beats best-single by more).
    verdict_z : float or "auto"
        Standard errors by which the baseline must beat the router on all held-out queries
        for the verdict to fall back (0: whenever the router's mean is lower; negative: unless
        the router leads by ``-verdict_z`` SE); "auto": :data:`VERDICT_Z` (-1) when the
        training data has no observed cost, else ``z``.
    min_task_queries : int
        Held-out queries a task needs to be decided on its own.
    top_z : float, "auto" or None
        Standard errors by which a baseline must beat the router's top choice, on the
        held-out queries the router keeps, for that choice to go to the baseline's LLM (the
        sign convention of ``verdict_z``; see "The top choice with costs" in the module
        docstring); "auto": :data:`VERDICT_Z` (-1) when the training data has observed costs,
        else None; None: no separate check of the top choice.
    verdict_metric : {"mu_o", "nauc", "auto"}
        What the verdict and the task departures compare: the realised score of each
        choice's top LLM (``mu_o``), or on data with costs the held-out nAUC of the budget
        sweeps with a bootstrap SE (``nauc``, :mod:`recsys_router.fallback_nauc`); ``auto``
        (default): ``nauc`` where every observed training cell has a finite cost, else
        ``mu_o``.
    inner_folds : int or "auto"
        1: one held-out part; k >= 2 (at most :data:`MAX_INNER_FOLDS`, 20): k folds of the
        training queries (k + 1 fits; more folds than training queries, where a fold would
        hold out none, skips the comparison like too few queries do);
        "auto": :data:`AUTO_INNER_FOLDS` when the wrapped router's fit is cheap
        (``cheap_fit``: knn, linearr, c-roberta, als, bpr) or when it declares
        ``fold_max_cells`` (the Lightning routers, whose data-scaled fits take seconds on
        such sets) and the training set has at most that many observed cells; else 1
        (larger sets, ``--auto`` searches, wrappers). Every training query held out once
        makes the comparison five times larger than one held-out fifth (inner SE about
        2.2 times smaller), which is where the verdict is closest to a coin toss.

    Attributes
    ----------
    router_ : Router
        The fitted wrapped router.
    fallback_ : dict
        ``enabled``; ``tasks`` (task -> "router" / "best-single" / "task-best"); ``default``
        (the all-queries verdict, followed by every task without significant evidence of its
        own); ``means`` (task -> means, ``baseline``, ``diff``, ``se``, ``n``, ``pooled``,
        ``own_decision`` and ``router_better`` (its own tests), ``departs``, ``decision``,
        ``why``); ``overall`` (the comparison over all held-out queries, with ``why``);
        ``n_val``; ``z``, ``verdict_z``, ``min_task_queries``, ``inner_folds``; ``top``
        ("router", or the baseline whose LLM tops the router's rows) and ``top_check`` (its
        comparison, with ``why``) when the top choice was checked; or
        ``skipped`` (why no comparison was made, e.g. too few training queries).

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> from recsys_router.registry import make_router
    >>> d = make_synthetic(300, 4, 3, seed=0)
    >>> r = SafeFallbackRouter(make_router("knn", k=5)).fit(d)
    >>> sorted(r.fallback_["tasks"])
    ['topic_0', 'topic_1', 'topic_2']
    """

    #: whether a fit keeps its inner-validation predictions (:meth:`keep_inner_predictions`)
    _keep_inner = False
    _pool_inner = None
    #: restored from the nested part ``router_``, not stored as a parameter
    _part_params_ = ("router",)
    _state_ = {"base_overall_": Arr("float64", ("n_llms",)),
               "base_tasks_": ListOf(STR, MAX_TASKS, dim="n_base_tasks"),
               "base_task_means_": Arr("float64", ("n_base_tasks", "n_llms")),
               "fallback_": JSON_ANY}

    def __init__(self, router: Router, val_fraction: float = 0.2, seed: int = 0,
                 enabled: bool = True, z: float = Z, min_task_queries: int = MIN_TASK_QUERIES,
                 inner_folds: int | str = "auto", verdict_z: float | str = "auto",
                 top_z: float | str | None = "auto", verdict_metric: str = "auto"):
        self.router = router
        self.val_fraction = val_fraction
        self.seed = seed
        self.enabled = enabled
        self.z = z
        self.min_task_queries = min_task_queries
        self.inner_folds = inner_folds
        self.verdict_z = verdict_z
        self.top_z = top_z
        self.verdict_metric = verdict_metric

    @property
    def uses_text(self) -> bool:            # type: ignore[override]
        return bool(getattr(self.router, "uses_text", False))

    @property
    def uses_tasks(self) -> bool:           # type: ignore[override]
        """True once fitted when a query's task can change its LLM: a task decided apart
        from the all-queries default, ``task-best`` as the default or the top check, or a
        wrapped router that reads tasks."""
        fb = getattr(self, "fallback_", None) or {}
        inner = getattr(self, "router_", None)
        return (bool(getattr(inner, "uses_tasks", False))
                or "task-best" in (fb.get("default"), fb.get("top"))
                or any(v != fb.get("default") for v in (fb.get("tasks") or {}).values()))

    def _clone(self) -> Router:
        if not isinstance(self.router, Router):
            raise TypeError(f"SafeFallbackRouter wraps a Router, got {type(self.router).__name__}")
        return type(self.router)(**self.router.get_params())

    def _set_baselines(self, train: RoutingData) -> None:
        self.base_overall_, self.base_tasks_, self.base_task_means_ = baseline_means(train)

    def _n_folds(self, train: RoutingData) -> int:
        k = check_inner_folds(self.inner_folds)
        if k:
            return k
        if getattr(self.router, "cheap_fit", False):
            return AUTO_INNER_FOLDS
        limit = int(getattr(self.router, "fold_max_cells", 0) or 0)
        cells = int(train.observed.sum())
        return AUTO_INNER_FOLDS if 0 < cells <= limit else 1

    def _fit(self, train: RoutingData, val: RoutingData | None) -> None:
        if not isinstance(self.enabled, (bool, np.bool_)):      # "no" is not False
            raise ArgumentValueError(f"enabled must be True or False, got {self.enabled!r}")
        check_number(self.z, "z", low=0)                       # all before any fit
        check_seed(self.seed)                                  # 1.7 is not read as 1
        check_number(self.min_task_queries, "min_task_queries", low=0, integer=True)
        self._pool_inner = None                                # none kept from an earlier fit
        self._set_baselines(train)
        if not self.enabled:
            self.router_ = self._clone().fit(train, val)
            self.fallback_ = {"enabled": False, "tasks": {}, "default": "router"}
            return
        k, vz = self._n_folds(train), self._verdict_z(train)     # bad values fail before fits
        tz, vm = self._top_z(train), resolve_verdict_metric(self.verdict_metric, train)
        splits = inner_splits(train.tasks, k, self.val_fraction, self.seed)
        n_val = sum(len(va) for _, va in splits)
        empty = sum(len(va) == 0 for _, va in splits)
        if (n_val < MIN_VAL_QUERIES or min(len(tr) for tr, _ in splits) < MIN_VAL_QUERIES
                or empty):
            self.router_ = self._clone().fit(train, val)
            why_ = (self._why_none(train) if k == 1 and empty else
                    f"{train.n_queries} training queries are too few for {k} inner folds "
                    f"({empty} would hold out no query)" if empty else
                    f"{train.n_queries} training queries are too few to hold out "
                    f"{MIN_VAL_QUERIES} for the comparison")
            self.fallback_ = {"enabled": True, "tasks": {}, "default": "router",
                              "skipped": why_}
            return
        got, preds = empty_scores()
        keys, kept = [], []
        for tr_rows, va_rows in splits:
            inner_tr, inner_va = train.subset(tr_rows), train.subset(va_rows)
            router = self._clone()
            router.fit(inner_tr, None)          # never tuned or early-stopped on inner_va
            fold = InnerFold(np.asarray(va_rows), router.predict_scores(inner_va),
                             router.predict_costs(inner_va), baseline_means(inner_tr),
                             task_keys(inner_va.tasks))
            add_fold_scores(got, preds, fold, train, None, vm == "nauc")
            keys.append(fold.keys)
            if self._keep_inner:                # kept to decide again per candidate pool
                kept.append(fold)
        keys = np.concatenate(keys)
        self.fallback_ = decide_record(self, got, preds, keys, n_val, k, vz, tz, vm)
        if self._keep_inner:
            self._pool_inner = PoolInner(train, kept, keys, n_val, k)
        holds_out = len(splits) == 1 and bool(getattr(router, "holds_out_val", False))
        self.router_ = router if holds_out else self._clone().fit(train, val)
        self.fallback_["refitted"] = not holds_out

    def keep_inner_predictions(self, keep: bool = True) -> "SafeFallbackRouter":
        """Keep the next fit's inner-validation predictions (the wrapped router's scores and
        costs on every held-out query, for all LLMs: memory of the training score matrix's
        size in float64, twice with costs), so that
        :func:`~recsys_router.fallback_pools.pool_record` can take the fallback's decisions
        again on a candidate pool; ``evaluate`` asks for it with sized pools. Not stored in
        an artifact. Returns ``self``."""
        self._keep_inner = bool(keep)
        self._pool_inner = None
        return self

    def _why_none(self, train: RoutingData) -> str:
        """Why one inner split held out no query: a task's only query stays in inner-train,
        and ``val_fraction`` of the queries in larger tasks rounded to none."""
        sizes = np.unique(task_keys(train.tasks), return_counts=True)[1]
        multi = int(sizes[sizes >= 2].sum())
        if multi == 0:
            return (f"one inner split holds out no query: each of the {train.n_queries} "
                    f"training queries is its task's only one (it stays in inner-train)")
        return (f"one inner split holds out no query: val_fraction={self.val_fraction!r} of "
                f"the {multi} training queries in tasks of two or more rounds to none")

    def _verdict_z(self, train: RoutingData | None) -> float:
        """``verdict_z`` resolved: "auto" -> -1 without observed costs (or no data), else ``z``."""
        v = self.verdict_z
        if isinstance(v, str) and v == "auto":
            return float(self.z) if _priced(train) else VERDICT_Z
        return check_z(v, "verdict_z (or 'auto')", signed=True)

    def _top_z(self, train: RoutingData) -> float | None:
        """``top_z`` resolved: "auto" -> -1 with observed costs, else None."""
        v = self.top_z
        if v is None:
            return None
        if isinstance(v, str) and v == "auto":
            return VERDICT_Z if _priced(train) else None
        return check_z(v, "top_z (or 'auto' or None)", signed=True)

    def _decide_top(self, got: dict, keys: np.ndarray, top_z: float | None) -> None:
        """Check the router's top choice on the held-out queries it keeps (module docstring;
        :func:`~recsys_router.fallback_rule.decide_top`)."""
        decide_top(self.fallback_, got, keys, float(self.z), top_z)

    def _decide_all(self, got: dict, keys: np.ndarray, n_val: int, n_folds: int = 1,
                    verdict_z: float | None = None) -> dict:
        """The verdict and per-task decisions (:func:`~recsys_router.fallback_rule.decide_all`)
        with this router's ``z`` and ``min_task_queries``; ``verdict_z`` None: resolved as
        with no training data."""
        z, n_min = float(self.z), int(self.min_task_queries)
        vz = self._verdict_z(None) if verdict_z is None else float(verdict_z)
        return decide_all(got, keys, n_val, z, n_min, vz, n_folds)

    def fallback_rows(self, data: RoutingData, record: dict | None = None) -> np.ndarray:
        """Per query: "router", "best-single" or "task-best" (what decides its LLM) under
        ``record`` (default ``fallback_``; a candidate pool's: :mod:`recsys_router.fallback_pools`)."""
        self._check_fitted()
        fb = self.fallback_ if record is None else record
        seen = set(self.base_tasks_)
        return np.array([fb["tasks"].get(t, fb["default"]) if t in seen else fb["default"]
                         for t in task_keys(data.tasks)], dtype=object)

    def _predict_scores(self, data: RoutingData) -> np.ndarray:
        return pool_scores(self, data, self.fallback_, None, self.router_.predict_scores(data),
                           lambda sel, sub: self.router_.predict_costs(sub))

    def _predict_costs(self, data: RoutingData):
        # the private hook: Router.predict_costs lays an added / removed LLM's pool over it
        return self.router_.predict_costs(data)

    def _selection_probs(self, data: RoutingData):
        if (self.fallback_rows(data) != "router").any() or self.fallback_.get("top",
                                                                             "router") != "router":
            return None
        return self.router_.selection_probs(data)
