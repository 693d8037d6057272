"""Fitting one new LLM's parameters with everything else frozen (item cold start).

Scoring networks that support it expose ``llm_rows()`` (the trained pool's LLM-side
parameters, one row per LLM: MF/two-tower ``[vector, bias]``, MIRT/NIRT abilities ``theta``)
and ``score_rows(x, rows)`` (logits of query embeddings ``x`` against any such rows).

A new LLM's row is the MAP estimate under a Gaussian prior fitted to the rows of the trained
LLMs still in the pool (mean ``mu``, diagonal variance ``s2``; see
:meth:`LLMRowsMixin._prior_rows`), with the probe records as Bernoulli likelihood of
``sigmoid(logit)``::

    (r*, beta*) = argmin  sum_i v_i BCE(a (score_rows(x_i, r) + beta) + b, y_i)
                          + 1/2 sum_p (r_p - mu_p)^2 / s2_p

with probe weights ``v_i`` (mean 1; all 1 unless given), an unpenalised offset ``beta``
(stored as the row's last entry), so that, as for the intercept of a logistic regression,
the weighted mean predicted score on the probes equals the weighted probe mean at the
optimum (calibration in the large), and ``(a, b)`` the router's logit calibration (``(1, 0)``
for networks trained with a pointwise loss; the Lightning router's ``logit_calib_``, fitted
by :func:`fit_logit_calibration`, for listwise/pairwise ones, whose logits are not
probabilities);

i.e. MF/two-tower: the LLM vector fitted with the query tower frozen and regularised toward
the prior of LLM vectors; MIRT/NIRT: the ability estimated by MAP with item (query)
parameters fixed. References: Koren et al., "Matrix factorization techniques for
recommender systems" (2009) for fold-in; Polo et al., "tinyBenchmarks" (ICML 2024) and
Song et al., "IRT-Router" (ACL 2025) for IRT ability estimation from few items.

:class:`LLMRowsMixin` is the router side: ``add_llm`` / ``remove_llm`` of the Lightning
routers through these rows.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F
from scipy.special import expit

from recsys_router.models.components.item_prior import prior_of  # one rule for every router

if TYPE_CHECKING:  # pragma: no cover
    from recsys_router.data import RoutingData

__all__ = ["supports_rows", "fit_llm_row", "prior_of", "rows_logits", "LLMRowsMixin",
           "fit_logit_calibration", "calibrates", "ranking_calibration", "calibrated_sigmoid"]


def supports_rows(net) -> bool:
    """Whether ``net`` exposes ``llm_rows`` and ``score_rows``."""
    return callable(getattr(net, "llm_rows", None)) and callable(getattr(net, "score_rows", None))


@contextlib.contextmanager
def _frozen(net):
    flags = [p.requires_grad for p in net.parameters()]
    was_training = net.training
    net.eval()
    for p in net.parameters():
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p, f in zip(net.parameters(), flags):
            p.requires_grad_(f)
        net.train(was_training)


def rows_logits(net, x: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Logits (n, R) of embeddings ``x`` against fitted rows ``[parameters, offset]``."""
    rows = np.asarray(rows, np.float32)
    with torch.no_grad(), _frozen(net):
        out = net.score_rows(torch.as_tensor(np.asarray(x, np.float32)), torch.as_tensor(rows[:, :-1]))
    return out.double().numpy() + rows[:, -1].astype(np.float64)


