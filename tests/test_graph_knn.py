"""The chunked, partition-based kNN edges equal a plain full stable sort (ties included)."""

from __future__ import annotations

import numpy as np

from recsys_router.models.components import graph as graph_mod
from recsys_router.models.components import graph_knn as knn_mod
from recsys_router.models.components.graph import knn_edges


def _plain(emb, context, k):
    context = np.asarray(context, dtype=np.int64)
    unit = emb / (np.linalg.norm(emb, axis=1, keepdims=True) + 1e-12)
    sims = unit @ unit[context].T
    sims[context, np.arange(len(context))] = -np.inf
    kk = min(k, len(context) - 1 if len(context) > 1 else 1)
    nn = np.argsort(-sims, axis=1, kind="stable")[:, :kk]
    src, dst = context[nn].ravel(), np.repeat(np.arange(len(emb)), kk)
    keep = src != dst
    return np.stack([src[keep], dst[keep]])


def test_matches_full_sort_with_many_ties(monkeypatch):
    rng = np.random.default_rng(0)
    for _ in range(150):
        n, d = int(rng.integers(1, 50)), int(rng.integers(1, 4))
        emb = rng.integers(-2, 3, size=(n, d)).astype(float)  # small integers: many equal sims
        ctx = np.sort(rng.choice(n, size=int(rng.integers(1, n + 1)), replace=False))
        k = int(rng.integers(1, 7))
        np.testing.assert_array_equal(knn_edges(emb, ctx, k), _plain(emb, ctx, k))


def test_chunking_does_not_change_edges(monkeypatch):
    rng = np.random.default_rng(1)
    emb = rng.normal(size=(300, 8))
    ctx = np.arange(0, 300, 2)
    whole = knn_edges(emb, ctx, 5)
    # force many small chunks: 2**24 // n_ctx would otherwise cover all rows at once
    orig = np.partition
    calls = []

    def spy(a, kth, axis=-1, **kw):
        calls.append(a.shape[0])
        return orig(a, kth, axis=axis, **kw)
    monkeypatch.setattr(knn_mod.np, "partition", spy)
    monkeypatch.setattr(knn_mod, "_CHUNK_CELLS", 150 * 7, raising=False)
    np.testing.assert_array_equal(graph_mod.knn_edges(emb, ctx, 5), whole)
    assert max(calls) <= 7 and len(calls) > 1


def test_torch_product_equals_numpy_product():
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(40, 16)), rng.normal(size=(70, 16)).astype(np.float32)[::2]
    got = knn_mod._mm_t(a, b)          # float64 and a strided view: cast and made contiguous
    assert got.dtype == np.float32 and got.shape == (40, 35)
    np.testing.assert_allclose(got, a.astype(np.float32) @ b.T, rtol=1e-5, atol=1e-5)
