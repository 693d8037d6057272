"""CPU seconds of the parts of a graph-router fit on the 1M-record set (one thread).

SIMULATED data as in ``bench_train.py``: ``make_synthetic(100,000 x 10)``, random unit 384-d
embeddings, the first 90,000 queries as the train graph (the router holds out 10 %) and the
last 10,000 as held-out queries. Prints, in CPU seconds (user + system, so a loaded machine
inflates them less than wall time):

* the exact neighbour search (``_nearest``, when the checked-out code has it) on 2,000 of the
  90,000 rows, extrapolated to all of them; and the builder's own neighbour pool (the
  approximate index, where the code has one; ``--skip-pool`` skips it);
* ``--steps`` training steps (subgraph, forward, backward + AdamW) whose targets are the
  queries of a batch of ``--batch`` cells (``--layout cells``, the layout before the
  throughput change) or of ``--batch`` queries (``--layout queries``), with the kernel's share of their CPU time and the page faults per step (memory the
  allocator takes fresh from the system);
* one prediction of the 10,000 held-out queries (what a validation check does).

Usage: ``python benchmarks/profile_graph.py --seed 0 --layout queries``. It runs against
whichever ``recsys_router`` it imports, so the same file run from an older checkout measures
that code (``benchmarks/README.md`` shows both).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
from pathlib import Path

# One thread for numpy's BLAS (OpenBLAS/MKL) and OpenMP too, not just torch's
# (``torch.set_num_threads(1)`` below): set before numpy is first imported. Only when run
# as a script, so a test that imports this file leaves its process's environment alone.
if __name__ == "__main__":
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = "1"

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from recsys_router.cli.args import positive_int  # noqa: E402


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def kernel() -> tuple[float, int]:
    """Kernel CPU seconds and minor page faults of this process so far."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_stime, r.ru_minflt


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--layout", choices=("cells", "queries"), default="queries")
    ap.add_argument("--batch", type=positive_int, default=4096)
    ap.add_argument("--steps", type=positive_int, default=4)
    ap.add_argument("--skip-pool", action="store_true")
    args = ap.parse_args(argv)
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    from recsys_router.datasets.synthetic import make_synthetic
    from recsys_router.models.components import graph as G
    from recsys_router.models.components.gnn import HeteroRouterGNN
    from recsys_router.models.graph_module import predict_graph
    n, n_train = 100_000, 90_000
    d = make_synthetic(n, 10, 8, seed=args.seed, with_text=False)
    emb = np.random.default_rng(args.seed).standard_normal((n, 384))
    emb = (emb / np.linalg.norm(emb, axis=1, keepdims=True)).astype(np.float32)
    unit, tasks = emb[:n_train], d.tasks[:n_train]
    near = getattr(G, "_nearest", None)
    if near is None:
        from recsys_router.models.components import graph_knn
        near = graph_knn._nearest
    c0 = cpu()
    near(unit[:2000], unit, 15, np.arange(2000))
    print(f"exact neighbour search: {cpu() - c0:.2f} CPU s for 2,000 of {n_train:,} rows -> "
          f"{(cpu() - c0) * n_train / 2000:.0f} CPU s for all", flush=True)
    rng = np.random.default_rng(args.seed)
    llm_x = rng.random((10, 388)).astype(np.float32)
    pool = None
    if not args.skip_pool:
        c0 = cpu()
        pool = G.RoutingGraphBuilder(unit, tasks, d.scores[:n_train], d.costs[:n_train], llm_x,
                                     lambda names: np.ones((len(names), 384)), k=5).neighbour_pool
        print(f"builder's neighbour pool: {cpu() - c0:.2f} CPU s", flush=True)
    if pool is None:
        pool = rng.integers(0, n_train, size=(n_train, 15))   # timing of the steps only
    b = G.RoutingGraphBuilder(unit, tasks, d.scores[:n_train], d.costs[:n_train], llm_x,
                              lambda names: np.ones((len(names), 384)), k=5, pool=pool)
    net = HeteroRouterGNN({"query": 384, "task": 384, "llm": 388}, 64, 2, 0.1)
    opt = torch.optim.AdamW(net.parameters(), lr=5e-3)
    if args.layout == "cells":
        rows, _ = np.nonzero(~np.isnan(b.scores))
        perm = rng.permutation(len(rows))
        batches = [rows[perm[s * args.batch:(s + 1) * args.batch]] for s in range(args.steps)]
    else:
        perm = rng.permutation(n_train)
        batches = [perm[s * args.batch:(s + 1) * args.batch] for s in range(args.steps)]
    parts = np.zeros(3)
    cells = 0
    k0 = kernel()
    for targets in batches:
        c0 = cpu()
        g, t = b.training_graph(rng, 0.3, targets=targets, context_size=4096)
        c1 = cpu()
        s, _ = net(g, torch.as_tensor(t["q"]), torch.as_tensor(t["l"]))
        loss = F.binary_cross_entropy_with_logits(s, torch.as_tensor(t["y"]))
        c2 = cpu()
        opt.zero_grad()
        loss.backward()
        opt.step()
        parts += (c1 - c0, c2 - c1, cpu() - c2)
        cells += len(t["q"])
    parts /= args.steps
    k1 = kernel()
    sys_s, faults = (k1[0] - k0[0]) / args.steps, (k1[1] - k0[1]) / args.steps
    rated = g["llm", "rated_by", "query"].edge_index.shape[1]
    rates = g["query", "rates", "llm"].edge_index.shape[1]
    print(f"{args.layout} batch {args.batch}: per step {parts.sum():.3f} CPU s (subgraph "
          f"{parts[0]:.3f}, forward {parts[1]:.3f}, backward + AdamW {parts[2]:.3f}); "
          f"{cells / args.steps:,.0f} cells predicted per step; last step: "
          f"{len(t['nodes']):,} query nodes, {rated:,} rated_by and {rates:,} rates edges; "
          f"kernel {sys_s:.3f} CPU s and {faults:,.0f} page faults per step", flush=True)
    c0 = cpu()
    predict_graph(net, b, emb[n_train:], d.tasks[n_train:])
    print(f"prediction of the {n - n_train:,} held-out queries: {cpu() - c0:.2f} CPU s")


if __name__ == "__main__":
    main()
