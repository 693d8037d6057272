"""The graph router's cheaper computations equal their plain forms, values and gradients:
the pair heads (first layer split into per-query, per-LLM and interaction terms) against
``head(cat([hq, hl, hq * hl]))`` on the grid and the per-pair paths; EdgeGATConv on its
sending nodes only against PyG's GATConv; OneEdgeSAGEConv and MeanSAGEConv (CSR product)
against PyG's SAGEConv."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from recsys_router.models.components.gnn import HeteroRouterGNN, _pair_heads


def _reference(net, hq, hl, q, l_):
    z = torch.cat([hq[q], hl[l_], hq[q] * hl[l_]], dim=-1)
    return net.score_head(z).squeeze(-1), net.cost_head(z).squeeze(-1)


@pytest.mark.parametrize("dense", [True, False])
def test_pair_heads_equal_the_concatenated_heads(dense):
    torch.manual_seed(0)
    net = HeteroRouterGNN({"query": 4, "task": 2, "llm": 3}, hidden=8, num_layers=2)
    hq = torch.randn(30, 8, requires_grad=True)
    hl = torch.randn(5, 8, requires_grad=True)
    rng = np.random.default_rng(0)
    if dense:   # every LLM of 12 queries but two cells: the grid path
        cells = [(q, j) for q in rng.choice(30, 12, replace=False) for j in range(5)][2:]
    else:       # a few cells of many queries: the per-pair path
        cells = [(int(q), int(rng.integers(5))) for q in rng.choice(30, 20, replace=False)]
    q = torch.as_tensor([c[0] for c in cells])
    l_ = torch.as_tensor([c[1] for c in cells])
    got = _pair_heads(net.score_head, net.cost_head, hq, hl, q, l_)
    want = _reference(net, hq, hl, q, l_)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
    params = [hq, hl, *net.score_head.parameters(), *net.cost_head.parameters()]
    g1 = torch.autograd.grad((got[0].sin() + got[1].square()).sum(), params)
    g2 = torch.autograd.grad((want[0].sin() + want[1].square()).sum(), params)
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b)


def _same_outputs_and_grads(lean, ref, xs, xd, e, **kw):
    lean.load_state_dict(ref.state_dict())
    got, want = lean((xs, xd), e, **kw), ref((xs, xd), e, **kw)
    torch.testing.assert_close(got, want)
    g1 = torch.autograd.grad(got.sin().sum(), [xs, xd, *lean.parameters()])
    g2 = torch.autograd.grad(want.sin().sum(), [xs, xd, *ref.parameters()])
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b)
    return got


def test_edge_gat_with_few_sending_nodes_equals_pyg_gat():
    # 40 source nodes, 6 edges from 4 of them: the attention runs on the senders only
    from torch_geometric.nn import GATConv

    from recsys_router.models.components.gnn import EdgeGATConv
    torch.manual_seed(2)
    ref = GATConv((5, 6), 4, edge_dim=2, add_self_loops=False)
    xs = torch.randn(40, 5, requires_grad=True)
    xd = torch.randn(3, 6, requires_grad=True)
    e = torch.tensor([[7, 30, 7, 12, 39, 30], [0, 0, 1, 1, 1, 2]])
    _same_outputs_and_grads(EdgeGATConv((5, 6), 4, edge_dim=2, add_self_loops=False), ref,
                            xs, xd, e, edge_attr=torch.randn(6, 2))


def test_one_edge_sage_equals_pyg_sage():
    from torch_geometric.nn import SAGEConv

    from recsys_router.models.components.gnn import OneEdgeSAGEConv
    torch.manual_seed(3)
    xs = torch.randn(4, 5, requires_grad=True)
    xd = torch.randn(6, 7, requires_grad=True)
    one = torch.tensor([[2, 0, 2, 3, 1], [0, 1, 2, 3, 5]])     # destination 4: no edge
    _same_outputs_and_grads(OneEdgeSAGEConv((5, 7), 3), SAGEConv((5, 7), 3), xs, xd, one)
    ref = SAGEConv((5, 7), 3)
    # written out by hand for destination 0 (its one source is node 2) and 4 (none)
    lean = OneEdgeSAGEConv((5, 7), 3)
    lean.load_state_dict(ref.state_dict())
    out = lean((xs, xd), one)
    torch.testing.assert_close(out[0], ref.lin_l(xs[2]) + ref.lin_r(xd[0]))
    torch.testing.assert_close(out[4], ref.lin_l.bias + ref.lin_r(xd[4]))
    # two edges into one destination: SAGEConv's own mean
    two = torch.tensor([[2, 0, 1], [0, 0, 3]])
    _same_outputs_and_grads(OneEdgeSAGEConv((5, 7), 3), SAGEConv((5, 7), 3), xs, xd, two)


def test_mean_sage_equals_pyg_sage():
    from torch_geometric.nn import SAGEConv

    from recsys_router.models.components.gnn import MeanSAGEConv
    torch.manual_seed(4)
    xs = torch.randn(9, 5, requires_grad=True)
    xd = torch.randn(6, 7, requires_grad=True)
    # destination 0: three sources (one twice), 2: one, 5: none; unsorted edge order
    e = torch.tensor([[3, 8, 1, 3, 0, 4, 7], [2, 0, 0, 0, 4, 1, 3]])
    got = _same_outputs_and_grads(MeanSAGEConv((5, 7), 3), SAGEConv((5, 7), 3), xs, xd, e)
    ref = SAGEConv((5, 7), 3)
    lean = MeanSAGEConv((5, 7), 3)
    lean.load_state_dict(ref.state_dict())
    out = lean((xs, xd), e)
    torch.testing.assert_close(out[0], ref.lin_l((xs[8] + xs[1] + xs[3]) / 3) + ref.lin_r(xd[0]))
    torch.testing.assert_close(out[5], ref.lin_l.bias + ref.lin_r(xd[5]))
    assert got.shape == (6, 3)
    # an edge from a node that does not exist: SAGEConv's own path raises, nothing is read
    with pytest.raises((IndexError, RuntimeError)):
        lean((xs, xd), torch.tensor([[9], [0]]))


def _plain_grid(hu, m, bias, w2, b2):
    """The heads on the grid written out: relu(hu @ m + bias) per (LLM, head) block, then the
    head's second-layer weight."""
    n_q, h = hu.shape
    r = torch.relu(hu @ m + bias).view(n_q, -1, 2, h)
    return (r * w2.view(1, 1, 2, h)).sum(-1) + b2


