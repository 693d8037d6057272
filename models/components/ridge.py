"""Ridge regression with an unpenalised intercept, and its penalty chosen by exact
leave-one-out error.

Reference
---------
Hastie, Tibshirani & Friedman, *The Elements of Statistical Learning*, 2nd ed., 2009,
sections 3.4.1 (ridge via the SVD) and 7.10 (the leave-one-out shortcut for linear
smoothers): for a fit ``y_hat = H y``, the leave-one-out residual of row ``i`` is
``(y_i - y_hat_i) / (1 - H_ii)``, exactly, without refitting.

Used by the implicit-feedback routers (``als``, ``bpr``) to map query embeddings to query
factors.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["unit_rows", "ridge", "ridge_loo", "LOO_GRID"]

#: penalties tried by :func:`ridge_loo` (inputs are standardised, so the scale of ``x`` is fixed)
LOO_GRID = tuple(10.0 ** k for k in range(-2, 8))


def unit_rows(x: np.ndarray) -> np.ndarray:
    """Rows scaled to unit Euclidean norm (an all-zero row stays zero)."""
    return x / (np.linalg.norm(x, axis=1, keepdims=True) + 1e-12)


def ridge(x: np.ndarray, y: np.ndarray, lam: float) -> np.ndarray:
    """Ridge coefficients with an unpenalised intercept (last row), shape ``(d + 1, t)``.

    Minimises ``||y - x W - 1 b||^2 + lam ||W||^2``.

    Example
    -------
    >>> ridge(np.array([[0.0], [1.0], [2.0]]), np.array([[1.0], [3.0], [5.0]]), 0.0).ravel()
    array([2., 1.])
    """
    xb = np.hstack([x, np.ones((len(x), 1))])
    pen = lam * np.eye(xb.shape[1])
    pen[-1, -1] = 0.0
    return np.linalg.solve(xb.T @ xb + pen, xb.T @ y)


def ridge_loo(x: np.ndarray, y: np.ndarray, grid: Sequence[float] = LOO_GRID):
    """:func:`ridge` with ``lam`` from ``grid`` minimising the exact leave-one-out squared error.

    Parameters
    ----------
    x : ndarray (n, d)
    y : ndarray (n, t), finite
    grid : sequence of float > 0
        Candidate penalties; ties go to the larger one.

    Returns
    -------
    coef : ndarray (d + 1, t)
        Fitted on all ``n`` rows with the chosen penalty (intercept last).
    lam : float
        The chosen penalty.
    loo_pred : ndarray (n, t)
        Row ``i``'s prediction from the fit without row ``i`` (same penalty).

    Example
    -------
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(50, 3)); y = x @ np.ones((3, 1)) + rng.normal(0, 0.1, (50, 1))
    >>> coef, lam, loo = ridge_loo(x, y)
    >>> lam <= 1.0, loo.shape
    (True, (50, 1))
    """
    grid = [float(g) for g in grid]
    if not grid or any(not np.isfinite(g) or g <= 0 for g in grid):
        raise ValueError(f"ridge penalties must be finite numbers > 0, got {grid!r}")
    n = len(x)
    if n < 3:
        raise ValueError(f"leave-one-out needs at least 3 rows, got {n}")
    xm, ym = x.mean(0), y.mean(0)
    xc, yc = x - xm, y - ym
    u, s, vt = np.linalg.svd(xc, full_matrices=False)
    uty = u.T @ yc
    best = None
    for lam in sorted(grid, reverse=True):
        d = s ** 2 / (s ** 2 + lam)
        fit = u @ (d[:, None] * uty)
        hat = (u ** 2 * d).sum(1) + 1.0 / n          # leverage, the intercept included
        resid = (yc - fit) / np.maximum(1.0 - hat, 1e-12)[:, None]
        err = float(np.mean(resid ** 2))
        if best is None or err < best[0] - 1e-15:
            best = (err, lam, y - resid)
    _, lam, loo_pred = best
    return ridge(x, y, lam), lam, loo_pred
