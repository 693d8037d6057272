"""Graph router: graph construction by hand, no leakage, quality, cost head, contract."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from recsys_router.models.components.graph import RoutingGraphBuilder, build_graph, knn_edges
from recsys_router.models.graph_module import GraphRouter
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.registry import make_router
from router_contract import RouterContract

torch.set_num_threads(1)
FAST = {"encoder_options": {"dim": 64}, "hidden": 16, "max_epochs": 8, "batch_size": 64}


def test_knn_edges_by_hand():
    e = np.array([[1.0, 0.0], [0.8, 0.6], [0.0, 1.0], [0.6, 0.8]])
    # context {0, 2, 3}; cosines: q1 -> 3 (0.96) then 0 (0.8); q3 -> 2 (0.8) ties 0 (0.6) no
    src, dst = knn_edges(e, np.array([0, 2, 3]), 2)
    got = {(int(s), int(d)) for s, d in zip(src, dst)}
    assert got == {(3, 0), (2, 0), (3, 1), (0, 1), (3, 2), (0, 2), (2, 3), (0, 3)}


def _builder():
    x = np.eye(4, dtype=np.float32)
    scores = np.array([[1, 0], [0, 1], [1, np.nan], [1, 1]], np.float32)
    costs = np.full((4, 2), 2.0, np.float32)
    return RoutingGraphBuilder(x, ["a", "a", "b", None], scores, costs, np.ones((2, 3)),
                               lambda names: np.ones((len(names), 2)), k=1, cost_scale=2.0)


def test_training_graph_hides_target_ratings():
    b = _builder()
    g, t = b.training_graph(np.random.default_rng(0), 0.5)
    rated = set(g["query", "rates", "llm"].edge_index[0].tolist())
    targets = set(t["q"].tolist())
    assert targets and not rated & targets                 # no edge of a target query
    assert rated | targets == {0, 1, 2, 3}
    np.testing.assert_allclose(g["query", "rates", "llm"].edge_attr[:, 1].numpy(), 1.0)  # 2 / 2
    n_obs = sum(int((~np.isnan(b.scores[q])).sum()) for q in targets)
    assert len(t["y"]) == n_obs
    # target queries do not feed their task node
    assert not set(g["query", "in", "task"].edge_index[0].tolist()) & targets


def test_inference_graph_appends_new_queries_and_tasks():
    b = _builder()
    g, off = b.inference_graph(np.ones((2, 4), np.float32), ["b", "new-task"])
    assert off == 4 and g["query"].x.shape[0] == 6
    assert g["task"].x.shape[0] == 4                       # a, b, unknown + new-task
    has = g["task", "has", "query"].edge_index
    assert has[1].tolist()[-2:] == [4, 5]
    assert g["query", "rates", "llm"].edge_index.shape[1] == 7   # observed train cells
    assert set(g["query", "near", "query"].edge_index[0].tolist()) <= {0, 1, 2, 3}


def test_build_graph_shapes():
    g = build_graph(np.zeros((3, 2)), np.array([0, 0, 1]), np.zeros((2, 5)), np.zeros((4, 3)),
                    np.array([0, 1]), np.array([3, 2]), np.array([[1, .5], [0, .2]]),
                    np.array([0, 1]), 1)
    assert g["llm", "rated_by", "query"].edge_index.tolist() == [[3, 2], [0, 1]]
    assert g["query", "in", "task"].edge_index.shape[1] == 2


def test_beats_random_and_predicts_costs():
    wins = []
    for seed in (1, 2):
        parts = make_synthetic(300, 5, 4, seed=seed).split((0.7, 0.3), seed=0)
        tr, te = parts["train"], parts["test"]
        r = GraphRouter(**FAST).fit(tr)
        idx = r.route_indices(te)
        wins.append(te.scores[np.arange(te.n_queries), idx].mean() - np.nanmean(te.scores))
        pc = r.predict_costs(te)
        # the cost head orders LLMs by price like the true costs do
        assert np.corrcoef(pc.mean(axis=0), te.costs.mean(axis=0))[0, 1] > 0.8
        assert (pc >= 0).all()
    assert min(wins) > 0.05, wins


def test_rejects_scores_outside_unit_interval():
    d = make_synthetic(60, 3, 2, seed=0)
    from recsys_router.data import RoutingData
    bad = RoutingData(d.queries, d.llms, d.scores * 5, d.costs)
    with pytest.raises(Exception, match=r"\[0, 1\]"):
        GraphRouter(**FAST, score_transform="identity").fit(bad)
    # by default the 0/5 scores are recognised as grades and scaled to [0, 1] for training;
    # predictions come back on the 0..5 scale
    r = GraphRouter(**FAST).fit(bad)
    assert r.score_scale_.kind == "grades"
    p = r.predict_scores(bad)
    assert p.min() >= 0.0 and p.max() <= 5.0 and p.max() > 1.0


class TestGraphContract(RouterContract):
    router_factory = staticmethod(lambda: make_router("graph", **FAST))
    keeps_others = False  # the new LLM's node and probe edges join the message passing


def test_graph_components_split_stays_within_the_module_size_limit():
    """graph.py (construction + builder state) and gnn.py (the network) each stay under ~400
    lines, and the network is still importable from graph.py, where callers import it."""
    from pathlib import Path

    from recsys_router.models.components import gnn, graph
    assert graph.HeteroRouterGNN is gnn.HeteroRouterGNN and "HeteroRouterGNN" in graph.__all__
    for mod in (graph, gnn):
        n = len(Path(mod.__file__).read_text(encoding="utf-8").splitlines())
        assert n <= 400, f"{mod.__name__}: {n} lines"
