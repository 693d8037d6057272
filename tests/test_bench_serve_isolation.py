"""The isolation benchmark end to end on a few clients: a real uvicorn child process, lone
surrogates and an injected model failure over loopback HTTP; no good request may fail."""

from __future__ import annotations

import re
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def test_isolation_benchmark_small(capsys):
    sys.path.insert(0, str(BENCH))
    try:
        import bench_serve_isolation
        rc = bench_serve_isolation.main(["--clients", "5", "--requests", "4", "--seed", "1"])
    finally:
        sys.path.remove(str(BENCH))
    out = capsys.readouterr().out
    assert rc == 0, out
    rows = {m.group(1): [int(x) for x in m.group(2).split()[-7:]]
            for m in re.finditer(r"^(clean|unencodable|poisoned)\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+(.*)$", out, re.M)}
    # good, failed, bad, as expected, predicted, split, prediction failures; 20 requests, 2 bad
    assert rows["clean"][:5] == [20, 0, 0, 0, 20]
    assert rows["unencodable"][:5] == [18, 0, 2, 2, 18]          # the bad texts never reached a model
    assert rows["poisoned"][:5] == [18, 0, 2, 2, 18] and rows["poisoned"][6] == 2
    assert "5 concurrent clients x 4 requests on 127.0.0.1: 0 errors; a poisoned batch costs 0 good" in out
