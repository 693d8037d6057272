"""Routers to and from declared state documents (used for artifacts and nested routers).

A state document is plain JSON::

    {"class": "package.module:Class", "params": {...}, "tuple_params": [...],
     "state": {declared JSON pieces}}

plus a dict of arrays named by the router's declared state. The class is looked up in an
explicit table of exact names built from the router registry
(:func:`~recsys_router.registry.registered_class_paths`): no import by a string from the
file, no attribute chains. The parameters must be constructor parameters of that class,
the state is validated against the class's declared spec, and only then does the class's
own ``_from_state`` rebuild the router.

Example
-------
>>> from recsys_router.datasets.synthetic import make_synthetic
>>> from recsys_router.registry import make_router
>>> d = make_synthetic(40, 3, 2, seed=0)
>>> doc, arrays = router_to_state(make_router("best-single").fit(d))
>>> doc["class"]
'recsys_router.models.baselines.simple:BestSingleRouter'
>>> back = router_from_state(doc, arrays, "example")
>>> back.best_llm_ == make_router("best-single").fit(d).best_llm_
True
"""

from __future__ import annotations

import math

import numpy as np

from .router import Router
from .state.pool import pool_dims
from .state import (JSON_ANY, ListOf, NAME_RE, Part, STR, StateError, check_finite,
                    check_indices, check_value, json_safe)

__all__ = ["router_to_state", "router_from_state", "class_table", "router_class_name",
           "prefixed", "unprefixed", "save_router_part", "load_router_part", "InnerRouterState",
           "inner_reads_truth"]


def router_class_name(router_or_cls) -> str:
    cls = router_or_cls if isinstance(router_or_cls, type) else type(router_or_cls)
    return f"{cls.__module__}:{cls.__qualname__}"


#: routers an artifact may name besides the registered ones (exact name -> module, class):
#: the generic Lightning router (trained from a config or checkpoint; it checks its ``module``
#: parameter against the modules of the registered Lightning routers) and the wrappers that
#: ``evaluate`` puts around registry routers (safe fallback, ``--auto`` tuning)
EXTRA_CLASSES = {"recsys_router.models.base.lightning_router:LightningRouter":
                 ("recsys_router.models.base.lightning_router", "LightningRouter"),
                 "recsys_router.fallback:SafeFallbackRouter":
                 ("recsys_router.fallback", "SafeFallbackRouter"),
                 "recsys_router.tuning.inner:AutoTunedRouter":
                 ("recsys_router.tuning.inner", "AutoTunedRouter")}


def class_table() -> dict[str, str | None]:
    """Exact ``"module:Class"`` names an artifact may name -> registry name (None for
    :data:`EXTRA_CLASSES`)."""
    from .registry import registered_class_paths
    return {**{k: None for k in EXTRA_CLASSES}, **registered_class_paths()}


def _resolve(name) -> type:
    if not isinstance(name, str):
        raise StateError(f"router class must be a string, got {type(name).__name__}")
    table = class_table()
    if name not in table:
        raise StateError(f"router class {name[:120]!r} is not a registered router class; "
                         "an artifact may only name one of the classes in the router registry")
    from .registry import router_class
    if table[name] is None:
        import importlib
        module, attr = EXTRA_CLASSES[name]
        cls = getattr(importlib.import_module(module), attr)
    else:
        cls = router_class(table[name])
    if not (isinstance(cls, type) and issubclass(cls, Router)) or router_class_name(cls) != name:
        raise StateError(f"registry entry {table[name]!r} does not resolve to {name!r}")
    return cls


