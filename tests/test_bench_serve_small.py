"""bench_serve end to end on a handful of requests: a real uvicorn child process, the httpx
phases and the bare http.client ones; every mode prints a row and every request succeeds."""

from __future__ import annotations

import re
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def test_bench_serve_prints_every_mode(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("RECSYS_ROUTER_CACHE", str(tmp_path / "cache"))
    sys.path.insert(0, str(BENCH))
    try:
        import bench_serve
        rc = bench_serve.main(["--requests", "6", "--concurrency", "1", "--encoders", "hashing",
                               "--seed", "3"])
    finally:
        sys.path.remove(str(BENCH))
    out = capsys.readouterr().out
    assert rc == 0, out
    modes = re.findall(r"^hashing\s+(\S+)\s+1\s", out, re.M)
    assert modes == ["in-process", "in-process", "HTTP", "HTTP-raw", "paired-in", "paired-HTTP",
                     "paired-raw"], out
    # paired rows: p50, p99, queries per call (1), then the p50 ratio; paired-in's is 1
    ratios = {m: float(r) for m, r in re.findall(
        r"^hashing\s+(paired-\S+)\s+1\s+[\d.]+\s+[\d.]+\s+1\s+([\d.]+)$", out, re.M)}
    assert ratios.keys() == {"paired-in", "paired-HTTP", "paired-raw"}, out
    assert ratios["paired-in"] == 1.0 and ratios["paired-raw"] > 0, out
