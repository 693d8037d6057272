"""The heterogeneous GNN that scores query-LLM edges of the routing graph.

Reference: Feng, Shen & You, "GraphRouter: A Graph-based Router for LLM Selections",
ICLR 2025 (arXiv 2410.03834). The graph it runs on (task, query and LLM nodes; task,
neighbour and rating edges) is built by :mod:`recsys_router.models.components.graph`.
"""

from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.data import HeteroData
from torch_geometric.nn import GATConv, HeteroConv, SAGEConv
from torch_geometric.utils import softmax

from recsys_router.models.components.bit_dropout import BitDropout
from recsys_router.models.components.pair_grid import grid_heads

__all__ = ["HeteroRouterGNN", "EdgeGATConv", "MeanSAGEConv", "OneEdgeSAGEConv"]

#: largest (destination x source) attention matrix :class:`EdgeGATConv` builds densely
_DENSE_CELLS = 1 << 25


def _out_of_range(edge_index: torch.Tensor, n_src: int, n_dst: int) -> bool:
    """Whether a (non-empty) edge index names a source outside ``[0, n_src)`` or a
    destination outside ``[0, n_dst)``: the fast paths below would read such an index
    silently (a negative one wraps), so they leave it to PyG's own path, which raises."""
    src, dst = edge_index[0], edge_index[1]
    return (int(src.min()) < 0 or int(src.max()) >= n_src
            or int(dst.min()) < 0 or int(dst.max()) >= n_dst)


