"""Logistic regression per output column on soft [0, 1] targets (LinearR's ``loss="logistic"``,
RouterEval's BCE-trained linear router), fitted to convergence by full-batch L-BFGS."""

from __future__ import annotations

import numpy as np

__all__ = ["fit_logistic", "logit", "EPS"]

#: a constant 0 or 1 score is predicted as sigmoid(logit(EPS)), not exactly 0 or 1
EPS = 1e-9


def logit(p: np.ndarray) -> np.ndarray:
    """``log(p / (1 - p))`` with ``p`` clipped to ``[EPS, 1 - EPS]`` (finite for 0 and 1).

    Example
    -------
    >>> logit(np.array([0.5])).tolist()
    [0.0]
    """
    p = np.clip(p, EPS, 1.0 - EPS)
    return np.log(p) - np.log1p(-p)


def fit_logistic(x: np.ndarray, y: np.ndarray, mask: np.ndarray, alpha: float,
                 max_iter: int = 5000) -> tuple[np.ndarray, np.ndarray, bool]:
    """Per-column logistic regression on soft targets by full-batch L-BFGS.

    Minimises, for every column ``j`` independently, ``sum_i BCE(y_ij, x_i . w_j + b_j)``
    over the rows where ``mask`` is True, plus ``alpha / 2 * ||w_j||^2`` (the intercept is
    not penalised): scikit-learn's ``LogisticRegression(C=1/alpha)`` for 0/1 targets. The
    optimiser has no random part, so a fit is reproducible without a seed.

    Parameters
    ----------
    x : ndarray, shape (n, d)
    y : ndarray, shape (n, m)
        Targets in [0, 1] where ``mask`` is True (anything elsewhere).
    mask : ndarray of bool, shape (n, m)
        Every column must hold a target > 0 and a target < 1 (else no finite optimum).
    alpha : float
        Ridge penalty, > 0.
    max_iter : int
        L-BFGS iteration cap.

    Returns
    -------
    (coef, intercept, converged)
        Shapes (m, d) and (m,), and whether L-BFGS met its tolerance.

    Example
    -------
    >>> x = np.array([[0.0], [1.0], [2.0], [3.0]])
    >>> w, b, ok = fit_logistic(x, np.array([[0.0], [1.0], [0.0], [1.0]]), np.ones((4, 1), bool), 1.0)
    >>> ok, bool(w[0, 0] > 0)
    (True, True)
    """
    from scipy.optimize import minimize
    x = np.asarray(x, dtype=np.float64)
    mask = np.asarray(mask, dtype=bool)
    yy = np.where(mask, np.asarray(y, dtype=np.float64), 0.0)
    mf = mask.astype(np.float64)
    n, d = x.shape
    m = yy.shape[1]
    b0 = logit(yy.sum(axis=0) / mf.sum(axis=0))

    def objective(theta):
        w, b = theta[:m * d].reshape(m, d), theta[m * d:]
        z = x @ w.T + b
        value = float((mf * (np.logaddexp(0.0, z) - yy * z)).sum()) + 0.5 * alpha * float((w * w).sum())
        r = mf * (0.5 * (1.0 + np.tanh(0.5 * z)) - yy)  # sigmoid(z) - y, overflow-free
        grad = np.concatenate([(r.T @ x + alpha * w).ravel(), r.sum(axis=0)])
        return value, grad

    res = minimize(objective, np.concatenate([np.zeros(m * d), b0]), jac=True, method="L-BFGS-B",
                   options={"maxiter": int(max_iter), "ftol": 1e-15, "gtol": 1e-9 * max(1.0, n)})
    return res.x[:m * d].reshape(m, d), res.x[m * d:], bool(res.success)
