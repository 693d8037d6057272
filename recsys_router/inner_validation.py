"""Inner validation on the training queries: seeded task-stratified splits, the realised
score of a router's choices, and the paired comparison the safe fallback decides with.

Used by :mod:`recsys_router.fallback`, ``evaluate --auto`` (:mod:`recsys_router.tuning.inner`)
and ``knn``'s choice of ``k``; nothing here sees test queries.

Reference: the paired comparison is the one-sided paired z-test on per-query differences
(e.g. Dror et al., "The Hitchhiker's Guide to Testing Statistical Significance in Natural
Language Processing", ACL 2018, section 3).
"""

from __future__ import annotations

import math

import numpy as np

from .policies import argmax_policy

__all__ = ["check_z", "check_inner_folds", "task_keys", "group_rows", "group_means",
           "stratified_holdout",
           "stratified_folds", "realised_scores", "paired_decision", "inner_splits", "DECISIONS",
           "AUTO_INNER_FOLDS", "MAX_INNER_FOLDS"]

#: what can decide a query's LLM under the safe fallback
DECISIONS = ("router", "best-single", "task-best")
#: inner folds that ``inner_folds="auto"`` gives a router whose fit is cheap (``cheap_fit``),
#: in the safe fallback and in the ``--auto`` search
AUTO_INNER_FOLDS = 5
#: the most inner folds a stored or given setting may ask for
MAX_INNER_FOLDS = 20


def check_inner_folds(value, name: str = "inner_folds", auto: bool = True) -> int:
    """An ``inner_folds`` setting (or, with ``auto=False``, a stored resolved count) checked:
    its number of folds, or 0 for ``"auto"``. Used by the safe fallback and the ``--auto``
    search alike.

    Raises
    ------
    ValueError
        Naming the setting (``name``) and what it accepts.

    Example
    -------
    >>> check_inner_folds("auto"), check_inner_folds(5)
    (0, 5)
    >>> check_inner_folds(MAX_INNER_FOLDS + 1)
    Traceback (most recent call last):
    ...
    ValueError: inner_folds: expected 'auto' or an integer in [1, 20], got '21'
    """
    if auto and isinstance(value, str) and value == "auto":
        return 0
    if (isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer))
            or not 1 <= value <= MAX_INNER_FOLDS):
        accepted = "'auto' or an integer" if auto else "an integer"
        raise ValueError(f"{name}: expected {accepted} in [1, {MAX_INNER_FOLDS}], "
                         f"got {str(value)[:40]!r}")
    return int(value)


def task_keys(tasks) -> np.ndarray:
    """Task labels as strings ("" for a missing one)."""
    return np.array(["" if t is None or (isinstance(t, float) and np.isnan(t)) else str(t)
                     for t in tasks], dtype=object)


