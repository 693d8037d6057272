"""Building a fitted router from one source, for export: a registry router fitted on a dataset,
YAML configs (a ``tune`` ``best_config.yaml`` with ``router``/``params``/``data``, or a
LightningCLI model + data config), or a Lightning checkpoint. Also the process-wide seeding
that every command applies.

Configs go through :func:`recsys_router.configs.load_yaml_configs` (the loader tuning uses);
a checkpoint's module class must be a :class:`RouterModule` under ``recsys_router.models.``
and its data module a class under ``recsys_router.datamodules.``.

Example
-------
>>> built = build_router(router="best-single", data="synthetic",
...                      data_options={"n_queries": 60, "n_llms": 3})
>>> type(built.router).__name__, built.train.n_llms
('BestSingleRouter', 3)
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from typing import Mapping, NamedTuple

from ..configs import datamodule_from_config, load_yaml_configs
from ..data import RoutingData
from ..router import Router

__all__ = ["BuiltRouter", "build_router", "seed_everything"]

log = logging.getLogger(__name__)


class BuiltRouter(NamedTuple):
    """A fitted router with the splits it was built from (``val``/``test`` may be None)."""
    router: Router
    train: RoutingData
    val: RoutingData | None
    test: RoutingData | None
    description: str


def seed_everything(seed: int) -> None:
    """Seed the global generators (Python, numpy, torch) for the whole process."""
    import random  # noqa: PLC0415

    import numpy as np  # noqa: PLC0415
    import torch  # noqa: PLC0415
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _data_splits(data, data_dir, data_options, split, split_column, seed):
    from ..datasets.resolve import resolve_dataset, seed_option  # noqa: PLC0415
    from ..evaluation.splits import make_folds  # noqa: PLC0415
    options = dict(data_options or {})   # generated data drawn with the seed, unless -o seed=
    full = resolve_dataset(data, data_dir=data_dir, stack=True,
                           seed=seed_option(data, options, seed),
                           **options)
    fold = make_folds(full, split=split, split_column=split_column, seed=seed or 0)[0]
    return fold.train, fold.val, fold.test


def build_router(*, router: str | None = None, configs=(), ckpt=None,
                 params: Mapping | None = None, data=None, data_dir=None,
                 data_options: Mapping | None = None, split=None, split_column: str | None = None,
                 seed: int | None = None, trust_pickle: bool = False, fallback: bool = False,
                 auto: int = 0) -> BuiltRouter:
    """Fit or load a router from exactly one source.

    Parameters
    ----------
    router : str, optional
        Registry name, fitted on the train split of ``data`` (or of a config's data section).
    configs : list of path
        YAML configs merged in order: a router config (``router``, ``params``, ``data``) or a
        LightningCLI model + data config (trained here); with ``ckpt``: the data config.
    ckpt : path, optional
        Lightning checkpoint of a RouterModule.
    params : dict, optional
        Router hyperparameters (registry routers only), over a config's ``params``.
    data, data_dir, data_options : optional
        Dataset name or path, its folder and loader options (see
        :func:`recsys_router.datasets.resolve.resolve_dataset`).
    split, split_column :
        Train/val/test fractions or the query column with labels.
    seed : int, optional
        Seed of the split and of the router (default 0; a config's own seed is kept).
    trust_pickle : bool
        Allow loading ``ckpt``: a Lightning checkpoint is a pickle, and unpickling runs code the
        file chooses, so it is refused unless the caller vouches for the file.
    fallback : bool
        Registry routers only: wrap a learned router in the safe fallback
        (:class:`~recsys_router.fallback.SafeFallbackRouter`), as ``evaluate`` does.
    auto : int
        Registry routers only: an inner Optuna search of ``auto`` trials on the training
        queries (:class:`~recsys_router.tuning.inner.AutoTunedRouter`), as ``evaluate --auto``.

    Returns
    -------
    BuiltRouter
    """
    configs = [str(c) for c in configs or ()]
    sources = [bool(router), bool(configs) and not ckpt, bool(ckpt)]
    if sum(sources) != 1:
        raise ValueError("give exactly one source: a router name, config file(s) or a checkpoint")
    only_registry = ValueError("the safe fallback and --auto apply to registry routers only "
                               "(--router NAME or a config with 'router:')")
    if (fallback or auto) and ckpt:
        raise only_registry
    cfg = load_yaml_configs(configs) if configs and not ckpt else {}
    if router or "router" in cfg:
        return _registry_router(router or cfg["router"], cfg, configs, params, data, data_dir,
                                data_options, split, split_column, seed, fallback, auto)
    if fallback or auto:
        raise only_registry
    if params:
        raise ValueError("router parameters apply to registry routers only (edit the config "
                         "for Lightning models)")
    if ckpt:
        return _from_checkpoint(Path(ckpt), configs, trust_pickle)
    return _from_lightning_configs(configs, seed)


def _registry_router(name, cfg, configs, params, data, data_dir, data_options, split,
                     split_column, seed, fallback=False, auto=0) -> BuiltRouter:
    from ..evaluation.wrappers import wrap_router  # noqa: PLC0415
    from ..router_spec import resolve_router  # noqa: PLC0415
    merged = {**(cfg.get("params") or {}), **dict(params or {})}
    model, _ = resolve_router(name, merged, seed=seed or 0)
    model = wrap_router(model, name, fallback=fallback, auto=auto, seed=seed or 0)
    if data:
        train, val, test = _data_splits(data, data_dir, data_options, split, split_column, seed)
    elif "data" in cfg:
        sp = datamodule_from_config(cfg["data"], ", ".join(configs)).splits
        train, val, test = sp["train"], sp.get("val"), sp.get("test")
    else:
        raise ValueError("a registry router needs data to fit on (a dataset, or a config with "
                         "a 'data' section)")
    log.info("fitting %s on %d train queries x %d LLMs", name, train.n_queries, train.n_llms)
    return BuiltRouter(model.fit(train, val), train, val, test, f"registry router {name!r}")


def _from_lightning_configs(configs, seed) -> BuiltRouter:
    from ..lightning_cli import build_lightning_cli  # noqa: PLC0415
    argv = [a for c in configs for a in ("-c", c)]
    if seed is not None:
        argv.append(f"--seed_everything={seed}")
    cli = build_lightning_cli(argv, run=False)
    log.info("training %s with Lightning", type(cli.model).__name__)
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    dm = cli.datamodule
    sp = dm.splits
    return BuiltRouter(cli.model.to_router(dm), sp["train"], sp.get("val"), sp.get("test"),
                       f"Lightning config {configs}")


def _from_checkpoint(ckpt: Path, configs, trust_pickle: bool) -> BuiltRouter:
    import torch  # noqa: PLC0415

    from ..models.base.checkpoint_checks import check_llm_names  # noqa: PLC0415
    from ..models.base.router_module import RouterModule  # noqa: PLC0415
    if not ckpt.is_file():
        raise FileNotFoundError(f"checkpoint {ckpt}: no such file")
    if not trust_pickle:
        raise ValueError(f"checkpoint {ckpt}: a Lightning checkpoint is a pickle and loading it "
                         "runs code the file chooses; pass --trust-pickle (trust_pickle=True) "
                         "only for checkpoints you made or trust")
    raw = torch.load(ckpt, map_location="cpu", weights_only=False)
    if configs:
        cfg = load_yaml_configs(configs)
        if "data" not in cfg:
            raise ValueError(f"{configs}: with a checkpoint, the config gives the data module "
                             "(a 'data:' section)")
        dm = datamodule_from_config(cfg["data"], ", ".join(configs))
    else:
        hp = dict(raw.get("datamodule_hyper_parameters") or {})
        if "_class_path" not in hp:
            raise ValueError(f"{ckpt}: the checkpoint does not record its data module; pass the "
                             "data config (-c data.yaml)")
        if hp.get("candidate_group") is not None and "group_method" not in hp:
            # trained before group_method existed: the best-combination search was the only one
            hp["group_method"] = "oracle-best"
        dm = datamodule_from_config({"class_path": hp.pop("_class_path"), "init_args": hp},
                                    str(ckpt))
    cls_path = str((raw.get("hyper_parameters") or {}).get("_class_path", ""))
    mod, _, name = cls_path.rpartition(".")
    if not mod.startswith("recsys_router.models.") or not name.isidentifier():
        raise ValueError(f"{ckpt}: hyper_parameters._class_path {cls_path!r} is not a "
                         "recsys_router.models RouterModule (train with recsys-router fit)")
    cls = getattr(importlib.import_module(mod), name, None)
    if not (isinstance(cls, type) and issubclass(cls, RouterModule)):
        raise ValueError(f"{ckpt}: {cls_path!r} is not a RouterModule subclass")
    module = cls.load_from_checkpoint(ckpt, map_location="cpu")
    if hasattr(module, "on_data") and getattr(module, "builder", "absent") is None:
        raise ValueError(f"{type(module).__name__} checkpoints need their registry router: "
                         "export it with --router graph --data ... instead")
    sp = dm.splits
    check_llm_names(raw.get("llm_names"), dm.llm_names, str(ckpt))
    return BuiltRouter(module.to_router(dm), sp["train"], sp.get("val"), sp.get("test"),
                       f"checkpoint {ckpt}")