def _plain(value, where: str):
    """A parameter value as JSON, or an error naming it (non-data values cannot be stored)."""
    from .encoders.base import Encoder
    if isinstance(value, Encoder):
        raise StateError(f"{where}: an encoder object; its fitted state is stored with the router, "
                         "pass the encoder by name to export")
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(float(value)):
            raise StateError(f"{where}: non-finite number {value!r}")
        return float(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        # an ``encoder`` entry (a wrapper's parameters for the router it builds) is stored
        # like the router's own ``encoder`` parameter
        return {k: _plain(_stored_param(k, v, f"{where}.{k}"), f"{where}.{k}")
                for k, v in value.items()}
    raise StateError(f"{where}: a {type(value).__name__} is not data (numbers, strings, lists, "
                     "dicts) and cannot be exported")


#: parameters holding the options a router passes to ``get_encoder``
ENCODER_OPTION_PARAMS = ("encoder_options", "encoder_kwargs")


def encoder_param(value, where: str = "parameter encoder"):
    """The JSON form of an ``encoder`` parameter: a built-in encoder name (the name that
    builds an encoder object's kind and MiniLM variant, ``precomputed`` without its file),
    which loading accepts.

    The object itself may be unfitted (a router fits a copy and stores that copy's state
    as its ``encoder_`` part), so only its kind (and a MiniLM's variant) is read here, as for
    the name ``"tfidf"``. A name that is not built in (a folder, a Hub model) is a
    :class:`StateError`.
    """
    from .encoders.base import Encoder
    from .encoders.state import encoder_name, stored_encoder_name
    if isinstance(value, Encoder):
        value = encoder_name(value)
    elif isinstance(value, str) and value.strip().lower().startswith("precomputed:"):
        value = "precomputed"  # the table travels in the state; its file is this machine's
    return stored_encoder_name(value, where)


def _stored_param(name: str, value, where: str):
    """``value`` as an artifact stores parameter ``name``: an encoder by built-in name, and
    encoder options without those naming files or folders (the cache directory, the file of
    precomputed vectors: this machine's business, never stored)."""
    from .encoders.state import PATH_OPTIONS
    if name == "encoder":
        return encoder_param(value, where)
    if name in ENCODER_OPTION_PARAMS and isinstance(value, dict):
        return {k: v for k, v in value.items() if k not in PATH_OPTIONS}
    return value


def _check_stored_encoders(params: dict, where: str) -> None:
    """Check (in place) every ``encoder`` and encoder-options entry of stored parameters,
    nested dicts included (a wrapper's parameters for the router it builds): a refit or copy
    of the loaded router builds them, so they may not name a file, folder or model."""
    from .encoders.state import check_stored_options, stored_encoder_name
    for key, value in params.items():
        if key == "encoder":
            params[key] = stored_encoder_name(value, f"{where}.{key}")
        elif key in ENCODER_OPTION_PARAMS:
            check_stored_options(value, f"{where}.{key}")
        if isinstance(value, dict):
            _check_stored_encoders(value, f"{where}.{key}")


def router_to_state(router: Router) -> tuple[dict, dict]:
    """``(document, arrays)`` of a fitted router (see the module docstring)."""
    router._check_fitted()
    params, tuples = {}, []
    nested = set(getattr(router, "_part_params_", ()))   # rebuilt from a nested part
    for k, v in router.params_at_fit().items():   # a later set_params changes no artifact
        if k in nested:
            continue
        v = _stored_param(k, v, f"parameter {k}")
        params[k] = _plain(v, f"parameter {k}")
        if isinstance(v, tuple):
            tuples.append(k)
    fields, arrays = router._get_state()
    for name in arrays:
        if not NAME_RE.match(name) or ".." in name:
            raise StateError(f"array name {name!r} is not allowed")
    return ({"class": router_class_name(router), "params": params, "tuple_params": tuples,
             "state": json_safe(fields)}, arrays)


def _kind(value) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "str"
    if isinstance(value, (list, tuple)):
        return "list"
    return "dict" if isinstance(value, dict) else "other"


def _check_param_types(cls, params: dict, where: str) -> None:
    """A parameter whose default is not None must keep its default's JSON kind (a number
    stays a number, a list a list...; a string default may also take a number)."""
    import inspect
    sig = inspect.signature(cls.__init__).parameters
    for name, value in params.items():
        default = sig[name].default
        if default is inspect.Parameter.empty or default is None or value is None:
            continue
        mixed = _kind(default) == "str" and _kind(value) == "number"  # e.g. alpha="auto" or 0.5
        if _kind(default) != _kind(value) and not mixed:
            raise StateError(f"{where}.params.{name}: expected a {_kind(default)} like the "
                             f"default {default!r}, got {type(value).__name__}")


def check_document(doc, where: str) -> tuple[type, dict, dict]:
    """Validate a state document's shape, class and parameters (no array is read)."""
    if not isinstance(doc, dict) or set(doc) != {"class", "params", "tuple_params", "state"}:
        got = sorted(doc) if isinstance(doc, dict) else type(doc).__name__
        raise StateError(f"{where}: expected keys class, params, tuple_params, state; got {got}")
    cls = _resolve(doc["class"])
    params = check_value(JSON_ANY, doc["params"], f"{where}.params")
    if not isinstance(params, dict):
        raise StateError(f"{where}.params: expected an object")
    valid = set(cls._param_names()) - set(getattr(cls, "_part_params_", ()))
    bad = sorted(set(params) - valid)
    if bad:
        raise StateError(f"{where}.params: {cls.__name__} has no parameter(s) {bad[:5]}")
    _check_param_types(cls, params, where)
    _check_stored_encoders(params, f"{where}.params")
    cls._check_stored_params(params, where)
    for name in check_value(ListOf(STR, 1000), doc["tuple_params"], f"{where}.tuple_params"):
        if name not in params or not isinstance(params[name], list):
            raise StateError(f"{where}.tuple_params: {name!r} is not a list parameter")
        params[name] = tuple(params[name])
    if not isinstance(doc["state"], dict):
        raise StateError(f"{where}.state: expected an object")
    return cls, params, doc["state"]


def router_from_state(doc, arrays: dict, where: str, headers: dict | None = None) -> Router:
    """Rebuild a router from :func:`router_to_state` output, validating everything first.

    Parameters
    ----------
    doc : dict
        The state document.
    arrays : dict
        Arrays by name (only the router's own, unprefixed).
    where : str
        Name used in error messages (e.g. the artifact path).
    headers : dict, optional
        ``name -> (dtype, shape)`` (default: taken from ``arrays``).

    Raises
    ------
    StateError
        Unknown class, unknown parameter, or state not matching the class's spec.
    """
    cls, params, fields = check_document(doc, where)
    if headers is None:
        headers = {k: (v.dtype, v.shape) for k, v in arrays.items()}
    dims = pool_dims(fields, where)
    checked = cls._check_state(fields, headers, dims)
    spec = cls.state_spec()
    check_indices(spec, arrays, dims)
    check_finite(spec, arrays)
    return cls._from_state(params, checked, arrays)


def prefixed(prefix: str, arrays: dict) -> dict:
    """``arrays`` with names ``prefix/name`` (a nested part's arrays)."""
    return {f"{prefix}/{k}": v for k, v in arrays.items()}


def unprefixed(prefix: str, arrays: dict) -> dict:
    """The arrays of part ``prefix``, with the prefix removed."""
    head = prefix + "/"
    return {k[len(head):]: v for k, v in arrays.items() if k.startswith(head)}


def save_router_part(name: str, router: Router) -> tuple[dict, dict]:
    """``({name: document}, {name/array: ndarray})`` of an inner (wrapped) router."""
    doc, arrays = router_to_state(router)
    return {name: doc}, prefixed(name, arrays)


def load_router_part(name: str, fields: dict, arrays: dict, where: str,
                     pool: list[str]) -> Router:
    """The inner router stored by :func:`save_router_part`; its pool must be ``pool``."""
    inner = router_from_state(fields[name], unprefixed(name, arrays), f"{where}.{name}")
    if list(inner.llm_names_) != list(pool):
        raise StateError(f"{where}.{name}: its LLM pool differs from the wrapper's")
    return inner


class InnerRouterState:
    """Mixin for wrapper routers holding a fitted inner router as ``router_``: its declared
    state is stored as the nested part ``router_`` (a state document and arrays named
    ``router_/...``) and rebuilt through the same explicit class table as the wrapper, so a
    wrapper can never name a class the table does not hold. Constructor parameters listed
    in the class's ``_part_params_`` are not stored; they get the rebuilt inner router.

    Reference: scikit-learn's meta-estimators (Buitinck et al., 2013), whose fitted inner
    estimator is an attribute ending in ``_``.
    """

    _state_ = {"router_": Part(router=True)}

    @property
    def uses_ground_truth(self) -> bool:    # type: ignore[override]
        """Whether the wrapped router reads the true scores of the queries it routes (oracle,
        r_o, cascade inside a wrapper): then so does the wrapper. The fitted ``router_`` says;
        before fitting, the router given (``router``) or named (``base``: a registry name)."""
        inner = getattr(self, "router_", None)
        if inner is None:
            inner = getattr(self, "router", None)
        if inner is None:
            return inner_reads_truth(getattr(self, "base", None), getattr(self, "base_params", None))
        return inner_reads_truth(inner)

    def _get_state(self):
        fields, arrays = super()._get_state()
        part, inner = save_router_part("router_", self.router_)
        return {**fields, **part}, {**arrays, **inner}

    @classmethod
    def _from_state(cls, params, fields, arrays):
        pool = fields.get("core_llms_") or fields["llm_names_"]
        inner = load_router_part("router_", fields, arrays, cls.__name__, pool)
        extra = {k: inner for k in getattr(cls, "_part_params_", ())}
        router = super()._from_state({**params, **extra}, fields, arrays)
        router.router_ = inner
        return router


def inner_reads_truth(spec, params: dict | None = None) -> bool:
    """``uses_ground_truth`` of a wrapped router given as a router or a registry name with its
    ``params`` (a name the registry does not hold, such as an artifact path, counts as not:
    the fitted router, once built, answers for it).

    Example
    -------
    >>> inner_reads_truth("oracle"), inner_reads_truth("knn"), inner_reads_truth(None)
    (True, False, False)
    """
    if spec is None:
        return False
    if isinstance(spec, str):
        from .registry import ROUTERS, make_router  # noqa: PLC0415 (as class_table: lazily)
        if spec not in ROUTERS:
            return False
        try:
            spec = make_router(spec, **dict(params or {}))  # hyperparameters only: nothing is fitted
        except Exception:  # noqa: BLE001 - an unbuildable name is reported when the wrapper fits
            return False
    return bool(getattr(spec, "uses_ground_truth", False))