class EdgeGATConv(GATConv):
    """:class:`torch_geometric.nn.GATConv` with the edge term of its attention computed as
    ``edge_attr @ (W_e^T a_e)`` (one ``edge_dim``-vector per head) instead of projecting
    every edge's attributes to ``heads x out_channels`` first and then summing: the same
    number (``lin_edge`` has no bias), without an (n_edges x hidden) tensor forward and
    backward. Parameters and their names are GATConv's, so saved networks load unchanged.

    The rating edges join queries to a few LLMs, one edge per observed (query, LLM) cell.
    When the (destination x source) matrix is small (at most ``_DENSE_CELLS`` cells and not
    much larger than the edge count), the attention is computed on that dense matrix
    (unobserved cells masked) and the messages are aggregated by one matrix product,
    instead of gathering and scattering an (n_edges x hidden) tensor: the same softmax and
    sum. This requires at most one edge per (source, destination) pair, which rating edges
    always have (single head, no self loops, no attention dropout; otherwise GATConv's
    own path runs).
    """

    def forward(self, x, edge_index, edge_attr=None, size=None, return_attention_weights=None):
        x_src, x_dst = x if isinstance(x, tuple) else (x, x)
        n_e = edge_index.size(1)
        if (self.heads != 1 or self.lin_src is None or self.add_self_loops or self.dropout
                or self.res is not None or return_attention_weights or x_dst is None):
            return super().forward(x, edge_index, edge_attr, size, return_attention_weights)
        src, dst = edge_index[0], edge_index[1]
        n_d = x_dst.size(0)
        if n_e and _out_of_range(edge_index, x_src.size(0), n_d):
            # GATConv's own path rejects indices outside the nodes
            return super().forward(x, edge_index, edge_attr, size, return_attention_weights)
        # only the sources with an edge send messages (e.g. the context queries feeding LLMs)
        used, src_c = (torch.unique(src, return_inverse=True) if 0 < 2 * n_e < x_src.size(0)
                       else (None, src))
        xs = x_src if used is None else x_src[used]
        n_s = xs.size(0)
        if n_s * n_d > min(_DENSE_CELLS, 8 * n_e + 65_536):
            return super().forward(x, edge_index, edge_attr, size, return_attention_weights)
        hs = self.lin_src(xs)
        # attention logits <a_s, W_s x_j> + <a_d, W_d x_i>: one vector per side, not W_d x_i
        a_s, a_d = self.att_src.view(-1), self.att_dst.view(-1)
        logit = (hs @ a_s)[src_c] + self._project_logit(self.lin_dst, a_d, x_dst)[dst]
        if edge_attr is not None and self.lin_edge is not None:
            w = self.lin_edge.weight.view(self.out_channels, -1)
            logit = logit + edge_attr.reshape(n_e, w.shape[1]) @ (w * self.att_edge.view(-1, 1)).sum(0)
        logit = F.leaky_relu(logit, self.negative_slope)
        dense = hs.new_full((n_d, n_s), float("-inf")).index_put((dst, src_c), logit)
        top = dense.max(dim=1, keepdim=True).values.detach()
        top = torch.where(torch.isinf(top), torch.zeros_like(top), top)   # rows with no edge
        p = torch.exp(dense - top)
        p = p / (p.sum(dim=1, keepdim=True) + 1e-16)
        out = p @ hs
        return out + self.bias if self.bias is not None else out

    @staticmethod
    def _project_logit(lin: nn.Module, att: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """``(lin(x) * att).sum(-1)`` as ``x @ (W^T att)`` (+ ``<b, att>``)."""
        out = x @ (lin.weight.T @ att)
        return out + lin.bias @ att if getattr(lin, "bias", None) is not None else out

    def edge_update(self, alpha_j, alpha_i, edge_attr, index, ptr, dim_size):
        alpha = alpha_j if alpha_i is None else alpha_j + alpha_i
        if index.numel() == 0:
            return alpha
        if edge_attr is not None and self.lin_edge is not None:
            e = edge_attr.view(edge_attr.size(0), -1)
            w = self.lin_edge.weight.view(self.heads, self.out_channels, -1)
            alpha = alpha + e @ (w * self.att_edge.view(self.heads, self.out_channels, 1)).sum(1).T
        alpha = F.leaky_relu(alpha, self.negative_slope)
        alpha = softmax(alpha, index, ptr, dim_size)
        return F.dropout(alpha, p=self.dropout, training=self.training)


class OneEdgeSAGEConv(SAGEConv):
    """:class:`torch_geometric.nn.SAGEConv` (mean) for edges of which every destination has
    at most one (a query's edge from its task): the mean over one edge is that source's
    row, so ``lin_l`` runs once per source node and each destination reads its source's
    row (``lin_l(0)``, the bias, where it has none). Same parameters and outputs as
    SAGEConv; any other edge set goes through SAGEConv's own path.
    """

    def forward(self, x, edge_index, size=None):
        x_src, x_dst = x if isinstance(x, tuple) else (x, x)
        if (self.project or self.normalize or str(self.aggr) != "mean" or x_dst is None
                or not self.root_weight):
            return super().forward(x, edge_index, size)
        n_s, n_d = x_src.size(0), x_dst.size(0)
        dst = edge_index[1]
        if dst.numel() and (_out_of_range(edge_index, n_s, n_d)
                            or int(torch.bincount(dst, minlength=n_d).max()) > 1):
            return super().forward(x, edge_index, size)   # (which rejects bad indices)
        src_of = torch.full((n_d,), n_s, dtype=torch.long, device=dst.device)
        src_of[dst] = edge_index[0]
        bias = self.lin_l.bias if self.lin_l.bias is not None else x_src.new_zeros(self.out_channels)
        rows = torch.cat([self.lin_l(x_src), bias.view(1, -1)])
        return rows[src_of] + self.lin_r(x_dst)


class MeanSAGEConv(SAGEConv):
    """:class:`torch_geometric.nn.SAGEConv` (mean) whose neighbour mean is one sparse
    (destination x source) CSR matrix product, ``A x`` with ``A[i, j] = 1 / deg(i)`` per
    edge ``j -> i``, instead of gathering and scattering an (edges x channels) tensor: the
    same mean (forward and backward), about half the time on the routing graph's neighbour
    edges. Same parameters as SAGEConv; other configurations use SAGEConv's own path.
    """

    def forward(self, x, edge_index, size=None):
        x_src, x_dst = x if isinstance(x, tuple) else (x, x)
        src, dst = edge_index[0], edge_index[1]
        if (self.project or self.normalize or str(self.aggr) != "mean" or x_dst is None
                or not self.root_weight or edge_index.size(1) == 0
                or _out_of_range(edge_index, x_src.size(0), x_dst.size(0))):
            return super().forward(x, edge_index, size)   # (which rejects bad indices)
        n_d = x_dst.size(0)
        order = torch.argsort(dst, stable=True)
        deg = torch.bincount(dst, minlength=n_d)
        crow = torch.zeros(n_d + 1, dtype=torch.long, device=dst.device)
        crow[1:] = torch.cumsum(deg, 0)
        vals = (1.0 / deg.clamp(min=1).to(x_src.dtype))[dst[order]]
        with warnings.catch_warnings():   # "CSR support is in beta"; indices checked above
            warnings.simplefilter("ignore", UserWarning)
            a = torch.sparse_csr_tensor(crow, src[order], vals, (n_d, x_src.size(0)),
                                        check_invariants=False)
        return self.lin_l(a @ x_src) + self.lin_r(x_dst)


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
                ("query", "in", "task"): MeanSAGEConv((hidden, hidden), hidden),
                ("task", "has", "query"): OneEdgeSAGEConv((hidden, hidden), hidden),
                ("query", "near", "query"): MeanSAGEConv((hidden, hidden), hidden),
                ("query", "rates", "llm"): EdgeGATConv((hidden, hidden), hidden, edge_dim=2,
                                                       add_self_loops=False),
                ("llm", "rated_by", "query"): EdgeGATConv((hidden, hidden), hidden, edge_dim=2,
                                                          add_self_loops=False),
            }, aggr="sum"))
        self.dropout = BitDropout(dropout)   # torch's CPU dropout draws serially (bit_dropout)
        self.score_head = nn.Sequential(nn.Linear(3 * hidden, hidden), nn.ReLU(),
                                        nn.Linear(hidden, 1))
        self.cost_head = nn.Sequential(nn.Linear(3 * hidden, hidden), nn.ReLU(),
                                       nn.Linear(hidden, 1))

    def embed(self, g: HeteroData, final_queries: torch.Tensor | None = None,
              states: list | None = None) -> dict:
        """Final node embeddings per type.

        ``final_queries`` (query node ids): the last layer computes only what those queries'
        and the LLMs' final embeddings need (:func:`_last_layer`: its query-destination
        convolutions run on those rows alone, none into task nodes), so only those rows of
        the final ``query`` embeddings, and the ``llm`` ones, are exact; the other query rows
        and the task embeddings are the previous layer's.

        ``states`` (a list): the node states that enter each layer (a dict per layer, the
        projected features first) are appended to it, for
        :func:`~recsys_router.models.components.graph_predict.train_states`.
        """
        h = {t: torch.relu(self.inp[t](g[t].x)) for t in self.inp}
        edge_attr = {et: g[et].edge_attr for et in g.edge_types if "edge_attr" in g[et]}
        edges = g.edge_index_dict
        last = len(self.convs) - 1
        for i, conv in enumerate(self.convs):
            if states is not None:
                states.append(h)
            if final_queries is not None and i == last:
                return _last_layer(conv, h, edges, edge_attr, final_queries, self.dropout)
            out = _summed_layer(conv, h, edges, edge_attr)
            # residual: node types without incoming edges this layer keep their state
            h = {t: self.dropout(torch.relu(out[t])) + h[t] if t in out else h[t] for t in h}
        return h

    def forward(self, g: HeteroData, q_idx: torch.Tensor, l_idx: torch.Tensor):
        """``(score_logit, cost)`` tensors of shape (n_pairs,) for the pairs ``(q_idx, l_idx)``.

        Each head is ``Linear(3h, h) -> ReLU -> Linear(h, 1)`` of ``z = [hq, hl, hq * hl]``;
        its first layer is computed as ``W_q hq + W_l hl + W_x (hq * hl)`` (the three column
        blocks of its weight), the first two terms once per distinct query and per LLM, both
        heads in one product (:func:`_pair_heads`), instead of on the concatenated pairs.
        """
        h = self.embed(g, final_queries=q_idx)
        return _pair_heads(self.score_head, self.cost_head, h["query"], h["llm"], q_idx, l_idx)


