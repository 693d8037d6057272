"""The RouteJudge voting page: a FastAPI application over recorded (or live) answers.

Flow: ``POST /api/duel`` (a prompt id or a random draw, and an optional budget) makes
every router vote, selects the duel pair, and returns the two answers in random order
with identities hidden, plus a one-time token. ``POST /api/vote`` with the token and a
label writes the record (token consumption and record in one transaction) and returns
the reveal: LLM identities, router votes, costs and attribution. A malformed body gets
422 (non-finite numbers and text that is not valid Unicode included, before any token is
issued; a JSON key given twice too), an unknown token 404, a token used before 409, an unvoted token older than the
TTL 410, a client holding too many unvoted duels 429; none of them changes the database.
Pending duels live in the database too, so a restart loses nothing. Optional voter API key
and per-client rate limit: see :mod:`.access`.
"""

from __future__ import annotations

import asyncio
import math
import secrets
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Mapping

import numpy as np
import pandas as pd
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from starlette.concurrency import run_in_threadpool

from ...data import RoutingData
from ...errors import DataValidationError
from ...hyperparams import check_seed
from ...router import Router
from ...serving.guards import BodyLimit, SafeJSONResponse
from ..metrics import h2h_matrix, leaderboard, routers_of
from ..outcomes import read_outcomes, store_state
from ..rating import elo_bootstrap
from ..records import JudgeRecord, select_duel, utc_now
from ..store import JudgeStore, TokenError
from .access import add_access_control, client_of
from .live import BackendError, ask_backend
from .bodies import DuelRequest, UniqueKeysRoute, VoteRequest
from .single_flight import SingleFlight

__all__ = ["JudgeSession", "create_app", "DuelRequest", "VoteRequest"]

STATIC = Path(__file__).resolve().parent / "static"


def _clean(v):
    """JSON-safe value (NaN/inf -> None, numpy scalars -> Python)."""
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if isinstance(v, (np.floating, float)):
        return None if not math.isfinite(float(v)) else float(v)
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, np.bool_):
        return bool(v)
    return v


