"""The command line's argument kit: one spelling and one parser per concept, shared by every
command.

* Lists (``--routers``, ``--groups``, ``--ood-tasks``, ...) take comma and/or space separated
  items: ``--routers knn,svm``, ``--routers knn svm`` and ``--routers knn, svm`` are the same.
* ``KEY=VALUE`` options (``--data-option``/``-o``, ``--param``) are parsed by
  :func:`parse_kv` alone: the key with ``-`` read as ``_``, the value a YAML scalar or flow
  collection (``5`` int, ``0.5``/``1e3`` float, ``true`` bool, ``null``, ``[1, 2]``, else a
  string).
* A dataset is named by ``--data NAME_OR_PATH`` (the ``data`` commands: a positional
  ``NAME_OR_PATH``), found under ``--data-dir``, with loader options ``--data-option`` /
  ``-o KEY=VALUE`` and ``--trust-pickle`` for the formats that unpickle.

Example
-------
>>> p = argparse.ArgumentParser()
>>> _ = p.add_argument("--routers", action=ListArg)
>>> add_data_args(p)
>>> a = p.parse_args(["--routers", "knn,svm", "mf", "--data", "x", "-o", "m=5", "-o", "flag=true"])
>>> a.routers, data_options(a)
(['knn', 'svm', 'mf'], {'m': 5, 'flag': True})
"""

from __future__ import annotations

import argparse
import math
import re

from recsys_router.hyperparams import MAX_SEED as _MAX_SEED

__all__ = ["OptionError", "parse_kv", "kv_dict", "split_list", "ListArg", "FloatListArg", "add_data_args",
           "data_options", "add_seed_arg", "auto_folds", "MAX_OPTION_CHARS", "MAX_SEED", "seed_value",
           "count", "positive_int", "finite_float", "non_negative_float", "positive_float",
           "fraction", "port", "encoder_spec", "repeated", "whole_number"]

class OptionError(argparse.ArgumentTypeError, ValueError):
    """A malformed command-line item (argparse shows its message; library callers get a
    ValueError)."""


#: longest KEY=VALUE item accepted (options are short; this bounds YAML parsing)
MAX_OPTION_CHARS = 10_000
_NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def parse_kv(text: str) -> tuple[str, object]:
    """``"KEY=VALUE"`` -> ``(key, typed value)``; the one KEY=VALUE parser of the CLI.

    Example
    -------
    >>> [parse_kv(t) for t in ("m=5", "x=0.5", "n=1e3", "flag=true", "g=all-strong", "l=[1, 2]")]
    [('m', 5), ('x', 0.5), ('n', 1000.0), ('flag', True), ('g', 'all-strong'), ('l', [1, 2])]
    >>> parse_kv("n-queries=10")
    ('n_queries', 10)
    """
    import yaml  # noqa: PLC0415
    if not isinstance(text, str) or "=" not in text:
        raise OptionError(f"expected KEY=VALUE, got {text!r}")
    if len(text) > MAX_OPTION_CHARS:
        raise OptionError(f"KEY=VALUE longer than {MAX_OPTION_CHARS} characters")
    key, raw = (s.strip() for s in text.split("=", 1))
    key = key.replace("-", "_")
    if not key.isidentifier():
        raise OptionError(f"option name {key!r} in {text!r} is not a valid name")
    if _NUMBER.match(raw):
        return key, int(raw) if re.fullmatch(r"[+-]?\d+", raw) else float(raw)
    try:
        value = yaml.safe_load(raw) if raw else ""
    except yaml.YAMLError as exc:
        raise OptionError(f"{text!r}: cannot parse the value ({exc})") from None
    if not isinstance(value, (str, int, float, bool, list, dict, type(None))):
        value = raw  # dates and other YAML types stay the text the user wrote
    return key, value


def kv_dict(pairs) -> dict:
    """Items (``"KEY=VALUE"`` strings or parsed pairs) -> dict; later keys win."""
    out = {}
    for item in pairs or ():
        k, v = parse_kv(item) if isinstance(item, str) else item
        out[k] = v
    return out


