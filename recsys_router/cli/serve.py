"""``recsys-router export | calibrate | serve``: ship a fitted router as a pickle-free
artifact, set its decision policy to meet a cost or share target, and serve it over HTTP.

Examples
--------
recsys-router export --router knn --data routerbench_zs --out artifacts/knn
recsys-router export -c tuning/knn/best_config.yaml --out artifacts/best
recsys-router export --ckpt lightning_logs/version_0/checkpoints/last.ckpt --trust-pickle --out artifacts/mf
recsys-router calibrate artifacts/knn --data routerbench_zs --target-cost 0.5 --policy budget
recsys-router serve artifacts/knn --port 8000 --backends backends.yaml
recsys-router serve artifacts/knn --log-db decisions.db --explore epsilon:0.1
"""

from __future__ import annotations

import os
import re
import sys
import warnings

from .args import (FloatListArg, OptionError, add_data_args, add_seed_arg, data_options,
                   fraction, kv_dict, non_negative_float, parse_kv, port, positive_float,
                   positive_int, score_range_arg)

__all__ = ["add_parser", "run_export", "run_calibrate", "run_serve", "add_server_limit_args",
           "uvicorn_limits", "log_batch", "LOG_LEVELS", "MAX_LOG_BATCH"]

API_KEY_ENV = "RECSYS_ROUTER_API_KEY"
#: uvicorn's log levels (``uvicorn.config.LOG_LEVELS``; not imported: uvicorn loads only to serve)
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")
#: the decision log's queue bound (``recsys_router.feedback.writer.MAX_PENDING``; not imported:
#: SQLAlchemy loads only to serve): ``--log-batch`` may not exceed it
MAX_LOG_BATCH = 10_000


_SIGN_HELP = ("name of an environment variable holding the artifact signing key "
              "(HMAC-SHA256 of the manifest)")


def sign_key_from_env(var: str | None) -> str | None:
    """The signing key held by environment variable ``var`` (None when no variable is given).

    Raises
    ------
    ValueError
        The variable is unset or empty (the message names it).
    """
    if var is None:
        return None
    key = os.environ.get(var)
    if not key:
        raise ValueError(f"--sign-key-env {var}: the environment variable is unset or empty")
    return key


def add_server_limit_args(p) -> None:
    """Add the connection and timing limits of an HTTP service (``serve``, ``judge serve``):
    ``--body-timeout-s``, ``--limit-concurrency``, ``--keep-alive-s``, ``--graceful-timeout-s``."""
    p.add_argument("--body-timeout-s", type=positive_float, default=30.0,
                   help="seconds a request body may take to arrive whole, else 408 (default 30)")
    p.add_argument("--limit-concurrency", type=positive_int, default=1000,
                   help="most open connections and requests at once; beyond it new requests get "
                        "503 (default 1000)")
    p.add_argument("--keep-alive-s", type=positive_float, default=5.0,
                   help="seconds an idle keep-alive connection stays open (default 5)")
    p.add_argument("--graceful-timeout-s", type=positive_float, default=30.0,
                   help="on SIGTERM or Ctrl-C, seconds running requests may take to finish before "
                        "they are cancelled and the service shuts down (default 30)")


