"""Training throughput and peak memory of every CF router on a 1M-record simulated set.

``make_synthetic(--queries, --llms)`` (default 100,000 x 10 = 1,000,000 records, no texts);
query embeddings are random unit vectors (``--dim``, default 384 like MiniLM) stored once
as a ``.npy`` and served by the ``precomputed:`` encoder, so encoding is not timed.

Each model is fitted in its own subprocess (clean peak memory: ``VmHWM`` of
``/proc/self/status``, minus the process's VmHWM just before fitting is also shown), with
``--epochs`` epochs/iterations (default 1) so the whole run takes a few minutes. The
reference is ``implicit``'s own ALS (``implicit.cpu.als.AlternatingLeastSquares``) fitted
on the same 1M-record matrix in the same run; every row shows its throughput as a ratio
to it. Throughput = records x epochs / fit seconds.

``plain-<router>`` rows are the reference for each Lightning family: the network that router
builds (``build_module``), trained by a bare PyTorch loop over pre-built tensors (one index
operation per batch, BCE per observed cell, AdamW at the module's learning rate, no
validation, no framework); each Lightning row also prints its throughput as a ratio to its
plain loop, measured in the same run.

Usage: ``python benchmarks/bench_train.py --seed 0``

``--start`` says what a fit's process has done before the clock starts (comma-separated, one
row per model and start): ``cold`` (default) starts the clock before the model's first import,
so a Lightning row includes importing ``pytorch_lightning`` and what the fit imports lazily
(4-6 CPU s, once per process); ``imported`` imports those libraries first (every module of
``recsys_router.models`` and ``recsys_router.datamodules``, ``pytorch_lightning``,
``torch_geometric.nn`` where installed) and prints that time apart (``import_cpu_s``), so the
row is a first fit without the imports; ``warm`` first fits the same model on 500 of the
queries (imports and first calls, ``warm_cpu_s``), so the row is the fit of a process that has
fitted before. ``--warm`` is ``--start warm``. The table shows wall and CPU throughput.

``--baseline-ref REF``: the same models fitted, in the same run, by the code of git commit
``REF`` of this repository (its own ``bench_train.py`` child, from ``git archive`` into a
temporary folder, on its own simulation of the same size and seed, cold start); every row
then prints its throughput as a ratio to that commit's row of the same model, by wall time and
by the CPU time of the whole child process (older children do not time their own CPU). Not
with ``--defaults`` (an older child fits its own defaults, or none). E.g. the graph router
against the code issue 14 measured (1,801 records/s):
``python benchmarks/bench_train.py --seed 0 --models graph --start cold,imported,warm
--baseline-ref 3cda9cf --timeout 1800``.

``--defaults``: fit time of each CF router at its registry defaults (the data-scaled training
plan, early stopping on; only the precomputed encoder is set), e.g. on a 10,000-query x
30-LLM matrix: ``python benchmarks/bench_train.py --seed 0 --defaults --queries 10000
--llms 30 --models implicit-als,mf,mirt,nirt,two-tower,graph``. Rows show wall and CPU
seconds of the fit (CPU seconds = the wall time on an idle core: one thread each), the
issue-15 target (30 s; graph 120 s) and the fit CPU time as a ratio to implicit ALS's
(``--epochs`` iterations) in the same run.
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
sys.path.insert(0, str(ROOT))
from benchmarks.bench_checks import name_list, positive_float, positive_int  # noqa: E402

MODELS = ["implicit-als", "als", "bpr", "plain-mf", "mf", "plain-two-tower", "two-tower",
          "plain-mirt", "mirt", "plain-nirt", "nirt", "graph"]
#: constructor parameters per model; ``{E}`` = epochs, ``{ENC}`` = the precomputed encoder,
#: ``{B}`` = ``--batch-size`` (Lightning models; their default 64 would need ~15k steps/epoch)
PARAMS = {
    "als": {"iterations": "{E}", "encoder": "{ENC}"},
    "bpr": {"iterations": "{E}", "encoder": "{ENC}"},
    "mf": {"max_epochs": "{E}", "encoder": "{ENC}", "batch_size": "{B}"},
    # pointwise BCE here, as its plain loop trains (its default loss is listwise over query
    # lists, which is different work per record; --defaults keeps the default)
    "two-tower": {"max_epochs": "{E}", "encoder": "{ENC}", "batch_size": "{B}", "loss": "bce"},
    "mirt": {"max_epochs": "{E}", "encoder": "{ENC}", "batch_size": "{B}"},
    "nirt": {"max_epochs": "{E}", "encoder": "{ENC}", "batch_size": "{B}"},
    "graph": {"max_epochs": "{E}", "encoder": "{ENC}", "batch_size": "{B}"},
}


#: issue-15 fit-time targets at the defaults (seconds, 10,000 x 30 with precomputed embeddings)
TARGET_S = {"mf": 30.0, "mirt": 30.0, "nirt": 30.0, "two-tower": 30.0, "graph": 120.0}


def cpu_s() -> float:
    """CPU seconds (user + system) this process has used so far."""
    import resource
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def vm_hwm_mb() -> float:
    """Peak resident memory of this process (MiB), from /proc/self/status."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def build(args, folder: Path):
    """The simulated data and its random embeddings (``.npy`` + ids sidecar) in ``folder``."""
    from recsys_router.datasets.synthetic import make_synthetic
    data = make_synthetic(args.queries, args.llms, 8, seed=args.seed, with_text=False)
    emb = np.random.default_rng(args.seed).standard_normal((data.n_queries, args.dim))
    emb = (emb / np.linalg.norm(emb, axis=1, keepdims=True)).astype(np.float32)
    np.save(folder / "emb.npy", emb)
    (folder / "emb.ids.txt").write_text("\n".join(map(str, data.query_ids)) + "\n")
    return data


