"""Declared state of wrapper routers: the wrapped router ``router_`` as a nested part.

Task-residual, cost-aware and logged-feedback routers wrap an inner registry router; the
mixin lives in :mod:`recsys_router.router_state` (the safe fallback and ``--auto`` wrappers
of ``recsys_router`` use it too) and is re-exported here for the model families.
"""

from __future__ import annotations

from recsys_router.router_state import InnerRouterState

__all__ = ["InnerRouterState"]
