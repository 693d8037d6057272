"""``recsys-router data``: list, inspect, convert and download routing datasets.

Examples::

    recsys-router data list
    recsys-router data info routerbench_zs --data-dir ../shared/data
    recsys-router data info synthetic --seed 3 --n-queries 500 --json
    recsys-router data info routereval --trust-pickle -o benchmark=arc -o difficulty=easy -o m=5 -o group=all_strong
    recsys-router data info routerbench_zs --data-option duplicates=mean
    recsys-router data convert llmrouter --to llmrouter.parquet
    recsys-router data download routerbench --cache-dir ~/data
"""

from __future__ import annotations

import argparse
import json
import math
import sys

import numpy as np

from ..data import RoutingData
from ..datasets.resolve import loader_spec, resolve_dataset, seed_option
from .args import UNUSED_SEED_HELP, add_data_args, add_seed_arg, data_options, positive_int

__all__ = ["add_parser", "load_from_args", "load_data", "format_info", "info_dict"]

_SIM_OPTIONS = ("n_queries", "n_llms", "n_topics")


def _common(p: argparse.ArgumentParser) -> None:
    add_data_args(p, positional=True, help="registered dataset name or a file/folder")
    add_seed_arg(p, None, "random seed (generated datasets)")
    p.add_argument("--n-queries", type=positive_int, default=None,
                   help="synthetic: number of queries")
    p.add_argument("--n-llms", type=positive_int, default=None, help="synthetic: number of LLMs")
    p.add_argument("--n-topics", type=positive_int, default=None,
                   help="synthetic: number of topics")
    p.add_argument("--download", action="store_true",
                   help="download a Hugging Face dataset that is not found locally")


def add_parser(subparsers) -> None:
    """Add the ``data`` command group."""
    p = subparsers.add_parser("data", help="list, inspect, convert and download datasets",
                              description="Routing datasets: list, info, convert, download.")
    sub = p.add_subparsers(dest="data_command", metavar="SUBCOMMAND")
    sub.required = True

    ls = sub.add_parser("list", help="registered dataset names")
    add_seed_arg(ls, None, UNUSED_SEED_HELP)
    ls.set_defaults(func=_cmd_list)

    info = sub.add_parser("info", help="counts, density, score range, per-LLM table, tasks, splits")
    _common(info)
    info.add_argument("--json", action="store_true", help="print JSON instead of text")
    info.set_defaults(func=_cmd_info)

    conv = sub.add_parser("convert", help="write the generic long format (.csv/.csv.gz/.parquet/.jsonl)")
    _common(conv)
    conv.add_argument("--to", required=True, metavar="FILE", help="output file; format from suffix")
    conv.set_defaults(func=_cmd_convert)

    dl = sub.add_parser("download", help="download a Hugging Face dataset into the cache")
    dl.add_argument("dataset", metavar="NAME", help="routerbench, routereval or embedllm")
    dl.add_argument("--cache-dir", default=None, help="parent folder (default: ~/.cache/recsys_router/datasets)")
    add_seed_arg(dl, None, UNUSED_SEED_HELP)
    dl.set_defaults(func=_cmd_download)


def load_data(args, **options):
    """The one dataset named by ``--data``/``--data-dir``/``-o`` of a command (splits stacked).
    A generated dataset (``synthetic``...) is drawn with the command's ``--seed`` unless
    ``-o seed=`` gives its own (an error for data that is not drawn at random); ``-o`` options
    override ``options`` (the command's defaults).

    Example
    -------
    >>> ns = argparse.Namespace(data="synthetic", data_dir=None, data_option=["n_queries=30"], seed=1)
    >>> a, b = load_data(ns), load_data(argparse.Namespace(**{**vars(ns), "seed": 2}))
    >>> (a.n_queries, bool((a.scores == b.scores).all()))
    (30, False)
    """
    opts = {**options, **data_options(args)}
    seed = seed_option(args.data, opts, getattr(args, "seed", None))
    return resolve_dataset(args.data, data_dir=args.data_dir, stack=True, seed=seed, **opts)


def load_from_args(args):
    """Load the dataset named on the command line with its options (``--seed`` etc.).

    ``-o seed=N`` draws a generated dataset with N and is an error for data read from files
    (:func:`~recsys_router.datasets.resolve.seed_option`, as for every other command); beside
    ``--seed``, which here only draws the data, it is an error too (one value per option).

    Example
    -------
    >>> ns = argparse.Namespace(dataset="synthetic", data_dir=None, data_option=["seed=5"],
    ...                         seed=None, n_queries=20, n_llms=None, n_topics=None, download=False)
    >>> a = load_from_args(ns)
    >>> b = load_from_args(argparse.Namespace(**{**vars(ns), "data_option": [], "seed": 5}))
    >>> (a.n_queries, bool((a.scores == b.scores).all()))
    (20, True)
    """
    options = data_options(args)
    if "seed" in options and getattr(args, "seed", None) is not None:
        # here --seed only draws the data: one value per option, neither silently wins
        raise ValueError("--seed and -o seed= both set seed; give only one of them")
    seed = seed_option(args.dataset, options, getattr(args, "seed", None))
    if seed is not None:
        options["seed"] = seed
    spec = loader_spec(args.dataset)
    for name in ("download",) + _SIM_OPTIONS:
        value = getattr(args, name, None)
        if value is None or value is False:
            continue
        flag = f"--{name.replace('_', '-')}"
        if name in options:  # one value per option: neither silently wins
            raise ValueError(f"{flag} and -o {name}= both set {name}; give only one of them")
        if name in _SIM_OPTIONS and (spec is None or spec.needs_path):
            raise ValueError(f"{flag} applies to generated (synthetic) data only")
        options[name] = value
    return resolve_dataset(args.dataset, data_dir=args.data_dir, **options)


