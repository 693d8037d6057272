"""Nearest-neighbour search of the graph router's query-query edges: exact (chunked) for small
sets, an inverted-file index (spherical k-means cells, search in the nearest cells) for large.

Reference: Feng, Shen & You, "GraphRouter: A Graph-based Router for LLM Selections",
ICLR 2025 (arXiv 2410.03834), for the query-query kNN edges; the inverted-file search is the
IVF scheme of Jegou, Douze & Schmid, "Product Quantization for Nearest Neighbor Search",
IEEE TPAMI 33(1), 2011 (coarse k-means quantizer, probe the nearest cells), without the
product quantization (distances are exact cosines inside the probed cells).

The exact search costs ``O(n_rows x n_ctx x d)``: about 6 TFLOP for 90,000 train queries of
384 dimensions (minutes on one core). Above ``EXACT_MAX_CELLS`` similarity cells the search
goes through :class:`ClusterIndex`: about ``sqrt(n_ctx)`` cells, each row compared only
with the members of the ``probe`` cells nearest its own cell, so the cost falls to about
``n_rows x probe x sqrt(n_ctx) x d``; neighbours in cells that are not probed are missed
(the recall is measured in ``tests/test_graph_knn.py``).
"""

from __future__ import annotations

import numpy as np
import torch

__all__ = ["knn_edges", "neighbour_pool", "nearest_context", "row_norms", "as_unit",
           "ClusterIndex", "EXACT_MAX_CELLS"]

#: similarity cells computed at once by the exact search (bounds its memory)
_CHUNK_CELLS = 1 << 24
#: largest ``n_rows x n_ctx`` searched exactly (20,000 x 20,000); above it, :class:`ClusterIndex`
EXACT_MAX_CELLS = 400_000_000


