"""One registry of dataset loaders, keyed by name.

A loader is a function ``loader(path_or_None, **options) -> RoutingData | dict[str, RoutingData]``
registered with :func:`register`. :func:`load_dataset` resolves a name (looking for its
folder under ``data_dir``) or a path (dispatching on its layout).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

__all__ = ["register", "load_dataset", "available_datasets", "default_data_dirs", "DatasetSpec"]


@dataclass
class DatasetSpec:
    name: str
    loader: Callable
    folder: str | None = None          # default folder name under a data dir
    description: str = ""
    aliases: tuple[str, ...] = ()
    needs_path: bool = True            # False for generated data (synthetic)
    hub_repo: str | None = None        # Hugging Face dataset repo for --download
    detect: Callable[[Path], bool] | None = field(default=None, repr=False)


_REGISTRY: dict[str, DatasetSpec] = {}


def register(name: str, *, folder: str | None = None, description: str = "", aliases=(),
             needs_path: bool = True, hub_repo: str | None = None, detect=None):
    """Decorator registering a loader under ``name`` (and ``aliases``)."""
    def deco(fn):
        spec = DatasetSpec(name, fn, folder, description, tuple(aliases), needs_path, hub_repo, detect)
        for key in (name, *aliases):
            if key in _REGISTRY and _REGISTRY[key].loader is not fn:
                raise ValueError(f"dataset name {key!r} registered twice")
            _REGISTRY[key] = spec
        return fn
    return deco


def available_datasets() -> dict[str, str]:
    """Canonical dataset names and their one-line descriptions."""
    from . import _ensure_loaded
    _ensure_loaded()
    return {s.name: s.description for s in sorted({id(s): s for s in _REGISTRY.values()}.values(),
                                                   key=lambda s: s.name)}


def default_data_dirs() -> list[Path]:
    """Where named datasets are looked for: ``$RECSYS_ROUTER_DATA``, ``./data``, ``../shared/data``."""
    dirs = []
    if os.environ.get("RECSYS_ROUTER_DATA"):
        dirs.append(Path(os.environ["RECSYS_ROUTER_DATA"]))
    dirs += [Path("data"), Path("..") / "shared" / "data"]
    return dirs


def load_dataset(name_or_path, data_dir=None, **options):
    """Load a dataset by registered name or by path.

    Parameters
    ----------
    name_or_path : str or path
        A registered name (see :func:`available_datasets`) or a file/folder.
    data_dir : str or path, optional
        Folder holding the named dataset's folder; default: :func:`default_data_dirs`.
    **options
        Passed to the loader (e.g. ``duplicates="mean"``, ``seed=0``), except
        ``download=True`` (fetch a Hugging Face dataset that is not found locally) and
        ``cache_dir`` (where downloads go and are looked for; see :mod:`.hub`).

    Returns
    -------
    RoutingData, or dict of RoutingData for loaders that yield several datasets.
    """
    from . import _ensure_loaded
    _ensure_loaded()
    download = options.pop("download", False)
    cache_dir = options.pop("cache_dir", None)
    key = str(name_or_path)
    spec = _REGISTRY.get(key) or _REGISTRY.get(key.lower())
    if spec is not None:
        if not spec.needs_path:
            return spec.loader(None, **options)
        try:
            path = _find_named(spec, data_dir, cache_dir)
        except FileNotFoundError:
            if not (download and spec.hub_repo):
                raise
            from .hub import download_dataset
            path = download_dataset(spec.name, cache_dir)
        return spec.loader(path, **options)
    path = Path(key)
    if path.exists():
        for s in {id(s): s for s in _REGISTRY.values()}.values():
            if s.detect is not None and s.detect(path):
                return s.loader(path, **options)
        raise ValueError(f"{path}: cannot tell which dataset format this is; known formats: "
                         f"{sorted(available_datasets())}")
    raise ValueError(f"unknown dataset {key!r} (and no such file or folder); valid names: "
                     f"{', '.join(sorted(available_datasets()))}")


def _find_named(spec: DatasetSpec, data_dir, cache_dir=None) -> Path:
    folder = spec.folder or spec.name
    candidates = [Path(data_dir)] if data_dir is not None else default_data_dirs()
    if spec.hub_repo:  # where `recsys-router data download` puts hub datasets
        from .hub import default_cache_dir
        candidates.append(Path(cache_dir) if cache_dir is not None else default_cache_dir())
    tried = []
    for d in candidates:
        p = d / folder
        tried.append(str(p))
        if p.exists():
            return p
    hint = (f" Download it with `recsys-router data download {spec.name}` (needs internet; "
            f"Hugging Face dataset {spec.hub_repo}) or pass data_dir." if spec.hub_repo else
            " Pass data_dir= or set RECSYS_ROUTER_DATA to the folder that holds it.")
    raise FileNotFoundError(f"dataset {spec.name!r} not found; looked in: {', '.join(tried)}.{hint}")
