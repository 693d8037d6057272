"""Tiny routers used by the export and serving tests (registered, so artifacts may name them)."""

from __future__ import annotations

import numpy as np

from recsys_router.registry import register_router
from recsys_router.router import Router
from recsys_router.state import Arr

__all__ = ["WordRouter", "NoisyWordRouter"]


class WordRouter(Router):
    """Per-LLM mean score, plus a bonus for the LLM whose index is the text's word count mod n.

    Text-dependent and deterministic, so routing results can be computed by hand.
    """

    uses_text = True
    _state_ = {"means_": Arr("float64", ("n_llms",))}

    def __init__(self, bonus: float = 1.0):
        self.bonus = bonus

    def _freeze_params(self):
        super()._freeze_params()
        self.bonus_ = float(self.bonus)   # what prediction reads is fixed at fit (contract)

    def _fit(self, train, val):
        self.means_ = np.nan_to_num(np.nanmean(train.scores, axis=0))

    def _predict_scores(self, data):
        n = len(self.means_)
        out = np.tile(self.means_, (data.n_queries, 1))
        words = np.array([len(str(t).split()) for t in data.texts])
        out[np.arange(data.n_queries), words % n] += self.bonus_
        return out


register_router("toy-word", f"{__name__}:WordRouter")


class NoisyWordRouter(WordRouter):
    """WordRouter whose predictions can be sampled: Gaussian noise of scale ``noise`` around
    them (a stand-in posterior for Thompson-sampling tests)."""

    def __init__(self, bonus: float = 0.1, noise: float = 0.2):
        self.bonus = bonus
        self.noise = noise

    def _freeze_params(self):
        super()._freeze_params()
        self.noise_ = float(self.noise)

    def sample_scores(self, data, n_samples, seed):
        rng = np.random.default_rng(seed)
        mean = self.predict_scores(data)
        return mean[None] + self.noise_ * rng.standard_normal((n_samples, *mean.shape))
register_router("toy-noisy-word", f"{__name__}:NoisyWordRouter")
