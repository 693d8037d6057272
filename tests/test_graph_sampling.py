"""Graph router's sampled training subgraphs: the neighbour pool gives the exact kNN edges,
a sampled step holds only its targets, their neighbours and a bounded random context."""

from __future__ import annotations

import numpy as np
import pytest

from recsys_router.models.components.graph import knn_edges, neighbour_pool
from recsys_router.models.graph_module import GraphModule, GraphRouter
from graph_builders import random_builder
from recsys_router.datasets.synthetic import make_synthetic


def _edges(e) -> set:
    e = np.asarray(e)
    return {(int(s), int(d)) for s, d in zip(e[0], e[1])}


def _builder(n=120, n_llms=4, k=3, seed=0):
    return random_builder(n, n_llms, k, seed)


def test_pool_is_each_rows_nearest_others_by_hand():
    e = np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0], [0.6, 0.8]])
    # cosines: 0-1 .8, 0-2 0, 0-3 .6, 1-2 .6, 1-3 .96, 2-3 .8
    assert neighbour_pool(e, 2).tolist() == [[1, 3], [3, 0], [3, 1], [1, 2]]
    assert neighbour_pool(e[:1], 3).shape == (1, 0)


def test_full_step_near_edges_equal_exact_knn_over_context():
    b = _builder()
    targets = np.arange(0, 120, 4)                        # 25 % of the queries
    g, t = b.training_graph(np.random.default_rng(0), 0.3, targets=targets, context_size=0)
    assert t["nodes"].tolist() == list(range(120))
    context = np.setdiff1d(np.arange(120), targets)
    want = _edges(knn_edges(b.train_x, context, b.k))
    assert _edges(g["query", "near", "query"].edge_index.numpy()) == want
    assert set(t["q"].tolist()) == set(targets.tolist())
    assert not set(g["query", "rates", "llm"].edge_index[0].tolist()) & set(targets.tolist())


def test_sampled_step_holds_targets_their_neighbours_and_bounded_context():
    b = _builder(n=300)
    rng = np.random.default_rng(1)
    targets = rng.choice(300, 20, replace=False)
    g, t = b.training_graph(rng, 0.3, targets=targets, context_size=30)
    nodes = t["nodes"]
    assert len(nodes) == g["query"].x.shape[0]
    assert len(nodes) <= 20 + 20 * b.k + 30
    np.testing.assert_array_equal(g["query"].x.numpy(), b.train_x[nodes])
    # each target's neighbours in the subgraph are its exact k nearest context queries
    context = np.setdiff1d(np.arange(300), targets)
    exact = knn_edges(b.train_x, context, b.k)
    near = g["query", "near", "query"].edge_index.numpy()
    for q in targets:
        want = set(exact[0][exact[1] == q].tolist())
        got = set(nodes[near[0][nodes[near[1]] == q]].tolist())
        assert got == want
    # the predicted pairs are every observed cell of the targets, none of them is an edge
    ids = nodes[t["q"]]
    assert set(ids.tolist()) == set(targets.tolist())
    assert len(ids) == int((~np.isnan(b.scores[targets])).sum())
    np.testing.assert_array_equal(t["y"], b.scores[ids, t["l"]])
    rated = nodes[g["query", "rates", "llm"].edge_index[0].numpy()]
    assert not set(rated.tolist()) & set(targets.tolist())
    # a rating edge's attributes are that cell's score and scaled cost
    rl = g["query", "rates", "llm"].edge_index[1].numpy()
    np.testing.assert_allclose(g["query", "rates", "llm"].edge_attr[:, 0].numpy(),
                               b.scores[rated, rl])
    np.testing.assert_allclose(g["query", "rates", "llm"].edge_attr[:, 1].numpy(),
                               b.costs[rated, rl])


def test_targets_beyond_the_cap_are_subsampled():
    b = _builder(n=100)
    _, t = b.training_graph(np.random.default_rng(0), 0.2, targets=np.arange(60))
    assert len(np.unique(t["nodes"][t["q"]])) == 20


def test_inference_graph_near_edges_equal_exact_knn():
    b = _builder(n=80)
    new = np.random.default_rng(3).normal(size=(7, 6)).astype(np.float32)
    g, off = b.inference_graph(new, ["a"] * 7)
    want = _edges(knn_edges(np.vstack([b.train_x, new]), np.arange(80), b.k))
    assert off == 80 and _edges(g["query", "near", "query"].edge_index.numpy()) == want


def test_sampled_training_learns_like_full_batch():
    parts = make_synthetic(300, 4, 3, seed=5).split((0.7, 0.3), seed=0)
    tr, te = parts["train"], parts["test"]
    fast = {"encoder_options": {"dim": 32}, "hidden": 16, "max_epochs": 5, "batch_size": 128}
    gains = {}
    for cs in (0, 40):
        r = GraphRouter(context_size=cs, **fast).fit(tr)
        idx = r.route_indices(te)
        gains[cs] = te.scores[np.arange(te.n_queries), idx].mean() - np.nanmean(te.scores)
    assert min(gains.values()) > 0.05, gains


def test_rejects_negative_context_size():
    with pytest.raises(ValueError, match="context_size"):
        GraphModule(n_llms=3, embed_dim=4, context_size=-1)
