"""recsys-router: LLM routing as collaborative filtering."""

from __future__ import annotations

from .data import RoutingData
from .datasets import available_datasets, load_dataset
from .errors import DataValidationError, NotFittedError
from .policies import apply_policy, argmax_policy, budget_policy, wtp_policy
from .router import Router
from .export import load_router

__version__ = "0.1.0"

__all__ = ["RoutingData", "load_dataset", "available_datasets", "DataValidationError",
           "NotFittedError", "Router", "apply_policy", "argmax_policy", "budget_policy",
           "wtp_policy", "load_router", "__version__"]
