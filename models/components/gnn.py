"""The heterogeneous GNN that scores query-LLM edges of the routing graph.

Reference: Feng, Shen & You, "GraphRouter: A Graph-based Router for LLM Selections",
ICLR 2025 (arXiv 2410.03834). The graph it runs on (task, query and LLM nodes; task,
neighbour and rating edges) is built by :mod:`recsys_router.models.components.graph`.
"""

from __future__ import annotations

import torch
from torch import nn
from torch_geometric.data import HeteroData
from torch_geometric.nn import GATConv, HeteroConv, SAGEConv

__all__ = ["HeteroRouterGNN"]


class HeteroRouterGNN(nn.Module):
    """Heterogeneous GNN with two heads (score logit, scaled cost) per query-LLM pair.

    Each layer is a :class:`torch_geometric.nn.HeteroConv`: SAGE convolutions on the task and
    neighbour edges and edge-attributed GAT convolutions on the rating edges (so the score
    and cost of a rating travel with its message).

    Parameters
    ----------
    in_dims : dict
        Input feature size per node type (``query``, ``task``, ``llm``).
    hidden : int
        Hidden size.
    num_layers : int
        Message-passing layers (>= 2 lets a new query see its neighbours' ratings).
    dropout : float
        Dropout between layers.
    """

    def __init__(self, in_dims: dict, hidden: int = 64, num_layers: int = 2, dropout: float = 0.1):
        super().__init__()
        self.inp = nn.ModuleDict({t: nn.Linear(int(d), hidden) for t, d in in_dims.items()})
        self.convs = nn.ModuleList()
        for _ in range(num_layers):
            self.convs.append(HeteroConv({
                ("query", "in", "task"): SAGEConv((hidden, hidden), hidden),
                ("task", "has", "query"): SAGEConv((hidden, hidden), hidden),
                ("query", "near", "query"): SAGEConv((hidden, hidden), hidden),
                ("query", "rates", "llm"): GATConv((hidden, hidden), hidden, edge_dim=2,
                                                   add_self_loops=False),
                ("llm", "rated_by", "query"): GATConv((hidden, hidden), hidden, edge_dim=2,
                                                      add_self_loops=False),
            }, aggr="sum"))
        self.dropout = nn.Dropout(dropout)
        self.score_head = nn.Sequential(nn.Linear(3 * hidden, hidden), nn.ReLU(),
                                        nn.Linear(hidden, 1))
        self.cost_head = nn.Sequential(nn.Linear(3 * hidden, hidden), nn.ReLU(),
                                       nn.Linear(hidden, 1))

    def embed(self, g: HeteroData) -> dict:
        """Final node embeddings per type."""
        h = {t: torch.relu(self.inp[t](g[t].x)) for t in self.inp}
        edge_attr = {et: g[et].edge_attr for et in g.edge_types if "edge_attr" in g[et]}
        for conv in self.convs:
            out = conv(h, g.edge_index_dict, edge_attr_dict=edge_attr)
            # residual: node types without incoming edges this layer keep their state
            h = {t: self.dropout(torch.relu(out[t])) + h[t] if t in out else h[t] for t in h}
        return h

    def forward(self, g: HeteroData, q_idx: torch.Tensor, l_idx: torch.Tensor):
        """``(score_logit, cost)`` tensors of shape (n_pairs,) for the pairs ``(q_idx, l_idx)``."""
        h = self.embed(g)
        hq, hl = h["query"][q_idx], h["llm"][l_idx]
        z = torch.cat([hq, hl, hq * hl], dim=-1)
        return self.score_head(z).squeeze(-1), self.cost_head(z).squeeze(-1)