def split_list(values) -> list[str]:
    """Comma and/or space separated items (from one string or several) -> a list.

    Example
    -------
    >>> split_list(["knn,svm", "mf", " ,oracle"])
    ['knn', 'svm', 'mf', 'oracle']
    """
    if isinstance(values, str):
        values = [values]
    return [x for v in values for x in re.split(r"[,\s]+", str(v)) if x]


class ListArg(argparse.Action):
    """``nargs="+"`` option whose items may also be comma separated (see :func:`split_list`)."""

    def __init__(self, option_strings, dest, nargs="+", **kw):
        super().__init__(option_strings, dest, nargs=nargs, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        items = split_list(values)
        if not items:
            parser.error(f"{option_string} needs at least one item")
        setattr(namespace, self.dest, items)


class FloatListArg(ListArg):
    """A :class:`ListArg` of numbers."""

    def __call__(self, parser, namespace, values, option_string=None):
        items = split_list(values)
        try:
            setattr(namespace, self.dest, [float(x) for x in items])
        except ValueError:
            parser.error(f"{option_string} expects numbers, got {' '.join(items)!r}")


def add_data_args(p: argparse.ArgumentParser, *, required: bool = True,
                  positional: bool = False, help: str = "dataset name or file/folder") -> None:
    """The dataset arguments: ``--data`` (or a positional ``dataset``), ``--data-dir`` and
    repeatable ``--data-option``/``-o KEY=VALUE``."""
    if positional:
        p.add_argument("dataset", metavar="NAME_OR_PATH", help=help)
    else:
        p.add_argument("--data", required=required, metavar="NAME_OR_PATH", help=help)
    p.add_argument("--data-dir", default=None, metavar="DIR",
                   help="folder holding the named dataset's folder (default: $RECSYS_ROUTER_DATA, "
                        "./data, ../shared/data)")
    p.add_argument("-o", "--data-option", dest="data_option", action="append", default=[],
                   type=parse_kv, metavar="KEY=VALUE",
                   help="loader option, repeatable (e.g. -o n_queries=500, -o benchmark=arc)")
    p.add_argument("--trust-pickle", action="store_true",
                   help="allow loaders that unpickle (routerbench .pkl, routereval): unpickling "
                        "runs code the file chooses, so only for files from a source you trust")


def data_options(args) -> dict:
    """The loader options of parsed arguments (``--data-option``, ``--trust-pickle``)."""
    out = kv_dict(getattr(args, "data_option", None))
    if getattr(args, "trust_pickle", False):
        out["trust_pickle"] = True
    return out


#: largest --seed: numpy's legacy seeding (``seed_everything``) takes 0 .. 2**32 - 1; the
#: same bound as the routers' own check (:func:`recsys_router.hyperparams.check_seed`)
MAX_SEED = _MAX_SEED


def whole_number(text, what: str, low: int, high: int | None = None) -> int:
    """``text`` as a whole number from ``low`` (to ``high``), written as at most 20 digits with
    an optional sign; anything else is an :class:`OptionError` naming ``what`` and the range.

    Parameters
    ----------
    text : str
        The item as given on the command line (surrounding spaces ignored).
    what : str
        How the message names the expected value, e.g. ``"a whole number"``.
    low, high : int
        The accepted range (``high=None``: no upper bound).

    Returns
    -------
    int

    Example
    -------
    >>> whole_number(" 12", "a whole number", 1)
    12
    >>> whole_number("1e3", "a whole number", 1)
    Traceback (most recent call last):
    ...
    recsys_router.cli.args.OptionError: expected a whole number >= 1, got '1e3'
    """
    s = str(text).strip()
    if re.fullmatch(r"[+-]?\d{1,20}", s):
        v = int(s)
        if v >= low and (high is None or v <= high):
            return v
    rng = f">= {low}" if high is None else f"from {low} to {high}"
    raise OptionError(f"expected {what} {rng}, got {s[:40]!r}")


def seed_value(text) -> int:
    """``--seed``: a whole number from 0 to :data:`MAX_SEED`, checked when the command line is
    parsed (a negative seed would fail later, deep in numpy, after files were created).

    Example
    -------
    >>> seed_value("7")
    7
    >>> seed_value("-1")
    Traceback (most recent call last):
    ...
    recsys_router.cli.args.OptionError: expected a whole number from 0 to 4294967295, got '-1'
    """
    return whole_number(text, "a whole number", 0, MAX_SEED)


def count(text) -> int:
    """A whole number >= 0 (``--n-boot``, ``--online-rounds``, ``--budget``-like counts).

    Example
    -------
    >>> count("0"), count("12")
    (0, 12)
    """
    return whole_number(text, "a whole number", 0)


def positive_int(text) -> int:
    """A whole number >= 1 (``--n-seeds``, ``--retrain-every``, ``--n-trials``).

    Example
    -------
    >>> positive_int("3")
    3
    """
    return whole_number(text, "a whole number", 1)


def finite_float(text) -> float:
    """A finite number (``nan`` and ``inf`` refused).

    Example
    -------
    >>> finite_float("0.5")
    0.5
    """
    try:
        v = float(str(text).strip())
    except ValueError:
        v = float("nan")
    if not math.isfinite(v):
        raise OptionError(f"expected a finite number, got {str(text)[:40]!r}")
    return v


#: largest magnitude ``--score-range`` takes (the probe scale widens the range by its width
#: each side, so larger bounds would overflow to an infinite scale)
SCORE_RANGE_LIMIT = 1e12


def score_range_arg(text) -> tuple[float, float]:
    """``LOW,HIGH``: two finite numbers, LOW < HIGH, each within +-1e12 (``--score-range``).

    Example
    -------
    >>> score_range_arg("1,10")
    (1.0, 10.0)
    """
    parts = str(text).split(",")
    if len(parts) != 2:
        raise OptionError(f"expected LOW,HIGH (two numbers), got {str(text)[:40]!r}")
    low, high = finite_float(parts[0]), finite_float(parts[1])
    if not low < high:
        raise OptionError(f"expected LOW < HIGH, got {str(text)[:40]!r}")
    if max(abs(low), abs(high)) > SCORE_RANGE_LIMIT:
        raise OptionError(f"expected LOW and HIGH within +-{SCORE_RANGE_LIMIT:g}, "
                          f"got {str(text)[:40]!r}")
    return low, high


def _bounded_float(text, strict: bool) -> float:
    v = finite_float(text)
    if v < 0 or (strict and v == 0):
        raise OptionError(f"expected a finite number {'>' if strict else '>='} 0, got {str(text)[:40]!r}")
    return v


def non_negative_float(text) -> float:
    """A finite number >= 0.

    Example
    -------
    >>> non_negative_float("2")
    2.0
    """
    return _bounded_float(text, strict=False)


def positive_float(text) -> float:
    """A finite number > 0 (``--timeout``).

    Example
    -------
    >>> positive_float("1.5")
    1.5
    """
    return _bounded_float(text, strict=True)


#: ``--seed`` help of the commands that draw nothing at random (every command takes one)
UNUSED_SEED_HELP = "unused (this command draws nothing at random); every command takes --seed"


def add_seed_arg(p: argparse.ArgumentParser, default: int | None = 0, help: str | None = None):
    """``--seed`` (every command takes one): a whole number from 0 to :data:`MAX_SEED`."""
    p.add_argument("--seed", type=seed_value, default=default,
                   help=help or f"random seed (default {default})")


def auto_folds(text: str) -> int | str:
    """``--auto-folds``: ``auto`` or a whole number of inner folds, 1 to
    :data:`~recsys_router.inner_validation.MAX_INNER_FOLDS`.

    Example
    -------
    >>> auto_folds("auto"), auto_folds("5")
    ('auto', 5)
    """
    from ..inner_validation import MAX_INNER_FOLDS
    text = str(text).strip()
    if text == "auto":
        return "auto"
    if text.isdigit() and len(text) <= 3 and 1 <= int(text) <= MAX_INNER_FOLDS:
        return int(text)
    raise OptionError(f"expected 'auto' or a whole number of inner folds from 1 to "
                      f"{MAX_INNER_FOLDS}, got {text[:40]!r}")


def fraction(text) -> float:
    """A finite number from 0 to 1 (``--p`` of ``r_o``, a share of queries).

    Example
    -------
    >>> fraction("0.25")
    0.25
    >>> fraction("2")
    Traceback (most recent call last):
    ...
    recsys_router.cli.args.OptionError: expected a number from 0 to 1, got '2'
    """
    try:
        v = finite_float(text)
    except OptionError:
        v = None
    if v is None or not 0 <= v <= 1:
        raise OptionError(f"expected a number from 0 to 1, got {str(text)[:40]!r}")
    return v


#: largest TCP port
MAX_PORT = 65535


def port(text) -> int:
    """``--port``: a whole number from 1 to 65535; a larger number would be taken modulo
    65536 by the socket layer (70000 listens on 4464), and 0 (a port the system picks) would
    leave the printed address wrong.

    Example
    -------
    >>> port("8000")
    8000
    >>> port("70000")
    Traceback (most recent call last):
    ...
    recsys_router.cli.args.OptionError: expected a port number from 1 to 65535, got '70000'
    """
    return whole_number(text, "a port number", 1, MAX_PORT)


#: a Hugging Face hub model id, ``owner/name`` (what sentence-transformers downloads)
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}")


