"""The ``recsys-router`` command line: one entry point, one module per command group.

Each command module exposes ``add_parser(subparsers)``, which adds its sub-command(s)
and sets ``func`` on the parsed namespace. ``fit``/``validate``/``test``/``predict``
are handed to LightningCLI unchanged.

Errors: any failure of a command prints one line ``recsys-router COMMAND: error: ...`` on
stderr and exits with status 2; the global ``--debug`` flag prints the full traceback instead
(and re-raises). The Lightning commands do the same for the project's data errors
(:class:`~recsys_router.errors.DataValidationError`, a missing file) and refused arguments
(:class:`~recsys_router.errors.ConfigArgumentError`: a wrong type, a value a constructor
refused, an unknown key, a foreign ``class_path``) and leave other errors (bugs) as tracebacks. An interrupted command (Ctrl-C) exits with 130.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import signal
import sys

__all__ = ["main", "build_parser", "error_line"]

# command modules, in the order they appear in --help
_COMMAND_MODULES = ["data", "evaluate", "coldstart", "feedback", "judge", "serve", "tune"]
_LIGHTNING_COMMANDS = ("fit", "validate", "test", "predict")


def _data_errors() -> tuple[type[BaseException], ...]:
    """The errors a Lightning command reports in one line: bad or missing input data and
    refused arguments."""
    from recsys_router.errors import ConfigArgumentError, DataValidationError  # noqa: PLC0415
    return (DataValidationError, ConfigArgumentError, FileNotFoundError)


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


_GLOBAL_FLAGS = {"-v": "verbose", "--verbose": "verbose", "--debug": "debug"}


def _split_global_flags(argv: list[str]) -> tuple[dict, list[str]]:
    """The global flags in front of the command (``-v``, ``--debug``) and the rest.

    Example
    -------
    >>> _split_global_flags(["--debug", "-v", "fit", "-c", "x.yaml"])
    ({'verbose': True, 'debug': True}, ['fit', '-c', 'x.yaml'])
    """
    flags = {"verbose": False, "debug": False}
    i = 0
    while i < len(argv) and argv[i] in _GLOBAL_FLAGS:
        flags[_GLOBAL_FLAGS[argv[i]]] = True
        i += 1
    return flags, argv[i:]


def main(argv: list[str] | None = None) -> int:
    """Run ``recsys-router`` with ``argv`` (default: the process's arguments); returns the
    exit status (0 done, 2 an error, 130 interrupted)."""
    own = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    flags, rest = _split_global_flags(argv)
    if rest and rest[0] in _LIGHTNING_COMMANDS:
        from .lightning import run_lightning_cli  # noqa: PLC0415 (heavy import, only when used)
        _set_logging(flags["verbose"])
        if own and rest != argv:  # LightningCLI reads the process's arguments itself (and a
            sys.argv[1:] = rest   # DDP launcher re-runs them): without the global flags
        return _run(rest[0], flags["debug"], lambda: run_lightning_cli(rest),
                    catch_errors=_data_errors())
    parser = build_parser()
    args = parser.parse_args(argv)
    _set_logging(args.verbose)
    return _run(args.command, args.debug, lambda: args.func(args))


def _set_logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")


def _interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` is an interrupt: a ``KeyboardInterrupt``, or a ``SystemExit`` raised
    while one was handled (Lightning's trainer catches Ctrl-C, shuts down and calls
    ``sys.exit(1)``)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__context__
    return False


def _run(command: str, debug: bool, call, *,
         catch_errors: bool | tuple[type[BaseException], ...] = True) -> int:
    """Run one command: its exit status, one error line (status 2) or ``interrupted`` (130).

    Parameters
    ----------
    command : str
        Its name, as the messages say it.
    debug : bool
        Re-raise instead of printing one line.
    call : callable
        Runs the command, returns its status.
    catch_errors : bool or tuple of exception types
        Turn an exception into one error line: any (True), none (False: only interrupts are
        handled) or only these types (the Lightning commands: data errors; LightningCLI
        reports the rest itself).
    """
    sigint = signal.getsignal(signal.SIGINT) if _main_thread() else None
    try:
        return int(call() or 0)
    except (KeyboardInterrupt, SystemExit) as exc:
        if isinstance(exc, SystemExit) and not _interrupted(exc):
            raise
        if sigint is not None and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
            signal.signal(signal.SIGINT, sigint)  # Lightning ignores Ctrl-C while it shuts down
        if debug:
            raise
        print(f"recsys-router {command}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - one line for every failure; --debug shows it all
        caught = catch_errors if isinstance(catch_errors, bool) else isinstance(exc, catch_errors)
        if debug or not caught:
            raise
        print(f"recsys-router {command}: error: {error_line(exc)}", file=sys.stderr)
        return 2


def _main_thread() -> bool:
    import threading  # noqa: PLC0415
    return threading.current_thread() is threading.main_thread()


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
