"""Off-policy evaluation of a target router on logged traffic: IPS, SNIPS, DM and DR.

Notation (one logged decision ``i`` of ``n``): the logging policy chose LLM ``a_i`` with
propensity ``p_i`` and the outcome ``r_i`` (score or cost) was observed; the target policy
chooses LLM ``j`` with probability ``pi_ij`` (one-hot for a deterministic router); a reward
model predicts ``q_ij`` for every LLM. With ``w_i = pi_{i a_i} / p_i``:

* IPS    ``V = (1/n) sum_i w_i r_i``                                  (direction: estimate)
* SNIPS  ``V = sum_i w_i r_i / sum_i w_i``
* DM     ``V = (1/n) sum_i sum_j pi_ij q_ij``
* DR     ``V = (1/n) sum_i [ sum_j pi_ij q_ij + w_i (r_i - q_{i a_i}) ]``

Each comes with a percentile bootstrap 95% interval over resampled decisions (a resample
where SNIPS is undefined, every weight 0, widens it rather than being dropped) and the
effective sample size ``ESS = (sum_i w_i)^2 / sum_i w_i^2`` of the importance weights. DM and
DR depend on a reward model fitted on the same log; given a ``refit(weights) -> q`` callable
(:mod:`recsys_router.feedback.reward`), :func:`estimate_all` refits it on each of ``n_refit``
resamples (the decision's weight = how often the resample drew it), so their intervals carry
the reward model's fitting variance; given only ``q``, the model is held fixed and the
intervals show the variance of the average alone (too narrow).

References: Horvitz & Thompson 1952 (IPS); Swaminathan & Joachims, "The Self-Normalized
Estimator for Counterfactual Learning", NeurIPS 2015 (SNIPS); Dudik, Langford & Li, "Doubly
Robust Policy Evaluation and Learning", ICML 2011 (DM, DR); Kong 1992 (ESS).
"""

from __future__ import annotations

import numpy as np

from .ope_inputs import (PROPENSITY_FLOOR, check_n_boot, check_propensities, check_q,
                         check_target_probs, row_sum_tolerance, whole_actions)

__all__ = ["ESTIMATORS", "PROPENSITY_FLOOR", "check_propensities", "check_n_boot",
           "importance_weights", "ips", "snips", "dm", "dr", "effective_sample_size",
           "estimate_all", "percentile_interval", "unsupported", "check_target_probs",
           "row_sum_tolerance", "SUPPORT_NOTE"]

#: what a support violation does to the estimators (the OPE report prints it)
SUPPORT_NOTE = ("the target chooses an LLM the logging policy could not have chosen there "
                "(logging probability 0), whose outcome the log never shows: IPS counts it as "
                "0, SNIPS leaves it out and DR takes the reward model's guess uncorrected, so "
                "all three are biased and their intervals do not show it (DM rests on its "
                "reward model everywhere)")

ESTIMATORS = ("ips", "snips", "dm", "dr")


def importance_weights(target_probs_logged, propensity) -> np.ndarray:
    """``w_i = pi(a_i | x_i) / p_i`` (target probability of the logged action over its
    logging propensity).

    Example
    -------
    >>> importance_weights([1.0, 0.0], [0.25, 0.5]).tolist()
    [4.0, 0.0]
    """
    return np.asarray(target_probs_logged, np.float64) / check_propensities(propensity)


def ips(r, w) -> float:
    """Inverse propensity scoring ``(1/n) sum w_i r_i``.

    Example
    -------
    >>> ips([1.0, 0.0, 1.0], [2.0, 0.0, 0.0])
    0.6666666666666666
    """
    r, w = np.asarray(r, np.float64), np.asarray(w, np.float64)
    return float(np.mean(w * r))


def snips(r, w) -> float:
    """Self-normalised IPS ``sum w_i r_i / sum w_i`` (NaN when every weight is 0).

    Example
    -------
    >>> snips([1.0, 0.0, 1.0], [2.0, 1.0, 0.0])
    0.6666666666666666
    """
    r, w = np.asarray(r, np.float64), np.asarray(w, np.float64)
    s = w.sum()
    return float((w * r).sum() / s) if s > 0 else float("nan")


def dm(q_target) -> float:
    """Direct method: mean over decisions of the reward model's value of the target's
    choice, ``q_target_i = sum_j pi_ij q_ij``.

    Example
    -------
    >>> dm([0.5, 1.0])
    0.75
    """
    return float(np.mean(np.asarray(q_target, np.float64)))


def dr(r, w, q_target, q_logged) -> float:
    """Doubly robust: ``(1/n) sum [q_target_i + w_i (r_i - q_logged_i)]``.

    Example
    -------
    >>> dr([1.0, 0.0], [2.0, 0.0], [0.5, 0.5], [0.5, 0.5])
    1.0
    """
    r, w = np.asarray(r, np.float64), np.asarray(w, np.float64)
    return float(np.mean(np.asarray(q_target, np.float64) + w * (r - np.asarray(q_logged, np.float64))))


