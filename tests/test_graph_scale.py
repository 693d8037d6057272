"""Graph router at scale: the approximate neighbour search (recall against a plain full sort),
the last layer computed only for the predicted queries (equal to the full computation), the
LLM nodes reading a random context sample, and epochs over queries (each record once)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graph_builders import random_builder
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.models.components import graph_knn
from recsys_router.models.components.gnn import HeteroRouterGNN
from recsys_router.models.components.graph import RoutingGraphBuilder
from recsys_router.models.components.graph_knn import ClusterIndex, nearest_context, neighbour_pool
from recsys_router.models.graph_module import GraphRouter


def _clustered(n, d=16, centres=40, seed=0):
    """Unit vectors around ``centres`` random directions (text embeddings are clustered)."""
    rng = np.random.default_rng(seed)
    c = rng.normal(size=(centres, d))
    x = c[rng.integers(centres, size=n)] + 0.35 * rng.normal(size=(n, d))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _exact(rows, ctx, k, exclude_self=False):
    """Plain reference: full stable sort of the cosine similarities."""
    sims = rows.astype(np.float64) @ ctx.astype(np.float64).T
    if exclude_self:
        np.fill_diagonal(sims, -np.inf)
    return np.argsort(-sims, axis=1, kind="stable")[:, :k]


def _recall(got, want):
    return np.mean([len(set(g) & set(w)) / len(w) for g, w in zip(got.tolist(), want.tolist())])


def test_cluster_index_recall_against_full_sort():
    x = _clustered(3000)
    got = ClusterIndex(x, seed=0).search(x, 10, own=np.arange(3000))
    want = _exact(x, x, 10, exclude_self=True)
    assert (got != np.arange(3000)[:, None]).all()          # never itself
    assert _recall(got, want) >= 0.9
    # probing every cell is the exact search
    every = ClusterIndex(x, n_cells=30, probe=30, seed=0).search(x, 10, own=np.arange(3000))
    assert _recall(every, want) == 1.0


def test_large_sets_go_through_the_index(monkeypatch):
    both = _clustered(2800, seed=1)       # new queries from the same topics as the context
    x, new = both[:2500], both[2500:]
    monkeypatch.setattr(graph_knn, "EXACT_MAX_CELLS", 1000)   # force the approximate path
    built = []
    orig = graph_knn.ClusterIndex.__init__

    def spy(self, *a, **kw):
        built.append(1)
        orig(self, *a, **kw)
    monkeypatch.setattr(graph_knn.ClusterIndex, "__init__", spy)
    pool = neighbour_pool(x, 8)
    assert built and pool.shape == (2500, 8)
    assert _recall(pool, _exact(x, x, 8, exclude_self=True)) >= 0.9
    e = nearest_context(new, x, 5)
    assert e.shape == (2, 1500) and (e[1] == np.repeat(np.arange(300), 5)).all()
    assert _recall(e[0].reshape(300, 5), _exact(new, x, 5)) >= 0.9


def test_small_index_inputs_and_empty_cells():
    x = _clustered(5, d=4)
    idx = ClusterIndex(x, n_cells=5, probe=1, seed=0)   # too few per cell: probes widen
    got = idx.search(x, 4, own=np.arange(5))
    assert sorted(map(sorted, got.tolist())) == sorted(
        sorted(set(range(5)) - {i}) for i in range(5))
    with pytest.raises(ValueError, match="at least one"):
        ClusterIndex(np.zeros((0, 4), np.float32))


def _builder(n=200, n_llms=4, k=3, seed=0):
    return random_builder(n, n_llms, k, seed, random_llm_features=True)


@pytest.mark.parametrize("context_size", [0, 40])
def test_last_layer_for_the_predicted_queries_equals_the_full_layer(context_size):
    b = _builder()
    g, t = b.training_graph(np.random.default_rng(0), 0.3, targets=np.arange(0, 200, 7),
                            context_size=context_size)
    torch.manual_seed(0)
    net = HeteroRouterGNN({"query": 6, "task": 2, "llm": 3}, hidden=8, num_layers=2).eval()
    q = torch.as_tensor(np.unique(t["q"]))
    with torch.no_grad():
        full = net.embed(g)
        part = net.embed(g, final_queries=q)
        s, c = net(g, torch.as_tensor(t["q"]), torch.as_tensor(t["l"]))
    torch.testing.assert_close(part["query"][q], full["query"][q])
    torch.testing.assert_close(part["llm"], full["llm"])
    # the full computation, written out: head of the full embeddings
    hq, hl = full["query"][torch.as_tensor(t["q"])], full["llm"][torch.as_tensor(t["l"])]
    z = torch.cat([hq, hl, hq * hl], dim=-1)
    torch.testing.assert_close(s, net.score_head(z).squeeze(-1))
    torch.testing.assert_close(c, net.cost_head(z).squeeze(-1))


def test_last_layer_for_the_predicted_queries_has_the_full_layers_gradients():
    # the sliced last layer against the plain full-graph layer (every row, HeteroConv's own
    # call): same loss, same parameter gradients
    b = _builder()
    g, t = b.training_graph(np.random.default_rng(1), 0.3, targets=np.arange(3, 200, 5),
                            context_size=40)
    torch.manual_seed(1)
    net = HeteroRouterGNN({"query": 6, "task": 2, "llm": 3}, hidden=8, num_layers=2).eval()
    q, l_ = torch.as_tensor(t["q"]), torch.as_tensor(t["l"])
    y = torch.as_tensor(t["y"], dtype=torch.float32)

    def grads(sliced: bool):
        net.zero_grad()
        h = net.embed(g, final_queries=q) if sliced else net.embed(g)
        hq, hl = h["query"][q], h["llm"][l_]
        z = torch.cat([hq, hl, hq * hl], dim=-1)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            net.score_head(z).squeeze(-1), y) + net.cost_head(z).pow(2).mean()
        loss.backward()
        return loss.detach(), {n: p.grad.clone() for n, p in net.named_parameters()
                               if p.grad is not None}

    loss_full, g_full = grads(False)
    loss_part, g_part = grads(True)
    torch.testing.assert_close(loss_part, loss_full)
    # task-destination convolutions of the last layer get no gradient either way
    assert set(g_part) <= set(g_full)
    for name, grad in g_full.items():
        torch.testing.assert_close(g_part.get(name, torch.zeros_like(grad)), grad,
                                   msg=lambda m, n=name: f"{n}: {m}")


def test_sampled_step_llms_read_only_the_random_context():
    b = _builder(n=400)
    rng = np.random.default_rng(2)
    targets = rng.choice(400, 30, replace=False)
    g, t = b.training_graph(rng, 0.3, targets=targets, context_size=25)
    nodes = t["nodes"]
    rates = g["query", "rates", "llm"].edge_index.numpy()
    rated_by = g["llm", "rated_by", "query"].edge_index.numpy()
    readers = set(nodes[rates[0]].tolist())
    # every context query in the step reads its own ratings; the LLMs read <= 25 of them
    ctx = set(nodes.tolist()) - set(targets.tolist())
    want = {(int(q), int(j)) for q in ctx for j in np.flatnonzero(~np.isnan(b.scores[q]))}
    assert {(int(nodes[q]), int(j)) for j, q in zip(rated_by[0], rated_by[1])} == want
    assert len(readers) <= 25 and readers <= ctx
    assert {(int(nodes[q]), int(j)) for q, j in zip(rates[0], rates[1])} == \
        {(q, j) for q, j in want if q in readers}
    np.testing.assert_allclose(g["query", "rates", "llm"].edge_attr[:, 0].numpy(),
                               b.scores[nodes[rates[0]], rates[1]])


def _fit_recording_targets(monkeypatch, d, **params):
    """Fit a one-epoch graph router on ``d``; return it and the (query, LLM) target cells of
    every training step, as a (2, cells) array per step."""
    seen = []
    orig = RoutingGraphBuilder.training_graph

    def spy(self, *a, **kw):
        g, t = orig(self, *a, **kw)
        seen.append(np.stack([t["nodes"][t["q"]], t["l"]]))
        return g, t
    monkeypatch.setattr(RoutingGraphBuilder, "training_graph", spy)
    r = GraphRouter(hidden=8, max_epochs=1, val_fraction=0, encoder_options={"dim": 16},
                    **params).fit(d)
    return r, seen


def _assert_each_record_once(d, seen):
    cells = np.concatenate(seen, axis=1)
    assert cells.shape[1] == int((~np.isnan(d.scores)).sum())   # every record, once
    assert len({(int(a), int(b)) for a, b in cells.T}) == cells.shape[1]


def test_one_epoch_predicts_each_training_record_once(monkeypatch):
    d = make_synthetic(150, 3, 2, seed=4)
    r, seen = _fit_recording_targets(monkeypatch, d, batch_size=40, target_fraction=0.5)
    assert r.steps_ == len(seen) == 4                          # ceil(150 / 40) query batches
    _assert_each_record_once(d, seen)


def test_default_batches_hold_at_most_a_steps_targets(monkeypatch):
    # n = 2,540 train queries: the rule's batch (1,024) exceeds cap = int(0.3 n) = 762, so
    # ceil(2540 / 762) = 4 equal batches of 635. Steps: a step's graph holds all 2,540
    # queries (635 x 6 + 4,096 > 2,540), so the cap is 720,000 // 2,540 = 283; 60 passes
    # would be 240 steps, raised to the floor min(300, 283) = 283
    p = GraphRouter()._plan(2540)
    assert (p.batch_size, p.max_steps) == (635, 283)
    assert GraphRouter(target_fraction=0.5)._plan(2540).batch_size == 1024   # cap 1,270
    assert GraphRouter()._plan(90_000).batch_size == 1024                   # cap 27,000
    assert GraphRouter(batch_size=100)._plan(2540).batch_size == 100        # given: kept
    # a default one-epoch fit on 150 queries: cap 45, 4 batches of 38 (the last 36), each
    # record predicted once and no batch query dropped by the cap
    d = make_synthetic(150, 3, 2, seed=5)
    r, seen = _fit_recording_targets(monkeypatch, d)
    assert r.plan_["batch_size"] == 38 and r.steps_ == len(seen) == 4
    _assert_each_record_once(d, seen)


@pytest.mark.parametrize("dense", [True, False])
def test_edge_gat_equals_pyg_gat_with_the_same_weights(dense, monkeypatch):
    """EdgeGATConv (dense attention matrix, or GATConv's edge path with the cheaper edge
    term) gives GATConv's outputs and gradients; nodes without an edge get the bias."""
    from torch_geometric.nn import GATConv

    from recsys_router.models.components import gnn
    if not dense:
        monkeypatch.setattr(gnn, "_DENSE_CELLS", 0)
    torch.manual_seed(0)
    ref = GATConv((5, 6), 4, edge_dim=2, add_self_loops=False)
    lean = gnn.EdgeGATConv((5, 6), 4, edge_dim=2, add_self_loops=False)
    lean.load_state_dict(ref.state_dict())
    xs, xd = torch.randn(7, 5, requires_grad=True), torch.randn(4, 6)
    e = torch.tensor([[0, 1, 2, 3, 4, 5, 6, 0], [0, 0, 1, 1, 1, 2, 2, 2]])  # node 3: no edge
    attr = torch.randn(8, 2)
    got, want = lean((xs, xd), e, edge_attr=attr), ref((xs, xd), e, edge_attr=attr)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(got[3], ref.bias)
    g1 = torch.autograd.grad(got.square().sum(), [xs, *lean.parameters()])
    g2 = torch.autograd.grad(want.square().sum(), [xs, *ref.parameters()])
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b)
    empty = torch.zeros((2, 0), dtype=torch.long)
    torch.testing.assert_close(lean((xs, xd), empty, edge_attr=torch.zeros(0, 2)),
                               ref((xs, xd), empty, edge_attr=torch.zeros(0, 2)))


