"""``recsys-router ope | log export``: learning from production feedback (the ``bandit``
protocol of ``evaluate`` is the record :mod:`recsys_router.evaluation.protocols.bandit`).

Examples
--------
recsys-router log export --db sqlite:///decisions.db --out log.parquet
recsys-router ope --log log.parquet --router artifacts/knn --out ope-knn
recsys-router ope --log sqlite:///decisions.db --router mf --loss dr --out ope-mf
recsys-router evaluate --data synthetic --routers mf --protocol bandit --logging-policy uniform --out bandit
"""

from __future__ import annotations

from .args import UNUSED_SEED_HELP, OptionError, add_seed_arg, count, kv_dict, parse_kv

__all__ = ["add_parser", "run_ope", "run_log_export", "target_policy"]


def target_policy(text: str) -> str:
    """``--policy``: ``argmax``, ``wtp:LAMBDA`` (finite, >= 0) or ``budget:C`` (>= 0, ``inf``
    allowed), checked when the command line is parsed, before any log is read or router
    trained (:func:`recsys_router.feedback.workflow.parse_target_policy`); returned as given.

    Example
    -------
    >>> target_policy("wtp:2")
    'wtp:2'
    >>> target_policy("wtp:1e400")
    Traceback (most recent call last):
    ...
    recsys_router.cli.args.OptionError: policy must be argmax, wtp:LAMBDA (a finite number >= 0) or budget:C (a number >= 0, inf for no budget), got 'wtp:1e400'
    """
    from ..feedback.workflow import parse_target_policy  # noqa: PLC0415
    try:
        parse_target_policy(text)
    except ValueError as exc:
        raise OptionError(str(exc)) from None
    return text


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
    o.add_argument("--loss", default=None, choices=("naive", "ips", "snips", "dr"),
                   help="loss of a registry --router trained on the log (default dr; refused "
                        "with an artifact)")
    o.add_argument("--param", action="append", default=[], type=parse_kv, metavar="KEY=VALUE",
                   help="hyperparameter of a registry --router (YAML value), repeatable")
    o.add_argument("--policy", default="argmax", type=target_policy, metavar="argmax|wtp:L|budget:C",
                   help="the target's decision policy (default argmax; L a finite number >= 0, "
                        "C a number >= 0 or inf)")
    o.add_argument("--dm-router", default="ridge",
                   help="reward model of DM/DR: ridge (default; per-LLM ridge on the queries' "
                        "hashing embeddings and task, cross-fitted, refitted on every bootstrap "
                        "resample) or a CF router name trained naive on the log (held fixed)")
    o.add_argument("--n-boot", type=count, default=200,
                   help="bootstrap resamples (default 200; 0 = estimates without intervals)")
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
    add_seed_arg(e, None, UNUSED_SEED_HELP)
    e.set_defaults(func=run_log_export)


def run_ope(args) -> int:
    """Handler of ``recsys-router ope``."""
    from ..export import seed_everything  # noqa: PLC0415
    from ..feedback.workflow import run_ope as ope  # noqa: PLC0415
    seed_everything(args.seed)
    print(ope(args.log, args.router, args.out, loss=args.loss, params=kv_dict(args.param),
              policy=args.policy, dm_router=args.dm_router, n_boot=args.n_boot, seed=args.seed))
    print(f"wrote {args.out}/report.md, ope.csv, ope.png")
    return 0


def run_log_export(args) -> int:
    """Handler of ``recsys-router log export``."""
    from ..feedback.workflow import export_log  # noqa: PLC0415
    n, n_fb = export_log(args.db, args.out, feedback_only=args.feedback_only)
    print(f"wrote {n} decisions ({n_fb} with feedback) to {args.out}")
    return 0
