"""RouteJudge metrics: pure functions of a list of :class:`JudgeRecord`.

Notation: for record ``t`` and router ``r``, ``s_t(r)`` is the attributed score of eq. 1
(``None`` when ``r`` chose neither shown LLM, or did not vote in ``t``). ``P(r)`` is the
set of records in which ``r`` participates (``s_t(r)`` not None); ``V(r)`` the records in
which ``r`` voted. Elo / Bradley-Terry ratings live in :mod:`recsys_router.judge.rating`.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Callable, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from ..metrics.routereval import selection_entropy
from .records import JudgeRecord

__all__ = ["routers_of", "participation_rate", "pref_score", "win_rate", "by_task", "task_pref_scores",
           "task_win_rates", "h2h", "h2h_matrix", "mcnemar", "vote_entropy", "agreement",
           "cohen_kappa", "consensus_strength", "mean_consensus", "router_costs", "pareto_frontier",
           "leaderboard"]

Records = Sequence[JudgeRecord]


def routers_of(records: Records) -> list[str]:
    """Router names in order of first appearance."""
    return list(dict.fromkeys(r for rec in records for r in rec.router_choices))


def _scores(records: Records, router: str) -> list[float]:
    return [a for a in (rec.attribution.get(router) for rec in records) if a is not None]


def participation_rate(records: Records, router: str) -> float:
    """``|P(r)| / |V(r)|``: share of the router's voted records in which its LLM was shown.

    Returns NaN when the router voted in no record.

    Example
    -------
    A router whose pick was shown in 3 of its 4 records has rate 0.75.
    """
    voted = sum(router in rec.router_choices for rec in records)
    return len(_scores(records, router)) / voted if voted else float("nan")


def pref_score(records: Records, router: str) -> float:
    """PrefScore ``= (1/|P(r)|) * sum_{t in P(r)} s_t(r)`` (NaN when ``P(r)`` is empty)."""
    s = _scores(records, router)
    return float(np.mean(s)) if s else float("nan")


def win_rate(records: Records, router: str) -> float:
    """WinRate over participating records with a clear winner (label A or B).

    ``WinRate = |{t in P(r): label_t in {A, B}, s_t(r) = 1}| / |{t in P(r): label_t in {A, B}}|``;
    ties and "both bad" are left out. NaN when there is no such record.
    """
    won = n = 0
    for rec in records:
        s = rec.attribution.get(router)
        if s is not None and rec.label in ("A", "B"):
            n += 1
            won += s == 1.0
    return won / n if n else float("nan")


def by_task(records: Records, metric: Callable[[Records, str], float],
            routers: Sequence[str] | None = None) -> pd.DataFrame:
    """Task-conditioned metric: ``metric`` on the records of each task (rows) per router (columns)."""
    routers = list(routers or routers_of(records))
    tasks = sorted({str(rec.task) for rec in records})
    rows = {t: [metric([rec for rec in records if str(rec.task) == t], r) for r in routers] for t in tasks}
    return pd.DataFrame.from_dict(rows, orient="index", columns=routers).rename_axis("task")


def task_pref_scores(records: Records, routers: Sequence[str] | None = None) -> pd.DataFrame:
    """PrefScore per task (rows) and router (columns)."""
    return by_task(records, pref_score, routers)


def task_win_rates(records: Records, routers: Sequence[str] | None = None) -> pd.DataFrame:
    """WinRate per task (rows) and router (columns)."""
    return by_task(records, win_rate, routers)


def _pair_counts(records: Records, ri: str, rj: str) -> tuple[int, int, int]:
    """(wins of ri, wins of rj, draws) over shared participating records."""
    a = b = d = 0
    for rec in records:
        att = rec.attribution
        si, sj = att.get(ri), att.get(rj)
        if si is None or sj is None:
            continue
        if si > sj:
            a += 1
        elif sj > si:
            b += 1
        else:
            d += 1
    return a, b, d


def h2h(records: Records, ri: str, rj: str) -> float:
    """Head-to-head ``H2H(r_i, r_j) = (W_ij + D_ij / 2) / n_ij``.

    Over the ``n_ij`` records in which both routers participate, ``W_ij`` counts those with
    ``s_t(r_i) > s_t(r_j)`` (``r_i`` chose the winner, ``r_j`` the loser) and ``D_ij`` those
    with equal scores (same LLM, tie or both bad). ``H2H(i, j) + H2H(j, i) = 1``; NaN when
    ``n_ij = 0``.
    """
    a, b, d = _pair_counts(records, ri, rj)
    n = a + b + d
    return (a + 0.5 * d) / n if n else float("nan")


def h2h_matrix(records: Records, routers: Sequence[str] | None = None) -> pd.DataFrame:
    """``H2H(row, column)`` for every pair of routers (NaN diagonal)."""
    routers = list(routers or routers_of(records))
    m = pd.DataFrame(np.nan, index=pd.Index(routers, name="router"), columns=routers)
    for i, ri in enumerate(routers):
        for rj in routers[i + 1:]:
            v = h2h(records, ri, rj)
            m.loc[ri, rj] = v
            m.loc[rj, ri] = 1.0 - v if not math.isnan(v) else np.nan
    return m


def mcnemar(records: Records, ri: str, rj: str) -> dict:
    """McNemar's test between two routers with continuity correction.

    ``a`` = shared participating records that ``r_i`` won and ``r_j`` lost, ``b`` the
    reverse (the discordant pairs); ``chi2 = (|a - b| - 1)^2 / (a + b)`` with one degree of
    freedom. With ``a + b = 0`` the statistic is 0 and the p-value 1.

    Returns
    -------
    dict with keys ``a``, ``b``, ``chi2``, ``p_value``.
    """
    a, b, _ = _pair_counts(records, ri, rj)
    if a + b == 0:
        return {"a": 0, "b": 0, "chi2": 0.0, "p_value": 1.0}
    chi2 = (abs(a - b) - 1) ** 2 / (a + b)
    return {"a": a, "b": b, "chi2": float(chi2), "p_value": float(stats.chi2.sf(chi2, 1))}


def vote_entropy(records: Records, router: str, llms: Sequence[str] | None = None) -> tuple[float, float]:
    """RouterEval's selection entropy ``H = -sum_m p_m log2 p_m`` of a router's votes
    (:func:`recsys_router.metrics.routereval.selection_entropy`, the one definition) and
    ``H_norm = H / log2 |M|``.

    ``p_m`` is the share of the router's votes that went to LLM ``m``; ``M`` is ``llms`` or,
    by default, the union of the feasible sets of the router's records. ``H_norm`` is 0 when
    ``|M| <= 1``; both are NaN when the router never voted.

    Example
    -------
    >>> recs = [JudgeRecord("q", {"r": pick}, "x", "y", "A", ["x", "y"]) for pick in "xy"]
    >>> vote_entropy(recs, "r")
    (1.0, 1.0)
    """
    picks = [rec.router_choices[router] for rec in records if router in rec.router_choices]
    if not picks:
        return float("nan"), float("nan")
    pool = set(llms) if llms is not None else {m for rec in records if router in rec.router_choices
                                               for m in rec.feasible}
    index = {m: k for k, m in enumerate(sorted(pool | set(picks)))}
    h = selection_entropy(np.array([index[m] for m in picks]), len(index))
    return h, (h / math.log2(len(pool)) if len(pool) > 1 else 0.0)


def _paired(records: Records, ri: str, rj: str) -> list[tuple[str, str]]:
    return [(rec.router_choices[ri], rec.router_choices[rj]) for rec in records
            if ri in rec.router_choices and rj in rec.router_choices]


def agreement(records: Records, ri: str, rj: str) -> float:
    """Raw agreement ``p_o``: share of records (both voted) where both chose the same LLM."""
    pairs = _paired(records, ri, rj)
    return sum(x == y for x, y in pairs) / len(pairs) if pairs else float("nan")


def cohen_kappa(records: Records, ri: str, rj: str) -> float:
    """Cohen's kappa ``(p_o - p_e) / (1 - p_e)`` between two routers' choices.

    ``p_e = sum_m q_i(m) q_j(m)`` with ``q_i(m)`` the share of ``r_i``'s votes (over the
    paired records) for LLM ``m``. NaN when undefined (no paired record, or ``p_e = 1``).
    """
    pairs = _paired(records, ri, rj)
    if not pairs:
        return float("nan")
    n = len(pairs)
    po = sum(x == y for x, y in pairs) / n
    ci, cj = Counter(x for x, _ in pairs), Counter(y for _, y in pairs)
    pe = sum(ci[m] * cj[m] for m in ci) / n ** 2
    return float("nan") if pe >= 1.0 else (po - pe) / (1 - pe)


def consensus_strength(record: JudgeRecord) -> float:
    """``max_m votes(m) / N`` for one record with ``N`` voting routers."""
    return record.consensus


def mean_consensus(records: Records) -> float:
    """Mean consensus strength over records (NaN when empty)."""
    return float(np.mean([rec.consensus for rec in records])) if records else float("nan")


def router_costs(records: Records, router: str) -> float:
    """Mean cost of the router's chosen LLM over the records where that cost is known.

    The shown LLMs' costs are always recorded; simulated and recorded-answer records also
    carry every feasible LLM's cost, so non-participating choices are usually covered too.
    """
    c = [rec.costs[rec.router_choices[router]] for rec in records
         if router in rec.router_choices and rec.router_choices[router] in rec.costs]
    return float(np.mean(c)) if c else float("nan")


def pareto_frontier(costs: Sequence[float], prefs: Sequence[float]) -> np.ndarray:
    """Boolean mask of the points not dominated in (lower cost, higher PrefScore).

    Point ``i`` is dominated when some ``j`` has ``cost_j <= cost_i`` and ``pref_j >= pref_i``
    with at least one strict. Points with a NaN coordinate are never on the frontier.

    Example
    -------
    >>> pareto_frontier([1, 2, 3], [0.5, 0.4, 0.9]).tolist()
    [True, False, True]
    """
    c, p = np.asarray(costs, float), np.asarray(prefs, float)
    ok = ~(np.isnan(c) | np.isnan(p))
    out = np.zeros(len(c), dtype=bool)
    for i in np.flatnonzero(ok):
        dom = ok & (c <= c[i]) & (p >= p[i]) & ((c < c[i]) | (p > p[i]))
        out[i] = not dom.any()
    return out


def leaderboard(records: Records, routers: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per router: votes, participation, PrefScore, WinRate, entropy, mean cost, Pareto."""
    routers = list(routers or routers_of(records))
    rows = []
    for r in routers:
        h, hn = vote_entropy(records, r)
        rows.append({"router": r, "n_voted": sum(r in rec.router_choices for rec in records),
                     "n_participating": len(_scores(records, r)),
                     "participation": participation_rate(records, r), "pref_score": pref_score(records, r),
                     "win_rate": win_rate(records, r), "entropy": h, "entropy_norm": hn,
                     "mean_cost": router_costs(records, r)})
    df = pd.DataFrame(rows, columns=["router", "n_voted", "n_participating", "participation", "pref_score",
                                     "win_rate", "entropy", "entropy_norm", "mean_cost"])
    df["pareto"] = pareto_frontier(df["mean_cost"].to_numpy(float), df["pref_score"].to_numpy(float))
    return df