def test_default_steps_follow_the_graph_work_budget():
    # 567 queries: batches of ceil(567 / ceil(567 / 170)) = 142; cap 720,000 // 567 = 1,269,
    # 60 passes = 240 steps -> the 300-step floor
    assert (GraphRouter()._plan(567).batch_size, GraphRouter()._plan(567).max_steps) == (142, 300)
    # 90,000 queries: sampled subgraphs of min(90,000, 1,024 x 6 + 4,096) = 10,240 nodes ->
    # 720,000 // 10,240 = 70, clipped up to 80
    assert GraphRouter()._plan(90_000).max_steps == 80
    # full-batch steps on 90,000 queries (context_size=0): 8, clipped up to 80
    assert GraphRouter(context_size=0)._plan(90_000).max_steps == 80
    # k = 1 on 9,000 queries: min(9,000, 1,024 x 2 + 4,096) = 6,144 nodes -> cap 117;
    # 24 x (30,000 / 9,000) ** 0.5 = 43.8 passes would be 386 steps
    assert GraphRouter(k=1)._plan(9000).max_steps == 117
    # a given budget is kept: 2 epochs of 142-query batches = 8 steps
    assert GraphRouter(max_epochs=2)._plan(567).max_steps == 8
    assert GraphRouter(max_steps=50)._plan(567).max_steps == 50


@pytest.mark.parametrize("unit_rows", [True, False])
def test_context_index_normalises_only_rows_that_are_not_unit(unit_rows, monkeypatch):
    from recsys_router.models.components import graph as graph_mod
    b = random_builder(n=300)
    if unit_rows:
        b.train_x = b.train_x / np.linalg.norm(b.train_x, axis=1, keepdims=True)
    raw = b.train_x.copy()
    monkeypatch.setattr(graph_mod, "EXACT_MAX_CELLS", 1000)        # the index path
    idx = b.context_index(300)
    assert idx is not None and (idx.ctx is b.train_x) == unit_rows   # no copy of unit rows
    np.testing.assert_array_equal(b.train_x, raw)                     # never changed in place
    np.testing.assert_allclose(np.linalg.norm(idx.ctx, axis=1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(idx.ctx, raw / np.linalg.norm(raw, axis=1, keepdims=True),
                               rtol=1e-6, atol=1e-7)
    assert b.context_index(300) is idx                                # built once