def uvicorn_limits(args) -> dict:
    """The ``uvicorn.run`` keyword arguments of :func:`add_server_limit_args`'s options.

    Example
    -------
    >>> import argparse
    >>> uvicorn_limits(argparse.Namespace(limit_concurrency=10, keep_alive_s=5.0,
    ...                                   graceful_timeout_s=2.0))
    {'limit_concurrency': 10, 'timeout_keep_alive': 5.0, 'timeout_graceful_shutdown': 2.0}
    """
    # uvicorn hints ints but uses both times as seconds in asyncio calls, fractions included
    return {"limit_concurrency": args.limit_concurrency, "timeout_keep_alive": args.keep_alive_s,
            "timeout_graceful_shutdown": args.graceful_timeout_s}


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
                                    "from the checkpoint, or from -c); a pickle, so it needs "
                                    "--trust-pickle")
    e.add_argument("--param", action="append", default=[], type=parse_kv, metavar="KEY=VALUE",
                   help="router hyperparameter (YAML value), repeatable")
    add_data_args(e, required=False, help="dataset name or path (required with --router)")
    e.add_argument("--split-fractions", dest="split", action=FloatListArg, default=None,
                   metavar="TR,VA,TE",
                   help="train/val/test fractions for --data (default 0.8,0.1,0.1)")
    e.add_argument("--split-column", default=None, help="query column with train/val/test labels")
    add_seed_arg(e, None, "seed of the split and of the router (default 0; a config's own "
                          "seed is kept)")
    e.add_argument("--fallback", action="store_true",
                   help="with --router: wrap a learned router in the safe fallback that "
                        "'evaluate' applies by default: queries go to best-single / "
                        "task-best unless, on held-out training queries, the router leads "
                        "that baseline by at least one SE (data without costs) or loses by "
                        "at most 1.645 SE (data with costs; by its budget sweep's nAUC where "
                        "every observed cell has a cost)")
    e.add_argument("--auto", type=int, default=0, metavar="N",
                   help="with --router: inner Optuna search of N trials on the training "
                        "queries, as 'evaluate --auto N'")
    e.add_argument("--policy", choices=("argmax", "wtp", "budget"), default="argmax",
                   help="default decision policy (calibrate can set it later)")
    e.add_argument("--policy-value", type=non_negative_float, default=None,
                   help="lambda (wtp) or C (budget), a finite number >= 0")
    e.add_argument("--out", required=True, help="artifact directory (written atomically)")
    e.add_argument("--overwrite", action="store_true", help="replace an existing artifact")
    e.add_argument("--sign-key-env", default=None, metavar="VAR",
                   help=_SIGN_HELP + "; serve and load_router verify it when given the key")
    e.set_defaults(func=run_export)

    c = subparsers.add_parser(
        "calibrate", help="set an artifact's default policy to meet a cost or share target",
        description="Find the willingness-to-pay (wtp) or budget whose decisions on --data meet "
                    "the target (mean true cost per query, a cell without one charged its predicted "
                    "cost; or a share of queries sent to one LLM) "
                    "and store it as the artifact's default policy.")
    c.add_argument("artifact", help="artifact directory")
    add_data_args(c)
    c.add_argument("--split", default=None, metavar="NAME",
                   help="use only queries whose 'split' column is NAME, read as --split-column reads it "
                        "(case and surrounding spaces ignored, dev/valid/validation = val; "
                        "default: all queries)")
    t = c.add_mutually_exclusive_group(required=True)
    t.add_argument("--target-cost", type=non_negative_float,
                   help="wanted mean cost per query (a finite number >= 0)")
    t.add_argument("--target-share", type=llm_share, metavar="LLM=SHARE",
                   help="wanted share of one LLM, 0 to 1, e.g. gpt-4=0.3")
    c.add_argument("--policy", choices=("wtp", "budget"), default="wtp")
    c.add_argument("--sign-key-env", default=None, metavar="VAR",
                   help=_SIGN_HELP + "; required for a signed artifact, which is signed again")
    add_seed_arg(c, 0, "seeds Python, numpy and torch (routers are already seeded per query)")
    c.set_defaults(func=run_calibrate)

    s = subparsers.add_parser("serve", help="serve an artifact over HTTP (route, metrics, OpenAI proxy)")
    s.add_argument("artifact", help="artifact directory")
    s.add_argument("--host", default="127.0.0.1", help="bind address (default loopback only)")
    s.add_argument("--port", type=port, default=8000, help="TCP port, 1 to 65535 (default 8000)")
    s.add_argument("--api-key", default=None,
                   help=f"require 'Authorization: Bearer KEY' (default: ${API_KEY_ENV} if set)")
    s.add_argument("--backends", default=None,
                   help="backends.yaml for /v1/chat/completions (it may name LLMs POST /llms will add)")
    s.add_argument("--sign-key-env", default=None, metavar="VAR",
                   help=_SIGN_HELP + "; the artifact must carry a valid signature made with it")
    s.add_argument("--score-range", type=score_range_arg, default=None, metavar="LOW,HIGH",
                   help="lowest and highest training score, for artifacts that record none "
                        "(written before score_range was recorded; an artifact's own range is "
                        "accepted, a different one refused): POST /llms holds probe "
                        "scores to its scale; without it their probe scores must lie in [0, 1]")
    s.add_argument("--max-batch", type=positive_int, default=256,
                   help="most queries per request and batch (>= 1)")
    s.add_argument("--max-body-bytes", type=positive_int, default=1_000_000,
                   help="largest request body in bytes (>= 1)")
    s.add_argument("--max-text-chars", type=positive_int, default=100_000,
                   help="longest query text in characters (>= 1)")
    s.add_argument("--batch-wait-ms", type=non_negative_float, default=2.0,
                   help="under load, how long a batch waits for more requests to share its model "
                        "call (a request finding the batcher idle runs at once)")
    s.add_argument("--log-level", choices=LOG_LEVELS, default="warning",
                   help="uvicorn's log level (default warning)")
    s.add_argument("--log-db", default=None, metavar="URL",
                   help="decision log database: a SQLAlchemy URL (sqlite:///decisions.db, a bare "
                        "path = SQLite in WAL mode; postgresql://user:pw@host/db for several "
                        "service instances); enables POST /feedback")
    s.add_argument("--log-text", choices=("full", "hash", "none"), default="hash",
                   help="how the log keeps query texts (default: their SHA-256 only)")
    s.add_argument("--log-batch", type=log_batch, default=256,
                   help="decisions per database write, 1 to 10000 (the decision log queues at "
                        "most 10000; a kill -9 loses at most the unwritten batch)")
    s.add_argument("--log-flush-ms", type=positive_float, default=200.0,
                   help="longest a decision waits before its batch is written")
    s.add_argument("--log-timeout-s", type=positive_float, default=5.0,
                   help="time limit of each decision-log database call (PostgreSQL: connecting, "
                        "at least 2 s, each statement, a free pooled connection; any log: a "
                        "POST /feedback past it is a 503); shutdown waits twice this for the "
                        "queue (default 5)")
    s.add_argument("--instance", default=None, metavar="NAME",
                   help="this instance's name, logged with each decision and mixed into the "
                        "exploration seed (default HOST:PID; give one to replay an instance's "
                        "draws with the same --seed)")
    s.add_argument("--explore", default="none", metavar="POLICY",
                   help="exploration: none, epsilon:E, softmax:T or thompson[:N] (routers that "
                        "can sample their predictions); each decision logs its exact propensity")
    add_server_limit_args(s)
    add_seed_arg(s, 0, "seeds Python, numpy and torch (routers are already seeded per query)")
    s.set_defaults(func=run_serve)


