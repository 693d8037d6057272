"""The graph router's prediction of new queries in two parts (the train graph's states once,
then the new queries' own rows) equals the network over the whole joined graph
(:meth:`RoutingGraphBuilder.inference_graph`), the form it replaced; and a fitted router
keeps the train states until its network or builder changes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from graph_builders import random_builder
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.models.components.gnn import HeteroRouterGNN
from recsys_router.models.components.graph_predict import (kept_states, predict_graph,
                                                           predict_whole_graph, train_states)
from recsys_router.registry import make_router

torch.set_num_threads(1)


def _trained_net(builder, layers, seed=0, steps=6):
    """A network with trained (not initial) weights: a few steps on the builder's graphs."""
    torch.manual_seed(seed)
    net = HeteroRouterGNN({"query": 6, "task": 2, "llm": 3}, hidden=8, num_layers=layers,
                          dropout=0.2)
    opt = torch.optim.AdamW(net.parameters(), lr=0.05)
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        g, t = builder.training_graph(rng, 0.3)
        s, _ = net(g, torch.as_tensor(t["q"]), torch.as_tensor(t["l"]))
        loss = torch.nn.functional.binary_cross_entropy_with_logits(s, torch.as_tensor(t["y"]))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return net


@pytest.mark.parametrize("layers", [1, 2, 3])
def test_two_part_prediction_equals_the_whole_graph(layers):
    b = random_builder(n=150, n_llms=5, k=3, seed=layers, random_llm_features=True)
    net = _trained_net(b, layers)
    rng = np.random.default_rng(10 + layers)
    x = rng.normal(size=(9, 6)).astype(np.float32)
    # seen tasks, two unseen ones (appended task nodes) and a missing one ("unknown")
    tasks = ["a", "zeta", "b", "c", "alpha", "a", None, "zeta", "c"]
    want = predict_whole_graph(net, b, x, tasks)
    got = predict_graph(net, b, x, tasks)
    for a, w in zip(got, want):
        torch.testing.assert_close(a, w, rtol=1e-5, atol=1e-6)
    # with the states computed once and reused: the same numbers for any split of the batch
    st = train_states(net, b)
    parts = [predict_graph(net, b, x[i:i + 1], tasks[i:i + 1], states=st)[0] for i in range(9)]
    torch.testing.assert_close(torch.cat(parts), want[0], rtol=1e-5, atol=1e-6)


def test_prediction_keeps_the_networks_mode():
    b = random_builder(n=60, seed=3)
    net = _trained_net(b, 2, steps=1).train()
    a = predict_graph(net, b, np.ones((2, 6), np.float32), ["a", "b"])[0]
    assert net.training                                        # restored after predicting
    c = predict_graph(net, b, np.ones((2, 6), np.float32), ["a", "b"])[0]
    torch.testing.assert_close(a, c)                           # eval mode: no dropout draws


def test_fitted_router_keeps_train_states_until_its_network_changes():
    d = make_synthetic(160, 4, 3, seed=0)
    r = make_router("graph", hidden=8, max_epochs=2, batch_size=64,
                    encoder_options={"dim": 16}).fit(d.subset(np.arange(120)))
    new = d.subset(np.arange(120, 160))
    first = r.predict_scores(new)
    held = r._states_held[3]
    np.testing.assert_array_equal(r.predict_scores(new), first)
    assert r._states_held[3] is held                           # reused, not recomputed
    want = predict_whole_graph(r.net_, r.builder_, r.embed(new), new.tasks)[0].double().numpy()
    np.testing.assert_allclose(r.to_data_scale(1 / (1 + np.exp(-want))), first, rtol=1e-5,
                               atol=1e-6)
    with torch.no_grad():             # an in-place change of a weight the train states read
        r.net_.inp["query"].weight.mul_(1.5)
    moved = r.predict_scores(new)
    assert r._states_held[3] is not held
    assert not np.allclose(moved, first)
    want = predict_whole_graph(r.net_, r.builder_, r.embed(new), new.tasks)[0].double().numpy()
    np.testing.assert_allclose(r.to_data_scale(1 / (1 + np.exp(-want))), moved, rtol=1e-5,
                               atol=1e-6)


def test_fewer_train_queries_than_neighbours_and_an_empty_batch():
    b = random_builder(n=4, n_llms=3, k=6, seed=0)        # every train query is a neighbour
    net = _trained_net(b, 2, steps=1)
    x = np.random.default_rng(0).normal(size=(3, 6)).astype(np.float32)
    tasks = ["a", "unseen", None]
    for got, want in zip(predict_graph(net, b, x, tasks), predict_whole_graph(net, b, x, tasks)):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    s, c = predict_graph(net, b, x[:0], [])
    assert s.shape == c.shape == (0, 3)


def test_route_predicts_scores_and_costs_in_one_pass(monkeypatch):
    import recsys_router.models.graph_module as gm
    d = make_synthetic(160, 4, 3, seed=1)
    r = make_router("graph", hidden=8, max_epochs=2, batch_size=64,
                    encoder_options={"dim": 16}).fit(d.subset(np.arange(120)))
    assert r.has_costs_ and r.predict_costs(d.subset(np.arange(1))) is not None
    calls = []
    real = gm.predict_graph
    monkeypatch.setattr(gm, "predict_graph", lambda *a, **k: calls.append(1) or real(*a, **k))
    new = d.subset(np.arange(120, 130))
    r.route(new)
    assert len(calls) == 1                                     # scores and costs: one pass
    scores = r.predict_scores(new)
    assert len(calls) == 1 and scores.flags.writeable         # the kept pass, a fresh array
    # the same object with its task names changed in place: other inputs, a new pass
    new.queries["task"] = "never-seen"
    moved = r.predict_scores(new)
    assert len(calls) == 2 and not np.allclose(moved, scores)
    want = predict_whole_graph(r.net_, r.builder_, r.embed(new), new.tasks)[0]
    np.testing.assert_allclose(r.to_data_scale(1 / (1 + np.exp(-want.double().numpy()))), moved,
                               rtol=1e-5, atol=1e-6)


def test_kept_states_follow_the_network_and_the_builder():
    b = random_builder(n=80, seed=4)
    net = _trained_net(b, 2, steps=2)
    owner = type("Owner", (), {})()
    first = kept_states(owner, net, b)
    assert kept_states(owner, net, b) is first                 # nothing changed: kept
    opt = torch.optim.SGD(net.parameters(), lr=0.5)            # a training step in place
    g, t = b.training_graph(np.random.default_rng(0), 0.3)
    net(g, torch.as_tensor(t["q"]), torch.as_tensor(t["l"]))[0].sum().backward()
    opt.step()
    after = kept_states(owner, net, b)
    assert after is not first
    torch.testing.assert_close(after.llm_final, train_states(net, b).llm_final)
    assert not torch.allclose(after.llm_final, first.llm_final)
    other = random_builder(n=80, seed=4)                       # equal arrays, another builder
    assert kept_states(owner, net, other) is not after
