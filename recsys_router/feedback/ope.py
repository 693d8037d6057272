"""Off-policy evaluation of a target router on logged traffic: IPS, SNIPS, DM and DR.

Notation (one logged decision ``i`` of ``n``): the logging policy chose LLM ``a_i`` with
propensity ``p_i`` and the outcome ``r_i`` (score or cost) was observed; the target policy
chooses LLM ``j`` with probability ``pi_ij`` (one-hot for a deterministic router); a reward
model predicts ``q_ij`` for every LLM. With ``w_i = pi_{i a_i} / p_i``:

* IPS    ``V = (1/n) sum_i w_i r_i``                                  (direction: estimate)
* SNIPS  ``V = sum_i w_i r_i / sum_i w_i``
* DM     ``V = (1/n) sum_i sum_j pi_ij q_ij``
* DR     ``V = (1/n) sum_i [ sum_j pi_ij q_ij + w_i (r_i - q_{i a_i}) ]``

Each comes with a percentile bootstrap 95% interval over resampled decisions and the
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

__all__ = ["ESTIMATORS", "check_propensities", "importance_weights", "ips", "snips", "dm", "dr",
           "effective_sample_size", "estimate_all", "unsupported", "check_target_probs",
           "row_sum_tolerance", "SUPPORT_NOTE"]

#: what a support violation does to the estimators (the OPE report prints it)
SUPPORT_NOTE = ("the target chooses an LLM the logging policy could not have chosen there "
                "(logging probability 0), whose outcome the log never shows: IPS counts it as "
                "0, SNIPS leaves it out and DR takes the reward model's guess uncorrected, so "
                "all three are biased and their intervals do not show it (DM rests on its "
                "reward model everywhere)")

ESTIMATORS = ("ips", "snips", "dm", "dr")


def check_propensities(p, source: str = "log") -> np.ndarray:
    """Propensities as float64, each in (0, 1]; a clear error naming the first bad row.

    Example
    -------
    >>> check_propensities([0.5, 1.0]).tolist()
    [0.5, 1.0]
    """
    p = np.asarray(p, dtype=np.float64)
    bad = ~(np.isfinite(p) & (p > 0) & (p <= 1))
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{source}: row {r}: propensity {float(p[r])!r} must be in (0, 1] "
                         f"({int(bad.sum())} such rows); off-policy estimators and debiased "
                         "losses divide by it")
    return p


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
    """Kish's effective sample size ``(sum w)^2 / sum w^2`` (0 when every weight is 0).

    Example
    -------
    >>> effective_sample_size([1.0, 1.0, 1.0, 1.0]), effective_sample_size([4.0, 0.0, 0.0, 0.0])
    (4.0, 1.0)
    """
    w = np.asarray(w, np.float64)
    s2 = float((w * w).sum())
    return float(w.sum() ** 2 / s2) if s2 > 0 else 0.0


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
    terms = {"ips": (w * r, None), "snips": (w * r, w)}
    if q_target is not None:
        terms["dm"] = (q_target, None)
        terms["dr"] = (q_target + w * (r - q_logged), None)
    return terms


def _whole_actions(logged_action) -> np.ndarray:
    """Logged actions as int64; a value that is not a whole number (``1.7``, NaN, text) is
    an error naming its row, never truncated."""
    given = np.asarray(logged_action)
    if given.dtype.kind in "iu":
        return given.astype(np.int64)
    try:
        f = given.astype(np.float64)
    except (TypeError, ValueError):
        f = None
    ok = None if f is None or given.dtype.kind == "b" else np.isfinite(f) & (f == np.round(f))
    if ok is None or not ok.all():
        i = 0 if ok is None or given.ndim == 0 else int(np.flatnonzero(~ok.ravel())[0])
        shown = given.ravel()[i] if given.ndim else given
        shown = shown.item() if isinstance(shown, np.generic) else shown
        raise ValueError(f"row {i}: logged action {shown!r} is not a whole number (the column "
                         f"of the logged LLM)")
    return f.astype(np.int64)


def check_n_boot(n_boot) -> None:
    """``n_boot`` must be a whole number >= 0 (0: no intervals); a ValueError says so."""
    if isinstance(n_boot, bool) or not isinstance(n_boot, (int, np.integer)) or n_boot < 0:
        raise ValueError(f"n_boot must be a whole number >= 0 (0 = no intervals), got {n_boot!r}")


def estimate_all(r, propensity, target_probs, logged_action, q=None, *, n_boot: int = 200,
                 seed: int = 0, alpha: float = 0.05, refit=None, n_refit: int | None = None,
                 logging_probs=None) -> dict:
    """Every estimator's value, bootstrap interval and the effective sample size.

    Parameters
    ----------
    r : array (n,)
        Observed outcome of each logged decision.
    propensity : array (n,)
        Logging probability of the logged action, in (0, 1].
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
        ``{name: {"value", "lo", "hi"}}`` for ``ips``, ``snips`` (and ``dm``, ``dr`` with
        ``q`` or ``refit``), plus ``"ess"``, ``"n"``, ``"n_refit"`` (resamples DM/DR
        refitted on; 0 = reward model held fixed) and ``"unsupported"`` (decisions where the
        target may choose an LLM of logging probability 0: IPS, SNIPS and DR are then biased).

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
    a = _whole_actions(logged_action)
    prop = np.asarray(propensity)
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
        q = _check_q(q, pi.shape)
        qt, ql = (pi * q).sum(axis=1), q[np.arange(n), a]
    terms = _per_row(r, w, qt, ql)
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
        value = float(num.mean()) if den is None else (float(num.sum() / den.sum())
                                                       if den.sum() > 0 else float("nan"))
        lo = hi = float("nan")
        if name in refitted:
            boots = refitted[name]
            lo, hi = (float(v) for v in np.quantile(boots, [alpha / 2, 1 - alpha / 2]))
        elif idx is not None:
            if den is None:
                boots = num[idx].mean(axis=1)
            else:
                d = den[idx].sum(axis=1)
                boots = np.where(d > 0, num[idx].sum(axis=1) / np.where(d > 0, d, 1.0), np.nan)
            boots = boots[np.isfinite(boots)]
            if len(boots):
                lo, hi = (float(v) for v in np.quantile(boots, [alpha / 2, 1 - alpha / 2]))
        out[name] = {"value": value, "lo": lo, "hi": hi}
    return out


