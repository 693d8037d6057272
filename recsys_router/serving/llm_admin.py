"""``POST /llms`` and ``DELETE /llms/{name}``: change the served LLM pool without a restart.

Adding needs the service's API key, and is refused outright when no key is configured. A
change is made on a copy of the router (its learned state is reassigned, never mutated, by
``add_llm``/``remove_llm``), wrapped in a new artifact object with its new manifest, and
published by one assignment to :attr:`ServedRouter.current` once it is complete: an add is
all or nothing, the live artifact is never changed in place, and a request that took its
snapshot before the swap is routed to the end with the old pool.

The OpenAI-compatible proxy's backends belong to the same snapshot (``proxy_backends`` of
:attr:`ServedRouter.current`): ``POST /llms`` may carry the new LLM's ``backend`` (checked as
a ``backends.yaml`` entry), published with the pool change in the same assignment, and
``DELETE /llms/{name}`` drops a backend given that way (one from ``backends.yaml`` stays, for
a later add under that name).
"""

from __future__ import annotations

import asyncio
import copy
import datetime as _dt
import math
from typing import Optional

import numpy as np

from fastapi import FastAPI, HTTPException
from pydantic import BaseModel, Field

from ..coldstart.probes_input import check_strategy_label
from .backends import BackendSpecError, check_backend
from .guards import SafeStr, printable

__all__ = ["add_llm_admin_routes", "AddLLMRequest", "MAX_PROBES_PER_REQUEST", "ServedRouter"]

#: most probe records one ``POST /llms`` may carry
MAX_PROBES_PER_REQUEST = 10_000


class ProbeRecord(BaseModel):
    """One probe: the query text, the new LLM's score (and cost) on it, and optionally its
    probe weight (as written by ``recsys-router probes``). Numbers are JSON numbers (an
    integer or a float) and finite: ``true`` or ``"0.5"`` is a 422."""

    text: SafeStr
    score: float = Field(strict=True, allow_inf_nan=False)
    cost: Optional[float] = Field(default=None, ge=0, strict=True, allow_inf_nan=False)
    weight: Optional[float] = Field(default=None, ge=0, strict=True, allow_inf_nan=False)

    model_config = {"extra": "forbid"}   # a misspelt "wieght" is a 422, never ignored


class AddLLMRequest(BaseModel):
    """Body of ``POST /llms``."""

    name: SafeStr = Field(max_length=200)
    probes: list[ProbeRecord] = Field(min_length=1, max_length=MAX_PROBES_PER_REQUEST)
    price_in: Optional[float] = Field(default=None, ge=0, strict=True, allow_inf_nan=False)
    price_out: Optional[float] = Field(default=None, ge=0, strict=True, allow_inf_nan=False)
    strategy: Optional[SafeStr] = Field(default=None, max_length=100)
    backend: Optional[dict] = None   # {base_url, model, api_key_env}, as in backends.yaml

    model_config = {"extra": "forbid"}   # a misspelt "backnd" is a 422, never ignored


class ServedRouter:
    """The artifact a service routes with, replaced whole, never changed in place.

    A request reads :attr:`current` once and uses that snapshot (router, pool, manifest,
    the proxy's ``proxy_backends``) for everything it does; a pool change builds a new
    artifact object and assigns it. ``current`` starts as a copy of ``artifact`` (which is
    never changed) holding ``backends`` (LLM name -> backend; none when None).

    Example
    -------
    >>> served = ServedRouter(load_router("out/knn"))   # doctest: +SKIP
    >>> snap = served.current                           # doctest: +SKIP
    """

    def __init__(self, artifact, backends: dict | None = None):
        snap = copy.copy(artifact)
        snap.proxy_backends = dict(backends or {})
        self.current = snap


def _changed_copy(router):
    new = copy.copy(router)
    new.__dict__ = dict(router.__dict__)
    return new


def _non_finite(value, where: str = "") -> str | None:
    """The dotted path of the first float in ``value`` (nested dicts and lists) that is NaN or
    infinite, or None."""
    if isinstance(value, float):
        return None if math.isfinite(value) else (where or "value")
    items = value.items() if isinstance(value, dict) else enumerate(value) \
        if isinstance(value, (list, tuple)) else ()
    for k, v in items:
        bad = _non_finite(v, f"{where}[{k}]" if isinstance(k, int) else f"{where}.{k}".lstrip("."))
        if bad:
            return bad
    return None