def plain_loop(args, data, emb: np.ndarray) -> int:
    """The reference: the same network as router ``args.model[6:]`` builds, trained by a bare
    PyTorch loop (pre-built tensors, one index operation per batch, BCE on each observed
    cell, AdamW at the module's learning rate): what the Lightning router's arithmetic
    costs without any framework around it. Returns the number of optimizer steps."""
    import torch
    from recsys_router.registry import make_router
    torch.manual_seed(args.seed)
    router = make_router(args.model[len("plain-"):], batch_size=args.batch_size)
    module = router.build_module(data.n_llms, emb.shape[1])
    rows, cols = np.nonzero(~np.isnan(data.scores))
    x = torch.from_numpy(emb)
    r, c = torch.from_numpy(rows.astype(np.int64)), torch.from_numpy(cols.astype(np.int64))
    y = torch.from_numpy(data.scores[rows, cols].astype(np.float32))
    opt = torch.optim.AdamW(module.parameters(), lr=module.lr, weight_decay=module.weight_decay)
    gen = torch.Generator().manual_seed(args.seed)
    steps = 0
    for _ in range(args.epochs):
        order = torch.randperm(len(y), generator=gen)
        for s in range(0, len(y), args.batch_size):
            idx = order[s:s + args.batch_size]
            logits = module.cell_logits(x[r[idx]], c[idx])
            loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            steps += 1
    return steps


def router_params(args, folder: Path) -> dict:
    """Constructor parameters of ``args.model`` in this run."""
    enc = f"precomputed:{folder / 'emb.npy'}"
    subst = {"{E}": args.epochs, "{ENC}": enc, "{B}": args.batch_size}
    spec = {"encoder": "{ENC}"} if args.defaults else PARAMS[args.model]
    return {k: subst.get(v, v) for k, v in spec.items()}


def warm_fit(args, data, folder: Path) -> None:
    """``--warm``: fit the same model (or plain loop) once on the first 500 queries."""
    small = data.subset(np.arange(min(500, data.n_queries)))
    if args.model.startswith("plain-"):
        plain_loop(args, small, np.load(folder / "emb.npy")[:small.n_queries])
        return
    from recsys_router.registry import make_router
    make_router(args.model, **router_params(args, folder)).fit(small)


def preimport() -> None:
    """``--start imported``: import the libraries a fit imports (lazily) before its clock."""
    import importlib
    import pkgutil

    import pytorch_lightning  # noqa: F401
    try:
        import torch_geometric.nn  # noqa: F401
    except ImportError:   # the graph router's optional backend
        pass
    import recsys_router.datamodules
    import recsys_router.models
    import recsys_router.registry  # noqa: F401
    for pkg in (recsys_router.models, recsys_router.datamodules):
        for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            importlib.import_module(info.name)


