"""The ``recsys-router`` command line: one entry point, one module per command group.

Each command module exposes ``add_parser(subparsers)``, which adds its sub-command(s)
and sets ``func`` on the parsed namespace. ``fit``/``validate``/``test``/``predict``
are handed to LightningCLI unchanged.

Errors: any failure of a command prints one line ``recsys-router COMMAND: error: ...`` on
stderr and exits with status 2; the global ``--debug`` flag prints the full traceback instead
(and re-raises). An interrupted command (Ctrl-C) exits with 130.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

__all__ = ["main", "build_parser", "error_line"]

# command modules, in the order they appear in --help
_COMMAND_MODULES = ["data", "evaluate", "coldstart", "feedback", "judge", "serve", "tune"]
_LIGHTNING_COMMANDS = ("fit", "validate", "test", "predict")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="recsys-router",
        description="LLM routing as collaborative filtering: data, routers, evaluation, tuning, serving.",
        epilog=f"Lightning commands ({', '.join(_LIGHTNING_COMMANDS)}) train and run a Lightning "
               "router from a config through LightningCLI (e.g. recsys-router fit -c "
               "configs/models/mf.yaml; recsys-router fit --help lists its options).")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    parser.add_argument("--debug", action="store_true",
                        help="show the full traceback of an error instead of one line")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for mod in _COMMAND_MODULES:
        importlib.import_module(f"{__name__}.{mod}").add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in _LIGHTNING_COMMANDS:
        from .lightning import run_lightning_cli  # noqa: PLC0415 (heavy import, only when used)
        return run_lightning_cli(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        if args.debug:
            raise
        print(f"recsys-router {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - one line for every failure; --debug shows it all
        if args.debug:
            raise
        print(f"recsys-router {args.command}: error: {error_line(exc)}", file=sys.stderr)
        return 2


def error_line(exc: BaseException) -> str:
    """One line describing ``exc``: its message, with the exception type when the type says
    more than the message (an unexpected error), newlines folded, at most 2,000 characters.

    Example
    -------
    >>> error_line(ValueError("bad\\nvalue"))
    'bad | value'
    >>> error_line(ZeroDivisionError("division by zero"))
    'ZeroDivisionError: division by zero (rerun with --debug for the traceback)'
    """
    msg = str(exc).strip()
    if isinstance(exc, KeyError) and exc.args:
        msg = str(exc.args[0])
    if not isinstance(exc, (ValueError, LookupError, OSError)) or not msg:
        msg = (f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__) + \
            " (rerun with --debug for the traceback)"
    msg = " | ".join(part.strip() for part in msg.splitlines() if part.strip())
    return msg if len(msg) <= 2000 else msg[:1997] + "..."


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
