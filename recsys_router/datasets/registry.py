"""One registry of dataset loaders, keyed by name.

A loader is a function ``loader(path_or_None, **options) -> RoutingData | dict[str, RoutingData]``
registered with :func:`register` in its own module of this package; that one decorator call
is the only place a dataset is described (folder, aliases, hub repository and files, layout
detection). :data:`DATASETS` is a :class:`~recsys_router.registries.Registry` that imports
every public module of ``recsys_router.datasets`` on first use, so adding a format is adding
one file. :func:`load_dataset` resolves a name (looking for its folder under ``data_dir``)
or a path (dispatching on its layout).
"""

from __future__ import annotations

import inspect
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from recsys_router.registries import Registry

__all__ = ["register", "load_dataset", "available_datasets", "default_data_dirs", "DatasetSpec",
           "dataset_spec", "DATASETS", "coerce_options"]


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
    hub_files: tuple[str, ...] = ("*",)  # files the loader reads (snapshot_download patterns)


#: every dataset format by name; filled by the loader modules of this package
DATASETS = Registry("dataset", discover=__package__)


def register(name: str, *, folder: str | None = None, description: str = "", aliases=(),
             needs_path: bool = True, hub_repo: str | None = None, detect=None,
             hub_files: tuple[str, ...] = ("*",)):
    """Decorator registering a loader under ``name`` (and ``aliases``).

    Parameters
    ----------
    name : str
    folder : str, optional
        The dataset's folder under a data directory (default: ``name``).
    description : str
        One line for ``recsys-router data list``.
    aliases : tuple of str
    needs_path : bool
        False for generated data (``synthetic``).
    hub_repo : str, optional
        Hugging Face dataset repository ``recsys-router data download`` fetches from.
    detect : callable, optional
        ``detect(path) -> bool``: whether a file or folder has this format. A detector that
        reads a (compressed) file takes ``limits`` too: :func:`load_dataset` passes the
        caller's ``max_bytes`` / ``max_records`` as a
        :class:`~recsys_router.datasets._limits.ReadLimits`.
    hub_files : tuple of str
        The files of ``hub_repo`` the loader reads (``snapshot_download`` patterns).
    """
    def deco(fn):
        spec = DatasetSpec(name, fn, folder, description, tuple(aliases), needs_path, hub_repo,
                           detect, tuple(hub_files))
        if name in DATASETS and DATASETS.raw(name).loader is not fn:
            raise ValueError(f"dataset name {name!r} registered twice")
        DATASETS.register(name, spec, aliases=aliases, overwrite=True)
        return fn
    return deco


def dataset_spec(name: str) -> DatasetSpec | None:
    """The :class:`DatasetSpec` registered under ``name`` (or an alias), or None."""
    try:
        return DATASETS.raw(name) if name in DATASETS else None
    except ValueError:
        return None


def available_datasets() -> dict[str, str]:
    """Canonical dataset names and their one-line descriptions."""
    return {name: spec.description for name, spec in DATASETS.items()}


def default_data_dirs() -> list[Path]:
    """Where named datasets are looked for: ``$RECSYS_ROUTER_DATA``, ``./data``, ``../shared/data``."""
    dirs = []
    if os.environ.get("RECSYS_ROUTER_DATA"):
        dirs.append(Path(os.environ["RECSYS_ROUTER_DATA"]))
    dirs += [Path("data"), Path("..") / "shared" / "data"]
    return dirs


_BOOL_TEXT = {"true": True, "1": True, "false": False, "0": False}


def _read_bool(key: str, value: str) -> bool:
    """``value`` (``true``/``false``/``1``/``0``, any case) as a bool, else a refusal."""
    try:
        return _BOOL_TEXT[value.strip().lower()]
    except KeyError:
        from recsys_router.errors import ArgumentValueError  # noqa: PLC0415
        raise ArgumentValueError(f"dataset option {key!r} must be a bool (true, false, 1 or 0), "
                                 f"got {value!r}") from None