def encoder_spec(text) -> str:
    """``--encoder``: a registered encoder name (``hashing``, ``minilm:torch``,
    ``precomputed:<path>``, see :data:`~recsys_router.encoders.ENCODERS`), an existing local
    folder of a sentence-transformers model, or a hub model id ``owner/name``. Checked without
    any network access: a bare unknown name (a typo) would otherwise be looked up on the
    Hugging Face hub, with retries, once per router.

    Example
    -------
    >>> encoder_spec("minilm:torch"), encoder_spec("sentence-transformers/all-mpnet-base-v2")
    ('minilm:torch', 'sentence-transformers/all-mpnet-base-v2')
    >>> encoder_spec("bogus")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    recsys_router.cli.args.OptionError: expected a registered encoder (...), an existing local model folder or a hub model id 'owner/name', got 'bogus'
    """
    from pathlib import Path  # noqa: PLC0415

    from ..encoders import BUILTIN_ENCODERS, ENCODERS, check_encoder_argument  # noqa: PLC0415
    key = str(text).strip()
    scheme, sep, argument = key.partition(":")
    if sep and scheme in ENCODERS and key not in ENCODERS:
        try:  # minilm:bogus, hashing:x (a registered scheme alone passed, then failed per router)
            check_encoder_argument(scheme, argument)
        except ValueError as err:
            raise OptionError(str(err)) from err
    try:
        local = Path(key).expanduser().exists()
    except (OSError, RuntimeError):  # a name too long for a path, no home directory...
        local = False
    if key and (key in ENCODERS or (sep and scheme in ENCODERS) or local
                or _HUB_ID.fullmatch(key)):
        return key
    builtin = {b.partition(":")[0] for b in BUILTIN_ENCODERS}
    names = list(BUILTIN_ENCODERS) + [n for n in ENCODERS.names() if n not in builtin]
    raise OptionError(f"expected a registered encoder ({', '.join(names)}), an existing local "
                      f"model folder or a hub model id 'owner/name', got {key[:200]!r}")


def repeated(items) -> list:
    """Items given more than once, in order of first repetition.

    Example
    -------
    >>> repeated(["knn", "svm", "knn"])
    ['knn']
    """
    seen, out = set(), []
    for x in items:
        if x in seen and x not in out:
            out.append(x)
        seen.add(x)
    return out
