"""Offline RouteJudge tournaments on recorded scores.

Routers are fitted on a train split; ``n`` test queries are drawn (seeded, without
replacement when there are enough); every router votes, a duel is selected exactly as on
the voting page, and a simulated person judges it from the recorded scores:

* both recorded scores below ``threshold`` -> "both_bad" (when a threshold is given);
* otherwise equal scores -> "tie";
* otherwise the higher-scored side wins;
* with probability ``noise`` the label is then replaced by one drawn uniformly from the
  four labels (label noise).

Test queries with an unobserved score for some LLM are left out of the draw (the person
could not judge that LLM's answer). The offline metric of each router on the same drawn
queries (mean recorded score and cost of its choice) is returned alongside, so the
preference ranking can be compared with the offline one.
"""

from __future__ import annotations


from dataclasses import dataclass, field
from typing import Mapping

import numpy as np
import pandas as pd
from scipy import stats

from ..data import RoutingData
from ..hyperparams import check_number
from .metrics import leaderboard
from .rating import bradley_terry, elo_bootstrap
from .records import LABELS, JudgeRecord, select_duel, utc_now
from .routers import fit_routers, train_test
from .store import JudgeStore

__all__ = ["judge_label", "simulate_tournament", "SimulationResult"]


def judge_label(score_a: float, score_b: float, threshold: float | None = None, *, tol: float = 1e-9) -> str:
    """The simulated person's label for two recorded scores (no noise).

    Example
    -------
    >>> judge_label(1.0, 0.0), judge_label(0.3, 0.3), judge_label(0.2, 0.1, threshold=0.5)
    ('A', 'tie', 'both_bad')
    """
    if np.isnan(score_a) or np.isnan(score_b):
        raise ValueError(f"cannot judge an unobserved score (got {score_a}, {score_b})")
    if threshold is not None and score_a < threshold and score_b < threshold:
        return "both_bad"
    if abs(score_a - score_b) <= tol:
        return "tie"
    return "A" if score_a > score_b else "B"


@dataclass
class SimulationResult:
    """Outcome of :func:`simulate_tournament`.

    Attributes
    ----------
    records : list of JudgeRecord
    offline : pandas.DataFrame
        Per router: mean recorded score (``offline_score``) and cost (``offline_cost``) of
        its choices on the drawn queries.
    notes : list of str
        What the draw left out or repeated: test queries without a score for every LLM
        (and tasks that lost every query), and a draw with replacement when ``n`` exceeds
        the complete test queries.
    """

    records: list[JudgeRecord]
    offline: pd.DataFrame
    notes: list[str] = field(default_factory=list)

    def comparison(self, n_boot: int = 200, seed: int = 0) -> pd.DataFrame:
        """Preference metrics next to offline metrics, one row per router."""
        lb = leaderboard(self.records, list(self.offline.index)).set_index("router")
        el = elo_bootstrap(self.records, list(self.offline.index), n_boot=n_boot, seed=seed)
        bt = bradley_terry(self.records, list(self.offline.index))
        return pd.concat([lb[["pref_score", "win_rate", "participation"]], el[["elo", "elo_lower", "elo_upper"]],
                          bt, self.offline], axis=1)

    def rank_correlation(self, metric: str = "pref_score") -> float:
        """Spearman correlation between a preference metric and ``offline_score``."""
        c = self.comparison(n_boot=0)
        ok = c[[metric, "offline_score"]].dropna()
        if len(ok) < 2:
            return float("nan")
        return float(stats.spearmanr(ok[metric], ok["offline_score"]).statistic)


