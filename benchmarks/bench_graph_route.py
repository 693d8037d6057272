"""Latency of the graph router's prediction of new queries: the train graph's states kept
against a pass over the whole joined graph on every call, in one run.

For each ``--sizes`` entry ``n``: SIMULATED data (``make_synthetic``, ``--llms`` LLMs, random
unit ``--dim``-d embeddings served by the ``precomputed:`` encoder), a graph router fitted for
one epoch on ``n`` train queries, and new queries it never saw. Wall milliseconds (one
thread), median over ``--calls`` calls:

* ``whole graph``: the form used before, every train query and the new ones through the
  network on every call
  (:func:`~recsys_router.models.components.graph_predict.predict_whole_graph`);
* ``states kept``: :func:`~recsys_router.models.components.graph_predict.predict_graph`
  with the train graph's states computed once (``states once`` ms), as a fitted router
  routes;
* ``route()``: the fitted router's ``route`` of one query end to end (encoder lookup,
  score and cost predictions in one pass, the choice), states kept, a different query on
  each call.

Both forms' logits are compared first (they must agree to float32 rounding). The ``batch``
rows predict ``--batch`` new queries at once.

Usage: ``python benchmarks/bench_graph_route.py --seed 0``
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, not installed


def median_ms(fn, calls: int) -> float:
    """Median wall milliseconds of ``calls`` calls of ``fn`` (after one untimed call)."""
    fn()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * float(np.median(times))


def one_size(n: int, args, folder: Path) -> list[tuple]:
    """Rows ``(what, whole graph ms, states kept ms, states once ms, route ms)`` for ``n``
    train queries."""
    import torch

    from recsys_router.datasets.synthetic import make_synthetic
    from recsys_router.models.components.graph_predict import (predict_graph,
                                                               predict_whole_graph,
                                                               train_states)
    from recsys_router.registry import make_router
    data = make_synthetic(n + args.batch, args.llms, 8, seed=args.seed, with_text=False)
    emb = np.random.default_rng(args.seed).standard_normal((data.n_queries, args.dim))
    emb = (emb / np.linalg.norm(emb, axis=1, keepdims=True)).astype(np.float32)
    np.save(folder / f"emb{n}.npy", emb)
    (folder / f"emb{n}.ids.txt").write_text("\n".join(map(str, data.query_ids)) + "\n")
    router = make_router("graph", max_epochs=1, batch_size=4096, seed=args.seed,
                         encoder=f"precomputed:{folder / f'emb{n}.npy'}")
    router.fit(data.subset(np.arange(n)))
    new = data.subset(np.arange(n, n + args.batch))
    net, b, cpu = router.net_, router.builder_, torch.device("cpu")
    x, tasks = router.embed(new), list(new.tasks)
    t0 = time.perf_counter()
    st = train_states(net, b, cpu)
    once = 1e3 * (time.perf_counter() - t0)
    for got, want in zip(predict_graph(net, b, x, tasks, cpu, states=st),
                         predict_whole_graph(net, b, x, tasks, cpu)):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    calls = max(3, args.calls // 5) if n > 20_000 else args.calls
    # route(): a different query each call (the router keeps its last prediction)
    singles = iter([new.subset([i % args.batch]) for i in range(args.calls + 1)])
    router.route(new.subset([args.batch - 1]))             # the router's own states, kept
    return [
        (f"{n:,} train queries, 1 new query",
         median_ms(lambda: predict_whole_graph(net, b, x[:1], tasks[:1], cpu), calls),
         median_ms(lambda: predict_graph(net, b, x[:1], tasks[:1], cpu, states=st), args.calls),
         once, median_ms(lambda: router.route(next(singles)), args.calls)),
        (f"{n:,} train queries, batch of {args.batch:,}",
         median_ms(lambda: predict_whole_graph(net, b, x, tasks, cpu), max(3, calls // 5)),
         median_ms(lambda: predict_graph(net, b, x, tasks, cpu, states=st), max(3, calls // 5)),
         once, None),
    ]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sizes", default="2000,20000,90000", help="train queries per row pair")
    ap.add_argument("--llms", type=int, default=10)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--batch", type=int, default=1000, help="new queries in the batch rows")
    ap.add_argument("--calls", type=int, default=30, help="timed calls per cell")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
    except ValueError:
        ap.error(f"--sizes: expected comma-separated integers, got {args.sizes!r}")
    if min(sizes) < 20 or args.batch < 1 or args.calls < 1 or args.llms < 2 or args.dim < 2 \
            or args.threads < 1:
        ap.error("--sizes >= 20 each; --batch, --calls, --threads >= 1; --llms, --dim >= 2")
    import torch
    torch.set_num_threads(args.threads)
    from tqdm import tqdm
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in tqdm(sizes, desc="sizes", disable=len(sizes) < 2):
            rows += one_size(n, args, Path(tmp))
    print(f"\n`python benchmarks/bench_graph_route.py --seed {args.seed} --sizes {args.sizes} "
          f"--batch {args.batch} --calls {args.calls}` ({args.llms} LLMs, {args.dim}-d, "
          f"{args.threads} thread(s); wall ms, median of the calls)\n")
    print("| prediction | whole graph ms | states kept ms | ratio | states once ms | route() ms |")
    print("|---|---|---|---|---|---|")
    for what, whole, kept, once, route in rows:
        r = "-" if route is None else f"{route:.1f}"
        print(f"| {what} | {whole:.2f} | {kept:.2f} | {whole / kept:.1f} | {once:.0f} | {r} |")


if __name__ == "__main__":
    main()
