"""``recsys-router evaluate | demo | scaling``: benchmark routers under the RouterEval,
RouterBench, ORBIT and RouteLLM protocols, a quick simulated demo, and RouterEval's
model-level scaling-up experiment."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .args import (FloatListArg, ListArg, OptionError, add_data_args, add_seed_arg, auto_folds,
                   count, encoder_spec, fraction, positive_int, repeated,
                   split_list)
from .data import load_data

__all__ = ["add_parser", "run_evaluate", "run_demo", "run_scaling", "DEMO_ROUTERS",
           "DEMO_PARAMS"]

#: the demo's routers: the collaborative-filtering ones (mf, mirt, two-tower) beside the
#: classic baselines and the task-label one, in the order the demo runs them
DEMO_ROUTERS = ["random", "oracle", "r_o", "best-single", "task-best", "zero", "cascade", "knn",
                "prknn", "c-roberta", "svm", "linearr", "mlpr", "mlc", "mf", "mirt", "two-tower"]


#: shorter training so the demo stays around a minute on 2 cores
DEMO_PARAMS = {"mlpr": {"epochs": 20}, "mlc": {"epochs": 5},
               "mf": {"max_epochs": 5, "batch_size": 256},
               "mirt": {"max_epochs": 5, "batch_size": 256},
               "two-tower": {"max_epochs": 5, "batch_size": 256}}


class FractionListArg(ListArg):
    """A :class:`ListArg` of numbers from 0 to 1 (``scaling --p``)."""

    def __call__(self, parser, namespace, values, option_string=None):
        try:
            setattr(namespace, self.dest, [fraction(x) for x in split_list(values)])
        except OptionError as exc:
            parser.error(f"argument {option_string}: {exc}")


def _add_split_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("splitting")
    g.add_argument("--split-fractions", dest="split", action=FloatListArg, default=None,
                   metavar="TR,VA,TE",
                   help="random train/val/test fractions (default 0.8,0.1,0.1)")
    g.add_argument("--split-column", default=None, metavar="COL",
                   help="query column holding train/val/test labels")
    g.add_argument("--ood-tasks", action=ListArg, default=None, metavar="T1,T2",
                   help="tasks held out as the (out-of-domain) test set")
    g.add_argument("--folds", type=positive_int, default=1, metavar="K",
                   help="K-fold cross-validation (default 1: one split)")


def _add_protocol_options(p: argparse.ArgumentParser) -> None:
    """Each registered protocol's own options (:class:`ProtocolOption`), one group each."""
    from ..evaluation.protocols import registered_protocols  # noqa: PLC0415
    kinds = {"int": {"type": int}, "count": {"type": count}, "positive": {"type": positive_int},
             "float": {"type": float}, "list": {"action": ListArg}, "str": {}}
    for proto in registered_protocols():
        if proto.options:
            g = p.add_argument_group(f"{proto.name} protocol")
            for opt in proto.options:
                g.add_argument(opt.flag, default=opt.default, help=opt.help, **kinds[opt.kind])


def _check_protocol_values(args, protocols) -> None:
    """Run each protocol option's own ``check`` before any data is loaded."""
    for proto in protocols:
        for opt in proto.options:
            if opt.check is not None:
                opt.check(getattr(args, opt.flag.lstrip("-").replace("-", "_")))


#: evaluate options every protocol uses (the others belong to the sweep protocols or to one
#: protocol with its own procedure)
_SHARED_OPTIONS = {"data", "data_dir", "data_option", "trust_pickle", "routers", "protocol",
                   "encoder", "split_column", "seed", "out", "no_plots", "no_progress"}

#: evaluate options that one sweep protocol alone reads (dest -> protocol): refused, like an
#: option of a protocol with its own procedure, when that protocol is not among those run
_SWEEP_PROTOCOL_OPTIONS = {"routellm_pair": "routellm"}


