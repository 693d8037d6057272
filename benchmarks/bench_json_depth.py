"""The JSON depth pre-scan of artifact files (``safe_io.json_depth``): linear time and
bounded memory on plain and crafted texts.

Per text: its size, the scan's time, its ratio to ``json.loads`` of a plain document of
the same size (measured in the same run; a crafted text is not valid JSON), the time per
MiB and the scan's peak traced memory (``tracemalloc``) in MiB, which stays flat as the
text grows (the scan works on fixed-size chunks).
Texts: a state-like document of floats (``plain``), ``"`` followed by escaped quotes
(``escaped-quotes``: the regex scan it replaced took 29 s on 64 KB, time growing with the
square of the size) and many closing brackets (``brackets``). Doubling a size should about
double the time (the ``x prev`` column, about 2).

Usage::

    python benchmarks/bench_json_depth.py --max-mib 64
"""

from __future__ import annotations

import argparse
import json
import time
import tracemalloc

import numpy as np

from recsys_router.cli.args import positive_int
from recsys_router.export.safe_io import json_depth


def _texts(size: int, rng: np.random.Generator) -> dict[str, bytes]:
    row = json.dumps([float(v) for v in rng.random(64)]).encode()
    plain = b"[" + b",".join([row] * max(1, size // (len(row) + 1))) + b"]"
    return {"plain": plain, "escaped-quotes": b'"' + b'\\"' * (size // 2),
            "brackets": b"[0]," * (size // 4)}


def _time(fn, raw: bytes) -> float:
    t = time.perf_counter()
    fn(raw)
    return time.perf_counter() - t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max-mib", type=positive_int, default=64, help="largest text, in MiB")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    sizes = [1 << 20]
    while sizes[-1] * 2 <= args.max_mib << 20:
        sizes.append(sizes[-1] * 2)
    print(f"{'text':<15}{'MiB':>6}{'scan s':>9}{'/loads':>8}{'s/MiB':>8}{'x prev':>8}{'peak MiB':>9}")
    prev: dict[str, float] = {}
    for size in sizes:
        texts = _texts(size, rng)
        loads = _time(json.loads, texts["plain"])
        for name, raw in texts.items():
            dt = _time(json_depth, raw)
            tracemalloc.start()
            json_depth(raw)
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            mib = len(raw) / 2**20
            grow = f"{dt / prev[name]:.2f}" if name in prev else "-"
            prev[name] = dt
            print(f"{name:<15}{mib:>6.0f}{dt:>9.3f}{dt / loads:>8.2f}{dt / mib:>8.4f}{grow:>8}"
                  f"{peak / 2**20:>9.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
