"""``recsys-router export | calibrate | serve``: ship a fitted router as a pickle-free
artifact, set its decision policy to meet a cost or share target, and serve it over HTTP.

Examples
--------
recsys-router export --router knn --data routerbench_zs --out artifacts/knn
recsys-router export -c tuning/knn/best_config.yaml --out artifacts/best
recsys-router export --ckpt lightning_logs/version_0/checkpoints/last.ckpt --out artifacts/mf
recsys-router calibrate artifacts/knn --data routerbench_zs --target-cost 0.5 --policy budget
recsys-router serve artifacts/knn --port 8000 --backends backends.yaml
recsys-router serve artifacts/knn --log-db decisions.db --explore epsilon:0.1
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

__all__ = ["add_parser", "run_export", "run_calibrate", "run_serve", "build_from_args"]

API_KEY_ENV = "RECSYS_ROUTER_API_KEY"


def _kv(text: str) -> tuple[str, object]:
    import yaml
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    k, v = text.split("=", 1)
    return k.strip(), yaml.safe_load(v)


def _floats(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def add_parser(subparsers) -> None:
    """Add the ``export``, ``calibrate`` and ``serve`` sub-commands."""
    e = subparsers.add_parser(
        "export", help="fit or load a router and write it as a self-contained artifact",
        description="Write a router as a directory (manifest.json, state.json, weights.npz; no "
                    "pickle). Source: a registry router fitted on --data, YAML configs (-c: a "
                    "LightningCLI config or a tune best_config.yaml), or a Lightning checkpoint.")
    src = e.add_argument_group("source (one of)")
    src.add_argument("--router", help="registry router name, fitted on the train split of --data")
    src.add_argument("-c", "--config", action="append", default=[], metavar="YAML",
                     help="config file(s), merged in order; with --ckpt: the data config")
    src.add_argument("--ckpt", help="Lightning checkpoint of a RouterModule (data module rebuilt "
                                    "from the checkpoint, or from -c)")
    e.add_argument("--param", action="append", default=[], type=_kv, metavar="KEY=VALUE",
                   help="router hyperparameter (YAML value), repeatable")
    e.add_argument("--data", help="dataset name or path (required with --router)")
    e.add_argument("--data-option", action="append", default=[], type=_kv, metavar="KEY=VALUE")
    e.add_argument("--split", type=_floats, default=None, metavar="TR,VA,TE",
                   help="train/val/test fractions for --data (default 0.8,0.1,0.1)")
    e.add_argument("--split-column", default=None, help="query column with train/val/test labels")
    e.add_argument("--seed", type=int, default=None,
                   help="seed of the split and of the router (default 0; a config's own seed is kept)")
    e.add_argument("--policy", choices=("argmax", "wtp", "budget"), default="argmax",
                   help="default decision policy (calibrate can set it later)")
    e.add_argument("--policy-value", type=float, default=None, help="lambda (wtp) or C (budget)")
    e.add_argument("--out", required=True, help="artifact directory (written atomically)")
    e.add_argument("--overwrite", action="store_true", help="replace an existing artifact")
    e.set_defaults(func=run_export)

    c = subparsers.add_parser(
        "calibrate", help="set an artifact's default policy to meet a cost or share target",
        description="Find the willingness-to-pay (wtp) or budget whose decisions on --data meet "
                    "the target (mean true cost per query, or a share of queries sent to one LLM) "
                    "and store it as the artifact's default policy.")
    c.add_argument("artifact", help="artifact directory")
    c.add_argument("--data", required=True, help="dataset name or path")
    c.add_argument("--data-option", action="append", default=[], type=_kv, metavar="KEY=VALUE")
    c.add_argument("--split", default=None, metavar="NAME",
                   help="use only queries whose 'split' column is NAME (default: all queries)")
    t = c.add_mutually_exclusive_group(required=True)
    t.add_argument("--target-cost", type=float, help="wanted mean cost per query")
    t.add_argument("--target-share", metavar="LLM=SHARE", help="wanted share of one LLM, e.g. gpt-4=0.3")
    c.add_argument("--policy", choices=("wtp", "budget"), default="wtp")
    c.add_argument("--seed", type=int, default=0,
                   help="seeds Python, numpy and torch (routers are already seeded per query)")
    c.set_defaults(func=run_calibrate)

    s = subparsers.add_parser("serve", help="serve an artifact over HTTP (route, metrics, OpenAI proxy)")
    s.add_argument("artifact", help="artifact directory")
    s.add_argument("--host", default="127.0.0.1", help="bind address (default loopback only)")
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--api-key", default=None,
                   help=f"require 'Authorization: Bearer KEY' (default: ${API_KEY_ENV} if set)")
    s.add_argument("--backends", default=None, help="backends.yaml for /v1/chat/completions")
    s.add_argument("--max-batch", type=int, default=256, help="most queries per request and batch")
    s.add_argument("--max-body-bytes", type=int, default=1_000_000)
    s.add_argument("--max-text-chars", type=int, default=100_000)
    s.add_argument("--batch-wait-ms", type=float, default=2.0,
                   help="how long a request waits for others to share a model call")
    s.add_argument("--log-level", default="warning")
    s.add_argument("--log-db", default=None, metavar="URL",
                   help="decision log database: a SQLAlchemy URL (sqlite:///decisions.db, a bare "
                        "path = SQLite in WAL mode; postgresql://user:pw@host/db for several "
                        "service instances); enables POST /feedback")
    s.add_argument("--log-text", choices=("full", "hash", "none"), default="hash",
                   help="how the log keeps query texts (default: their SHA-256 only)")
    s.add_argument("--log-batch", type=int, default=256,
                   help="decisions per database write (a kill -9 loses at most the unwritten batch)")
    s.add_argument("--log-flush-ms", type=float, default=200.0,
                   help="longest a decision waits before its batch is written")
    s.add_argument("--explore", default="none", metavar="POLICY",
                   help="exploration: none, epsilon:E, softmax:T or thompson[:N] (routers that "
                        "can sample their predictions); each decision logs its exact propensity")
    s.add_argument("--seed", type=int, default=0,
                   help="seeds Python, numpy and torch (routers are already seeded per query)")
    s.set_defaults(func=run_serve)


# ---------------------------------------------------------------------------- export
def _merge(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _load_yamls(paths) -> dict:
    import yaml
    cfg: dict = {}
    for p in paths:
        try:
            part = yaml.safe_load(Path(p).read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ValueError(f"{p}: cannot read config ({exc})") from exc
        if not isinstance(part, dict):
            raise ValueError(f"{p}: expected a YAML mapping at the top level")
        cfg = _merge(cfg, part)
    return cfg


def _datamodule(spec: dict, source: str):
    """A RoutingDataModule from a ``{class_path, init_args}`` mapping."""
    import importlib
    if not isinstance(spec, dict) or "class_path" not in spec:
        raise ValueError(f"{source}: 'data' must be a mapping with class_path and init_args")
    path = str(spec["class_path"])
    mod, _, name = path.rpartition(".")
    if not mod.startswith("recsys_router.datamodules."):
        raise ValueError(f"{source}: data class_path must live under recsys_router.datamodules., "
                         f"got {path!r}")
    cls = getattr(importlib.import_module(mod), name)
    args = {k: v for k, v in (spec.get("init_args") or {}).items() if not k.startswith("_")}
    return cls(**args)


def _splits_from_data(args):
    from ..evaluation import make_folds
    from .evaluate import load_eval_data
    data = load_eval_data(args.data, **dict(args.data_option))
    fold = make_folds(data, split=args.split, split_column=args.split_column,
                      seed=args.seed or 0)[0]
    return fold.train, fold.val, fold.test


def build_from_args(args):
    """Fit or load the router that ``recsys-router export`` writes.

    Returns
    -------
    (router, train, val, test, description)
        ``val``/``test`` may be None.
    """
    from ..registry import make_router
    sources = [bool(args.router), bool(args.config) and not args.ckpt, bool(args.ckpt)]
    if sum(sources) != 1:
        raise ValueError("give exactly one source: --router NAME, -c CONFIG [...] or --ckpt PATH")
    if args.router or (args.config and "router" in _load_yamls(args.config)):
        cfg = _load_yamls(args.config) if args.config else {}
        name = args.router or cfg["router"]
        params = {**(cfg.get("params") or {}), **dict(args.param)}
        try:
            router = make_router(name, **params)
        except TypeError as exc:  # unknown hyperparameter: a usage error, not a crash
            raise ValueError(str(exc)) from None
        if "seed" in router.get_params() and "seed" not in params:
            router.set_params(seed=args.seed or 0)
        if args.data:
            train, val, test = _splits_from_data(args)
        elif "data" in cfg:
            sp = _datamodule(cfg["data"], ", ".join(args.config)).splits
            train, val, test = sp["train"], sp.get("val"), sp.get("test")
        else:
            raise ValueError("--router needs --data NAME_OR_PATH (or a config with a 'data' section)")
        print(f"fitting {name} on {train.n_queries} train queries x {train.n_llms} LLMs ...",
              file=sys.stderr)
        return router.fit(train, val), train, val, test, f"registry router {name!r}"
    if args.param:
        raise ValueError("--param applies to --router only (edit the config for Lightning models)")
    if args.ckpt:
        return _from_checkpoint(args)
    from .lightning import build_cli
    argv = [a for c in args.config for a in ("-c", c)]
    if args.seed is not None:
        argv.append(f"--seed_everything={args.seed}")
    cli = build_cli(argv, run=False)
    print(f"training {type(cli.model).__name__} with Lightning ...", file=sys.stderr)
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    dm = cli.datamodule
    router = cli.model.to_router(dm)
    sp = dm.splits
    return router, sp["train"], sp.get("val"), sp.get("test"), f"Lightning config {args.config}"


def _from_checkpoint(args):
    import importlib

    import torch
    from recsys_router.models.base.router_module import RouterModule
    ckpt = Path(args.ckpt)
    if not ckpt.is_file():
        raise FileNotFoundError(f"--ckpt {ckpt}: no such checkpoint file")
    raw = torch.load(ckpt, map_location="cpu", weights_only=False)
    if args.config:
        cfg = _load_yamls(args.config)
        if "data" not in cfg:
            raise ValueError(f"{args.config}: with --ckpt, -c gives the data config (a 'data:' section)")
        dm = _datamodule(cfg["data"], ", ".join(args.config))
    else:
        hp = dict(raw.get("datamodule_hyper_parameters") or {})
        if "_class_path" not in hp:
            raise ValueError(f"{ckpt}: the checkpoint does not record its data module; pass the "
                             "data config with -c data.yaml")
        dm = _datamodule({"class_path": hp.pop("_class_path"), "init_args": hp}, str(ckpt))
    cls_path = str((raw.get("hyper_parameters") or {}).get("_class_path", ""))
    mod, _, name = cls_path.rpartition(".")
    if not mod.startswith("recsys_router.models."):
        raise ValueError(f"{ckpt}: hyper_parameters._class_path {cls_path!r} is not a recsys_router.models "
                         "RouterModule (train with recsys-router fit)")
    cls = getattr(importlib.import_module(mod), name, None)
    if not (isinstance(cls, type) and issubclass(cls, RouterModule)):
        raise ValueError(f"{ckpt}: {cls_path!r} is not a RouterModule subclass")
    module = cls.load_from_checkpoint(ckpt, map_location="cpu")
    if hasattr(module, "on_data") and getattr(module, "builder", "absent") is None:
        raise ValueError(f"{type(module).__name__} checkpoints need their registry router: "
                         "export it with --router graph --data ... instead")
    router = module.to_router(dm)
    sp = dm.splits
    return router, sp["train"], sp.get("val"), sp.get("test"), f"checkpoint {ckpt}"


def run_export(args) -> int:
    """Handler of ``recsys-router export``."""
    from ..export import export_router, heldout_metrics
    if args.policy != "argmax" and args.policy_value is None:
        raise ValueError(f"--policy {args.policy} needs --policy-value (lambda or budget C)")
    router, train, val, test, what = build_from_args(args)
    metrics: dict = {}
    for name, part in (("val", val), ("test", test)):
        if part is not None and part.n_queries:
            metrics.update(heldout_metrics(router, part, name))
    out = export_router(router, args.out, train_data=train, metrics=metrics, policy=args.policy,
                        policy_value=args.policy_value, overwrite=args.overwrite)
    print(f"exported {type(router).__name__} ({what}) to {out}")
    for k, v in metrics.items():
        print(f"  {k} = {v:.6g}")
    return 0


# ---------------------------------------------------------------------------- calibrate
def run_calibrate(args) -> int:
    """Handler of ``recsys-router calibrate``."""
    import numpy as np

    from ..export import calibrate_policy, load_router, set_default_policy
    from .evaluate import load_eval_data
    _seed_all(args.seed)
    art = load_router(args.artifact)
    data = load_eval_data(args.data, **dict(args.data_option))
    if args.split is not None:
        if "split" not in data.queries.columns:
            raise ValueError(f"{args.data}: no 'split' column to pick --split {args.split!r} from")
        keep = np.flatnonzero(data.queries["split"].astype(str).to_numpy() == args.split)
        if not len(keep):
            raise ValueError(f"{args.data}: no query has split {args.split!r} "
                             f"(splits: {sorted(set(data.queries['split'].astype(str)))})")
        data = data.subset(keep)
    missing = [n for n in art.llm_names if n not in data.llm_names]
    if missing:
        raise ValueError(f"{args.data} lacks LLM(s) {missing} of the artifact's pool")
    data = data.subset(llms=art.llm_names)
    scores, costs, _ = art.predict(data)
    if costs is None:
        raise ValueError("the router predicts no costs (trained without costs): nothing to calibrate")
    share = None
    if args.target_share is not None:
        llm, _, frac = args.target_share.rpartition("=")
        if llm not in art.llm_names:
            raise ValueError(f"--target-share: unknown LLM {llm!r}; the artifact's LLMs: {art.llm_names}")
        share = (art.llm_names.index(llm), float(frac))
    true_costs = data.costs if data.costs is not None and np.isfinite(data.costs).all() else None
    choose = None
    if art.custom_routing:  # e.g. zero: calibrate its own decisions, not a policy on its scores
        def choose(v):
            return art.router.route_indices(data, **{args.policy: v})
    res = calibrate_policy(scores, costs, policy=args.policy, target_cost=args.target_cost,
                           target_share=share, true_costs=true_costs, choose=choose)
    res["cost_source"] = "true" if true_costs is not None else "predicted"
    res["data"] = {"name": data.name, "n_queries": data.n_queries, "split": args.split}
    set_default_policy(args.artifact, res["policy"], res["value"],
                       extra={"calibration": {k: v for k, v in res.items() if k not in ("policy", "value")}})
    what = "mean cost" if res["kind"] == "mean_cost" else f"share of {args.target_share.rpartition('=')[0]}"
    print(f"calibrated {res['policy']} = {res['value']:.6g} on {data.n_queries} queries: "
          f"{what} achieved {res['achieved']:.6g} vs target {res['target']:.6g} "
          f"({res['cost_source']} costs)")
    return 0


# ---------------------------------------------------------------------------- serve
def run_serve(args) -> int:
    """Handler of ``recsys-router serve`` (blocks until interrupted)."""
    import uvicorn

    from ..export import load_router
    from ..serving import ServiceConfig, create_app, load_backends
    _seed_all(args.seed)
    art = load_router(args.artifact)
    key = args.api_key or os.environ.get(API_KEY_ENV) or None
    backends = load_backends(args.backends, art.llm_names) if args.backends else None
    cfg = ServiceConfig(max_batch=args.max_batch, max_body_bytes=args.max_body_bytes,
                        max_text_chars=args.max_text_chars, api_key=key,
                        batch_wait_ms=args.batch_wait_ms, backends=backends,
                        explore=args.explore, log_db=args.log_db, log_text=args.log_text,
                        log_batch=args.log_batch, log_flush_ms=args.log_flush_ms, seed=args.seed)
    app = create_app(art, cfg)
    if args.host not in ("127.0.0.1", "localhost", "::1") and not key:
        print(f"warning: serving on {args.host} without an API key (--api-key or ${API_KEY_ENV})",
              file=sys.stderr)
    print(f"serving {art.manifest.get('router_class')} ({len(art.llm_names)} LLMs) on "
          f"http://{args.host}:{args.port}", file=sys.stderr, flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0


def _seed_all(seed: int) -> None:
    """Seed the global generators (Python, numpy, torch) for the whole process."""
    import random

    import numpy as np
    random.seed(seed)
    np.random.seed(seed)
    try:
        import torch
        torch.manual_seed(seed)
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