@pytest.mark.parametrize("chunk", [1, 5, 7, 256])
def test_grid_heads_in_chunks_equal_the_whole_grid(chunk):
    # 23 query rows: several chunks and a ragged last one; float64 so gradcheck is exact
    from recsys_router.models.components.pair_grid import grid_heads
    g = torch.Generator().manual_seed(chunk)
    h, n_l = 4, 3
    args = [torch.randn(s, generator=g, dtype=torch.float64, requires_grad=True)
            for s in ((23, h), (h, n_l * 2 * h), (n_l * 2 * h,), (2, h), (2,))]
    got, want = grid_heads(*args, chunk=chunk), _plain_grid(*args)
    torch.testing.assert_close(got, want)
    w = torch.randn(got.shape, generator=g, dtype=torch.float64)
    for a, b in zip(torch.autograd.grad((got * w).sum(), args),
                    torch.autograd.grad((want * w).sum(), args)):
        torch.testing.assert_close(a, b)
    assert torch.autograd.gradcheck(lambda *a: grid_heads(*a, chunk=chunk), args)


def test_grid_heads_reject_an_empty_chunk_and_skip_grads_not_asked_for():
    from recsys_router.models.components.pair_grid import grid_heads
    hu, m, bias = torch.ones(3, 2), torch.ones(2, 8, requires_grad=True), torch.zeros(8)
    with pytest.raises(ValueError, match="chunk must be >= 1"):
        grid_heads(hu, m, bias, torch.ones(2, 2), torch.zeros(2), chunk=0)
    out = grid_heads(hu, m, bias, torch.ones(2, 2), torch.zeros(2), chunk=2)
    (gm,) = torch.autograd.grad(out.sum(), [m])
    # d/dm of sum over rows, LLMs and heads of relu(2) * 1: each column gets the 3 rows' hu = 1
    torch.testing.assert_close(gm, torch.full((2, 8), 3.0))
    # its backward pass is not itself differentiable (once_differentiable): the first
    # derivative carries no graph, so a second one is refused, not computed wrongly
    hu2 = torch.ones(3, 2, requires_grad=True)
    (g1,) = torch.autograd.grad(grid_heads(hu2, m, bias, torch.ones(2, 2), torch.zeros(2)).sum(),
                                [hu2], create_graph=True)
    with pytest.raises(RuntimeError, match="grad"):
        torch.autograd.grad(g1.sum(), [hu2])


