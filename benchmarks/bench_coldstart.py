"""Item cold start, leave-one-LLM-out: how well a router onboards an LLM from K probes.

For each dataset, each router and each cold LLM (a seeded subset unless ``--cold-llms all``),
:func:`recsys_router.coldstart.protocol.coldstart_rows` fits the router without the LLM,
onboards it from K probes chosen by each strategy, and scores the predictions and routes on
the test queries against the ``probe-mean`` and ``nearest-llm`` baselines and the router
fitted with the full column. Writes ``<out>/<dataset>.csv`` (every row), prints the aims
table at ``--aim-k`` (issue 12) and, with ``--readme FILE``, puts each dataset's aims table
and ``score_mae``-against-K table between the ``<!-- coldstart: <out> <dataset> -->`` and
``<!-- /coldstart: <out> <dataset> -->`` markers of FILE (checked before the run starts).

Usage::

    python benchmarks/bench_coldstart.py --seed 0 --routers mf,mirt,knn --cold-llms 4 \
        --probes 10,50 --datasets cruxeval,bfcl_v1

``--summarise OUT`` reads the CSVs an earlier run wrote to OUT and prints, per dataset, the
aims table and ``score_mae`` against K per (router, strategy) without running anything.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout

from benchmarks.bench_checks import (OptionError, int_list, locked_folder, name_list,  # noqa: E402
                                     positive_int, to_csv_atomic, write_text_atomic)
from recsys_router.cli.args import encoder_spec, repeated, seed_value  # noqa: E402
from recsys_router.coldstart.protocol import (coldstart_rows, parse_cold_llms, plot_curves,  # noqa: E402
                                              summarise)
from recsys_router.datasets.registry import load_dataset  # noqa: E402
from recsys_router.coldstart.selection import STRATEGIES  # noqa: E402
from recsys_router.registry import available_routers, make_router, router_class  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
DATASETS = {
    "routerbench_zs": lambda: load_dataset("routerbench_zs"),
    "llmrouter": lambda: load_dataset("llmrouter"),
    "routerdc": lambda: load_dataset("routerdc"),
    "cruxeval": lambda: load_dataset(str(DATA / "cruxeval" / "cruxeval.parquet")),
    "bfcl_v1": lambda: load_dataset(str(DATA / "bfcl_v1" / "bfcl_v1.parquet")),
}


def _stack(data):
    from recsys_router.data import RoutingData
    if isinstance(data, dict):
        return RoutingData.concat(list(data.values()))
    return data


def cold_llms_arg(text) -> str | list[str]:
    """``--cold-llms``: ``all``, a count N >= 1 or ``NAME,NAME`` (each named once); whether
    the count or the names fit each dataset's pool is checked once the datasets are loaded,
    before any of them runs.

    Example
    -------
    >>> cold_llms_arg("all"), cold_llms_arg("4"), cold_llms_arg("gpt-4, claude")
    ('all', '4', ['gpt-4', 'claude'])
    >>> cold_llms_arg("0")
    Traceback (most recent call last):
    ...
    recsys_router.cli.args.OptionError: expected a whole number >= 1, got '0'
    """
    s = str(text).strip()
    if s == "all":
        return "all"
    if s.lstrip("+-").isdigit():
        return str(positive_int(s))
    names = [x.strip() for x in s.split(",") if x.strip()]
    if not names:
        raise OptionError(f"expected all, a count N >= 1 or NAME,NAME, got {s[:40]!r}")
    if repeated(names):
        raise OptionError(f"LLM(s) {repeated(names)} named more than once (each would repeat "
                          "its rows)")
    return names


def _split(data, seed: int, max_train: int, max_test: int):
    rng = np.random.default_rng(seed)
    perm = rng.permutation(data.n_queries)
    n_test = min(max_test, data.n_queries // 5)
    test = np.sort(perm[:n_test])
    train = np.sort(perm[n_test:n_test + max_train])
    return data.subset(train), data.subset(test)


def aims_table(summary: pd.DataFrame, dataset: str, k: int) -> pd.DataFrame:
    """One row per router at K = k: the best strategy by score_mae and the issue's aims."""
    s = summary.set_index(["router", "strategy", "k", "metric"])["mean"]
    rows = []
    routers = sorted({r for r in summary["router"] if not r.endswith(")")})  # not baselines
    cell = "cell_auc" if (summary["metric"] == "cell_auc").any() else "cell_rmse"
    for r in routers:
        strategies = sorted({st for (rr, st, kk, m) in s.index if rr == r and kk == k})
        if not strategies:
            continue
        best = min(strategies, key=lambda st: s[(r, st, k, "score_mae")])
        pm = s.get((f"probe-mean ({r})", best, k, "score_mae"), np.nan)
        full_cell = s.get((f"{r} (full column)", "-", 0, cell), np.nan)
        row = {"dataset": dataset, "router": r, "best strategy": best,
               "score_mae": s[(r, best, k, "score_mae")], "probe-mean mae": pm,
               "nearest-llm mae": s.get((f"nearest-llm ({r})", best, k, "score_mae"), np.nan),
               cell: s[(r, best, k, cell)], f"{cell} full": full_cell,
               "route_gap": s[(r, best, k, "route_gap")],
               "mu_o_without": s[(r, best, k, "mu_o_without")]}
        for st in ("random", "stratified", "informative", "adaptive"):
            if (r, st, k, "score_mae") in s.index:
                row[f"mae {st}"] = s[(r, st, k, "score_mae")]
        for st in ("random", "informative", "adaptive"):
            if (r, st, k, "route_gap") in s.index:
                row[f"gap {st}"] = s[(r, st, k, "route_gap")]
        rows.append(row)
    return pd.DataFrame(rows)


