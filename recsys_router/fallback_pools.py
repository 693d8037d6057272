"""The safe fallback's decisions and predictions on a candidate pool: a subset of the LLMs it
was fitted on.

RouterEval's protocol fits a router on each candidate group's data (its ``m`` LLMs only).
A router whose per-LLM fit is independent of the other LLMs (``linearr``, ``knn``) gives the
same predictions for those LLMs when fitted once on all of them, so ``evaluate`` fits it
once and cuts its predictions to the pool. The safe fallback's verdict is not like that: it
compares the router's realised score with the baselines' over the LLMs it chooses among, so
a verdict taken over all ``N`` LLMs is a different verdict from the one a fit on the pool
would take. :func:`pool_record` takes it again on the pool: from the inner-validation
predictions the fit kept (:meth:`SafeFallbackRouter.keep_inner_predictions
<recsys_router.fallback.SafeFallbackRouter.keep_inner_predictions>`), each held-out query's
choices (router, best-single, task-best) are made among the pool's LLMs only, and the
verdict, the tasks' departures and the top check are decided on those realised scores, as a
fit on the pool's LLMs decides them (same inner splits; the inner fold count and the
inner-train baselines are the fit's, which per LLM are the pool's). :func:`pool_scores`
then serves the test queries under that record. One pool costs one pass over the held-out
predictions of its ``m`` columns: linear in ``m``, whatever ``N``.

The same two functions serve the whole pool: the fit's own record is
:func:`decide_record` of :func:`add_fold_scores` over all columns, and
``SafeFallbackRouter._predict_scores`` is :func:`pool_scores` with ``cols=None``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .data import RoutingData
from .fallback_nauc import decide_by_nauc, resolve_verdict_metric
from .fallback_rule import decide_top
from .fallback_scores import baseline_scores, baseline_scores_for, promote_top
from .inner_validation import DECISIONS, realised_scores
from .policies import argmax_policy

__all__ = ["InnerFold", "PoolInner", "PoolPredictions", "add_fold_scores", "decide_record", "empty_scores",
           "pool_record", "pool_scores", "full_pool"]


@dataclass
class InnerFold:
    """One inner split's held-out part: its rows in the training data, the wrapped router's
    predicted scores and costs there (all LLMs), the baselines' inner-train means
    (:func:`~recsys_router.fallback_scores.baseline_means`) and the rows' task keys."""
    rows: np.ndarray
    scores: np.ndarray
    costs: np.ndarray | None
    base: tuple
    keys: np.ndarray


@dataclass
class PoolInner:
    """What a fit keeps to decide again on a pool: the training data, its inner folds, the
    held-out queries' task keys (concatenated) and counts."""
    train: RoutingData
    folds: list = field(default_factory=list)
    keys: np.ndarray | None = None
    n_val: int = 0
    n_folds: int = 1


def _cut(a, cols):
    return None if a is None else (np.asarray(a) if cols is None else np.asarray(a)[:, cols])


def _cut_means(base: tuple, cols) -> tuple:
    overall, tasks, per_task = base
    if cols is None:
        return base
    return np.asarray(overall)[cols], tasks, np.asarray(per_task)[:, cols]


def add_fold_scores(got: dict, preds: dict, fold: InnerFold, train: RoutingData, cols,
                    nauc: bool) -> None:
    """Append one inner fold's realised scores (and, for ``nauc``, its predictions) over the
    LLM columns ``cols`` (None: all) to ``got`` / ``preds``, in place."""
    truth = train.scores[fold.rows].astype(np.float64)
    truth = truth if cols is None else truth[:, cols]
    base = _cut_means(fold.base, cols)
    pred = {"router": _cut(fold.scores, cols), "truth": truth, "costs": _cut(fold.costs, cols),
            **{w: baseline_scores_for(base, fold.keys, w) for w in DECISIONS[1:]}}
    for which in DECISIONS:
        # ties go to the router's cheaper predicted cost, as routing breaks them
        got[which].append(realised_scores(pred[which], truth, pred["costs"]))
    if nauc:
        pred["truth_costs"] = _cut(None if train.costs is None else train.costs[fold.rows], cols)
        for name, v in preds.items():
            v.append(pred[name])


def empty_scores() -> tuple[dict, dict]:
    """Empty ``got`` / ``preds`` lists for :func:`add_fold_scores`."""
    return ({k: [] for k in DECISIONS},
            {k: [] for k in ("router", *DECISIONS[1:], "costs", "truth", "truth_costs")})


def decide_record(router, got: dict, preds: dict, keys: np.ndarray, n_val: int, n_folds: int,
                  vz: float, tz: float | None, vm: str) -> dict:
    """The fallback record (verdict, tasks, nAUC verdict where ``vm`` asks, top check) of
    ``router`` (a :class:`~recsys_router.fallback.SafeFallbackRouter`) from the held-out
    realised scores and predictions that :func:`add_fold_scores` collected."""
    got = {k: np.concatenate(v) for k, v in got.items()}
    fb = router._decide_all(got, keys, n_val, n_folds, vz)
    if vm == "nauc" and any(c is None for c in preds["costs"]):
        vm = "mu_o (the router predicts no costs)"
    if vm == "nauc":
        decide_by_nauc(fb, {n: np.concatenate([np.asarray(a, np.float64) for a in v])
                            for n, v in preds.items()},
                       keys, float(router.z), vz, int(router.seed))
    fb["verdict_metric"] = vm
    decide_top(fb, got, keys, float(router.z), tz)
    return fb