def _clean(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, (np.floating,)):
        return _clean(float(v))
    if isinstance(v, (np.integer,)):
        return int(v)
    return v


def info_dict(data: RoutingData) -> dict:
    """JSON-ready description: summary numbers plus a per-LLM table."""
    s = {k: _clean(v) for k, v in data.summary().items()}
    table = data.llm_summary()
    s["llms"] = [{k: _clean(v) for k, v in row.items()} for row in table.to_dict("records")]
    return s


def format_info(data: RoutingData) -> str:
    """Human-readable description (SIMULATED banner for generated data)."""
    s = data.summary()
    lines = []
    if s["simulated"]:
        lines += ["*" * 72, "*** SIMULATED DATA: generated by the built-in simulator, not real LLM "
                  "results ***", "*" * 72]
    lines += [f"dataset   {s['name']}", f"source    {s['source']}",
              f"queries   {s['n_queries']:,}", f"LLMs      {s['n_llms']:,}",
              f"observed  {s['n_observed']:,} cells (density {s['density']:.4f})",
              f"scores    {s['score_min']:.4g} .. {s['score_max']:.4g}"
              f"{' (binary 0/1)' if s['binary_scores'] else ''}",
              f"costs     {'yes' if s['has_costs'] else 'no'}",
              f"text      {'every query' if s['has_text'] else 'missing for some queries'}"]
    t = data.llm_summary()
    w = max(12, min(48, max(len(str(n)) for n in t["llm"])))
    lines += ["", f"{'LLM':<{w}} {'n_obs':>8} {'mean_score':>11} {'mean_cost':>12} {'size_B':>7}"]
    for _, r in t.iterrows():
        cost = "-" if not np.isfinite(r["mean_cost"]) else f"{r['mean_cost']:.4g}"
        size = "-" if not np.isfinite(r["size"]) else f"{r['size']:g}"
        mean = "-" if not np.isfinite(r["mean_score"]) else f"{r['mean_score']:.4f}"
        lines.append(f"{str(r['llm'])[:w]:<{w}} {int(r['n_observed']):>8} {mean:>11} {cost:>12} "
                     f"{size:>7}")
    for key in ("tasks", "splits"):
        items = list(s[key].items())
        shown = ", ".join(f"{k} ({v:,})" for k, v in items[:30])
        more = f", ... ({len(items) - 30} more)" if len(items) > 30 else ""
        lines += ["", f"{key} ({len(items)}): {shown or 'none'}{more}"]
    return "\n".join(lines)


def _as_dict(result) -> dict:
    return result if isinstance(result, dict) else {None: result}


def _cmd_list(args) -> int:
    from ..datasets import available_datasets
    names = available_datasets()
    w = max(len(n) for n in names)
    for n, d in names.items():
        print(f"{n:<{w}}  {d}")
    return 0


def _cmd_info(args) -> int:
    result = _as_dict(load_from_args(args))
    if args.json:
        out = {k if k is not None else "data": info_dict(v) for k, v in result.items()}
        print(json.dumps(out if len(out) > 1 else next(iter(out.values())), indent=2))
        return 0
    blocks = []
    for key, data in result.items():
        head = f"== {key} ==\n" if key is not None else ""
        blocks.append(head + format_info(data))
    print("\n\n".join(blocks))
    return 0


def _cmd_convert(args) -> int:
    from ..datasets.generic import long_losses, write_long
    result = load_from_args(args)
    if isinstance(result, dict):
        raise ValueError(f"{args.dataset} holds {len(result)} datasets ({', '.join(list(result)[:6])}"
                         f"...); pick one with -o options (e.g. -o difficulty=easy -o m=5 -o "
                         f"group=all_strong)")
    path = write_long(result, args.to, warn=False)
    obs = result.observed
    n, n_q, n_l = int(obs.sum()), int(obs.any(axis=1).sum()), int(obs.any(axis=0).sum())
    print(f"wrote {n:,} records ({n_q:,} queries x {n_l} LLMs) to {path}")
    for note in long_losses(result):
        print(f"note: {note}", file=sys.stderr)
    if result.meta.get("simulated"):
        print("note: SIMULATED data", file=sys.stderr)
    return 0


def _cmd_download(args) -> int:
    from ..datasets.hub import download_dataset
    try:
        path = download_dataset(args.dataset, args.cache_dir)
    except ConnectionError as exc:
        print(f"recsys-router data download: error: {exc}", file=sys.stderr)
        return 1
    print(f"downloaded {args.dataset} to {path}")
    return 0