def fit_llm_row(net, x: np.ndarray, y: np.ndarray, prior_rows: np.ndarray, *,
                weights: np.ndarray | None = None, calibration: tuple[float, float] = (1.0, 0.0),
                steps: int = 60) -> np.ndarray:
    """MAP row of a new LLM from probe embeddings ``x`` (n, D) and scores ``y`` in [0, 1],
    with optional probe ``weights`` (n,) and logit ``calibration`` ``(a, b)``.

    Returns
    -------
    ndarray float64 (P + 1,)
        The parameters then the offset ``beta``.
    """
    mu, s2 = prior_of(prior_rows)
    xt = torch.as_tensor(np.asarray(x, np.float32))
    yt = torch.as_tensor(np.clip(np.asarray(y, np.float64), 0.0, 1.0), dtype=torch.float32)
    wt = torch.ones_like(yt) if weights is None else torch.as_tensor(np.asarray(weights, np.float64),
                                                                      dtype=torch.float32)
    a, b = (float(c) for c in calibration)
    mu_t, prec = torch.as_tensor(mu, dtype=torch.float32), torch.as_tensor(1.0 / s2, dtype=torch.float32)
    r = mu_t.clone().requires_grad_(True)
    beta = torch.zeros(1, requires_grad=True)
    opt = torch.optim.LBFGS([r, beta], lr=1.0, max_iter=int(steps), line_search_fn="strong_wolfe")
    with _frozen(net):
        def closure():
            opt.zero_grad()
            logit = a * (net.score_rows(xt, r[None, :])[:, 0] + beta) + b
            loss = F.binary_cross_entropy_with_logits(logit, yt, weight=wt, reduction="sum") \
                + 0.5 * ((r - mu_t) ** 2 * prec).sum()
            loss.backward()
            return loss
        with torch.random.fork_rng():
            torch.manual_seed(0)
            opt.step(closure)
    out = np.append(r.detach().double().numpy(), float(beta.detach()))
    if not np.isfinite(out).all():
        raise ValueError("the new LLM's parameters diverged while fitting its probes")
    return out