def group_rows(keys) -> tuple[list, list[np.ndarray]]:
    """The sorted distinct labels of ``keys`` and, per label, its row indices (ascending).

    One sort instead of one scan per label: O(n log n) for any number of labels, where
    ``[np.flatnonzero(keys == t) for t in sorted(set(keys))]`` is O(labels x n).

    Example
    -------
    >>> labels, rows = group_rows(np.array(["b", "a", "b", ""], dtype=object))
    >>> labels, [r.tolist() for r in rows]
    (['', 'a', 'b'], [[3], [1], [0, 2]])
    """
    keys = np.asarray(keys, dtype=object)
    if len(keys) == 0:
        return [], []
    labels, inverse = np.unique(keys, return_inverse=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(inverse, kind="stable")
    ends = np.cumsum(np.bincount(inverse, minlength=len(labels)))
    return labels.tolist(), np.split(order, ends[:-1])


def group_means(values: np.ndarray, groups: np.ndarray, n_groups: int,
                fallback: np.ndarray) -> np.ndarray:
    """Mean of the observed (non-NaN) values per (group, column); ``fallback[j]`` where a
    group has no observed value in column ``j``.

    Sums are taken per column with ``np.bincount``: O(n x columns) time and memory, however
    many groups there are.

    Parameters
    ----------
    values : ndarray (n, m)
        NaN = not observed.
    groups : ndarray of int (n,)
        Group id in ``[0, n_groups)`` per row.
    n_groups : int
    fallback : ndarray (m,)

    Returns
    -------
    ndarray (n_groups, m)

    Example
    -------
    >>> group_means(np.array([[1.0, np.nan], [0.0, 2.0], [3.0, np.nan]]),
    ...             np.array([0, 0, 1]), 2, np.array([9.0, 9.0])).tolist()
    [[0.5, 2.0], [3.0, 9.0]]
    """
    v = np.asarray(values, dtype=np.float64)
    g = np.asarray(groups, dtype=np.int64)
    ok = ~np.isnan(v)
    filled = np.where(ok, v, 0.0)
    tot = np.zeros((int(n_groups), v.shape[1]))
    cnt = np.zeros((int(n_groups), v.shape[1]))
    for j in range(v.shape[1]):
        tot[:, j] = np.bincount(g, weights=filled[:, j], minlength=int(n_groups))
        cnt[:, j] = np.bincount(g, weights=ok[:, j], minlength=int(n_groups))
    return np.where(cnt > 0, tot / np.maximum(cnt, 1.0), np.broadcast_to(fallback, tot.shape))


def stratified_holdout(tasks, fraction: float, seed: int,
                       pool_small: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Seeded split of query rows into (inner-train, inner-validation), the same share of
    every task in each part (a task with one query stays in inner-train).

    A task whose own share rounds to no query (two queries at ``fraction`` < 0.25) holds out
    none, unless ``pool_small``: then such tasks are pooled and ``round(fraction * pooled
    queries)`` of them (at most one per task, so each keeps a query in inner-train; the
    tasks taken in a seeded order) hold out one query each. Without it, data made only of
    two-query tasks would hold out nothing.

    Parameters
    ----------
    tasks : sequence
        Task label per query (None/NaN = no task; those form one group).
    fraction : float
        Share held out, in (0, 1).
    seed : int
    pool_small : bool
        Pool the tasks whose own share rounds to no query (above); the split is otherwise
        the same.

    Returns
    -------
    (ndarray, ndarray)
        Sorted row indices of inner-train and inner-validation.

    Example
    -------
    >>> tr, va = stratified_holdout(["a"] * 10, 0.2, 0)
    >>> len(tr), len(va)
    (8, 2)
    >>> pairs = [f"t{i // 2}" for i in range(20)]          # 10 tasks of two queries
    >>> [len(stratified_holdout(pairs, 0.2, 0, pool)[1]) for pool in (False, True)]
    [0, 4]
    """
    if not 0 < fraction < 1:
        raise ValueError(f"validation fraction must be in (0, 1), got {fraction!r}")
    rng = np.random.default_rng(seed)
    keys = task_keys(tasks)
    val, small = [], []
    for rows in group_rows(keys)[1]:
        if len(rows) < 2:
            continue
        n_val = min(max(int(round(fraction * len(rows))), 1 if len(rows) >= 5 else 0),
                    len(rows) - 1)
        order = rng.permutation(rows)
        val.extend(order[:n_val])
        if n_val == 0:
            small.append((len(rows), order[0]))
    if pool_small and small:        # drawn after the tasks: their own splits are unchanged
        n_pool = min(int(round(fraction * sum(n for n, _ in small))), len(small))
        val.extend(small[i][1] for i in rng.permutation(len(small))[:n_pool])
    val = np.sort(np.asarray(val, dtype=np.int64))
    train = np.setdiff1d(np.arange(len(keys)), val)
    return train, val


def stratified_folds(tasks, k: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Seeded ``k``-fold split of query rows, each task dealt round-robin over the folds
    after a shuffle, so every query is held out exactly once.

    Parameters
    ----------
    tasks : sequence
        Task label per query.
    k : int
        Number of folds, >= 2.
    seed : int

    Returns
    -------
    list of (ndarray, ndarray)
        ``(inner-train rows, inner-validation rows)`` per fold.

    Example
    -------
    >>> folds = stratified_folds(["a"] * 6 + ["b"] * 4, 2, 0)
    >>> [len(va) for _, va in folds], sorted(np.concatenate([va for _, va in folds]).tolist())
    ([5, 5], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    """
    if int(k) != k or k < 2:
        raise ValueError(f"the number of inner folds must be an integer >= 2, got {k!r}")
    rng = np.random.default_rng(seed)
    keys = task_keys(tasks)
    fold_of = np.empty(len(keys), dtype=np.int64)
    offset = 0
    for rows in group_rows(keys)[1]:
        rows = rng.permutation(rows)
        fold_of[rows] = (np.arange(len(rows)) + offset) % k
        offset += len(rows)        # the next task starts where this one stopped: balanced
    return [(np.flatnonzero(fold_of != f), np.flatnonzero(fold_of == f)) for f in range(int(k))]


def inner_splits(tasks, k: int, fraction: float, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """The inner validation's ``(inner-train rows, held-out rows)``: one
    :func:`stratified_holdout` of ``fraction`` when ``k == 1`` (tasks too small for a share
    of their own pooled, ``pool_small``), else :func:`stratified_folds`.

    Example
    -------
    >>> [len(va) for _, va in inner_splits(["a"] * 10, 1, 0.2, 0)]
    [2]
    >>> [len(va) for _, va in inner_splits(["a"] * 10, 5, 0.2, 0)]
    [2, 2, 2, 2, 2]
    """
    if k == 1:
        return [stratified_holdout(tasks, float(fraction), int(seed), pool_small=True)]
    return stratified_folds(tasks, k, int(seed))


def realised_scores(pred: np.ndarray, truth: np.ndarray,
                    costs: np.ndarray | None = None) -> np.ndarray:
    """True score of the LLM that routing picks among each query's observed LLMs.

    The choice is the evaluation's and :meth:`Router.route`'s: among the observed LLMs
    (what :func:`~recsys_router.candidate_masks.mask_predictions` leaves routing),
    :func:`~recsys_router.policies.argmax_policy` takes the highest prediction, the cheapest
    predicted cost among ties (then the lowest column).

    Parameters
    ----------
    pred, truth : ndarray (n, L)
        Predicted scores; true scores with NaN = unobserved.
    costs : ndarray (n, L), optional
        Predicted costs, used only to break ties (as routing does); None: the lowest column.

    Returns
    -------
    ndarray (n,)
        NaN for a query without any observed LLM.

    Example
    -------
    >>> realised_scores(np.array([[0.9, 0.5, 0.1]]), np.array([[np.nan, 0.0, 1.0]])).tolist()
    [0.0]
    >>> realised_scores(np.array([[0.5, 0.5]]), np.array([[1.0, 0.0]]),
    ...                 costs=np.array([[2.0, 1.0]])).tolist()
    [0.0]
    """
    truth = np.asarray(truth, dtype=np.float64)
    obs = ~np.isnan(truth)
    out = np.full(len(truth), np.nan)
    rows = np.flatnonzero(obs.any(axis=1))
    if len(rows) == len(truth):  # the usual case: no row copies
        out[:] = truth[rows, argmax_policy(pred, costs, mask=obs)]
    elif len(rows):
        # the mask restricts the choice (and its cost tie-break) to the observed LLMs, as
        # mask_predictions does for routing
        choice = argmax_policy(np.asarray(pred)[rows],
                               None if costs is None else np.asarray(costs)[rows], mask=obs[rows])
        out[rows] = truth[rows, choice]
    return out


def check_z(value, name: str, signed: bool = False) -> float:
    """``value`` as a float standard-error count, or a one-line error naming ``name``
    (``signed``: any finite number, else >= 0)."""
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if not ok or not np.isfinite(float(value)) or (not signed and float(value) < 0):
        raise ValueError(f"{name} must be a finite number{'' if signed else ' >= 0'}, "
                         f"got {value!r}")
    return float(value)


def _mean_se(d: np.ndarray) -> tuple[float, float | None]:
    """Mean and standard error (ddof 1; None for one value) of paired differences."""
    return float(d.mean()), (float(d.std(ddof=1) / math.sqrt(len(d))) if len(d) > 1 else None)


def paired_decision(router, best_single, task_best, z: float,
                    prefer: str = "best-single", z_keep: float | None = None) -> dict | None:
    r"""Keep the router unless a baseline beats it by more than ``z_keep`` standard errors.

    On the queries where all three realised scores are known, :math:`SE = s / \sqrt{n}` of
    paired per-query differences (``s`` their sample standard deviation, ddof 1) and the
    same one-sided paired z-test at level ``z`` decide twice:

    1. *Which baseline*: ``prefer`` unless the other beats it beyond the noise,
       :math:`\bar e > z \cdot SE_e` with :math:`e_i` the other's realised score minus
       ``prefer``'s. The default ``prefer="best-single"``: it estimates one LLM from all
       queries where ``task-best`` estimates one per task from a part of them, so a lead
       within the noise is more often the per-task choice's luck than a better LLM. (The
       safe fallback passes a task the all-queries choice as ``prefer``.)
    2. *Router or baseline*: with ``d_i = r_i - (baseline)_i``, the decision is the baseline
       when :math:`\bar d < -z_{keep} \cdot SE` (``z_keep`` defaults to ``z``; with
       ``z_keep=0`` the router must not lose on the mean, with ``z_keep < 0`` it must lead
       by :math:`|z_{keep}|` SE; with one query there is no SE, stored as None, and the
       router is kept unless ``z_keep <= 0`` and it does not lead as required), else
       ``"router"``; ``router_better`` is the test in the other direction,
       :math:`\bar d > z \cdot SE`.

    Parameters
    ----------
    router, best_single, task_best : array-like (n,)
        Realised score per held-out query of the three choices (NaN = unknown).
    z : float
        Standard errors a lead must exceed (1.645: one-sided 5 %).
    prefer : {"best-single", "task-best"}
        The baseline kept unless the other one leads it beyond the noise.
    z_keep : float, optional
        Standard errors by which the baseline must beat the router to take its queries
        (default ``z``; 0: whenever the baseline's mean is higher; negative: unless the
        router leads by ``-z_keep`` standard errors).

    Returns
    -------
    dict or None
        ``decision``, ``router_better``, the three means, ``baseline``, ``diff``
        (:math:`\bar d`), ``se``, ``n`` and ``task_vs_single`` (task-best's mean realised
        score minus best-single's) with its ``task_vs_single_se``; None when no query has
        all three scores.

    Example
    -------
    >>> out = paired_decision([0, 1, 1, 1], [1, 1, 1, 1], [0, 0, 1, 1], z=1.645)
    >>> out["baseline"], out["diff"], round(out["se"], 3), out["decision"]
    ('best-single', -0.25, 0.25, 'router')
    """
    r, b, t = (np.asarray(x, dtype=np.float64).ravel() for x in (router, best_single, task_best))
    ok = np.isfinite(r) & np.isfinite(b) & np.isfinite(t)
    n = int(ok.sum())
    if n == 0:
        return None
    r, b, t = r[ok], b[ok], t[ok]
    means = {"router": float(r.mean()), "best-single": float(b.mean()),
             "task-best": float(t.mean())}
    if prefer not in ("best-single", "task-best"):
        raise ValueError(f"prefer must be 'best-single' or 'task-best', got {prefer!r}")
    e, e_se = _mean_se(t - b)
    lead = e if prefer == "best-single" else -e
    other = "task-best" if prefer == "best-single" else "best-single"
    base = other if e_se is not None and lead > float(z) * e_se else prefer
    diff, se = _mean_se(r - (b if base == "best-single" else t))
    zk = float(z) if z_keep is None else check_z(z_keep, "z_keep", signed=True)
    if se is not None:
        loses = diff < -zk * se
    else:   # one query: only z_keep <= 0 falls back, on a loss (or a tie, when a lead is asked)
        loses = zk <= 0 and (diff <= 0 if zk < 0 else diff < 0)
    decision = base if loses else "router"
    better = se is not None and diff > float(z) * se
    return {**means, "baseline": base, "diff": diff, "se": se, "n": n, "decision": decision,
            "router_better": bool(better), "task_vs_single": e, "task_vs_single_se": e_se}