def child(args) -> None:
    """Fit one model; print one JSON line with its timings and memory."""
    import torch
    torch.set_num_threads(args.threads)
    folder = Path(args.folder)
    data = build(args, folder) if not (folder / "data.pkl").exists() else None
    if data is None:
        import pickle
        with open(folder / "data.pkl", "rb") as fh:
            data = pickle.load(fh)
    n_rec = int((~np.isnan(data.scores)).sum())
    pre = {}   # CPU seconds spent before the clock, by --start (none for implicit's ALS)
    if args.start != "cold" and args.model != "implicit-als":
        # imported: the libraries a fit imports; warm: also its first calls, by one fit of the
        # same model on 500 queries (the once-per-process costs, timed apart)
        c0 = cpu_s()
        preimport() if args.start == "imported" else warm_fit(args, data, folder)
        pre = {f"{'import' if args.start == 'imported' else 'warm'}_cpu_s": cpu_s() - c0}
    before = vm_hwm_mb()
    c0 = cpu_s()
    t0 = time.perf_counter()
    if args.model == "implicit-als":
        from implicit.cpu.als import AlternatingLeastSquares
        from scipy import sparse
        s = np.nan_to_num(data.scores, nan=0.0)
        mat = sparse.csr_matrix(s.astype(np.float32) * 10.0)  # confidence alpha * score
        als = AlternatingLeastSquares(factors=16, regularization=0.05, iterations=args.epochs,
                                      random_state=args.seed, num_threads=args.threads)
        als.fit(mat, show_progress=False)
    elif args.model.startswith("plain-"):
        extra = {"steps_": plain_loop(args, data, np.load(folder / "emb.npy"))}
    else:
        from recsys_router.registry import make_router
        router = make_router(args.model, **router_params(args, folder)).fit(data)
        extra = {k: getattr(router, k, None) for k in ("plan_", "steps_", "best_step_")}
    fit_s, fit_cpu = time.perf_counter() - t0, cpu_s() - c0
    print(json.dumps({"model": args.model, "records": n_rec, "epochs": args.epochs,
                      "fit_s": fit_s, "cpu_s": fit_cpu,
                      "records_per_s": n_rec * args.epochs / fit_s,
                      "peak_mb": vm_hwm_mb(), "before_mb": before, **pre,
                      **(extra if args.model != "implicit-als" else {})}), flush=True)


#: what a fit's process has done before its clock starts (``--start``)
STARTS = ("cold", "imported", "warm")


def parse_starts(text: str) -> list[str]:
    """``--start``'s comma-separated list, each one of :data:`STARTS` (no repeats)."""
    starts = [x.strip() for x in text.split(",") if x.strip()]
    bad = [x for x in starts if x not in STARTS]
    if not starts or bad or len(set(starts)) != len(starts):
        raise SystemExit(f"--start: expected a comma-separated list of distinct values from "
                         f"{', '.join(STARTS)}; got {text!r}")
    return starts


def checkout(ref: str, dest: Path) -> str:
    """Extract commit ``ref`` of this repository into ``dest`` (``git archive``); its full hash.

    ``ref`` must name a commit: an option-like or unknown value is refused before any checkout.
    """
    if not ref or ref.startswith("-") or any(c.isspace() or ord(c) < 32 for c in ref):
        raise SystemExit(f"--baseline-ref: expected a commit of this repository; got {ref!r}")
    p = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet",
                        "--end-of-options", f"{ref}^{{commit}}"],
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"--baseline-ref: {ref!r} is not a commit of {ROOT}")
    sha = p.stdout.strip()
    dest.mkdir(parents=True)
    arch = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", sha],
                          capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=arch.stdout, check=True)
    if not (dest / "benchmarks" / "bench_train.py").is_file():
        raise SystemExit(f"--baseline-ref: commit {sha[:10]} has no benchmarks/bench_train.py")
    return sha


def run_child(cmd: list, env: dict, timeout: float, label: str, cwd=None) -> dict:
    """One child's JSON line as a row (``model`` = ``label``), or an ``error`` row.

    ``process_cpu_s``: the child process's whole CPU time (imports, data, fit), from
    ``getrusage(RUSAGE_CHILDREN)`` around it, for children that do not time their own CPU.
    """
    import resource
    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout,
                           cwd=cwd)
    except subprocess.TimeoutExpired:
        return {"model": label, "error": f"timeout after {timeout:.0f} s"}
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = (c1.ru_utime - c0.ru_utime) + (c1.ru_stime - c0.ru_stime)
    line = [x for x in p.stdout.splitlines() if x.startswith("{")]
    if p.returncode != 0 or not line:
        err = (p.stderr.strip().splitlines() or ["?"])[-1]
        return {"model": label, "error": err[:120]}
    return {**json.loads(line[-1]), "model": label, "process_cpu_s": proc}


