"""One error line for a LightningCLI argument: jsonargparse's parse errors and the
constructor refusals it wraps, as a :class:`~recsys_router.errors.ConfigArgumentError` naming
the argument (``--data.init_args.val_fraction``) and its innermost message; and the import
paths a ``class_path`` may name. Used by :mod:`recsys_router.lightning_cli`.
"""

from __future__ import annotations

import re

__all__ = ["ALLOWED_IMPORT_PATHS", "argument_error", "error_chain", "import_path_allowed",
           "class_path_refusal"]

#: the only import paths a ``class_path`` value may name: the project's models, data modules and
#: losses, Lightning's loggers / callbacks / strategies and torch's optimizers and schedulers
ALLOWED_IMPORT_PATHS = ("recsys_router", "pytorch_lightning", "lightning.pytorch",
                        "lightning_fabric", "lightning.fabric", "torch.optim")


_PARSER_KEY = re.compile(r'^Parser key "([^"]+)":')
_CLASS_PATH = re.compile(r"class_path='([A-Za-z_][\w.]*)'")
_TYPE_NAME = re.compile(r"<class '(?:builtins\.)?([\w.]+)'>")


_UNKNOWN_OPTION = re.compile(r"^Option '(\w+)' is not accepted")
_EXPECTED = re.compile(r"^Expected a <class '(?:builtins\.)?([\w.]+)'>\. Got value: (.*)$", re.S)
_DENIED = re.compile(r"^Importing '([\w.]+)' is not allowed")
_GIVEN_DICT = re.compile(r"^\s*Given value: (\{.*\})\s*$", re.M)
#: a nested ``--section.init_args.key.class_path=value`` flag, as jsonargparse reports it
_GIVEN_NESTED = re.compile(r"Given value: NestedArg\(key='([\w.]*?)\.?class_path', "
                           r"val='([^']*)'\)")


def import_path_allowed(path: str) -> bool:
    """Whether ``path`` lies under one of :data:`ALLOWED_IMPORT_PATHS` (compared as text,
    nothing imported): the policy the restricted parser applies, for callers that must decide
    before handing a path to anything that imports.

    Example
    -------
    >>> import_path_allowed("recsys_router.models.mf_module.MFModule"), import_path_allowed("this.Model")
    (True, False)
    """
    return any(path == root or path.startswith(root + ".") for root in ALLOWED_IMPORT_PATHS)


def _refused_nested(chain: list[BaseException]) -> tuple[str, str] | None:
    """(the key under the section, the class path) of a ``...key.class_path=value`` flag naming
    a class outside :data:`ALLOWED_IMPORT_PATHS`: jsonargparse refuses it without importing it
    but reports an internal error (``'NoneType' object has no attribute 'get'``) instead."""
    for err in chain:
        match = _GIVEN_NESTED.search(str(err))
        if match and not import_path_allowed(match.group(2)):
            return match.group(1), match.group(2)
    return None


def class_path_refusal(class_path: str) -> str:
    """The message of a refused ``class_path`` (the one ``fit`` prints)."""
    return (f"class_path {class_path!r} is refused: a class_path may only name a class "
            f"under {', '.join(ALLOWED_IMPORT_PATHS)} (nothing was imported)")


def _readable(message: str) -> str:
    """jsonargparse's innermost message in the project's words."""
    if match := _EXPECTED.match(message):
        return f"expected {match.group(1)}, got {match.group(2)!r}"
    if match := _DENIED.match(message):
        return class_path_refusal(match.group(1))
    return _TYPE_NAME.sub(r"\1", message)


