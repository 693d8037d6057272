"""A new item's factor and score calibration from a few probes, shrunk toward the pool.

Item cold start for factor models: an LLM added to a fitted router has only a handful of
probe answers, fewer than (or about as many as) its latent dimensions. Fitting its
parameters by least squares alone over-fits those probes (scores far off the scale,
routing worse than without the LLM), so each estimate is the MAP under a prior fitted to
the LLMs already in the pool: a Gaussian over LLM rows (:func:`prior_of`, the rule the
Lightning routers use too) and, for routers with a per-LLM linear score calibration, a
Gaussian over the calibration slopes (:func:`shrunk_linear`). The prior's weight is fixed
while the probes' terms add up, so it matters less as the probe count grows; with no
informative probe the estimate is the prior mean.

Reference: Koren, Bell & Volinsky, "Matrix factorization techniques for recommender systems"
(2009), fold-in; Bishop, *Pattern Recognition and Machine Learning* (2006), section 3.3
(the posterior mean of a linear model under a Gaussian prior).
"""

from __future__ import annotations

import numpy as np

__all__ = ["prior_of", "fold_in_item", "noise_variance", "shrunk_linear", "MIN_NOISE_VAR",
           "MAX_NOISE_VAR"]

#: the smallest noise variance the fold-in takes (0 or a subnormal drops the prior and
#: leaves a singular or ill-conditioned system; a fitted estimate is kept above it)
MIN_NOISE_VAR = 1e-12
#: the largest: the preferences are 0/1, so the estimate is a confidence-weighted mean of
#: squared residuals of 0/1 values; it reaches 1e6 only with confidences
#: (``1 + alpha * s``, times an importance weight at most the propensity clip) or residuals
#: in the thousands, and far before it the prior outweighs any realistic probe set (the
#: fold-in returns the pool's mean factor). A larger value is clamped at fit time and
#: refused in a stored artifact.
MAX_NOISE_VAR = 1e6