class JudgeSession:
    """State behind the voting page.

    Parameters
    ----------
    data : RoutingData
        The prompts that can be judged (e.g. a test split); its costs (when any) are the
        recorded cost of every LLM on every prompt.
    routers : mapping name -> fitted Router
    store : JudgeStore
    responses : pandas.DataFrame, optional
        Recorded answers: index = query ids, one column per LLM (missing = not feasible).
    backends : dict, optional
        Live mode: LLM -> ``{"base_url", "model", "api_key_env"}`` (see :mod:`.live`).
    seed : int
        Seed for prompt draws, duel tie-breaks and the A/B order.
    token_ttl_s : float, optional
        Unvoted duel tokens expire after this many seconds (None: never).
    max_pending : int, optional
        Most unvoted, unexpired duels one client may hold (None: no cap).
    router_seed : int, optional
        The seed the routers were built with (``judge serve --seed``), kept in each record's
        ``metadata["router_seed"]`` for ``judge replay`` (None: not recorded).
    """

    def __init__(self, data: RoutingData, routers: Mapping[str, Router], store: JudgeStore, *,
                 responses: pd.DataFrame | None = None, backends: dict | None = None, seed: int = 0,
                 token_ttl_s: float | None = 1800.0, max_pending: int | None = 50,
                 router_seed: int | None = None):
        if responses is None and not backends:
            raise ValueError("the voting page needs recorded responses (load the data with "
                             "with_responses=True) or live backends (--backends backends.yaml)")
        if len(routers) < 2:
            raise ValueError(f"give at least two routers, got {list(routers)}")
        for name, r in routers.items():
            if not r.is_fitted or list(r.llm_names_) != data.llm_names:
                raise ValueError(f"router {name!r} must be fitted on the same LLM pool as the data")
        self.data, self.routers, self.store = data, dict(routers), store
        self.responses, self.backends = responses, dict(backends or {})
        self.rng = np.random.default_rng(seed)
        for name, v in (("token_ttl_s", token_ttl_s), ("max_pending", max_pending)):
            if v is not None and not (math.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a positive number or None, got {v!r}")
        self.token_ttl_s, self.max_pending = token_ttl_s, max_pending
        self.router_seed = None if router_seed is None else check_seed(router_seed, "router_seed")
        self._lock = threading.Lock()
        self._stats_lock = threading.Lock()
        self._stats_flights: dict[int, SingleFlight] = {}
        self._stats_worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="judge-stats")
        self._row = {q: i for i, q in enumerate(data.query_ids)}

    @property
    def live(self) -> bool:
        return bool(self.backends)

    def feasible(self, i: int) -> list[str]:
        """LLMs that can be shown for prompt row ``i`` (a recorded answer, or a live backend)."""
        names = self.data.llm_names
        if self.live:
            return [m for m in names if m in self.backends]
        row = self.responses.loc[self.data.query_ids[i]] if self.data.query_ids[i] in self.responses.index else None
        if row is None:
            return []
        return [m for m in names if m in row.index and isinstance(row[m], str) and row[m].strip()]

    def prompts(self, task: str | None = None, search: str | None = None, limit: int = 50) -> list[dict]:
        """Prompt list for the picker (id, task, 160-character preview)."""
        out = []
        for qid, text, t in zip(self.data.query_ids, self.data.texts, self.data.tasks):
            if task and str(t) != task:
                continue
            if search and search.lower() not in str(text).lower():
                continue
            out.append({"query_id": qid, "task": None if pd.isna(t) else str(t),
                        "preview": ("\u2026" if len(str(text)) > 160 else "") + str(text)[-160:].strip()})
            if len(out) >= limit:
                break
        return out

    def info(self) -> dict:
        tasks = sorted({str(t) for t in self.data.tasks if not pd.isna(t)})
        mc = self.data.mean_costs() if self.data.costs is not None else None
        return _clean({"routers": list(self.routers), "llms": self.data.llm_names, "tasks": tasks,
                       "n_prompts": self.data.n_queries, "live": self.live,
                       "mean_costs": None if mc is None else dict(zip(self.data.llm_names, mc))})

    def _pick(self, query_id: str | None, task: str | None) -> int:
        if query_id is None:
            pool = np.arange(self.data.n_queries) if not task else \
                np.flatnonzero(self.data.queries["task"].astype(str).to_numpy() == task)
            if pool.size == 0:
                raise HTTPException(404, f"no prompt of task {task!r}")
            return int(self.rng.choice(pool))
        if query_id not in self._row:
            raise HTTPException(404, f"unknown prompt id {query_id!r}")
        return self._row[query_id]

    def new_duel(self, query_id: str | None = None, budget: float | None = None, task: str | None = None, *,
                 text: str | None = None, history: list[dict] | None = None, client: str | None = None) -> dict:
        """Route one prompt with every router, pick the pair, issue a token (hidden identities).

        Parameters
        ----------
        query_id : str, optional
            A prompt of the data; without it (and without ``text``) one is drawn at random
            (seeded), among ``task``'s prompts if given.
        budget : float, optional
            Per-query cost budget C given to every router.
        task : str, optional
            Task filter for random draws; the task recorded with a custom ``text``.
        text : str, optional
            Live mode only: a prompt typed by the person (routers reading ground truth cannot route it).
        history : list of dict, optional
            Live mode only: earlier turns ``{"role", "content"}`` forwarded to the backends.
        client : str, optional
            Who asks (an address), for the cap on unvoted duels per client.

        Returns
        -------
        dict with ``token``, ``query_id``, ``query``, ``task``, ``budget``, ``answers`` {"A", "B"}.
        """
        if (text is not None or history) and not self.live:
            raise HTTPException(422, "custom prompts and conversation history need live mode (--backends): "
                                     "recorded answers exist only for the dataset's prompts")
        if budget is not None and not (math.isfinite(budget) and budget >= 0):
            raise HTTPException(422, "budget must be a finite number >= 0")
        if self.max_pending is not None and client is not None and \
                self.store.pending_count(client, self.token_ttl_s) >= self.max_pending:  # before any work
            raise HTTPException(429, f"client {client} holds {self.max_pending} unvoted duels (the limit); "
                                     "vote on them or wait for them to expire")
        with self._lock:
            if text is not None:
                i, qid = None, f"custom-{secrets.token_hex(6)}"
                sub = RoutingData(pd.DataFrame({"query_id": [qid], "text": [text], "task": [task]}), self.data.llms,
                                  np.full((1, self.data.n_llms), np.nan), name="custom")
                feas = [m for m in self.data.llm_names if m in self.backends]
            else:
                i = self._pick(query_id, task)
                qid, sub, feas = self.data.query_ids[i], self.data.subset([i]), self.feasible(i)
                text = self.data.texts[i] if isinstance(self.data.texts[i], str) and self.data.texts[i] \
                    else f"[query {qid}]"
                task = None if pd.isna(self.data.tasks[i]) else str(self.data.tasks[i])
            if len(feas) < 2:
                raise HTTPException(409, f"prompt {qid!r} has fewer than two answers to compare")
            choices = {}
            for name, r in self.routers.items():
                if r.uses_ground_truth and i is None:
                    raise HTTPException(422, f"router {name!r} routes from recorded scores and cannot route "
                                             "a custom prompt; pick one of the dataset's prompts")
                try:
                    c = r.route_indices(sub, budget=budget, candidates=feas)
                except ValueError as exc:
                    raise HTTPException(422, f"router {name!r} cannot route with this budget: {exc}") from None
                choices[name] = self.data.llm_names[int(c[0])]
            a, b = select_duel(choices, feas, self.store.comparison_counts(), self.rng)
        costs = {}
        if self.data.costs is not None and i is not None:
            costs = {m: float(self.data.costs[i, j]) for j, m in enumerate(self.data.llm_names)
                     if not np.isnan(self.data.costs[i, j])}
        latencies, answers = {}, {}
        for side, m in (("A", a), ("B", b)):
            if self.live:
                try:
                    got = ask_backend(self.backends[m], text, history)
                except BackendError as exc:
                    raise HTTPException(502, f"backend of {m!r} failed: {exc}") from None
                answers[side], latencies[m] = got["text"], got["latency"]
                live_cost = self._live_cost(m, got)
                if live_cost is not None:
                    costs[m] = live_cost
            else:
                answers[side] = str(self.responses.loc[qid, m])
        payload = {"query_id": qid, "query": text, "task": task, "history": history or None,
                   "budget": budget, "feasible": feas, "router_choices": choices, "llm_a": a, "llm_b": b,
                   "costs": costs, "latencies": latencies, "created_at": utc_now(),
                   "metadata": {"source": "live" if self.live else "recorded", "dataset": self.data.name,
                                "answers": answers, **({} if self.router_seed is None else
                                                       {"router_seed": self.router_seed})}}
        token = secrets.token_urlsafe(24)
        try:
            self.store.issue_token(token, payload, client=client, max_pending=self.max_pending,
                                   ttl_s=self.token_ttl_s)
        except TokenError as exc:
            raise HTTPException(exc.status, str(exc)) from None
        return {"token": token, "query_id": qid, "query": text, "task": task, "budget": budget, "answers": answers}

    def _live_cost(self, m: str, got: dict) -> float | None:
        row = self.data.llms.set_index("name").loc[m]
        pi, po = row.get("input_price"), row.get("output_price")
        if got["prompt_tokens"] is None or got["completion_tokens"] is None or pd.isna(pi) or pd.isna(po):
            return None
        cost = (got["prompt_tokens"] * float(pi) + got["completion_tokens"] * float(po)) / 1e6
        if not (math.isfinite(cost) and cost >= 0):  # counts are capped; prices are the data's
            raise HTTPException(502, f"backend of {m!r} failed: its usage gives a cost of {cost!r} "
                                     "(expected a finite number >= 0)")
        return cost

    def vote(self, token: str, label: str) -> dict:
        """Consume the token and store the judgement; returns the reveal."""
        def build(p: dict) -> JudgeRecord:
            return JudgeRecord(query=p["query"], router_choices=p["router_choices"], llm_a=p["llm_a"],
                               llm_b=p["llm_b"], label=label, feasible=p["feasible"], task=p["task"],
                               query_id=p["query_id"], history=p.get("history"), budget=p["budget"], costs=p["costs"],
                               latencies=p["latencies"], created_at=p["created_at"], judged_at=utc_now(),
                               metadata=p["metadata"])
        try:
            rec = self.store.redeem(token, build, ttl_s=self.token_ttl_s)
        except TokenError as exc:
            raise HTTPException(exc.status, str(exc)) from None
        except DataValidationError as exc:  # a duel that cannot be stored (checked before it is issued)
            raise HTTPException(422, f"this duel cannot be stored ({exc}); nothing was written") from None
        return _clean({"record_id": rec.record_id, "label": rec.label, "llm_a": rec.llm_a, "llm_b": rec.llm_b,
                       "router_choices": rec.router_choices, "votes": rec.votes, "attribution": rec.attribution,
                       "costs": {"A": rec.costs.get(rec.llm_a), "B": rec.costs.get(rec.llm_b)},
                       "latencies": {"A": rec.latencies.get(rec.llm_a), "B": rec.latencies.get(rec.llm_b)}})

    def stats(self, n_boot: int = 100) -> dict:
        """Live leaderboard (with Elo intervals) and H2H matrix over every stored record.

        Computed once per database state (record count and last record id: a new vote makes
        the next call recompute) and at most once at a time: concurrent callers share one
        computation (:class:`.single_flight.SingleFlight`), which runs on the session's own
        worker thread and reads only the columns the statistics need (no prompt or answer
        texts; :func:`~recsys_router.judge.outcomes.read_outcomes`).
        """
        return self.stats_future(n_boot).result()

    def stats_future(self, n_boot: int = 100) -> Future:
        """:meth:`stats` as a future (the page awaits it without holding a thread)."""
        with self._stats_lock:
            flight = self._stats_flights.get(n_boot)
            if flight is None:
                flight = self._stats_flights[n_boot] = SingleFlight(
                    lambda: store_state(self.store), lambda key: self._stats(n_boot, key[1]),
                    self._stats_worker)
        return flight.get()

    def _stats(self, n_boot: int, last_id: int | None = None) -> dict:
        recs = read_outcomes(self.store, last_id)
        routers = list(dict.fromkeys([*self.routers, *routers_of(recs)]))
        if not recs:
            return {"n_records": 0, "leaderboard": [], "h2h": {"routers": routers, "matrix": []}}
        lb = leaderboard(recs, routers).set_index("router")
        el = elo_bootstrap(recs, routers, n_boot=n_boot, seed=0)
        lb = pd.concat([lb, el], axis=1).reset_index().sort_values("elo_median", ascending=False, kind="stable")
        h = h2h_matrix(recs, list(lb["router"]))
        return _clean({"n_records": len(recs), "leaderboard": lb.to_dict(orient="records"),
                       "h2h": {"routers": list(h.index), "matrix": h.to_numpy().tolist()}})


