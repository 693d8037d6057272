"""Checks of a data module's constructor arguments, run before anything is loaded, so a bad
value is refused as an :class:`~recsys_router.errors.ArgumentValueError` naming the argument
(which the Lightning CLI prints as one line, ``--data.init_args.<name>: ...``) instead of
failing mid-fit inside a DataLoader, a pair sampler or a dataset loader."""

from __future__ import annotations

import inspect

from recsys_router.errors import ArgumentValueError
from recsys_router.hyperparams import check_number

__all__ = ["check_datamodule_args", "check_dataset_options"]

#: options :func:`recsys_router.datasets.load_dataset` takes for any loader
_LOAD_OPTIONS = frozenset({"download", "cache_dir", "trust_pickle"})


def _named_parameters(func) -> tuple[set[str], bool]:
    """(the keyword parameters of ``func``, whether it takes ``**kwargs``)."""
    params = inspect.signature(func).parameters.values()
    names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return names, any(p.kind == p.VAR_KEYWORD for p in params)


def check_dataset_options(dataset, options: dict) -> None:
    """Refuse a ``dataset_options`` key that the registered loader of ``dataset`` does not take
    (a loader that passes ``**options`` on is checked against its ``options_target``). A path
    or a loader taking any keyword is not checked.

    Raises
    ------
    ArgumentValueError
        Naming ``dataset_options``, the unknown keys and the options the loader takes.

    Example
    -------
    >>> check_dataset_options("synthetic", {"n_queries": 50})
    >>> check_dataset_options("synthetic", {"colour": "red"})
    Traceback (most recent call last):
    ...
    recsys_router.errors.ArgumentValueError: no such dataset_options key(s) ['colour'] for dataset 'synthetic'; ...
    """
    from recsys_router.datasets.resolve import loader_spec
    spec = loader_spec(dataset) if options else None
    if spec is None:
        return
    accepted, any_kw = _named_parameters(spec.loader)
    target = getattr(spec.loader, "options_target", None)
    if any_kw and target is not None:
        more, any_kw = _named_parameters(target)
        accepted |= more
    if any_kw:
        return
    accepted = {name for name in accepted if name != "path" and not name.startswith("_")}
    unknown = sorted(set(map(str, options)) - accepted - _LOAD_OPTIONS)
    if unknown:
        raise ArgumentValueError(f"no such dataset_options key(s) {unknown} for dataset "
                                 f"{str(dataset)!r}; its options: {sorted(accepted) or 'none'}")


def check_datamodule_args(*, mode: str, modes: tuple, batch_size, val_fraction, group_method: str,
                          num_workers, max_pairs_per_query, propensity_clip, dataset,
                          dataset_options: dict | None) -> None:
    """Refuse a :class:`~datamodules.routing_datamodule.RoutingDataModule` argument out of its
    range (each message names the argument).

    Raises
    ------
    ArgumentValueError

    Example
    -------
    >>> check_datamodule_args(mode="listwise", modes=("listwise",), batch_size=8,
    ...                       val_fraction=None, group_method="routereval", num_workers=-1,
    ...                       max_pairs_per_query=None, propensity_clip=0.05,
    ...                       dataset="synthetic", dataset_options=None)
    Traceback (most recent call last):
    ...
    recsys_router.errors.ArgumentValueError: num_workers must be an integer >= 0, got -1
    """
    if mode not in modes:
        raise ArgumentValueError(f"mode must be one of {modes}, got {mode!r}")
    if batch_size < 1:
        raise ArgumentValueError(f"batch_size must be >= 1, got {batch_size}")
    if val_fraction is not None and not 0 <= val_fraction < 1:
        raise ArgumentValueError(f"val_fraction must be in [0, 1), got {val_fraction}")
    from recsys_router.pools import METHODS
    if group_method not in METHODS:
        raise ArgumentValueError(f"group_method must be one of {METHODS}, got "
                                 f"{group_method!r}")
    check_number(num_workers, "num_workers", low=0, integer=True)
    check_number(max_pairs_per_query, "max_pairs_per_query", low=1, integer=True, none=True)
    check_number(propensity_clip, "propensity_clip", low=0, high=1, low_open=True)
    check_dataset_options(dataset, dict(dataset_options or {}))
