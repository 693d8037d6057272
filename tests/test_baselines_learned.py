"""Embedding routers on tiny hand-made embeddings (kNN, PRkNN, C-RoBERTa, SVM, LinearR,
MLPR, MLC), NaN masking and text errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from recsys_router.data import RoutingData
from recsys_router.errors import DataValidationError

from recsys_router.models.baselines import (ClusterRouter, KNNRouter, LinearRRouter, MLCRouter, MLPRRouter,
                              PRKnnRouter, SVMRouter)
from recsys_router.models.baselines.neighbours import knn_indices

torch.set_num_threads(1)


class DictEncoder:
    """Test encoder: fixed vectors looked up by query id (no text needed)."""

    needs_fit = False
    needs_text = False
    identity = "dict"

    def __init__(self, vectors: dict):
        self.vectors = {k: np.asarray(v, dtype=np.float32) for k, v in vectors.items()}
        self.dim = len(next(iter(self.vectors.values())))

    def encode(self, texts, query_ids=None):
        return np.stack([self.vectors[q] for q in query_ids])


def _data(ids, scores, costs=None):
    return RoutingData(list(ids), ["a", "b"][:np.shape(scores)[1]] if np.shape(scores)[1] <= 2
                       else [f"m{j}" for j in range(np.shape(scores)[1])], scores, costs)


# ---------------------------------------------------------------------------- kNN
VEC = {"q1": (0, 1), "q2": (0.01, 2), "q3": (1, 0), "q4": (5, 0.1), "t": (1, 0.05), "t2": (0.01, 2)}
TRAIN = _data(["q1", "q2", "q3", "q4"], [[1, 0], [1, np.nan], [0, 1], [0, 0]])


def test_knn_cosine_hand_example():
    enc = DictEncoder(VEC)
    t = _data(["t"], [[np.nan, np.nan]])
    # cosine order from t: q4 (angle diff .03 rad), q3 (.05), then q2, q1
    r = KNNRouter(k=2, metric="cosine", encoder=enc).fit(TRAIN)
    assert r.neighbours(t).tolist() == [[3, 2]]
    np.testing.assert_allclose(r.predict_scores(t), [[0.0, 0.5]])
    r3 = KNNRouter(k=3, metric="cosine", encoder=enc).fit(TRAIN)
    # third neighbour is q2 (0.01, 2) (nearer in angle than q1): a = (0+0+1)/3, and
    # b = (0+1)/2 because q2's NaN for b is skipped
    assert r3.neighbours(t).tolist() == [[3, 2, 1]]
    np.testing.assert_allclose(r3.predict_scores(t), [[1 / 3, 0.5]])
    assert r3.route(t).tolist() == ["b"]


def test_knn_euclidean_and_fallback_for_unobserved_neighbours():
    enc = DictEncoder(VEC)
    t = _data(["t", "t2"], [[np.nan, np.nan]] * 2)
    r = KNNRouter(k=1, metric="euclidean", encoder=enc).fit(TRAIN)
    # t -> q3 [0, 1]; t2 -> q2 [1, NaN]: b falls back to its train mean (0 + 1 + 0) / 3
    np.testing.assert_allclose(r.predict_scores(t), [[0.0, 1.0], [1.0, 1 / 3]])


def test_knn_matches_sklearn_neighbours():
    from sklearn.neighbors import NearestNeighbors
    rng = np.random.default_rng(0)
    xt, xq = rng.normal(size=(60, 6)), rng.normal(size=(15, 6))
    for metric in ("cosine", "euclidean"):
        ref = NearestNeighbors(n_neighbors=7, metric=metric).fit(xt).kneighbors(xq)[1]
        np.testing.assert_array_equal(knn_indices(xq, xt, 7, metric), ref)


def test_prknn_defaults_and_validation():
    r = PRKnnRouter()
    assert (r.k, r.metric) == (5, "cosine")
    assert KNNRouter().k is None     # chosen by inner validation
    with pytest.raises(ValueError, match="metric"):
        KNNRouter(metric="manhattan", encoder=DictEncoder(VEC)).fit(TRAIN)
    with pytest.raises(ValueError, match="k must be"):
        KNNRouter(k=0, encoder=DictEncoder(VEC)).fit(TRAIN)


def test_text_router_names_the_query_without_text():
    d = RoutingData(pd_queries(["x1", "x2"], ["some text", None]), ["a", "b"], [[1, 0], [0, 1]])
    with pytest.raises(DataValidationError, match="'x2' has no text"):
        KNNRouter(k=1).fit(d)


def pd_queries(ids, texts):
    import pandas as pd
    return pd.DataFrame({"query_id": ids, "text": pd.Series(texts, dtype=object)})


# ---------------------------------------------------------------------------- blobs
def _blobs(n_per=20, seed=0, n_llms=3):
    """Three separable 2-D blobs; LLM k is right exactly on blob k."""
    rng = np.random.default_rng(seed)
    centres = np.array([[10.0, 0.0], [0.0, 10.0], [-10.0, -10.0]])
    ids, vec, scores, blob = [], {}, [], []
    for k, c in enumerate(centres):
        for i in range(n_per):
            q = f"b{k}-{i}-{seed}"
            ids.append(q)
            vec[q] = c + rng.normal(0, 0.5, 2)
            row = np.zeros(n_llms)
            row[k] = 1.0
            scores.append(row)
            blob.append(k)
    data = RoutingData(ids, [f"m{j}" for j in range(n_llms)], np.array(scores),
                       np.tile(np.arange(1.0, n_llms + 1), (len(ids), 1)))
    return data, vec, np.array(blob)


def _blob_setup():
    train, v1, blob_tr = _blobs(seed=0)
    test, v2, blob_te = _blobs(n_per=5, seed=1)
    return train, test, DictEncoder({**v1, **v2}), blob_tr, blob_te


def test_c_roberta_recovers_separable_clusters():
    train, test, enc, blob_tr, blob_te = _blob_setup()
    r = ClusterRouter(n_clusters=3, encoder=enc).fit(train)
    lab = r.train_labels_
    # each blob is exactly one cluster
    assert all(len(set(lab[blob_tr == k])) == 1 for k in range(3))
    assert len(set(lab)) == 3
    # cluster means are one-hot on the blob's LLM, so blob k routes to m{k}
    assert r.route(test).tolist() == [f"m{k}" for k in blob_te]
    s = r.predict_scores(test)
    np.testing.assert_allclose(s, np.eye(3)[blob_te])
    np.testing.assert_array_equal(np.sort(r.cluster_sizes_), [20, 20, 20])
    p = r.selection_probs(test)
    assert (p.argmax(axis=1) == blob_te).all()


def test_c_roberta_cluster_mean_masks_nan():
    train, _, enc, blob_tr, _ = _blob_setup()
    s = train.scores.copy()
    s[np.flatnonzero(blob_tr == 0)[:10], 0] = np.nan
    s[np.flatnonzero(blob_tr == 0)[10:], 1] = 0.5
    d = RoutingData(train.queries, train.llms, s, train.costs)
    r = ClusterRouter(encoder=enc).fit(d)
    c0 = r.train_labels_[blob_tr == 0][0]
    # m0 in blob 0: 10 NaN + 10 ones -> 1.0; m1: 10 zeros + 10 halves -> 0.25
    np.testing.assert_allclose(r.cluster_means_[c0], [1.0, 0.25, 0.0])


def test_svm_learns_separable_best_llm():
    train, test, enc, _, blob_te = _blob_setup()
    for mode in ("classify", "regress"):
        r = SVMRouter(mode=mode, encoder=enc).fit(train)
        assert r.route(test).tolist() == [f"m{k}" for k in blob_te], mode
    r = SVMRouter(encoder=enc).fit(train)
    np.testing.assert_array_equal(r.classes_, [0, 1, 2])
    np.testing.assert_allclose(r.selection_probs(test).sum(axis=1), 1.0)


def test_svm_single_class_and_absent_classes():
    train, test, enc, blob_tr, _ = _blob_setup()
    s = np.zeros_like(train.scores)
    s[:, 2] = 1.0  # m2 always best
    d = RoutingData(train.queries, train.llms, s, train.costs)
    r = SVMRouter(encoder=enc).fit(d)
    assert r.svc_coef_ is None and set(r.route(test)) == {"m2"}
    s2 = np.zeros_like(train.scores)
    s2[blob_tr == 0, 0] = 1.0
    s2[blob_tr != 0, 1] = 1.0  # m2 is never best: scored below every decision value
    r2 = SVMRouter(encoder=enc).fit(RoutingData(train.queries, train.llms, s2, train.costs))
    sc = r2.predict_scores(test)
    assert (sc[:, 2] < sc[:, :2].min(axis=1)).all()


def test_linearr_recovers_linear_scores_with_nan_columns():
    rng = np.random.default_rng(0)
    ids = [f"q{i}" for i in range(40)]
    x = rng.normal(size=(40, 3))
    y = np.stack([0.5 + x @ [0.1, -0.2, 0.3], 1.0 - x @ [0.2, 0.0, 0.1]], axis=1)
    y[::4, 1] = np.nan  # the second LLM is partially observed
    d = RoutingData(ids, ["a", "b"], y)
    r = LinearRRouter(alpha=1e-9, encoder=DictEncoder(dict(zip(ids, x)))).fit(d)
    np.testing.assert_allclose(r.coef_, [[0.1, -0.2, 0.3], [-0.2, 0.0, -0.1]], atol=1e-6)
    np.testing.assert_allclose(r.intercept_, [0.5, 1.0], atol=1e-6)


def test_mlc_learns_separable_labels():
    train, test, enc, _, blob_te = _blob_setup()
    r = MLCRouter(epochs=30, encoder=enc).fit(train)
    p = r.predict_scores(test)
    assert ((p > 0) & (p < 1)).all()
    assert (p.argmax(axis=1) == blob_te).all()
    assert p[np.arange(len(blob_te)), blob_te].min() > 0.7
    np.testing.assert_allclose(r.selection_probs(test).sum(axis=1), 1.0)


def test_mlc_masks_unobserved_cells():
    train, test, enc, blob_tr, blob_te = _blob_setup()
    s = train.scores.copy()
    s[blob_tr == 0, 2] = np.nan  # m2 never observed on blob 0: no gradient pushes it there
    d = RoutingData(train.queries, train.llms, s, train.costs)
    r = MLCRouter(epochs=30, encoder=enc).fit(d)
    assert (r.route(test) == np.array([f"m{k}" for k in blob_te])).all()


def test_mlpr_losses_and_validation():
    train, test, enc, _, blob_te = _blob_setup()
    r = MLPRRouter(epochs=60, encoder=enc).fit(train)
    assert r.route(test).tolist() == [f"m{k}" for k in blob_te]
    big = RoutingData(train.queries, train.llms, train.scores * 10.0, train.costs)
    with pytest.raises(DataValidationError, match="loss='mse'"):
        MLPRRouter(epochs=1, encoder=enc).fit(big)
    r2 = MLPRRouter(loss="mse", epochs=60, encoder=enc).fit(big)
    assert r2.route(test).tolist() == [f"m{k}" for k in blob_te]
    with pytest.raises(ValueError, match="loss must be"):
        MLPRRouter(loss="hinge", encoder=enc).fit(train)


def test_mlp_training_is_seeded_and_leaves_global_rng_alone():
    train, test, enc, _, _ = _blob_setup()
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = MLPRRouter(epochs=3, seed=4, encoder=enc).fit(train).predict_scores(test)
    after = torch.rand(1)
    assert torch.equal(before, after)
    b = MLPRRouter(epochs=3, seed=4, encoder=enc).fit(train).predict_scores(test)
    c = MLPRRouter(epochs=3, seed=5, encoder=enc).fit(train).predict_scores(test)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)
