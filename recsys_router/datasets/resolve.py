"""Dataset resolution for commands and workflows: a name or path plus options -> one
validated :class:`~recsys_router.data.RoutingData` (or the loader's dict), with options checked
against the loader's signature, ``{split: data}`` stacked back into one dataset, and a named
split picked out.

Example
-------
>>> d = resolve_dataset("synthetic", seed=1, n_queries=50, n_llms=3)
>>> d.n_queries, d.n_llms
(50, 3)
>>> resolve_dataset("synthetic", colour="red")
Traceback (most recent call last):
...
ValueError: dataset 'synthetic': ...unexpected keyword argument 'colour'...
"""

from __future__ import annotations

import inspect

import numpy as np

from ..data import RoutingData
from ..splitting import split_labels

__all__ = ["resolve_dataset", "stack_splits", "select_split", "loader_spec", "SPLIT_KEYS",
           "seed_option"]

#: keys of a loader's ``{split: data}`` result that are splits of one dataset (not datasets)
SPLIT_KEYS = frozenset({"train", "val", "test", "validation", "dev", "valid"})


def loader_spec(name_or_path):
    """The registry entry of a dataset name (None for a path)."""
    from .registry import dataset_spec  # noqa: PLC0415
    return dataset_spec(str(name_or_path))


def _accepted(spec) -> tuple[set[str], bool]:
    """(named options of the loader, whether it takes ``**kwargs``)."""
    params = inspect.signature(spec.loader).parameters.values()
    names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return names, any(p.kind == p.VAR_KEYWORD for p in params)


def _takes_seed(spec) -> bool:
    accepts, _ = _accepted(spec)
    return not spec.needs_path or "seed" in accepts


def seed_option(name_or_path, options: dict, seed: int | None) -> int | None:
    """The seed to draw a dataset with: a ``seed`` in ``options`` (a user's ``-o seed=``, taken
    out of ``options``) where given, else ``seed`` (the command's ``--seed``).

    A ``seed`` option for a dataset whose loader draws nothing at random (a file, a folder, a
    benchmark loader without a ``seed`` parameter, or a misspelt name) is an error naming it
    and the generated datasets; it used to be dropped without a word.

    Example
    -------
    >>> opts = {"seed": 3, "n_queries": 30}
    >>> seed_option("synthetic", opts, 7), opts
    (3, {'n_queries': 30})
    >>> seed_option("synthetic", {}, 7)
    7
    >>> seed_option("data.csv", {"seed": 3}, 7)
    Traceback (most recent call last):
    ...
    ValueError: -o seed=3: 'data.csv' is not a generated dataset (synthetic, synthetic-many, synthetic-routereval); data read from files takes no seed
    """
    if "seed" not in options:
        return seed
    spec = loader_spec(name_or_path)
    if spec is None or not _takes_seed(spec):
        from .registry import DATASETS  # noqa: PLC0415
        drawn = sorted(n for n, s in DATASETS.items() if _takes_seed(s))
        raise ValueError(f"-o seed={options['seed']}: {str(name_or_path)!r} is not a generated "
                         f"dataset ({', '.join(drawn)}); data read from files takes no seed")
    return options.pop("seed")


