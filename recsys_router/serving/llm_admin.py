"""``POST /llms`` and ``DELETE /llms/{name}``: change the served LLM pool without a restart.

Adding needs the service's API key, and is refused outright when no key is configured. A
change is made on a copy of the router (its learned state is reassigned, never mutated, by
``add_llm``/``remove_llm``), wrapped in a new artifact object with its new manifest, and
published by one assignment to :attr:`ServedRouter.current` once it is complete: an add is
all or nothing, the live artifact is never changed in place, and a request that took its
snapshot before the swap is routed to the end with the old pool.
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

from .guards import SafeStr

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


class AddLLMRequest(BaseModel):
    """Body of ``POST /llms``."""

    name: SafeStr = Field(max_length=200)
    probes: list[ProbeRecord] = Field(min_length=1, max_length=MAX_PROBES_PER_REQUEST)
    price_in: Optional[float] = Field(default=None, ge=0, strict=True, allow_inf_nan=False)
    price_out: Optional[float] = Field(default=None, ge=0, strict=True, allow_inf_nan=False)
    strategy: Optional[SafeStr] = Field(default=None, max_length=100)


class ServedRouter:
    """The artifact a service routes with, replaced whole, never changed in place.

    A request reads :attr:`current` once and uses that snapshot (router, pool, manifest)
    for everything it does; a pool change builds a new artifact object and assigns it.

    Example
    -------
    >>> served = ServedRouter(load_router("out/knn"))   # doctest: +SKIP
    >>> snap = served.current                           # doctest: +SKIP
    """

    def __init__(self, current):
        self.current = current


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

    def _require_key():
        if not cfg.api_key:
            raise HTTPException(403, "changing the LLM pool is disabled: start the service with an "
                                     "API key (serve --api-key KEY, or $RECSYS_ROUTER_API_KEY)")

    def _publish(new_router, llms: list[dict]) -> None:
        snap = copy.copy(served.current)  # a new artifact object; the live one is untouched
        snap.router, snap.manifest = new_router, {**snap.manifest, "llms": llms}
        served.current = snap

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
        prov = {"strategy": req.strategy or "unspecified",
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
            mean = new.llm_mean_costs()
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
            _publish(new, list(served.current.manifest.get("llms") or []) + [entry])
        return {"added": entry["name"], "llms": new.llm_names_}

    @app.delete("/llms/{name:path}")
    async def remove_llm(name: str):
        _require_key()
        async with lock:
            if name not in served.current.router.llm_names_:
                raise HTTPException(404, f"unknown LLM {name[:200]!r}")
            new = _changed_copy(served.current.router)
            try:
                new.remove_llm(name)
            except ValueError as exc:
                raise HTTPException(400, str(exc)) from None
            _publish(new, [r for r in served.current.manifest.get("llms") or []
                           if r.get("name") != name])
            stats = getattr(app.state, "stats", None)
            if stats is not None:  # its routing counter goes with it (GET /metrics)
                stats.chosen.pop(name, None)
        return {"removed": name, "llms": new.llm_names_}
