"""The service side of the feedback loop: exploration, decision ids and ``POST /feedback``.

:class:`FeedbackLoop` is what :func:`recsys_router.serving.create_app` calls after the
router has decided: it applies the exploration policy (drawing the served LLM and its
exact propensity), gives every decision a ``decision_id`` and queues its row for the
decision log. :func:`add_feedback_route` adds ``POST /feedback``.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import os
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Literal, Optional

import numpy as np
from fastapi import FastAPI, HTTPException
from pydantic import BaseModel, Field, field_validator
from sqlalchemy.exc import SQLAlchemyError

from ..encoders.cache import memory_only
from .explore import ExplorationPolicy, choice_probabilities, draw, parse_explore, policy_utility
from .sampling import sample_scores
from .log_rows import decision_time
from .store import (MAX_PENDING, WRITE_ATTEMPTS, DecisionLog, DecisionWriter, DuplicateFeedback, LogFull,
                    UnknownDecision, decision_row, describe_error, is_value_error,
                    new_decision_id)

__all__ = ["FeedbackLoop", "FeedbackRequest", "add_feedback_route", "LOG_TEXT_MODES", "COMMIT_WAIT_S",
           "LOG_THREADS", "NOT_YET_S", "exploration_seed"]

LOG_TEXT_MODES = ("full", "hash", "none")
#: least time ``POST /feedback`` waits for its own decision's queued row (else a 503); five
#: flush intervals when that is longer. It covers a batch retried with back-off (0.75 s).
COMMIT_WAIT_S = 2.0
#: threads making ``POST /feedback``'s database calls: their own pool, never asyncio's default
#: one, which ``/route``'s model calls use (a database that stops answering cannot take it)
LOG_THREADS = 4
#: least time after a decision was issued (the time its id holds) during which feedback on it
#: that the log does not hold yet is a 503 "retry", not a 404: the instance that made it may
#: still be writing it (see :attr:`FeedbackLoop.not_yet_s`)
NOT_YET_S = 60.0


class FeedbackRequest(BaseModel):
    """Body of ``POST /feedback``: the decision and one outcome (``score`` or ``thumbs``).
    Numbers are JSON numbers (an integer or a float) and finite: ``true`` or ``"0.5"`` is a
    422."""

    decision_id: str = Field(min_length=1, max_length=64)
    score: Optional[float] = Field(default=None, ge=0.0, le=1.0, strict=True, allow_inf_nan=False)
    thumbs: Optional[Literal["up", "down"]] = None
    cost: Optional[float] = Field(default=None, ge=0.0, strict=True, allow_inf_nan=False)
    latency_ms: Optional[float] = Field(default=None, ge=0.0, strict=True, allow_inf_nan=False)

    model_config = {"extra": "forbid"}

    @field_validator("decision_id")
    @classmethod
    def _storable_id(cls, v):
        # the same rule as serving.guards.SafeStr (not imported: serving imports this module)
        if "\x00" in v or any("\ud800" <= c <= "\udfff" for c in v):
            raise ValueError("must not hold a NUL character or a lone surrogate")
        return v


def exploration_seed(seed: int, instance: str) -> np.random.SeedSequence:
    """The seed of an instance's exploration draws: ``seed`` and the first 8 bytes of the
    SHA-256 of the instance's name, as one numpy ``SeedSequence`` (the same pair, the same
    draws; another name, independent draws).

    Example
    -------
    >>> exploration_seed(0, "a").entropy == exploration_seed(0, "a").entropy
    True
    """
    name = int.from_bytes(hashlib.sha256(str(instance).encode("utf-8")).digest()[:8], "big")
    return np.random.SeedSequence([int(seed), name])


def _artifact_sha(router) -> str | None:
    files = (router.manifest or {}).get("files") or {}
    if not files:
        return None
    h = hashlib.sha256("".join(f"{k}={files[k]};" for k in sorted(files)).encode())
    return h.hexdigest()[:32]


class FeedbackLoop:
    """Exploration plus decision logging for one service.

    Parameters
    ----------
    router : ExportedRouter
    explore : str or ExplorationPolicy
        ``none``, ``epsilon:E``, ``softmax:T`` or ``thompson[:N]``.
    log_db : str, optional
        SQLAlchemy URL of the decision log (None: no log, but still decision ids and
        propensities in responses).
    log_text : {"full", "hash", "none"}
    seed : int
        Seed of the exploration draws, with ``instance`` (:func:`exploration_seed`).
    batch_size, flush_ms, max_pending
        See :class:`~recsys_router.feedback.store.DecisionWriter`.
    timeout_s : float
        Time limit of each decision-log database call (a PostgreSQL log's connect, statements
        and pool wait; any log's ``POST /feedback`` call, else a 503); at shutdown the queue
        gets twice this to be committed.
    instance : str, optional
        Name of this service instance, logged with each decision and part of the exploration
        seed (default ``host:pid``, so two processes never draw alike; give a fixed name to
        replay an instance's draws).
    """

    def __init__(self, router, explore="none", log_db: str | None = None, log_text: str = "hash",
                 seed: int = 0, batch_size: int = 256, flush_ms: float = 200.0,
                 max_pending: int = MAX_PENDING, instance: str | None = None, timeout_s: float = 5.0):
        if log_text not in LOG_TEXT_MODES:
            raise ValueError(f"--log-text must be one of {LOG_TEXT_MODES}, got {log_text!r}")
        self.router = router
        self.policy = explore if isinstance(explore, ExplorationPolicy) else parse_explore(explore)
        if self.policy.kind == "thompson":
            sample_scores(router.router, None, 2, 0, check_only=True)
        self.log_text = log_text
        self.seed = int(seed)
        self.instance = instance or f"{socket.gethostname()}:{os.getpid()}"
        # instances given one --seed must not make the same draws (the shared log would hold
        # copies, not independent explorations): the instance's name is part of the seed
        self.rng = np.random.default_rng(exploration_seed(self.seed, self.instance))
        self.artifact_sha = _artifact_sha(router)
        self.timeout_s = float(timeout_s)
        self.log = DecisionLog(log_db, timeout_s=self.timeout_s) if log_db else None
        self.writer = DecisionWriter(self.log, batch_size, flush_ms, max_pending) if self.log else None
        self._pool = (ThreadPoolExecutor(LOG_THREADS, thread_name_prefix="decision-log")
                      if self.log else None)
        #: the one thread making Thompson draws for :meth:`explore_async` (made on first use):
        #: off the event loop, one request at a time in the order asked, as the loop ran them
        self._sampler: ThreadPoolExecutor | None = None
        self.feedback_unavailable = 0   # feedback answered 503: the database failed or timed out
        self.feedback_failing = False   # whether the latest feedback database call failed so
        self.feedback_error: str | None = None
        #: how long ``POST /feedback`` waits for its decision's queued row to be committed
        self.commit_wait_s = max(COMMIT_WAIT_S, 5 * flush_ms / 1000.0)
        #: how long after its decision a missing row is "not in the log yet" (503), not unknown
        #: (404): :data:`NOT_YET_S`, or the longest an instance with these settings may take to
        #: write a row (5 flush intervals, and each of a batch's inserts running up to twice
        #: ``timeout_s``: the pool wait, then the connection and statements) if longer
        self.not_yet_s = max(NOT_YET_S, 5 * flush_ms / 1000.0 + 2 * WRITE_ATTEMPTS * self.timeout_s)

    def explore(self, texts, scores, costs, choice, policy, value, mask, router=None, tasks=None):
        """``(choice, propensity, probs)`` after exploration around the greedy ``choice``;
        ``router`` is the snapshot the request was routed with (default: the initial one),
        ``tasks`` the texts' task labels (None: none), read by Thompson draws of a task router."""
        router = router or self.router
        n = len(texts)
        if self.policy.kind == "none":
            probs = np.zeros((n, scores.shape[1]))
            probs[np.arange(n), choice] = 1.0
            return np.asarray(choice), np.ones(n), probs
        util, allowed = policy_utility(scores, costs, policy, value, mask)
        samples = None
        if self.policy.kind == "thompson":
            keys = list(zip(texts, tasks if tasks is not None else [None] * n))
            pairs = list(dict.fromkeys(keys))  # a text under two tasks is two queries
            data = router.to_data([p[0] for p in pairs],
                                  tasks=None if tasks is None else [p[1] for p in pairs])
            draws = sample_scores(router.router, data, self.policy.n_samples,
                                  int(self.rng.integers(2**31)))
            index = {key: k for k, key in enumerate(pairs)}
            draws = draws[:, [index[key] for key in keys]]
            samples = np.stack([policy_utility(d, costs, policy, value, mask)[0] for d in draws])
        probs = choice_probabilities(self.policy, choice, util, allowed, samples)
        ch, prop = draw(probs, self.rng)
        return ch, prop, probs

    async def explore_async(self, texts, scores, costs, choice, policy, value, mask, router=None,
                            tasks=None):
        """:meth:`explore` for a request handler, awaited without holding the event loop.

        Thompson draws (``n_samples`` passes of the network over the texts, seconds for a large
        batch) run in this loop's own sampling thread, with the encoders' in-memory cache only
        (:func:`~recsys_router.encoders.cache.memory_only`, as the model call): other requests
        are served meanwhile. That thread takes one request at a time, in the order the requests
        asked, and a request whose client goes away still makes its draws, so the exploration
        RNG is drawn exactly as by calling :meth:`explore` in that order: the same seed and
        instance give the same choices and propensities. The other kinds (a few array
        operations) run inline."""
        if self.policy.kind != "thompson":
            return self.explore(texts, scores, costs, choice, policy, value, mask, router, tasks)
        if self._sampler is None:   # made (and, by close, shut) on the event loop's thread only
            self._sampler = ThreadPoolExecutor(1, thread_name_prefix="thompson")

        def run():
            with memory_only():
                return self.explore(texts, scores, costs, choice, policy, value, mask, router, tasks)
        fut = asyncio.get_running_loop().run_in_executor(self._sampler, run)
        return await asyncio.shield(fut)   # a cancelled request never skips its draws

    def record(self, texts, results: list[dict], probs: np.ndarray, propensity: np.ndarray,
               candidates, router=None, tasks=None) -> None:
        """Give each result a ``decision_id`` and ``propensity`` and queue its log row
        (``router``: the snapshot the request was routed with, as for :meth:`explore`;
        ``tasks``: the texts' task labels the decisions were routed by, logged with them).

        Raises
        ------
        LogFull
            The log queue is full (nothing of this request is queued).
        ValueError
            ``candidates`` names an LLM the router does not know, or one twice
            (:class:`~recsys_router.errors.RepeatedNameError`); nothing is queued.
        """
        router = router or self.router
        names = router.llm_names
        # each decision row stores the list: never a name twice nor more names than the pool
        router.router.candidate_mask(candidates)
        cand = list(candidates) if candidates is not None else list(names)
        rows = []
        for i, res in enumerate(results):
            did = new_decision_id()
            res["decision_id"], res["propensity"] = did, float(propensity[i])
            if self.log is None:
                continue
            p = {names[j]: float(probs[i, j]) for j in np.flatnonzero(probs[i] > 0)}
            rows.append(decision_row(decision_id=did, instance=self.instance,
                                     artifact_sha=self.artifact_sha, policy=res["policy"],
                                     policy_value=res["policy_value"], explore=self.policy.spec,
                                     candidates=cand, chosen=res["llm"], propensity=propensity[i],
                                     probs=p, scores=res["scores"], costs=res["costs"],
                                     text=texts[i], log_text=self.log_text,
                                     task=None if tasks is None else tasks[i]))
        if rows:
            self.writer.submit(rows)

    async def feedback(self, req: FeedbackRequest) -> dict:
        """Store one outcome; HTTP errors 404 (unknown id), 409 (duplicate) and 503 (the
        database is down, this decision's row is still queued after :attr:`commit_wait_s`:
        only this decision is waited for, never the whole queue; or a recent decision is not
        in the log yet, :meth:`_not_logged`)."""
        if self.log is None:
            raise HTTPException(400, "this service keeps no decision log: start it with --log-db URL")
        if not await self._committed(req.decision_id):
            raise HTTPException(503, f"decision log busy: decision {req.decision_id!r} is still "
                                     f"queued after {self.commit_wait_s:g} s (the database is not "
                                     "keeping up); retry the feedback later")
        for wait in (0.0, self.writer.flush_s, 2 * self.writer.flush_s):
            # a decision of another instance may still sit in that instance's batch
            await asyncio.sleep(wait)
            try:
                row = await self._db_call(self.log.add_feedback, req.decision_id, score=req.score,
                                          thumbs=req.thumbs, cost=req.cost, latency_ms=req.latency_ms)
                # the same feedback again (a retry after a 503 whose write went through): no 409
                return {"decision_id": req.decision_id,
                        "status": "already recorded" if row.get("repeated") else "recorded"}
            except UnknownDecision:
                continue
            except DuplicateFeedback:
                raise HTTPException(409, f"decision {req.decision_id!r} already has feedback") from None
            except SQLAlchemyError as exc:
                if is_value_error(exc):  # the database refused this request's value: a 4xx
                    raise HTTPException(422, f"decision_id cannot be looked up: "
                                             f"{describe_error(exc)}") from None
                # the database is down or silent: say so, never a bare 500, and count it
                raise self._unavailable(describe_error(exc)) from None
            except asyncio.TimeoutError:
                raise self._unavailable(f"no answer within {self.timeout_s:g} s") from None
        raise self._not_logged(req.decision_id)

    async def _db_call(self, fn, *args, **kwargs):
        """``fn(*args, **kwargs)`` in the log's own threads, awaited at most :attr:`timeout_s`
        (``asyncio.TimeoutError`` past it; a call not yet started is then never made). A
        call that answers, with any outcome of the database, clears ``feedback_failing``."""
        fut = asyncio.get_running_loop().run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))
        try:
            out = await asyncio.wait_for(fut, self.timeout_s)
        except (UnknownDecision, DuplicateFeedback):
            self.feedback_failing = False
            raise
        self.feedback_failing = False
        return out

    def _not_logged(self, decision_id: str) -> HTTPException:
        """The answer for a decision the log does not hold: 404 when it never will (this
        instance dropped it, or its id is not one :func:`new_decision_id` issued within
        :attr:`not_yet_s`), else 503 with ``Retry-After`` (another instance may still hold
        it in its batch)."""
        if self.writer.was_dropped(decision_id):
            return HTTPException(404, f"decision {decision_id!r} is not logged: its batch was "
                                      "dropped after failed inserts (see GET /health)")
        issued = decision_time(decision_id)
        age = None if issued is None else time.time() - issued
        if age is None or abs(age) > self.not_yet_s:  # unknown, or long past any batch
            return HTTPException(404, f"unknown decision_id {decision_id!r}")
        return HTTPException(503, f"decision {decision_id!r} is not in the log yet (issued "
                                  f"{max(age, 0.0):.1f} s ago; the instance that made it may "
                                  "still be writing it): retry the feedback later",
                             headers={"Retry-After": "1"})

    def _unavailable(self, why: str) -> HTTPException:
        """A 503 for feedback the database could not take, counted for ``/health``."""
        self.feedback_unavailable += 1
        self.feedback_failing, self.feedback_error = True, why
        return HTTPException(503, f"decision log unavailable: {why}")

    async def _committed(self, decision_id: str) -> bool:
        """Wait until this instance no longer queues ``decision_id`` (its row committed or
        dropped), at most :attr:`commit_wait_s`; False if it is still queued then. Other
        decisions queued meanwhile are not waited for, and no thread is held: the queue is
        polled from the event loop a few times per flush interval."""
        end = time.monotonic() + self.commit_wait_s
        step = min(0.01, self.writer.flush_s / 4)
        while self.writer.is_pending(decision_id):
            if time.monotonic() >= end:
                return False
            await asyncio.sleep(step)
        return True

    def log_status(self) -> dict | None:
        """The decision-log writer's counters (:meth:`DecisionWriter.status`) and the feedback
        calls': ``feedback_unavailable`` (503s), ``feedback_failing`` (the latest call failed;
        ``ok`` is then False), ``feedback_error``; None without a log."""
        if self.writer is None:
            return None
        out = self.writer.status()
        out.update(feedback_unavailable=self.feedback_unavailable,
                   feedback_failing=self.feedback_failing, feedback_error=self.feedback_error)
        out["ok"] = out["ok"] and not self.feedback_failing
        return out

    def prometheus_lines(self) -> list[str]:
        """Prometheus series of the decision log (none without a log)."""
        st = self.log_status()
        if st is None:
            return []
        series = [
            ("written_total", "counter", "Decisions committed to the decision log.", st["written"]),
            ("failures_total", "counter", "Failed decision-log insert attempts (each retry counts).",
             st["failed_attempts"]),
            ("dropped_total", "counter", f"Decisions dropped after {WRITE_ATTEMPTS} failed inserts "
             "of their batch, or refused alone by the database.", st["dropped"]),
            ("rejected_total", "counter", "Decisions refused (HTTP 503) because the log queue was "
             "full or closed.", st["rejected"]),
            ("queue_depth", "gauge", "Decisions queued, not yet committed.", st["queued"]),
            ("failing", "gauge", "1 while the latest decision-log insert failed.", int(st["failing"])),
            ("feedback_unavailable_total", "counter", "Feedback answered 503: the database failed "
             "or gave no answer in time.", st["feedback_unavailable"]),
        ]
        lines = []
        for name, kind, text, value in series:
            full = f"recsys_router_decision_log_{name}"
            lines += [f"# HELP {full} {text}", f"# TYPE {full} {kind}", f"{full} {value}"]
        return lines

    def close(self) -> None:
        """Commit every queued decision (clean shutdown), waiting at most twice
        :attr:`timeout_s` for the database (the rest is dropped, with a warning)."""
        if self._sampler is not None:   # a later request (a restarted app) makes a new one
            self._sampler.shutdown(wait=False)
            self._sampler = None
        if self.writer is not None:
            self.writer.close(timeout=2 * self.timeout_s)
            self._pool.shutdown(wait=False, cancel_futures=True)
            self.log.dispose()


def add_feedback_route(app: FastAPI, loop: FeedbackLoop) -> None:
    """Add ``POST /feedback`` (same authentication as ``/route``)."""

    @app.post("/feedback")
    async def feedback(req: FeedbackRequest):
        if (req.score is None) == (req.thumbs is None):
            raise HTTPException(422, "invalid request: give exactly one of 'score' (in [0, 1]) "
                                     "or 'thumbs' ('up' or 'down')")
        return await loop.feedback(req)


def log_full_error(exc: LogFull) -> HTTPException:
    """503 for a request whose decisions cannot be queued (nothing served unlogged)."""
    return HTTPException(503, f"decision log unavailable: {exc}")