def _check_options_used(args, protocols) -> None:
    """Refuse options the chosen protocols would ignore: those set to something other than
    their default (``args.option_defaults``: dest -> (flag, default)) that neither the sweep
    protocols nor the chosen protocol with its own procedure reads (an option of one sweep
    protocol, :data:`_SWEEP_PROTOCOL_OPTIONS`, only when that protocol runs); and, for a
    protocol with its own procedure, list items given twice (``--routers knn,knn`` would
    count one router twice).

    Raises
    ------
    ValueError
        Naming the options and the protocol that does not use them.
    """
    from ..evaluation.protocols import registered_protocols  # noqa: PLC0415
    own_of = {opt.flag.lstrip("-").replace("-", "_"): proto.name
              for proto in registered_protocols() for opt in proto.options}
    owner_of = {**_SWEEP_PROTOCOL_OPTIONS, **own_of}
    defaults = getattr(args, "option_defaults", {})
    own = [p for p in protocols if p.run is not None]
    used = set(_SHARED_OPTIONS)
    if own:
        used |= {k for k, name in own_of.items() if name == own[0].name}
        what = f"--protocol {own[0].name}"
    else:
        run = {p.name for p in protocols}
        used |= {k for k in defaults if k not in own_of
                 and (k not in _SWEEP_PROTOCOL_OPTIONS or _SWEEP_PROTOCOL_OPTIONS[k] in run)}
        what = f"--protocol {','.join(p.name for p in protocols)}"
    unused = [flag for dest, (flag, default) in defaults.items()
              if dest not in used and getattr(args, dest, default) != default]
    if unused:
        owners = sorted({owner_of[d] for d, (f, _) in defaults.items()
                         if f in unused and d in owner_of})
        sweeps = [p.name for p in registered_protocols() if p.run is None]
        hint = (f" (option(s) of --protocol {', '.join(owners)})" if owners else
                f" (options of the protocols {', '.join(sweeps)})" if own else "")
        raise ValueError(f"{what} does not use {', '.join(unused)}{hint}; leave them out")
    if own:
        for dest in ["routers"] + [k for k, name in own_of.items() if name == own[0].name]:
            value = getattr(args, dest, None)
            if isinstance(value, list) and repeated(value):
                raise ValueError(f"{defaults[dest][0]} names {', '.join(map(str, repeated(value)))} "
                                 f"more than once; give each item once")


def _check_routellm_pair(pair, llm_names) -> None:
    """``--routellm-pair STRONG,WEAK``: two different LLMs of the loaded data."""
    if pair is None:
        return
    if len(pair) != 2 or pair[0] == pair[1]:
        raise ValueError(f"--routellm-pair needs two different LLM names STRONG,WEAK, got "
                         f"{','.join(pair)}")
    missing = [x for x in pair if x not in llm_names]
    if missing:
        shown = ", ".join(llm_names[:30]) + (f", ... ({len(llm_names) - 30} more)"
                                             if len(llm_names) > 30 else "")
        raise ValueError(f"--routellm-pair names {', '.join(missing)}, not an LLM of the data; "
                         f"its LLMs: {shown}")


def _run_settings(args, proto) -> dict:
    """What a protocol with its own procedure receives: the run's settings and its options."""
    settings = {"routers": list(args.routers), "encoder": args.encoder,
                "split_column": args.split_column, "seed": args.seed, "out": args.out,
                "plots": not args.no_plots, "progress": not args.no_progress}
    for opt in proto.options:
        key = opt.flag.lstrip("-").replace("-", "_")
        settings[key] = getattr(args, key)
    return settings


def _load(args, **options):
    return load_data(args, **options)   # generated data drawn with --seed