def resolve_dataset(name_or_path, *, data_dir=None, seed: int | None = None,
                    download: bool = False, stack: bool = False, with_responses: bool = False,
                    **options):
    """Load a dataset by name or path with validated options.

    Parameters
    ----------
    name_or_path : str or path
        Registered name or a file/folder.
    data_dir : path, optional
        Folder holding the named dataset's folder.
    seed : int, optional
        Seed of a generated dataset (ignored by loaders that take none).
    download : bool
        Fetch a Hugging Face dataset that is not found locally.
    stack : bool
        Stack a loader's ``{split: data}`` result into one dataset whose ``split`` column keeps
        the parts; a dict of several datasets is then an error naming them.
    with_responses : bool
        Also load the recorded answers (``data.responses``); an error for formats without them.
    **options
        Loader options; one the loader does not take is an error listing the valid ones.

    Returns
    -------
    RoutingData, or a dict of them (``stack=False`` and a loader yielding several).
    """
    from .registry import load_dataset  # noqa: PLC0415
    spec = loader_spec(name_or_path)
    if with_responses:
        if spec is None or "with_responses" not in _accepted(spec)[0]:
            raise ValueError(f"dataset {str(name_or_path)!r} carries no recorded answers (its "
                             "loader has no with_responses option); use routerbench_zs, or live "
                             "mode with --backends")
        options["with_responses"] = True
    if spec is not None:
        accepts, any_kw = _accepted(spec)
        if seed is not None and _takes_seed(spec):
            options.setdefault("seed", seed)
        unknown = sorted(set(options) - accepts - {"download", "cache_dir", "trust_pickle"})
        if unknown and not any_kw:
            raise ValueError(f"{spec.name} has no option(s) {unknown}; options: "
                             f"{sorted(accepts - {'path'}) or 'none'}")
    if download:
        options["download"] = True
    try:
        data = load_dataset(name_or_path, data_dir=data_dir, **options)
    except ConnectionError as exc:  # failed download: a clean error, not a traceback
        raise ValueError(str(exc)) from exc
    except TypeError as exc:  # an option the loader's **kwargs target does not take
        raise ValueError(f"dataset {str(name_or_path)!r}: {exc}") from None
    return stack_splits(data, str(name_or_path)) if stack else data


def stack_splits(data, source: str = "data") -> RoutingData:
    """One dataset from a loader result: a ``{split: data}`` dict becomes one dataset whose
    ``split`` column names the part; a dict of several datasets is an error naming them.

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> parts = make_synthetic(30, 3, seed=0).split((0.5, 0.5), seed=0)
    >>> stacked = stack_splits(parts)
    >>> stacked.n_queries, sorted(set(stacked.queries["split"]))
    (30, ['test', 'train'])
    """
    if not isinstance(data, dict):
        return data
    if not set(map(str, data)) <= SPLIT_KEYS:
        raise ValueError(f"{source} holds several datasets ({', '.join(map(str, data))}); "
                         f"pick one with the loader's options (--data-option KEY=VALUE)")
    parts = []
    for key, part in data.items():
        q = part.queries.copy()
        q["split"] = str(key)
        parts.append(RoutingData(q, part.llms, part.scores, part.costs, name=part.name,
                                 source=part.source, meta=part.meta))
    return RoutingData.concat(parts)


def select_split(data: RoutingData, split: str | None, source: str = "data") -> RoutingData:
    """The queries whose ``split`` column is ``split`` (all queries when None).

    Labels and ``split`` are compared as :func:`recsys_router.splitting.split_labels` gives
    them, as ``--split-column`` reads them: surrounding spaces and case ignored,
    ``validation``/``dev``/``valid`` meaning ``val``; so ``calibrate --split test`` picks the
    queries that ``export --split-column split`` holds out as test.

    Example
    -------
    >>> import pandas as pd
    >>> q = pd.DataFrame({"query_id": ["a", "b", "c"], "split": ["train", "Test ", "dev"]})
    >>> d = RoutingData(q, ["m"], [[1], [0], [1]])
    >>> select_split(d, "test").query_ids, select_split(d, "Validation").query_ids
    (['b'], ['c'])
    """
    if split is None:
        return data
    if "split" not in data.queries.columns:
        raise ValueError(f"{source}: no 'split' column to pick split {split!r} from")
    col = data.queries["split"]
    has = col.notna().to_numpy()
    labels = split_labels(col)
    want = split_labels([split]).iloc[0]
    keep = np.flatnonzero(has & (labels == want).to_numpy())
    if not len(keep):
        n_none = int((~has).sum())
        none = f"; {n_none} queries have no split" if n_none else ""
        named = "" if want == split else f" (read as {want!r})"
        raise ValueError(f"{source}: no query has split {split!r}{named} (splits: "
                         f"{sorted(set(labels[has].tolist()))}{none})")
    return data.subset(keep)
