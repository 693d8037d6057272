"""The router HTTP service (FastAPI).

Endpoints: ``POST /route`` (one query or a batch, optional ``wtp``/``budget``/
``candidates``; every decision gets a ``decision_id`` and its ``propensity``),
``POST /feedback`` (the outcome of a decision, see :mod:`recsys_router.feedback.service`),
``GET /llms`` (with each LLM's provenance), ``POST /llms`` / ``DELETE /llms/{name}``
(change the pool without a restart, see :mod:`recsys_router.serving.llm_admin`),
``GET /health``, ``GET /metrics`` (Prometheus text), and,
when backends are configured, the OpenAI-compatible ``POST /v1/chat/completions`` (see
:mod:`recsys_router.serving.openai_proxy`).
"""

from __future__ import annotations

import asyncio
import hmac
import time
import warnings
from collections import Counter
from contextlib import asynccontextmanager
from typing import Optional

from fastapi import FastAPI, HTTPException
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel, Field

from ..encoders.cache import memory_only
from ..errors import RepeatedNameError
from ..export.artifact import ExportedRouter
from ..export.exported import check_tasks
from ..feedback.service import FeedbackLoop, add_feedback_route, log_full_error
from ..feedback.store import LogFull
from ..state import json_safe
from .batcher import MicroBatcher
from .config import ServiceConfig
from .json_body import JSONOnlyRoute
from .guards import (BodyLimit, SafeJSONResponse, SafeStr, check_text, content_length,
                     install_error_handlers, printable, route_label)
from .llm_admin import ServedRouter, add_llm_admin_routes

__all__ = ["create_app", "ServiceConfig", "RouteRequest"]


class RouteRequest(BaseModel):
    """Body of ``POST /route``: give ``query`` or ``queries``. ``wtp`` and ``budget`` are
    JSON numbers (an integer or a float), finite and >= 0: ``true`` or ``"1.5"`` is a 422,
    never read as 1.0 or 1.5. ``task`` (with ``query``) or ``tasks`` (with ``queries``, one
    label or null per query) are the queries' task labels, read by a router that routes by
    task (``GET /health`` says ``uses_tasks``) and ignored by the others."""

    query: Optional[SafeStr] = None
    queries: Optional[list[SafeStr]] = None
    task: Optional[SafeStr] = None
    tasks: Optional[list[Optional[SafeStr]]] = None
    wtp: Optional[float] = Field(default=None, ge=0, strict=True, allow_inf_nan=False)
    budget: Optional[float] = Field(default=None, ge=0, strict=True, allow_inf_nan=False)
    candidates: Optional[list[SafeStr]] = None

    model_config = {"extra": "forbid"}


def _failed(exc: BaseException) -> HTTPException:
    """A 500 naming the failure (type and one line), never a traceback."""
    return HTTPException(500, f"routing failed: {type(exc).__name__}: {printable(str(exc))}")


