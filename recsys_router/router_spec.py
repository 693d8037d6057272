"""Router specifications, resolved in one place: a registry name (with parameters), an exported
artifact folder, a :class:`~recsys_router.router.Router` or a loaded artifact.

Evaluation, RouteJudge, ``export`` and the wrapper routers (which build an inner router) all
call :func:`resolve_router`, so every command accepts the same specs and fills in the run's
encoder and seed the same way.

Example
-------
>>> router, needs_fit = resolve_router("knn", {"k": 3}, encoder="hashing", seed=1)
>>> router.get_params()["k"], router.get_params()["encoder"], needs_fit
(3, 'hashing', True)
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from .router import Router

__all__ = ["resolve_router", "is_artifact_dir", "is_path_spec"]


def is_path_spec(spec) -> bool:
    """Whether ``spec`` is clearly a file-system path rather than a name: a ``Path``, or a
    string holding a path separator or starting with ``.``.

    Example
    -------
    >>> is_path_spec("knn"), is_path_spec("./knn"), is_path_spec("artifacts/knn")
    (False, True, True)
    """
    if isinstance(spec, Path):
        return True
    return isinstance(spec, str) and (spec.startswith(".") or "/" in spec
                                      or any(s and s in spec for s in (os.sep, os.altsep)))


def is_artifact_dir(spec) -> bool:
    """Whether ``spec`` names a folder holding an exported router (a ``manifest.json``).

    A registry name (``"knn"``) is never read as a folder, even when the working directory
    holds a folder of that name: write it as a path (``./knn``) to mean the folder.
    """
    if not isinstance(spec, (str, Path)):
        return False
    if not is_path_spec(spec):
        from .registry import ROUTERS  # noqa: PLC0415 (the registry imports models lazily)
        if spec in ROUTERS:
            return False
    try:
        return Path(spec).is_dir() and (Path(spec) / "manifest.json").is_file()
    except (OSError, ValueError):   # a name too long (or with NUL) for the file system
        return False


def resolve_router(spec, params: Mapping | None = None, *, encoder=None,
                   seed: int | None = None, defaults: Mapping | None = None,
                   clone: bool = False) -> tuple[Router, bool]:
    """Turn a router spec into a router; returns ``(router, needs_fit)``.

    Parameters
    ----------
    spec : str, Router or loaded artifact
        A registry name (see :func:`recsys_router.registry.available_routers`), a folder holding
        an exported artifact (loaded fitted, with verification), a :class:`Router` (used as
        given, fitted or not) or an object with a ``router`` attribute (an ``ExportedRouter``).
        A registry name always means the registry's router; a folder of the same name is
        read only when written as a path (``./knn``, ``artifacts/knn``, a ``Path``).
    params : dict, optional
        Constructor parameters for a registry name (an unknown one is a ValueError, and so
        is any with an artifact folder, which is already fitted).
    encoder : str, Encoder or callable, optional
        Given to a router that takes an ``encoder`` where ``params`` does not set it; a
        callable receives the router's own default encoder and returns the one to use.
    seed : int, optional
        Given as ``seed`` and ``random_state`` to a registry router that takes them, where
        ``params`` does not set them.
    defaults : dict, optional
        Other parameters given to a registry router that takes them, where ``params`` does
        not set them (e.g. ``{"p": 0.5}`` for ``r_o``).
    clone : bool
        Replace a Router instance by an unfitted copy with the same parameters (fitted
        afresh, e.g. once per fold).

    Returns
    -------
    (Router, bool)
        The router and whether it still has to be fitted.
    """
    if isinstance(spec, Router):
        router = type(spec)(**spec.get_params()) if clone else spec
        return _fill(router, {}, encoder, None, None), not router.is_fitted
    if isinstance(getattr(spec, "router", None), Router):
        return spec.router, not spec.router.is_fitted
    if not isinstance(spec, (str, Path)):
        raise TypeError(f"a router must be a registry name, an artifact folder or a Router, "
                        f"got {type(spec).__name__}")
    if is_artifact_dir(spec):
        if params:
            raise ValueError(f"router {str(spec)[:200]!r} is an exported artifact, already "
                             f"fitted: parameters {sorted(params)[:5]} cannot apply to it (give "
                             "a registry name to fit a router with them)")
        import warnings  # noqa: PLC0415

        from .export import load_router  # noqa: PLC0415 (heavy, only when used)
        with warnings.catch_warnings():  # its router routes RoutingData, whose own tasks it reads:
            warnings.filterwarnings("ignore", message=r".* routes by each query's task label")
            return load_router(spec).router, False  # the advice to pass tasks= does not apply
    from .registry import make_router  # noqa: PLC0415 (the registry imports models lazily)
    user = dict(params or {})
    try:
        router = make_router(str(spec), **user)
    except TypeError as exc:  # an unknown hyperparameter is a usage error, not a crash
        raise ValueError(f"router {spec!r}: {exc}") from None
    return _fill(router, user, encoder, seed, defaults), True


def _fill(router: Router, user: dict, encoder, seed, defaults) -> Router:
    names = router.get_params()
    extra = {}
    if encoder is not None and "encoder" in names and "encoder" not in user:
        extra["encoder"] = encoder(names["encoder"]) if callable(encoder) \
            and not hasattr(encoder, "encode") else encoder
    if seed is not None:
        for key in ("seed", "random_state"):
            if key in names and key not in user:
                extra[key] = seed
    for key, value in (defaults or {}).items():
        if key in names and key not in user and value is not None:
            extra[key] = value
    return router.set_params(**extra) if extra else router