def effective_sample_size(w) -> float:
    """Kish's effective sample size ``(sum w)^2 / sum w^2`` (0 when every weight is 0, NaN
    when one is not finite), computed on the weights divided by the largest, so squaring a
    large weight never overflows.

    Example
    -------
    >>> effective_sample_size([1.0, 1.0, 1.0, 1.0]), effective_sample_size([4.0, 0.0, 0.0, 0.0])
    (4.0, 1.0)
    """
    w = np.asarray(w, np.float64)
    if not np.isfinite(w).all():
        return float("nan")
    top = float(np.max(np.abs(w))) if w.size else 0.0
    if top == 0:
        return 0.0
    w = w / top     # the ratio is scale-free; scaled, no square overflows
    return float(w.sum() ** 2 / (w * w).sum())


def unsupported(target_probs, logged_action, propensity, logging_probs=None) -> np.ndarray:
    """Per decision, whether the target gives probability to an LLM that the logging policy
    gave probability 0 (a support violation: no importance weight can recover its outcome).

    ``logging_probs`` (n, L) are the logging policy's choice probabilities where known (a row
    of NaN: unknown). A decision logged with propensity 1 had a deterministic logger, so its
    logging probabilities are one-hot on the logged LLM even without ``logging_probs``; an
    unknown row of another decision counts as supported (it cannot be checked).

    Example
    -------
    >>> pi = np.array([[0.0, 1.0], [0.0, 1.0], [0.5, 0.5]])
    >>> unsupported(pi, [0, 1, 0], [1.0, 1.0, 0.5]).tolist()
    [True, False, False]
    >>> unsupported(pi, [0, 1, 0], [0.5, 1.0, 0.5], np.array([[1.0, 0.0], [0, 1], [1, 0]])).tolist()
    [True, False, True]
    """
    pi = np.asarray(target_probs, np.float64)
    n, L = pi.shape
    a = np.asarray(logged_action, np.int64)
    mu = np.full((n, L), np.nan) if logging_probs is None else np.asarray(logging_probs, np.float64)
    if mu.shape != (n, L):
        raise ValueError(f"logging probabilities have shape {mu.shape}, expected {(n, L)}")
    mu = mu.copy()
    unknown = np.isnan(mu).any(axis=1)
    det = unknown & (np.asarray(propensity, np.float64) == 1.0)
    mu[det] = 0.0
    mu[det, a[det]] = 1.0
    known = ~np.isnan(mu).any(axis=1)
    return known & ((pi > 0) & (np.nan_to_num(mu, nan=1.0) <= 0)).any(axis=1)


def _per_row(r, w, q_target, q_logged):
    """Per-decision terms whose (ratio of) means are the four estimators."""
    with np.errstate(over="ignore", invalid="ignore"):   # an overflow is refused by the caller
        terms = {"ips": (w * r, None), "snips": (w * r, w)}
        if q_target is not None:
            terms["dm"] = (q_target, None)
            terms["dr"] = (q_target + w * (r - q_logged), None)
    return terms


