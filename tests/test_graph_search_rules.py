"""Which neighbour search the graph router runs (exact or the cluster index) depends on the
train set alone, never on the batch being routed; a rebuilt pool (add/remove an LLM) is
searched as the fit's was; the index search works in bounded row blocks."""

from __future__ import annotations

import numpy as np
import torch

from graph_builders import random_builder
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.models.components import graph as graph_mod
from recsys_router.models.graph_module import GraphRouter

torch.set_num_threads(1)


def _exact_near(new_x, train_x, k):
    """Each new row's k most cosine-similar train rows, by a full sort."""
    a = new_x / np.linalg.norm(new_x, axis=1, keepdims=True)
    b = train_x / np.linalg.norm(train_x, axis=1, keepdims=True)
    return np.argsort(-(a.astype(np.float64) @ b.T.astype(np.float64)), axis=1,
                      kind="stable")[:, :k]


def test_new_queries_are_searched_exactly_below_the_threshold_whatever_the_batch(monkeypatch):
    b = random_builder(n=300, k=3)
    # the train set fits the exact search (300 x 300 cells), a batch of 400 would not
    monkeypatch.setattr(graph_mod, "EXACT_MAX_CELLS", 300 * 300)
    new = np.random.default_rng(5).normal(size=(400, 6)).astype(np.float32)
    _, _, near = b.new_query_links(new, ["a"] * 400)
    assert (near[1] == np.repeat(np.arange(400), 3)).all()
    np.testing.assert_array_equal(near[0].reshape(400, 3), _exact_near(new, b.train_x, 3))


def test_a_query_routed_alone_equals_it_in_a_batch_on_the_index_path(monkeypatch):
    d = make_synthetic(500, 4, 3, seed=0)
    tr, te = d.subset(np.arange(400)), d.subset(np.arange(400, 500))
    r = GraphRouter(hidden=16, max_epochs=2, encoder_options={"dim": 32}, seed=0).fit(tr)
    monkeypatch.setattr(graph_mod, "EXACT_MAX_CELLS", 400 * 50)   # 400 train: the index path
    batch = r.predict_scores(te)
    alone = np.vstack([r.predict_scores(te.subset([i])) for i in range(te.n_queries)])
    np.testing.assert_allclose(batch, alone, rtol=0, atol=1e-6)    # (float rounding only)


def test_removing_an_added_llm_restores_the_index_built_pool(monkeypatch):
    from recsys_router.models.components.graph_knn import neighbour_pool
    d = make_synthetic(500, 5, 3, seed=0)
    L = d.llm_names
    # the builder's rule sends these 400 train queries through its cluster index (the
    # knn module's own threshold is left as it is: the builder's rule must decide)
    monkeypatch.setattr(graph_mod, "EXACT_MAX_CELLS", 1000)
    r = GraphRouter(hidden=16, max_epochs=2, encoder_options={"dim": 32}, seed=0).fit(
        d.subset(np.arange(400), L[:4]))
    pool = r.builder_.neighbour_pool.copy()
    assert (pool != neighbour_pool(r.builder_.train_x, pool.shape[1])).any()   # not exact
    te = d.subset(np.arange(400, 500), L[:4])
    before = r.predict_scores(te)
    r.add_llm(L[4], d.subset(np.arange(410, 430), [L[4]]))
    r.remove_llm(L[4])
    np.testing.assert_array_equal(r.builder_.neighbour_pool, pool)
    np.testing.assert_array_equal(r.predict_scores(te), before)