def _summed_layer(conv: HeteroConv, h: dict, edges: dict, edge_attr: dict) -> dict:
    """``conv(h, edges, edge_attr_dict=edge_attr)`` for a sum-aggregating HeteroConv: each
    edge type's convolution (those with edges in the graph, in the layer's order), added up
    per destination type as they come, not stacked and then summed (a copy and a reduction
    of every (nodes x hidden) output)."""
    if conv.aggr != "sum":
        return conv(h, edges, edge_attr_dict=edge_attr)
    out: dict = {}
    for et, c in conv.convs.items():
        if et not in edges:
            continue
        src, _, dst = et
        x = h[src] if src == dst else (h[src], h[dst])
        attr = edge_attr.get(et)
        y = c(x, edges[et], edge_attr=attr) if attr is not None else c(x, edges[et])
        out[dst] = y if dst not in out else out[dst] + y
    return out


def _last_layer(conv: HeteroConv, h: dict, edges: dict, edge_attr: dict,
                queries: torch.Tensor, dropout: nn.Module) -> dict:
    """The last layer of :meth:`HeteroRouterGNN.embed`, exact for the query rows ``queries``
    and every LLM node.

    Each convolution into query nodes gets only those rows as destinations (their incoming
    edges, renumbered); a query's output (SAGE mean and root term, GAT softmax over its own
    edges) reads only its own row and incoming edges, so it equals the full layer's. The
    convolutions into task nodes are skipped (nothing reads their output). The returned
    ``query`` tensor is the previous layer's with those rows replaced.
    """
    n_query = len(h["query"])
    rows = torch.unique(queries)
    where = torch.full((n_query,), -1, dtype=torch.long, device=rows.device)
    where[rows] = torch.arange(len(rows), device=rows.device)
    h_rows = h["query"][rows]
    out: dict = {}
    for et, e in edges.items():
        src, _, dst = et
        if dst == "task" or et not in conv.convs:
            continue
        attr = edge_attr.get(et)
        if dst == "query":
            sel = where[e[1]] >= 0
            e = torch.stack([e[0][sel], where[e[1][sel]]])
            attr = None if attr is None else attr[sel]
            x = (h[src], h_rows)
        else:
            x = (h[src], h[dst])
        y = conv.convs[et](x, e, edge_attr=attr) if attr is not None else conv.convs[et](x, e)
        out[dst] = y if dst not in out else out[dst] + y
    new = dict(h)
    if "llm" in out:
        new["llm"] = dropout(torch.relu(out["llm"])) + h["llm"]
    if "query" in out:
        q = dropout(torch.relu(out["query"])) + h_rows
        new["query"] = h["query"].index_put((rows,), q)
    return new