def estimate_all(r, propensity, target_probs, logged_action, q=None, *, n_boot: int = 200,
                 seed: int = 0, alpha: float = 0.05, refit=None, n_refit: int | None = None,
                 logging_probs=None) -> dict:
    """Every estimator's value, bootstrap interval and the effective sample size.

    Parameters
    ----------
    r : array (n,)
        Observed outcome of each logged decision.
    propensity : array (n,)
        Logging probability of the logged action, in [:data:`PROPENSITY_FLOOR`, 1] (1e-12:
        below it ``1 / p`` or its square overflows).
    target_probs : array (n, L)
        The target policy's choice probabilities (one-hot rows for a deterministic router):
        finite, in [0, 1], each row summing to 1 within 1e-9 (else a ValueError naming the row).
    logged_action : array of int (n,)
        Column of the logged LLM, ``0 <= a < L`` (another value, or one that is not a whole
        number, is an error naming its row; floats such as ``1.0`` are taken).
    q : array (n, L), optional
        Reward-model predictions of every LLM (DM and DR need it).
    n_boot : int
        Bootstrap resamples (seeded); 0 = no intervals.
    alpha : float
        1 - confidence of the percentile intervals, in (0, 1).
    refit : callable, optional
        ``refit(weights) -> q``: the reward model fitted with decision ``i`` counted
        ``weights[i]`` times, predicting (n, L) for every decision. With it, ``q`` defaults to
        ``refit(ones)`` and DM/DR's intervals refit the model on each resample.
    n_refit : int, optional
        How many of the ``n_boot`` resamples DM/DR refit on (default all): the cheaper
        honest variant when one fit is slow; their intervals come from those resamples.
    logging_probs : array (n, L), optional
        The logging policy's choice probabilities (rows of NaN: unknown), to count support
        violations (see :func:`unsupported`; without it only decisions logged with
        propensity 1 can be checked).

    Returns
    -------
    dict
        ``{name: {"value", "lo", "hi", "undefined_resamples"}}`` for ``ips``, ``snips``
        (and ``dm``, ``dr`` with ``q`` or ``refit``); ``undefined_resamples`` counts the
        bootstrap resamples where the estimator is undefined (SNIPS on a resample where the
        target agrees with no logged choice), which widen the interval (see
        :func:`percentile_interval`; past ``(n_boot - 1) alpha / 2`` of them ``lo`` and
        ``hi`` are NaN). Plus ``"ess"``, ``"n"``, ``"n_refit"`` (resamples DM/DR refitted
        on; 0 = reward model held fixed)
        and ``"unsupported"`` (decisions where the target may choose an LLM of logging
        probability 0: IPS, SNIPS and DR are then biased).

    Raises
    ------
    ValueError
        Bad inputs, naming the row: a propensity outside [:data:`PROPENSITY_FLOOR`, 1] or a
        boolean, an outcome that is not finite, a logged action outside the columns, target
        probabilities that are not distributions; and an estimate that would not be a finite
        number (an importance weight times an outcome past float64's range) rather than an
        inf or NaN in the output. SNIPS alone may be NaN: when the target agrees with no
        logged choice (every weight 0).

    Example
    -------
    >>> out = estimate_all([1.0, 0.0], [0.5, 0.5], np.array([[1.0, 0.0], [1.0, 0.0]]), [0, 1],
    ...                    n_boot=0)
    >>> out["ips"]["value"], out["snips"]["value"], out["ess"]
    (1.0, 1.0, 1.0)
    """
    check_n_boot(n_boot)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.integer, np.floating)) \
            or not 0 < alpha < 1:
        raise ValueError(f"alpha must be a number in (0, 1) (1 - the intervals' confidence), "
                         f"got {alpha!r}")
    r = np.asarray(r, np.float64)
    n = len(r)
    if n == 0:
        raise ValueError("no logged decisions to evaluate on")
    if not np.isfinite(r).all():
        raise ValueError(f"row {int(np.flatnonzero(~np.isfinite(r))[0])}: outcome is not a finite number")
    given = np.asarray(target_probs)
    pi = given.astype(np.float64)
    a = whole_actions(logged_action)
    prop = propensity if isinstance(propensity, np.ndarray) else \
        np.asarray(propensity, dtype=object)     # a list or Series keeps its booleans
    if pi.ndim != 2 or pi.shape[0] != n or a.shape != (n,) or prop.shape != (n,):
        raise ValueError(f"shapes disagree: {n} outcomes, target probabilities {pi.shape}, "
                         f"actions {a.shape}, propensities {prop.shape} (expected ({n},) "
                         f"actions and propensities and ({n}, L) target probabilities)")
    check_target_probs(given)      # its row-sum tolerance follows the given precision
    out_of_range = (a < 0) | (a >= pi.shape[1])
    if out_of_range.any():  # a negative index would silently wrap to the last column
        i = int(np.flatnonzero(out_of_range)[0])
        raise ValueError(f"row {i}: logged action {int(a[i])} is not a column of the "
                         f"{pi.shape[1]} LLMs (expected 0 <= action < {pi.shape[1]}; "
                         f"{int(out_of_range.sum())} rows out of range)")
    w = importance_weights(pi[np.arange(n), a], prop)
    if q is None and refit is not None:
        q = refit(np.ones(n))
    qt = ql = None
    if q is not None:
        q = check_q(q, pi.shape)
        qt, ql = (pi * q).sum(axis=1), q[np.arange(n), a]
    terms = _per_row(r, w, qt, ql)
    _check_terms(terms, r, w)
    out: dict = {"n": n, "ess": effective_sample_size(w), "n_refit": 0,
                 "unsupported": int(unsupported(pi, a, propensity, logging_probs).sum())}
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_boot, n)) if n_boot > 0 else None
    refitted = {}
    if refit is not None and idx is not None:
        k = n_boot if n_refit is None else int(n_refit)
        if not 1 <= k <= n_boot:
            raise ValueError(f"n_refit must be in [1, n_boot={n_boot}], got {n_refit!r}")
        refitted = _refit_boots(refit, idx[:k], pi, a, r, w)
        out["n_refit"] = k
    for name, (num, den) in terms.items():
        with np.errstate(over="ignore", invalid="ignore"):
            value = float(num.mean()) if den is None else (float(num.sum() / den.sum())
                                                           if den.sum() > 0 else float("nan"))
        if not np.isfinite(value) and (den is None or den.sum() > 0):
            raise _overflow(name, "estimate", num)
        lo = hi = float("nan")
        undefined = 0
        if name in refitted:
            boots = refitted[name]
            if not np.isfinite(boots).all():
                raise _overflow(name, "bootstrap resamples", num)
            lo, hi = (float(v) for v in np.quantile(boots, [alpha / 2, 1 - alpha / 2]))
        elif idx is not None:
            with np.errstate(over="ignore", invalid="ignore"):
                if den is None:
                    boots, defined = num[idx].mean(axis=1), np.ones(len(idx), dtype=bool)
                else:
                    d = den[idx].sum(axis=1)
                    defined = d > 0
                    boots = np.where(defined, num[idx].sum(axis=1) / np.where(defined, d, 1.0),
                                     np.nan)
            if not np.isfinite(boots[defined]).all():
                raise _overflow(name, "bootstrap resamples", num)
            lo, hi = percentile_interval(boots, defined, alpha)
            undefined = int((~defined).sum())
        out[name] = {"value": value, "lo": lo, "hi": hi, "undefined_resamples": undefined}
    return out


