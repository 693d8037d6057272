"""Small hostile data files: loaded or refused fast and in bounded memory?

Two files from the issue tracker's hardening round, rebuilt here, each loaded in a fresh
child process (so peak memory is its own) through ``recsys_router.datasets.load_dataset``:

* ``wide``: a ~200 KB long-table CSV with 20,000 columns (the reported 168 KB one took pandas
  over 120 s);
* ``sparse``: 8,000 records whose ids name 8,000 queries x 8,000 LLMs (~110 KB; the reported
  138 KB one peaked at 2.2 GB building its dense matrix).

The baseline is a well-formed long table of as many records (``baseline``: 8,000 records over
400 queries x 20 LLMs) loaded the same way in the same run. Printed per file: outcome
(loaded / refused and why), load time in seconds, its ratio to the baseline, and peak
resident memory of the child (``VmHWM``) minus its memory after imports. Targets: under
2 s and under 300 MB each. Only the library's validation error (``DataValidationError``)
counts as a refusal; any other exception is printed as ``error`` and fails the run. Exit
status 1 if a target is missed, the baseline did not load, or a file raised such an error.

Usage::

    python benchmarks/bench_hostile_files.py --seed 0
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

CHILD = r"""
import json, sys, time
def hwm():
    with open("/proc/self/status") as fh:
        return next(int(l.split()[1]) for l in fh if l.startswith("VmHWM:")) / 1024
from recsys_router.datasets import load_dataset
from recsys_router.datasets.generic import load_generic
from recsys_router.errors import DataValidationError
base = hwm()
t0 = time.perf_counter()
try:
    d = load_dataset(sys.argv[1])
    outcome = f"loaded {d.shape[0]:,} x {d.shape[1]:,}"
except DataValidationError as exc:
    outcome = "refused: " + str(exc).split(": ", 1)[-1][:90]
except Exception as exc:  # a loader bug, not a refusal: reported as such, and fails the run
    outcome = f"error: {type(exc).__name__}: {str(exc)[:90]}"
dt = time.perf_counter() - t0
print(json.dumps({"outcome": outcome, "seconds": dt, "peak_mb": hwm(), "import_mb": base}))
"""


def _write(folder: Path, rng: np.random.Generator) -> dict[str, Path]:
    wide = folder / "wide.csv"
    n = 20_000
    wide.write_text(",".join(["query_id", "model", "score"] + [f"c{i}" for i in range(n - 3)])
                    + "\n" + "".join(f"q{r},m,1" + "," * (n - 3) + "\n" for r in range(4)))
    sparse = folder / "sparse.csv"
    sparse.write_text("query_id,model,score\n" + "".join(f"q{i},m{i},{rng.integers(0, 2)}\n"
                                                         for i in range(8000)))
    base = folder / "baseline.csv"
    base.write_text("query_id,model,score\n" + "".join(
        f"q{i // 20},m{i % 20},{rng.integers(0, 2)}\n" for i in range(8000)))
    return {"baseline": base, "wide": wide, "sparse": sparse}


def _run(path: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True,
                         timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"child failed on {path.name}: {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0, help="seed of the random scores")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        files = _write(Path(tmp), rng)
        rows = {name: (path.stat().st_size, _run(path)) for name, path in files.items()}
    base_s = rows["baseline"][1]["seconds"]
    ok = True
    print(f"{'file':<9} {'KB':>6} {'seconds':>8} {'x base':>7} {'peak MB':>8} {'+imports':>9}  outcome")
    for name, (size, r) in rows.items():
        extra = r["peak_mb"] - r["import_mb"]
        if name == "baseline":
            miss = not r["outcome"].startswith("loaded")
        else:
            miss = (r["seconds"] >= 2 or r["peak_mb"] >= 300
                    or not r["outcome"].startswith(("loaded", "refused")))
        ok &= not miss
        print(f"{name:<9} {size / 1024:>6.0f} {r['seconds']:>8.3f} {r['seconds'] / base_s:>7.2f} "
              f"{r['peak_mb']:>8.0f} {extra:>9.1f}  {r['outcome']}{'  MISSED' if miss else ''}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
