"""A small random routing graph builder shared by the graph router's sampling tests."""

from __future__ import annotations

import numpy as np

from recsys_router.models.components.graph import RoutingGraphBuilder

__all__ = ["random_builder"]


def random_builder(n: int = 120, n_llms: int = 4, k: int = 3, seed: int = 0,
                   random_llm_features: bool = False) -> RoutingGraphBuilder:
    """``n`` queries x ``n_llms`` LLMs: 6-d query vectors, 0/1 scores with ~10% missing,
    costs in [0.5, 1.5), three tasks; LLM features all ones or (``random_llm_features``)
    standard normal, drawn last from the same generator."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 6)).astype(np.float32)
    scores = (rng.random((n, n_llms)) < 0.5).astype(np.float32)
    scores[rng.random((n, n_llms)) < 0.1] = np.nan
    costs = rng.random((n, n_llms)).astype(np.float32) + 0.5
    tasks = rng.choice(["a", "b", "c"], n)
    llm_x = rng.normal(size=(n_llms, 3)) if random_llm_features else np.ones((n_llms, 3), np.float32)
    return RoutingGraphBuilder(x, tasks, scores, costs, llm_x,
                               lambda names: np.ones((len(names), 2)), k=k)
