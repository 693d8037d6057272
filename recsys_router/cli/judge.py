"""``recsys-router judge``: RouteJudge tournaments, reports, replay and the voting page.

Examples::

    recsys-router judge simulate --data routerbench_zs --routers random best-single oracle knn \\
        --n 500 --seed 0 --db judge.db --threshold 0.5 --noise 0.1
    recsys-router judge report --db judge.db --out judge_report
    recsys-router judge replay --db judge.db --data routerbench_zs --router svm
    recsys-router judge serve --data routerbench_zs --routers best-single knn svm --db judge.db
    recsys-router judge export --db judge.db --out judge.jsonl
    recsys-router judge import --db other.db --jsonl judge.jsonl
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from .args import (UNUSED_SEED_HELP, ListArg, add_data_args, add_seed_arg, count,
                   finite_float, non_negative_float, port, positive_int)
from .data import load_data
from .serve import add_server_limit_args, uvicorn_limits

__all__ = ["add_parser", "load_data"]

log = logging.getLogger(__name__)

VOTER_KEY_ENV = "RECSYS_ROUTER_JUDGE_KEY"


def _data_args(p: argparse.ArgumentParser, required: bool = True) -> None:
    add_data_args(p, required=required)
    p.add_argument("--router-params", default=None, metavar="JSON",
                   help='constructor parameters per router, e.g. \'{"knn": {"k": 10}}\' (or a JSON file)')
    p.add_argument("--test-size", type=float, default=0.3,
                   help="test fraction when the data has no train/test split (default 0.3)")


def add_parser(subparsers) -> None:
    """Add the ``judge`` command group."""
    p = subparsers.add_parser("judge", help="RouteJudge: preference duels between routers",
                              description="RouteJudge: simulate tournaments, report, replay, serve the voting page.")
    sub = p.add_subparsers(dest="judge_command", metavar="SUBCOMMAND")
    sub.required = True

    s = sub.add_parser("simulate", help="offline tournament judged from recorded scores")
    _data_args(s)
    s.add_argument("--routers", action=ListArg, required=True, metavar="R1,R2",
                   help="registry names or artifact folders (>= 2), comma or space separated")
    s.add_argument("--n", type=positive_int, default=200, help="number of judged duels (default 200)")
    add_seed_arg(s, 0, "seed of the split, the draw, tie-breaks, A/B order and label noise, and of every router "
                       "that takes a seed unless --router-params sets it (default 0)")
    s.add_argument("--db", required=True, help="SQLite database to append the records to")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--budget", type=non_negative_float, default=None,
                   help="per-query cost budget C for every router (>= 0)")
    g.add_argument("--wtp", type=non_negative_float, default=None,
                   help="willingness to pay (lambda) for every router (>= 0)")
    s.add_argument("--noise", type=non_negative_float, default=0.0,
                   help="probability of a uniformly random label (0 to 1)")
    s.add_argument("--threshold", type=finite_float, default=None,
                   help="both scores below it -> 'both bad'")
    s.add_argument("--report", default=None, metavar="DIR", help="also write the report of this run here (its records are "
                        "written with it; when either fails, neither is left)")
    s.set_defaults(func=_cmd_simulate)

    r = sub.add_parser("report", help="Markdown/CSV tables and PNG plots from a database")
    r.add_argument("--db", required=True)
    r.add_argument("--out", required=True, metavar="DIR")
    r.add_argument("--n-boot", type=count, default=200,
                   help="bootstrap replays for Elo intervals (0: the record-order Elo, no intervals)")
    add_seed_arg(r)
    r.add_argument("--task", default=None, help="only records of this task")
    r.set_defaults(func=_cmd_report)

    rp = sub.add_parser("replay", help="replay a router on stored records (eq. C.21)")
    _data_args(rp, required=False)
    rp.add_argument("--db", required=True)
    rp.add_argument("--router", required=True, help="registry name (fitted on --data's train split, "
                                                    "the stored records' judged queries left out) "
                                                    "or an exported artifact folder")
    rp.add_argument("--name", default=None, help="display name (default: --router)")
    add_seed_arg(rp, None, "seed of the replayed router (when it takes one) and of the train/test split when the "
                           "data has none (default: the seed the stored records were made with, "
                           "metadata['router_seed'], when they all carry the same one; else 0 for the split "
                           "and the router's own default)")
    rp.add_argument("--out", default=None, metavar="CSV",
                    help="write the leaderboard here (atomically: a failed write keeps the old file)")
    rp.set_defaults(func=_cmd_replay)

    v = sub.add_parser("serve", help="the local voting page (FastAPI + uvicorn)")
    _data_args(v)
    v.add_argument("--routers", action=ListArg, required=True, metavar="R1,R2",
                   help="registry names or artifact folders (>= 2), comma or space separated")
    v.add_argument("--db", required=True)
    v.add_argument("--host", default="127.0.0.1")
    v.add_argument("--port", type=port, default=8765, help="TCP port, 1 to 65535 (default 8765)")
    add_seed_arg(v, 0, "seed of the split, prompt draws, tie-breaks and A/B order, and of every router that "
                       "takes a seed unless --router-params sets it (default 0)")
    v.add_argument("--split", default="test", help="which split's prompts are judged (default test)")
    v.add_argument("--backends", default=None, metavar="YAML",
                   help="live mode: forward prompts to OpenAI-compatible backends instead of recorded answers")
    v.add_argument("--voter-key-env", default=None, metavar="VAR",
                   help=f"require the API key in environment variable VAR on /api/* (default: ${VOTER_KEY_ENV} "
                        "when set; none otherwise); voters open the page as /?key=KEY")
    v.add_argument("--rate", type=float, default=10.0,
                   help="per-client requests/s on /api/* (token bucket; 0 = no limit; default 10)")
    v.add_argument("--burst", type=int, default=30, help="requests a client may send at once (default 30)")
    v.add_argument("--token-ttl", type=float, default=1800.0,
                   help="seconds before an unvoted duel expires (default 1800)")
    v.add_argument("--max-pending", type=int, default=50,
                   help="most unvoted duels per client at a time (default 50)")
    add_server_limit_args(v)
    v.set_defaults(func=_cmd_serve)

    e = sub.add_parser("export", help="write every record as JSONL")
    e.add_argument("--db", required=True)
    e.add_argument("--out", required=True, metavar="JSONL")
    add_seed_arg(e, None, UNUSED_SEED_HELP)
    e.set_defaults(func=_cmd_export)

    i = sub.add_parser("import", help="add records from JSONL (validated first)")
    i.add_argument("--db", required=True)
    i.add_argument("--jsonl", required=True)
    add_seed_arg(i, None, UNUSED_SEED_HELP)
    i.set_defaults(func=_cmd_import)


def _fmt(df) -> str:
    return df.to_string(float_format=lambda x: f"{x:.4g}")


def _cmd_simulate(args) -> int:
    from pathlib import Path  # noqa: PLC0415

    from ..judge.report import stage_report  # noqa: PLC0415
    from ..judge.routers import parse_router_params  # noqa: PLC0415
    from ..judge.simulate import simulate_tournament  # noqa: PLC0415
    from ..judge.store import JudgeStore  # noqa: PLC0415
    if args.noise > 1:
        raise ValueError(f"--noise must be a probability from 0 to 1, got {args.noise}")
    if args.report and Path(args.report).exists() and not Path(args.report).is_dir():
        # checked before the run (stage_report would refuse it only after it)
        raise FileExistsError(f"--report {args.report}: exists and is not a folder; expected a folder "
                              "for the report")
    params = parse_router_params(args.router_params, args.routers)
    data = load_data(args)
    with JudgeStore(args.db) as store:
        res = simulate_tournament(data, list(args.routers), n=args.n, seed=args.seed,
                                  budget=args.budget, wtp=args.wtp, noise=args.noise,
                                  threshold=args.threshold, test_size=args.test_size,
                                  router_params=params, store=store, write=not args.report, progress=True)
        if args.report:  # all or nothing: the report is built first, then records and report together
            title = f"RouteJudge simulation on {data.name}"
            with stage_report(res.records, args.report, seed=args.seed, title=title) as staged:
                store.add_many(res.records, source="judge simulate", before_commit=staged.publish)
        total = store.count()
    comp = res.comparison(seed=args.seed)
    print(f"{len(res.records)} duels written to {args.db} ({total} records in total)")
    for note in res.notes:
        print(f"note: {note}")
    print(_fmt(comp.sort_values("elo", ascending=False)))
    print(f"Spearman(PrefScore, offline score) = {res.rank_correlation('pref_score'):.3f}; "
          f"Spearman(Elo, offline score) = {res.rank_correlation('elo'):.3f}")
    if args.report:
        print(f"report written to {args.report}/report.md")
    return 0


def _cmd_report(args) -> int:
    from pathlib import Path  # noqa: PLC0415

    from ..judge.report import write_report  # noqa: PLC0415
    from ..judge.store import JudgeStore  # noqa: PLC0415
    if not Path(args.db).exists():
        raise FileNotFoundError(f"{args.db}: no such database")
    with JudgeStore(args.db, read_only=True) as store:
        recs = store.records(task=args.task)
    paths = write_report(recs, args.out, n_boot=args.n_boot, seed=args.seed)
    print(f"{len(recs)} records; wrote {len(paths)} files to {args.out} (see {paths['report.md']})")
    return 0


def _cmd_replay(args) -> int:
    from pathlib import Path  # noqa: PLC0415

    from ..judge.replay import recorded_seed, replay, replay_summary  # noqa: PLC0415
    from ..judge.routers import parse_router_params, replay_train  # noqa: PLC0415
    from ..judge.store import JudgeStore  # noqa: PLC0415
    if not Path(args.db).exists():
        raise FileNotFoundError(f"{args.db}: no such database")
    with JudgeStore(args.db, read_only=True) as store:
        recs = store.records()
    seed = args.seed if args.seed is not None else recorded_seed(recs)
    if args.seed is None:
        print(f"replaying with the seed the stored records were made with ({seed})" if seed is not None else
              "the stored records carry no common router seed: the replayed router keeps its own default "
              "seed and the split uses 0 (give --seed to choose)", file=sys.stderr)
    train = truth = None
    n_judged = 0
    if args.data:
        truth = load_data(args)
        train, n_judged = replay_train(truth, recs, test_size=args.test_size, seed=0 if seed is None else seed)
    name = args.name or Path(args.router).name
    params = parse_router_params(args.router_params, [args.router]).get(args.router)
    if train is not None and not Path(args.router).is_dir():
        print(f"fitting {args.router!r} on {train.n_queries} train queries of {truth.name} "
              f"({n_judged} judged queries of the stored records left out of training) ...",
              file=sys.stderr)
    out = replay(args.router, recs, name=name, train=train, truth=truth, params=params, seed=seed)
    lb = replay_summary(out, name)
    print(f"replayed {name!r} on {len(out)} stored records")
    print(_fmt(lb))
    if args.out:  # atomically: a failed write leaves an existing file as it was
        from ..atomic import atomic_write  # noqa: PLC0415
        from ..judge.report import csv_safe  # noqa: PLC0415
        with atomic_write(args.out) as tmp:
            csv_safe(lb).to_csv(tmp, index=False)  # the --name: no spreadsheet formula
    return 0


def _voter_key(args) -> str | None:
    var = args.voter_key_env or VOTER_KEY_ENV
    key = os.environ.get(var)
    if args.voter_key_env and not key:
        raise ValueError(f"--voter-key-env {var}: the environment variable is not set or empty")
    from ..serving.keys import check_api_key  # noqa: PLC0415 - checked before the routers' fit
    return check_api_key(key or None, f"${var}", in_url=True)


def _cmd_serve(args) -> int:
    import uvicorn  # noqa: PLC0415

    from ..judge.routers import fit_routers, judge_pool, parse_router_params  # noqa: PLC0415
    from ..judge.store import JudgeStore  # noqa: PLC0415
    from ..judge.web import JudgeSession, create_app, load_backends  # noqa: PLC0415
    if args.rate < 0 or args.burst < 1 or not args.token_ttl > 0 or args.max_pending < 1:
        raise ValueError("--rate must be >= 0, --burst and --max-pending >= 1, --token-ttl > 0")
    key = _voter_key(args)
    live = args.backends is not None
    data = load_data(args, with_responses=not live)
    responses = getattr(data, "responses", None)
    train, pool = judge_pool(data, args.split, test_size=args.test_size, seed=args.seed)
    routers = fit_routers(list(args.routers), train, params=parse_router_params(args.router_params, args.routers),
                          progress=True, seed=args.seed)
    backends = load_backends(args.backends, data.llm_names) if live else None
    session = JudgeSession(pool, routers, JudgeStore(args.db), responses=responses, backends=backends,
                           seed=args.seed, token_ttl_s=args.token_ttl, max_pending=args.max_pending,
                           router_seed=args.seed)
    print(f"RouteJudge voting page on http://{args.host}:{args.port}/{'?key=KEY' if key else ''} "
          f"({pool.n_queries} prompts, routers {list(routers)}, database {args.db})", file=sys.stderr)
    app = create_app(session, api_key=key, rate=args.rate or None, burst=args.burst,
                     body_timeout_s=args.body_timeout_s)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning", **uvicorn_limits(args))
    return 0


def _cmd_export(args) -> int:
    from pathlib import Path  # noqa: PLC0415

    from ..judge.store import JudgeStore  # noqa: PLC0415
    if not Path(args.db).exists():
        raise FileNotFoundError(f"{args.db}: no such database")
    with JudgeStore(args.db, read_only=True) as store:
        n = store.export_jsonl(args.out)
    print(f"exported {n} records to {args.out}")
    return 0


def _cmd_import(args) -> int:
    from ..judge.jsonl import read_jsonl  # noqa: PLC0415
    from ..judge.store import JudgeStore  # noqa: PLC0415
    recs = read_jsonl(args.jsonl)  # the whole file is checked before the database is opened (or created)
    with JudgeStore(args.db) as store:
        n = store.add_many(recs, skip_existing=True, source=str(args.jsonl), import_limits=True)
    print(f"imported {n} new records into {args.db}")
    return 0