def row_sum_tolerance(dtype, n_cols: int) -> float:
    """How far from 1 a row of ``n_cols`` probabilities of ``dtype`` may sum from rounding
    alone: ``max(1e-9, 8 * n_cols * eps)`` with ``eps`` the dtype's machine epsilon (float64
    for a non-float dtype).

    Example
    -------
    >>> row_sum_tolerance(np.float64, 4)
    1e-09
    >>> row_sum_tolerance(np.float32, 10) == 80 * float(np.finfo(np.float32).eps)
    True
    """
    dt = np.dtype(dtype)
    eps = float(np.finfo(dt if np.issubdtype(dt, np.floating) else np.float64).eps)
    return max(1e-9, 8 * max(int(n_cols), 1) * eps)


def check_target_probs(pi, tol: float | None = None) -> None:
    """Target choice probabilities (n, L): finite, each in [0, 1], each row summing to 1
    within ``tol`` (by default :func:`row_sum_tolerance` of the given dtype and L, so a
    float32 softmax passes; sums are taken in float64); a ValueError names the first bad row.

    Example
    -------
    >>> check_target_probs(np.array([[0.25, 0.75], [1.0, 0.0]]))
    >>> check_target_probs(np.array([[3.0, 0.0]]))
    Traceback (most recent call last):
    ...
    ValueError: target probabilities: row 0: [3.0, 0.0] must be finite, each in [0, 1], summing to 1 (sum 3.0; 1 such rows)
    """
    given = np.asarray(pi)
    pi = given.astype(np.float64)
    if tol is None:
        tol = row_sum_tolerance(given.dtype, pi.shape[1] if pi.ndim == 2 else 1)
    with np.errstate(invalid="ignore"):
        total = pi.sum(axis=1)
        bad = ~(np.isfinite(pi).all(axis=1) & ((pi >= 0) & (pi <= 1)).all(axis=1)
                & (np.abs(total - 1.0) <= tol))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        row = pi[i].tolist()
        shown = str(row if len(row) <= 8 else row[:8] + ["..."])
        raise ValueError(f"target probabilities: row {i}: {shown} must be finite, each in [0, 1], "
                         f"summing to 1 (sum {float(total[i])!r}; {int(bad.sum())} such rows)")


def _check_q(q, shape) -> np.ndarray:
    q = np.asarray(q, np.float64)
    if q.shape != shape:
        raise ValueError(f"reward model predictions have shape {q.shape}, expected {shape}")
    if not np.isfinite(q).all():
        raise ValueError("reward model predictions are not all finite")
    return q


def _refit_boots(refit, idx, pi, a, r, w) -> dict:
    """DM and DR on each resample (rows of ``idx``) with the reward model refitted on it."""
    n = len(r)
    rows = np.arange(n)
    dm_b, dr_b = np.empty(len(idx)), np.empty(len(idx))
    for b, ix in enumerate(idx):
        counts = np.bincount(ix, minlength=n).astype(np.float64)
        qb = _check_q(refit(counts), pi.shape)
        qt, ql = (pi * qb).sum(axis=1), qb[rows, a]
        dm_b[b] = counts @ qt / n
        dr_b[b] = counts @ (qt + w * (r - ql)) / n
    return {"dm": dm_b, "dr": dr_b}
