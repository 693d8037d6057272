"""``recsys-router probes`` / ``onboard`` and the ``coldstart`` protocol of ``evaluate``."""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from .args import ListArg, add_data_args, add_seed_arg, data_options

__all__ = ["add_parser", "run_probes", "run_onboard", "run_coldstart_protocol",
           "add_coldstart_args"]


def _ints(items) -> list[int]:
    text = ",".join(items) if isinstance(items, list) else str(items)
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError as exc:
        raise ValueError(f"expected comma-separated integers, got {text!r}") from exc
    if not out or min(out) < 1:
        raise ValueError(f"expected positive integers, got {text!r}")
    return out


def _load(args):
    from ..datasets.resolve import resolve_dataset
    return resolve_dataset(args.data, data_dir=args.data_dir, stack=True, **data_options(args))


def add_coldstart_args(p) -> None:
    """Options of ``evaluate --protocol coldstart``."""
    g = p.add_argument_group("coldstart protocol")
    g.add_argument("--cold-llms", default="all", metavar="all|N|NAME,NAME",
                   help="LLMs left out and onboarded (default all)")
    g.add_argument("--probes", action=ListArg, default=["10,25,50,100,200"], metavar="K1,K2",
                   help="probe counts K (default 10,25,50,100,200)")
    g.add_argument("--probe-strategy", action=ListArg,
                   default=["random", "stratified", "informative", "adaptive"],
                   metavar="S1,S2", help="probe strategies (default all four)")
    g.add_argument("--n-seeds", type=int, default=1, help="seeds per cold LLM (default 1)")


def add_parser(subparsers) -> None:
    """Add the ``probes`` and ``onboard`` sub-commands."""
    p = subparsers.add_parser("probes", help="list which queries to run on a new LLM")
    p.add_argument("artifact", help="exported router directory")
    add_data_args(p, help="candidate queries (dataset name or path)")
    p.add_argument("--k", type=int, default=50, help="number of probes (default 50)")
    p.add_argument("--strategy", default="informative",
                   choices=("random", "stratified", "informative"),
                   help="batch strategy (adaptive is sequential: use recsys_router.ProbeSession)")
    add_seed_arg(p)
    p.add_argument("--out", required=True, help="CSV of the chosen queries (query_id, text)")
    p.set_defaults(func=run_probes)

    o = subparsers.add_parser("onboard", help="add a new LLM to an artifact from probe answers")
    o.add_argument("artifact", help="exported router directory")
    o.add_argument("--llm", required=True, help="name of the new LLM")
    o.add_argument("--scores", required=True, help="CSV: query_id and/or text, score[, cost]")
    add_data_args(o, required=False, help="dataset to look up probe texts by query_id")
    o.add_argument("--price-in", type=float, default=None, help="USD per 1M input tokens")
    o.add_argument("--price-out", type=float, default=None, help="USD per 1M output tokens")
    o.add_argument("--strategy", default=None, help="probe strategy, recorded as provenance")
    add_seed_arg(o)
    o.add_argument("--out", required=True, help="new artifact directory (written atomically)")
    o.add_argument("--overwrite", action="store_true")
    o.set_defaults(func=run_onboard)


def run_probes(args) -> int:
    """Handler of ``recsys-router probes``."""
    from ..coldstart.selection import select_probes
    from ..export.artifact import load_router
    from ..export import seed_everything
    seed_everything(args.seed)
    art = load_router(args.artifact)
    data = _load(args)
    idx = select_probes(art.router, data, args.k, args.strategy, seed=args.seed)
    cols = [c for c in ("query_id", "text", "task") if c in data.queries.columns]
    table = data.queries.iloc[idx][cols]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    os.close(fd)
    try:
        table.to_csv(tmp, index=False)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    print(f"wrote {len(table)} probe queries ({args.strategy}) to {out}")
    return 0


def run_onboard(args) -> int:
    """Handler of ``recsys-router onboard``."""
    from ..coldstart.onboard import onboard_artifact, read_answers
    from ..export import seed_everything
    seed_everything(args.seed)
    data = _load(args) if args.data else None
    probes = read_answers(args.scores, args.llm, data)
    out = onboard_artifact(args.artifact, args.llm, probes, args.out, price_in=args.price_in,
                           price_out=args.price_out, strategy=args.strategy,
                           overwrite=args.overwrite)
    print(f"onboarded {args.llm!r} from {probes.n_queries} probes; wrote {out}")
    return 0


def run_coldstart_protocol(args, data) -> int:
    """``evaluate --protocol coldstart``: writes metrics.csv, summary.csv, coldstart_curves.png."""
    import shutil

    from ..coldstart.protocol import coldstart_rows, parse_cold_llms, plot_curves, summarise
    from ..export import seed_everything
    from ..router_spec import resolve_router
    seed_everything(args.seed)
    if args.split_column:
        parts = data.split(column=args.split_column)
        if "test" not in parts or "train" not in parts:
            raise ValueError(f"--split-column {args.split_column}: needs 'train' and 'test' labels")
        train, test = parts["train"], parts["test"]
    else:
        parts = data.split((0.8, 0.2), seed=args.seed)
        train, test = parts["train"], parts["test"]
    cold = parse_cold_llms(args.cold_llms, train.llm_names, seed=args.seed)
    ks = _ints(args.probes)
    strategies = list(args.probe_strategy)
    seeds = list(range(args.seed, args.seed + max(1, int(args.n_seeds))))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        import pandas as pd
        frames = []
        for name in args.routers:
            def make(name=name):
                return resolve_router(name, encoder=args.encoder)[0]
            rows = coldstart_rows(train, test, make, router=name,
                                  cold_llms=cold, ks=ks, strategies=strategies, seeds=seeds,
                                  progress=not args.no_progress)
            frames.append(rows)
        rows = pd.concat(frames, ignore_index=True)
        rows.insert(0, "protocol", "coldstart")
        rows.insert(0, "dataset", data.name)
        rows.to_csv(tmp / "metrics.csv", index=False)
        summary = summarise(rows)
        summary.to_csv(tmp / "summary.csv", index=False)
        if not args.no_plots:
            plot_curves(summary, tmp / "coldstart_curves.png")
        (tmp / "config.json").write_text(json.dumps({
            "protocol": "coldstart", "routers": args.routers, "cold_llms": cold, "probes": ks,
            "strategies": strategies, "seeds": seeds, "n_train": train.n_queries,
            "n_test": test.n_queries}, indent=2))
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    k50 = summary[summary["metric"].isin(["score_mae", "route_gap", "cell_auc", "cell_rmse"])]
    print(k50.pivot_table(index=["router", "strategy", "k"], columns="metric",
                          values="mean").round(4).to_string(), file=sys.stdout)
    print(f"wrote {out}/metrics.csv, summary.csv, coldstart_curves.png")
    return 0
