"""CPU time of the graph router's rewritten parts against the forms they replaced, in one run.

Each part is timed (process CPU seconds, one thread, best of ``--repeats`` rounds of
``--calls`` calls) next to its previous form, written here, on inputs of the sizes a step of
the 1M-record fit in ``bench_train.py`` sees; both give the same numbers (asserted here to a
float32 tolerance). The previous forms:

* ``pair heads``: the whole (queries x LLMs x 2h) hidden layer at once, its second layer a
  product with a block-diagonal matrix; now
  :func:`~recsys_router.models.components.pair_grid.grid_heads`
  (row chunks, forward and backward);
* ``dropout``: ``torch.nn.functional.dropout`` (forward and backward); now
  :class:`~recsys_router.models.components.bit_dropout.BitDropout` (same distribution, other
  random draws, so only the kept share is compared);
* ``layer sum``: ``HeteroConv``'s own forward (stack, then sum) on a sampled step's graph;
  now :func:`~recsys_router.models.components.gnn._summed_layer` (forward and backward);
* ``IVF product``: numpy's ``a @ b.T`` at the shapes of the neighbour search; now torch's
  for the per-cell searches (the assignment of all rows to centroids, the last shape,
  stays numpy's: torch's is slower there);
* ``k-means sums``: sort by cell and ``np.add.reduceat``; now one ``index_add_``;
* ``top-k``: ``np.argpartition`` and a sort of the shortlist for every cell of the search
  (``_top_k_partition``, still the path for short rows);
  now ``torch.topk`` on rows of at least ``64 x k`` candidates (its partial heap sort);
* ``row norms``: ``np.linalg.norm(x, axis=1)`` over the 90,000 x 384 train embeddings at
  once; now in row chunks, without the whole (n x d) temporary of squares (this one in wall
  seconds of a fresh array, since what it saves is the first touch of new memory).

Usage: ``python benchmarks/bench_graph_parts.py --seed 0``. Prints one table; a ratio above 1
means the current form takes less CPU time (wall time in the row marked so).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

# One thread for numpy's BLAS (OpenBLAS/MKL) and OpenMP too, not just torch's
# (``torch.set_num_threads(1)`` below): set before numpy is first imported. Only when run
# as a script, so a test that imports this file leaves its process's environment alone.
if __name__ == "__main__":
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = "1"

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, not installed

# (run as a script, its own folder is first on sys.path: the benchmarks' process-CPU clock)
from bench_train import cpu_s  # noqa: E402


def best_of(fn, calls: int, repeats: int, wall: bool = False) -> float:
    """Least CPU seconds per call over ``repeats`` rounds of ``calls`` calls (after one
    untimed call); wall seconds with ``wall``."""
    clock = time.perf_counter if wall else cpu_s
    fn()
    best = float("inf")
    for _ in range(repeats):
        c0 = clock()
        for _ in range(calls):
            fn()
        best = min(best, (clock() - c0) / calls)
    return best


def old_pair_heads(hu, m, bias, w2, b2):
    """The grid heads as one (n_q, n_llms * 2h) layer and a block-diagonal second layer."""
    import torch
    n_q, h = hu.shape
    n_l = m.shape[1] // (2 * h)
    blocks = torch.block_diag(w2[0:1], w2[1:2])                # (2, 2h)
    out = torch.relu(torch.addmm(bias, hu, m)) @ torch.block_diag(*[blocks.T] * n_l)
    return out.view(n_q, n_l, 2) + b2


def parts(args):
    """``[(name, old CPU s, new CPU s)]``."""
    import torch
    import torch.nn.functional as F

    from recsys_router.models.components.bit_dropout import BitDropout
    from recsys_router.models.components.gnn import HeteroRouterGNN, _summed_layer
    from recsys_router.models.components.graph import RoutingGraphBuilder
    from recsys_router.models.components.graph_knn import (_mm_t, _top_k, _top_k_partition,
                                                           row_norms)
    from recsys_router.models.components.pair_grid import grid_heads
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    c, r = args.calls, args.repeats
    rows = []

    # pair heads: 4,096 target queries x 10 LLMs, hidden 64 (a training step's grid)
    h, n_l, n_q = 64, 10, 4096
    ins = [torch.randn(s, requires_grad=True) for s in ((n_q, h), (h, n_l * 2 * h), (n_l * 2 * h,),
                                                          (2, h), (2,))]
    g = torch.randn(n_q, n_l, 2)
    torch.testing.assert_close(grid_heads(*ins), old_pair_heads(*ins), rtol=1e-4, atol=1e-4)
    rows.append(("pair heads (forward + backward)",
                 best_of(lambda: (old_pair_heads(*ins) * g).sum().backward(), c, r),
                 best_of(lambda: (grid_heads(*ins) * g).sum().backward(), c, r)))

    # dropout on a step's layer-1 query states: 25,000 x 64
    x = torch.randn(25_000, 64, requires_grad=True)
    gx = torch.randn_like(x)
    bit = BitDropout(0.1).train()
    share = float((bit(x) == 0).float().mean())
    assert abs(share - 0.1) < 0.005, share
    rows.append(("dropout p=0.1 (forward + backward)",
                 best_of(lambda: F.dropout(x, 0.1, True).backward(gx), c, r),
                 best_of(lambda: bit(x).backward(gx), c, r)))

    # one layer's convolutions on a sampled step's graph (20,000 train queries, 10 LLMs)
    n = 20_000
    scores = (rng.random((n, n_l)) < 0.6).astype(np.float32)
    b = RoutingGraphBuilder(rng.standard_normal((n, 32)).astype(np.float32),
                            rng.choice(list("abcdefgh"), n), scores, None,
                            rng.random((n_l, 36)).astype(np.float32),
                            lambda names: np.ones((len(names), 32), np.float32), k=5)
    gr, _ = b.training_graph(rng, 0.3, targets=rng.permutation(n)[:2048], context_size=2048)
    conv = HeteroRouterGNN({"query": 32, "task": 32, "llm": 36}, h, 2, 0.1).convs[0]
    hs = {t: torch.randn(gr[t].num_nodes, h, requires_grad=True) for t in ("query", "task", "llm")}
    edges = gr.edge_index_dict
    attr = {et: gr[et].edge_attr for et in gr.edge_types if "edge_attr" in gr[et]}
    summed = _summed_layer(conv, hs, edges, attr)
    for t, v in conv(hs, edges, edge_attr_dict=attr).items():
        torch.testing.assert_close(summed[t], v)

    def run(layer):
        out = layer()
        sum(v.sum() for v in out.values()).backward()
    rows.append((f"layer sum, {gr['query'].num_nodes:,} query nodes (forward + backward)",
                 best_of(lambda: run(lambda: conv(hs, edges, edge_attr_dict=attr)), c, r),
                 best_of(lambda: run(lambda: _summed_layer(conv, hs, edges, attr)), c, r)))

    # the neighbour search's products: a cell's 300 rows (or a held-out cell's 33) against
    # 4 probed cells' 1,200 members, and the assignment of 43,690 rows to 300 centroids
    for m_rows, n_cols in ((300, 1200), (33, 1200), (43_690, 300)):
        a = rng.standard_normal((m_rows, 384)).astype(np.float32)
        bb = rng.standard_normal((n_cols, 384)).astype(np.float32)
        np.testing.assert_allclose(_mm_t(a, bb), a @ bb.T, rtol=1e-4, atol=1e-3)
        k = max(1, int(2e9 // (m_rows * n_cols * 384)) // 10)
        rows.append((f"IVF product {m_rows:,} x {n_cols:,} x 384", best_of(lambda: a @ bb.T, k, r),
                     best_of(lambda: _mm_t(a, bb), k, r)))

    # k-means centroid sums: 19,200 sampled rows into 300 cells
    xs = rng.standard_normal((19_200, 384)).astype(np.float32)
    cell = rng.integers(0, 300, len(xs))

    def reduceat():
        order = np.argsort(cell, kind="stable")
        bounds = np.searchsorted(cell[order], np.arange(301))
        return np.add.reduceat(xs[order], np.minimum(bounds[:-1], len(cell) - 1), axis=0)
    xt, ct = torch.from_numpy(xs), torch.from_numpy(cell)
    np.testing.assert_allclose(torch.zeros(300, 384).index_add_(0, ct, xt).numpy(), reduceat(),
                               rtol=1e-4, atol=1e-3)
    rows.append(("k-means cell sums, 19,200 rows", best_of(reduceat, c, r),
                 best_of(lambda: torch.zeros(300, 384).index_add_(0, ct, xt), c, r)))

    # a cell's shortlist: the 15 most similar of 1,200 probed members (the pool's width), for
    # a cell's 300 rows and a held-out cell's 33
    for m_rows in (300, 33):
        sims = rng.standard_normal((m_rows, 1200)).astype(np.float32)
        np.testing.assert_array_equal(_top_k(sims, 15), _top_k_partition(sims, 15))
        rows.append((f"top-15 of 1,200, {m_rows} rows",
                     best_of(lambda: _top_k_partition(sims, 15), c, r),
                     best_of(lambda: _top_k(sims, 15), c, r)))

    # the train embeddings' norms (a new array each call, as in a fit)
    big = rng.standard_normal((90_000, 384)).astype(np.float32)
    np.testing.assert_array_equal(row_norms(big), np.linalg.norm(big, axis=1, keepdims=True))
    rows.append(("row norms, 90,000 x 384 (wall)",
                 best_of(lambda: np.linalg.norm(big, axis=1, keepdims=True), 1, r, wall=True),
                 best_of(lambda: row_norms(big), 1, r, wall=True)))
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--calls", type=int, default=10, help="calls per timed round")
    ap.add_argument("--repeats", type=int, default=5, help="timed rounds (the least is kept)")
    args = ap.parse_args(argv)
    if args.calls < 1 or args.repeats < 1:
        ap.error("--calls and --repeats must be >= 1")
    rows = parts(args)
    print(f"`python benchmarks/bench_graph_parts.py --seed {args.seed} --calls {args.calls} "
          f"--repeats {args.repeats}` (one thread; CPU ms per call, wall ms where "
          f"marked, best of {args.repeats} rounds)\n")
    print("| part | previous form ms | current form ms | ratio |")
    print("|---|---|---|---|")
    for name, old, new in rows:
        print(f"| {name} | {old * 1e3:.3f} | {new * 1e3:.3f} | {old / new:.2f} |")


if __name__ == "__main__":
    main()