def add_llm_admin_routes(app: FastAPI, served, cfg) -> None:
    """Add ``POST /llms`` and ``DELETE /llms/{name}`` to ``app`` serving ``served`` (a
    :class:`ServedRouter` holding an :class:`~recsys_router.export.artifact.ExportedRouter`)."""
    lock = asyncio.Lock()
    startup = dict(cfg.backends or {})   # backends.yaml: the proxy is on when it names any
    key_envs = {b.get("api_key_env") for b in startup.values()} - {None}

    def _require_key():
        if not cfg.api_key:
            raise HTTPException(403, "changing the LLM pool is disabled: start the service with an "
                                     "API key (serve --api-key KEY, or $RECSYS_ROUTER_API_KEY)")

    def _publish(new_router, llms: list[dict], backends: dict) -> None:
        snap = copy.copy(served.current)  # a new artifact object; the live one is untouched
        snap.router, snap.manifest = new_router, {**snap.manifest, "llms": llms}
        snap.proxy_backends = backends
        served.current = snap

    def _backend(req: AddLLMRequest) -> dict:
        if not startup:
            raise HTTPException(422, "backend: the OpenAI-compatible proxy is off (start the "
                                     "service with --backends backends.yaml to give LLMs backends)")
        try:
            be = check_backend(req.name.strip(), req.backend)
        except BackendSpecError as exc:   # never the URL: it may hold credentials
            raise HTTPException(422, f"backend{'.' + exc.field if exc.field else ':'} "
                                     f"{exc.reason}") from None
        if be["api_key_env"] is not None and be["api_key_env"] not in key_envs:
            raise HTTPException(422, f"backend.api_key_env: {printable(be['api_key_env'], 100)!r} "
                                     "is not a variable backends.yaml names; the service sends "
                                     "only those variables' values to backends")
        return be

    def _proxy_note(name: str, backends: dict) -> str:
        if name in backends:
            return (f"the OpenAI-compatible proxy routes to {name!r} (backend model "
                    f"{backends[name]['model']!r})")
        return (f"the OpenAI-compatible proxy will not route to {name!r}: it has no backend "
                "(give 'backend' in POST /llms, or name it in backends.yaml before the start)")

    @app.post("/llms", status_code=201)
    async def add_llm(req: AddLLMRequest):
        _require_key()
        texts = [p.text for p in req.probes]
        if len(set(texts)) != len(texts):
            raise HTTPException(422, "probes: the same query text appears twice")
        have_cost = [p.cost is not None for p in req.probes]
        if any(have_cost) and not all(have_cost):
            i = have_cost.index(False)
            raise HTTPException(422, f"probes[{i}]: no cost (give a cost for every probe or none)")
        have_w = [p.weight is not None for p in req.probes]
        if any(have_w) and not all(have_w):
            i = have_w.index(False)
            raise HTTPException(422, f"probes[{i}]: no weight (give a weight for every probe or none)")
        scores = {p.text: p.score for p in req.probes}
        costs = {p.text: p.cost for p in req.probes} if all(have_cost) else None
        weights = [p.weight for p in req.probes] if all(have_w) else None
        if req.strategy is not None:  # the rule `onboard --strategy` follows
            try:
                check_strategy_label(req.strategy)
            except ValueError as exc:
                raise HTTPException(422, str(exc)) from None
        backend = None if req.backend is None else _backend(req)
        prov = {"strategy": req.strategy.strip() if req.strategy else "unspecified",
                "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "via": "POST /llms"}
        async with lock:
            new = _changed_copy(served.current.router)
            try:
                await asyncio.to_thread(new.add_llm, req.name, scores, costs, price_in=req.price_in,
                                        price_out=req.price_out, weights=weights,
                                        provenance=prov)
            except (ValueError, TypeError) as exc:
                code = 409 if "already in the pool" in str(exc) else 422
                raise HTTPException(code, str(exc)) from None
            mean = await asyncio.to_thread(new.llm_mean_costs)
            mean = None if mean is None else float(np.float64(mean[-1]))
            if mean is not None and math.isinf(mean):  # never published: GET /llms must render
                raise HTTPException(422, f"the mean cost of {req.name!r} is not a finite number; "
                                         "its probe costs or prices are too large")
            entry = {"name": new.llm_names_[-1], "input_price": req.price_in,
                     "output_price": req.price_out,
                     "mean_cost": None if mean is None or math.isnan(mean) else mean,
                     "provenance": dict(new.llm_info_[new.llm_names_[-1]])}
            bad = _non_finite(entry)
            if bad:  # never published: GET /llms must render, and a NaN is no provenance
                raise HTTPException(422, f"{bad} of {req.name!r} is not a finite number; "
                                         f"{req.name!r} was not added")
            backends = dict(served.current.proxy_backends)
            if backend is not None:
                backends[entry["name"]] = backend
            _publish(new, list(served.current.manifest.get("llms") or []) + [entry], backends)
        out = {"added": entry["name"], "llms": new.llm_names_}
        if startup:
            out["proxy"] = _proxy_note(entry["name"], backends)
        return out

    @app.delete("/llms/{name:path}")
    async def remove_llm(name: str):
        _require_key()
        async with lock:
            if name not in served.current.router.llm_names_:
                raise HTTPException(404, f"unknown LLM {name[:200]!r}")
            new = _changed_copy(served.current.router)
            try:   # off the event loop, as an add: a large router's removal must not stall routing
                await asyncio.to_thread(new.remove_llm, name)
            except ValueError as exc:
                raise HTTPException(400, str(exc)) from None
            backends = dict(served.current.proxy_backends)
            backends.pop(name, None)
            if name in startup:   # backends.yaml's entry stays, for a later add of that name
                backends[name] = startup[name]
            _publish(new, [r for r in served.current.manifest.get("llms") or []
                           if r.get("name") != name], backends)
            stats = getattr(app.state, "stats", None)
            if stats is not None:  # its routing counter goes with it (GET /metrics)
                stats.chosen.pop(name, None)
        return {"removed": name, "llms": new.llm_names_}
