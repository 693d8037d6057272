"""The wrappers ``evaluate`` and ``export`` put around a fresh router: ``--auto N`` tuning,
then the safe fallback (:mod:`recsys_router.fallback`)."""

from __future__ import annotations

from ..fallback import SafeFallbackRouter
from ..fallback_nauc import resolve_verdict_metric
from ..router import Router

__all__ = ["wrap_router"]


def wrap_router(router: Router, name: str | None = None, *, fallback: bool = True, auto: int = 0,
                auto_objective: str = "auto", seed: int = 0, top_check: bool = True,
                fallback_metric: str = "auto", auto_folds: int | str = "auto") -> Router:
    """``evaluate``'s and ``export``'s wrappers around a fresh router: with ``auto > 0`` an
    :class:`~recsys_router.tuning.inner.AutoTunedRouter` of ``auto`` trials scored by
    ``auto_objective`` on ``auto_folds`` (its ``inner_folds``; registry routers ``name``
    with a search space only), then with
    ``fallback`` a
    :class:`~recsys_router.fallback.SafeFallbackRouter`
    (routers that read query text and not the true scores: the learned ones), whose check
    of the top choice on data with costs ``top_check`` turns off (``top_z=None``), and whose
    verdict compares ``fallback_metric`` (``verdict_metric``: ``mu_o``, ``nauc`` or ``auto``,
    the default: nAUC where the training data has costs, else mu_o).

    Example
    -------
    >>> from recsys_router.registry import make_router
    >>> type(wrap_router(make_router("knn"), "knn")).__name__
    'SafeFallbackRouter'
    >>> type(wrap_router(make_router("best-single"), "best-single")).__name__
    'BestSingleRouter'
    """
    resolve_verdict_metric(fallback_metric, None)        # a bad value fails before any fit
    if auto and isinstance(name, str) and not getattr(router, "uses_ground_truth", False):
        from ..tuning.inner import AutoTunedRouter, has_search_space  # noqa: PLC0415 (optuna
        if has_search_space(name):                                     # only when asked)
            router = AutoTunedRouter(name, router.get_params(), n_trials=int(auto), seed=seed,
                                     objective=auto_objective, inner_folds=auto_folds)
    if fallback and getattr(router, "uses_text", False) \
            and not getattr(router, "uses_ground_truth", False):
        router = SafeFallbackRouter(router, seed=seed, top_z="auto" if top_check else None,
                                    verdict_metric=fallback_metric)
    return router
