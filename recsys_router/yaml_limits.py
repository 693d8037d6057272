"""YAML text from an untrusted file read under a nesting-depth limit (and, on request,
without aliases), checked on libyaml's event stream before anything is built.

PyYAML's pure-Python scanner takes time quadratic in the nesting of flow collections (a few
KB of ``[[[[...`` cost seconds to minutes) and its composer recurses once per level (a bare
``RecursionError`` past about 1,000). :func:`load_yaml_limited` walks the events of libyaml's
parser (linear, no recursion; PyYAML's own parser when libyaml is missing) and stops at the
first level past ``max_depth``, naming the file and the keys it was under.

Example
-------
>>> load_yaml_limited("a: {b: [1, 2]}", "f.yaml")
{'a': {'b': [1, 2]}}
>>> load_yaml_limited("a: {b: [[[1]]]}", "f.yaml", max_depth=3)
Traceback (most recent call last):
...
recsys_router.errors.DataValidationError: f.yaml: YAML nests more than 3 levels deep (under key a.b[0]); expected at most 3 levels of mappings and lists
"""

from __future__ import annotations

from typing import Any

import yaml

from .errors import DataValidationError

__all__ = ["MAX_YAML_DEPTH", "MAX_YAML_NODES", "load_yaml_limited"]

#: the deepest nesting of mappings and lists a YAML file of this project may hold (its
#: configs and search spaces nest fewer than 10 levels)
MAX_YAML_DEPTH = 32

#: the most values (mappings, lists and scalars, each alias counted as the value it repeats)
#: a loaded YAML file may hold: aliases nest anchors inside anchors, so a few hundred bytes
#: can stand for billions of values or a nesting thousands of levels deep once expanded
MAX_YAML_NODES = 200_000

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser when installed


def _where(stack: list) -> str:
    """``a.b[0]``: the keys and list positions of the open collections in ``stack``."""
    out = ""
    for frame in stack:
        if frame["kind"] == "map" and frame["key"] is not None:
            out += ("." if out else "") + frame["key"][:40]
        elif frame["kind"] == "seq" and frame["index"] >= 0:
            out += f"[{frame['index']}]"
        if len(out) > 120:
            return out[:120] + "..."
    return out


def _advance(stack: list, scalar: str | None = None) -> None:
    """A node (``scalar`` text for a scalar) starts inside the innermost open collection."""
    if not stack:
        return
    top = stack[-1]
    if top["kind"] == "seq":
        top["index"] += 1
    elif top["expect_key"]:
        top["key"] = scalar if scalar is not None else "?"
        top["expect_key"] = False
    else:
        top["expect_key"] = True


def _check_events(text: str, source: str, max_depth: int, aliases: bool) -> None:
    stack: list[dict] = []
    for event in yaml.parse(text, Loader=_LOADER):
        if isinstance(event, yaml.AliasEvent):
            if not aliases:
                # an alias repeats its anchor's value: nested ones grow exponentially
                raise DataValidationError("YAML aliases (*name) are not allowed here: write each "
                                          "value out", source=source)
            _advance(stack)
        elif isinstance(event, yaml.ScalarEvent):
            _advance(stack, event.value)
        elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            _advance(stack)
            kind = "map" if isinstance(event, yaml.MappingStartEvent) else "seq"
            stack.append({"kind": kind, "key": None, "expect_key": True, "index": -1})
            if len(stack) > max_depth:
                where = _where(stack[:-1])
                raise DataValidationError(
                    f"YAML nests more than {max_depth} levels deep"
                    f"{f' (under key {where})' if where else ''}; expected at most {max_depth} "
                    "levels of mappings and lists", source=source)
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            stack.pop()


def load_yaml_limited(text: str, source: str, *, max_depth: int = MAX_YAML_DEPTH,
                      aliases: bool = True) -> Any:
    """``yaml.safe_load(text)`` once the text is known to nest at most ``max_depth`` levels
    of mappings and lists (and to hold no alias, with ``aliases=False``).

    Parameters
    ----------
    text : str
        The YAML document.
    source : str
        The file name, for error messages.
    max_depth : int
    aliases : bool
        Whether ``*name`` aliases are allowed.

    Raises
    ------
    DataValidationError
        Naming ``source``: too deep (with the keys it was under), an alias where none is
        allowed, or not valid YAML.
    """
    try:
        _check_events(text, source, max_depth, aliases)
        value = yaml.safe_load(text)
    except (yaml.YAMLError, ValueError, RecursionError) as err:
        # ValueError: an int of over 4,300 digits
        if isinstance(err, DataValidationError):
            raise
        raise DataValidationError(f"not valid YAML: {' '.join(str(err).split())}",
                                  source=source) from err
    _check_expanded(value, source, max_depth)
    return value


def _check_expanded(value, source: str, max_depth: int) -> None:
    """Refuse ``value`` when, with every alias expanded, it nests deeper than ``max_depth`` or
    holds more than :data:`MAX_YAML_NODES` values; an iterative walk that stops at the first
    value past either limit (so at most that many steps, whatever the aliases stand for)."""
    stack, seen = [(value, 0)], 0
    while stack:
        v, depth = stack.pop()
        seen += 1
        if seen > MAX_YAML_NODES:
            raise DataValidationError(
                f"YAML stands for more than {MAX_YAML_NODES:,} values once its aliases (*name) "
                "are expanded; write the values out, or use fewer nested aliases", source=source)
        if isinstance(v, (dict, list)):
            if depth >= max_depth:
                raise DataValidationError(
                    f"YAML nests more than {max_depth} levels deep once its aliases (*name) are "
                    f"expanded; expected at most {max_depth} levels of mappings and lists",
                    source=source)
            items = v.values() if isinstance(v, dict) else v
            stack.extend((x, depth + 1) for x in items)