def _mm_t(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b.T`` (float32) through torch's CPU GEMM; the same float32 product as numpy's up
    to summation order. With one BLAS thread on each side it is not faster than numpy's at the
    search's per-cell shapes (hundreds of rows x about a thousand candidates): 0.80-0.99x
    numpy's speed by CPU time on this project's machines (``benchmarks/bench_graph_parts.py``,
    2026-12-02). An earlier 1.1-1.9x came from numpy's CPU time counting two OpenBLAS
    threads."""
    return (torch.from_numpy(np.ascontiguousarray(a, np.float32))
            @ torch.from_numpy(np.ascontiguousarray(b, np.float32)).T).numpy()


def row_norms(x: np.ndarray, chunk: int = 8192) -> np.ndarray:
    """(n, 1) Euclidean norms of the rows of a 2-D float array: the same numbers as
    ``np.linalg.norm(x, axis=1, keepdims=True)``, computed in row chunks so the squares never
    fill one (n x d) temporary (a fresh 90,000 x 384 one cost about 0.3 s inside a fit here,
    ten times the arithmetic).

    Example
    -------
    >>> row_norms(np.array([[3., 4.], [0., 2.]])).ravel().tolist()
    [5.0, 2.0]
    """
    out = np.empty((len(x), 1), x.dtype)
    for s in range(0, len(x), chunk):
        out[s:s + chunk] = np.linalg.norm(x[s:s + chunk], axis=1, keepdims=True)
    return out


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x)
    if not np.issubdtype(x.dtype, np.floating):
        x = x.astype(np.float64)
    return x / (row_norms(x) + 1e-12)


def as_unit(x: np.ndarray, tol: float = 1e-6) -> np.ndarray:
    """``x`` itself when every row's norm is within ``tol`` of 1 (no copy), else its rows
    normalised (a new array, as :func:`_unit`).

    Example
    -------
    >>> u = np.array([[0.6, 0.8]], np.float32)
    >>> as_unit(u) is u, as_unit(2 * u).tolist()
    (True, [[0.6000000238418579, 0.800000011920929]])
    """
    norms = row_norms(x)
    if len(x) and np.abs(norms - 1.0).max() <= tol:
        return x
    return x / (norms + 1e-12)


def _nearest(rows_unit: np.ndarray, ctx_unit: np.ndarray, kk: int,
             own: np.ndarray | None = None) -> np.ndarray:
    """(len(rows), kk) indices of each row's ``kk`` most cosine-similar context rows, most
    similar first; ``own[i] >= 0`` excludes that context row from row ``i`` (itself).
    Works in row chunks so memory stays O(chunk x n_ctx)."""
    n_ctx = len(ctx_unit)
    chunk = max(1, min(len(rows_unit), _CHUNK_CELLS // max(n_ctx, 1)))
    parts = []
    for start in range(0, len(rows_unit), chunk):
        sims = rows_unit[start:start + chunk] @ ctx_unit.T
        if own is not None:
            o = own[start:start + chunk]
            sims[np.flatnonzero(o >= 0), o[o >= 0]] = -np.inf  # no self loops
        parts.append(_top_k_stable(sims, kk))
    return np.concatenate(parts) if parts else np.zeros((0, kk), np.int64)


def _top_k_stable(sims: np.ndarray, kk: int) -> np.ndarray:
    """Column indices of each row's ``kk`` largest values, largest first, ties to the lower
    index: the same as ``np.argsort(-sims, kind="stable")[:, :kk]`` without a full sort.

    Example
    -------
    >>> _top_k_stable(np.array([[0.1, 0.5, 0.5, 0.2]]), 2).tolist()
    [[1, 2]]
    """
    n_rows, n = sims.shape
    kth = np.partition(sims, n - kk, axis=1)[:, n - kk]
    r, c = np.nonzero(sims >= kth[:, None])          # candidates (ties at the boundary included)
    order = np.lexsort((c, -sims[r, c], r))           # by row, then value desc, then index
    r, c = r[order], c[order]
    first = np.searchsorted(r, np.arange(n_rows))
    pos = np.arange(len(r)) - first[r]
    return c[pos < kk].reshape(n_rows, kk)


def _top_k(sims: np.ndarray, kk: int) -> np.ndarray:
    """Column indices of each row's ``kk`` largest values, largest first (ties in any order).

    Rows at least ``64 x kk`` long go through ``torch.topk``, whose CPU kernel switches to a
    partial heap sort at that length (measured 2-5x faster than ``np.argpartition`` plus the
    sort of the shortlist at the search's shapes when added; a rerun on 2026-12-02 gave
    0.66-0.86x for a cell's 300 rows and 1.3-1.5x for a held-out cell's 33,
    ``benchmarks/bench_graph_parts.py``); shorter rows, where it selects by a full
    ``nth_element`` and is no faster, through numpy."""
    if kk >= sims.shape[1]:
        return np.argsort(-sims, axis=1)[:, :kk]
    n = sims.shape[1]
    if n >= 64 * kk and sims.dtype == np.float32:
        return torch.topk(torch.from_numpy(np.ascontiguousarray(sims)), kk,
                          dim=1).indices.numpy()
    return _top_k_partition(sims, kk)


def _top_k_partition(sims: np.ndarray, kk: int) -> np.ndarray:
    """:func:`_top_k` by ``np.argpartition`` and a sort of the shortlist (``kk`` < columns)."""
    n = sims.shape[1]
    part = np.argpartition(sims, n - kk, axis=1)[:, n - kk:]   # (no negated copy)
    vals = np.take_along_axis(sims, part, axis=1)
    return np.take_along_axis(part, np.argsort(-vals, axis=1), axis=1)


class ClusterIndex:
    """Inverted-file index over unit vectors: spherical k-means cells and their members.

    Parameters
    ----------
    ctx_unit : ndarray (n, d)
        Unit-norm context vectors (the searched set).
    n_cells : int, optional
        k-means cells (default ``round(sqrt(n))``, at least 1).
    probe : int
        Cells searched per row: its own cell and the ``probe - 1`` whose centroids are
        nearest that cell's centroid (more if those hold fewer than the asked neighbours).
    iterations : int
        k-means (Lloyd) iterations, on a seeded sample of ``64 x n_cells`` vectors.
    seed : int

    Example
    -------
    >>> x = _unit(np.random.default_rng(0).normal(size=(500, 8)))
    >>> idx = ClusterIndex(x, probe=25)        # every cell probed: the exact answer
    >>> bool((idx.search(x, 3, own=np.arange(500)) == _nearest(x, x, 3, np.arange(500))).all())
    True
    """

    def __init__(self, ctx_unit: np.ndarray, n_cells: int | None = None, probe: int = 4,
                 iterations: int = 6, seed: int = 0):
        x = np.asarray(ctx_unit, np.float32)
        n = len(x)
        if n == 0:
            raise ValueError("ClusterIndex needs at least one context vector")
        self.ctx = x
        self.probe = max(1, int(probe))
        c = int(n_cells) if n_cells is not None else int(round(np.sqrt(n)))
        c = max(1, min(c, n))
        rng = np.random.default_rng(seed)
        sample = x[rng.choice(n, min(n, 64 * c), replace=False)]
        cent = sample[rng.choice(len(sample), c, replace=False)].copy()
        sample_t = torch.from_numpy(np.ascontiguousarray(sample))
        for _ in range(int(iterations)):
            a = self._assign(sample, cent)
            counts = np.bincount(a, minlength=c)
            # each cell's sum of its members (a scatter-add, 18x faster here than sorting the
            # sample by cell and np.add.reduceat)
            sums = torch.zeros((c, x.shape[1]), dtype=sample_t.dtype).index_add_(
                0, torch.from_numpy(a), sample_t).numpy()
            empty = counts == 0                     # re-seed an empty cell with a random point
            sums[empty] = sample[rng.choice(len(sample), int(empty.sum()))]
            cent = _unit(sums).astype(np.float32)
        self.centroids = cent
        self.cell = self._assign(x, cent)
        self.order = np.argsort(self.cell, kind="stable")
        self.starts = np.searchsorted(self.cell[self.order], np.arange(c + 1))
        # cells in order of their centroid's similarity to each cell's centroid (itself first)
        cc = cent @ cent.T
        np.fill_diagonal(cc, np.inf)
        self.cell_order = np.argsort(-cc, axis=1, kind="stable")

    @staticmethod
    def _assign(x: np.ndarray, cent: np.ndarray) -> np.ndarray:
        chunk = max(1, _CHUNK_CELLS // max(len(cent), 1))
        # (numpy's product: torch's is slower at these tall shapes, bench_graph_parts.py)
        return np.concatenate([np.argmax(x[s:s + chunk] @ cent.T, axis=1)
                               for s in range(0, len(x), chunk)]).astype(np.int64)

    def members(self, c: int) -> np.ndarray:
        """Context rows of cell ``c``."""
        return self.order[self.starts[c]:self.starts[c + 1]]

    def search(self, rows_unit: np.ndarray, kk: int, own: np.ndarray | None = None,
               cells: np.ndarray | None = None) -> np.ndarray:
        """(len(rows), kk) approximate nearest context rows of each row, nearest first.

        Parameters
        ----------
        rows_unit : ndarray (m, d)
            Unit-norm query vectors.
        kk : int
            Neighbours per row (at most the context size, minus one with ``own``).
        own : ndarray of int (m,), optional
            ``own[i] >= 0``: context row excluded from row ``i``'s answer (itself).
        cells : ndarray of int (m,), optional
            Each row's cell, when known (e.g. the context itself); else assigned here.
        """
        rows_unit = np.asarray(rows_unit, np.float32)
        m = len(rows_unit)
        out = np.zeros((m, kk), np.int64)
        if m == 0 or kk < 1:
            return out
        cells = self._assign(rows_unit, self.centroids) if cells is None else cells
        sizes = np.diff(self.starts)
        by_cell = np.argsort(cells, kind="stable")
        bounds = np.searchsorted(cells[by_cell], np.arange(len(self.centroids) + 1))
        pos = np.full(len(self.ctx), -1, np.int64) if own is not None else None
        for c in np.flatnonzero(np.diff(bounds)):
            in_cell = by_cell[bounds[c]:bounds[c + 1]]
            probes = self.cell_order[c]
            enough = np.cumsum(sizes[probes]) >= kk + 1
            stop = max(self.probe, int(np.argmax(enough)) + 1 if enough.any() else len(probes))
            cand = np.concatenate([self.members(p) for p in probes[:stop]])
            ctx_c = self.ctx[cand]
            if pos is not None:      # (one position buffer, reset after each cell)
                pos[cand] = np.arange(len(cand))
            # the cell's rows in blocks of at most _CHUNK_CELLS similarities: many rows share
            # one cell when many queries share one text, and one (rows x candidates) block
            # then grows with the square of their number
            step = max(1, _CHUNK_CELLS // max(len(cand), 1))
            for s in range(0, len(in_cell), step):
                rows = in_cell[s:s + step]
                sims = _mm_t(rows_unit[rows], ctx_c)
                if pos is not None:
                    o = own[rows]
                    hit = np.flatnonzero((o >= 0) & (pos[np.maximum(o, 0)] >= 0))
                    sims[hit, pos[o[hit]]] = -np.inf
                out[rows] = cand[_top_k(sims, kk)]
            if pos is not None:
                pos[cand] = -1
        return out


def _search(rows_unit: np.ndarray, ctx_unit: np.ndarray, kk: int,
            own: np.ndarray | None = None, index: ClusterIndex | None = None,
            cells: np.ndarray | None = None) -> np.ndarray:
    """Exact search up to ``EXACT_MAX_CELLS`` similarity cells, else the cluster index."""
    if index is None and len(rows_unit) * len(ctx_unit) <= EXACT_MAX_CELLS:
        return _nearest(rows_unit, ctx_unit, kk, own)
    index = index if index is not None else ClusterIndex(ctx_unit)
    return index.search(rows_unit, kk, own, cells)


def knn_edges(emb: np.ndarray, context: np.ndarray, k: int) -> np.ndarray:
    """Edges ``(source, target)`` from each query's ``k`` nearest context queries (cosine, exact).

    A query is never its own neighbour. Returns int64 array of shape (2, n_edges).

    Example
    -------
    >>> e = np.array([[1., 0], [0.9, 0.1], [0, 1]])
    >>> knn_edges(e, np.array([0, 2]), 1).tolist()
    [[2, 0, 0], [0, 1, 2]]
    """
    context = np.asarray(context, dtype=np.int64)
    if k < 1 or len(context) == 0:
        return np.zeros((2, 0), dtype=np.int64)
    unit = _unit(emb)
    n_ctx = len(context)
    kk = min(k, n_ctx - 1 if n_ctx > 1 else 1)
    ctx_pos = np.full(len(emb), -1, dtype=np.int64)
    ctx_pos[context] = np.arange(n_ctx)
    src = context[_nearest(unit, unit[context], kk, ctx_pos)].ravel()
    dst = np.repeat(np.arange(len(emb)), kk)
    keep = src != dst
    return np.stack([src[keep], dst[keep]])


def neighbour_pool(emb: np.ndarray, width: int, index: ClusterIndex | None = None) -> np.ndarray:
    """Each row's ``width`` nearest other rows (cosine), nearest first: int64 (n, w) with
    ``w = min(width, n - 1)``. Exact up to ``EXACT_MAX_CELLS`` cells (n = 20,000), else
    approximate through ``index`` (built here over ``emb`` when not given).

    Example
    -------
    >>> neighbour_pool(np.array([[1., 0], [0.9, 0.1], [0, 1]]), 2).tolist()
    [[1, 2], [0, 2], [1, 0]]
    """
    n = len(emb)
    w = min(int(width), n - 1)
    if w < 1:
        return np.zeros((n, 0), dtype=np.int64)
    covers = index is not None and len(index.cell) == n     # an index over these rows
    unit = index.ctx if covers else _unit(emb)               # (built from their unit vectors)
    if index is None and n * n > EXACT_MAX_CELLS:
        index = ClusterIndex(unit)
    cells = index.cell if covers else None
    return _search(unit, unit, w, np.arange(n), index, cells).astype(np.int64)


def nearest_context(new_x: np.ndarray, ctx_x: np.ndarray, k: int,
                    index: ClusterIndex | None = None,
                    ctx_unit: np.ndarray | None = None, exact: bool = False) -> np.ndarray:
    """Edges ``(context row, new row)`` from each new row's ``k`` nearest context rows (exact
    up to ``EXACT_MAX_CELLS`` cells, else through ``index``, built over ``ctx_x`` if None).
    ``ctx_unit``: the context rows normalised already (kept by the caller across searches),
    for the exact search. ``exact`` (without ``index``): always the exact search, in row
    chunks, whatever the number of new rows, so a row's neighbours never depend on the
    rows searched with it.

    Example
    -------
    >>> nearest_context(np.array([[0., 1]]), np.array([[1., 0], [0.1, 1]]), 1).tolist()
    [[1], [0]]
    """
    kk = min(int(k), len(ctx_x))
    if kk < 1 or len(new_x) == 0:
        return np.zeros((2, 0), dtype=np.int64)
    if index is not None:
        ctx_unit = index.ctx                      # the index holds them
    elif ctx_unit is None:
        ctx_unit = _unit(ctx_x)
    if exact and index is None:
        idx = _nearest(_unit(new_x), ctx_unit, kk)
    else:
        idx = _search(_unit(new_x), ctx_unit, kk, index=index)
    return np.stack([idx.ravel(), np.repeat(np.arange(len(new_x)), kk)]).astype(np.int64)
