"""Checks of a stored safe-fallback router (an artifact is untrusted input): its parameters
and its recorded decisions, before :class:`~recsys_router.fallback.SafeFallbackRouter`
rebuilds itself from them."""

from __future__ import annotations

from .fallback_nauc import VERDICT_METRICS
from .inner_validation import DECISIONS, check_inner_folds, check_z
from .state import StateError

__all__ = ["FallbackStateChecks", "MAX_TASKS"]

#: most tasks a stored fallback record may name
MAX_TASKS = 100_000


class FallbackStateChecks:
    """Mixin of :class:`~recsys_router.fallback.SafeFallbackRouter`: the checks its declared
    state runs on load (before the router's own ``_check_state``)."""

    @classmethod
    def _check_stored_params(cls, params: dict, where: str) -> None:
        if params.get("verdict_metric", "mu_o") not in VERDICT_METRICS:
            raise StateError(f"{where}.params: verdict_metric must be one of "
                             f"{list(VERDICT_METRICS)}")
        try:
            check_inner_folds(params.get("inner_folds", "auto"))
        except ValueError as exc:
            raise StateError(f"{where}.params.{exc}") from None
        for name in ("verdict_z", "top_z"):
            v = params.get(name, "auto")
            if v == "auto" or (v is None and name == "top_z"):
                continue
            try:
                check_z(v, f"{name} (or 'auto')", signed=True)
            except ValueError as exc:
                raise StateError(f"{where}.params: {exc}") from None

    @classmethod
    def _check_state(cls, fields: dict, headers: dict, dims: dict) -> dict:
        out = super()._check_state(fields, headers, dims)
        fb = out["fallback_"]
        where = "SafeFallbackRouter.fallback_"
        if not isinstance(fb, dict) or not isinstance(fb.get("enabled"), bool):
            raise StateError(f"{where}: expected an object with a boolean 'enabled'")
        tasks = fb.get("tasks")
        if not isinstance(tasks, dict) or len(tasks) > MAX_TASKS:
            raise StateError(f"{where}.tasks: expected an object of at most {MAX_TASKS} tasks")
        top = [("(top choice)", fb["top"])] if "top" in fb else []
        for t, d in [("(default)", fb.get("default")), *top, *tasks.items()]:
            if d not in DECISIONS:
                raise StateError(f"{where}: decision for task {str(t)[:80]!r} is {str(d)[:80]!r}, "
                                 f"expected one of {list(DECISIONS)}")
        return out