def coerce_options(loader: Callable, options: dict) -> dict:
    """``options`` with each string given for a numeric parameter of ``loader`` (annotated
    ``int`` or ``float``, optionally ``| None``) read as that number, and each string given
    for a ``bool`` parameter read as ``true``/``false``/``1``/``0`` (any case): an override
    such as ``--data.init_args.dataset_options.n_queries=300`` arrives as the string
    ``'300'``, and ``binary=false`` as ``'false'`` (a truthy string). A
    loader that passes its ``**options`` on names the function that takes them as its
    ``options_target`` attribute (the synthetic loaders: ``make_synthetic``).

    Raises
    ------
    ArgumentValueError
        A string that is no such number (or reads as a non-finite float: ``'nan'``,
        ``'inf'``, ``'1e400'``) or no such bool, naming the option and the type.

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> coerce_options(make_synthetic, {"n_queries": "300", "specialisation": "2", "x": "y"})
    {'n_queries': 300, 'specialisation': 2.0, 'x': 'y'}
    """
    import typing  # noqa: PLC0415
    hints = {}
    for func in (getattr(loader, "options_target", None), loader):
        try:
            hints.update(typing.get_type_hints(func) if func is not None else {})
        except Exception:  # noqa: BLE001 - annotations that do not evaluate: none to go by
            pass
    out = dict(options)
    for key, value in options.items():
        kinds = set(typing.get_args(hints.get(key)) or {hints.get(key)}) - {type(None)}
        if isinstance(value, str) and kinds == {bool}:
            out[key] = _read_bool(key, value)
            continue
        if not isinstance(value, str) or not kinds or not kinds <= {int, float}:
            continue
        for kind in (int, float):
            if kind in kinds:
                try:
                    number = kind(value.strip())
                except ValueError:
                    continue
                if math.isfinite(number):     # 'nan', 'inf' and '1e400' read as floats
                    out[key] = number
                    break
        else:
            from recsys_router.errors import ArgumentValueError  # noqa: PLC0415
            want = " or ".join(("a finite float" if k is float else k.__name__)
                               for k in (int, float) if k in kinds)
            raise ArgumentValueError(f"dataset option {key!r} must be {want}, got {value!r}")
    return out


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
        ``cache_dir`` (where downloads go and are looked for; see :mod:`.hub`), and
        ``trust_pickle`` (passed only to loaders that unpickle; the others ignore it).

    Returns
    -------
    RoutingData, or dict of RoutingData for loaders that yield several datasets.
    """
    download = options.pop("download", False)
    cache_dir = options.pop("cache_dir", None)
    trust = options.pop("trust_pickle", None)

    def call(loader, path):
        nonlocal options
        options = coerce_options(loader, options)
        if trust is not None and "trust_pickle" in inspect.signature(loader).parameters:
            return loader(path, trust_pickle=bool(trust), **options)
        return loader(path, **options)

    key = str(name_or_path)
    spec = dataset_spec(key)
    if spec is not None:
        if not spec.needs_path:
            return call(spec.loader, None)
        try:
            path = _find_named(spec, data_dir, cache_dir)
        except FileNotFoundError:
            if not (download and spec.hub_repo):
                raise
            from .hub import download_dataset
            path = download_dataset(spec.name, cache_dir)
        return call(spec.loader, path)
    path = Path(key)
    try:
        exists = path.exists()
    except (OSError, ValueError):    # a name too long (or with NUL) for the file system
        exists = False
    searched = []
    if not exists and Path(key).name == key and key not in (".", ".."):
        # a plain name that is no registered dataset: a folder of that name in the data dirs
        # (e.g. the shared pools cruxeval, bfcl_v1), detected by its files like any path
        for d in ([Path(data_dir)] if data_dir is not None else default_data_dirs()):
            searched.append(str(d))
            try:
                if (d / key).exists():
                    path, exists = d / key, True
                    break
            except (OSError, ValueError):
                continue
    if exists:
        for _, s in DATASETS.items():
            if s.detect is not None and _detect(s, path, options):
                return call(s.loader, path)
        raise ValueError(f"{path}: cannot tell which dataset format this is; known formats: "
                         f"{sorted(available_datasets())}")
    where = f" nor in {searched}" if searched else ""
    raise ValueError(f"unknown dataset {key!r} (and no such file or folder here{where}); valid "
                     f"names: {', '.join(sorted(available_datasets()))}")


def _detect(spec: DatasetSpec, path: Path, options: dict) -> bool:
    """``spec.detect(path)``, with the caller's read limits when the detector takes them, so
    detection reads no more of a compressed file than the loader would."""
    if "limits" not in inspect.signature(spec.detect).parameters:
        return spec.detect(path)
    from ._limits import ReadLimits  # noqa: PLC0415
    given = coerce_options(spec.loader, {k: options[k] for k in ("max_bytes", "max_records")
                                         if k in options})
    return spec.detect(path, limits=ReadLimits.of(given.get("max_bytes"),
                                                  given.get("max_records")))


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
