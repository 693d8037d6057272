"""Profile one Lightning router's ``fit`` (cProfile, top functions by own time).

SIMULATED data: ``make_synthetic(--queries, --llms)`` without texts and random unit 384-d
embeddings served by the ``precomputed:`` encoder; batch ``--batch-size``, ``--epochs``
epochs, no held-out validation, one thread. Prints fit seconds, records/s and the
``--top`` functions by own time (the breakdown in benchmarks/README.md comes from it).

Usage::

    python benchmarks/profile_train.py --seed 0 --model mf
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.bench_checks import one_name, positive_int  # noqa: E402
from recsys_router.registry import available_routers  # noqa: E402


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", type=one_name(available_routers, "router"), default="mf")
    ap.add_argument("--queries", type=positive_int, default=30_000)
    ap.add_argument("--llms", type=positive_int, default=10)
    ap.add_argument("--epochs", type=positive_int, default=2)
    ap.add_argument("--batch-size", type=positive_int, default=4096)
    ap.add_argument("--top", type=positive_int, default=20)
    args = ap.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    from recsys_router.datasets.synthetic import make_synthetic
    from recsys_router.registry import make_router
    warnings.simplefilter("ignore")
    data = make_synthetic(args.queries, args.llms, 8, seed=args.seed, with_text=False)
    emb = np.random.default_rng(args.seed).standard_normal((data.n_queries, 384))
    emb = (emb / np.linalg.norm(emb, axis=1, keepdims=True)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        np.save(Path(tmp) / "emb.npy", emb)
        (Path(tmp) / "emb.ids.txt").write_text("\n".join(map(str, data.query_ids)) + "\n")
        router = make_router(args.model, encoder=f"precomputed:{Path(tmp) / 'emb.npy'}",
                             batch_size=args.batch_size, max_epochs=args.epochs,
                             val_fraction=0.0, seed=args.seed)
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        router.fit(data)
        prof.disable()
        fit_s = time.perf_counter() - t0
    n_rec = int((~np.isnan(data.scores)).sum())
    print(f"{args.model}: fit {fit_s:.2f} s, {n_rec * args.epochs / fit_s:,.0f} records/s, "
          f"{getattr(router, 'steps_', '?')} steps")
    pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