def log_batch(text) -> int:
    """``--log-batch``: a whole number from 1 to :data:`MAX_LOG_BATCH` (a batch must fit in the
    decision log's queue; checked when the command line is parsed, before the log is opened).

    Example
    -------
    >>> log_batch("256")
    256
    >>> log_batch("20000")
    Traceback (most recent call last):
    ...
    recsys_router.cli.args.OptionError: expected a whole number from 1 to 10000 (the decision log queues at most 10000 rows), got '20000'
    """
    n = positive_int(text)
    if n > MAX_LOG_BATCH:
        raise OptionError(f"expected a whole number from 1 to {MAX_LOG_BATCH} (the decision log "
                          f"queues at most {MAX_LOG_BATCH} rows), got {str(text).strip()[:40]!r}")
    return n


def llm_share(text) -> tuple[str, float]:
    """``--target-share LLM=SHARE``: an LLM name and a share of queries from 0 to 1 (the name
    may itself hold ``=``: the last one splits).

    Example
    -------
    >>> llm_share("gpt-4=0.3")
    ('gpt-4', 0.3)
    """
    llm, sep, frac = str(text).rpartition("=")
    if not sep or not llm.strip():
        raise OptionError(f"expected LLM=SHARE, got {str(text)[:200]!r}")
    try:
        return llm.strip(), fraction(frac)
    except OptionError:
        raise OptionError(f"expected LLM=SHARE with SHARE a number from 0 to 1, got "
                          f"{str(text)[:200]!r}") from None


# ---------------------------------------------------------------------------- export
def _refuse_ground_truth(router, source: str) -> None:
    """An artifact of a router that reads the true scores of the queries it routes (oracle,
    r_o, cascade, or a wrapper around one) could be loaded but never serve a request, which
    has no scores: refused. ``router`` is built but need not be fitted."""
    if bool(getattr(router, "uses_ground_truth", False)):
        raise ValueError(f"{source}: {type(router).__name__} routes from the true scores of the queries it "
                         "is given, which a served request does not have, so its artifact could "
                         "not be served; evaluate it in-process instead (recsys-router evaluate "
                         "--routers NAME)")


