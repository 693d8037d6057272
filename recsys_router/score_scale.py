"""Score scales: recognise how a training matrix is scored and map it onto [0, 1] targets.

Routers that train with a sigmoid output (BCE, the IRT and graph heads) need targets in
[0, 1] that use the whole range. Routing data comes scored in many ways: 0/1 correctness,
fractions of samples correct, 1-10 judge grades, or continuous preference scores that
pile up near one end. :func:`choose_score_scale` reads the observed training cells and
picks one transform; :class:`ScoreScale` applies it and its inverse, so predicted scores
come back on the data's own scale and a routing policy's ``wtp`` (``wtp * score - cost``
on predictions) keeps its meaning. What is computed during training is on the [0, 1]
targets: the ``utility`` loss's ``wtp`` (the Lightning router converts it exactly for
``minmax``, ``wtp * (max - min)``, since ``wtp * t - cost`` then differs from
``wtp * s - cost`` by the same constant on every LLM of a query; the rank transform is
nonlinear and has no such conversion, so there ``wtp`` is per unit of target) and the
held-out epoch metrics (``val/mu_o``, the router's ``val_score_``: a mean target, equal to
``(mu_o - min) / (max - min)`` for ``minmax`` with held-out scores clipped to the training
range, not a data-scale ``mu_o`` for ``rank``).

Rules (checked in this order, on the finite observed cells ``s``):

* ``binary``: every value is 0 or 1 -> identity.
* ``grades``: integer values outside [0, 1] with at most 21 distinct levels (1-5 or 1-10
  grades, 0-100 in steps of 5 ...) -> ``(s - min) / (max - min)``.
* ``skewed``: at least 20 distinct values and ``|skewness| > 1`` (most cells near one end)
  -> the empirical CDF with mid-ranks, ``F(v) = (#{s < v} + #{s = v} / 2) / n``, linear
  between observed values (a rank transform: uniform targets).
* ``fraction``: everything else inside [0, 1] -> identity.
* ``continuous``: everything else -> ``(s - min) / (max - min)``.

Every transform is monotone increasing, so which LLM is best on a query never changes.

Reference: the rank (probability-integral) transform, e.g. Conover, *Practical
Nonparametric Statistics*, 3rd ed. (1999), ch. 5.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["ScoreScale", "choose_score_scale", "SCALE_KINDS"]

SCALE_KINDS = ("binary", "fraction", "grades", "skewed", "continuous")
#: most knots kept for the rank transform (quantiles beyond this many distinct values)
MAX_KNOTS = 2049
MAX_GRADE_LEVELS = 21
MIN_SKEW_LEVELS = 20
SKEW_LIMIT = 1.0


def _skewness(x: np.ndarray) -> float:
    """Sample skewness ``mean((x - mu)^3) / sd^3`` (0 for a constant sample)."""
    sd = float(x.std())
    if sd == 0.0:
        return 0.0
    return float(np.mean((x - x.mean()) ** 3) / sd ** 3)


@dataclass
class ScoreScale:
    """A fitted score transform (see the module docstring for the rules).

    Parameters
    ----------
    kind : str
        One of :data:`SCALE_KINDS`.
    method : {"identity", "minmax", "rank"}
    lo, hi : float
        Observed range (``minmax``).
    knots_x, knots_y : ndarray
        Increasing values and their CDF (``rank``).
    skewness : float
    n_levels : int
        Distinct observed values.

    Example
    -------
    >>> s = choose_score_scale(np.array([[1.0, 10.0], [4.0, np.nan]]))
    >>> s.kind, s.transform(np.array([1.0, 10.0, np.nan])).tolist()
    ('grades', [0.0, 1.0, nan])
    """

    kind: str
    method: str
    lo: float = 0.0
    hi: float = 1.0
    knots_x: np.ndarray = field(default_factory=lambda: np.zeros(0))
    knots_y: np.ndarray = field(default_factory=lambda: np.zeros(0))
    skewness: float = 0.0
    n_levels: int = 0

    def transform(self, scores: np.ndarray) -> np.ndarray:
        """Scores -> [0, 1] targets; NaN stays NaN. ``identity`` (scores already in [0, 1]:
        the binary and fraction kinds) returns the values as they are; ``minmax`` clips to
        [0, 1] and the rank transform to its end knots' targets."""
        s = np.asarray(scores, dtype=np.float64)
        if self.method == "identity":
            return s.copy()
        if self.method == "minmax":
            span = self.hi - self.lo
            out = (s - self.lo) / span if span > 0 else np.where(np.isnan(s), np.nan, 0.5)
            return np.clip(out, 0.0, 1.0)
        out = np.interp(s, self.knots_x, self.knots_y)
        return np.where(np.isnan(s), np.nan, out)

    def inverse(self, targets: np.ndarray) -> np.ndarray:
        """[0, 1] predictions -> the data's own scale (monotone; exact on the knots)."""
        t = np.asarray(targets, dtype=np.float64)
        if self.method == "identity":
            return t.copy()
        if self.method == "minmax":
            return self.lo + t * (self.hi - self.lo)
        return np.interp(t, self.knots_y, self.knots_x)

    def describe(self) -> str:
        """One line for reports, e.g. ``skewed continuous scores (...): rank transform``."""
        what = {"binary": "0/1 scores", "fraction": "scores in [0, 1]",
                "grades": f"graded scores {self.lo:g}..{self.hi:g}",
                "skewed": f"skewed continuous scores (skewness {self.skewness:+.2f})",
                "continuous": f"continuous scores {self.lo:g}..{self.hi:g}"}[self.kind]
        how = {"identity": "trained on as they are",
               "minmax": "scaled to [0, 1] by (s - min) / (max - min)",
               "rank": "rank-transformed to [0, 1] (empirical CDF, mid-ranks)"}[self.method]
        return f"{what}, {self.n_levels} distinct values: {how}"

    def to_state(self) -> dict:
        """Plain data (floats and lists) that :meth:`from_state` rebuilds."""
        return {"kind": self.kind, "method": self.method, "lo": float(self.lo),
                "hi": float(self.hi), "knots_x": [float(v) for v in self.knots_x],
                "knots_y": [float(v) for v in self.knots_y], "skewness": float(self.skewness),
                "n_levels": int(self.n_levels)}

    @classmethod
    def from_state(cls, state: dict) -> "ScoreScale":
        """Rebuild from :meth:`to_state` output, checking every field."""
        if not isinstance(state, dict):
            raise ValueError(f"score scale state must be a dict, got {type(state).__name__}")
        kind, method = state.get("kind"), state.get("method")
        if kind not in SCALE_KINDS or method not in ("identity", "minmax", "rank"):
            raise ValueError(f"score scale state: bad kind/method {kind!r}/{method!r}")
        kx = np.asarray(state.get("knots_x", []), dtype=np.float64)
        ky = np.asarray(state.get("knots_y", []), dtype=np.float64)
        if len(kx) != len(ky) or len(kx) > MAX_KNOTS or (method == "rank" and len(kx) < 2):
            raise ValueError(f"score scale state: knots must be two equal lists of 2..{MAX_KNOTS} "
                             f"values, got {len(kx)} and {len(ky)}")
        if len(kx) and (not np.isfinite(kx).all() or np.any(np.diff(kx) <= 0)):
            raise ValueError("score scale state: knots_x must be finite and increasing")
        if len(ky) and (not np.isfinite(ky).all() or ky.min() < 0 or ky.max() > 1
                        or np.any(np.diff(ky) < 0)):
            raise ValueError(f"score scale state: knots_y must be finite, within [0, 1] and "
                             f"non-decreasing (a CDF), got {ky.tolist()[:6]}")
        lo, hi = float(state.get("lo", 0.0)), float(state.get("hi", 1.0))
        if not (np.isfinite(lo) and np.isfinite(hi) and hi >= lo):
            raise ValueError(f"score scale state: bad range lo={lo!r}, hi={hi!r}")
        skew, n_levels = float(state.get("skewness", 0.0)), state.get("n_levels", 0)
        if not np.isfinite(skew):
            raise ValueError(f"score scale state: skewness must be finite, got {skew!r}")
        whole = isinstance(n_levels, (int, np.integer)) or (
            isinstance(n_levels, float) and np.isfinite(n_levels) and n_levels.is_integer())
        if isinstance(n_levels, bool) or not whole or n_levels < 0:
            raise ValueError(f"score scale state: n_levels must be a whole number >= 0, got "
                             f"{n_levels!r}")
        return cls(kind, method, lo, hi, kx, ky, skew, int(n_levels))