def curve_table(summary: pd.DataFrame, metric: str = "score_mae") -> pd.DataFrame:
    """Mean ``metric`` per (router, strategy) (rows) and K (columns), baselines included
    (``nearest-llm`` and full-column rows left out)."""
    sub = summary[(summary["metric"] == metric) & (summary["k"] > 0)
                  & ~summary["router"].str.startswith("nearest-llm (")]
    piv = sub.pivot_table(index=["router", "strategy"], columns="k", values="mean")
    piv.columns = [f"K={int(k)}" for k in piv.columns]
    return piv.reset_index()


def summarise_out(out: Path, aim_k: int) -> int:
    """Print the tables of every ``<out>/<dataset>.csv`` (see the module docstring)."""
    files = sorted(Path(out).glob("*.csv"))
    if not files:
        print(f"{out}: no result CSV", file=sys.stderr)
        return 2
    rc = 0
    for f in files:
        rows = pd.read_csv(f)
        summary = summarise(rows)
        ds = str(rows["dataset"].iloc[0])
        available = sorted(int(k) for k in set(rows["k"]) if k > 0)
        if aim_k in available:
            print(f"\n{ds} ({f}): aims at K = {aim_k}")
            print(_markdown(aims_table(summary, ds, aim_k)))
        else:  # an empty table would read as "no router meets the aims"
            print(f"{f}: no results at --aim-k {aim_k}; this run has K = "
                  f"{', '.join(map(str, available)) or 'none'}", file=sys.stderr)
            rc = 2
        print(f"\n{ds}: score_mae against K")
        print(_markdown(curve_table(summary)))
    return rc


def _markdown(df: pd.DataFrame) -> str:
    cols = list(df.columns)
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in df.iterrows():
        out.append("| " + " | ".join(f"{v:.4f}" if isinstance(v, float) else str(v) for v in r) + " |")
    return "\n".join(out)


def readme_markers(out: str, dataset: str) -> tuple[str, str]:
    """The markers around the README block of run ``--out out`` on ``dataset``.

    Example
    -------
    >>> readme_markers("benchmarks/results/coldstart-A-cruxeval", "cruxeval")[1]
    '<!-- /coldstart: benchmarks/results/coldstart-A-cruxeval cruxeval -->'
    """
    return f"<!-- coldstart: {out} {dataset} -->", f"<!-- /coldstart: {out} {dataset} -->"


def missing_markers(body: str, out: str, datasets) -> list[str]:
    """The datasets whose marker pair (:func:`readme_markers`) ``body`` lacks or holds out of
    order."""
    missing = []
    for ds in datasets:
        begin, end = readme_markers(out, ds)
        a, b = body.find(begin), body.find(end)
        if a < 0 or b < a:
            missing.append(ds)
    return missing


def readme_block(summary: pd.DataFrame, dataset: str, aim_k: int) -> str:
    """A dataset's README block: the aims table at ``aim_k``, then ``score_mae`` against K."""
    return _markdown(aims_table(summary, dataset, aim_k)) + "\n\n" + _markdown(curve_table(summary))