def full_pool(cols, n_llms: int) -> bool:
    """Whether the columns ``cols`` are all ``n_llms`` LLMs in their order (None: yes)."""
    if cols is None:
        return True
    cols = np.asarray(cols, dtype=np.int64).reshape(-1)
    return len(cols) == n_llms and bool((cols == np.arange(n_llms)).all())


def pool_record(router, cols) -> dict:
    """The fallback record ``router`` would have taken fitted on the LLM columns ``cols``
    alone (module docstring); its own ``fallback_`` for the whole pool, when the fallback is
    off or skipped its comparison (both independent of the LLMs).

    Raises
    ------
    ValueError
        The router was fitted without keeping its inner-validation predictions.
    """
    router._check_fitted()
    fb = router.fallback_
    if (not fb.get("enabled") or "skipped" in fb
            or full_pool(cols, len(router.base_overall_))):
        return fb
    inner = getattr(router, "_pool_inner", None)
    if inner is None:
        raise ValueError("this safe fallback was fitted without keep_inner_predictions(): it "
                         "cannot decide on a candidate pool")
    cols = np.asarray(cols, dtype=np.int64).reshape(-1)
    sub = inner.train.subset(llms=cols)      # the pool's costs resolve the z's and the metric
    vz, tz = router._verdict_z(sub), router._top_z(sub)
    vm = resolve_verdict_metric(router.verdict_metric, sub)
    got, preds = empty_scores()
    for fold in inner.folds:
        add_fold_scores(got, preds, fold, inner.train, cols, vm == "nauc")
    out = decide_record(router, got, preds, inner.keys, inner.n_val, inner.n_folds, vz, tz, vm)
    out["refitted"] = fb.get("refitted", True)
    out["pool_llms"] = int(len(cols))
    return out


def pool_scores(router, data: RoutingData, record: dict, cols, raw: np.ndarray,
                costs_for: Callable) -> np.ndarray:
    """``router``'s served scores on ``data`` for the LLM columns ``cols`` (None: all) under
    the fallback ``record``: the wrapped router's ``raw`` predictions, rows a baseline
    decides replaced by its means over those LLMs, and the top check's baseline LLM (among
    those LLMs) promoted where the record says so. ``costs_for(rows, sub)`` gives the
    router's predicted costs of the rows ``rows`` (the queries of ``sub``) over all LLMs."""
    out = np.array(raw, dtype=np.float64, copy=True)
    out = out if cols is None else out[:, cols]
    rows = router.fallback_rows(data, record)
    means = _cut_means((router.base_overall_, router.base_tasks_, router.base_task_means_), cols)
    for which in ("best-single", "task-best"):
        sel = rows == which
        if sel.any():
            out[sel] = baseline_scores(means, data.subset(np.flatnonzero(sel)), which)
    top = record.get("top", "router")
    sel = np.flatnonzero(rows == "router")
    if top != "router" and len(sel):
        sub = data.subset(sel)
        # the baseline's LLM as routing (and the top check) picks it: ties to the cheaper
        # predicted cost, as best-single breaks them
        pick = argmax_policy(baseline_scores(means, sub, top), _cut(costs_for(sel, sub), cols))
        out[sel] = promote_top(out[sel], pick)
    return out


class PoolPredictions:
    """A fitted safe-fallback router's predictions on ``data`` per candidate pool: calling it
    with a pool's LLM columns gives ``(scores, probs, record)``, the pool's served scores
    (columns in that order), its selection probabilities (the wrapped router's, where the
    pool's record leaves every query of ``data`` with it and no top check moves it; else
    None) and the record. The wrapped router predicts ``data`` once for all pools.

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> from recsys_router.fallback import SafeFallbackRouter
    >>> from recsys_router.registry import make_router
    >>> d = make_synthetic(200, 6, 2, seed=0)
    >>> r = SafeFallbackRouter(make_router("linearr")).keep_inner_predictions().fit(d)
    >>> scores, probs, record = PoolPredictions(r, d)([4, 1, 2])
    >>> scores.shape, record["pool_llms"]
    ((200, 3), 3)
    """

    def __init__(self, router, data: RoutingData):
        router._check_fitted()
        self.router, self.data = router, data
        self.raw = np.asarray(router.router_.predict_scores(data), dtype=np.float64)
        self.costs = router.router_.predict_costs(data)
        self._probs: list = []

    def __call__(self, cols) -> tuple[np.ndarray, np.ndarray | None, dict]:
        r, cols = self.router, np.asarray(cols, dtype=np.int64).reshape(-1)
        record = pool_record(r, cols)
        costs = self.costs
        scores = pool_scores(r, self.data, record, cols, self.raw,
                             lambda sel, sub: None if costs is None else np.asarray(costs)[sel])
        probs = None
        if (r.fallback_rows(self.data, record) == "router").all() \
                and record.get("top", "router") == "router":
            if not self._probs:
                self._probs.append(r.router_.selection_probs(self.data))
            if self._probs[0] is not None:
                probs = np.asarray(self._probs[0], dtype=np.float64)[:, cols]
        return scores, probs, record
