"""The safe fallback: a learned router that does not beat the simple baselines on held-out
training queries hands those queries to the better baseline, task by task.

:class:`SafeFallbackRouter` wraps any router. ``fit(train)`` splits the *training* queries
(seeded, stratified by task) into an inner-train and an inner-validation part, fits the
wrapped router on inner-train (its own early stopping sees the same inner-validation part),
and measures on inner-validation, per task, the mean realised score of three choices:

* the wrapped router (argmax of its predicted scores among each query's observed LLMs);
* ``best-single``: the LLM with the highest mean inner-train score;
* ``task-best``: the LLM with the highest mean inner-train score on the query's task.

Where the router's mean is not strictly above both baselines' on a task, that task's
queries go to the better baseline (``task-best`` on ties: it is the per-task refinement of
``best-single``, and a few held-out queries often cannot tell them apart); queries without a
task, or
of a task the inner-validation part did not see, follow the same comparison made over all
inner-validation queries. ``fallback_`` records every decision and its three means. The
baselines used at prediction time are refitted on all training queries; the wrapped router
is refitted on all of them too unless it holds out its own validation split (Lightning
routers with ``val_fraction > 0``), which saves a second fit.

Reference: the "never worse than the best single model" guard of routing benchmarks
(Hu et al., "RouterBench", arXiv:2403.12031, 2024, section 5) made per task.
"""

from __future__ import annotations

import numpy as np

from .data import RoutingData
from .router import Router

__all__ = ["SafeFallbackRouter", "stratified_holdout", "realised_scores", "fallback_summary",
           "task_keys"]

MIN_VAL_QUERIES = 5


def task_keys(tasks) -> np.ndarray:
    """Task labels as strings ("" for a missing one)."""
    return np.array(["" if t is None or (isinstance(t, float) and np.isnan(t)) else str(t)
                     for t in tasks], dtype=object)


def _task_keys(data: RoutingData) -> np.ndarray:
    return task_keys(data.tasks)


