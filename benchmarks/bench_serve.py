"""Throughput and latency of ``POST /route`` over loopback HTTP vs ``router.route`` in process.

Two exported kNN routers fitted on SIMULATED data: one with the cheap ``hashing`` encoder
(stands for precomputed embeddings: encoding costs next to nothing) and one with the
packaged MiniLM sentence encoder (real neural encoding per query). Each is served by a
``recsys-router serve`` subprocess (uvicorn, micro-batching on) and hit by an
``httpx.AsyncClient`` with 1, 16 and 128 concurrent clients, ``--requests`` single-query
requests per level, every text distinct (the encoder cache never answers) and no failed
request allowed. The in-process baseline calls ``ExportedRouter.route([text])`` one text
at a time on other distinct texts, before and after the HTTP runs (the faster counts),
in the same run, with the encoder caching in memory only as the service does
(:func:`~recsys_router.encoders.cache.memory_only`), so both sides do the same work.

Printed per router and concurrency: requests/s, p50/p99 latency (ms), the mean number of
queries per model call (micro-batching), and the ratio HTTP throughput / in-process
throughput (> 1: micro-batching more than pays for HTTP; < 1: the HTTP overhead), and the
ratio HTTP p50 / in-process p50 (the serving-latency aim at one client: <= 1.5). The
``paired`` rows alternate one in-process call, one ``httpx`` request and one request through
a bare keep-alive ``http.client`` connection from one client, so all three latencies are taken
under the same load (the separate phases run tens of seconds apart). The ``HTTP-raw`` rows
(that bare client, one request at a time) separate the service's own latency from the
client library's: httpx spends about a millisecond per request building and parsing.

Usage::

    python benchmarks/bench_serve.py --seed 0
    python benchmarks/bench_serve.py --requests 200 --encoders hashing   # quicker
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.bench_checks import int_list, item_list, positive_int  # noqa: E402
from recsys_router.cli.args import encoder_spec, non_negative_float, seed_value  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _texts(rng: np.random.Generator, n: int, tag: str) -> list[str]:
    words = ["route", "model", "cost", "query", "answer", "python", "proof", "story", "table",
             "graph", "energy", "market", "history", "poem", "translate", "sum", "list", "code"]
    return [f"{tag} {i}: " + " ".join(rng.choice(words, size=int(rng.integers(5, 30))))
            for i in range(n)]


async def _load(url: str, texts: list[str], concurrency: int) -> tuple[float, np.ndarray, int]:
    import httpx
    if concurrency < 1:  # no client would send anything: a made-up measurement
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    lat = np.empty(len(texts))
    failures = 0
    it = iter(range(len(texts)))
    async def worker(client):
        nonlocal failures
        for i in it:
            t0 = time.perf_counter()
            r = await client.post("/route", json={"query": texts[i]})
            lat[i] = time.perf_counter() - t0
            if r.status_code != 200 or "llm" not in r.json():
                failures += 1

    # one client (one keep-alive connection) per simulated user: a single pool shared by
    # 128 coroutines spends its time in the pool, not on the server
    clients = [httpx.AsyncClient(base_url=url, timeout=120.0) for _ in range(concurrency)]
    try:
        t0 = time.perf_counter()
        await asyncio.gather(*[worker(c) for c in clients])
        wall = time.perf_counter() - t0
    finally:
        await asyncio.gather(*[c.aclose() for c in clients])
    return wall, lat, failures


class _RawClient:
    """The lightest HTTP client: one keep-alive ``http.client`` connection, JSON by hand.

    Latency seen through it is the server's plus the loopback, with next to no client-side
    work, where ``httpx`` adds its own request building and response parsing (about a
    millisecond per request here); both are printed.
    """

    def __init__(self, url: str):
        import http.client
        from urllib.parse import urlsplit
        parts = urlsplit(url)
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)

    def post(self, path: str, json: dict) -> tuple[int, dict]:
        import json as _json
        body = _json.dumps(json).encode()
        self.conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        resp = self.conn.getresponse()
        return resp.status, _json.loads(resp.read())

    def close(self) -> None:
        self.conn.close()


def _raw_load(url: str, texts: list[str]) -> np.ndarray:
    """One client, one request at a time through :class:`_RawClient`; latencies in s."""
    client = _RawClient(url)
    lat = np.empty(len(texts))
    try:
        for i, text in enumerate(texts):
            t0 = time.perf_counter()
            status, body = client.post("/route", {"query": text})
            lat[i] = time.perf_counter() - t0
            assert status == 200 and "llm" in body, (status, str(body)[:200])
    finally:
        client.close()
    return lat


def _proc_cpu(pid: int) -> float:
    """CPU seconds (user + system) used so far by process ``pid`` (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _paired(url: str, art, texts: list[str], server_pid: int):
    """One client alternating an in-process ``route([text])`` and an HTTP request, so both
    see the same machine load; returns (in-process, HTTP) latencies in seconds and the CPU
    seconds per query of the in-process calls and of the server process (or None off Linux)."""
    import httpx

    from recsys_router.encoders.cache import memory_only
    third = len(texts) // 3
    local, remote, raw = np.empty(third), np.empty(third), np.empty(third)
    cpu_local = 0.0
    linux = Path(f"/proc/{server_pid}/stat").exists()
    server0 = _proc_cpu(server_pid) if linux else 0.0
    rawc = _RawClient(url)
    with httpx.Client(base_url=url, timeout=120.0) as client:
        for i in range(third):
            s, c = time.perf_counter(), time.process_time()
            with memory_only():  # as the service: no disk-cache shard per query
                art.route([texts[3 * i]])
            local[i] = time.perf_counter() - s
            cpu_local += time.process_time() - c
            s = time.perf_counter()
            r = client.post("/route", json={"query": texts[3 * i + 1]})
            remote[i] = time.perf_counter() - s
            assert r.status_code == 200 and "llm" in r.json(), r.text[:200]
            s = time.perf_counter()
            status, body = rawc.post("/route", {"query": texts[3 * i + 2]})
            raw[i] = time.perf_counter() - s
            assert status == 200 and "llm" in body, (status, str(body)[:200])
    rawc.close()
    server = (_proc_cpu(server_pid) - server0) / (2 * third) if linux else None
    return local, remote, raw, cpu_local / third, server


def _batches(url: str) -> tuple[float, float]:
    import httpx
    vals = {}
    for line in httpx.get(url + "/metrics").text.splitlines():
        if line.startswith(("recsys_router_batches_total ", "recsys_router_batched_queries_total ")):
            k, v = line.split()
            vals[k] = float(v)
    return vals.get("recsys_router_batches_total", 0.0), vals.get("recsys_router_batched_queries_total", 0.0)


def _serve(art: Path, env: dict, batch_wait_ms: float | None = None) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    extra = [] if batch_wait_ms is None else ["--batch-wait-ms", str(batch_wait_ms)]
    return _start_server([sys.executable, "-c", "import sys; from recsys_router.cli import main; "
                          "sys.exit(main())", "serve", str(art), "--port", str(port),
                          "--max-batch", "256", *extra], port, env)


def _start_server(cmd: list[str], port: int, env: dict) -> tuple[subprocess.Popen, str]:
    """Start ``cmd`` (a server on 127.0.0.1:``port``) and wait until ``/health`` answers."""
    import httpx
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(proc.stderr.read().decode()[-2000:])
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("server did not start")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=seed_value, default=0)
    ap.add_argument("--requests", type=positive_int, default=300, help="requests per concurrency level")
    ap.add_argument("--concurrency", type=int_list(1), default="1,16,128",
                    help="comma-separated client counts, each >= 1")
    ap.add_argument("--encoders", type=item_list(encoder_spec, "encoder"), default="hashing,minilm",
                    help="comma-separated encoders of the kNN routers served")
    ap.add_argument("--batch-wait-ms", type=non_negative_float, default=None,
                    help="passed to serve (default: serve's own default)")
    args = ap.parse_args(argv)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    cache_before = os.environ.get("RECSYS_ROUTER_CACHE")
    # the exported artifacts and the encoder cache live here, removed however the run ends
    with tempfile.TemporaryDirectory(prefix="bench-serve-", ignore_cleanup_errors=True) as tmp:
        try:
            return _run(args, Path(tmp))
        finally:
            if cache_before is None:
                os.environ.pop("RECSYS_ROUTER_CACHE", None)
            else:
                os.environ["RECSYS_ROUTER_CACHE"] = cache_before


