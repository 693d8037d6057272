"""Task node features of the graph router with an encoder that reads no text (precomputed
embeddings): a fixed vector per task *name* (one-hot by the fit's sorted train tasks, a
hashed unit vector past the encoder's dimensions, zeros for any other name), never a row of
``np.eye`` by position in whatever list is featurised; kept by name through ``add_llm`` and
in artifacts, and the one-hots of artifacts that did not store them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from recsys_router.data import RoutingData
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.models.graph_module import GraphRouter
from recsys_router.router_state import router_from_state, router_to_state

torch.set_num_threads(1)


def _precomputed(tmp_path, d, dim):
    np.save(tmp_path / "e.npy", np.random.default_rng(0).normal(size=(d.n_queries, dim))
            .astype(np.float32))
    (tmp_path / "e.ids.txt").write_text("\n".join(d.query_ids) + "\n")
    return f"precomputed:{tmp_path / 'e.npy'}"


def _with_tasks(data, tasks):
    q = data.queries.copy()
    q["task"] = tasks
    return RoutingData(q, data.llms, data.scores, data.costs)


def _table(router):
    b = router.builder_
    return dict(zip(b.task_names, b.task_x))


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    d = make_synthetic(300, 5, 3, seed=0)
    enc = _precomputed(tmp_path_factory.mktemp("enc"), d, 16)
    tr = d.subset(np.arange(200), d.llm_names[:4])
    r = GraphRouter(hidden=16, max_epochs=2, encoder=enc, seed=0).fit(tr)
    return d, r


def test_unseen_tasks_get_zeros_whatever_the_batch(fitted):
    d, r = fitted
    eye = np.eye(3, 16, dtype=np.float32)
    assert r.builder_.task_names == ["topic_0", "topic_1", "topic_2"]
    np.testing.assert_array_equal(r.builder_.task_x, eye)
    te = _with_tasks(d.subset(np.arange(200, 300), d.llm_names[:4]),
                     ["zzz_new"] * 50 + ["aaa_new"] * 50)
    _, unseen_x, _ = r.builder_.new_query_links(np.zeros((2, 16), np.float32),
                                                ["zzz_new", "aaa_new"])
    np.testing.assert_array_equal(unseen_x, np.zeros((2, 16)))   # no trained task's one-hot
    both = r.predict_scores(te)
    alone = r.predict_scores(te.subset(np.arange(50)))            # without the other new task
    np.testing.assert_allclose(both[:50], alone, rtol=0, atol=1e-6)


def test_add_llm_keeps_each_tasks_features_and_artifacts_keep_them(fitted):
    import copy
    d, fit = fitted
    r = copy.deepcopy(fit)
    p = d.subset(np.arange(210, 220), [d.llm_names[4]])
    r.add_llm(d.llm_names[4], _with_tasks(p, ["aaa_probe"] * 10))   # sorts before topic_0
    assert r.builder_.task_names == ["aaa_probe", "topic_0", "topic_1", "topic_2"]
    table = _table(r)
    for i in range(3):
        np.testing.assert_array_equal(table[f"topic_{i}"], np.eye(16, dtype=np.float32)[i])
    np.testing.assert_array_equal(table["aaa_probe"], np.zeros(16))
    doc, arrays = router_to_state(r)
    back = router_from_state(doc, arrays, "test")
    for name, row in _table(back).items():
        np.testing.assert_array_equal(row, table[name], err_msg=name)
    te = _with_tasks(d.subset(np.arange(200, 300)), ["topic_1"] * 50 + ["new"] * 50)
    np.testing.assert_array_equal(back.predict_scores(te), r.predict_scores(te))


def test_more_tasks_than_dimensions(tmp_path):
    d = make_synthetic(120, 3, 6, seed=1)
    r = GraphRouter(hidden=8, max_epochs=1, encoder=_precomputed(tmp_path, d, 4), seed=0).fit(d)
    x = r.builder_.task_x
    assert x.shape == (6, 4)
    np.testing.assert_array_equal(x[:4], np.eye(4))
    np.testing.assert_allclose(np.linalg.norm(x[4:], axis=1), 1.0, rtol=1e-6)   # not zero rows
    assert not np.allclose(x[4], x[5]) and np.abs(x[4:]).max(axis=1).min() < 1.0  # not one-hots
    # a fixed vector per name: a second fit on the same names gives the same rows
    again = GraphRouter(hidden=8, max_epochs=1, encoder=_precomputed(tmp_path, d, 4),
                        seed=1).fit(d)
    np.testing.assert_array_equal(again.builder_.task_x, x)


def test_artifact_without_task_features_loads_with_its_one_hots(fitted):
    d, r = fitted
    doc, arrays = router_to_state(r)
    arrays = {k: v for k, v in arrays.items() if not k.endswith("builder_/task_x")}
    assert len(arrays) == len(router_to_state(r)[1]) - 1            # (it was stored)
    old = router_from_state(doc, arrays, "test")
    np.testing.assert_array_equal(old.builder_.task_x, np.eye(3, 16))   # by stored name order
    _, unseen_x, _ = old.builder_.new_query_links(np.zeros((1, 16), np.float32), ["zzz"])
    np.testing.assert_array_equal(unseen_x, np.zeros((1, 16)))
    te = d.subset(np.arange(200, 300), d.llm_names[:4])
    np.testing.assert_array_equal(old.predict_scores(te), r.predict_scores(te))


@pytest.mark.parametrize("bad", ["rows", "dtype", "nan", "width"])
def test_stored_task_features_are_validated(fitted, bad):
    _, r = fitted
    doc, arrays = router_to_state(r)
    key = next(k for k in arrays if k.endswith("builder_/task_x"))
    x = arrays[key]
    arrays[key] = {"rows": np.vstack([x, x[:1]]), "dtype": x.astype(np.float64),
                   "nan": np.where(np.eye(*x.shape, dtype=bool), np.nan, x).astype(np.float32),
                   "width": x[:, :8]}[bad]
    with pytest.raises(ValueError, match="task_x"):
        router_from_state(doc, arrays, "test")