def simulate_tournament(data: RoutingData, routers, *, n: int = 200, seed: int = 0,
                        budget: float | None = None, wtp: float | None = None, noise: float = 0.0,
                        threshold: float | None = None, test_size: float = 0.3,
                        router_params: Mapping[str, Mapping] | None = None,
                        store: JudgeStore | None = None, write: bool = True,
                        progress: bool = False) -> SimulationResult:
    """Run an offline tournament (see the module docstring).

    Parameters
    ----------
    data : RoutingData
        Recorded scores (its ``split`` column is used when it has train and test).
    routers : sequence of str/Router or mapping name -> spec
        Registry names, artifact folders or Router objects (unfitted ones are fitted on train).
    n : int
        Number of judged records to produce.
    seed : int
        Seed for the split, the draw, duel tie-breaks, A/B order and label noise, and the
        ``seed`` / ``random_state`` of every registry router that takes one (unless
        ``router_params`` sets it); records keep it as ``metadata["router_seed"]``, which
        ``judge replay`` routes with.
    budget, wtp : float, optional
        Routing policy given to every router (per-query cost budget C, or willingness to pay).
    noise : float
        Probability of replacing a label by a uniformly drawn one.
    threshold : float, optional
        Both scores below it -> "both_bad".
    test_size : float
        Test fraction when the data has no train/test split.
    router_params : mapping, optional
        Constructor parameters per registry name.
    store : JudgeStore, optional
        Records are written there (one transaction each); past comparisons are read from it.
    write : bool
        With False, ``store`` is only read (past comparisons) and the caller writes the
        returned records (``judge simulate --report`` does, together with its report).
    progress : bool
        Show tqdm bars.

    Returns
    -------
    SimulationResult
    """
    if not 0.0 <= noise <= 1.0:
        raise ValueError(f"noise must be a probability in [0, 1], got {noise}")
    check_number(budget, "budget", low=0, none=True)
    check_number(wtp, "wtp", low=0, none=True)
    check_number(threshold, "threshold", none=True)
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    train, test = train_test(data, test_size=test_size, seed=seed)
    complete = np.flatnonzero(~np.isnan(test.scores).any(axis=1))
    if complete.size == 0:
        raise ValueError(f"{data.name}: no test query has a recorded score for every LLM")
    fitted = fit_routers(routers, train, params=router_params, progress=progress, seed=seed)
    if len(fitted) < 2:
        raise ValueError("a tournament needs at least two routers")
    notes = _draw_notes(test, complete, n)
    rng = np.random.default_rng(seed)
    drawn = rng.choice(complete, size=n, replace=n > complete.size)
    uniq, inverse = np.unique(drawn, return_inverse=True)
    sub = test.subset(uniq)
    names = sub.llm_names
    choice = {r: router.route_indices(sub, wtp=wtp, budget=budget)[inverse] for r, router in fitted.items()}
    past = store.comparison_counts() if store is not None else {}
    texts, tasks, qids = sub.texts, sub.tasks, sub.query_ids
    recs = []
    it = range(n)
    if progress:
        from tqdm import tqdm  # noqa: PLC0415
        it = tqdm(it, desc="judging duels", unit="duel")
    for t in it:
        u = inverse[t]
        ch = {r: names[int(c[t])] for r, c in choice.items()}
        a, b = select_duel(ch, names, past, rng)
        ia, ib = names.index(a), names.index(b)
        sa, sb = float(sub.scores[u, ia]), float(sub.scores[u, ib])
        label = judge_label(sa, sb, threshold)
        noisy = bool(noise > 0 and rng.random() < noise)
        if noisy:
            label = LABELS[int(rng.integers(len(LABELS)))]
        costs = {} if sub.costs is None else {m: float(sub.costs[u, j]) for j, m in enumerate(names)
                                               if not np.isnan(sub.costs[u, j])}
        now = utc_now()
        text = texts[u] if isinstance(texts[u], str) and texts[u] else f"[query {qids[u]}]"
        task = tasks[u]
        rec = JudgeRecord(query=text, router_choices=ch, llm_a=a, llm_b=b, label=label, feasible=list(names),
                          task=None if task is None or (isinstance(task, float) and np.isnan(task)) else str(task),
                          query_id=qids[u], budget=budget, costs=costs, created_at=now, judged_at=now,
                          metadata={"source": "simulate", "dataset": data.name, "seed": seed, "router_seed": seed,
                                    "score_a": sa, "score_b": sb, "noisy": noisy, "wtp": wtp,
                                    "threshold": threshold})
        past[a] = past.get(a, 0) + 1
        past[b] = past.get(b, 0) + 1
        if store is not None and write:
            store.add(rec)
        recs.append(rec)
    rows = {}
    s = sub.scores.astype(np.float64)
    for r, c in choice.items():
        sc = s[inverse, c]
        cost = np.nan if sub.costs is None else float(np.nanmean(sub.costs.astype(np.float64)[inverse, c]))
        rows[r] = {"offline_score": float(sc.mean()), "offline_cost": cost}
    offline = pd.DataFrame.from_dict(rows, orient="index").rename_axis("router")
    return SimulationResult(recs, offline, notes)


def _draw_notes(test: RoutingData, complete: np.ndarray, n: int) -> list[str]:
    """Notes on the queries a tournament draws from: the ones it cannot (a score missing for
    some LLM), the tasks left without any, and repeats when ``n`` exceeds what is left.

    Example
    -------
    >>> d = RoutingData(pd.DataFrame({"query_id": ["a", "b", "c"], "text": ["x", "y", "z"],
    ...                               "task": ["t1", "t1", "t2"]}), ["m", "n"],
    ...                 [[1.0, 0.0], [0.0, 1.0], [1.0, np.nan]], require_observed=False)
    >>> for line in _draw_notes(d, np.array([0, 1]), 5): print(line)
    1 of 3 test queries lack a score for some LLM and are never drawn (a duel needs every candidate's score); tasks left without any query: ['t2']
    5 duels drawn from 2 complete test queries: queries repeat (drawn with replacement)
    """
    notes = []
    lost = test.n_queries - complete.size
    if lost:
        text = (f"{lost} of {test.n_queries} test queries lack a score for some LLM and are never "
                "drawn (a duel needs every candidate's score)")
        tasks = test.tasks
        if tasks is not None:
            gone = sorted(set(map(str, tasks)) - set(map(str, np.asarray(tasks)[complete])))
            if gone:
                text += f"; tasks left without any query: {gone[:10]}"
        notes.append(text)
    if n > complete.size:
        notes.append(f"{n} duels drawn from {complete.size} complete test queries: queries repeat "
                     "(drawn with replacement)")
    return notes