def model_names() -> list[str]:
    """What ``--models`` takes: :data:`MODELS` and every registry router."""
    from recsys_router.registry import available_routers
    return sorted(set(MODELS) | set(available_routers()))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--queries", type=positive_int, default=100_000)
    ap.add_argument("--llms", type=positive_int, default=10)
    ap.add_argument("--dim", type=positive_int, default=384)
    ap.add_argument("--epochs", type=positive_int, default=1)
    ap.add_argument("--threads", type=positive_int, default=1)
    ap.add_argument("--batch-size", type=positive_int, default=4096, help="Lightning models' batch size")
    ap.add_argument("--models", type=name_list(model_names, "model"), default=",".join(MODELS),
                    help="comma-separated: the plain-* loops, implicit-als, or registry routers")
    ap.add_argument("--timeout", type=positive_float, default=900.0, help="seconds per model")
    ap.add_argument("--defaults", action="store_true",
                    help="fit each router at its registry defaults (data-scaled plan)")
    ap.add_argument("--start", default="cold",
                    help="comma-separated: cold (clock before the first import), imported "
                         "(libraries imported first, import_cpu_s), warm (one fit on 500 "
                         "queries first, warm_cpu_s); one row per model and start")
    ap.add_argument("--warm", action="store_true", help="the same as --start warm")
    ap.add_argument("--baseline-ref", default="",
                    help="also fit the models with the code of this git commit, in the same "
                         "run, and print each row's ratio to it")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    ap.add_argument("--model", default="", help=argparse.SUPPRESS)
    ap.add_argument("--folder", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.warm:
        args.start = "warm"
    if args.child:
        child(args)
        return
    starts = parse_starts(args.start)
    if args.baseline_ref and args.defaults:
        raise SystemExit("--baseline-ref compares throughput rows; it cannot be combined with "
                         "--defaults (the older code's defaults are not these)")
    models = args.models
    import pickle
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    rows, base = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "data"
        folder.mkdir()
        if args.baseline_ref:
            sha = checkout(args.baseline_ref, Path(tmp) / "base")
        t0 = time.perf_counter()
        data = build(args, folder)
        with open(folder / "data.pkl", "wb") as fh:
            pickle.dump(data, fh)
        print(f"simulated {data.n_queries} x {data.n_llms} "
              f"({int((~np.isnan(data.scores)).sum()):,} records) + {args.dim}-d embeddings in "
              f"{time.perf_counter() - t0:.1f} s", flush=True)
        common = ["--seed", str(args.seed), "--queries", str(args.queries), "--llms",
                  str(args.llms), "--dim", str(args.dim), "--epochs", str(args.epochs),
                  "--threads", str(args.threads), "--batch-size", str(args.batch_size)]
        for m in models:
            for st in (["cold"] if m == "implicit-als" else starts):
                label = m if len(starts) == 1 or m == "implicit-als" else f"{m} ({st})"
                cmd = [sys.executable, __file__, "--child", "1", "--model", m, "--folder",
                       str(folder), "--start", st, *common]
                cmd += ["--defaults"] if args.defaults else []
                rows.append(run_child(cmd, env, args.timeout, label))
                print(rows[-1], flush=True)
        if args.baseline_ref:
            # that commit's own child (its code and its simulation), cold start as it measured
            bdir, bdata = Path(tmp) / "base", Path(tmp) / "base-data"
            bdata.mkdir()
            benv = {**env, "PYTHONPATH": str(bdir)}
            for m in models:
                if m == "implicit-als":
                    continue
                cmd = [sys.executable, str(bdir / "benchmarks" / "bench_train.py"), "--child",
                       "1", "--model", m, "--folder", str(bdata), *common]
                base[m] = run_child(cmd, benv, args.timeout, f"{m} @ {sha[:7]}", cwd=bdir)
                print(base[m], flush=True)
    ref = next((r for r in rows if r["model"] == "implicit-als" and "fit_s" in r), None)
    cmdline = "python benchmarks/bench_train.py " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.defaults:
        print_defaults_table(rows, ref, cmdline)
        return
    print(f"\n`{cmdline}` ({args.epochs} epoch(s)/iteration(s) each, {args.threads} thread(s), "
          f"batch size {args.batch_size} for Lightning models)\n")
    print_table(rows + list(base.values()), ref)
    if base:
        print_baseline_table(rows, base, args.baseline_ref)


def print_table(rows: list, ref: dict | None) -> None:
    """The throughput table: wall and CPU records/s, ratios to implicit ALS and plain loops."""
    print("| model | records | fit s | records/s | ratio vs implicit ALS | ratio vs plain loop | "
          "peak MiB | peak - before fit MiB | fit CPU s | records per CPU s | "
          "CPU s before the clock |\n|---|---|---|---|---|---|---|---|---|---|---|")
    done = {r["model"]: r for r in rows if "error" not in r}
    for r in rows:
        if "error" in r:
            print(f"| {r['model']} | - | - | - | - | - | - | failed: {r['error']} | - | - | - |")
            continue
        ratio = r["records_per_s"] / ref["records_per_s"] if ref else float("nan")
        plain = done.get(f"plain-{r['model']}")
        to_plain = f"{r['records_per_s'] / plain['records_per_s']:.3g}" if plain else "-"
        pre = r.get("import_cpu_s", r.get("warm_cpu_s"))
        print(f"| {r['model']} | {r['records']:,} | {r['fit_s']:.1f} | {r['records_per_s']:,.0f} | "
              f"{ratio:.3g} | {to_plain} | {r['peak_mb']:.0f} | "
              f"{r['peak_mb'] - r['before_mb']:.0f} | {r.get('cpu_s', float('nan')):.1f} | "
              f"{cpu_rate(r):,.0f} | {'-' if pre is None else f'{pre:.1f}'} |")


def cpu_rate(r: dict) -> float:
    """Records x epochs per CPU second of a row (NaN where the row has no CPU time)."""
    return r["records"] * r["epochs"] / r["cpu_s"] if r.get("cpu_s") else float("nan")


def print_baseline_table(rows: list, base: dict, ref: str) -> None:
    """Each row's throughput as a ratio to the ``--baseline-ref`` commit's row of its model."""
    print(f"\nRatios to the same model fitted by commit `{ref}` in this run (its cold start; "
          f"process CPU s = the whole child process: imports, data, fit):\n")
    print("| model | records/s | baseline records/s | ratio (wall) | process CPU s | "
          "baseline process CPU s | ratio (process CPU) |\n|---|---|---|---|---|---|---|")
    for r in rows:
        b = base.get(r["model"].split(" (")[0])
        if "error" in r or b is None or "error" in b:
            continue
        print(f"| {r['model']} | {r['records_per_s']:,.0f} | {b['records_per_s']:,.0f} | "
              f"{r['records_per_s'] / b['records_per_s']:.1f} | {r['process_cpu_s']:.1f} | "
              f"{b['process_cpu_s']:.1f} | {b['process_cpu_s'] / r['process_cpu_s']:.1f} |")


def print_defaults_table(rows: list, ref: dict | None, cmdline: str) -> None:
    """Fit wall/CPU seconds at the defaults against the targets and implicit ALS's CPU time."""
    print(f"\n`{cmdline}` (registry defaults: data-scaled plan, early stopping on)\n")
    print("| model | records | plan (batch x max steps) | steps run | fit wall s | fit CPU s | "
          "target s | CPU s / target | CPU s ratio vs implicit ALS |\n"
          "|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['model']} | - | - | - | - | - | - | - | failed: {r['error']} |")
            continue
        plan = r.get("plan_") or {}
        target = TARGET_S.get(r["model"])
        ratio = r["cpu_s"] / ref["cpu_s"] if ref else float("nan")
        print(f"| {r['model']} | {r['records']:,} | "
              f"{plan.get('batch_size', '-')} x {plan.get('max_steps', '-')} | "
              f"{r.get('steps_') if r.get('steps_') is not None else '-'} | {r['fit_s']:.1f} | "
              f"{r['cpu_s']:.1f} | {target if target else '-'} | "
              f"{(r['cpu_s'] / target) if target else float('nan'):.2f} | {ratio:.3g} |")


if __name__ == "__main__":
    main()