def percentile_interval(boots, defined, alpha: float) -> tuple[float, float]:
    """Percentile interval ``[alpha/2, 1 - alpha/2]`` of bootstrap values, honest about the
    resamples where the estimate is undefined (``defined`` False: SNIPS on a resample where
    the target agrees with no logged choice).

    Such a resample is counted, not dropped: the lower bound is taken as if every undefined
    resample fell below all defined ones, the upper bound as if above, so the interval is at
    least as wide as whatever values they could have had. When more than ``(B - 1) alpha / 2``
    of the ``B`` resamples are undefined a bound would fall on an undefined one, and the
    interval is undefined: ``(nan, nan)``. With every resample defined this is numpy's linear
    percentile.

    Example
    -------
    >>> b = np.array([0.1, 0.2, 0.3, 0.4, 0.0])
    >>> percentile_interval(b, np.ones(5, bool), 0.5)
    (0.1, 0.3)
    >>> percentile_interval(b, np.array([1, 1, 1, 1, 0], bool), 0.5)  # one undefined of 5
    (0.1, 0.4)
    >>> percentile_interval(b, np.array([1, 1, 1, 0, 0], bool), 0.5)
    (nan, nan)
    """
    boots, defined = np.asarray(boots, np.float64), np.asarray(defined, bool)
    u = int((~defined).sum())
    if u == 0:
        lo, hi = np.quantile(boots, [alpha / 2, 1 - alpha / 2])
        return float(lo), float(hi)
    B = len(boots)
    d = np.sort(boots[defined])
    lo_at = (B - 1) * (alpha / 2) - u    # position among the defined, undefined ones below
    hi_at = (B - 1) * (1 - alpha / 2)    # undefined ones above
    if lo_at < 0 or np.ceil(hi_at) > len(d) - 1:
        return float("nan"), float("nan")
    return _linear(d, lo_at), _linear(d, hi_at)


def _linear(d: np.ndarray, at: float) -> float:
    """Sorted ``d`` read at fractional position ``at`` (linear between neighbours)."""
    i = int(np.floor(at))
    j = min(i + 1, len(d) - 1)
    return float(d[i] + (d[j] - d[i]) * (at - i))


def _check_terms(terms: dict, r: np.ndarray, w: np.ndarray) -> None:
    """Every per-decision term finite, else a ValueError naming the first row that is not
    (an importance weight times an outcome past float64's range)."""
    for name, (num, _) in terms.items():
        bad = ~np.isfinite(num)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"row {i}: {name.upper()}'s term for this decision is not a finite "
                             f"number (importance weight {float(w[i])!r}, outcome {float(r[i])!r}): "
                             "the product overflows float64; rescale the outcomes")


def _overflow(name: str, what: str, num: np.ndarray) -> ValueError:
    """The error of an estimate whose finite per-decision terms sum past float64's range."""
    return ValueError(f"{name.upper()} {what}: the average of per-decision terms as large as "
                      f"{float(np.max(np.abs(num))):g} overflows float64; rescale the outcomes")


def _refit_boots(refit, idx, pi, a, r, w) -> dict:
    """DM and DR on each resample (rows of ``idx``) with the reward model refitted on it."""
    n = len(r)
    rows = np.arange(n)
    dm_b, dr_b = np.empty(len(idx)), np.empty(len(idx))
    for b, ix in enumerate(idx):
        counts = np.bincount(ix, minlength=n).astype(np.float64)
        qb = check_q(refit(counts), pi.shape)
        qt, ql = (pi * qb).sum(axis=1), qb[rows, a]
        dm_b[b] = counts @ qt / n
        dr_b[b] = counts @ (qt + w * (r - ql)) / n
    return {"dm": dm_b, "dr": dr_b}
