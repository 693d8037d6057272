"""The ``recsys-router`` command line: one entry point, one module per command group.

Each command module exposes ``add_parser(subparsers)``, which adds its sub-command(s)
and sets ``func`` on the parsed namespace. ``fit``/``validate``/``test``/``predict``
are handed to LightningCLI unchanged.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

__all__ = ["main", "build_parser"]

# command modules, in the order they appear in --help
_COMMAND_MODULES = ["data", "evaluate", "coldstart", "judge", "serve", "tune"]
_LIGHTNING_COMMANDS = ("fit", "validate", "test", "predict")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="recsys-router",
        description="LLM routing as collaborative filtering: data, routers, evaluation, tuning, serving.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
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
    except (ValueError, FileNotFoundError, KeyError) as exc:
        print(f"recsys-router {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