def _write_readme(path: Path, text: str, out: str, dataset: str) -> None:
    """Put ``text`` between the markers of (``out``, ``dataset``) in ``path``: read, changed
    and renamed over ``path`` (mode kept) under a lock on its folder."""
    begin, end = readme_markers(out, dataset)
    with locked_folder(path.parent):
        body = path.read_text(encoding="utf-8")
        if missing_markers(body, out, [dataset]):
            raise ValueError(f"{path}: markers {begin} ... {end} not found")
        a, b = body.find(begin), body.find(end)
        write_text_atomic(path, body[:a + len(begin)] + "\n" + text + "\n" + body[b:])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", type=name_list(lambda: DATASETS, "dataset"),
                    default=",".join(DATASETS))
    ap.add_argument("--routers", type=name_list(available_routers, "router"), default="mf,mirt,knn")
    ap.add_argument("--cold-llms", type=cold_llms_arg, default="4",
                    help="all | N | NAME,NAME (per dataset)")
    ap.add_argument("--probes", type=int_list(1), default="10,50")
    ap.add_argument("--strategies", type=name_list(lambda: STRATEGIES, "probe strategy"),
                    default="random,stratified,informative,adaptive")
    ap.add_argument("--seeds", type=positive_int, default=1)
    ap.add_argument("--encoder", type=encoder_spec, default="hashing")
    ap.add_argument("--max-epochs", type=positive_int, default=None,
                    help="Lightning routers' passes (default: their data-scaled plan)")
    ap.add_argument("--batch-size", type=positive_int, default=None,
                    help="Lightning routers' batch size (default: data-scaled)")
    ap.add_argument("--max-train", type=positive_int, default=2000)
    ap.add_argument("--max-test", type=positive_int, default=1000)
    ap.add_argument("--aim-k", type=positive_int, default=50,
                    help="K of the aims table: one of --probes (with --summarise, one of the "
                         "run's K values)")
    ap.add_argument("--seed", type=seed_value, default=0)
    ap.add_argument("--out", default="benchmarks/results/coldstart")
    ap.add_argument("--readme", default=None,
                    help="also put each dataset's tables into this Markdown file, between its "
                         "'<!-- coldstart: <out> <dataset> -->' markers")
    ap.add_argument("--summarise", default=None, metavar="OUT",
                    help="print the tables of an earlier run's CSVs in OUT and stop")
    args = ap.parse_args(argv)
    if args.summarise:
        return summarise_out(Path(args.summarise), args.aim_k)
    ks = args.probes
    if args.aim_k not in ks:
        ap.error(f"--aim-k {args.aim_k} is not among --probes {','.join(map(str, ks))}: its aims "
                 f"table would be empty")
    readme = Path(args.readme) if args.readme else None
    if readme is not None:  # before hours of CPU, not after
        if not readme.is_file():
            ap.error(f"--readme {readme}: no such file")
        missing = missing_markers(readme.read_text(encoding="utf-8"), args.out, args.datasets)
        if missing:
            ap.error(f"--readme {readme}: no block for " + ", ".join(missing) + "; add "
                     + " and ".join(f"'{b}' ... '{e}'" for b, e in
                                    (readme_markers(args.out, ds) for ds in missing)))
    loaded = {}  # every dataset (each loads in about a second) before any runs
    for ds in args.datasets:
        if not DATA.exists():
            print(f"skip {ds}: {DATA} is absent")
            continue
        data = _stack(DATASETS[ds]())
        try:  # a count or names that do not fit this pool: refused before any dataset runs
            parse_cold_llms(args.cold_llms, data.llm_names, seed=args.seed)
        except ValueError as err:
            ap.error(f"{err} (dataset {ds})")
        loaded[ds] = data
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for ds, data in loaded.items():
        t0 = time.perf_counter()
        train, test = _split(data, args.seed, args.max_train, args.max_test)
        cold = parse_cold_llms(args.cold_llms, train.llm_names, seed=args.seed)
        frames = []
        for name in args.routers:
            params = {}
            names = router_class(name)._param_names()
            if "encoder" in names:
                params["encoder"] = args.encoder
            if "max_epochs" in names and args.max_epochs is not None:
                params["max_epochs"] = args.max_epochs
            if "batch_size" in names and args.batch_size is not None:
                params["batch_size"] = args.batch_size
            frames.append(coldstart_rows(train, test, lambda: make_router(name, **params), router=name,
                                         cold_llms=cold, ks=ks,
                                         strategies=args.strategies,
                                         seeds=list(range(args.seed, args.seed + args.seeds))))
        rows = pd.concat(frames, ignore_index=True)
        rows.insert(0, "dataset", ds)
        to_csv_atomic(rows, out / f"{ds}.csv")
        summary = summarise(rows)
        plot_curves(summary[~summary["router"].str.startswith("nearest-llm (")], out / f"{ds}.png")
        table = aims_table(summary, ds, args.aim_k)
        head = (f"{ds}: {train.n_queries} train / {test.n_queries} test queries, {train.n_llms} LLMs, "
                f"cold {len(cold)} x {args.seeds} seed(s), {time.perf_counter() - t0:.0f} s")
        print("\n" + head)
        print(_markdown(table))
        if readme is not None:
            _write_readme(readme, readme_block(summary, ds, args.aim_k), args.out, ds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