class LLMRowsMixin:
    """Item cold start for a router whose fitted network ``net_`` exposes LLM rows:
    ``add_llm`` fits a new LLM's row (:func:`fit_llm_row`), ``remove_llm`` drops a column.

    State: ``added_llm_rows_`` (rows ``[parameters, offset]`` of LLMs added after training,
    or None) and ``kept_cols_`` (the pool's columns among trained + added ones, or None for
    all of them, in order). The router provides ``net_``, ``embed(data)`` and
    ``_check_fitted()``; its logits pass through :meth:`_with_added_llms`.

    Example
    -------
    >>> class Unfitted(LLMRowsMixin):
    ...     net_ = None
    >>> Unfitted().native_add_llm  # no network exposing LLM rows
    False
    """

    def _with_added_llms(self, out: np.ndarray, x: np.ndarray) -> np.ndarray:
        """The trained pool's logits ``out`` (n, trained) of embeddings ``x`` with the added
        LLMs' columns appended and the removed ones dropped."""
        added = getattr(self, "added_llm_rows_", None)
        if added is not None and len(added):
            out = np.hstack([out, rows_logits(self.net_, x, added).astype(out.dtype)])
        kept = getattr(self, "kept_cols_", None)
        return out if kept is None else out[:, kept]

    @property
    def native_add_llm(self) -> bool:
        """True when the network exposes LLM rows (MF, two-tower, MIRT, NIRT)."""
        return supports_rows(getattr(self, "net_", None))

    def llm_rows(self) -> np.ndarray:
        """The pool's LLM-side parameter rows (n_llms, P), added LLMs included (without their
        logit offset, see :mod:`~recsys_router.models.base.llm_rows`)."""
        self._check_fitted()
        with torch.no_grad():
            rows = self.net_.llm_rows().double().cpu().numpy()
        added = getattr(self, "added_llm_rows_", None)
        if added is not None and len(added):
            rows = np.vstack([rows, added[:, :-1]])
        kept = getattr(self, "kept_cols_", None)
        return rows if kept is None else rows[kept]

    def _add_llm(self, name: str, probes: RoutingData, cost: float, weights: np.ndarray) -> None:
        """MAP fit of the new LLM's row with the query side frozen, each probe's likelihood
        term weighted by its probe weight (see ``llm_rows`` module)."""
        y = probes.scores[:, 0]
        scale = getattr(self, "score_scale_", None)     # probes on the training targets' scale
        y = y if scale is None else scale.transform(y)
        calib = getattr(self, "logit_calib_", None)     # ranking losses: Platt-scaled logits
        self._append_llm_row(fit_llm_row(self.net_, self.embed(probes), y, self._prior_rows(),
                                         weights=weights,
                                         calibration=(1.0, 0.0) if calib is None else tuple(calib)))

    def _prior_rows(self) -> np.ndarray:
        """The rows the new LLM's prior is fitted to: those of the trained LLMs still in the
        pool (a removed LLM no longer shapes it; onboarded ones never do), or every row of
        the pool when no trained LLM is left (the rule of ALS/BPR's ``_fitted_columns``).
        Reads only ``net_``, ``added_llm_rows_`` and ``kept_cols_``, which an exported
        artifact stores, so a loaded router onboards as the one it was exported from."""
        with torch.no_grad():
            n_trained = int(self.net_.llm_rows().shape[0])
        rows = self.llm_rows()
        kept = getattr(self, "kept_cols_", None)
        cols = np.arange(len(rows)) if kept is None else np.asarray(kept)
        trained = cols < n_trained
        return rows[trained] if trained.any() else rows

    def _append_llm_row(self, row: np.ndarray) -> None:
        """Score a new last column from ``row`` = [LLM-side parameters, logit offset] (state
        reassigned, not mutated)."""
        with torch.no_grad():
            trained = self.net_.llm_rows()
        added = getattr(self, "added_llm_rows_", None)
        n_cols = len(trained) + (0 if added is None else len(added))
        kept = getattr(self, "kept_cols_", None)
        kept = np.arange(n_cols) if kept is None else np.asarray(kept)
        self.added_llm_rows_ = row[None, :] if added is None else np.vstack([added, row[None, :]])
        self.kept_cols_ = np.append(kept, n_cols).astype(np.int64)

    def _remove_llm(self, j: int) -> None:
        with torch.no_grad():
            n_trained = int(self.net_.llm_rows().shape[0])
        added = getattr(self, "added_llm_rows_", None)
        n_cols = n_trained + (0 if added is None else len(added))
        kept = getattr(self, "kept_cols_", None)
        kept = np.arange(n_cols) if kept is None else np.asarray(kept)
        col = int(kept[j])
        kept = np.delete(kept, j)
        if col >= n_trained:  # an added LLM: drop its row and renumber the later ones
            added = np.delete(added, col - n_trained, axis=0)
            kept = np.where(kept > col, kept - 1, kept)
        self.added_llm_rows_ = added if added is not None and len(added) else None
        full = np.arange(n_trained + (0 if self.added_llm_rows_ is None else len(self.added_llm_rows_)))
        self.kept_cols_ = None if np.array_equal(kept, full) else kept.astype(np.int64)


def calibrates(kind: str, net) -> bool:
    """Whether a network trained with loss ``kind`` gets a Platt map of its logits: a ranking
    loss (listwise, pairwise, utility), whose logits only rank the LLMs of a query, and a
    network exposing LLM rows (:func:`supports_rows`); pointwise losses (``bce``, ``mse``) make
    ``sigmoid(logit)`` a score. The rule of ``LightningRouter.logit_calib_`` and of validation.

    Example
    -------
    >>> calibrates("bce", None), calibrates("listwise", None)
    (False, False)
    """
    return kind not in ("bce", "mse") and supports_rows(net)


def ranking_calibration(kind: str, net, logits, scores: np.ndarray, *, seed: int) -> np.ndarray | None:
    """The Platt map ``[a, b]`` (:func:`fit_logit_calibration`) of ``net``'s logits on the
    training cells, or None where :func:`calibrates` says the network needs none.

    Parameters
    ----------
    kind, net : str, nn.Module
        The loss kind the network was trained with, and the trained network.
    logits : callable
        ``logits()`` returns the network's logits (n, L) of the training queries; called only
        when a map is fitted.
    scores : ndarray (n, L)
        The training targets (NaN: unobserved).
    seed : int
        Seed of the cell sample of a large training split.

    Returns
    -------
    ndarray float64 (2,) or None
    """
    if not calibrates(kind, net):
        return None
    return fit_logit_calibration(logits(), scores, seed=int(seed))