def _label(v) -> str:
    """A Prometheus label value: backslash, double quote and line feed escaped."""
    return str(v).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class _Stats:
    def __init__(self):
        self.requests = Counter()       # (endpoint, status) -> count
        self.chosen = Counter()         # llm -> count
        self.latency_sum = Counter()    # endpoint -> seconds
        self.latency_count = Counter()
        self.buckets = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
        self.hist = {}                  # endpoint -> list of bucket counts

    def observe(self, endpoint: str, status: int, seconds: float) -> None:
        self.requests[(endpoint, status)] += 1
        self.latency_sum[endpoint] += seconds
        self.latency_count[endpoint] += 1
        h = self.hist.setdefault(endpoint, [0] * len(self.buckets))
        for k, b in enumerate(self.buckets):
            if seconds <= b:
                h[k] += 1

    def prometheus(self, batcher: MicroBatcher) -> str:
        lines = ["# HELP recsys_router_requests_total HTTP requests by endpoint and status.",
                 "# TYPE recsys_router_requests_total counter"]
        for (ep, st), n in sorted(self.requests.items()):
            lines.append(f'recsys_router_requests_total{{endpoint="{_label(ep)}",status="{st}"}} {n}')
        lines += ["# HELP recsys_router_request_seconds Request latency.",
                  "# TYPE recsys_router_request_seconds histogram"]
        for ep, h in sorted(self.hist.items()):
            ep = _label(ep)
            for b, n in zip(self.buckets, h):
                lines.append(f'recsys_router_request_seconds_bucket{{endpoint="{ep}",le="{b}"}} {n}')
            lines.append(f'recsys_router_request_seconds_bucket{{endpoint="{ep}",le="+Inf"}} '
                         f"{self.latency_count[ep]}")
            lines.append(f'recsys_router_request_seconds_sum{{endpoint="{ep}"}} {self.latency_sum[ep]:.6f}')
            lines.append(f'recsys_router_request_seconds_count{{endpoint="{ep}"}} {self.latency_count[ep]}')
        lines += ["# HELP recsys_router_chosen_total Queries routed to each LLM.",
                  "# TYPE recsys_router_chosen_total counter"]
        for llm, n in sorted(self.chosen.items()):
            lines.append(f'recsys_router_chosen_total{{llm="{_label(llm)}"}} {n}')
        lines += ["# HELP recsys_router_batches_total Model calls made by the micro-batcher.",
                  "# TYPE recsys_router_batches_total counter",
                  f"recsys_router_batches_total {batcher.batches_run}",
                  "# HELP recsys_router_batched_queries_total Queries predicted by the micro-batcher.",
                  "# TYPE recsys_router_batched_queries_total counter",
                  f"recsys_router_batched_queries_total {batcher.texts_run}",
                  "# HELP recsys_router_batches_split_total Failed multi-request model calls, retried in halves.",
                  "# TYPE recsys_router_batches_split_total counter",
                  f"recsys_router_batches_split_total {batcher.batches_split}",
                  "# HELP recsys_router_prediction_failures_total Requests whose own model call failed.",
                  "# TYPE recsys_router_prediction_failures_total counter",
                  f"recsys_router_prediction_failures_total {batcher.requests_failed}"]
        return "\n".join(lines) + "\n"


def _header(scope, name: bytes) -> str | None:
    """The first ``name`` header of an ASGI scope (lower-case bytes), decoded as latin-1."""
    for k, v in scope.get("headers") or ():
        if k == name:
            return v.decode("latin-1")
    return None


class _Guard:
    """Plain ASGI middleware in front of every endpoint, outermost: the API key (all but
    ``/health``; 401), a malformed ``Content-Length`` (400) and a declared body size over the
    limit (413), all from the headers before any byte of the body is read, and per-endpoint
    counts and latency. Written
    against ASGI directly: Starlette's ``@app.middleware("http")`` runs each request through
    an extra task group and body streams, a measurable part of a one-query request's time."""

    def __init__(self, app, cfg: ServiceConfig, stats: _Stats, router):
        self.app, self.cfg, self.stats, self.router = app, cfg, stats, router

    async def _answer(self, scope, receive, send, label, t0, status: int, error: str) -> None:
        self.stats.observe(label, status, time.perf_counter() - t0)
        # the body is left unread: the connection cannot carry another request
        await SafeJSONResponse({"error": error}, status_code=status,
                               headers={"connection": "close"})(scope, receive, send)

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        t0 = time.perf_counter()
        label = route_label(self.router.routes, scope)  # never the raw path
        cfg = self.cfg
        if cfg.api_key and scope["path"] not in ("/health",):
            given = _header(scope, b"authorization") or ""
            token = given[7:] if given.lower().startswith("bearer ") else \
                (_header(scope, b"x-api-key") or "")
            if not hmac.compare_digest(token.encode(), cfg.api_key.encode()):
                return await self._answer(scope, receive, send, label, t0, 401,
                                          "missing or wrong API key (send 'Authorization: Bearer KEY')")
        try:
            length = content_length(scope.get("headers"), cfg.max_body_bytes)
        except ValueError as exc:
            return await self._answer(scope, receive, send, label, t0, 400, str(exc))
        if length is not None and length > cfg.max_body_bytes:
            return await self._answer(scope, receive, send, label, t0, 413,
                                      "request body (Content-Length) exceeds the limit of "
                                      f"{cfg.max_body_bytes} bytes")
        status = 500  # unless the app starts a response

        async def send_status(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)
        try:
            await self.app(scope, receive, send_status)
        finally:
            self.stats.observe(label, status, time.perf_counter() - t0)