def test_summed_layer_equals_pyg_heteroconv_values_and_gradients():
    # every layer of a 3-layer network on a sampled step's graph: _summed_layer against the
    # HeteroConv module's own forward (stack and sum), outputs and gradients of every input
    from graph_builders import random_builder

    from recsys_router.models.components.gnn import _summed_layer
    b = random_builder(n=150, seed=3)
    g, _ = b.training_graph(np.random.default_rng(0), 0.3, targets=np.arange(0, 150, 4),
                            context_size=40)
    torch.manual_seed(1)
    net = HeteroRouterGNN({"query": 6, "task": 2, "llm": 3}, hidden=8, num_layers=3)
    edges = g.edge_index_dict
    attr = {et: g[et].edge_attr for et in g.edge_types if "edge_attr" in g[et]}
    for conv in net.convs:
        h = {t: torch.randn(g[t].num_nodes, 8, requires_grad=True)
             for t in ("query", "task", "llm")}
        got, want = _summed_layer(conv, h, edges, attr), conv(h, edges, edge_attr_dict=attr)
        assert set(got) == set(want) == {"query", "task", "llm"}
        w = {t: torch.randn_like(v) for t, v in want.items()}
        loss = [sum((o[t] * w[t]).sum() for t in o) for o in (got, want)]
        params = list(h.values()) + list(conv.parameters())
        for a, c in zip(torch.autograd.grad(loss[0], params), torch.autograd.grad(loss[1], params)):
            torch.testing.assert_close(a, c)
        for t in want:
            torch.testing.assert_close(got[t], want[t])


BAD_EDGES = {"negative source": [[-1, 0, 1], [0, 1, 2]], "source past the end": [[5, 0, 1], [0, 1, 2]],
             "negative destination": [[0, 1, 2], [-1, 1, 2]],
             "destination past the end": [[0, 1, 2], [3, 1, 2]]}


@pytest.mark.parametrize("bad", sorted(BAD_EDGES))
@pytest.mark.parametrize("conv", ["OneEdgeSAGEConv", "EdgeGATConv", "MeanSAGEConv"])
def test_fast_convolutions_refuse_edges_outside_the_nodes(conv, bad):
    from recsys_router.models.components import gnn
    torch.manual_seed(0)
    xs, xd = torch.randn(5, 4), torch.randn(3, 4)      # sources 0..4, destinations 0..2
    e = torch.tensor(BAD_EDGES[bad])
    if conv == "EdgeGATConv":
        c = gnn.EdgeGATConv((4, 4), 4, edge_dim=2, add_self_loops=False).eval()
        call = lambda: c((xs, xd), e, edge_attr=torch.randn(3, 2))   # noqa: E731
    else:
        c = getattr(gnn, conv)((4, 4), 4)
        call = lambda: c((xs, xd), e)                                 # noqa: E731
    with pytest.raises((IndexError, RuntimeError, ValueError)):
        call()