def calibrated_sigmoid(z: np.ndarray, calib: np.ndarray | None) -> np.ndarray:
    """Float64 scores ``sigmoid(a z + b)`` of logits ``z`` through a Platt map ``calib`` =
    ``[a, b]``, or ``sigmoid(z)`` when ``calib`` is None.

    Example
    -------
    >>> calibrated_sigmoid(np.array([0.0, 1.0]), np.array([2.0, -2.0])).tolist()
    [0.11920292202211755, 0.5]
    """
    z = np.asarray(z, dtype=np.float64)
    if calib is not None:
        z = calib[0] * z + calib[1]
    return expit(z)


def fit_logit_calibration(z: np.ndarray, y: np.ndarray, *, max_cells: int = 200_000,
                          seed: int = 0) -> np.ndarray:
    """Platt scaling ``(a, b)``: ``sigmoid(a z + b)`` fitted to targets ``y`` in [0, 1] by
    maximum likelihood (Newton's method on standardised logits, each step halved until the
    likelihood improves, so logits in a narrow band far from 0 fit too), over observed cells
    only (NaN targets skipped).

    Networks trained with a listwise or pairwise loss learn logits that only rank the LLMs of
    a query (a per-query shift leaves the loss unchanged), so ``sigmoid(logit)`` is not a
    score; one global map per router makes its scores, and those of an LLM added later
    (fitted in the calibrated space), comparable on the score scale. ``a`` is kept >= 1e-3 per
    standard deviation of the logits, so the map never reverses or flattens the ranking, and
    ``a z + b`` within [-700, 35] over the bulk (0.1% to 99.9% quantiles) of the fitted
    logits (``b`` refitted for a kept ``a``), where float64 sigmoids of distinct logits stay
    distinct (separable or constant targets would otherwise push the map to ties; constant
    targets keep the mean logit's score within 1e-6 of 0 or 1).

    Parameters
    ----------
    z, y : ndarray
        Logits and targets of the same shape.
    max_cells : int
        At most this many cells (a seeded sample) enter the fit.

    Returns
    -------
    ndarray float64 (2,)
        ``[a, b]``.

    Example
    -------
    >>> z = np.linspace(-3, 3, 61)
    >>> y = 1 / (1 + np.exp(-(2 * z - 1)))
    >>> np.round(fit_logit_calibration(z, y), 3).tolist()
    [2.0, -1.0]
    """
    z, y = np.asarray(z, np.float64).ravel(), np.asarray(y, np.float64).ravel()
    ok = np.isfinite(z) & np.isfinite(y)
    z, y = z[ok], np.clip(y[ok], 0.0, 1.0)
    if z.size < 2 or np.ptp(z) < 1e-12:
        return np.array([1.0, 0.0])
    if z.size > max_cells:
        pick = np.random.default_rng(seed).choice(z.size, size=max_cells, replace=False)
        z, y = z[pick], y[pick]
    # on standardised logits u (z and the intercept column are nearly collinear when the logits
    # sit in a narrow band away from 0, as a shift-free listwise loss may leave them)
    mu, sd = float(z.mean()), float(z.std())
    if not (np.isfinite(mu) and np.isfinite(sd) and sd > 0):
        return np.array([1.0, 0.0])
    u = (z - mu) / sd
    # the map keeps a' u + b' within [-700, 35] over the bulk of these logits (0.1%..99.9%: one
    # far-out cell may saturate, never flatten the others), where float64 sigmoids of distinct
    # logits stay distinct (past ~37 they are all exactly 1.0: tied LLMs), and a' >= 1e-3: it
    # never reverses or flattens the ranking; a tiny ridge on a' keeps separable targets
    # finite, and a slope past the range is shrunk (b refitted) until it fits
    u_lo, u_hi = (float(q) for q in np.quantile(u, [0.001, 0.999]))
    a, _ = _platt_newton(u, y, 1e-10 * len(u))
    a = max(a, 1e-3)
    # constant targets have no finite intercept: the mean logit's score within 1e-6 of 0 or 1
    b_lim = float(np.log((1 - 1e-6) / 1e-6)) if np.ptp(y) == 0 else np.inf
    b = None        # each pass starts from the previous pass's b (the same maximum)
    for _ in range(200):
        b = float(np.clip(_platt_intercept(u, y, a, b), -b_lim, b_lim))
        if a * u_hi + b <= 35.0 and a * u_lo + b >= -700.0:
            break
        a = max(a * 0.9, 1e-3)
    b = float(np.clip(b, -700.0 - a * u_lo, 35.0 - a * u_hi))
    theta = np.array([a / sd, b - a * mu / sd])
    return theta if np.isfinite(theta).all() else np.array([1.0, 0.0])


