"""Elo and Bradley-Terry ratings between routers, from judged comparisons.

**Games.** Each record yields one game for every pair of participating routers that
chose *different* sides (one chose A, the other B). The game score of router ``i``
against ``j`` is ``g = 0.5 + (s_i - s_j) / 2`` with the eq. 1 scores: 1 when ``i``'s side
won, 0 when it lost, 0.5 for a tie or "both bad" (a draw). Routers that chose the same
side, or did not participate, play no game in that record. A record's games come in a
canonical order, pairs of router names sorted (``i < j``), whatever the order of its
``router_choices``: Elo depends on the order of games, and a record built in memory and the
same record read back from the database (routers in name order) must rate the same.

**Elo.** Online updates in record order: ``E_i = 1 / (1 + 10^((R_j - R_i) / 400))``,
``R_i += K (g - E_i)``, ``R_j -= K (g - E_i)``; every router starts at ``init``.

**Bootstrap.** Confidence intervals resample the *records* with replacement and
replay them in a shuffled order (Elo depends on order), ``n_boot`` times with a seed;
the interval is the (alpha/2, 1 - alpha/2) percentile range.

**Bradley-Terry.** Maximum likelihood of ``P(i beats j) = p_i / (p_i + p_j)`` on the same
games (a draw counts as half a win each), fitted with Hunter's (2004) MM iterations
``p_i <- W_i / sum_j n_ij / (p_i + p_j)``; ``prior`` adds that many virtual draws to every
pair that met, so an unbeaten router stays finite. Ratings are reported on the Elo
scale, ``400 log10 p_i`` shifted to mean ``init``; it is a cross-check: with enough games
it ranks the routers like Elo.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from ..errors import few
from ..hyperparams import check_number
from ..sweep_check import MAX_BOOT
from .records import JudgeRecord

__all__ = ["games", "elo_ratings", "elo_bootstrap", "bradley_terry"]


def games(records: Sequence[JudgeRecord]) -> list[tuple[int, str, str, float]]:
    """All router-vs-router games: ``(record index, router i, router j, score of i)``.

    Records in the given order; within a record, pairs ``(i, j)`` with ``i < j`` in sorted
    order of the router names (not the order of ``router_choices``).

    Example
    -------
    >>> from recsys_router.judge.records import JudgeRecord
    >>> rec = JudgeRecord("q", {"r1": "x", "r2": "y", "r3": "x"}, "x", "y", "A", ["x", "y"])
    >>> games([rec])
    [(0, 'r1', 'r2', 1.0), (0, 'r2', 'r3', 0.0)]
    >>> games([JudgeRecord("q", {"r2": "y", "r1": "x"}, "x", "y", "A", ["x", "y"])])
    [(0, 'r1', 'r2', 1.0)]
    """
    out = []
    for t, rec in enumerate(records):
        att = rec.attribution
        side = {r: rec.router_choices[r] for r, s in att.items() if s is not None}
        names = sorted(side)  # canonical: the same games whatever the dict's order
        for a in range(len(names)):
            for b in range(a + 1, len(names)):
                i, j = names[a], names[b]
                if side[i] != side[j]:
                    out.append((t, i, j, 0.5 + (att[i] - att[j]) / 2))
    return out


def _positions(game_list, routers: Sequence[str]) -> dict[str, int]:
    """Column of each router; a ValueError names a router of the games missing from ``routers``
    (or one listed twice)."""
    pos = {r: n for n, r in enumerate(routers)}
    if len(pos) != len(routers):
        twice = sorted({r for r in routers if list(routers).count(r) > 1})
        raise ValueError(f"routers lists {few(twice)} more than once; expected distinct names")
    missing = sorted({r for _, i, j, _g in game_list for r in (i, j)} - pos.keys())
    if missing:
        raise ValueError(f"the records name router(s) {few(missing)} not in routers {few(routers)}; "
                         f"pass every router of the records (or routers=None for all of them)")
    return pos


def _elo(game_list, pos: dict[str, int], k: float, init: float) -> np.ndarray:
    # Python floats, not numpy scalars: the same IEEE operations (and the same libm pow), so
    # the same ratings bit for bit, about three times faster (the bootstrap replays this)
    rating = [float(init)] * len(pos)
    k = float(k)
    for _, i, j, g in game_list:
        a, b = pos[i], pos[j]
        e = 1.0 / (1.0 + 10 ** ((rating[b] - rating[a]) / 400.0))
        rating[a] += k * (g - e)
        rating[b] -= k * (g - e)
    return np.array(rating, dtype=np.float64)


def _elo_replay(by_rec: list[list], order: list[int], n: int, k: float, init: float) -> np.ndarray:
    """:func:`_elo` on the games of records ``order`` (repeats allowed) in that order, without
    building the game list (the same updates in the same order: the same ratings)."""
    rating = [float(init)] * n
    k = float(k)
    for t in order:
        for a, b, g in by_rec[t]:
            e = 1.0 / (1.0 + 10 ** ((rating[b] - rating[a]) / 400.0))
            rating[a] += k * (g - e)
            rating[b] -= k * (g - e)
    return np.array(rating, dtype=np.float64)


def elo_ratings(records: Sequence[JudgeRecord], routers: Sequence[str] | None = None, *,
                k: float = 4.0, init: float = 1000.0) -> pd.Series:
    """Elo rating per router after replaying the games in record order.

    ``routers`` (default: every router of the records) must hold every router that plays a
    game; a ValueError names any that is missing.

    Returns
    -------
    pandas.Series indexed by router.
    """
    from .metrics import routers_of
    routers = list(routers or routers_of(records))
    g = games(records)
    return pd.Series(_elo(g, _positions(g, routers), k, init), index=pd.Index(routers, name="router"),
                     name="elo")


def elo_bootstrap(records: Sequence[JudgeRecord], routers: Sequence[str] | None = None, *,
                  n_boot: int = 200, seed: int = 0, k: float = 4.0, init: float = 1000.0,
                  alpha: float = 0.05) -> pd.DataFrame:
    """Elo with bootstrap confidence intervals.

    Parameters
    ----------
    n_boot : int
        Resampled replays, a whole number from 0 to
        :data:`~recsys_router.sweep_check.MAX_BOOT` (0: no intervals, the median and bounds
        are NaN).
    alpha : float
        Strictly between 0 and 1: the interval is the ``(alpha/2, 1 - alpha/2)`` percentile
        range (0.05: 95 %).
    routers, seed, k, init
        As in :func:`elo_ratings`; a router of the records missing from ``routers`` is a
        ValueError.

    Returns
    -------
    pandas.DataFrame indexed by router with columns ``elo`` (record order), ``elo_median``,
    ``elo_lower``, ``elo_upper`` (percentiles over ``n_boot`` resampled, shuffled replays)
    and ``n_games``.
    """
    from .metrics import routers_of
    n_boot = check_number(n_boot, "elo_bootstrap: n_boot", low=0, high=MAX_BOOT, integer=True)
    alpha = check_number(alpha, "elo_bootstrap: alpha", low=0, high=1, low_open=True,
                         high_open=True)   # the interval: the alpha/2 .. 1 - alpha/2 percentiles
    routers = list(routers or routers_of(records))
    g = games(records)
    pos = _positions(g, routers)
    n = len(records)
    by_rec: list[list] = [[] for _ in range(n)]  # each record's games, as (column i, column j, score)
    for t, i, j, s in g:
        by_rec[t].append((pos[i], pos[j], s))
    rng = np.random.default_rng(seed)
    boots = np.empty((n_boot, len(routers)))
    for b in range(n_boot):
        idx = rng.integers(0, n, size=n) if n else np.empty(0, int)
        boots[b] = _elo_replay(by_rec, idx.tolist(), len(pos), k, init)
    n_games = {r: 0 for r in routers}
    for _, i, j, _s in g:
        n_games[i] += 1
        n_games[j] += 1
    q = np.percentile(boots, [100 * alpha / 2, 50, 100 * (1 - alpha / 2)], axis=0) if n_boot else \
        np.full((3, len(routers)), np.nan)
    return pd.DataFrame({"elo": _elo(g, pos, k, init), "elo_median": q[1], "elo_lower": q[0],
                         "elo_upper": q[2], "n_games": [n_games[r] for r in routers]},
                        index=pd.Index(routers, name="router"))


def bradley_terry(records: Sequence[JudgeRecord], routers: Sequence[str] | None = None, *,
                  prior: float = 0.5, init: float = 1000.0, max_iter: int = 10000,
                  tol: float = 1e-10) -> pd.Series:
    """Bradley-Terry MLE on the Elo games, on the Elo scale (mean ``init``).

    Routers that played no game get NaN (all of them, at once, when no two routers ever
    chose different sides). A router of the records missing from ``routers`` is a ValueError
    that names it.

    Example
    -------
    With 3 wins and 1 loss of ``r1`` against ``r2`` and ``prior=0``, ``p1 / p2 = 3``, so the
    ratings differ by ``400 log10 3 = 190.85``.
    """
    from .metrics import routers_of
    routers = list(routers or routers_of(records))
    game_list = games(records)
    pos = _positions(game_list, routers)
    m = len(routers)
    wins = np.zeros((m, m))  # wins[i, j]: (fractional) wins of i over j
    for _, i, j, g in game_list:
        wins[pos[i], pos[j]] += g
        wins[pos[j], pos[i]] += 1 - g
    n = wins + wins.T
    met = n > 0
    wins = wins + met * prior / 2
    n = wins + wins.T
    played = n.sum(axis=1) > 0
    if not played.any():  # no informative comparison (no two routers ever chose different sides)
        return pd.Series(np.nan, index=pd.Index(routers, name="router"), name="bt", dtype=float)
    w = wins.sum(axis=1)
    p = np.where(played, 1.0, np.nan)
    for _ in range(max_iter):
        denom = np.nansum(n / (p[:, None] + p[None, :]), axis=1)
        new = np.where(played, w / np.where(denom > 0, denom, 1.0), np.nan)
        new = new / np.exp(np.nanmean(np.log(np.maximum(new, 1e-300))))
        if np.nanmax(np.abs(new - p)) < tol:
            p = new
            break
        p = new
    r = 400.0 * np.log10(np.maximum(p, 1e-300))
    r = r - np.nanmean(r) + init
    return pd.Series(r, index=pd.Index(routers, name="router"), name="bt")