def _pair_heads(score_head: nn.Sequential, cost_head: nn.Sequential, hq: torch.Tensor,
                hl: torch.Tensor, q_idx: torch.Tensor, l_idx: torch.Tensor):
    """Both heads on the pairs ``(q_idx, l_idx)``, equal to ``head(cat([hq, hl, hq * hl]))``.

    With ``W = [W_q | W_l | W_x]`` the first layer's weight (both heads' stacked), the
    pre-activation of pair ``(i, j)`` is ``W_q hq_i + W_x (hq_i * hl_j) + B[j]`` with
    ``B = hl W_l^T + b`` over the LLMs. Where the pairs cover at least half of the (distinct
    query x LLM) grid, the whole grid is one product ``[hq_i, 1] @ M`` (M holds
    ``W_q^T + diag(hl_j) W_x^T`` and ``B[j]`` per LLM, computed in row chunks by
    :func:`~recsys_router.models.components.pair_grid.grid_heads`) and the pairs are read
    off the outputs; otherwise per pair.
    """
    d = hq.shape[1]
    s1, c1 = score_head[0], cost_head[0]
    w1, b1 = torch.cat([s1.weight, c1.weight]), torch.cat([s1.bias, c1.bias])   # (2d, 3d)
    w2 = torch.block_diag(score_head[2].weight, cost_head[2].weight)              # (2, 2d)
    b2 = torch.cat([score_head[2].bias, cost_head[2].bias])
    qs, inv = torch.unique(q_idx, return_inverse=True)
    hu = hq[qs]
    wq, wl, wx = w1[:, :d], w1[:, d:2 * d], w1[:, 2 * d:]
    b = torch.addmm(b1, hl, wl.T)                           # (n_llms, 2d), bias folded in
    n_q, n_l = len(qs), len(hl)
    if 2 * len(q_idx) >= n_q * n_l:
        # pre[i, j] = [hu_i, 1] @ [[W_q^T + diag(hl_j) W_x^T], [b_j]]: one product per grid
        m = wq.T[None] + hl[:, :, None] * wx.T[None]         # (n_llms, d, 2d)
        m = m.permute(1, 0, 2).reshape(d, -1)                # (d, n_llms * 2d)
        # the (n_q, n_llms * 2d) hidden layer in cache-sized row chunks (pair_grid)
        w2v = torch.cat([score_head[2].weight, cost_head[2].weight])   # (2, d)
        out = grid_heads(hu, m, b.reshape(-1), w2v, b2).view(-1, 2)
        out = out[inv * n_l + l_idx]
    else:
        pre = torch.addmm(b[l_idx], hu[inv] * hl[l_idx], wx.T) + hu[inv] @ wq.T
        out = torch.relu(pre) @ w2.T + b2
    return out[:, 0], out[:, 1]