def _platt_nll(u, y, a, b, ridge=0.0) -> float:
    v = a * u + b
    return float(np.sum(np.logaddexp(0.0, v) - y * v) + 0.5 * ridge * a * a)


def _platt_newton(u: np.ndarray, y: np.ndarray, ridge: float) -> tuple[float, float]:
    """Minimise the ridge-penalised negative log-likelihood of ``sigmoid(a u + b)`` over
    ``(a, b)``: Newton steps halved until the objective improves, a gradient step where no
    Newton step does (a saturated start), from ``a = 1`` and ``b`` the mean target's logit."""
    m = float(np.clip(y.mean(), 1e-6, 1 - 1e-6))
    theta = np.array([1.0, np.log(m / (1 - m))])
    x = np.stack([u, np.ones_like(u)], axis=1)
    pen = np.array([ridge, 0.0])
    best = _platt_nll(u, y, *theta, ridge)
    for _ in range(200):
        p = expit(x @ theta)
        grad = x.T @ (p - y) + pen * theta
        hess = (x * (p * (1 - p))[:, None]).T @ x + np.diag(pen) + 1e-12 * np.eye(2)
        moved = False
        for direction in (np.linalg.solve(hess, grad), grad / max(1.0, float(np.abs(grad).max()))):
            t = 1.0
            while t > 1e-12:
                cand = theta - t * direction
                val = _platt_nll(u, y, *cand, ridge)
                if np.isfinite(val) and val < best:
                    theta, best, moved = cand, val, True
                    break
                t *= 0.5
            if moved:
                break
        if not moved or np.abs(grad).max() < 1e-9 * len(u):
            break
    return float(theta[0]), float(theta[1])


def _platt_intercept(u: np.ndarray, y: np.ndarray, a: float, b0: float | None = None) -> float:
    """The maximum-likelihood ``b`` of ``sigmoid(a u + b)`` for a fixed ``a`` (1-D Newton,
    halved steps) from ``b0`` (default: the mean target's logit), which should leave some
    sigmoids unsaturated, as the intercept of a nearby slope does: from a start where all
    saturate the Newton step overshoots and the halving may stall short of the maximum."""
    if b0 is None:
        m = float(np.clip(y.mean(), 1e-6, 1 - 1e-6))
        b0 = np.log(m / (1 - m))
    b = float(b0)
    best = _platt_nll(u, y, a, b)
    for _ in range(100):
        p = expit(a * u + b)
        g, h = float(np.sum(p - y)), float(np.sum(p * (1 - p))) + 1e-12
        t = 1.0
        while t > 1e-12:
            cand = b - t * g / h
            val = _platt_nll(u, y, a, cand)
            if np.isfinite(val) and val < best:
                b, best = cand, val
                break
            t *= 0.5
        else:
            break
        if abs(g) < 1e-9 * len(u):
            break
    return b
