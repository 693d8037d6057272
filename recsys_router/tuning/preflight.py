"""What ``tune`` checks before a study exists: the model class a config names (refused as
text, before any import, when outside the import allow-list), the search space's first
values (lower bounds, first choices) to build the configs with once, the search keys that
would change the data splits, and the fingerprint of the data the trials are scored on.

A run refused here writes nothing: no ``--out`` folder, no study in ``--storage``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np

from ..errors import ConfigArgumentError
from ..lightning_errors import class_path_refusal, import_path_allowed
from .space import SearchSpace

__all__ = ["router_module_class", "preview_values", "splits_fingerprint", "TUNED_SPLITS",
           "SPLIT_KEYS", "check_split_keys"]

#: the splits a trial reads (fit on train, scored on val)
TUNED_SPLITS = ("train", "val")


def router_module_class(base: dict, source: str | None = None):
    """The config's model class when it is a RouterModule (whose metrics are known), else None.

    A ``model.class_path`` outside
    :data:`~recsys_router.lightning_errors.ALLOWED_IMPORT_PATHS` is refused before anything is
    imported, with the message ``fit`` gives (:func:`~recsys_router.lightning_errors.
    class_path_refusal`).

    Parameters
    ----------
    base : dict
        The merged config.
    source : str, optional
        The config files, for the error message.

    Raises
    ------
    ConfigArgumentError
        Naming the files and ``model.class_path``.

    Example
    -------
    >>> router_module_class({"model": {"class_path": "this.Model"}})
    Traceback (most recent call last):
    ...
    recsys_router.errors.ConfigArgumentError: model.class_path: class_path 'this.Model' is refused: a class_path may only name a class under recsys_router, pytorch_lightning, lightning.pytorch, lightning_fabric, lightning.fabric, torch.optim (nothing was imported)
    """
    import importlib  # noqa: PLC0415
    model = base.get("model")
    path = model.get("class_path") if isinstance(model, dict) else None
    if not isinstance(path, str) or "." not in path:
        return None  # a short class name: LightningCLI resolves it among imported subclasses
    if not import_path_allowed(path):
        raise ConfigArgumentError(class_path_refusal(path),
                                  f"{source}: model.class_path" if source else "model.class_path")
    mod, _, name = path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(mod), name, None)
    except ImportError:
        return None  # LightningCLI reports the bad class path itself
    from recsys_router.models.base.router_module import RouterModule  # noqa: PLC0415
    return cls if isinstance(cls, type) and issubclass(cls, RouterModule) else None


class _FirstValues:
    """A stand-in for an Optuna trial that suggests each parameter's lower bound and first
    choice (no study, no storage)."""

    @staticmethod
    def suggest_float(name, low, high, **_):
        return low

    @staticmethod
    def suggest_int(name, low, high, **_):
        return low

    @staticmethod
    def suggest_categorical(name, choices):
        return choices[0]


def preview_values(space: SearchSpace) -> dict[str, Any]:
    """Values a trial could get (each parameter's lower bound or first choice, ``when``
    conditions applied), to build the configs with once before the study is created.

    Example
    -------
    >>> from recsys_router.tuning.space import parse_search_space
    >>> preview_values(parse_search_space({"params.k": {"type": "int", "low": 2, "high": 9},
    ...                                    "params.m": {"type": "categorical", "choices": ["a", "b"]}}))
    {'params.k': 2, 'params.m': 'a'}
    """
    return space.suggest(_FirstValues())


def splits_fingerprint(splits: dict) -> str:
    """16 hex digits of SHA-256 over the contents of the :data:`TUNED_SPLITS` of ``splits``:
    every column of their query and LLM tables (ids, texts, tasks...), the scores and the
    costs. Another file, other rows or another dataset found under the same name give another
    fingerprint; the same data read again gives the same one.

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> a = make_synthetic(30, 3, seed=0).split((0.8, 0.2, 0.0), seed=0)
    >>> b = make_synthetic(30, 3, seed=1).split((0.8, 0.2, 0.0), seed=0)
    >>> splits_fingerprint(a) == splits_fingerprint(a), splits_fingerprint(a) == splits_fingerprint(b)
    (True, False)
    """
    h = hashlib.sha256()
    for name in TUNED_SPLITS:
        data = splits.get(name)
        h.update(f"\x1d{name}:{data is not None}".encode())
        if data is None:
            continue
        for table in (data.queries, data.llms):
            h.update(json.dumps([str(c) for c in table.columns]).encode())
            # each cell by its JSON text (None, NaN and lists included), row by row
            for row in table.itertuples(index=False, name=None):
                h.update(json.dumps(row, default=str, allow_nan=True).encode() + b"\n")
        for matrix in (data.scores, data.costs):
            arr = None if matrix is None else np.ascontiguousarray(matrix)
            h.update(b"-" if arr is None else f"{arr.dtype}{arr.shape}".encode() + arr.tobytes())
    return h.hexdigest()[:16]


#: data-module arguments that decide which queries (or LLMs) make up the train, validation and
#: test splits: a trial that changed them would be scored on other validation data
SPLIT_KEYS = ("dataset", "data_dir", "dataset_options", "split_ratios", "split_column",
              "val_fraction", "ood_tasks", "seed", "carve_val", "candidates", "candidate_group",
              "pool_size", "group_method", "battles", "battles_per_query")


def check_split_keys(space: SearchSpace) -> None:
    """Refuse a search-space key that changes the data splits (:data:`SPLIT_KEYS` under
    ``data.init_args.`` or ``data.``, or the whole ``data``/``data.init_args``/``data.class_path``):
    trial values on different validation splits cannot be compared.

    Example
    -------
    >>> from recsys_router.tuning.space import parse_search_space
    >>> check_split_keys(parse_search_space({"data.init_args.seed": {"type": "int", "low": 0,
    ...                                                              "high": 9}}))
    Traceback (most recent call last):
    ...
    recsys_router.tuning.objective.TuningConfigError: search space key 'data.init_args.seed' changes the data splits (which queries are in train/val/test): trials would be scored on different validation data; fix it in the data config instead
    """
    from .objective import TuningConfigError  # noqa: PLC0415 (it imports this module)
    whole = {"data", "data.init_args", "data.class_path"}
    for key in space.keys:
        parts = key.split(".")
        arg = parts[2] if parts[:2] == ["data", "init_args"] and len(parts) > 2 else \
            parts[1] if parts[0] == "data" and len(parts) > 1 else None
        if key in whole or arg in SPLIT_KEYS:
            where = f" ({space.source})" if space.source else ""
            raise TuningConfigError(f"search space key {key!r}{where} changes the data splits "
                                    "(which queries are in train/val/test): trials would be scored "
                                    "on different validation data; fix it in the data config instead")