def create_app(router: ExportedRouter, config: ServiceConfig | None = None) -> FastAPI:
    """Build the FastAPI application around a loaded artifact.

    Example
    -------
    >>> app = create_app(load_router("out/knn"))   # doctest: +SKIP
    """
    cfg = config or ServiceConfig()
    if router.router.uses_ground_truth:
        raise ValueError(f"{type(router.router).__name__} routes from ground-truth scores, which "
                         "requests do not have; it cannot be served")
    if router.uses_tasks:
        warnings.warn(f"{router.manifest.get('router_class')} routes by each query's task "
                      "label: clients send it as 'task' / 'tasks' in POST /route ('task' in "
                      "/v1/chat/completions); a query sent without one is routed as one with no "
                      "task (task-best: the best single LLM)", UserWarning,
                      stacklevel=2)
    stats = _Stats()
    served = ServedRouter(router, cfg.backends)  # POST/DELETE /llms swap served.current

    def _predict(texts, snap, tasks=None):
        with memory_only():  # the encoder's bounded in-memory LRU; no disk shard per request
            scores, costs, _ = snap.predict(texts) if tasks is None else snap.predict(texts, tasks=tasks)
        return scores, costs

    def _decide(texts, scores, costs, snap, **kw):
        with memory_only():
            return snap.decide(texts, scores, costs, **kw)

    batcher = MicroBatcher(_predict, max_batch=cfg.max_batch, max_wait_ms=cfg.batch_wait_ms)
    loop = FeedbackLoop(router, cfg.explore, cfg.log_db, cfg.log_text, seed=cfg.seed,
                        batch_size=cfg.log_batch, flush_ms=cfg.log_flush_ms,
                        timeout_s=cfg.log_timeout_s, instance=cfg.instance)

    @asynccontextmanager
    async def lifespan(app):
        try:
            yield
        finally:
            await batcher.stop()
            loop.close()  # commit every queued decision

    app = FastAPI(title="recsys-router", version=str(router.manifest.get("package_version")),
                  lifespan=lifespan, default_response_class=SafeJSONResponse)
    app.state.served, app.state.config, app.state.stats, app.state.batcher = served, cfg, stats, batcher
    app.state.feedback_loop = loop
    # every JSON body (route, feedback, the proxy, POST /llms): sent as application/json (else
    # 415), and a key given twice is a 422
    app.router.route_class = JSONOnlyRoute

    install_error_handlers(app, "error")

    @app.get("/health")
    async def health():
        snap = served.current
        out = {"status": "ok", "router": snap.manifest.get("router_class"), "n_llms": len(snap.llm_names),
               "uses_tasks": snap.uses_tasks}
        log = loop.log_status()
        if log is not None:  # a lost or failing decision log is visible, not silent
            out["decision_log"] = log
            out["status"] = "ok" if log["ok"] else "degraded"
        return out

    @app.get("/llms")
    async def llms():
        snap = served.current
        name, value = snap.default_policy
        return {"llms": snap.manifest.get("llms", [{"name": n} for n in snap.llm_names]),
                "default_policy": {"name": name, "value": value},
                "encoder": snap.manifest.get("encoder")}

    @app.get("/metrics")
    async def metrics():
        text = stats.prometheus(batcher) + "".join(f"{x}\n" for x in loop.prometheus_lines())
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    async def route_texts(texts: list[str], wtp, budget, candidates, snap=None,
                          fields: list[str] | None = None, tasks: list | None = None,
                          argmax: bool = False) -> list[dict]:
        # fields: what the client called each text (the proxy's messages[i].content); tasks:
        # one task label (or None) per text; argmax: route by the best predicted score whatever
        # the artifact's default policy (the proxy's router-argmax)
        if not texts:
            raise HTTPException(400, "give 'query' (a string) or 'queries' (a non-empty list)")
        if len(texts) > cfg.max_batch:
            raise HTTPException(413, f"batch of {len(texts)} queries exceeds the limit of {cfg.max_batch}")
        for i, t in enumerate(texts):
            where = fields[i] if fields else f"queries[{i}]"
            if not t.strip():
                raise HTTPException(400, f"{where} is empty")
            try:
                check_text(t)  # the proxy reaches here without the request model's check
            except ValueError as exc:
                raise HTTPException(422, f"{where}: {exc}") from None
            if len(t) > cfg.max_text_chars:
                raise HTTPException(413, f"{where} has {len(t)} characters; the limit is "
                                         f"{cfg.max_text_chars}")
        if wtp is not None and budget is not None:
            raise HTTPException(400, "give either 'wtp' or 'budget', not both")
        if tasks is not None:
            try:
                tasks = check_tasks(tasks, len(texts))
            except ValueError as exc:
                raise HTTPException(400, str(exc)) from None
        if snap is None:  # one snapshot for the whole request, whatever /llms does meanwhile
            snap = served.current
        labels = tasks  # logged with the decisions whatever the router reads
        if not snap.uses_tasks or (tasks is not None and all(t is None for t in tasks)):
            tasks = None  # a router that does not read them: routed as without them
        try:
            snap.router.candidate_mask(candidates)  # validate before predicting
        except ValueError as exc:  # a name given twice is malformed whatever the pool: a 422
            raise HTTPException(422 if isinstance(exc, RepeatedNameError) else 400, str(exc)) from exc
        custom = snap.custom_routing
        # request-dependent values are checked before or between the model calls; a failure
        # of the model or the service is a 500 with a JSON body, whatever its exception type
        try:
            scores, costs = await batcher.submit(texts, snap, tasks=tasks)
        except Exception as exc:  # noqa: BLE001 - report, do not leak a traceback
            raise _failed(exc) from exc
        asked = "wtp" if wtp is not None else "budget" if budget is not None else None
        default = "argmax" if argmax else snap.default_policy[0]   # what routes without wtp/budget
        if costs is None and not custom and (asked or default != "argmax"):
            if asked:  # what the client asked for: a 400
                raise HTTPException(400, f"the {asked} policy needs predicted costs; this router "
                                         "has none")
            raise HTTPException(500, f"the artifact's default policy {snap.default_policy[0]!r} "
                                     "needs predicted costs; this router has none")
        try:
            if custom:  # e.g. zero: the router's own decision rule
                choice, policy, value = await asyncio.to_thread(
                    _decide, texts, scores, costs, snap, wtp=wtp, budget=budget, candidates=candidates,
                    argmax=argmax, **({} if tasks is None else {"tasks": tasks}))
            else:
                choice, policy, value = snap.decide(texts, scores, costs, wtp=wtp, budget=budget,
                                                    candidates=candidates, argmax=argmax)
            # Thompson draws run off the event loop (the feedback loop's sampling thread)
            choice, propensity, probs = await loop.explore_async(
                texts, scores, costs, choice, policy, value, snap.router.candidate_mask(candidates),
                snap, tasks=tasks)
            out = snap.results(choice, policy, value, scores, costs, candidates)
        except Exception as exc:  # noqa: BLE001
            raise _failed(exc) from exc
        try:
            loop.record(texts, out, probs, propensity, candidates, snap, tasks=labels)
        except LogFull as exc:
            raise log_full_error(exc) from exc
        # an LLM removed while this request ran on the old pool is not counted again (DELETE
        # /llms drops its counter: labels stay bounded)
        pool = None if served.current is snap else set(served.current.llm_names)
        for r in out:
            if pool is None or r["llm"] in pool:
                stats.chosen[r["llm"]] += 1
        # a NaN or infinite prediction (an unknown cost, say) is null, never a failed answer
        return json_safe(out)

    app.state.route_texts = route_texts

    @app.post("/route")
    async def route(req: RouteRequest):
        if (req.query is None) == (req.queries is None):
            raise HTTPException(400, "give exactly one of 'query' (a string) or 'queries' (a list)")
        if req.task is not None and req.query is None:
            raise HTTPException(400, "'task' labels a single 'query'; with 'queries' give 'tasks', "
                                     "one label (or null) per query")
        if req.tasks is not None and req.queries is None:
            raise HTTPException(400, "'tasks' labels 'queries', one per query; with a single "
                                     "'query' give 'task'")
        texts = [req.query] if req.query is not None else req.queries
        tasks = [req.task] if req.task is not None else req.tasks
        results = await route_texts(texts, req.wtp, req.budget, req.candidates, tasks=tasks)
        # plain str / float / None values: rendered directly (FastAPI's jsonable_encoder walk of
        # every score dict is skipped)
        return SafeJSONResponse(results[0] if req.query is not None else {"results": results})

    add_feedback_route(app, loop)
    add_llm_admin_routes(app, served, cfg)
    if cfg.backends:
        from .openai_proxy import add_openai_routes
        add_openai_routes(app, served, cfg)
    # the last added runs first: _Guard (key and declared size, from the headers alone), then
    # BodyLimit (bytes received, within body_timeout_s)
    app.add_middleware(BodyLimit, limit=cfg.max_body_bytes, timeout_s=cfg.body_timeout_s)
    app.add_middleware(_Guard, cfg=cfg, stats=stats, router=app.router)
    return app
