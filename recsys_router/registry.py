"""Router registry: build any router by name.

Entries map a name to ``"module:Class"`` (imported lazily, on first use, so importing
``recsys_router`` never imports ``models``) or to any callable returning a
:class:`~recsys_router.router.Router`, in :data:`ROUTERS`, a
:class:`~recsys_router.registries.Registry` (the mechanism datasets and encoders use too).
Adding a router is one line in :data:`ROUTERS` or one :func:`register_router` call.

Example
-------
>>> from recsys_router.registry import make_router, available_routers
>>> "knn" in available_routers()
True
>>> make_router("knn", k=5)
KNNRouter(k=5, metric='cosine', encoder='hashing', seed=0)
"""

from __future__ import annotations

import inspect
from typing import Callable, Union

from .registries import Registry
from .router import Router

__all__ = ["make_router", "register_router", "unregister_router",
           "available_routers", "router_factory", "router_class", "ROUTERS",
           "registered_class_paths"]

Factory = Union[str, Callable[..., Router]]

#: every router by name
ROUTERS = Registry("router", {
    "random": "recsys_router.models.baselines.simple:RandomRouter",
    "oracle": "recsys_router.models.baselines.simple:OracleRouter",
    "r_o": "recsys_router.models.baselines.simple:ROracleRouter",
    "best-single": "recsys_router.models.baselines.simple:BestSingleRouter",
    "task-best": "recsys_router.models.baselines.simple:TaskBestRouter",
    "zero": "recsys_router.models.baselines.zero:ZeroRouter",
    "cascade": "recsys_router.models.baselines.cascade:CascadeRouter",
    "knn": "recsys_router.models.baselines.neighbours:KNNRouter",
    "prknn": "recsys_router.models.baselines.neighbours:PRKnnRouter",
    "c-roberta": "recsys_router.models.baselines.cluster:ClusterRouter",
    "svm": "recsys_router.models.baselines.svm:SVMRouter",
    "linearr": "recsys_router.models.baselines.regression:LinearRRouter",
    "mlpr": "recsys_router.models.baselines.regression:MLPRRouter",
    "mlc": "recsys_router.models.baselines.regression:MLCRouter",
    "als": "recsys_router.models.implicit_router:ALSRouter",
    "bpr": "recsys_router.models.implicit_router:BPRRouter",
    "mirt": "recsys_router.models.irt_module:MIRTRouter",
    "nirt": "recsys_router.models.irt_module:NIRTRouter",
    "graph": "recsys_router.models.graph_module:GraphRouter",
    "mf": "recsys_router.models.mf_module:MFRouter",
    "two-tower": "recsys_router.models.two_tower_module:TwoTowerRouter",
    "task-residual": "recsys_router.models.task_residual:TaskResidualRouter",
    "cost-aware": "recsys_router.models.cost_aware:CostAwareRouter",
    "logged": "recsys_router.models.logged_feedback:LoggedFeedbackRouter",
})


def register_router(name: str, factory: Factory, *, overwrite: bool = False) -> None:
    """Add a router under ``name``.

    Parameters
    ----------
    name : str
        Registry name (case-insensitive).
    factory : str or callable
        ``"package.module:ClassName"`` (imported lazily) or a callable ``(**params) -> Router``.
    overwrite : bool
        Replace an existing entry instead of raising.

    Example
    -------
    >>> register_router("my-bsm", "recsys_router.models.baselines.simple:BestSingleRouter")
    >>> make_router("my-bsm")
    BestSingleRouter()
    >>> unregister_router("my-bsm")
    """
    if not isinstance(factory, str) and not callable(factory):
        raise TypeError(f"factory must be a 'module:Class' string or a callable, got {type(factory).__name__}")
    ROUTERS.register(name, factory, overwrite=overwrite)


def unregister_router(name: str) -> None:
    """Remove a registered router (KeyError naming the available ones when unknown)."""
    ROUTERS.unregister(name)


def available_routers() -> list[str]:
    """Registered router names, sorted."""
    return ROUTERS.names()


def router_factory(name: str) -> Callable[..., Router]:
    """The class or callable registered under ``name`` (imports its module if needed)."""
    return ROUTERS.get(name)


def registered_class_paths() -> dict[str, str]:
    """``"module:Class"`` of every router registered as a class -> its registry name.

    Nothing is imported: string entries are read as written, class entries by their
    module and qualified name. Exported artifacts name their router this way, and the
    loader accepts exactly these names.

    Example
    -------
    >>> registered_class_paths()["recsys_router.models.baselines.neighbours:KNNRouter"]
    'knn'
    """
    out: dict[str, str] = {}
    for key, fac in ROUTERS.items():
        if isinstance(fac, str):
            out.setdefault(fac, key)
        elif inspect.isclass(fac):
            out.setdefault(f"{fac.__module__}:{fac.__qualname__}", key)
    return out


def router_class(name: str) -> type:
    """The router class for ``name`` (raises TypeError for a non-class factory)."""
    fac = router_factory(name)
    if not inspect.isclass(fac):
        raise TypeError(f"router {name!r} is registered with a factory function, not a class")
    return fac


def make_router(name: str, **params) -> Router:
    """Build an unfitted router by registry name.

    Parameters
    ----------
    name : str
        One of :func:`available_routers` (case-insensitive).
    **params
        Constructor hyperparameters.

    Returns
    -------
    Router

    Raises
    ------
    KeyError
        Unknown name (the message lists the available ones).
    TypeError
        A parameter the router does not take (the message lists the valid ones).
    """
    fac = router_factory(name)
    if inspect.isclass(fac) and issubclass(fac, Router):
        valid = fac._param_names()
        bad = sorted(set(params) - set(valid))
        if bad:
            raise TypeError(f"router {name!r} ({fac.__name__}) has no parameter(s) {bad}; "
                            f"valid: {valid}")
    router = fac(**params)
    if not isinstance(router, Router):
        raise TypeError(f"factory for {name!r} returned {type(router).__name__}, not a Router")
    return router
