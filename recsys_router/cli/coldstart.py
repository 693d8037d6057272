"""``recsys-router probes`` / ``onboard`` (the ``coldstart`` protocol of ``evaluate`` is the
record :mod:`recsys_router.evaluation.protocols.coldstart`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..atomic import atomic_write
from .args import OptionError, add_data_args, add_seed_arg, score_range_arg
from .serve import _SIGN_HELP, sign_key_from_env

__all__ = ["add_parser", "run_probes", "run_onboard", "llm_name_arg", "strategy_label_arg"]


def _load(args):
    from .data import load_data
    return load_data(args)   # generated data drawn with --seed


def llm_name_arg(text) -> str:
    """``onboard --llm``: a non-blank LLM name of at most 200 characters without control
    characters, checked when the command line is parsed (so the error names ``--llm``).

    Example
    -------
    >>> llm_name_arg(" gpt-x ")
    'gpt-x'
    >>> llm_name_arg("")
    Traceback (most recent call last):
    ...
    recsys_router.cli.args.OptionError: LLM name must be a non-empty string, got ''
    """
    from ..coldstart.probes_input import check_llm_name
    try:
        return check_llm_name(text)
    except ValueError as err:
        raise OptionError(str(err)) from None


def strategy_label_arg(text) -> str:
    """``onboard --strategy``: the probe-strategy label recorded as provenance, held to the
    rule of ``POST /llms``'s ``strategy`` (at most 100 characters) and without control
    characters, checked when the command line is parsed.

    Example
    -------
    >>> strategy_label_arg("informative")
    'informative'
    >>> strategy_label_arg("x" * 101)
    Traceback (most recent call last):
    ...
    recsys_router.cli.args.OptionError: strategy is 101 characters long; at most 100 allowed
    """
    from ..coldstart.probes_input import check_strategy_label
    try:
        return check_strategy_label(text)
    except ValueError as err:
        raise OptionError(str(err)) from None


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
    p.add_argument("--out", required=True,
                   help="CSV of the chosen queries (query_id, text[, task], weight); add a 'score' "
                        "column with the new LLM's answers and pass it to onboard --scores")
    p.add_argument("--sign-key-env", default=None, metavar="VAR",
                   help=_SIGN_HELP + "; the artifact's signature is verified")
    p.set_defaults(func=run_probes)

    o = subparsers.add_parser("onboard", help="add a new LLM to an artifact from probe answers")
    o.add_argument("artifact", help="exported router directory")
    o.add_argument("--llm", required=True, type=llm_name_arg,
                   help="name of the new LLM (at most 200 characters, no control characters)")
    o.add_argument("--scores", required=True,
                   help="CSV: query_id and/or text, score[, cost][, weight] (weights as written "
                        "by probes)")
    add_data_args(o, required=False, help="dataset to look up probe texts by query_id")
    o.add_argument("--price-in", type=float, default=None, help="USD per 1M input tokens")
    o.add_argument("--price-out", type=float, default=None, help="USD per 1M output tokens")
    o.add_argument("--strategy", default=None, type=strategy_label_arg,
                   help="probe strategy (e.g. informative), recorded as provenance: a label of "
                        "at most 100 characters, no control characters")
    o.add_argument("--score-range", type=score_range_arg, default=None, metavar="LOW,HIGH",
                   help="lowest and highest training score, for artifacts that record none "
                        "(written before score_range was recorded; an artifact's own range is "
                        "accepted, a different one refused); without it and --data "
                        "their probe scores must lie in [0, 1]")
    add_seed_arg(o)
    o.add_argument("--out", required=True, help="new artifact directory (written atomically)")
    o.add_argument("--overwrite", action="store_true")
    o.add_argument("--sign-key-env", default=None, metavar="VAR",
                   help=_SIGN_HELP + "; verifies a signed artifact and signs the new one (a "
                        "signed artifact needs it)")
    o.set_defaults(func=run_onboard)


def run_probes(args) -> int:
    """Handler of ``recsys-router probes``."""
    from ..coldstart.selection import select_probes
    from ..export.artifact import load_router
    from ..export import seed_everything
    seed_everything(args.seed)
    art = load_router(args.artifact, sign_key=sign_key_from_env(args.sign_key_env))
    data = _load(args)
    idx, weights = select_probes(art.router, data, args.k, args.strategy, seed=args.seed,
                                 return_weights=True)
    cols = [c for c in ("query_id", "text", "task") if c in data.queries.columns]
    table = data.queries.iloc[idx][cols].assign(weight=np.round(weights, 6))
    out = Path(args.out)
    with atomic_write(out) as tmp:
        table.to_csv(tmp, index=False)
    print(f"wrote {len(table)} probe queries ({args.strategy}) to {out}")
    return 0


def run_onboard(args) -> int:
    """Handler of ``recsys-router onboard``."""
    from ..coldstart.onboard import (answers_sha256, onboard_artifact, read_answers,
                                     resolve_score_range)
    from ..coldstart.pool import UNKNOWN_RANGE_HINT
    from ..errors import DataValidationError
    from ..export import seed_everything
    from ..export.artifact import load_router
    seed_everything(args.seed)
    key = sign_key_from_env(args.sign_key_env)  # before any work: fail fast
    data = _load(args) if args.data else None
    src = load_router(args.artifact, sign_key=key)
    rng = resolve_score_range(src.router, data, args.score_range)
    scores = Path(args.scores)
    # the digest recorded as provenance is of the bytes read: hashed before and after
    digest = answers_sha256(scores)
    probes, weights = read_answers(scores, args.llm, data, score_range=rng[0],
                                   scale_note=UNKNOWN_RANGE_HINT if rng[1] == "default" else "")
    if answers_sha256(scores) != digest:
        raise DataValidationError("the file changed while it was read; run onboard again",
                                  source=str(scores))
    out = onboard_artifact(args.artifact, args.llm, probes, args.out, price_in=args.price_in,
                           price_out=args.price_out, strategy=args.strategy, weights=weights,
                           overwrite=args.overwrite, sign_key=key, loaded=src,
                           probes_file=scores, probes_sha256=digest, score_range=rng)
    how = "weighted " if weights is not None else ""
    print(f"onboarded {args.llm!r} from {probes.n_queries} {how}probes; wrote {out}")
    return 0
