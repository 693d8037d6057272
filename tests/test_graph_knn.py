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


def test_row_norms_equal_numpy_norms_bit_for_bit():
    rng = np.random.default_rng(4)
    for dtype in (np.float32, np.float64):
        x = rng.normal(size=(1_003, 37)).astype(dtype)
        got = knn_mod.row_norms(x, chunk=100)          # ragged last chunk
        assert got.dtype == dtype and got.shape == (1_003, 1)
        np.testing.assert_array_equal(got, np.linalg.norm(x, axis=1, keepdims=True))
    assert knn_mod.row_norms(np.zeros((0, 3))).shape == (0, 1)


def _top_k_by_sort(sims, kk):
    return np.argsort(-sims, axis=1, kind="stable")[:, :kk]


def test_top_k_torch_path_equals_a_full_sort():
    rng = np.random.default_rng(5)
    for n, kk in [(64 * 3, 3), (1_200, 15), (64 * 15 - 1, 15), (50, 7)]:   # both paths
        sims = rng.normal(size=(33, n)).astype(np.float32)     # distinct values: one answer
        np.testing.assert_array_equal(knn_mod._top_k(sims, kk), _top_k_by_sort(sims, kk))


def test_top_k_torch_path_with_ties_returns_the_largest_values_in_order():
    rng = np.random.default_rng(6)
    sims = rng.integers(0, 4, size=(20, 1_000)).astype(np.float32)   # many ties
    got = knn_mod._top_k(sims, 10)
    assert got.shape == (20, 10)
    assert all(len(set(r)) == 10 for r in got.tolist())                # distinct columns
    vals = np.take_along_axis(sims, got, axis=1)
    np.testing.assert_array_equal(vals, -np.sort(-sims, axis=1)[:, :10])


def test_index_search_blocks_a_cells_rows(monkeypatch):
    rng = np.random.default_rng(4)
    x = rng.normal(size=(400, 8)).astype(np.float32)
    x[:120] = x[0]                         # one text 120 times: one crowded cell
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    idx = knn_mod.ClusterIndex(x, seed=0)
    whole = idx.search(x, 5, own=np.arange(400))
    new = rng.normal(size=(50, 8)).astype(np.float32)
    new /= np.linalg.norm(new, axis=1, keepdims=True)
    whole_new = idx.search(new, 5)
    blocks, orig = [], knn_mod._mm_t

    def spy(a, b):
        blocks.append((len(a), len(b)))
        return orig(a, b)
    monkeypatch.setattr(knn_mod, "_mm_t", spy)
    monkeypatch.setattr(knn_mod, "_CHUNK_CELLS", 500)
    np.testing.assert_array_equal(idx.search(x, 5, own=np.arange(400)), whole)
    np.testing.assert_array_equal(idx.search(new, 5), whole_new)
    # every block holds at most 500 similarities (or one row, where a cell has more candidates)
    assert all(r * c <= 500 or r == 1 for r, c in blocks) and len(blocks) > 20
    assert max(r for r, _ in blocks) > 1
    # the crowded cell's rows, none of them their own neighbour
    assert (whole[:120] != np.arange(120)[:, None]).all()
