"""``recsys-router ope | log export`` and ``evaluate --protocol bandit``: learning from
production feedback.

Examples
--------
recsys-router log export --db sqlite:///decisions.db --out log.parquet
recsys-router ope --log log.parquet --router artifacts/knn --out ope-knn
recsys-router ope --log sqlite:///decisions.db --router mf --loss dr --out ope-mf
recsys-router evaluate --data synthetic --routers mf --protocol bandit --logging-policy uniform --out bandit
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .args import add_seed_arg, kv_dict, parse_kv

__all__ = ["add_parser", "add_bandit_args", "run_ope", "run_log_export", "run_bandit_protocol",
           "load_log"]


def add_bandit_args(p) -> None:
    """Options of ``evaluate --protocol bandit``."""
    g = p.add_argument_group("bandit protocol")
    g.add_argument("--logging-policy", default="uniform",
                   help="uniform | epsilon-greedy:E (around the best single LLM) | router:NAME "
                        "(fitted on a 10%% warm-up slice, epsilon 0.1 around it); seeded")
    g.add_argument("--losses", default="naive,ips,snips,dr", metavar="L1,L2",
                   help="logged-feedback losses to train with (default all four)")
    g.add_argument("--n-boot", type=int, default=200, help="bootstrap resamples of the OPE intervals")
    g.add_argument("--online-rounds", type=int, default=0, metavar="T",
                   help="also run the online loop for T rounds (0 = off)")
    g.add_argument("--retrain-every", type=int, default=200, metavar="B",
                   help="online loop: retrain on the log every B queries")


def add_parser(subparsers) -> None:
    """Add the ``ope`` and ``log`` sub-commands."""
    o = subparsers.add_parser(
        "ope", help="off-policy evaluation of a router on a decision log (IPS, SNIPS, DM, DR)",
        description="Estimate a target router's mean score and cost on logged traffic with IPS, "
                    "SNIPS, DM (a CF reward model fitted on the log) and DR, each with a bootstrap "
                    "95%% interval and the effective sample size; writes report.md, ope.csv, ope.png.")
    o.add_argument("--log", required=True, metavar="URL_OR_FILE",
                   help="decision-log database URL (or .db SQLite file), an exported log "
                        "(.parquet/.csv from 'log export'), or a long table with a propensity column")
    o.add_argument("--router", required=True, metavar="NAME_OR_ARTIFACT",
                   help="an exported artifact directory, or a registry router trained on the log "
                        "itself with --loss")
    o.add_argument("--loss", default="dr", choices=("naive", "ips", "snips", "dr"),
                   help="loss of a registry --router trained on the log (default dr)")
    o.add_argument("--param", action="append", default=[], type=parse_kv, metavar="KEY=VALUE",
                   help="hyperparameter of a registry --router (YAML value), repeatable")
    o.add_argument("--policy", default="argmax", metavar="argmax|wtp:L|budget:C",
                   help="the target's decision policy (default argmax)")
    o.add_argument("--dm-router", default="mf", help="CF reward model of DM/DR (default mf)")
    o.add_argument("--n-boot", type=int, default=200, help="bootstrap resamples (default 200)")
    add_seed_arg(o)
    o.add_argument("--out", required=True, help="output folder (replaced atomically)")
    o.set_defaults(func=run_ope)

    lg = subparsers.add_parser("log", help="decision-log tools")
    sub = lg.add_subparsers(dest="log_command", metavar="ACTION")
    sub.required = True
    e = sub.add_parser("export", help="write the decision log (joined with feedback) to a file")
    e.add_argument("--db", required=True, metavar="URL", help="decision-log database URL or SQLite path")
    e.add_argument("--out", required=True, help="output .parquet or .csv (written atomically)")
    e.add_argument("--feedback-only", action="store_true", help="only decisions with feedback")
    add_seed_arg(e, help="unused (export draws nothing at random); every command takes --seed")
    e.set_defaults(func=run_log_export)


def _is_db(spec: str) -> bool:
    return "://" in spec or Path(spec).suffix in (".db", ".sqlite", ".sqlite3")


def load_log(spec: str):
    """Logged-feedback RoutingData from a database URL, an exported log file or a long table."""
    import pandas as pd

    from ..feedback.logged import log_to_data
    from ..feedback.store import DecisionLog
    if _is_db(spec):
        if "://" not in spec and not Path(spec).exists():
            raise FileNotFoundError(f"--log {spec}: no such SQLite file")
        return log_to_data(DecisionLog(spec).read(), source=spec)
    path = Path(spec)
    if not path.exists():
        raise FileNotFoundError(f"--log {spec}: no such file")
    cols = list(pd.read_parquet(path).columns) if path.suffix == ".parquet" else \
        list(pd.read_csv(path, nrows=0).columns) if path.suffix in (".csv", ".gz") else []
    if "decision_id" in cols and "chosen" in cols:
        frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
        return log_to_data(frame, source=str(path))
    from ..datasets.generic import load_generic
    return load_generic(path)


def _policy(text: str) -> dict:
    kind, _, val = str(text).partition(":")
    if kind == "argmax" and not val:
        return {}
    if kind in ("wtp", "budget"):
        try:
            v = float(val)
        except ValueError:
            v = -1.0
        if v >= 0:
            return {kind: v}
    raise ValueError(f"--policy must be argmax, wtp:LAMBDA or budget:C (>= 0), got {text!r}")


def run_ope(args) -> int:
    """Handler of ``recsys-router ope``."""
    from ..evaluation.io import atomic_dir
    from ..export import seed_everything
    from ..feedback.report import evaluate_on_log, ope_markdown, plot_ope
    seed_everything(args.seed)
    policy = _policy(args.policy)
    log = load_log(args.log)
    if Path(args.router).is_dir():
        from ..export import load_router
        target, what = load_router(args.router), f"artifact {args.router}"
    else:
        from ..registry import make_router
        params = kv_dict(args.param)
        target = make_router("logged", router=args.router, params=params, loss=args.loss,
                             seed=args.seed).fit(log)
        what = f"{args.router} trained on the log with loss {args.loss} (in-sample)"
    table = evaluate_on_log(target, log, n_boot=args.n_boot, seed=args.seed,
                            dm_router=args.dm_router, **policy)
    title = f"Off-policy evaluation of {what}, policy {args.policy}, on {log.name}"
    with atomic_dir(args.out) as tmp:
        table.to_csv(tmp / "ope.csv", index=False)
        (tmp / "report.md").write_text(ope_markdown(table, title), encoding="utf-8")
        plot_ope(table, tmp / "ope.png", "Off-policy estimates (95% bootstrap intervals)")
    print(ope_markdown(table, title))
    print(f"wrote {args.out}/report.md, ope.csv, ope.png")
    return 0


def run_log_export(args) -> int:
    """Handler of ``recsys-router log export``."""
    from ..atomic import atomic_write
    from ..feedback.store import DecisionLog
    out = Path(args.out)
    if out.suffix not in (".parquet", ".csv"):
        raise ValueError(f"--out {out}: expected a .parquet or .csv file name")
    log = DecisionLog(args.db)
    frame = log.read(with_feedback_only=args.feedback_only)
    log.dispose()
    with atomic_write(out) as tmp:
        if out.suffix == ".parquet":
            frame.to_parquet(tmp, index=False)
        else:
            frame.to_csv(tmp, index=False)
    n_fb = int(frame["feedback_at"].notna().sum())
    print(f"wrote {len(frame)} decisions ({n_fb} with feedback) to {out}")
    return 0


def run_bandit_protocol(args, data) -> int:
    """``evaluate --protocol bandit``: metrics.csv, summary.csv, report.md (and regret.csv +
    regret.png with ``--online-rounds``)."""
    from tqdm import tqdm

    from ..evaluation.io import atomic_dir
    from ..feedback.bandit import bandit_evaluate, online_bandit
    from ..export import seed_everything
    from ..feedback.report import plot_regret
    seed_everything(args.seed)
    if args.split_column:
        parts = data.split(column=args.split_column)
        if "test" not in parts or "train" not in parts:
            raise ValueError(f"--split-column {args.split_column}: needs 'train' and 'test' labels")
    else:
        parts = data.split((0.8, 0.2), seed=args.seed)
    train, test = parts["train"], parts["test"]
    losses = [s.strip() for s in args.losses.split(",") if s.strip()]
    routers = {}
    for name in args.routers:
        params = {"encoder": args.encoder} if args.encoder else {}
        routers[name] = (name, params)
    bar = tqdm(total=len(routers) * len(losses), desc="bandit", disable=args.no_progress)

    def step(msg):
        bar.set_postfix_str(msg)
        bar.update(1)
    rows = bandit_evaluate(train, test, routers, logging_policy=args.logging_policy, losses=losses,
                           seed=args.seed, n_boot=args.n_boot, progress=step)
    bar.close()
    rows.insert(0, "protocol", "bandit")
    rows.insert(0, "dataset", data.name)
    summary = rows.pivot_table(index=["router", "loss"], columns="metric", values="value").reset_index()
    with atomic_dir(args.out) as tmp:
        rows.to_csv(tmp / "metrics.csv", index=False)
        summary.to_csv(tmp / "summary.csv", index=False)
        md = [f"# bandit protocol on {data.name}", "",
              f"logging policy {args.logging_policy}; {train.n_queries} logged training queries "
              f"(one revealed LLM each), {test.n_queries} test queries scored on the full matrix.", ""]
        cols = [c for c in ("mu_o", "nauc", "ope_error_ips", "ope_error_snips", "ope_error_dm",
                            "ope_error_dr", "ope_ci_covered", "ope_ess") if c in summary]
        md.append("| router | loss | " + " | ".join(cols) + " |")
        md.append("|---|---|" + "---|" * len(cols))
        for r in summary.itertuples(index=False):
            d = r._asdict()
            md.append(f"| {d['router']} | {d['loss']} | " +
                      " | ".join("" if d[c] != d[c] else f"{d[c]:.4f}" for c in cols) + " |")
        if args.online_rounds > 0:
            name = args.routers[0]
            runs = online_bandit(train, routers[name], loss=losses[-1], rounds=args.online_rounds,
                                 retrain_every=args.retrain_every, seed=args.seed)
            runs.to_csv(tmp / "regret.csv", index=False)
            if not args.no_plots:
                plot_regret(runs, tmp / "regret.png",
                            f"online {name} ({losses[-1]}), retrained every {args.retrain_every}")
            last = runs.iloc[-1]
            md += ["", f"Online loop ({name}, loss {losses[-1]}, {len(runs)} rounds, retrained every "
                   f"{args.retrain_every}): cumulative regret {last['regret_policy']:.1f} vs "
                   f"{last['regret_best_fixed']:.1f} for the best fixed LLM."]
        (tmp / "report.md").write_text("\n".join(md) + "\n", encoding="utf-8")
        (tmp / "config.json").write_text(json.dumps({
            "protocol": "bandit", "routers": args.routers, "logging_policy": args.logging_policy,
            "losses": losses, "seed": args.seed, "n_train": train.n_queries,
            "n_test": test.n_queries}, indent=2))
    print("\n".join(md[4:]))
    print(f"wrote {args.out}/report.md (+ metrics.csv, summary.csv)", file=sys.stderr)
    return 0
