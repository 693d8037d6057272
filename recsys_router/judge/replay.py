"""Historical replay of a router on stored judgements (paper eq. C.21).

The duel of each stored record stays as it was judged. The replayed router ``R`` routes
the record's query (same policy: the record's ``budget``, or the willingness to pay kept in
``metadata["wtp"]`` by ``judge simulate --wtp``; restricted to the record's feasible LLMs) and gets

    s_t(R) = s_A  if R picks A,   s_B  if R picks B,   and does not participate otherwise,

with ``(s_A, s_B)`` from the stored label (eq. 1). The replayed records carry ``R`` as an
extra router choice, so every metric of :mod:`recsys_router.judge.metrics` applies unchanged
(the stored routers' own scores are unaffected: attribution depends only on each router's
own choice). Replayed records are for evaluation and are not written back to the store.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np
import pandas as pd

from ..data import RoutingData
from ..hyperparams import check_seed
from ..state.numbers import is_json_number
from .metrics import leaderboard
from .records import JudgeRecord
from ..router_spec import resolve_router

__all__ = ["replay", "replay_summary", "queries_of", "policy_of", "recorded_seed"]


def policy_of(rec: JudgeRecord) -> tuple[float | None, float | None]:
    """``(budget, wtp)`` the record's routers were given.

    The willingness to pay is kept in ``metadata["wtp"]`` (``None`` or absent: none).

    Raises
    ------
    ValueError
        ``metadata["wtp"]`` is not a finite number >= 0, or the record has both a budget and
        a willingness to pay (a router is given one or the other).

    Example
    -------
    >>> rec = JudgeRecord("q", {"r": "x"}, "x", "y", "A", ["x", "y"], metadata={"wtp": 2.0})
    >>> policy_of(rec)
    (None, 2.0)
    """
    wtp = rec.metadata.get("wtp")
    if wtp is not None and (not is_json_number(wtp) or wtp < 0):
        raise ValueError(f"record {rec.record_id}: metadata['wtp'] must be a finite number >= 0 or "
                         f"null, got {wtp!r}")
    if wtp is not None and rec.budget is not None:
        raise ValueError(f"record {rec.record_id}: has both a budget ({rec.budget}) and a willingness "
                         f"to pay (metadata['wtp'] = {wtp}); routers are given one or the other")
    return rec.budget, wtp


def recorded_seed(records: Sequence[JudgeRecord]) -> int | None:
    """The router seed every record was made with (``metadata["router_seed"]``, which
    ``judge simulate`` and ``judge serve`` store), or None when a record has none (an older
    database: its routers ran with their own default seeds) or the records disagree.

    Raises
    ------
    ValueError
        A record's ``metadata["router_seed"]`` is not a whole number from 0 to 2**32 - 1.

    Example
    -------
    >>> recs = [JudgeRecord("q", {"r": "x"}, "x", "y", "A", ["x", "y"], metadata={"router_seed": 7})] * 2
    >>> recorded_seed(recs), recorded_seed([*recs, JudgeRecord("q", {"r": "x"}, "x", "y", "A", ["x", "y"])])
    (7, None)
    """
    seeds = set()
    for rec in records:
        s = rec.metadata.get("router_seed")
        if s is None:
            return None
        try:
            seeds.add(check_seed(s, "router_seed"))
        except ValueError as exc:
            raise ValueError(f"record {rec.record_id}: metadata['router_seed']: {exc}") from None
    return seeds.pop() if len(seeds) == 1 else None


def queries_of(records: Sequence[JudgeRecord], llms: Sequence[str],
               truth: RoutingData | None = None) -> tuple[RoutingData, np.ndarray]:
    """Unlabelled RoutingData of the records' distinct queries, and each record's row in it.

    A query is the pair ``(query_id, query text)``: two records with the same id but
    different texts are two queries (each routed on its own text), and a record without an
    id never shares a row with one that has an id. A row keeps its records' ``query_id``
    when that id has one text among the records (so routers that look embeddings up by id,
    e.g. a precomputed encoder, find them); the others get made-up ids (``judge-0``,
    ``judge-1``, ..., never one of the records' ids). Scores come from ``truth``, looked up by
    the records' ``query_id``, when given (else they are NaN); costs come from the records
    (``truth``'s recorded costs, where known, take precedence).

    Example
    -------
    >>> recs = [JudgeRecord("a", {"r": "x"}, "x", "y", "A", ["x", "y"], query_id="q1"),
    ...         JudgeRecord("b", {"r": "x"}, "x", "y", "A", ["x", "y"], query_id="q1"),
    ...         JudgeRecord("a", {"r": "x"}, "x", "y", "B", ["x", "y"], query_id="q1")]
    >>> data, pos = queries_of(recs, ["x", "y"])
    >>> list(data.texts), pos.tolist()
    (['a', 'b'], [0, 1, 0])
    """
    texts: dict[str, set] = {}
    for rec in records:
        if rec.query_id is not None:
            texts.setdefault(rec.query_id, set()).add(rec.query)
    # rows that keep the record's id: one text, and an id RoutingData takes (not blank)
    own = {q for q, t in texts.items() if len(t) == 1 and q.strip()}
    rows, ids, pos = [], [], []
    index: dict[tuple[str | None, str], int] = {}
    n_made = 0
    for rec in records:
        key = (rec.query_id, rec.query)
        if key not in index:
            rid = rec.query_id
            if rid not in own:  # no id, or an id with several texts: a made-up, unused id
                rid = None
                while rid is None or rid in texts:
                    rid, n_made = f"judge-{n_made}", n_made + 1
            index[key] = len(rows)
            rows.append({"query_id": rid, "text": rec.query, "task": rec.task})
            ids.append(rec.query_id)
        pos.append(index[key])
    q = pd.DataFrame(rows)
    llms = list(llms)
    scores = np.full((len(q), len(llms)), np.nan)
    costs = np.full((len(q), len(llms)), np.nan)
    for rec, p in zip(records, pos):
        for m, c in rec.costs.items():
            if m in llms:
                costs[p, llms.index(m)] = c
    if truth is not None:
        tpos = pd.Index(truth.query_ids).get_indexer(pd.Index(ids, dtype=object))
        tl = pd.Index(truth.llm_names).get_indexer(llms)
        ok = tpos >= 0
        for j, col in enumerate(tl):
            if col >= 0:
                scores[ok, j] = truth.scores[tpos[ok], col]
                if truth.costs is not None:
                    tc = truth.costs[tpos[ok], col]
                    costs[ok, j] = np.where(np.isnan(tc), costs[ok, j], tc)
    data = RoutingData(q, llms, scores, None if np.isnan(costs).all() else costs, name="judge-replay")
    return data, np.asarray(pos, dtype=np.int64)


def _check_truth(records, data: RoutingData, pos: np.ndarray, truth: RoutingData | None, what: str) -> None:
    """Refuse to replay a router that reads ground truth when any record's query has no
    recorded score (its choice would be made on NaN)."""
    if truth is None:
        raise ValueError(f"{what} routes from ground-truth scores: pass truth= (the recorded data; "
                         "--data on the command line)")
    unscored = np.isnan(data.scores).all(axis=1)[pos]
    if unscored.any():
        bad = [records[t] for t in np.flatnonzero(unscored)]
        shown = ", ".join(repr(rec.query_id) if rec.query_id is not None else f"record {rec.record_id!r} (no id)"
                          for rec in bad[:3]) + (", ..." if len(bad) > 3 else "")
        raise ValueError(f"{what} routes from ground-truth scores, but {len(bad)} of {len(records)} stored "
                         f"records have a query with no recorded score in {truth.name!r} (query ids {shown}); "
                         "replay it on records judged on that data only")


def replay(router, records: Sequence[JudgeRecord], *, name: str | None = None,
           train: RoutingData | None = None, truth: RoutingData | None = None,
           params: dict | None = None, seed: int | None = None) -> list[JudgeRecord]:
    """Replay a router on stored records (eq. C.21).

    Parameters
    ----------
    router : str, Router or loaded artifact
        A fitted Router, an artifact folder, or a registry name (then ``train`` is required
        and the router is fitted on it).
    records : sequence of JudgeRecord
    name : str, optional
        Name under which the replayed router appears (default: the registry name or class name).
    train : RoutingData, optional
        Training data for unfitted routers.
    truth : RoutingData, optional
        Recorded scores of the same query ids, for routers that read ground truth (oracle):
        required for them, and every record's query must have a recorded score there (a
        ValueError names how many records miss one, and a few of their query ids).
    params : dict, optional
        Constructor parameters for a registry name.
    seed : int, optional
        ``seed`` / ``random_state`` of a registry router that takes one (unless ``params``
        sets it), as ``judge simulate`` and ``judge serve`` give their routers; None keeps the
        router's own default. Replaying a stored router under another name gives its stored
        choices when it routes with the seed the records were made with (:func:`recorded_seed`).

    Returns
    -------
    list of JudgeRecord
        Copies of ``records`` with the replayed router added to ``router_choices``.
    """
    if not records:
        raise ValueError("no stored records to replay on")
    r, needs_fit = resolve_router(router, params, seed=seed)
    name = name or (router if isinstance(router, str) else type(r).__name__)
    if needs_fit:
        if train is None:
            raise ValueError(f"router {name!r} is not fitted: pass train data to fit it on")
        r.fit(train)
    clash = [i for i, rec in enumerate(records) if name in rec.router_choices]
    if clash:
        raise ValueError(f"router name {name!r} already voted in stored record {clash[0]}; pick another name")
    llms = list(r.llm_names_)
    data, pos = queries_of(records, llms, truth)
    if r.uses_ground_truth:
        _check_truth(records, data, pos, truth, type(r).__name__)
    groups: dict[tuple, list[int]] = {}
    for t, rec in enumerate(records):
        cand = tuple(m for m in rec.feasible if m in set(llms))
        if not cand:
            raise ValueError(f"record {rec.record_id}: none of its feasible LLMs {rec.feasible} is known "
                             f"to router {name!r} ({llms})")
        groups.setdefault((cand, *policy_of(rec)), []).append(t)
    picks: list[str | None] = [None] * len(records)
    for (cand, budget, wtp), ts in groups.items():
        rows = np.unique(pos[ts])
        sub = data.subset(rows)
        idx = r.route_indices(sub, budget=budget, wtp=wtp, candidates=list(cand))
        at = {int(q): llms[int(c)] for q, c in zip(rows, idx)}
        for t in ts:
            picks[t] = at[int(pos[t])]
    return [dataclasses.replace(rec, router_choices={**rec.router_choices, name: m})
            for rec, m in zip(records, picks)]


def replay_summary(replayed: Sequence[JudgeRecord], name: str) -> pd.DataFrame:
    """Leaderboard of the stored routers plus the replayed one (metrics of eq. C.21)."""
    lb = leaderboard(replayed)
    lb["replayed"] = lb["router"] == name
    return lb