def add_parser(subparsers) -> None:
    """Add the ``evaluate``, ``demo`` and ``scaling`` sub-commands."""
    p = subparsers.add_parser("evaluate", help="benchmark routers under routing protocols",
                              description="Fit routers, sweep their operating points and write "
                                          "metrics, decisions, curves, a report and plots.")
    add_data_args(p)
    from ..registry import available_routers  # noqa: PLC0415 (names only; models load lazily)
    p.add_argument("--routers", action=ListArg, required=True, metavar="R1,R2",
                   help="registry names, comma or space separated: " + ", ".join(available_routers()))
    from ..evaluation.protocols import protocol_names  # noqa: PLC0415
    p.add_argument("--protocol", action=ListArg, default=["all"], metavar="P1,P2",
                   help="|".join(protocol_names(all_only=True)) + "|all (a list allowed); "
                        "or, alone, " + " | ".join(sorted(set(protocol_names())
                                                          - set(protocol_names(all_only=True))))
                        + " (their own options below)")
    p.add_argument("--pools", action=ListArg, default=["all"], metavar="3,5,all",
                   help="candidate pool sizes and/or 'all' (the whole LLM pool; default)")
    p.add_argument("--groups", action=ListArg, default=None, metavar="G1,G2",
                   help="candidate groups for sized pools: all-strong,all-weak,strong-to-weak")
    p.add_argument("--group-method", choices=("routereval", "oracle-best"), default="routereval",
                   help="how sized pools' groups are built: routereval (default; RouterEval's "
                        "released code: best window of consecutively ranked LLMs, best of 1000 "
                        "one-per-block draws) or oracle-best (the best combination of m LLMs "
                        "within the top/bottom max(ceil(0.2 n), m) of the n qualifying LLMs)")
    _add_split_args(p)
    p.add_argument("--encoder", type=encoder_spec, default=None,
                   help="encoder for text routers: a registered one (e.g. hashing, minilm, "
                        "minilm:torch), a local sentence-transformers model folder or a hub "
                        "model id owner/name")
    p.add_argument("--p", type=fraction, default=None, help="p of the r_o router (0 to 1)")
    p.add_argument("--reference-score", type=float, default=None, metavar="S",
                   help="reference score for RouterEval's V_R = mu_o / S (default: the paper's "
                        "value for RouterEval benchmarks; none otherwise)")
    p.add_argument("--routellm-pair", action=ListArg, default=None, metavar="STRONG,WEAK",
                   help="LLM pair for the routellm protocol (default: best train mean, cheapest other)")
    p.add_argument("--no-fallback", action="store_true",
                   help="do not fall back (per task) to best-single/task-best where a learned "
                        "router loses to them on held-out training queries")
    p.add_argument("--no-top-check", action="store_true",
                   help="on data with costs, do not hand a kept router's top choice (its LLM "
                        "with no budget) to the better baseline when it does not lead it by "
                        "one SE on held-out training queries")
    p.add_argument("--auto", type=count, default=0, metavar="N",
                   help="inner Optuna search of N trials per router on the training queries "
                        "(search spaces from configs/search/); chosen parameters in the report")
    p.add_argument("--auto-objective", choices=("auto", "mu_o", "nauc"), default="auto",
                   help="what --auto scores a setting by on held-out training queries: mu_o, "
                        "nauc (ORBIT's nAUC of its budget sweep; data with costs), or auto "
                        "(default: nauc where the data has costs, else mu_o)")
    p.add_argument("--auto-folds", type=auto_folds, default="auto", metavar="{auto,1-20}",
                   help="where --auto scores a setting: auto (default: five inner folds of "
                        "the training queries for routers whose fit is cheap, one held-out "
                        "fifth for the others) or a number of inner folds (1: one held-out "
                        "fifth)")
    p.add_argument("--fallback-metric", choices=("auto", "mu_o", "nauc"), default="auto",
                   help="what the safe fallback's verdict compares on held-out training "
                        "queries: mu_o (each choice's top LLM), nauc (the budget sweep's "
                        "nAUC, bootstrap SE; data with costs) or auto (default: nauc where "
                        "the data has costs, else mu_o)")
    p.add_argument("--missing", choices=("mask", "drop"), default="mask",
                   help="test queries with unobserved LLMs: route among the observed ones "
                        "(mask, default) or leave them out (drop)")
    _add_protocol_options(p)
    add_seed_arg(p)
    p.add_argument("--out", required=True, help="output folder (replaced atomically)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(func=run_evaluate, option_defaults={
        a.dest: (max(a.option_strings, key=len), a.default)
        for a in p._actions if a.option_strings and a.dest != "help"})

    d = subparsers.add_parser("demo", help="evaluate the baselines and the CF routers on SIMULATED data "
                                 "(about 20 s on 2 cores)")
    add_data_args(d, required=False)
    d.set_defaults(data="synthetic")
    d.add_argument("--out", default="demo-results", help="output folder")
    add_seed_arg(d)
    d.add_argument("--n-queries", type=positive_int, default=1000, help="simulated queries (default 1000)")
    d.add_argument("--routers", action=ListArg, default=list(DEMO_ROUTERS), metavar="R1,R2",
                   help="routers to run (default: the baselines, task-best, mf, mirt and "
                        "two-tower)")
    d.add_argument("--no-progress", action="store_true")
    d.set_defaults(func=run_demo)

    s = subparsers.add_parser("scaling", help="RouterEval scaling-up: r_o(p) score against pool size")
    add_data_args(s)
    s.add_argument("--p", action=FractionListArg, default=[0.0, 0.25, 0.5, 0.75, 1.0],
                   metavar="P1,P2", help="oracle probabilities, 0 to 1 (default 0,0.25,0.5,0.75,1)")
    s.add_argument("--max-m", type=positive_int, default=None,
                   help="largest pool size, >= 1 (default: all LLMs)")
    s.add_argument("--grid", choices=("linear", "log"), default="linear",
                   help="m = 1..max-m (linear) or a log grid of about 20 sizes")
    s.add_argument("--subsets", type=positive_int, default=100, help="random candidate subsets per m")
    _add_split_args(s)
    add_seed_arg(s)
    s.add_argument("--out", required=True, help="output folder (replaced atomically)")
    s.set_defaults(func=run_scaling)


def _print_leaderboard(lb, out: Path, simulated: bool, seconds: float) -> None:
    from ..evaluation import markdown_table  # noqa: PLC0415
    tag = " (SIMULATED data)" if simulated else ""
    print(f"\nLeaderboard{tag}:\n")
    print(markdown_table(lb) if len(lb) else "(no router produced results)")
    print(f"\nwrote {out}/report.md (+ metrics.csv, metrics.json, decisions.parquet, curves.csv, "
          f"plots) in {seconds:.1f} s")


