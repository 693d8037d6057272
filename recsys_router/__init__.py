"""recsys-router: LLM routing as collaborative filtering.

Everything a user needs is one import away::

    from recsys_router import load_dataset, make_router, evaluate, EvalConfig, export_router, load_router

``load_dataset``, ``make_router`` and the :class:`Router` base are light; ``evaluate``,
``EvalConfig``, ``export_router`` and ``load_router`` are imported on first use (they pull in
plotting, the artifact format and the encoders).

Example
-------
>>> import recsys_router as rr
>>> data = rr.load_dataset("synthetic", n_queries=60, n_llms=3, seed=0)
>>> rr.make_router("best-single").fit(data).route(data).shape
(60,)
"""

from __future__ import annotations

import importlib

from .data import RoutingData
from .datasets import available_datasets, load_dataset
from .errors import DataValidationError, NotFittedError
from .policies import apply_policy, argmax_policy, budget_policy, wtp_policy
from .registry import available_routers, make_router, register_router
from .router import Router

__version__ = "0.1.0"

#: public names imported on first use: name -> module that defines it
_LAZY = {"evaluate": "recsys_router.evaluation", "EvalConfig": "recsys_router.evaluation",
         "export_router": "recsys_router.export", "load_router": "recsys_router.export"}

__all__ = ["RoutingData", "load_dataset", "available_datasets", "make_router", "available_routers",
           "register_router", "evaluate", "EvalConfig", "export_router", "load_router",
           "DataValidationError", "NotFittedError", "Router", "apply_policy", "argmax_policy",
           "budget_policy", "wtp_policy", "__version__"]


def __getattr__(name: str):
    """Import the heavy public names (:data:`_LAZY`) on first access."""
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'recsys_router' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
