"""Load time and peak memory of RoutingData construction vs plain pandas pivoting.

Two workloads, each case run in a fresh subprocess so that its peak resident memory
(``ru_maxrss``) is its own:

1. a generic long table of ``--records`` records (default 1M: 50,000 queries x 20 LLMs,
   rows shuffled; columns query_id, model, score, cost, query_text given once per query)
   written to parquet, then loaded by ``RoutingData.from_long(pd.read_parquet(path))``,
   by ``load_dataset(path)`` (the generic loader, which also validates texts) and by the
   pandas baselines ``pivot_table`` and ``pivot`` (scores + costs + first text per query);
2. a RouterEval-scale matrix (``--re-llms`` x ``--re-queries``, default 2,000 x 20,000 =
   40M cells): ``make_synthetic(with_text=False)`` directly, and the same matrix stored as a
   long parquet table (categorical ids) loaded by ``from_long`` and by ``pivot``.

Ratios are baseline / ours (> 1 means ours is faster or smaller). Each case checks that
its matrix equals the reference one (same sum of observed scores) so the comparison is
like for like.

Usage::

    python benchmarks/bench_data.py --seed 0
    python benchmarks/bench_data.py --records 200000 --re-queries 2000 --re-llms 500  # quick
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout
from recsys_router.cli.args import positive_int  # noqa: E402


def _rss_mb() -> float:
    """Peak resident memory of this process in MiB.

    ``VmHWM`` from ``/proc/self/status`` (reset by exec, so a child does not inherit its
    parent's peak the way ``ru_maxrss`` does); ``ru_maxrss`` where /proc is absent.
    """
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


# ---------------------------------------------------------------- data preparation
def prepare_generic(path: Path, records: int, n_llms: int, seed: int) -> None:
    import numpy as np
    import pandas as pd
    rng = np.random.default_rng(seed)
    nq = records // n_llms
    qi = np.repeat(np.arange(nq), n_llms)
    mi = np.tile(np.arange(n_llms), nq)
    perm = rng.permutation(len(qi))
    qi, mi = qi[perm], mi[perm]
    first = np.zeros(len(qi), dtype=bool)
    first[np.unique(qi, return_index=True)[1]] = True
    qtext = np.array([f"query {i}: " + " ".join(rng.choice(["what", "is", "the", "sum", "of",
                                                             "prove", "explain", "code"], 12))
                      for i in range(nq)], dtype=object)
    df = pd.DataFrame({
        "query_id": np.array([f"q-{i:07d}" for i in range(nq)], dtype=object)[qi],
        "model": np.array([f"org/model-{j:03d}" for j in range(n_llms)], dtype=object)[mi],
        "score": (rng.random(len(qi)) < 0.6).astype(np.float64),
        "cost": rng.uniform(1e-5, 1e-2, len(qi)),
        "query_text": np.where(first, qtext[qi], None),
    })
    df.to_parquet(path, index=False)


def prepare_routereval(path: Path, n_queries: int, n_llms: int, seed: int) -> None:
    import numpy as np
    import pandas as pd
    from recsys_router.datasets.synthetic import make_synthetic
    d = make_synthetic(n_queries, n_llms, 8, seed=seed, with_text=False)
    qi, mi = np.nonzero(d.observed)
    df = pd.DataFrame({
        "query_id": pd.Categorical.from_codes(qi.astype(np.int32), d.query_ids),
        "model": pd.Categorical.from_codes(mi.astype(np.int32), d.llm_names),
        "score": d.scores[qi, mi], "cost": d.costs[qi, mi]})
    df.to_parquet(path, index=False)


# ---------------------------------------------------------------- cases (run in a child)
def _pivot_generic(df, how):
    if how == "pivot_table":
        wide = df.pivot_table(index="query_id", columns="model", values=["score", "cost"],
                              aggfunc="first", sort=False)
    else:
        wide = df.pivot(index="query_id", columns="model", values=["score", "cost"])
    texts = df.groupby("query_id", sort=False)["query_text"].first()
    return wide["score"].to_numpy("float32"), wide["cost"].to_numpy("float32"), texts


def run_case(case: str, work: Path, seed: int, re_queries: int, re_llms: int) -> dict:
    import numpy as np
    import pandas as pd
    import pyarrow.parquet  # noqa: F401  (warm imports: not counted in any case)
    from recsys_router.data import RoutingData
    from recsys_router.datasets import available_datasets
    from recsys_router.datasets.synthetic import make_synthetic
    available_datasets()   # imports every loader module (not counted in any case)
    base = _rss_mb()
    t0 = time.perf_counter()
    long_path, re_path = work / "generic.parquet", work / "routereval.parquet"
    if case == "generic/from_long":
        d = RoutingData.from_long(pd.read_parquet(long_path))
        check, shape = float(np.nansum(d.scores)), d.shape
    elif case == "generic/load_dataset":
        from recsys_router.datasets import load_dataset
        d = load_dataset(str(long_path))
        check, shape = float(np.nansum(d.scores)), d.shape
    elif case in ("generic/pandas pivot_table", "generic/pandas pivot"):
        s, c, _ = _pivot_generic(pd.read_parquet(long_path), case.split()[-1])
        check, shape = float(np.nansum(s)), s.shape
    elif case == "routereval/make_synthetic":
        d = make_synthetic(re_queries, re_llms, 8, seed=seed, with_text=False)
        check, shape = float(np.nansum(d.scores, dtype=np.float64)), d.shape
    elif case == "routereval/from_long":
        d = RoutingData.from_long(pd.read_parquet(re_path))
        check, shape = float(np.nansum(d.scores, dtype=np.float64)), d.shape
    elif case == "routereval/pandas pivot":
        df = pd.read_parquet(re_path)
        wide = df.pivot(index="query_id", columns="model", values=["score", "cost"])
        s = wide["score"].to_numpy("float32")
        c = wide["cost"].to_numpy("float32")
        check, shape = float(np.nansum(s, dtype=np.float64)), s.shape
    else:
        raise SystemExit(f"unknown case {case!r}")
    secs = time.perf_counter() - t0
    return {"case": case, "seconds": secs, "peak_rss_mb": _rss_mb(), "delta_rss_mb": _rss_mb() - base,
            "shape": list(shape), "check": round(check, 1)}


def _child(case: str, args) -> dict:
    cmd = [sys.executable, __file__, "--child", case, "--work", str(args.work), "--seed",
           str(args.seed), "--re-queries", str(args.re_queries), "--re-llms", str(args.re_llms),
           "--records", str(args.records), "--llms", str(args.llms)]
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"case {case!r} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _report(rows: list[dict], ours: str, baselines: list[str]) -> None:
    by = {r["case"]: r for r in rows}
    print(f"  {'case':32s} {'seconds':>9s} {'peak RSS MB':>12s} {'delta MB':>9s}  shape   check")
    for r in rows:
        print(f"  {r['case']:32s} {r['seconds']:9.2f} {r['peak_rss_mb']:12.0f} "
              f"{r['delta_rss_mb']:9.0f}  {r['shape']}  {r['check']}")
    for b in baselines:
        if b in by and ours in by:
            print(f"  ratio {b} / {ours}: time x{by[b]['seconds'] / by[ours]['seconds']:.2f}, "
                  f"peak memory x{by[b]['peak_rss_mb'] / by[ours]['peak_rss_mb']:.2f}")
    checks = {r["check"] for r in rows}
    print(f"  same matrices: {'yes' if len(checks) == 1 else 'NO: ' + str(checks)}")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--records", type=positive_int, default=1_000_000)
    ap.add_argument("--llms", type=positive_int, default=20, help="LLMs in the generic long table")
    ap.add_argument("--re-queries", type=positive_int, default=20_000)
    ap.add_argument("--re-llms", type=positive_int, default=2_000)
    ap.add_argument("--skip-routereval", action="store_true")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.records < args.llms:
        ap.error(f"--records {args.records} is fewer than --llms {args.llms}: the generic long "
                 "table would have no query")
    if args.child == "prepare/generic":
        prepare_generic(args.work / "generic.parquet", args.records, args.llms, args.seed)
        print(json.dumps({}))
        return
    if args.child == "prepare/routereval":
        prepare_routereval(args.work / "routereval.parquet", args.re_queries, args.re_llms,
                           args.seed)
        print(json.dumps({}))
        return
    if args.child:
        print(json.dumps(run_case(args.child, args.work, args.seed, args.re_queries, args.re_llms)))
        return
    sys.path.insert(0, str(ROOT))
    with tempfile.TemporaryDirectory(prefix="bench-data-") as tmp:
        args.work = Path(tmp)
        t = time.perf_counter()
        _child("prepare/generic", args)  # in a child: keeps this process small
        print(f"[1] generic long table: {args.records:,} records "
              f"({args.records // args.llms:,} queries x {args.llms} LLMs), seed {args.seed} "
              f"(written in {time.perf_counter() - t:.1f}s)")
        cases = ["generic/from_long", "generic/load_dataset", "generic/pandas pivot_table",
                 "generic/pandas pivot"]
        rows = [_child(c, args) for c in cases]
        _report(rows, "generic/from_long", cases[2:])
        by = {r["case"]: r for r in rows}
        print(f"  ratio generic/load_dataset / from_long: time x"
              f"{by['generic/load_dataset']['seconds'] / by['generic/from_long']['seconds']:.2f} "
              f"(the loader also checks texts per query)")
        if args.skip_routereval:
            return
        t = time.perf_counter()
        _child("prepare/routereval", args)
        print(f"\n[2] RouterEval scale: {args.re_llms:,} LLMs x {args.re_queries:,} queries "
              f"({args.re_llms * args.re_queries:,} cells), seed {args.seed} "
              f"(long parquet written in {time.perf_counter() - t:.1f}s)")
        cases = ["routereval/make_synthetic", "routereval/from_long", "routereval/pandas pivot"]
        rows = [_child(c, args) for c in cases]
        _report(rows, "routereval/from_long", ["routereval/pandas pivot"])
        by = {r["case"]: r for r in rows}
        ms, pv = by["routereval/make_synthetic"], by["routereval/pandas pivot"]
        print(f"  ratio routereval/pandas pivot / make_synthetic: time x"
              f"{pv['seconds'] / ms['seconds']:.2f}, peak memory x"
              f"{pv['peak_rss_mb'] / ms['peak_rss_mb']:.2f} (make_synthetic also simulates)")


if __name__ == "__main__":
    main()