def run_evaluate(args) -> int:
    """Handler of ``recsys-router evaluate``."""
    from ..evaluation import (EvalConfig, evaluate, get_protocol, parse_pools,  # noqa: PLC0415
                              parse_protocols, write_results)
    from ..evaluation.io import check_out_dir  # noqa: PLC0415
    t0 = time.perf_counter()
    check_out_dir(args.out)  # before any work: a folder that cannot be replaced is refused now
    protocols = parse_protocols(args.protocol)
    records = [get_protocol(n) for n in protocols]
    own = [p for p in records if p.run is not None]
    if own and len(protocols) > 1:
        raise ValueError(f"protocol {own[0].name} runs on its own: give --protocol "
                         f"{own[0].name} alone")
    _check_options_used(args, records)
    _check_protocol_values(args, records)
    if not own:  # before the data loads: group options without a sized pool do nothing
        from ..evaluation.splits import check_group_options  # noqa: PLC0415
        check_group_options(parse_pools(args.pools), args.groups, args.group_method)
    data = _load(args)
    if own:
        print(own[0].run(data, _run_settings(args, own[0])).text)
        return 0
    _check_routellm_pair(args.routellm_pair, list(data.llm_names))
    cfg = EvalConfig(routers=args.routers, protocols=protocols,
                     pools=parse_pools(args.pools), groups=args.groups,
                     group_method=args.group_method, split=args.split,
                     split_column=args.split_column, ood_tasks=args.ood_tasks, folds=args.folds,
                     encoder=args.encoder, p=args.p, seed=args.seed,
                     reference_score=args.reference_score,
                     routellm_pair=tuple(args.routellm_pair) if args.routellm_pair else None,
                     fallback=not args.no_fallback, top_check=not args.no_top_check,
                     missing=args.missing, auto=args.auto,
                     auto_objective=args.auto_objective,
                     fallback_metric=args.fallback_metric, auto_folds=args.auto_folds)
    res = evaluate(data, cfg, progress=not args.no_progress)
    if res.timings.empty:  # every router failed on every fold: there is nothing to report
        failed = [n for n in res.notes if n.startswith("router ")]
        raise ValueError("no router produced results, nothing written: " + "; ".join(failed))
    out, lb = write_results(res, args.out, plots=not args.no_plots)
    for note in res.notes:
        print(f"note: {note}", file=sys.stderr)
    _print_leaderboard(lb, out, res.simulated, time.perf_counter() - t0)
    return 0


def run_demo(args) -> int:
    """Handler of ``recsys-router demo``: the baselines and the CF routers (mf, mirt,
    two-tower) on the built-in simulated data, each router without the safe fallback."""
    from ..evaluation import EvalConfig, evaluate, write_results  # noqa: PLC0415
    from ..evaluation.io import check_out_dir  # noqa: PLC0415
    t0 = time.perf_counter()
    check_out_dir(args.out)
    options = {"n_queries": args.n_queries, "n_llms": 12, "n_topics": 6, "seed": args.seed} \
        if args.data in ("synthetic", "simulated") else {}
    data = _load(args, **options)
    cfg = EvalConfig(routers=list(args.routers), pools=["all", 3] if data.n_llms >= 11 else ["all"],
                     encoder="hashing", p=0.5, seed=args.seed, router_params=DEMO_PARAMS,
                     fallback=False)   # the leaderboard shows each router's own decisions
    res = evaluate(data, cfg, progress=not args.no_progress)
    out, lb = write_results(res, args.out)
    if res.simulated:
        print("demo data: SIMULATED (seeded topic/IRT simulator), not real LLM records")
    _print_leaderboard(lb, out, res.simulated, time.perf_counter() - t0)
    print(f"report: {Path(out).absolute() / 'report.md'}")
    return 0


def run_scaling(args) -> int:
    """Handler of ``recsys-router scaling``."""
    from ..evaluation.io import check_out_dir  # noqa: PLC0415
    from ..evaluation.scaling import run_scaling as scaling  # noqa: PLC0415
    check_out_dir(args.out)  # before loading the data
    table = scaling(_load(args), args.out, p_values=args.p, max_m=args.max_m, grid=args.grid,
                    subsets=args.subsets, split=args.split, split_column=args.split_column,
                    ood_tasks=args.ood_tasks, seed=args.seed)
    print(table.pivot(index="m", columns="p", values="mean_score").round(4).to_string())
    print(f"\nwrote {Path(args.out) / 'scaling.csv'} and scaling.png")
    return 0
