"""``recsys-router tune``: Optuna hyperparameter search over LightningCLI models or registry routers.

Examples
--------
recsys-router tune -c configs/models/mf.yaml -c configs/data/routerbench_zs.yaml \\
    --search configs/search/mf.yaml --n-trials 30 --metric val/aiq --direction maximize \\
    --storage sqlite:///studies.db --study-name mf-rb --trainer.max_epochs=10
recsys-router tune --router knn -c configs/data/synthetic.yaml --search configs/search/knn.yaml

Start the same command in several shells (same ``--storage`` and ``--study-name``) to share
one study; ``--n-trials`` is the study total. Options this command does not define are
passed to LightningCLI for every trial. Schema and outputs: :mod:`recsys_router.tuning`.
"""

from __future__ import annotations

import argparse
import logging
import sys

from .args import add_seed_arg, positive_float, positive_int

__all__ = ["add_parser", "run"]


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "tune", help="Optuna hyperparameter search (TPE, pruning, shared resumable studies)",
        description="Tune a LightningCLI model (-c model.yaml -c data.yaml) or a registry router "
                    "(--router NAME -c data.yaml) over a search-space YAML. Unknown options "
                    "(e.g. --trainer.max_epochs=5) are LightningCLI overrides for every trial.",
        allow_abbrev=False)
    p.add_argument("-c", "--config", action="append", default=[], metavar="YAML",
                   help="config file, repeatable (model + data, or router + data)")
    p.add_argument("--search", required=True, metavar="YAML", help="search-space file")
    p.add_argument("--router", default=None, metavar="NAME",
                   help="tune this registry router instead of a Lightning model")
    p.add_argument("--n-trials", type=positive_int, default=20,
                   help="trials in the whole study, all workers and earlier runs (default 20)")
    p.add_argument("--metric", default="val/mu_o", help="validation metric (default val/mu_o)")
    p.add_argument("--direction", choices=("maximize", "minimize"), default=None,
                   help="default: the metric's (minimize names ending in 'loss'; registry metrics "
                        "such as val/mu_o, val/aiq go their declared way; others need it); one "
                        "that contradicts the metric's is refused")
    p.add_argument("--storage", default=None, metavar="URL",
                   help="Optuna storage URL (default sqlite:///OUT/study.db; absolute SQLite "
                        "paths take four slashes: sqlite:////tmp/x.db)")
    p.add_argument("--study-name", default=None,
                   help="default: the search file's name; no control characters, and no '/', "
                        "'\\' or '..' when it names the default --out")
    p.add_argument("--timeout", type=positive_float, default=None, metavar="S",
                   help="seconds for this worker (> 0)")
    add_seed_arg(p, 0, "study seed; trial n samples with trial_seed(seed, n), a "
                       "SeedSequence([seed, n]) word, and a Lightning model trains with "
                       "seed_everything=trial_seed(seed, n); a registry router trains with its "
                       "config's params.seed (its default when not given) in every trial")
    p.add_argument("--pruner", choices=("median", "hyperband", "none"), default="median")
    p.add_argument("--heartbeat-interval", type=int, default=None, metavar="S",
                   help="seconds between heartbeats of a running trial (default 60)")
    p.add_argument("--heartbeat-grace", type=int, default=None, metavar="S",
                   help="a RUNNING trial silent this long is a dead worker's: it is failed, "
                        "retried with its parameters and not counted in --n-trials (default 180)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="best_config.yaml, trials.csv, plots, trial folders (default tuning/STUDY)")
    p.add_argument("--top", type=positive_int, default=10, help="rows of the summary table (>= 1)")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run, overrides=[])
    _collect_unknown(p)


def _collect_unknown(parser: argparse.ArgumentParser) -> None:
    """Let this sub-parser keep options it does not define in ``namespace.overrides``
    (argparse would otherwise reject them at the top level)."""
    parse_known = parser.parse_known_args

    def parse_known_args(args=None, namespace=None):
        ns, extra = parse_known(args, namespace)
        ns.overrides = list(getattr(ns, "overrides", None) or []) + [a for a in extra if a != "--"]
        return ns, []

    parser.parse_known_args = parse_known_args


def run(args) -> int:
    import warnings

    from recsys_router.tuning import tune

    level = logging.INFO if args.verbose else logging.WARNING
    for name in ("optuna", "pytorch_lightning", "lightning_fabric"):
        logging.getLogger(name).setLevel(level)
    if args.overrides and not args.overrides[0].startswith("--"):
        raise ValueError(f"unexpected argument {args.overrides[0]!r}; LightningCLI overrides look "
                         "like --trainer.max_epochs=5")
    if not args.config:
        raise ValueError("give at least one config with -c (a data config, and a model or router config)")
    from ..encoders import progress_bars  # noqa: PLC0415
    with warnings.catch_warnings(), progress_bars(not args.no_progress):
        warnings.filterwarnings("ignore", module="pytorch_lightning")
        warnings.filterwarnings("ignore", message=".*experimental feature.*")
        res = tune(args.config, args.search, router=args.router, n_trials=args.n_trials,
                   metric=args.metric, direction=args.direction, storage=args.storage,
                   study_name=args.study_name, timeout=args.timeout, seed=args.seed,
                   pruner=args.pruner, out_dir=args.out, overrides=args.overrides, top=args.top,
                   progress=not args.no_progress, plots=not args.no_plots,
                   **{k: v for k, v in (("heartbeat_interval", args.heartbeat_interval),
                                        ("heartbeat_grace", args.heartbeat_grace)) if v is not None})
    study = res.study
    print(f"study {study.study_name!r}: {len(study.trials)} trials in total, {res.n_run} run here")
    print(res.summary)
    for path in res.plots:
        print(f"plot: {path}")
    if res.best_config is None:  # completed trials, none with this tool's config (an old study)
        print("recsys-router tune: error: no completed trial records its config: no best config "
              "written", file=sys.stderr)
        return 2
    print(f"best config: {res.best_config}")
    return 0


if __name__ == "__main__":  # `python -m recsys_router.cli.tune ...` (same as `recsys-router tune ...`)
    from recsys_router.cli import main
    sys.exit(main(["tune", *sys.argv[1:]]))