def _run(args, tmp: Path) -> int:
    """The benchmark proper, its files in the folder ``tmp``."""
    from recsys_router.datasets.synthetic import make_synthetic
    from recsys_router.encoders.cache import memory_only
    from recsys_router.export import export_router, load_router
    from recsys_router.registry import make_router

    rng = np.random.default_rng(args.seed)
    levels = args.concurrency
    env = dict(os.environ, RECSYS_ROUTER_CACHE=str(tmp / "cache"), OPENBLAS_NUM_THREADS="1",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    os.environ["RECSYS_ROUTER_CACHE"] = str(tmp / "cache")  # cold cache in process too
    if "minilm" in args.encoders:  # export the ONNX model once, outside the timing
        from recsys_router.encoders import get_encoder
        get_encoder("minilm", cache=False).encode(["warm-up"])
    train = make_synthetic(1000, 8, 6, seed=args.seed)
    print(f"SIMULATED data: {train.n_queries} train queries x {train.n_llms} LLMs; "
          f"{args.requests} single-query requests per level; all texts distinct\n")
    print(f"{'encoder':8} {'mode':>11} {'clients':>7} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'q/batch':>7} {'vs in-proc':>10} {'p50 ratio':>9}")
    cpu_rows = []
    for enc in args.encoders:
        art_dir = export_router(make_router("knn", k=10, encoder=enc).fit(train), tmp / f"knn-{enc}")
        art = load_router(art_dir)
        art.route(["warm up the encoder"])

        def in_process(tag):
            texts = _texts(rng, args.requests, tag)
            lat = np.empty(len(texts))
            t0 = time.perf_counter()
            for i, t in enumerate(texts):
                s = time.perf_counter()
                with memory_only():  # as the service: no disk-cache shard per query
                    art.route([t])
                lat[i] = time.perf_counter() - s
            rps = len(texts) / (time.perf_counter() - t0)
            p50 = np.percentile(lat, 50) * 1e3
            print(f"{enc:8} {'in-process':>11} {1:>7} {rps:8.1f} {p50:8.2f} "
                  f"{np.percentile(lat, 99) * 1e3:8.2f} {1:>7} {'':>10} {'':>9}")
            return rps, p50
        base, base_p50 = in_process("inproc-a")
        proc, url = _serve(art_dir, env, args.batch_wait_ms)
        rows = []
        try:
            asyncio.run(_load(url, _texts(rng, 32, "warm"), 4))
            for c in levels:
                b0, q0 = _batches(url)
                wall, lat, failed = asyncio.run(_load(url, _texts(rng, args.requests, f"http{c}"), c))
                b1, q1 = _batches(url)
                assert failed == 0, f"{failed} failed requests ({enc}, {c} clients)"
                rows.append((c, args.requests / wall, np.percentile(lat, 50) * 1e3,
                             np.percentile(lat, 99) * 1e3, (q1 - q0) / max(b1 - b0, 1)))
            raw_lat = _raw_load(url, _texts(rng, args.requests, "raw"))
            *paired, cpu_in, cpu_server = _paired(url, art, _texts(rng, 3 * args.requests, "paired"),
                                                  proc.pid)
        finally:
            proc.terminate()
            proc.wait(15)
        rps_b, p50_b = in_process("inproc-b")
        base, base_p50 = max(base, rps_b), min(base_p50, p50_b)  # the faster run of the two
        for c, rps, p50, p99, qpb in rows:
            print(f"{enc:8} {'HTTP':>11} {c:>7} {rps:8.1f} {p50:8.2f} {p99:8.2f} {qpb:7.1f} "
                  f"{rps / base:10.2f} {p50 / base_p50:9.2f}")
        raw50, raw99 = np.percentile(raw_lat, 50) * 1e3, np.percentile(raw_lat, 99) * 1e3
        print(f"{enc:8} {'HTTP-raw':>11} {1:>7} {len(raw_lat) / raw_lat.sum():8.1f} {raw50:8.2f} "
              f"{raw99:8.2f} {1:>7} {'':>10} {raw50 / base_p50:9.2f}")
        (p_in, p_http, p_raw), p99s = [np.percentile(x, 50) * 1e3 for x in paired], \
            [np.percentile(x, 99) * 1e3 for x in paired]
        for mode, p50, p99 in [("paired-in", p_in, p99s[0]), ("paired-HTTP", p_http, p99s[1]),
                               ("paired-raw", p_raw, p99s[2])]:
            print(f"{enc:8} {mode:>11} {1:>7} {'':>8} {p50:8.2f} {p99:8.2f} {1:>7} {'':>10} "
                  f"{p50 / p_in:9.2f}")
        if cpu_server is not None:
            cpu_rows.append(f"{enc}: in-process route {cpu_in * 1e3:.2f} ms, server process "
                            f"{cpu_server * 1e3:.2f} ms per HTTP request "
                            f"({cpu_server / cpu_in:.2f}x)")
    print("\nvs in-proc = HTTP requests/s divided by the faster of the two in-process runs of "
          "route([text]) (before and after the HTTP runs; same process, same run).\n"
          "p50 ratio = HTTP p50 latency divided by the lower in-process p50 of those two runs "
          "(the issue-14 aim at 1 client: <= 1.5).\n"
          "paired-in / paired-HTTP = one client alternating an in-process route([text]) and an "
          "HTTP request (same load for both); its p50 ratio is HTTP p50 / in-process p50 of "
          "those pairs.\n"
          "HTTP / paired-HTTP use httpx (async at every level, sync when paired); HTTP-raw / "
          "paired-raw use one keep-alive stdlib http.client connection (next to no client-side "
          "work), so their latency is the server's plus loopback.")
    if cpu_rows:
        print("\nCPU time per query in the paired phase (load-independent; the server is a "
              "separate process, the client's own work is not counted):\n  "
              + "\n  ".join(cpu_rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
