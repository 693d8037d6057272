"""Search spaces read from YAML: typed parameters, log scales and conditional parameters.

A search file maps a dotted config key to a parameter spec (see :mod:`recsys_router.tuning`
for the full schema). Each sampled value becomes one override of the base config: a
``--key=value`` LightningCLI argument, or an assignment into the router config's dict.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recsys_router.errors import DataValidationError
from recsys_router.yaml_limits import load_yaml_limited

# the checks of one parameter's values; MAX_FLOAT_STEPS and MAX_INT_BOUND re-exported here
from .space_checks import (MAX_FLOAT_STEPS, MAX_INT_BOUND, _fail, check_float_bounds,
                           check_float_step, check_int_bounds, check_optuna_accepts,
                           refuse_equal_choices)

__all__ = ["Param", "SearchSpace", "load_search_space", "parse_search_space", "set_dotted",
           "flatten_keys", "MAX_CHOICES", "MAX_PARAMS", "MAX_FILE_BYTES", "MAX_DEPTH",
           "MAX_FLOAT_STEPS", "MAX_INT_BOUND"]

TYPES = ("float", "int", "categorical")
_ALLOWED = {"float": {"type", "low", "high", "log", "step", "when"},
            "int": {"type", "low", "high", "log", "step", "when"},
            "categorical": {"type", "choices", "when"}}
_SCALAR = (type(None), bool, int, float, str)
#: most choices of one categorical parameter (200,000 took minutes and 750 MB for 3 trials)
MAX_CHOICES = 10_000
#: most parameters in one search space
MAX_PARAMS = 1_000
#: largest search-space file read
MAX_FILE_BYTES = 4 * 1024 * 1024
#: deepest nesting of mappings and lists in a search file (key, spec, choices, a choice that
#: is a list of lists...): refused on the parser's events, before any value is built
MAX_DEPTH = 16


@dataclass
class Param:
    """One searched parameter.

    Parameters
    ----------
    key : str
        Dotted config key, e.g. ``model.init_args.lr`` (also Optuna's parameter name).
    type : {"float", "int", "categorical"}
    low, high : float or int, optional
        Inclusive bounds (float/int).
    log : bool
        Sample on a log scale (float/int; needs ``low > 0``).
    step : float or int, optional
        Discretisation step (not with ``log``).
    choices : list, optional
        Categorical values; scalars, or lists/mappings (sampled through their JSON text).
    when : dict, optional
        ``{other_key: allowed values}``: sampled only when every other key was sampled
        with one of its allowed values.
    """

    key: str
    type: str
    low: float | int | None = None
    high: float | int | None = None
    log: bool = False
    step: float | int | None = None
    choices: list | None = None
    when: dict[str, list] = field(default_factory=dict)

    @property
    def encoded(self) -> bool:
        """True when the choices are not all scalars (Optuna sees their JSON text)."""
        return self.type == "categorical" and not all(isinstance(c, _SCALAR) for c in self.choices)

    def suggest(self, trial) -> Any:
        """Sample this parameter on an Optuna trial and return the config value."""
        if self.type == "float":
            return trial.suggest_float(self.key, float(self.low), float(self.high), log=self.log,
                                       step=None if self.step is None else float(self.step))
        if self.type == "int":
            return trial.suggest_int(self.key, int(self.low), int(self.high), log=self.log,
                                     step=1 if self.step is None else int(self.step))
        if self.encoded:
            text = trial.suggest_categorical(self.key, [json.dumps(c) for c in self.choices])
            return json.loads(text)
        return trial.suggest_categorical(self.key, list(self.choices))

    def decode(self, value: Any) -> Any:
        """Config value of an Optuna parameter value (undoes the JSON text of list choices)."""
        return json.loads(value) if self.encoded and isinstance(value, str) else value


class SearchSpace:
    """An ordered set of :class:`Param` whose conditions refer only to earlier ones.

    Parameters
    ----------
    params : list of Param
        In an order where every ``when`` key comes first (``parse_search_space`` sorts them).
    source : str, optional
        File the space came from (for messages).

    Example
    -------
    >>> import optuna
    >>> space = parse_search_space({"a": {"type": "categorical", "choices": ["x", "y"]},
    ...                             "b": {"type": "int", "low": 1, "high": 3, "when": {"a": "y"}}})
    >>> trial = optuna.trial.FixedTrial({"a": "x"})
    >>> space.suggest(trial)
    {'a': 'x'}
    >>> space.to_args({"a": "y", "b": 2})
    ['--a=y', '--b=2']
    """

    def __init__(self, params: list[Param], source: str | None = None):
        self.params = list(params)
        self.source = source

    def __len__(self) -> int:
        return len(self.params)

    @property
    def keys(self) -> list[str]:
        return [p.key for p in self.params]

    def active(self, param: Param, values: dict[str, Any]) -> bool:
        """Whether ``param``'s conditions hold for the already sampled ``values``."""
        return all(k in values and values[k] in allowed for k, allowed in param.when.items())

    def suggest(self, trial) -> dict[str, Any]:
        """Sample every active parameter; returns ``{key: config value}`` in space order."""
        values: dict[str, Any] = {}
        for p in self.params:
            if self.active(p, values):
                values[p.key] = p.suggest(trial)
        return values

    def decode(self, optuna_params: dict[str, Any]) -> dict[str, Any]:
        """Config values of a finished trial's ``params`` (JSON text of list choices undone)."""
        by_key = {p.key: p for p in self.params}
        return {k: by_key[k].decode(v) if k in by_key else v for k, v in optuna_params.items()}

    @staticmethod
    def to_args(values: dict[str, Any]) -> list[str]:
        """LightningCLI override arguments ``--key=value`` (values as JSON/YAML text)."""
        out = []
        for k, v in values.items():
            text = v if isinstance(v, str) else json.dumps(v)
            out.append(f"--{k}={text}")
        return out

    def check_keys(self, known: set[str], what: str = "the base config") -> None:
        """Raise when a key is neither a key of ``known`` nor a prefix of one."""
        for key in self.keys:
            if key in known or any(k.startswith(key + ".") for k in known):
                continue
            import difflib
            close = difflib.get_close_matches(key, sorted(known), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise DataValidationError(f"search space key {key!r} is not a key of {what}{hint}",
                                      source=self.source)


def _number(source, key, name, value, integer):
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok:
        _fail(source, key, f"{name} must be {'an integer' if integer else 'a number'}, got {value!r}")
    return value


def _parse_param(key: str, spec: Any, source: str | None) -> Param:
    if not isinstance(key, str) or not key or any(not part for part in key.split(".")):
        _fail(source, key, "keys must be dotted config paths such as 'model.init_args.lr'")
    if not isinstance(spec, dict):
        _fail(source, key, f"expected a mapping with 'type' ({'/'.join(TYPES)}), got {spec!r}")
    kind = spec.get("type")
    if kind not in TYPES:
        _fail(source, key, f"'type' must be one of {list(TYPES)}, got {kind!r}")
    extra = sorted(set(spec) - _ALLOWED[kind])
    if extra:
        _fail(source, key, f"unknown field(s) {extra} for type {kind}; allowed: {sorted(_ALLOWED[kind])}")
    when = spec.get("when") or {}
    if not isinstance(when, dict):
        _fail(source, key, f"'when' must map other keys to allowed values, got {when!r}")
    if kind == "categorical":
        choices = spec.get("choices")
        if not isinstance(choices, list) or not choices:
            _fail(source, key, f"'choices' must be a non-empty list, got {choices!r}")
        if len(choices) > MAX_CHOICES:
            _fail(source, key, f"'choices' has {len(choices)} values; at most {MAX_CHOICES} are "
                               "allowed (use an int or float range)")
        for i, c in enumerate(choices):  # YAML also makes dates, bytes and sets: not JSON values
            try:
                json.dumps(c, allow_nan=False)
            except (TypeError, ValueError):
                _fail(source, key, f"choices[{i}] must be a number, string, boolean, null, list "
                                   f"or mapping, got {type(c).__name__} {str(c)[:80]!r}")
        texts = [json.dumps(c, sort_keys=True) for c in choices]
        if len(set(texts)) != len(texts):
            _fail(source, key, f"'choices' has duplicates: {choices!r}")
        refuse_equal_choices(source, key, choices)
        return Param(key, kind, choices=choices, when=dict(when))
    integer = kind == "int"
    for name in ("low", "high"):
        if name not in spec:
            _fail(source, key, f"type {kind} needs '{name}'")
    low = _number(source, key, "low", spec["low"], integer)
    high = _number(source, key, "high", spec["high"], integer)
    if integer:
        check_int_bounds(source, key, low, high)
    else:
        check_float_bounds(source, key, low, high)
    if not integer and not (math.isfinite(low) and math.isfinite(high) and math.isfinite(high - low)):
        _fail(source, key, f"low and high must be finite numbers whose difference is finite, got "
                           f"low={low!r}, high={high!r}")
    if not low < high:
        _fail(source, key, f"low must be < high, got low={low!r}, high={high!r}")
    log = spec.get("log", False)
    if not isinstance(log, bool):
        _fail(source, key, f"'log' must be true or false, got {log!r}")
    step = spec.get("step")
    if step is not None:
        _number(source, key, "step", step, integer)
        if not integer:
            check_float_bounds(source, key, step, step, name="step")
        if not integer and not math.isfinite(step):
            _fail(source, key, f"step must be a finite number, got {step!r}")
        if step <= 0:
            _fail(source, key, f"step must be > 0, got {step!r}")
        if log:
            _fail(source, key, "'step' cannot be combined with 'log: true'")
        if not integer:
            check_float_step(source, key, low, high, step)
    if log and low <= 0:
        _fail(source, key, f"log scale needs low > 0, got low={low!r}")
    check_optuna_accepts(source, key, kind, low, high, log, step)
    return Param(key, kind, low=low, high=high, log=log, step=step, when=dict(when))


def _resolve_when(params: dict[str, Param], source) -> None:
    for p in params.values():
        resolved = {}
        for other, allowed in p.when.items():
            if other == p.key:
                _fail(source, p.key, "'when' refers to the key itself")
            if other not in params:
                _fail(source, p.key, f"'when' refers to {other!r}, which is not in the search space")
            ref = params[other]
            if ref.type != "categorical":
                _fail(source, p.key, f"'when' may only refer to categorical keys; {other!r} is {ref.type}")
            if allowed in ref.choices:
                values = [allowed]
            elif isinstance(allowed, list) and allowed and all(a in ref.choices for a in allowed):
                values = list(allowed)
            else:
                _fail(source, p.key, f"'when' value {allowed!r} for {other!r} is not one of its "
                                     f"choices {ref.choices!r} (or a list of them)")
            resolved[other] = values
        p.when = resolved


def _order(params: dict[str, Param], source) -> list[Param]:
    """Keys in file order, except that a key always follows the keys of its ``when``."""
    done: dict[str, Param] = {}
    visiting: set[str] = set()

    def visit(key):
        if key in done:
            return
        if key in visiting:
            _fail(source, key, "its 'when' conditions form a cycle")
        visiting.add(key)
        for other in params[key].when:
            visit(other)
        visiting.discard(key)
        done[key] = params[key]

    for key in params:
        visit(key)
    return list(done.values())


def parse_search_space(spec: Any, source: str | None = None) -> SearchSpace:
    """Validate a search-space mapping (already loaded from YAML).

    Parameters
    ----------
    spec : dict
        ``{dotted_key: {type: ..., ...}}``.
    source : str, optional
        File name for error messages.

    Returns
    -------
    SearchSpace

    Raises
    ------
    DataValidationError
        Naming the file and the offending key, and what was expected.
    """
    if not isinstance(spec, dict) or not spec:
        raise DataValidationError("a search space must be a non-empty mapping of dotted config keys "
                                  f"to parameter specs, got {type(spec).__name__}", source=source)
    if len(spec) > MAX_PARAMS:
        raise DataValidationError(f"a search space has {len(spec)} keys; at most {MAX_PARAMS} are "
                                  "allowed", source=source)
    params = {key: _parse_param(key, value, source) for key, value in spec.items()}
    _resolve_when(params, source)
    return SearchSpace(_order(params, source), source=source)


def load_search_space(path) -> SearchSpace:
    """Read and validate a search-space YAML file (see :func:`parse_search_space`)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"search space file not found: {path}")
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise DataValidationError(f"search space file is {size} bytes; at most {MAX_FILE_BYTES} "
                                  "are read", source=str(path))
    # nesting bounded on libyaml's events before anything is built (PyYAML's own scanner is
    # quadratic in flow nesting, its composer recursive); aliases refused (a bomb when nested)
    spec = load_yaml_limited(path.read_text(), str(path), max_depth=MAX_DEPTH, aliases=False)
    return parse_search_space(spec, source=str(path))


def set_dotted(config: dict, key: str, value: Any) -> None:
    """Set ``config[a][b][c] = value`` for ``key = "a.b.c"`` (creating mappings on the way)."""
    node = config
    parts = key.split(".")
    for part in parts[:-1]:
        nxt = node.get(part)
        if not isinstance(nxt, dict):
            nxt = node[part] = {}
        node = nxt
    node[parts[-1]] = value


def flatten_keys(config: Any, prefix: str = "") -> set[str]:
    """Every dotted key of a nested mapping (leaves and inner nodes)."""
    keys: set[str] = set()
    if isinstance(config, dict):
        for k, v in config.items():
            key = f"{prefix}{k}"
            keys.add(key)
            keys |= flatten_keys(v, key + ".")
    return keys
