"""RouteLLM metrics for two-LLM pools (strong vs weak): threshold sweep, APGR, CPT.

Reference: Ong et al., "RouteLLM: Learning to Route LLMs with Preference Data",
arXiv:2406.18665; code lm-sys/RouteLLM @ 0b64fda, ``routellm/evals/``.

A router gives each query a score ``w_i`` (e.g. the predicted probability that the strong
model wins); at threshold ``t`` a query goes to the strong model when ``w_i >= t``.
Thresholds are the ``n + 1`` quantile edges of the scores (RouteLLM's ``pd.qcut`` bins);
at the last edge a strict ``>`` is used so the sweep ends at 0% strong calls.

* ``PGR(t) = (q(t) - q_weak) / (q_strong - q_weak)`` (performance gap recovered).
* ``APGR = (AUC - AUC_weak) / (AUC_strong - AUC_weak)`` with ``AUC`` the trapezoid area under
  quality vs. fraction of strong calls, and ``AUC_weak``/``AUC_strong`` the areas of the
  constant lines ``q_weak``/``q_strong`` over the same x range ([0, 1] for the full sweep).
* ``CPT(p)`` - the smallest fraction of strong calls at which the linearly interpolated
  curve reaches ``q_weak + p (q_strong - q_weak)``. (RouteLLM's code uses
  ``np.interp(target, quality, pct)``, which agrees when quality rises with the fraction.)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..errors import DataValidationError
from .base import DIRECTIONS, as_matrix, finite_curve, metric, reaches

__all__ = ["ThresholdCurve", "threshold_sweep", "apgr", "cpt", "routellm_metrics"]


class ThresholdCurve(NamedTuple):
    """Result of :func:`threshold_sweep`, sorted by ``strong_frac`` ascending."""
    thresholds: np.ndarray
    strong_frac: np.ndarray
    qualities: np.ndarray


def _pair(scores, strong: int, weak: int) -> tuple[np.ndarray, np.ndarray]:
    s = as_matrix(scores, "scores")
    for name, j in (("strong", strong), ("weak", weak)):
        if not 0 <= int(j) < s.shape[1]:
            raise DataValidationError(f"{name} = {j} is not a column of scores (0..{s.shape[1] - 1})",
                                      column=name)
    if int(strong) == int(weak):
        raise ValueError("strong and weak must be different LLM columns")
    return s[:, int(strong)], s[:, int(weak)]


def _sorted_curve(strong_frac, qualities) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(strong_frac, dtype=np.float64).ravel()
    y = np.asarray(qualities, dtype=np.float64).ravel()
    if x.shape != y.shape or x.size == 0:
        raise ValueError(f"strong_frac and qualities must be non-empty and of equal length, got "
                         f"{x.shape} and {y.shape}")
    for name, v in (("strong_frac", x), ("qualities", y)):
        finite_curve(v, name, " (a threshold sweep of observed scores has no missing point)")
    o = np.argsort(x, kind="stable")
    return x[o], y[o]


def _finite_args(**values: float) -> None:
    for name, v in values.items():
        if not np.isfinite(float(v)):
            raise DataValidationError(f"{name} is {v}; expected a finite number", column=name)


def threshold_sweep(win_prob, scores: np.ndarray, strong: int = 0, weak: int = 1, *,
                    n_thresholds: int = 10) -> ThresholdCurve:
    """Quality vs. fraction of strong-model calls over score-quantile thresholds.

    Quality at threshold ``t``: ``q(t) = (1/n) sum_i (w_i >= t ? s[i, strong] : s[i, weak])``.
    Computed for all thresholds at once from a sort of ``w`` and cumulative gains.

    Parameters
    ----------
    win_prob : array-like, shape (n_queries,)
        Router score for sending the query to the strong model (higher = strong).
    scores : ndarray, shape (n_queries, n_llms)
        True scores; columns ``strong`` and ``weak`` are used.
    strong, weak : int
        Column indices.
    n_thresholds : int
        Number of quantile bins (RouteLLM's ``num_results``, default 10): ``n + 1`` edges.

    Returns
    -------
    ThresholdCurve

    Example
    -------
    >>> s = np.array([[1., 0.], [1., 1.], [0., 0.], [1., 0.]])
    >>> cv = threshold_sweep([0.9, 0.1, 0.5, 0.7], s, n_thresholds=2)
    >>> cv.strong_frac.tolist(), cv.qualities.tolist()
    ([0.0, 0.5, 1.0], [0.25, 0.75, 0.75])
    """
    qs, qw = _pair(scores, strong, weak)
    w = np.asarray(win_prob, dtype=np.float64).ravel()
    if w.shape[0] != qs.shape[0] or not np.isfinite(w).all():
        raise DataValidationError(f"win_prob must be {qs.shape[0]} finite values (one per query), got "
                                  f"shape {w.shape}", column="win_prob")
    if n_thresholds < 1:
        raise ValueError(f"n_thresholds must be >= 1, got {n_thresholds}")
    n = w.size
    t = np.quantile(w, np.linspace(0.0, 1.0, n_thresholds + 1))
    o = np.argsort(w, kind="stable")
    ws, gain = w[o], (qs - qw)[o]
    suffix = np.concatenate([np.cumsum(gain[::-1])[::-1], [0.0]])   # gain of ws[k:]
    first = np.searchsorted(ws, t, side="left")                     # w >= t  <=>  index >= first
    first[-1] = np.searchsorted(ws, t[-1], side="right")            # last edge: w > t
    frac = (n - first) / n
    qual = (qw.sum() + suffix[first]) / n
    order = np.argsort(frac, kind="stable")
    return ThresholdCurve(t[order], frac[order], qual[order])


@metric("apgr", "higher")
def apgr(strong_frac, qualities, weak_quality: float, strong_quality: float) -> float:
    """Average performance gap recovered:
    ``APGR = (AUC - q_weak * W) / (q_strong * W - q_weak * W)`` with
    ``AUC = trapz(qualities, strong_frac)`` and ``W = max(frac) - min(frac)``.

    NaN (undefined) unless the strong LLM beats the weak one on these queries
    (``q_strong > q_weak``, RouteLLM's premise): the pair is chosen by training means, and on
    a test set where it is inverted the ratio's sign flips, ranking the best routers last;
    means over folds or pool groups skip such cells.

    A curve point or quality that is not finite (NaN, inf) raises
    :class:`~recsys_router.errors.DataValidationError` (a ``ValueError``) naming the
    argument: a missing point would otherwise change the area silently.

    Example
    -------
    >>> apgr([0.0, 0.5, 1.0], [0.25, 0.75, 0.75], 0.25, 0.75)
    0.75
    >>> apgr([0.0, 1.0], [0.5, 0.4], 0.5, 0.4)  # the "strong" LLM is the worse one here
    nan
    """
    x, y = _sorted_curve(strong_frac, qualities)
    _finite_args(weak_quality=weak_quality, strong_quality=strong_quality)
    width = x[-1] - x[0]
    gap = (strong_quality - weak_quality) * width
    if not gap > 0:
        return float("nan")
    return float((np.trapezoid(y, x) - weak_quality * width) / gap)


DIRECTIONS["cpt50"] = DIRECTIONS["cpt80"] = "lower"


@metric("cpt", "lower")
def cpt(strong_frac, qualities, weak_quality: float, strong_quality: float, pgr: float = 0.5) -> float:
    """Call-performance threshold: the smallest fraction of strong calls ``x`` at which the
    piecewise-linear curve reaches ``q_weak + pgr * (q_strong - q_weak)``; NaN if never.
    "Reaches" allows float rounding of the target (:func:`~recsys_router.metrics.base.reaches`),
    so a curve point equal to the target is its first crossing. When the strong LLM does not
    beat the weak one on these queries the target is at most ``q_weak``, so every router
    reaches it with the weak LLM alone (0 when the curve starts at 0 strong calls).

    A curve point, quality or ``pgr`` that is not finite raises
    :class:`~recsys_router.errors.DataValidationError` (a ``ValueError``) naming the
    argument; NaN is kept for "never reached" (a crossing interpolated from a missing point
    would be invented).

    Example
    -------
    >>> cpt([0.0, 0.5, 1.0], [0.25, 0.75, 0.75], 0.25, 0.75, pgr=0.5)
    0.25
    >>> cpt([0.0, 1.0], [np.nan, 0.5], 0.2, 0.6)
    Traceback (most recent call last):
    ...
    recsys_router.errors.DataValidationError: column 'qualities': qualities[0] is nan; expected ...
    """
    x, y = _sorted_curve(strong_frac, qualities)
    _finite_args(weak_quality=weak_quality, strong_quality=strong_quality, pgr=pgr)
    target = weak_quality + pgr * (strong_quality - weak_quality)
    hit = reaches(y, target)
    if not hit.any():
        return float("nan")
    k = int(np.argmax(hit))
    if k == 0:
        return float(x[0])
    x0, x1, y0, y1 = x[k - 1], x[k], y[k - 1], y[k]
    return float(min(x1, x0 + (target - y0) * (x1 - x0) / (y1 - y0)))


def routellm_metrics(win_prob, scores: np.ndarray, strong: int = 0, weak: int = 1, *,
                     n_thresholds: int = 10) -> dict:
    """APGR, CPT(50%), CPT(80%) and the curve for a strong/weak router.

    Returns
    -------
    dict
        ``apgr``, ``cpt50``, ``cpt80`` (fractions of strong calls; NaN when unreached),
        ``weak_quality``, ``strong_quality``, ``curve`` (:class:`ThresholdCurve`).

    Example
    -------
    >>> s = np.array([[1., 0.], [1., 1.], [0., 0.], [1., 0.]])
    >>> r = routellm_metrics([0.9, 0.1, 0.5, 0.7], s, n_thresholds=2)
    >>> r["apgr"], r["cpt50"], r["cpt80"]
    (0.75, 0.25, 0.4)
    """
    qs, qw = _pair(scores, strong, weak)
    cv = threshold_sweep(win_prob, scores, strong, weak, n_thresholds=n_thresholds)
    wq, sq = float(qw.mean()), float(qs.mean())
    return {"apgr": apgr(cv.strong_frac, cv.qualities, wq, sq),
            "cpt50": cpt(cv.strong_frac, cv.qualities, wq, sq, 0.5),
            "cpt80": cpt(cv.strong_frac, cv.qualities, wq, sq, 0.8),
            "weak_quality": wq, "strong_quality": sq, "curve": cv}