def error_chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from (cause, else context), outermost first."""
    chain: list[BaseException] = []
    while exc is not None and not any(exc is seen for seen in chain):
        chain.append(exc)
        exc = exc.__cause__ or exc.__context__
    return chain


def _find_class(cfg, class_path: str, prefix: str = "") -> tuple[str, dict] | None:
    """The key (``data``, ``model.init_args.loss``) and ``init_args`` of the first
    ``{class_path, init_args}`` section of ``cfg`` (plain dicts and lists) naming
    ``class_path``."""
    items = cfg.items() if isinstance(cfg, dict) else enumerate(cfg) if isinstance(cfg, list) else ()
    for key, val in items:
        if isinstance(val, dict) and val.get("class_path") == class_path:
            return f"{prefix}{key}", val.get("init_args") or {}
        if isinstance(val, (dict, list)):
            found = _find_class(val, class_path, f"{prefix}{key}.")
            if found:
                return found
    return None


def _given_key(chain: list[BaseException], class_path: str) -> str | None:
    """The key under a section (``init_args.loss``) of the ``{class_path: ...}`` mapping naming
    ``class_path`` in the value jsonargparse says it was given (a dict, read as a literal)."""
    import ast  # noqa: PLC0415
    for err in chain:
        match = _GIVEN_DICT.search(str(err))
        if match:
            try:
                found = _find_class(ast.literal_eval(match.group(1)), class_path)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            if found:
                return found[0]
    return None


def _named_in(message: str, init_args: dict, prefix: str) -> str | None:
    """The key (``prefix`` + name) of the init arg that ``message`` names first; else the
    first one it names inside a nested section that the constructor builds itself (a loss
    given as ``{class_path, init_args}`` or as plain arguments, which jsonargparse keeps
    when a value such as ``nan`` is no float), named as the command line sets it:
    ``model.init_args.loss.init_args.logit_adjust``."""
    named = sorted((m.start(), name) for name in init_args
                   for m in [re.search(rf"\b{re.escape(str(name))}\b", message)] if m)
    if named:
        return prefix + str(named[0][1])
    for name, value in init_args.items():
        if isinstance(value, dict):
            inner_args = value.get("init_args") if "class_path" in value else value
            if isinstance(inner_args, dict):
                inner = _named_in(message, inner_args, f"{prefix}{name}.init_args.")
                if inner:
                    return inner
    return None


def argument_error(exc: BaseException, config=None) -> ValueError:
    """One :class:`~recsys_router.errors.ConfigArgumentError` for a jsonargparse parse error or
    a constructor's refusal wrapped by jsonargparse: the innermost message (the constructor's
    own text, or jsonargparse's type error as "expected int, got 'abc'") and the argument it is
    about.

    Parameters
    ----------
    exc : BaseException
        The parse error (``ArgumentError``, its chain names the keys: ``Parser key "data"``
        then, inside a ``class_path``, ``Parser key "batch_size"``) or the instantiation
        ``ValueError`` (its text names the class_path; the argument is the init arg of that
        class that the innermost message names).
    config : Namespace, optional
        The parsed config (LightningCLI's ``self.config``), to find an instantiated class's
        section.

    Returns
    -------
    ConfigArgumentError
    """
    from recsys_router.errors import ConfigArgumentError  # noqa: PLC0415
    chain = error_chain(exc)
    message = _readable(str(chain[-1]).strip())
    keys, previous, in_class = [], None, False
    for err in chain:
        text = str(err)
        match = _PARSER_KEY.match(text)
        if match and text != previous:
            keys.append(("init_args." if in_class else "") + match.group(1))
            in_class = False
        previous = text if match else previous
        in_class = in_class or text.startswith("Problem with given class_path")
    denied = _DENIED.match(str(chain[-1]).strip())
    if keys and denied:  # a class_path nested in a section's YAML: find it in the given value
        inner = _given_key(chain, denied.group(1))
        keys[-1] += f".{inner}" if inner else ""
    nested = _refused_nested(chain) if keys and not denied else None
    if nested:  # --model.init_args.loss.class_path=subprocess.Popen
        key, class_path = nested
        message = class_path_refusal(class_path)
        keys[-1] += f".init_args.{key}" if key else ""
    unknown = _UNKNOWN_OPTION.match(message)
    if keys and unknown:  # name the unknown key itself
        keys.append(("init_args." if in_class else "") + unknown.group(1))
        message = "no such argument"
    if keys:
        return ConfigArgumentError(message, "--" + ".".join(keys))
    if config is not None:  # a constructor refused a value: find its class's section
        paths = [m.group(1) for err in chain[:-1] for m in [_CLASS_PATH.search(str(err))] if m]
        sub = config.get("subcommand") if hasattr(config, "get") else None
        cfg = config.get(sub) if sub else config
        found = _find_class(cfg.as_dict() if hasattr(cfg, "as_dict") else cfg, paths[-1]) \
            if paths else None
        if found:
            key, init_args = found
            named = _named_in(message, init_args, f"{key}.init_args.")
            arg = f"--{named}" if named else f"--{key} ({paths[-1]})"
            return ConfigArgumentError(message, arg)
    return ConfigArgumentError(message)
