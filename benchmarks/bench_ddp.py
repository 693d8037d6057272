"""Lightning DDP with 2 CPU processes (gloo) vs 1 process: held-out metrics and wall time.

The mf config (``configs/models/mf.yaml``) is trained through the router LightningCLI on a
fixed simulated dataset (``configs/data/synthetic.yaml``: 2,000 queries x 8 LLMs, hashing
encoder, split 0.8/0.1/0.1 with data seed 0; ``--queries`` sets another size), then the
``test`` stage scores the final network on the held-out test split. Both runs use the same model seed (``--seed``), the same
number of epochs and the same *global* batch size: 1 process with ``--batch-size`` B, DDP
with 2 processes of B/2 each (gradients are averaged across ranks, so one optimizer step sees
B queries either way). Under DDP each rank tests half of the test split and the module
gathers both halves before computing the metrics (``RouterModule._eval_epoch_end``).

Noise reference: each of ``--seeds`` model seeds (``--seed``, ``--seed`` + 1, ...) is fitted
both ways; per seed the DDP - 1-process difference is printed, and the difference of the
means is compared with the spread (max - min) over seeds (with one seed there is no spread:
the verdict reads "n/a (one seed)"). The seed also sets the DDP
sampler's shuffling (Lightning seeds ``DistributedSampler`` with the global seed), while the
1-process order comes from the data seed (0) and is the same for every model seed, so the
1-process spread holds initialisation noise only; the DDP spread holds both. Wall time of each run is measured in this run (whole
subprocess, i.e. including interpreter start-up and, for DDP, the second process and the
gloo rendezvous; and the ``trainer.fit`` call alone, on rank 0) and printed as a ratio.

Usage: ``python benchmarks/bench_ddp.py --seed 0`` (or, larger,
``python benchmarks/bench_ddp.py --seed 0 --queries 40000 --batch-size 512 --epochs 4 --seeds 2``)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


ROOT = Path(__file__).resolve().parents[1]
METRICS = ("test/mu_o", "test/aiq", "test/loss")


def _worker(a) -> None:
    """One fit + test (re-entered by Lightning's DDP launcher for rank 1)."""
    import torch
    torch.set_num_threads(1)
    from recsys_router.lightning_cli import build_lightning_cli
    args = ["-c", str(ROOT / "configs" / "models" / "mf.yaml"),
            "-c", str(ROOT / "configs" / "data" / "synthetic.yaml"),
            f"--seed_everything={a.seed}", f"--data.init_args.batch_size={a.batch_size}",
            "--data.init_args.dataset_options="
            + json.dumps({"n_queries": a.queries, "n_llms": 8, "n_topics": 6, "seed": 0}),
            f"--trainer.max_epochs={a.epochs}", "--trainer.accelerator=cpu",
            f"--trainer.devices={a.devices}", "--trainer.enable_progress_bar=false",
            "--trainer.enable_model_summary=false",
            "--trainer.logger=false", f"--trainer.default_root_dir={a.out_dir}"]
    if a.devices > 1:
        args.append("--trainer.strategy=ddp")
    cli = build_lightning_cli(args, run=False)
    t0 = time.perf_counter()
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    fit_s = time.perf_counter() - t0
    res = cli.trainer.test(cli.model, datamodule=cli.datamodule, verbose=False)[0]
    if cli.trainer.global_rank == 0:
        out = {k: float(res[k]) for k in METRICS} | {"fit_s": fit_s,
                                                    "world_size": cli.trainer.world_size}
        Path(a.out_json).write_text(json.dumps(out))


def _run(seed: int, devices: int, batch_size: int, epochs: int, queries: int, tmp: Path) -> dict:
    out_json = tmp / f"s{seed}_d{devices}.json"
    out_dir = tmp / f"s{seed}_d{devices}"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--seed", str(seed),
           "--devices", str(devices), "--batch-size", str(batch_size), "--epochs", str(epochs),
           "--queries", str(queries),
           "--out-json", str(out_json), "--out-dir", str(out_dir)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True,
                          timeout=900)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"run seed={seed} devices={devices} failed:\n{proc.stderr[-3000:]}")
    res = json.loads(out_json.read_text())
    if res["world_size"] != devices:
        raise SystemExit(f"expected world size {devices}, got {res['world_size']}")
    return res | {"wall_s": wall}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0, help="model seed of the compared runs")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--queries", type=int, default=2000,
                   help="simulated queries (8 LLMs, 6 topics, data seed 0 as in the config)")
    p.add_argument("--batch-size", type=int, default=64, help="global batch size (queries)")
    p.add_argument("--seeds", type=int, default=3,
                   help="model seeds seed, seed+1, ...; each is fitted with 1 process and DDP "
                        "(the noise verdict needs at least 2)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--devices", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--out-json", help=argparse.SUPPRESS)
    p.add_argument("--out-dir", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.worker:
        return _worker(a)
    if a.queries < 20:
        raise SystemExit(f"--queries must be at least 20 (a 0.8/0.1/0.1 split), got {a.queries}")
    if a.seeds < 1:
        raise SystemExit(f"--seeds must be at least 1, got {a.seeds}")
    if a.batch_size % 2:
        raise SystemExit(f"--batch-size must be even (split over 2 processes), got {a.batch_size}")
    from tqdm import tqdm
    seeds = list(range(a.seed, a.seed + a.seeds))
    plan = [(s, dev) for s in seeds for dev in (1, 2)]
    with tempfile.TemporaryDirectory() as d:
        runs = {(s, dev): _run(s, dev, a.batch_size // dev, a.epochs, a.queries, Path(d))
                for s, dev in tqdm(plan, desc="fits")}
    print(f"mf on synthetic {a.queries}x8 (test split {a.queries // 10} queries), {a.epochs} "
          f"epochs, global batch "
          f"{a.batch_size}, model seeds {seeds}")
    print(f"{'metric':<11}{'seed':>6}{'1 process':>11}{'DDP 2 proc':>12}{'DDP - 1':>10}")
    for k in METRICS:
        for s in seeds:
            one, ddp = runs[(s, 1)][k], runs[(s, 2)][k]
            print(f"{k:<11}{s:>6}{one:>11.4f}{ddp:>12.4f}{ddp - one:>+10.4f}")
        ones = np.array([runs[(s, 1)][k] for s in seeds])
        ddps = np.array([runs[(s, 2)][k] for s in seeds])
        noise = max(np.ptp(ones), np.ptp(ddps))
        if len(seeds) < 2:  # no spread to compare with: one seed says nothing about noise
            verdict = "n/a (one seed)"
        else:
            verdict = ("within noise" if abs(ddps.mean() - ones.mean()) <= noise
                       else "BEYOND noise")
        print(f"{k:<11}{'mean':>6}{ones.mean():>11.4f}{ddps.mean():>12.4f}"
              f"{ddps.mean() - ones.mean():>+10.4f}  spread over seeds 1p {np.ptp(ones):.4f}, "
              f"DDP {np.ptp(ddps):.4f} -> {verdict}")
    for k in ("wall_s", "fit_s"):
        one = np.mean([runs[(s, 1)][k] for s in seeds])
        ddp = np.mean([runs[(s, 2)][k] for s in seeds])
        print(f"{k + ' mean':<17}{one:>11.1f}{ddp:>12.1f}   ratio DDP/1 = {ddp / one:.2f}x")
    return None


if __name__ == "__main__":
    main()
