"""Isolation under load: can one bad client cost a good one a request?

An exported kNN router (``hashing`` encoder, SIMULATED data) is served over loopback HTTP by
a child process (``create_app`` under uvicorn, micro-batching on, as ``recsys-router serve``
builds it) in which a fault injector wraps the model call: any batch holding a text with
the marker word raises, as a model bug triggered by one input would. ``--clients``
concurrent clients (one keep-alive connection each) send ``--requests`` single-query
requests each, every text distinct, in three phases:

1. ``clean``: good texts only;
2. ``unencodable``: 10% of the requests carry a lone surrogate (``"\\ud800"``): they
   must get 422 at validation and never reach a batch;
3. ``poisoned``: 10% carry the marker: their batches fail, are retried in halves down to
   single requests, and only the marked requests may fail (500).

Printed per phase: requests/s, p50/p99 latency, good requests failed, bad requests answered
as expected, queries predicted, batches split and failed predictions (from ``/metrics``),
and the summary line quoted in the README. Exit status 1 if any good request failed.

Usage::

    python benchmarks/bench_serve_isolation.py --seed 0
    python benchmarks/bench_serve_isolation.py --clients 8 --requests 5   # quick
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_serve import _free_port, _start_server, _texts  # noqa: E402
from recsys_router.cli.args import positive_int  # noqa: E402

MARKER = "poisonpill"
EXPECTED = {"good": 200, "unencodable": 422, "poison": 500}


def _child(art_dir: str, port: int) -> int:
    """Serve the artifact with the fault injector (runs in the child process)."""
    import uvicorn

    from recsys_router.export import load_router
    from recsys_router.serving import ServiceConfig, create_app
    art = load_router(art_dir)
    real = art.predict

    def predict(texts):
        if any(MARKER in t for t in texts):
            raise RuntimeError("injected model failure")
        return real(texts)
    art.predict = predict
    app = create_app(art, ServiceConfig(max_batch=256, batch_wait_ms=2.0))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="error")
    return 0


def _start(art_dir: Path, env: dict) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    return _start_server([sys.executable, __file__, "--child", str(art_dir), "--port", str(port)], port, env)


def _counters(url: str) -> dict:
    import httpx
    from prometheus_client.parser import text_string_to_metric_families
    out = {}
    for fam in text_string_to_metric_families(httpx.get(url + "/metrics").text):
        for s in fam.samples:
            if not s.labels:
                out[s.name] = s.value
    return out


async def _fire(url: str, jobs: list[list[tuple[str, bytes]]], bar) -> list[tuple[str, int, bool, float]]:
    """One client per job list, all at once; returns (kind, status, has 'llm', seconds) per request."""
    import httpx
    out = []

    async def client_run(cl, reqs):
        for kind, body in reqs:
            t0 = time.perf_counter()
            r = await cl.post("/route", content=body, headers={"content-type": "application/json"})
            ok = r.status_code == 200 and "llm" in r.json()
            out.append((kind, r.status_code, ok, time.perf_counter() - t0))
            bar.update(1)
    clients = [httpx.AsyncClient(base_url=url, timeout=120.0) for _ in jobs]
    try:
        await asyncio.gather(*[client_run(c, j) for c, j in zip(clients, jobs)])
    finally:
        await asyncio.gather(*[c.aclose() for c in clients])
    return out


def _jobs(rng, phase: str, clients: int, requests: int) -> list[list[tuple[str, bytes]]]:
    texts = _texts(rng, clients * requests, phase)
    bad = np.zeros(len(texts), bool)
    if phase != "clean":  # exactly 10% (at least one), at seeded random positions
        bad[rng.choice(len(texts), size=max(1, len(texts) // 10), replace=False)] = True
    jobs = []
    for c in range(clients):
        reqs = []
        for k in range(c * requests, (c + 1) * requests):
            kind, t = "good", texts[k]
            if bad[k] and phase == "unencodable":
                kind, t = "unencodable", t + " \ud800"
            elif bad[k]:
                kind, t = "poison", f"{t} {MARKER}"
            reqs.append((kind, json.dumps({"query": t}).encode()))  # ASCII-escaped JSON
        jobs.append(reqs)
    return jobs


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--clients", type=positive_int, default=128)
    ap.add_argument("--requests", type=positive_int, default=20, help="requests per client and phase")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        return _child(args.child, args.port)
    # the exported artifact and the encoder cache live here, removed however the run ends
    with tempfile.TemporaryDirectory(prefix="bench-isolation-", ignore_cleanup_errors=True) as tmp:
        return _run(args, Path(tmp))


def _run(args, tmp: Path) -> int:
    """The benchmark proper, its files in the folder ``tmp``."""
    from tqdm import tqdm

    from recsys_router.datasets.synthetic import make_synthetic
    from recsys_router.export import export_router
    from recsys_router.registry import make_router

    rng = np.random.default_rng(args.seed)
    env = dict(os.environ, RECSYS_ROUTER_CACHE=str(tmp / "cache"), OPENBLAS_NUM_THREADS="1",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    train = make_synthetic(1000, 8, 6, seed=args.seed)
    art = export_router(make_router("knn", k=10, encoder="hashing").fit(train), tmp / "knn")
    proc, url = _start(art, env)
    rows, good_failed, bad_wrong = [], 0, 0
    try:
        asyncio.run(_fire(url, _jobs(rng, "warm", 4, 8), tqdm(disable=True)))
        for phase in ("clean", "unencodable", "poisoned"):
            jobs = _jobs(rng, phase, args.clients, args.requests)
            c0 = _counters(url)
            with tqdm(total=args.clients * args.requests, desc=phase, leave=False) as bar:
                t0 = time.perf_counter()
                res = asyncio.run(_fire(url, jobs, bar))
                wall = time.perf_counter() - t0
            c1 = _counters(url)
            d = {k: c1.get(k, 0) - c0.get(k, 0) for k in ("recsys_router_batched_queries_total",
                                                          "recsys_router_batches_split_total",
                                                          "recsys_router_prediction_failures_total")}
            lat = np.array([r[3] for r in res])
            good = [r for r in res if r[0] == "good"]
            bad = [r for r in res if r[0] != "good"]
            gf = sum(not r[2] for r in good)
            bw = sum(r[1] != EXPECTED[r[0]] for r in bad)
            good_failed, bad_wrong = good_failed + gf, bad_wrong + bw
            rows.append((phase, len(res) / wall, np.percentile(lat, 50) * 1e3, np.percentile(lat, 99) * 1e3,
                         len(good), gf, len(bad), len(bad) - bw,
                         int(d["recsys_router_batched_queries_total"]), int(d["recsys_router_batches_split_total"]),
                         int(d["recsys_router_prediction_failures_total"])))
    finally:
        proc.terminate()
        proc.wait(15)
    print(f"SIMULATED data, kNN + hashing encoder; {args.clients} concurrent clients x {args.requests} "
          f"requests per phase on 127.0.0.1 (seed {args.seed})\n")
    print(f"{'phase':12} {'req/s':>7} {'p50 ms':>7} {'p99 ms':>7} {'good':>5} {'failed':>6} {'bad':>4} "
          f"{'as expected':>11} {'predicted':>9} {'split':>5} {'pred.fail':>9}")
    for r in rows:
        print(f"{r[0]:12} {r[1]:7.1f} {r[2]:7.1f} {r[3]:7.1f} {r[4]:5d} {r[5]:6d} {r[6]:4d} {r[7]:11d} "
              f"{r[8]:9d} {r[9]:5d} {r[10]:9d}")
    clean_errors = rows[0][5]
    print("\ngood/failed: legitimate requests and how many did not get a 200 with a decision; bad/as "
          "expected: unencodable (422) or poisoned (500) requests answered so; predicted: queries that "
          "reached a model call; split: failed multi-request model calls, retried in halves; pred.fail: "
          "requests whose own model call failed.")
    print(f"\n{args.clients} concurrent clients x {args.requests} requests on 127.0.0.1: {clean_errors} errors; "
          f"a poisoned batch costs {rows[2][5]} good requests (unencodable text costs {rows[1][5]})")
    return 1 if good_failed or bad_wrong else 0


if __name__ == "__main__":
    sys.exit(main())
