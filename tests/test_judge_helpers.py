"""Tiny routers and data used by the RouteJudge tests (no registry needed)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from recsys_router.data import RoutingData
from recsys_router.router import Router


class FixedRouter(Router):
    """Always prefers one LLM (by name); the rest by the given order."""

    def __init__(self, llm: str = "x"):
        self.llm = llm

    def _fit(self, train, val):
        if self.llm not in self.llm_names_:
            raise ValueError(f"unknown LLM {self.llm}")

    def _predict_scores(self, data):
        out = np.zeros((data.n_queries, len(self.llm_names_)))
        out[:, self.llm_names_.index(self.llm)] = 1.0
        return out


class PriorRouter(Router):
    """Fixed predicted score per LLM (a dict), for budget tests."""

    def __init__(self, prior: dict | None = None):
        self.prior = prior

    def _fit(self, train, val):
        self.vec_ = np.array([self.prior[m] for m in self.llm_names_], dtype=float)

    def _predict_scores(self, data):
        return np.broadcast_to(self.vec_, (data.n_queries, len(self.vec_))).copy()


class TextRouter(Router):
    """Routes on the query text: ``x`` when it holds "alpha", else ``y``."""

    def _fit(self, train, val):
        pass

    def _predict_scores(self, data):
        alpha = np.array(["alpha" in str(t) for t in data.texts])
        out = np.zeros((data.n_queries, len(self.llm_names_)))
        out[:, self.llm_names_.index("x")] = alpha
        out[:, self.llm_names_.index("y")] = ~alpha
        return out


class TruthRouter(Router):
    """Oracle: the recorded score (unobserved ranks last)."""

    uses_ground_truth = True

    def _fit(self, train, val):
        pass

    def _predict_scores(self, data):
        return np.nan_to_num(data.scores.astype(float), nan=-1.0)


def tiny_data() -> RoutingData:
    """2 train + 2 test queries over LLMs x, y, z (costs 1, 2, 3)."""
    q = pd.DataFrame({"query_id": ["tr1", "tr2", "qa", "qb"], "text": ["t1", "t2", "alpha?", "beta?"],
                      "task": ["k", "k", "k1", "k2"], "split": ["train", "train", "test", "test"]})
    s = [[1, 0, 0], [0, 1, 1], [1, 0, 1], [0.5, 0.5, 0]]
    c = [[1, 2, 3]] * 4
    return RoutingData(q, ["x", "y", "z"], s, c, name="tiny")
