"""YAML configs: the one loader and merger used by export and tuning, and data modules built
from a ``{class_path, init_args}`` section (the LightningCLI itself is in
:mod:`recsys_router.lightning_cli`).

Config files are untrusted input: they are read with ``yaml.safe_load`` (no tags that build
objects), limited in size and in nesting depth
(:data:`~recsys_router.yaml_limits.MAX_YAML_DEPTH`, checked on the parser's events before
anything is built), must be mappings, and a ``class_path`` may only name a class of
:mod:`recsys_router.datamodules` (data) or :mod:`recsys_router.models` (models; checked by
LightningCLI's own base-class rule).

Example
-------
>>> merge_mappings({"a": {"x": 1, "y": 2}}, {"a": {"y": 3}, "b": 4})
{'a': {'x': 1, 'y': 3}, 'b': 4}
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Mapping

from .errors import DataValidationError
from .yaml_limits import load_yaml_limited

__all__ = ["merge_mappings", "load_yaml_configs", "datamodule_from_config", "MAX_CONFIG_BYTES",
           "DATAMODULE_PREFIX"]

#: largest config file read (a config is a few hundred bytes; this stops a huge or endless file)
MAX_CONFIG_BYTES = 1_000_000
#: the only package a data ``class_path`` may name
DATAMODULE_PREFIX = "recsys_router.datamodules."


def merge_mappings(base: Mapping, extra: Mapping) -> dict:
    """Deep merge: nested mappings merge key by key, any other value of ``extra`` wins."""
    out = dict(base)
    for k, v in extra.items():
        out[k] = merge_mappings(out[k], v) if isinstance(v, Mapping) and \
            isinstance(out.get(k), Mapping) else v
    return out


def load_yaml_configs(paths) -> dict:
    """Read YAML config files and deep-merge them in order (later files win), like repeated
    ``-c``.

    Raises
    ------
    FileNotFoundError
        A file does not exist.
    ValueError
        A file is too large, is not valid YAML, or is not a mapping (the message names it).
    """
    merged: dict = {}
    for path in paths:
        p = Path(path)
        if not p.is_file():
            raise FileNotFoundError(f"config file not found: {p}")
        if p.stat().st_size > MAX_CONFIG_BYTES:
            raise ValueError(f"{p}: config file larger than {MAX_CONFIG_BYTES:,} bytes")
        try:  # nesting bounded before anything is built (MAX_YAML_DEPTH)
            data = load_yaml_limited(p.read_text(encoding="utf-8"), str(p)) or {}
        except (OSError, UnicodeDecodeError, DataValidationError) as exc:
            raise ValueError(f"{p}: cannot read config ({getattr(exc, 'message', exc)})") from None
        if not isinstance(data, dict):
            raise ValueError(f"{p}: a config file must be a YAML mapping, got {type(data).__name__}")
        merged = merge_mappings(merged, data)
    return merged


def datamodule_from_config(spec, source: str):
    """A data module from a ``{class_path, init_args}`` mapping (the ``data:`` section).

    Parameters
    ----------
    spec : dict
        ``class_path`` must name a class under ``recsys_router.datamodules.``.
    source : str
        Where the section came from (for error messages).

    Example
    -------
    >>> datamodule_from_config({"class_path": "os.system"}, "x.yaml")
    Traceback (most recent call last):
    ...
    ValueError: x.yaml: data class_path must name a class under recsys_router.datamodules., got 'os.system'
    """
    if not isinstance(spec, dict) or "class_path" not in spec:
        raise ValueError(f"{source}: 'data' must be a mapping with class_path and init_args")
    path = str(spec["class_path"])
    mod, _, name = path.rpartition(".")
    if not mod.startswith(DATAMODULE_PREFIX) or not name.isidentifier() or name.startswith("_"):
        raise ValueError(f"{source}: data class_path must name a class under "
                         f"{DATAMODULE_PREFIX}, got {path!r}")
    try:
        cls = getattr(importlib.import_module(mod), name)
    except (ImportError, AttributeError):
        raise ValueError(f"{source}: data class_path {path!r} does not exist") from None
    from .datamodules.routing_datamodule import RoutingDataModule  # noqa: PLC0415
    if not (isinstance(cls, type) and issubclass(cls, RoutingDataModule)):
        raise ValueError(f"{source}: data class_path {path!r} is not a RoutingDataModule")
    init = spec.get("init_args") or {}
    if not isinstance(init, dict):
        raise ValueError(f"{source}: data init_args must be a mapping")
    return cls(**{k: v for k, v in init.items() if not str(k).startswith("_")})
