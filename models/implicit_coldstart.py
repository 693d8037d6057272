"""Item cold start of the implicit-feedback routers (ALS, BPR): an onboarded LLM's factor
folded in from its probes.

:class:`ImplicitColdStartMixin` gives :class:`~recsys_router.models.implicit_router.ImplicitRouter`
its native ``add_llm`` / ``remove_llm``: the new LLM's factor is the MAP of ALS's weighted
least squares over the probes with every query factor fixed, under the Gaussian prior of
the fitted LLMs' factors, and its calibration line is shrunk toward theirs. Kept apart from
the router's fitting and prediction so that :mod:`recsys_router.models.implicit_router`
stays small.
"""

from __future__ import annotations

import numpy as np

from recsys_router.data import RoutingData

from .components.item_prior import fold_in_item, prior_of, shrunk_linear

__all__ = ["ImplicitColdStartMixin"]


class ImplicitColdStartMixin:
    """The LLM onboarding of :class:`~recsys_router.models.implicit_router.ImplicitRouter`.

    Reads and replaces the router's ``llm_factors_`` and ``calib_`` and uses its
    ``query_factors``, ``_predict_scores``, ``score_range_``, ``alpha_`` (``alpha`` fixed at
    fit), ``noise_var_`` and ``llm_info_`` (the onboarded LLMs).
    """

    native_add_llm = True

    def _add_llm(self, name: str, probes: RoutingData, cost: float, weights: np.ndarray) -> None:
        """The new LLM's factor from its probes with every query factor fixed, shrunk toward
        the fitted LLMs' factors.

        The probe queries' factors are folded in from their text; a probe is positive by
        the rule of :func:`~recsys_router.models.components.implicit_data.interaction_matrix`
        (scaled score > 0 and at least the query's mean predicted scaled score over the
        pool), with confidence ``1 + alpha_ * s`` (1 for
        the others). The item factor is the MAP of ALS's weighted least squares over the
        probes, each probe's confidence multiplied by its probe weight, under the Gaussian
        prior of the fitted LLMs' factors (:func:`~recsys_router.models.components.item_prior.fold_in_item`;
        the Lightning routers' prior), its noise variance ``noise_var_`` estimated at fit
        time from the leave-one-out folded-in query factors (1 for artifacts without it):
        with a few probes, or text that predicts little, it stays near the mean LLM factor
        instead of fitting the probes exactly. The new column's calibration is fitted on the
        probes with its slope shrunk toward the fitted LLMs' slopes and an unpenalised
        intercept (:func:`~recsys_router.models.components.item_prior.shrunk_linear`), and
        its predictions are held to ``score_range_`` (see :meth:`_predict_scores`).
        """
        x = self.query_factors(probes)
        y = probes.scores[:, 0].astype(np.float64)
        vw = np.asarray(weights, np.float64)
        lo, hi = self.score_range_
        s = np.clip((y - lo) / (hi - lo), 0.0, 1.0) if hi > lo else np.ones_like(y)
        pool = self._predict_scores(probes)
        row_mean = np.clip((pool.mean(axis=1) - lo) / (hi - lo), 0.0, 1.0) if hi > lo else 0.0
        pos = (s > 0) & (s >= row_mean - 1e-12)
        conf = np.where(pos, 1.0 + self.alpha_ * s, 1.0)
        fitted = self._fitted_columns()
        noise = getattr(self, "noise_var_", None)
        v = fold_in_item(x, pos.astype(np.float64), conf, vw, *prior_of(self.llm_factors_[fitted]),
                         noise_var=1.0 if noise is None else noise)
        self.llm_factors_ = np.vstack([self.llm_factors_, v[None, :]])
        if self.calib_ is not None:
            w, c0 = shrunk_linear(x @ v, y, vw, self.calib_[0][fitted])
            self.calib_ = (np.append(self.calib_[0], w), np.append(self.calib_[1], c0))

    def _fitted_columns(self) -> np.ndarray:
        """Columns of the LLMs fitted with the router (not onboarded); all when none is left."""
        added = getattr(self, "llm_info_", None) or {}
        cols = np.array([j for j, n in enumerate(self.llm_names_) if n not in added], dtype=np.int64)
        return cols if cols.size else np.arange(len(self.llm_names_))

    def _remove_llm(self, j: int) -> None:
        self.llm_factors_ = np.delete(self.llm_factors_, j, axis=0)
        if self.calib_ is not None:
            self.calib_ = (np.delete(self.calib_[0], j), np.delete(self.calib_[1], j))