def prior_of(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and diagonal variance of the existing LLM rows; each variance is floored at the
    mean variance over dimensions (a few LLMs estimate it poorly) and at 1e-4.

    Example
    -------
    >>> m, v = prior_of(np.array([[0.0, 1.0], [2.0, 1.0]]))
    >>> m.tolist(), v.tolist()
    ([1.0, 1.0], [1.0, 0.5])
    """
    rows = np.asarray(rows, dtype=np.float64)
    var = rows.var(axis=0)
    return rows.mean(axis=0), np.maximum(var, max(float(var.mean()), 1e-4))


def fold_in_item(x: np.ndarray, pref: np.ndarray, conf: np.ndarray, weights: np.ndarray,
                 prior_mean: np.ndarray, prior_var: np.ndarray, noise_var: float = 1.0) -> np.ndarray:
    """MAP item factor of the weighted implicit-feedback least squares (Hu et al. 2008)::

        v = argmin  sum_i w_i c_i (p_i - x_i . v)^2 / sigma2 + sum_f (v_f - m_f)^2 / s2_f

    with query factors ``x`` (n, F) fixed, preferences ``p`` (0/1), confidences ``c``, probe
    weights ``w`` and the prior ``N(m, diag(s2))`` of the pool's items (:func:`prior_of`;
    ALS's own ``regularization`` is the prior ``N(0, I / regularization)`` at
    ``sigma2 = 1``). ``noise_var`` is ``sigma2`` (:func:`noise_variance`). Closed form:
    ``(X^T W C X + sigma2 S^-1) v = X^T W C p + sigma2 S^-1 m``.

    Example
    -------
    >>> m, s2 = np.array([0.5, -0.5]), np.array([1.0, 1.0])
    >>> fold_in_item(np.zeros((3, 2)), np.ones(3), np.ones(3), np.ones(3), m, s2).tolist()
    [0.5, -0.5]
    """
    noise_var = float(noise_var)
    if not (np.isfinite(noise_var) and MIN_NOISE_VAR <= noise_var <= MAX_NOISE_VAR):
        raise ValueError(f"noise_var must be finite and in [{MIN_NOISE_VAR:g}, {MAX_NOISE_VAR:g}], "
                         f"got {noise_var!r}")
    x = np.asarray(x, np.float64)
    wc = np.asarray(weights, np.float64) * np.asarray(conf, np.float64)
    prec = noise_var / np.asarray(prior_var, np.float64)
    a = x.T @ (wc[:, None] * x) + np.diag(prec)
    b = x.T @ (wc * np.asarray(pref, np.float64)) + prec * np.asarray(prior_mean, np.float64)
    return np.linalg.solve(a, b)


def noise_variance(conf, x: np.ndarray, item_factors: np.ndarray) -> float:
    """Maximum-likelihood noise variance of ALS's model ``p_ui ~ N(x_u . y_i, sigma2 / c_ui)``
    over every cell of the confidence matrix ``conf`` (scipy sparse, queries x items:
    positive cells store ``c_ui`` with ``p_ui = 1``; the others are ``p = 0``, ``c = 1``)::

        sigma2 = sum_ui c_ui (p_ui - x_u . y_i)^2 / (n_queries * n_items)

    computed without the dense matrix (``sum_ui (x_u . y_i)^2 = trace(X'X Y'Y)``). With the
    queries' leave-one-out folded-in factors as ``x`` it is the noise a new query's factor
    sees: near the preferences' variance when the text predicts nothing. Kept in
    [:data:`MIN_NOISE_VAR`, :data:`MAX_NOISE_VAR`] (a perfect fit would otherwise give 0,
    which the fold-in refuses; the upper end is what a stored artifact may hold).

    Example
    -------
    >>> from scipy import sparse
    >>> c = sparse.csr_matrix(np.array([[3.0, 0.0], [0.0, 0.0]]))
    >>> noise_variance(c, np.zeros((2, 1)), np.ones((2, 1)))   # 3 * 1^2 / 4
    0.75
    """
    x, y = np.asarray(x, np.float64), np.asarray(item_factors, np.float64)
    m = conf.tocoo()
    r = np.einsum("ij,ij->i", x[m.row], y[m.col])
    c = m.data.astype(np.float64)
    total = float(np.trace((x.T @ x) @ (y.T @ y))) + float(np.sum(c * (1.0 - r) ** 2 - r ** 2))
    return min(max(total / (x.shape[0] * y.shape[0]), MIN_NOISE_VAR), MAX_NOISE_VAR)


def shrunk_linear(raw: np.ndarray, y: np.ndarray, weights: np.ndarray,
                  prior_slopes: np.ndarray) -> tuple[float, float]:
    """``y ~ w * raw + c`` over the probes with the slope shrunk toward the pool's slopes.

    The slope's prior is ``N(mean, var)`` of ``prior_slopes`` (the fitted LLMs' calibration
    slopes); the noise variance is the probes' weighted score variance (what is left when
    the factor predicts nothing: it errs toward the prior). The posterior-mean slope is
    ``(t2 S_ry + sigma2 w0) / (t2 S_rr + sigma2)`` with ``S_rr``, ``S_ry`` the weighted
    centred sums of squares and products, kept ``>= 0`` (the factor model's ranking); the
    intercept is not penalised, so the weighted mean prediction on the probes is their
    weighted mean score (as the Lightning routers' unpenalised offset).

    Example
    -------
    >>> shrunk_linear(np.array([0.0, 1.0]), np.array([0.0, 1.0]), np.ones(2), np.array([0.0, 0.0]))
    (0.0, 0.5)
    """
    raw, y = np.asarray(raw, np.float64), np.asarray(y, np.float64)
    v = np.asarray(weights, np.float64)
    slopes = np.asarray(prior_slopes, np.float64)
    w0, t2 = (float(slopes.mean()), float(slopes.var())) if slopes.size else (0.0, 0.0)
    mx, my = np.average(raw, weights=v), np.average(y, weights=v)
    s_rr = float(np.sum(v * (raw - mx) ** 2))
    s_ry = float(np.sum(v * (raw - mx) * (y - my)))
    sigma2 = float(np.average((y - my) ** 2, weights=v))
    den = t2 * s_rr + sigma2
    w = (t2 * s_ry + sigma2 * w0) / den if den > 1e-12 else w0
    w = max(w, 0.0)
    return float(w), float(my - w * mx)
