"""The graph router's builder over a train split and its prediction of new queries.

Reference: Feng, Shen & You, "GraphRouter: A Graph-based Router for LLM Selections",
ICLR 2025 (arXiv 2410.03834). Used by :mod:`recsys_router.models.graph_module`.
"""

from __future__ import annotations

import numpy as np
import torch

from recsys_router.data import RoutingData
from recsys_router.errors import DataValidationError
from recsys_router.models.components.gnn import HeteroRouterGNN
from recsys_router.models.components.graph import RoutingGraphBuilder

__all__ = ["make_builder", "predict_graph"]


def make_builder(train: RoutingData, train_x: np.ndarray, llm_features: np.ndarray, encoder,
                 k: int) -> tuple[RoutingGraphBuilder, float]:
    """Graph builder over a train split; returns it with the cost scale (mean train cost)."""
    obs = train.scores[train.observed]
    if obs.size and (obs.min() < 0 or obs.max() > 1):
        raise DataValidationError(f"the graph router trains with BCE and needs scores in [0, 1]; "
                                  f"train scores range over [{obs.min()}, {obs.max()}]",
                                  source=train.source, column="score")
    scale = 1.0
    if train.costs is not None and np.isfinite(train.costs).any():
        scale = float(np.nanmean(train.costs)) or 1.0

    def featurize(names):
        if not getattr(encoder, "needs_text", True):
            return np.eye(len(names), encoder.dim, dtype=np.float32)
        return encoder.encode([f"task: {n}" for n in names])

    return RoutingGraphBuilder(train_x, train.tasks, train.scores, train.costs, llm_features,
                               featurize, k=k, cost_scale=scale), scale


@torch.no_grad()
def predict_graph(net: HeteroRouterGNN, builder: RoutingGraphBuilder, x: np.ndarray, tasks,
                  device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Score logits and scaled costs (n, n_llms) of new queries joined to the train graph."""
    was = net.training
    net.eval()
    try:
        g, off = builder.inference_graph(np.asarray(x, np.float32), list(tasks))
        device = device or next(net.parameters()).device
        g = g.to(device)
        n, n_llms = len(x), len(builder.llm_x)
        q = torch.arange(off, off + n, device=device).repeat_interleave(n_llms)
        lidx = torch.arange(n_llms, device=device).repeat(n)
        s, c = net(g, q, lidx)
    finally:
        net.train(was)
    return s.reshape(n, n_llms), c.reshape(n, n_llms)
