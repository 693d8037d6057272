"""Declared state of wrapper routers: the wrapped router ``router_`` as a nested part.

Task-residual, cost-aware and logged-feedback routers wrap an inner registry router; its
own declared state is stored under ``router_`` (a state document and arrays named
``router_/...``) and rebuilt through the same explicit class table as the wrapper, so a
wrapper can never name a class the registry does not hold.

Reference: scikit-learn's meta-estimators (Buitinck et al., 2013), whose fitted inner
estimator is an attribute ending in ``_``.
"""

from __future__ import annotations

from recsys_router.state import Part

__all__ = ["InnerRouterState"]


class InnerRouterState:
    """Mixin for routers holding a fitted inner router as ``router_``."""

    _state_ = {"router_": Part()}

    def _get_state(self):
        from recsys_router.router_state import save_router_part
        fields, arrays = super()._get_state()
        part, inner = save_router_part("router_", self.router_)
        return {**fields, **part}, {**arrays, **inner}

    @classmethod
    def _from_state(cls, params, fields, arrays):
        from recsys_router.router_state import load_router_part
        router = super()._from_state(params, fields, arrays)
        router.router_ = load_router_part("router_", fields, arrays, cls.__name__,
                                          router.core_llms_ or router.llm_names_)
        return router
