"""The data checks that run on every load or split, at scale: each one's time next to the
plain pandas/numpy operation it guards, measured in the same run.

Checks (each the best of ``--repeat`` runs, in seconds, and ``x base`` = check / baseline):

1. ``labels``: the task/split label check of ``from_long`` (two different labels on one
   query's records), ``long_table._check_labels``, on a long table of ``--queries`` x
   ``--llms`` records (rows shuffled, one task label of 10 per query) with the label column
   as ``category``, ``str`` (pandas' string dtype) and ``object``. Baseline:
   ``pd.factorize`` of the same column. Before the integer-code rewrite the check turned
   every label into a string and ran ``drop_duplicates`` on a table of all records
   (1M categorical records: ~1 s, 10x what ``from_long`` took without it).
2. ``stratify``: ``split_indices(..., stratify_task=True)`` on ``--split-queries`` queries
   with ``--tasks`` tasks (10 % without a task). Baseline: the same split without
   ``stratify_task`` (one seeded permutation). The per-task scan it replaced took 37 s on
   100k queries x 5,000 tasks.
3. ``float32``: ``long_table.float32_matrix`` on a float64 ``--rows`` x ``--cols`` matrix
   (a third of the cells NaN), the range check of every ``RoutingData`` construction.
   Baseline: ``a.astype(np.float32)``. The check used to build several full-size float64
   temporaries (10x the cast).
4. ``scalar``: the check that id/label columns of object dtype hold no list, tuple, dict, set
   or array (``long_table._check_scalar``) on a ``--queries`` x ``--llms`` column of object
   dtype, strings only (``str``) and strings mixed with integers (``mixed``, the path that
   collects the set of the values' types). Baseline: the per-row ``isinstance`` form it
   replaced (``_per_row_scalar_check``, run here on the same column); both must accept it.

Usage::

    python benchmarks/bench_data_checks.py --seed 0                # quick: a few seconds
    python benchmarks/bench_data_checks.py --queries 36000 --llms 112 --split-queries 100000 \\
        --tasks 5000 --rows 20000 --cols 2000                      # EmbedLLM / RouterEval scale
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pandas as pd

from recsys_router.cli.args import positive_int
from recsys_router.long_table import _check_labels, _check_scalar, float32_matrix
from recsys_router.splitting import split_indices


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def _per_row_scalar_check(col: pd.Series) -> int | None:
    """The object-column check before vectorising: ``isinstance`` on every value; the first
    refused row, or None."""
    if col.dtype != object:
        return None
    bad = col.map(lambda v: isinstance(v, (list, tuple, dict, set, np.ndarray))).to_numpy(bool)
    return int(np.flatnonzero(bad)[0]) if bad.any() else None


def _row(name: str, size: str, check: float, base: float) -> None:
    # the ratio to three significant figures: a check far faster than its baseline (or a
    # baseline slowed by a busy machine) shows as 0.0021, never as a misleading 0.00
    print(f"{name:<20}{size:>26}{check:>10.4f}{base:>10.4f}{check / base:>8.3g}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--queries", type=positive_int, default=20000, help="label check: queries")
    ap.add_argument("--llms", type=positive_int, default=50, help="label check: records per query")
    ap.add_argument("--split-queries", type=positive_int, default=100000)
    ap.add_argument("--tasks", type=positive_int, default=5000)
    ap.add_argument("--rows", type=positive_int, default=5000, help="float32 check: queries")
    ap.add_argument("--cols", type=positive_int, default=2000, help="float32 check: LLMs")
    ap.add_argument("--repeat", type=positive_int, default=3)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    print(f"{'check':<20}{'size':>26}{'check s':>10}{'base s':>10}{'x base':>8}")

    nq, nl = args.queries, args.llms
    qcodes = rng.permutation(np.repeat(np.arange(nq), nl))
    names = np.array([f"task{i}" for i in range(10)], dtype=object)
    labels = names[rng.integers(0, 10, nq)][qcodes]
    qids = [f"q{i}" for i in range(nq)]
    for kind in ("category", "str", "object"):
        col = pd.Series(labels, dtype=object).astype(kind)
        check = _best(lambda: _check_labels(col, qcodes, qids, "task", "error", None, 0),
                      args.repeat)
        base = _best(lambda: pd.factorize(col), args.repeat)
        _row(f"labels ({kind})", f"{nq * nl:,} records", check, base)

    n, k = args.split_queries, args.tasks
    task = pd.Series([f"t{v}" for v in rng.integers(0, k, n)], dtype=object)
    task[rng.random(n) < 0.1] = None
    queries = pd.DataFrame({"query_id": [f"q{i}" for i in range(n)], "task": task})
    check = _best(lambda: split_indices(queries, (0.8, 0.1, 0.1), seed=args.seed,
                                        stratify_task=True), args.repeat)
    base = _best(lambda: split_indices(queries, (0.8, 0.1, 0.1), seed=args.seed), args.repeat)
    _row("stratify", f"{n:,} q x {k:,} tasks", check, base)

    a = rng.random((args.rows, args.cols))
    a[rng.random(a.shape) < 1 / 3] = np.nan
    check = _best(lambda: float32_matrix(a, "scores", a.shape, None), args.repeat)
    base = _best(lambda: a.astype(np.float32), args.repeat)
    _row("float32", f"{args.rows:,} x {args.cols:,} cells", check, base)

    ids = np.array([f"q{i}" for i in range(nq)], dtype=object)[qcodes]
    mixed = ids.copy()
    mixed[::3] = qcodes[::3]  # a third of the ids are integers
    for kind, values in (("str", ids), ("mixed", mixed)):
        col = pd.Series(values, dtype=object)
        if _per_row_scalar_check(col) is not None:  # both forms must accept the column
            raise AssertionError("the benchmark column should hold scalars only")
        check = _best(lambda: _check_scalar(col, "query_id", None, 0), args.repeat)
        base = _best(lambda: _per_row_scalar_check(col), args.repeat)
        _row(f"scalar ({kind})", f"{nq * nl:,} records", check, base)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