def run_export(args) -> int:
    """Handler of ``recsys-router export``."""
    from ..export import build_router, export_router, heldout_metrics  # noqa: PLC0415
    from ..registry import make_router, router_class  # noqa: PLC0415
    if args.policy != "argmax" and args.policy_value is None:
        raise ValueError(f"--policy {args.policy} needs --policy-value (lambda or budget C)")
    # before any data is read or anything fitted: the registry router named by --router or
    # by a config's 'router:' (a tune best_config.yaml)
    name, source, cfg = args.router, f"--router {args.router}", {}
    if args.config and not args.ckpt:
        from ..configs import load_yaml_configs  # noqa: PLC0415
        cfg = load_yaml_configs(args.config)
        if not name:
            name = cfg.get("router")
            source = f"{', '.join(map(str, args.config))}: router {name!r}"
    if isinstance(name, str):
        try:
            router_class(name)
            # unfitted, with the parameters the build will merge (the config's, then
            # --param): a wrapper's base=oracle counts too
            params = {**(cfg.get("params") or {}), **kv_dict(args.param)}
            probe = make_router(name, **params)
        except Exception:  # noqa: BLE001 - unknown, a path, a factory, bad params: build_router says
            probe = None
        if probe is not None:
            _refuse_ground_truth(probe, source)
    key = sign_key_from_env(args.sign_key_env)  # before training: fail fast
    from ..export.artifact import check_export_target  # noqa: PLC0415
    check_export_target(args.out, args.overwrite)       # so is a folder that cannot be written
    print("fitting the router ...", file=sys.stderr)
    built = build_router(router=args.router, configs=args.config, ckpt=args.ckpt,
                         params=kv_dict(args.param), data=args.data, data_dir=args.data_dir,
                         data_options=data_options(args), split=args.split,
                         split_column=args.split_column, seed=args.seed,
                         trust_pickle=args.trust_pickle, fallback=args.fallback, auto=args.auto)
    _refuse_ground_truth(built.router, built.description)  # e.g. an artifact's copy
    metrics: dict = {}
    for name, part in (("val", built.val), ("test", built.test)):
        if part is not None and part.n_queries:
            metrics.update(heldout_metrics(built.router, part, name))
    out = export_router(built.router, args.out, train_data=built.train, metrics=metrics,
                        policy=args.policy, policy_value=args.policy_value,
                        overwrite=args.overwrite, sign_key=key)
    print(f"exported {type(built.router).__name__} ({built.description}) to {out}")
    for k, v in metrics.items():
        print(f"  {k} = {v:.6g}")
    return 0


# ---------------------------------------------------------------------------- calibrate
def run_calibrate(args) -> int:
    """Handler of ``recsys-router calibrate``."""
    from .data import load_data  # noqa: PLC0415
    from ..export import calibrate_artifact, seed_everything  # noqa: PLC0415
    seed_everything(args.seed)
    data = load_data(args)   # generated data drawn with --seed
    share = args.target_share
    res = calibrate_artifact(args.artifact, data, policy=args.policy,
                             target_cost=args.target_cost, target_share=share,
                             split=args.split,
                             sign_key=sign_key_from_env(args.sign_key_env))
    what = "mean cost" if res["kind"] == "mean_cost" else f"share of {share[0]}"
    source = f"{res['cost_source']} costs"
    if res["cost_source"] == "mixed":
        n, total = res["predicted_cells"]
        source = f"true costs where known, predicted for {n} of {total} cells"
    print(f"calibrated {res['policy']} = {res['value']:.6g} on {res['data']['n_queries']} queries: "
          f"{what} achieved {res['achieved']:.6g} vs target {res['target']:.6g} ({source})")
    return 0


# ---------------------------------------------------------------------------- serve
def run_serve(args) -> int:
    """Handler of ``recsys-router serve`` (blocks until interrupted)."""
    import uvicorn

    from ..export import load_router, seed_everything
    from ..export.artifact import TASKS_WARNING
    from ..serving import ServiceConfig, create_app, load_backends
    seed_everything(args.seed)
    with warnings.catch_warnings():  # load_router's note for Python callers: create_app says it for HTTP clients
        warnings.filterwarnings("ignore", message=".*" + re.escape(TASKS_WARNING.partition("{cls}")[2]),
                                category=UserWarning)
        art = load_router(args.artifact, sign_key=sign_key_from_env(args.sign_key_env))
    if args.score_range is not None:
        from ..coldstart.onboard import resolve_score_range
        art.router.score_range_ = resolve_score_range(art.router, None, args.score_range)[0]
    key = args.api_key or os.environ.get(API_KEY_ENV) or None
    backends = load_backends(args.backends) if args.backends else None  # may name LLMs to come
    cfg = ServiceConfig(max_batch=args.max_batch, max_body_bytes=args.max_body_bytes,
                        max_text_chars=args.max_text_chars, api_key=key,
                        batch_wait_ms=args.batch_wait_ms, backends=backends,
                        explore=args.explore, log_db=args.log_db, log_text=args.log_text,
                        log_batch=args.log_batch, log_flush_ms=args.log_flush_ms, seed=args.seed,
                        body_timeout_s=args.body_timeout_s, log_timeout_s=args.log_timeout_s,
                        instance=args.instance)
    app = create_app(art, cfg)
    if args.host not in ("127.0.0.1", "localhost", "::1") and not key:
        print(f"warning: serving on {args.host} without an API key (--api-key or ${API_KEY_ENV})",
              file=sys.stderr)
    print(f"serving {art.manifest.get('router_class')} ({len(art.llm_names)} LLMs) on "
          f"http://{args.host}:{args.port}", file=sys.stderr, flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, **uvicorn_limits(args))
    return 0
