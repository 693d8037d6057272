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

``--protocol anchor`` fits on the ORBIT anchor's split instead (``bench_quality.py --part
anchor``: 630 train queries) and prints nAUC; ``--params`` sets further router parameters
(e.g. ``batch_size=23,max_epochs=20``, the anchor table's setting).

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


def _params(text: str) -> dict:
    """``"batch_size=23,dropout=0.1"`` -> ``{"batch_size": 23, "dropout": 0.1}`` (numbers
    only; anything else stops with a one-line error)."""
    out = {}
    for kv in (v.strip() for v in text.split(",") if v.strip()):
        k, sep, v = kv.partition("=")
        if not sep or not k.isidentifier():
            raise SystemExit(f"--params wants k=v pairs, got {kv[:80]!r}")
        try:
            out[k] = int(v) if v.lstrip("-").isdigit() else float(v)
        except ValueError:
            raise SystemExit(f"--params value of {k!r} must be a number, got {v[:40]!r}") from None
        if not np.isfinite(out[k]):
            raise SystemExit(f"--params value of {k!r} must be a finite number, got {v[:40]!r}")
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0, help="split seed")
    ap.add_argument("--layout", choices=("queries", "cells", "iid"), default="queries")
    ap.add_argument("--router-seeds", default="0")
    ap.add_argument("--encoder", default="minilm:torch")
    ap.add_argument("--protocol", choices=("split", "anchor"), default="split",
                    help="split: one seeded 8:1:1 routerbench_zs split; anchor: ORBIT's 20/80")
    ap.add_argument("--params", default="",
                    help="further graph parameters, k=v,k=v (values parsed as numbers)")
    args = ap.parse_args(argv)
    extra = _params(args.params)
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
    if args.protocol == "anchor":
        from bench_quality import anchor_data
        data, split = anchor_data(), {"split_column": "split", "seed": 0}
        protocols = ["orbit"]
    else:
        data, split = load_dataset("routerbench_zs"), {"folds": 1, "seed": args.seed}
        protocols = ["routerbench", "orbit"]
    for s in seeds:
        t0 = time.perf_counter()
        cfg = EvalConfig(["graph"], protocols=protocols, encoder=args.encoder, fallback=False,
                         router_params={"graph": {"val_fraction": 0, **extra, "seed": s}},
                         **split)
        m = evaluate(data, cfg).metrics
        m = m[(m["pool"] == "all") & (m["group"] == "all") & m["router"].str.startswith("graph")]
        got = {k: float(m[m["metric"] == k]["value"].iloc[0])
               for k in ("aiq", "nauc") if (m["metric"] == k).any()}
        print(f"layout {args.layout} router seed {s}: "
              + " ".join(f"{k.upper() if k == 'aiq' else 'nAUC'} {v:.4f}" for k, v in got.items())
              + f" ({time.perf_counter() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
