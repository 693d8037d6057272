"""Graph router quality by training-batch layout on one routerbench_zs split (issue 14).

The graph router's speed-up changed what a training step predicts: batches of queries
(``fixed_mode = "listwise"``) instead of the queries of a batch of cells. This script fits
the router on the same seeded 8:1:1 split that ``bench_quality.py --folds 1`` uses (no safe
fallback, no inner held-out checks: ``val_fraction=0``) with the layout chosen by
``--layout`` and prints AIQ and nAUC per router seed:

* ``queries``: the code as it is (batches of queries);
* ``cells``: the layout before the speed-up (``fixed_mode = "pointwise"``: a step's targets
  are the distinct queries of a batch of cells, capped at ``target_fraction``);
* ``iid``: each step's targets a fresh random ``target_fraction`` of the train queries.

Usage: ``python benchmarks/graph_layouts.py --seed 0 --layout queries --router-seeds 0,1``.
Run from an older checkout, ``--layout queries`` measures that checkout's own layout.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout


def _router_seeds(text: str) -> list[int]:
    """``"0,1,2"`` -> ``[0, 1, 2]``; anything else (not integers, negative, none, more than
    64) stops with a one-line error before any data is loaded."""
    parts = [v.strip() for v in text.split(",") if v.strip()]
    if not parts or len(parts) > 64 or not all(v.isdigit() for v in parts):
        raise SystemExit(f"--router-seeds must be 1 to 64 comma-separated integers >= 0, "
                         f"got {text[:80]!r}")
    return [int(v) for v in parts]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0, help="split seed")
    ap.add_argument("--layout", choices=("queries", "cells", "iid"), default="queries")
    ap.add_argument("--router-seeds", default="0")
    ap.add_argument("--encoder", default="minilm:torch")
    args = ap.parse_args(argv)
    seeds = _router_seeds(args.router_seeds)
    import torch

    from recsys_router.datasets.registry import load_dataset
    from recsys_router.evaluation import EvalConfig, evaluate
    from recsys_router.models.graph_module import GraphModule

    if args.layout == "cells":
        GraphModule.fixed_mode = "pointwise"
    elif args.layout == "iid":
        step = GraphModule.training_step

        def iid_step(self, batch, batch_idx):
            n = self._require_builder().n_train
            drawn = np.flatnonzero(self._rng.random(n) < self.target_fraction)
            b = {k: v for k, v in batch.items() if k != "row"}
            return step(self, {**b, "index": torch.as_tensor(drawn)}, batch_idx)
        GraphModule.training_step = iid_step
    data = load_dataset("routerbench_zs")
    for s in seeds:
        t0 = time.perf_counter()
        cfg = EvalConfig(["graph"], protocols=["routerbench", "orbit"], folds=1, seed=args.seed,
                         encoder=args.encoder, fallback=False,
                         router_params={"graph": {"val_fraction": 0, "seed": s}})
        m = evaluate(data, cfg).metrics
        m = m[(m["pool"] == "all") & (m["group"] == "all") & m["router"].str.startswith("graph")]
        aiq, nauc = (float(m[m["metric"] == k]["value"].iloc[0]) for k in ("aiq", "nauc"))
        print(f"layout {args.layout} router seed {s}: AIQ {aiq:.4f} nAUC {nauc:.4f} "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