def _rank_knots(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values and their mid-rank CDF (thinned to at most :data:`MAX_KNOTS`)."""
    vals, counts = np.unique(x, return_counts=True)
    below = np.concatenate([[0], np.cumsum(counts)[:-1]])
    cdf = (below + 0.5 * counts) / len(x)
    if len(vals) > MAX_KNOTS:
        keep = np.unique(np.round(np.linspace(0, len(vals) - 1, MAX_KNOTS)).astype(int))
        vals, cdf = vals[keep], cdf[keep]
    # the observed extremes map to the ends of [0, 1]
    cdf = cdf.astype(np.float64)
    cdf[0], cdf[-1] = 0.0, 1.0
    return vals.astype(np.float64), cdf


def choose_score_scale(scores: np.ndarray, *, method: str = "auto") -> ScoreScale:
    """Recognise the scale of the observed (non-NaN) training scores and fit its transform.

    Parameters
    ----------
    scores : array-like
        Training scores (any shape), NaN = unobserved.
    method : {"auto", "identity", "minmax", "rank"}
        ``"auto"`` applies the rules of the module docstring; otherwise that transform is
        forced (the kind is still recognised and reported).

    Returns
    -------
    ScoreScale

    Raises
    ------
    ValueError
        No observed score, an infinite score, or an unknown ``method``.

    Example
    -------
    >>> choose_score_scale(np.array([[0.0, 1.0], [1.0, np.nan]])).kind
    'binary'
    """
    if method not in ("auto", "identity", "minmax", "rank"):
        raise ValueError(f"score transform must be auto, identity, minmax or rank, got {method!r}")
    s = np.asarray(scores, dtype=np.float64).ravel()
    s = s[~np.isnan(s)]
    if not len(s):
        raise ValueError("no observed training score to learn the score scale from")
    if not np.isfinite(s).all():
        raise ValueError("training scores contain infinite values; expected finite numbers")
    levels = np.unique(s)
    n_levels, lo, hi = len(levels), float(s.min()), float(s.max())
    skew = _skewness(s)
    inside = lo >= 0.0 and hi <= 1.0
    integer = bool(np.all(levels == np.round(levels)))
    if np.isin(levels, (0.0, 1.0)).all():
        kind, auto = "binary", "identity"
    elif integer and not inside and n_levels <= MAX_GRADE_LEVELS:
        kind, auto = "grades", "minmax"
    elif n_levels >= MIN_SKEW_LEVELS and abs(skew) > SKEW_LIMIT:
        kind, auto = "skewed", "rank"
    elif inside:
        kind, auto = "fraction", "identity"
    else:
        kind, auto = "continuous", "minmax"
    chosen = auto if method == "auto" else method
    kx, ky = _rank_knots(s) if chosen == "rank" else (np.zeros(0), np.zeros(0))
    if chosen == "rank" and len(kx) < 2:     # a constant matrix has nothing to rank
        chosen, kx, ky = "minmax", np.zeros(0), np.zeros(0)
    return ScoreScale(kind, chosen, lo, hi, kx, ky, skew, n_levels)
