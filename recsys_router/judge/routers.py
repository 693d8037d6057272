"""Resolving router specifications for RouteJudge (registry names, artifacts, objects)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping, Sequence

from ..data import RoutingData
from ..router import Router

__all__ = ["resolve_router", "fit_routers", "parse_router_params", "train_test"]


def resolve_router(spec, params: Mapping | None = None) -> tuple[Router, bool]:
    """Turn a spec into a router; returns ``(router, needs_fit)``.

    Parameters
    ----------
    spec : str, Router or loaded artifact
        A registry name (``recsys_router.registry.make_router``), a folder holding an exported
        router artifact, a :class:`Router` (fitted or not) or an object with a ``router``
        attribute (an ``ExportedRouter``).
    params : dict, optional
        Constructor parameters for a registry name.
    """
    if isinstance(spec, Router):
        return spec, not spec.is_fitted
    if isinstance(getattr(spec, "router", None), Router):
        return spec.router, not spec.router.is_fitted
    if not isinstance(spec, str):
        raise TypeError(f"a router must be a name, an artifact folder or a Router, got {type(spec).__name__}")
    if Path(spec).is_dir() and (Path(spec) / "manifest.json").exists():
        from ..export import load_router  # noqa: PLC0415 (heavy, only when used)
        return load_router(spec).router, False
    from ..registry import make_router  # noqa: PLC0415 (imports models lazily)
    return make_router(spec, **dict(params or {})), True


def fit_routers(specs, train: RoutingData, val: RoutingData | None = None,
                params: Mapping[str, Mapping] | None = None, progress: bool = False) -> dict[str, Router]:
    """Resolve and (when needed) fit every router.

    Parameters
    ----------
    specs : sequence of str/Router, or mapping display name -> spec
    train, val : RoutingData
    params : mapping name -> constructor parameters (for registry names)

    Returns
    -------
    dict display name -> fitted Router
    """
    if isinstance(specs, Mapping):
        items = list(specs.items())
    else:
        items = [(s if isinstance(s, str) else type(s).__name__, s) for s in specs]
    names = [n for n, _ in items]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"router names must be unique, repeated: {dup}")
    if len(items) < 1:
        raise ValueError("give at least one router")
    out = {}
    it = items
    if progress:
        from tqdm import tqdm  # noqa: PLC0415
        it = tqdm(items, desc="fitting routers", unit="router")
    for name, spec in it:
        router, needs_fit = resolve_router(spec, (params or {}).get(name))
        if needs_fit:
            router.fit(train, val)
        if list(router.llm_names_) != list(train.llm_names):
            raise ValueError(f"router {name!r} knows LLMs {router.llm_names_}, but the data has "
                             f"{train.llm_names}; use the same LLM pool and order")
        out[name] = router
    return out


def parse_router_params(text: str | None) -> dict[str, dict]:
    """Parse ``--router-params`` JSON: ``{"knn": {"k": 10}}`` (or a path to such a file)."""
    if not text:
        return {}
    raw = Path(text).read_text(encoding="utf-8") if Path(text).is_file() else text
    try:
        d = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"--router-params must be JSON like '{{\"knn\": {{\"k\": 10}}}}': {exc}") from None
    if not isinstance(d, dict) or not all(isinstance(v, dict) for v in d.values()):
        raise ValueError("--router-params must map router names to objects of constructor parameters")
    return d


def train_test(data: RoutingData, *, test_size: float = 0.3, seed: int = 0,
               splits: Sequence[str] = ("train", "test")) -> tuple[RoutingData, RoutingData]:
    """The dataset's own train/test split when its ``split`` column has both, else a seeded one."""
    vals = set(data.queries["split"].dropna().astype(str).str.lower())
    if set(splits) <= vals:
        parts = data.split(column="split")
        return parts[splits[0]], parts[splits[1]]
    if not 0 < test_size < 1:
        raise ValueError(f"test_size must be in (0, 1), got {test_size}")
    parts = data.split((1 - test_size, test_size), seed=seed)
    return parts["train"], parts["test"]