def create_app(session: JudgeSession, *, api_key: str | None = None, rate: float | None = None,
               burst: int = 20, max_body_bytes: int = 1_000_000,
               body_timeout_s: float | None = 30.0) -> FastAPI:
    """The FastAPI application (pages ``/`` and ``/stats``, JSON API under ``/api``).

    Parameters
    ----------
    session : JudgeSession
    api_key : str, optional
        Voter key required on ``/api/*`` (see :func:`.access.add_access_control`).
    rate, burst : float, int
        Per-client rate limit on ``/api/*`` (None: none).
    max_body_bytes : int
        Larger request bodies get 413 before they are read.
    body_timeout_s : float, optional
        Seconds a request body may take to arrive whole, else 408 (None: no deadline).

    Returns
    -------
    fastapi.FastAPI

    Example
    -------
    >>> app = create_app(session, api_key="k", rate=5.0)   # doctest: +SKIP
    """
    app = FastAPI(title="RouteJudge", description="Judge two routed answers side by side.",
                  default_response_class=SafeJSONResponse)
    app.state.session = session
    app.router.route_class = UniqueKeysRoute  # every JSON body: a key given twice is a 422
    # the last added runs first: the key and the rate limit (headers alone), then the body
    app.add_middleware(BodyLimit, limit=max_body_bytes, field="detail", check_declared=True,
                       timeout_s=body_timeout_s)
    add_access_control(app, api_key=api_key, rate=rate, burst=burst)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/", include_in_schema=False)
    def index():
        return FileResponse(STATIC / "index.html")

    @app.get("/stats", include_in_schema=False)
    def stats_page():
        return FileResponse(STATIC / "stats.html")

    @app.get("/api/info")
    def info():
        return session.info()

    @app.get("/api/prompts")
    def prompts(task: str | None = None, q: str | None = None, limit: int = 50):
        if not 1 <= limit <= 500:
            raise HTTPException(422, "limit must be between 1 and 500")
        return session.prompts(task, q, limit)

    @app.post("/api/duel")
    def duel(req: DuelRequest, request: Request):
        if req.text is not None and req.query_id is not None:
            raise HTTPException(422, "give either query_id or text, not both")
        history = None if req.history is None else [t.model_dump() for t in req.history]
        return session.new_duel(req.query_id, req.budget, req.task, text=req.text, history=history,
                                client=client_of(request))

    @app.post("/api/vote")
    def vote(req: VoteRequest):
        return session.vote(req.token, req.label)

    @app.get("/api/stats")
    async def stats():  # the state is read on a request thread; the computation is awaited, not waited for
        return await asyncio.wrap_future(await run_in_threadpool(session.stats_future))

    return app
