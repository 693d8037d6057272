"""Heterogeneous task-query-LLM graph and the GNN that scores query-LLM edges.

Reference: Feng, Shen & You, "GraphRouter: A Graph-based Router for LLM Selections",
ICLR 2025 (arXiv 2410.03834). Here the graph has three node types:

* ``task``  - one per task, features = task-name embedding or one-hot;
* ``query`` - features = text embedding;
* ``llm``   - features = description embedding plus log prices and log size.

Edges: ``query``-``in``-``task`` (context queries only) and ``task``-``has``-``query`` (every
query); ``query``-``near``-``query`` from each query to
its ``k`` nearest *context* queries by embedding cosine; and ``query``-``rates``-``llm`` for the
observed cells of context queries, carrying ``[score, cost]`` as edge attributes. Queries
to be predicted (new queries, or a held-out part of the train queries while training) have
no rating edges: they learn about LLMs through their task and their neighbours, two
message-passing hops away, which is what the two-layer GNN covers.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch_geometric.data import HeteroData
from torch_geometric.nn import GATConv, HeteroConv, SAGEConv

__all__ = ["build_graph", "knn_edges", "HeteroRouterGNN", "RoutingGraphBuilder", "EDGE_TYPES"]

EDGE_TYPES = (("query", "in", "task"), ("task", "has", "query"), ("query", "near", "query"),
              ("query", "rates", "llm"), ("llm", "rated_by", "query"))


#: similarity cells computed at once by :func:`knn_edges` (bounds its memory)
_CHUNK_CELLS = 1 << 24


def knn_edges(emb: np.ndarray, context: np.ndarray, k: int) -> np.ndarray:
    """Edges ``(source, target)`` from each query's ``k`` nearest context queries (cosine).

    A query is never its own neighbour. Returns int64 array of shape (2, n_edges).

    Example
    -------
    >>> e = np.array([[1., 0], [0.9, 0.1], [0, 1]])
    >>> knn_edges(e, np.array([0, 2]), 1).tolist()
    [[2, 0, 0], [0, 1, 2]]
    """
    context = np.asarray(context, dtype=np.int64)
    if k < 1 or len(context) == 0:
        return np.zeros((2, 0), dtype=np.int64)
    unit = emb / (np.linalg.norm(emb, axis=1, keepdims=True) + 1e-12)
    ctx_unit = unit[context]
    n_ctx = len(context)
    kk = min(k, n_ctx - 1 if n_ctx > 1 else 1)
    ctx_pos = np.full(len(emb), -1, dtype=np.int64)
    ctx_pos[context] = np.arange(n_ctx)
    # rows in chunks so memory stays O(chunk x n_ctx), not O(n_queries x n_ctx)
    chunk = max(1, min(len(emb), _CHUNK_CELLS // max(n_ctx, 1)))
    src_parts, dst_parts = [], []
    for start in range(0, len(emb), chunk):
        rows = np.arange(start, min(start + chunk, len(emb)))
        sims = unit[rows] @ ctx_unit.T
        own = ctx_pos[rows]
        sims[np.flatnonzero(own >= 0), own[own >= 0]] = -np.inf  # no self loops
        src_parts.append(context[_top_k_stable(sims, kk)].ravel())
        dst_parts.append(np.repeat(rows, kk))
    src, dst = np.concatenate(src_parts), np.concatenate(dst_parts)
    keep = src != dst
    return np.stack([src[keep], dst[keep]])


def _top_k_stable(sims: np.ndarray, kk: int) -> np.ndarray:
    """Column indices of each row's ``kk`` largest values, largest first, ties to the lower
    index: the same as ``np.argsort(-sims, kind="stable")[:, :kk]`` without a full sort.

    Example
    -------
    >>> _top_k_stable(np.array([[0.1, 0.5, 0.5, 0.2]]), 2).tolist()
    [[1, 2]]
    """
    n_rows, n = sims.shape
    kth = np.partition(sims, n - kk, axis=1)[:, n - kk]
    r, c = np.nonzero(sims >= kth[:, None])          # candidates (ties at the boundary included)
    order = np.lexsort((c, -sims[r, c], r))           # by row, then value desc, then index
    r, c = r[order], c[order]
    first = np.searchsorted(r, np.arange(n_rows))
    pos = np.arange(len(r)) - first[r]
    return c[pos < kk].reshape(n_rows, kk)


def build_graph(query_x: np.ndarray, query_task: np.ndarray, task_x: np.ndarray,
                llm_x: np.ndarray, rate_q: np.ndarray, rate_l: np.ndarray,
                rate_attr: np.ndarray, context: np.ndarray, k: int) -> HeteroData:
    """Assemble the heterogeneous routing graph.

    Parameters
    ----------
    query_x : ndarray (n_queries, d_q)
        Query features (text embeddings).
    query_task : ndarray of int (n_queries,)
        Task node of each query.
    task_x, llm_x : ndarray
        Task and LLM node features.
    rate_q, rate_l : ndarray of int
        Observed (query, LLM) cells of *context* queries, as rating edges.
    rate_attr : ndarray (n_edges, 2)
        ``[score, cost]`` of each rating edge (already scaled).
    context : ndarray of int
        Query indices that are context (neighbour candidates).
    k : int
        Neighbours per query.

    Returns
    -------
    torch_geometric.data.HeteroData
    """
    g = HeteroData()
    g["query"].x = torch.as_tensor(query_x, dtype=torch.float32)
    g["task"].x = torch.as_tensor(task_x, dtype=torch.float32)
    g["llm"].x = torch.as_tensor(llm_x, dtype=torch.float32)
    q = np.arange(len(query_x))
    qt = torch.as_tensor(np.stack([q, query_task]), dtype=torch.long)
    ctx = torch.as_tensor(np.asarray(context, dtype=np.int64))
    # only context queries feed their task node, so a predicted query never changes what
    # another one sees (routing a batch equals routing each query alone)
    g["query", "in", "task"].edge_index = qt[:, ctx]
    g["task", "has", "query"].edge_index = qt.flip(0)
    g["query", "near", "query"].edge_index = torch.as_tensor(knn_edges(query_x, context, k),
                                                             dtype=torch.long)
    ql = torch.as_tensor(np.stack([rate_q, rate_l]), dtype=torch.long).reshape(2, -1)
    attr = torch.as_tensor(rate_attr, dtype=torch.float32).reshape(-1, 2)
    g["query", "rates", "llm"].edge_index = ql
    g["query", "rates", "llm"].edge_attr = attr
    g["llm", "rated_by", "query"].edge_index = ql.flip(0)
    g["llm", "rated_by", "query"].edge_attr = attr
    return g


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


class RoutingGraphBuilder:
    """Builds training and inference graphs over a fixed set of train (context) queries.

    Parameters
    ----------
    train_x : ndarray (n_train, d)
        Train query embeddings.
    train_tasks : sequence of str
        Task of each train query (None/NaN read as ``"unknown"``).
    scores, costs : ndarray (n_train, n_llms)
        Train scores (NaN = unobserved), already scaled to [0, 1], and costs (or None).
    llm_x : ndarray (n_llms, d_llm)
        LLM node features.
    task_featurizer : callable
        ``list of task names -> ndarray (n, d_task)``; must handle unseen names.
    k : int
        Query-query neighbours.
    cost_scale : float
        Costs are divided by this before they become edge attributes / targets.
    """

    #: the featuriser (a closure over the encoder) is not stored in exported artifacts;
    #: the owning router sets it again on load
    _transient_attrs_ = ("task_featurizer",)

    def __init__(self, train_x, train_tasks, scores, costs, llm_x, task_featurizer, k: int = 5,
                 cost_scale: float = 1.0):
        self.train_x = np.asarray(train_x, np.float32)
        self.train_tasks = [_task_name(t) for t in train_tasks]
        self.scores = np.asarray(scores, np.float32)
        self.costs = None if costs is None else np.asarray(costs, np.float32) / cost_scale
        self.llm_x = np.asarray(llm_x, np.float32)
        self.task_featurizer = task_featurizer
        self.k = int(k)
        self.task_names = sorted(set(self.train_tasks))
        self.task_x = np.asarray(task_featurizer(self.task_names), np.float32)

    @property
    def n_train(self) -> int:
        return len(self.train_x)

    def _tasks(self, extra: list[str]):
        names = list(self.task_names) + sorted(set(extra) - set(self.task_names))
        x = self.task_x
        if len(names) > len(self.task_names):
            x = np.vstack([x, np.asarray(self.task_featurizer(names[len(self.task_names):]),
                                         np.float32)])
        return {n: i for i, n in enumerate(names)}, x

    def _rating_edges(self, context_mask: np.ndarray):
        obs = ~np.isnan(self.scores) & context_mask[:, None]
        qi, li = np.nonzero(obs)
        cost = self.costs[qi, li] if self.costs is not None else np.zeros(len(qi), np.float32)
        return qi, li, np.stack([self.scores[qi, li], np.nan_to_num(cost)], axis=1)

    def training_graph(self, rng: np.random.Generator, target_fraction: float):
        """A graph where a random ``target_fraction`` of train queries lose their rating edges.

        Returns
        -------
        graph : HeteroData
        targets : dict of ndarray
            ``q``, ``l`` (pair indices), ``y`` (score) and ``cost`` (scaled, NaN if unknown).
        """
        target = rng.random(self.n_train) < target_fraction
        if not target.any():
            target[rng.integers(self.n_train)] = True
        if target.all():
            target[rng.integers(self.n_train)] = False
        tix, task_x = self._tasks([])
        qi, li, attr = self._rating_edges(~target)
        g = build_graph(self.train_x, np.array([tix[t] for t in self.train_tasks]), task_x,
                        self.llm_x, qi, li, attr, np.flatnonzero(~target), self.k)
        tq, tl = np.nonzero(~np.isnan(self.scores) & target[:, None])
        cost = self.costs[tq, tl] if self.costs is not None else np.full(len(tq), np.nan, np.float32)
        return g, {"q": tq, "l": tl, "y": self.scores[tq, tl], "cost": cost}

    def inference_graph(self, new_x: np.ndarray, new_tasks) -> tuple[HeteroData, int]:
        """Graph of all train queries (context) plus the new queries appended after them.

        Returns the graph and the node offset of the first new query.
        """
        new_tasks = [_task_name(t) for t in new_tasks]
        tix, task_x = self._tasks(new_tasks)
        qx = np.vstack([self.train_x, np.asarray(new_x, np.float32)])
        qt = np.array([tix[t] for t in self.train_tasks + new_tasks])
        qi, li, attr = self._rating_edges(np.ones(self.n_train, bool))
        g = build_graph(qx, qt, task_x, self.llm_x, qi, li, attr, np.arange(self.n_train), self.k)
        return g, self.n_train


def _task_name(t) -> str:
    if t is None or (isinstance(t, float) and np.isnan(t)):
        return "unknown"
    return str(t)