def stratified_holdout(tasks, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded split of query rows into (inner-train, inner-validation), the same share of
    every task in each part (a task with one query stays in inner-train).

    Parameters
    ----------
    tasks : sequence
        Task label per query (None/NaN = no task; those form one group).
    fraction : float
        Share held out, in (0, 1).
    seed : int

    Example
    -------
    >>> tr, va = stratified_holdout(["a"] * 10, 0.2, 0)
    >>> len(tr), len(va)
    (8, 2)
    """
    if not 0 < fraction < 1:
        raise ValueError(f"validation fraction must be in (0, 1), got {fraction!r}")
    rng = np.random.default_rng(seed)
    keys = task_keys(tasks)
    val = []
    for t in sorted(set(keys)):
        rows = np.flatnonzero(keys == t)
        if len(rows) < 2:
            continue
        n_val = min(max(int(round(fraction * len(rows))), 1 if len(rows) >= 5 else 0),
                    len(rows) - 1)
        val.extend(rng.permutation(rows)[:n_val])
    val = np.sort(np.asarray(val, dtype=np.int64))
    train = np.setdiff1d(np.arange(len(keys)), val)
    return train, val


def realised_scores(pred: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """True score of the LLM with the highest prediction among each query's observed LLMs.

    Parameters
    ----------
    pred, truth : ndarray (n, L)
        Predicted scores; true scores with NaN = unobserved.

    Returns
    -------
    ndarray (n,)
        NaN for a query without any observed LLM.

    Example
    -------
    >>> realised_scores(np.array([[0.9, 0.5, 0.1]]), np.array([[np.nan, 0.0, 1.0]])).tolist()
    [0.0]
    """
    obs = ~np.isnan(truth)
    p = np.where(obs, np.nan_to_num(np.asarray(pred, np.float64), nan=-np.inf), -np.inf)
    choice = p.argmax(axis=1)
    out = truth[np.arange(len(truth)), choice].astype(np.float64)
    out[~obs.any(axis=1)] = np.nan
    return out


def _means(scores: np.ndarray) -> np.ndarray:
    ok = ~np.isnan(scores)
    n = ok.sum(axis=0)
    m = np.divide(np.where(ok, scores, 0.0).sum(axis=0), n, out=np.full(scores.shape[1], np.nan),
                  where=n > 0)
    low = np.nanmin(m) - 1.0 if np.isfinite(m).any() else 0.0
    return np.where(np.isnan(m), low, m)


class _Baselines:
    """best-single and task-best predicted-score rows from a training matrix."""

    def __init__(self, data: RoutingData):
        s = data.scores.astype(np.float64)
        self.overall = _means(s)
        keys = _task_keys(data)
        self.tasks = {}
        for t in sorted(set(keys) - {""}):
            sub = s[keys == t]
            ok = ~np.isnan(sub)
            n = ok.sum(axis=0)
            m = np.divide(np.where(ok, sub, 0.0).sum(axis=0), n, out=self.overall.copy(),
                          where=n > 0)
            self.tasks[t] = m

    def predict(self, data: RoutingData, which: str) -> np.ndarray:
        out = np.broadcast_to(self.overall, (data.n_queries, len(self.overall))).copy()
        if which == "task-best":
            for i, t in enumerate(_task_keys(data)):
                if t in self.tasks:
                    out[i] = self.tasks[t]
        return out


def _decide(r: float, bs: float, tb: float) -> str:
    if r > max(bs, tb):
        return "router"
    return "best-single" if bs > tb else "task-best"


def fallback_summary(fallback: dict) -> str:
    """One line for reports, e.g. ``fell back on 2 of 5 tasks (task-best: a, b)``."""
    if not fallback.get("enabled", False):
        return "fallback off"
    if "skipped" in fallback:
        return f"fallback skipped: {fallback['skipped']}"
    tasks = fallback["tasks"]
    by = {}
    for t, d in tasks.items():
        if d != "router":
            by.setdefault(d, []).append(t)
    parts = [f"{k}: {', '.join(v[:6])}{' ...' if len(v) > 6 else ''}" for k, v in sorted(by.items())]
    head = (f"fell back on {sum(len(v) for v in by.values())} of {len(tasks)} tasks"
            + (f" ({'; '.join(parts)})" if parts else ""))
    return f"{head}; other queries: {fallback['default']}"


class SafeFallbackRouter(Router):
    """Wrap a router with the per-task safe fallback (see the module docstring).

    Parameters
    ----------
    router : Router
        The learned router to guard (cloned on every fit; never fitted itself).
    val_fraction : float
        Share of the training queries held out per task for the comparison.
    seed : int
        Seeds the inner split.
    enabled : bool
        False: fit the wrapped router on all training queries and never fall back.

    Attributes
    ----------
    router_ : Router
        The fitted wrapped router.
    fallback_ : dict
        ``enabled``; ``tasks`` (task -> "router" / "best-single" / "task-best"); ``default``
        (the decision for queries without a seen task); ``means`` (task -> the three
        inner-validation means); ``n_val`` (inner-validation queries); or ``skipped`` (why
        no comparison was made, e.g. too few training queries).

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> from recsys_router.registry import make_router
    >>> d = make_synthetic(300, 4, 3, seed=0)
    >>> r = SafeFallbackRouter(make_router("knn", k=5)).fit(d)
    >>> sorted(r.fallback_["tasks"])
    ['topic_0', 'topic_1', 'topic_2']
    """

    def __init__(self, router: Router, val_fraction: float = 0.2, seed: int = 0,
                 enabled: bool = True):
        self.router = router
        self.val_fraction = val_fraction
        self.seed = seed
        self.enabled = enabled

    @property
    def uses_text(self) -> bool:            # type: ignore[override]
        return bool(getattr(self.router, "uses_text", False))

    def _clone(self) -> Router:
        if not isinstance(self.router, Router):
            raise TypeError(f"SafeFallbackRouter wraps a Router, got {type(self.router).__name__}")
        return type(self.router)(**self.router.get_params())

    def _fit(self, train: RoutingData, val: RoutingData | None) -> None:
        self.baselines_ = _Baselines(train)
        if not self.enabled:
            self.router_ = self._clone().fit(train, val)
            self.fallback_ = {"enabled": False, "tasks": {}, "default": "router"}
            return
        tr_rows, va_rows = stratified_holdout(train.tasks, float(self.val_fraction),
                                            int(self.seed))
        if len(va_rows) < MIN_VAL_QUERIES or len(tr_rows) < MIN_VAL_QUERIES:
            self.router_ = self._clone().fit(train, val)
            self.fallback_ = {"enabled": True, "tasks": {}, "default": "router",
                              "skipped": f"{train.n_queries} training queries are too few to hold "
                                         f"out {MIN_VAL_QUERIES} for the comparison"}
            return
        inner_tr, inner_va = train.subset(tr_rows), train.subset(va_rows)
        router = self._clone()
        holds_out = float(router.get_params().get("val_fraction", 0) or 0) > 0
        router.fit(inner_tr, inner_va)
        truth = inner_va.scores.astype(np.float64)
        base = _Baselines(inner_tr)
        got = {"router": realised_scores(router.predict_scores(inner_va), truth),
               "best-single": realised_scores(base.predict(inner_va, "best-single"), truth),
               "task-best": realised_scores(base.predict(inner_va, "task-best"), truth)}
        keys = _task_keys(inner_va)
        means, tasks = {}, {}
        for t in sorted(set(keys) - {""}):
            rows = keys == t
            m = {k: float(np.nanmean(v[rows])) if np.isfinite(v[rows]).any() else np.nan
                 for k, v in got.items()}
            if not np.isfinite(list(m.values())).all():
                continue
            means[t], tasks[t] = m, _decide(m["router"], m["best-single"], m["task-best"])
        overall = {k: float(np.nanmean(v)) for k, v in got.items()}
        default = _decide(overall["router"], overall["best-single"], overall["task-best"])
        if not holds_out:       # the wrapped router learns from every training query
            router = self._clone().fit(train, val)
        self.router_ = router
        self.fallback_ = {"enabled": True, "tasks": tasks, "default": default, "means": means,
                          "overall": overall, "n_val": int(len(va_rows)),
                          "refitted": not holds_out}

    def fallback_rows(self, data: RoutingData) -> np.ndarray:
        """Per query: "router", "best-single" or "task-best" (what decides its LLM)."""
        self._check_fitted()
        fb = self.fallback_
        seen = set(self.baselines_.tasks)
        return np.array([fb["tasks"].get(t, fb["default"]) if t in seen else fb["default"]
                         for t in _task_keys(data)], dtype=object)

    def _predict_scores(self, data: RoutingData) -> np.ndarray:
        out = np.asarray(self.router_.predict_scores(data), dtype=np.float64).copy()
        rows = self.fallback_rows(data)
        for which in ("best-single", "task-best"):
            sel = rows == which
            if sel.any():
                out[sel] = self.baselines_.predict(data.subset(np.flatnonzero(sel)), which)
        return out

    def predict_costs(self, data: RoutingData):
        self._check_fitted()
        return self.router_.predict_costs(data)

    def selection_probs(self, data: RoutingData):
        self._check_fitted()
        if (self.fallback_rows(data) != "router").any():
            return None
        return self.router_.selection_probs(data)
