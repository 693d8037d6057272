"""RouterEval-style candidate pools (Huang et al., 2025, "RouterEval", section 4.2).

Given a query x LLM score matrix and a pool size ``m``, three groups of ``m`` candidate
LLMs are formed from the LLMs whose train mean score lies in ``[low, high]`` (default
``[0.1, 0.9]``), sorted from strongest to weakest:

* ``"all-strong"``: ``m`` LLMs from the top ``frac`` (20%) of the sorted list;
* ``"all-weak"``: ``m`` LLMs from the bottom ``frac``;
* ``"strong-to-weak"``: the list is cut into ``m`` equal consecutive blocks and the
  ``j``-th LLM comes from the ``j``-th block (so the pool spans the ability range).

Within each group the combination maximising the *oracle* train score (mean over queries
of the best score among the chosen LLMs; unobserved cells count as 0) is chosen: by
exhaustive search when the number of combinations is at most ``exact_limit``, otherwise by
greedy forward selection followed by 1-swap local search (optionally a beam search).
The oracle score is a facility-location function (monotone submodular), so forward
selection alone is within ``1 - 1/e`` of the optimum for the top/bottom groups and within
1/2 for the block-constrained group; the swap pass can only improve on it.
"""

from __future__ import annotations

import itertools
import math
from typing import Sequence

import numpy as np

from .data import RoutingData
from .errors import DataValidationError

__all__ = ["candidate_groups", "oracle_score", "qualified_llms", "range_size", "GROUPS"]

GROUPS = ("all-strong", "all-weak", "strong-to-weak")
_TOL = 1e-12


def oracle_score(data: RoutingData, llms: Sequence[str]) -> float:
    """Mean over queries of the best score among ``llms`` (unobserved cells count as 0).

    Example
    -------
    >>> d = RoutingData(["q1", "q2"], ["a", "b"], [[1, 0], [0, 0.5]])
    >>> oracle_score(d, ["a", "b"])
    0.75
    """
    s = np.nan_to_num(data.scores[:, data.llm_index(llms)], nan=0.0).astype(np.float64)
    return float(s.max(axis=1).mean())


def qualified_llms(data: RoutingData, *, low: float = 0.1, high: float = 0.9,
                   train_split: str | None = None) -> tuple[list[str], np.ndarray]:
    """LLMs with ``low <= mean train score <= high``, strongest first, and their means.

    Ties in mean keep the dataset's LLM order (stable sort).
    """
    train = _train_part(data, train_split)
    obs = train.observed
    n = obs.sum(axis=0)
    total = np.where(obs, train.scores, 0.0).astype(np.float64).sum(axis=0)
    mean = np.divide(total, n, out=np.full(train.n_llms, np.nan), where=n > 0)
    ok = np.flatnonzero((mean >= low - _TOL) & (mean <= high + _TOL))
    order = ok[np.argsort(-mean[ok], kind="stable")]
    names = train.llm_names
    return [names[j] for j in order], mean[order]


def candidate_groups(data: RoutingData, m: int, *, seed: int = 0, train_split: str | None = None,
                     exact_limit: int = 100_000, beam_width: int = 1, low: float = 0.1,
                     high: float = 0.9, frac: float = 0.2,
                     groups: Sequence[str] = GROUPS) -> dict[str, list[str]]:
    """Build RouterEval candidate groups of ``m`` LLMs each.

    Parameters
    ----------
    data : RoutingData
        Scores used for ranking and for the oracle (restricted to ``train_split``).
    m : int
        Candidates per group (RouterEval uses 3, 5 and 10).
    seed : int
        Breaks exact ties in oracle score between combinations (seeded, reproducible): each
        group draws from its own generator, ``np.random.default_rng([seed, group, m])``
        (``group`` its index in :data:`GROUPS`), so a group's pool is the same whichever
        other groups are asked for.
    train_split : str, optional
        Value of the queries' ``split`` column to use (e.g. ``"train"``); default all queries.
    exact_limit : int
        Exhaustive search when a group has at most this many combinations, else greedy.
    beam_width : int
        With the greedy search, keep this many partial groups per step (1 = plain forward
        selection). A 1-swap local search is always run on the result.
    low, high : float
        Keep LLMs whose mean train score lies in ``[low, high]``.
    frac : float
        Share of the sorted list forming the strong / weak ranges (``ceil(frac * n)`` LLMs).
    groups : sequence of str
        Which of ``"all-strong"``, ``"all-weak"``, ``"strong-to-weak"`` to build.

    Returns
    -------
    dict
        Group name -> list of ``m`` LLM names. All-strong/all-weak lists are strongest
        first; strong-to-weak lists are in block order (block 1 = strongest).

    Raises
    ------
    DataValidationError
        When too few LLMs qualify for ``m``, naming the counts needed and available.

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> g = candidate_groups(make_synthetic(200, 30, seed=0), 3)
    >>> sorted(g), [len(v) for v in g.values()]
    (['all-strong', 'all-weak', 'strong-to-weak'], [3, 3, 3])
    """
    m = int(m)
    if m < 1:
        raise ValueError(f"m must be >= 1, got {m}")
    if not 0 < frac <= 1:
        raise ValueError(f"frac must be in (0, 1], got {frac}")
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        raise ValueError(f"unknown group(s) {unknown}; valid: {list(GROUPS)}")
    train = _train_part(data, train_split)
    names, _ = qualified_llms(train, low=low, high=high)
    n = len(names)
    src = data.source or data.name
    if n < m:
        raise DataValidationError(f"only {n} of {data.n_llms} LLMs have a mean train score in "
                                  f"[{low}, {high}]; need at least m={m}", source=src)
    k = range_size(frac, n)
    if k < m and ({"all-strong", "all-weak"} & set(groups)):
        need = m
        while range_size(frac, need) < m:
            need += 1
        raise DataValidationError(
            f"the top/bottom {frac:.0%} of the {n} qualifying LLMs (mean train score in "
            f"[{low}, {high}]) holds {k} LLMs, fewer than m={m}; need at least {need} qualifying "
            f"LLMs", source=src)
    s = np.nan_to_num(train.scores[:, train.llm_index(names)], nan=0.0).astype(np.float32)
    out: dict[str, list[str]] = {}
    for g in groups:
        # one generator per (seed, group, m): a group's pool does not depend on which other
        # groups are built, nor on their order
        rng = np.random.default_rng([int(seed), GROUPS.index(g), m])
        if g == "all-strong":
            blocks = [np.arange(k)]
        elif g == "all-weak":
            blocks = [np.arange(n - k, n)]
        else:
            blocks = np.array_split(np.arange(n), m)
        chosen = _best_combination(s, blocks, m, rng, exact_limit, beam_width)
        out[g] = [names[c] for c in sorted(chosen)]  # sorted positions = strongest / block order
    return out


# ---------------------------------------------------------------- search
def _train_part(data: RoutingData, train_split: str | None) -> RoutingData:
    if train_split is None:
        return data
    split = data.queries["split"]
    mask = (split.astype(str) == str(train_split)).to_numpy() & split.notna().to_numpy()
    if not mask.any():
        vals = sorted(set(split.dropna().astype(str)))
        raise DataValidationError(f"no query has split {train_split!r}; split values present: "
                                  f"{vals}", source=data.source or data.name, column="split")
    return data.subset(mask)


def range_size(frac: float, n: int) -> int:
    """``ceil(frac * n)``, robust to float round-off (0.2 * 15 -> 3, not 4)."""
    return math.ceil(round(frac * n, 9))


def _n_combinations(blocks: list[np.ndarray], m: int) -> int:
    if len(blocks) == 1:
        return math.comb(len(blocks[0]), m)
    return math.prod(len(b) for b in blocks)


def _pick(values: np.ndarray, rng) -> int:
    """Index of the maximum; exact ties broken by the seeded generator."""
    best = values.max()
    ties = np.flatnonzero(values >= best - _TOL)
    return int(ties[0] if len(ties) == 1 else rng.choice(ties))


def _best_combination(s, blocks, m, rng, exact_limit, beam_width) -> list[int]:
    if _n_combinations(blocks, m) <= exact_limit:
        return _exact(s, blocks, m, rng)
    if beam_width > 1:
        chosen = _beam(s, blocks, m, rng, beam_width)
    else:
        chosen = _forward(s, blocks, m, rng)
    return _swap_search(s, blocks, chosen, rng)


def _combos(blocks, m):
    if len(blocks) == 1:
        return itertools.combinations(blocks[0].tolist(), m)
    return itertools.product(*[b.tolist() for b in blocks])


def _exact(s, blocks, m, rng, chunk_cells: int = 1 << 23) -> list[int]:
    """Evaluate every combination in vectorised chunks; returns the best (seeded ties)."""
    nq = s.shape[0]
    per = max(1, chunk_cells // max(1, nq * m))
    it = _combos(blocks, m)
    best_val, best = -np.inf, []
    while True:
        batch = list(itertools.islice(it, per))
        if not batch:
            break
        idx = np.asarray(batch, dtype=np.int64)              # (B, m)
        vals = s[:, idx].max(axis=2).mean(axis=0, dtype=np.float64)  # (B,)
        top = vals.max()
        if top > best_val + _TOL:
            best_val, best = top, [tuple(r) for r in idx[vals >= top - _TOL]]
        elif top >= best_val - _TOL:
            best += [tuple(r) for r in idx[vals >= best_val - _TOL]]
    return list(best[0] if len(best) == 1 else best[int(rng.integers(len(best)))])


def _block_ids(blocks, n: int) -> np.ndarray:
    """Block number of every column (-1: in no block)."""
    ids = np.full(n, -1, np.int64)
    for bi, b in enumerate(blocks):
        ids[b] = bi
    return ids


def _allowed(blocks, chosen: Sequence[int], ids: np.ndarray | None = None) -> np.ndarray:
    """Candidates that may be added to ``chosen`` (one per block for several blocks), in
    ascending column order."""
    if len(blocks) == 1:
        return np.setdiff1d(blocks[0], chosen)
    if ids is None:
        ids = _block_ids(blocks, max(int(b.max()) for b in blocks if len(b)) + 1)
    used = np.zeros(len(blocks), bool)
    used[ids[np.asarray(chosen, dtype=np.int64)]] = True
    free = [b for bi, b in enumerate(blocks) if not used[bi]]
    return np.concatenate(free) if free else np.zeros(0, np.int64)


def _forward(s, blocks, m, rng) -> list[int]:
    """Plain forward selection (the beam search with width 1), with incremental gains.

    ``tot[j]`` is the sum over queries of ``max(cur_i, s_ij)``; adding column ``c`` changes
    ``cur`` only on the rows where ``s_ic > cur_i``, so only those rows are revisited: the
    work is O(queries x LLMs) per changed row set, not per step.
    """
    cols = np.sort(np.concatenate(blocks))
    if len(cols) < s.shape[1]:      # only the blocks' columns (order kept: same tie-breaks)
        sub = [np.searchsorted(cols, b) for b in blocks]
        return [int(cols[c]) for c in _forward(s[:, cols], sub, m, rng)]
    nq, n = s.shape
    ids = _block_ids(blocks, n) if len(blocks) > 1 else None
    open_ = np.zeros(n, bool)
    for b in blocks:
        open_[b] = True
    tot = s.sum(axis=0, dtype=np.float64)          # cur = -inf: max(cur, s) = s
    cur = np.full(nq, -np.inf, np.float32)
    chosen: list[int] = []
    for _ in range(m):
        allowed = np.flatnonzero(open_)
        c = int(allowed[_pick(tot[allowed] / nq, rng)])
        chosen.append(c)
        if ids is None:
            open_[c] = False
        else:
            open_[blocks[ids[c]]] = False
        rows = np.flatnonzero(s[:, c] > cur)
        if len(rows):
            sub = s[rows]
            new = s[rows, c]
            old = cur[rows]
            tot += (np.maximum(new[:, None], sub).sum(axis=0, dtype=np.float64)
                    - np.maximum(old[:, None], sub).sum(axis=0, dtype=np.float64))
            cur[rows] = new
    return chosen


def _beam(s, blocks, m, rng, width: int) -> list[int]:
    """Forward selection keeping the ``width`` best partial groups at each step."""
    nq = s.shape[0]
    start = np.full(nq, -np.inf, np.float32)
    beam: list[tuple[float, tuple[int, ...], np.ndarray]] = [(-np.inf, (), start)]
    for _ in range(m):
        cand: dict[frozenset, tuple[float, tuple[int, ...], np.ndarray]] = {}
        for _, chosen, cur in beam:
            allowed = _allowed(blocks, chosen)
            vals = np.maximum(cur[:, None], s[:, allowed]).mean(axis=0, dtype=np.float64)
            order = np.argsort(-vals, kind="stable")[:width] if width > 1 else [_pick(vals, rng)]
            for o in order:
                c = int(allowed[o])
                key = frozenset(chosen + (c,))
                if key not in cand:
                    cand[key] = (float(vals[o]), chosen + (c,), np.maximum(cur, s[:, c]))
        beam = sorted(cand.values(), key=lambda t: -t[0])[:width]
    return list(beam[0][1])


class _Top2:
    """Per query, the largest and second-largest distinct values among the chosen columns,
    with how many chosen columns hold each, so that "the best score without member ``p``"
    costs O(queries) and a swap touches only the rows whose top two it changes."""

    def __init__(self, s, chosen):
        self.v = s[:, chosen].astype(np.float32, copy=True)      # (nq, m) chosen values
        self.top1 = np.empty(s.shape[0], np.float32)
        self.cnt1 = np.empty(s.shape[0], np.int64)
        self.top2 = np.empty(s.shape[0], np.float32)
        self.cnt2 = np.empty(s.shape[0], np.int64)
        self._recompute(np.arange(s.shape[0]))

    def _recompute(self, rows):
        if len(rows) == 0:
            return
        v = self.v[rows]
        t1 = v.max(axis=1)
        is1 = v == t1[:, None]
        below = np.where(is1, -np.inf, v)
        t2 = below.max(axis=1)
        self.top1[rows], self.cnt1[rows] = t1, is1.sum(axis=1)
        self.top2[rows], self.cnt2[rows] = t2, (below == t2[:, None]).sum(axis=1)

    def without(self, p: int) -> np.ndarray:
        """Per-query maximum over the chosen columns other than position ``p``."""
        col = self.v[:, p]
        alone = (col == self.top1) & (self.cnt1 == 1)
        return np.where(alone, self.top2, self.top1)

    def replace(self, p: int, new: np.ndarray) -> None:
        """Put the column values ``new`` at position ``p``."""
        old = self.v[:, p].copy()
        self.v[:, p] = new
        t1, c1, t2, c2 = self.top1, self.cnt1, self.top2, self.cnt2
        at1, at2 = old == t1, (old == t2) & (old != t1)
        c1[at1] -= 1
        c2[at2] -= 1
        redo = (at1 & (c1 == 0)) | (at2 & (c2 == 0))
        ok = ~redo
        up1 = ok & (new > t1)
        eq1 = ok & (new == t1)
        up2 = ok & (new < t1) & (new > t2)
        eq2 = ok & (new < t1) & (new == t2)
        t2[up1], c2[up1] = t1[up1], c1[up1]
        t1[up1], c1[up1] = new[up1], 1
        c1[eq1] += 1
        t2[up2], c2[up2] = new[up2], 1
        c2[eq2] += 1
        self._recompute(np.flatnonzero(redo))


def _swap_search(s, blocks, chosen: list[int], rng, max_rounds: int = 100) -> list[int]:
    """Replace one member at a time by the best allowed alternative while that improves.

    The best score without member ``p`` comes from the per-query top two (:class:`_Top2`),
    so a round costs O(queries x (pool + candidates)), not O(queries x pool^2).
    """
    chosen = list(chosen)
    nq, n = s.shape
    ids = _block_ids(blocks, n) if len(blocks) > 1 else None
    top = _Top2(s, chosen)
    current = float(top.top1.mean(dtype=np.float64))
    member = np.zeros(n, bool)
    member[chosen] = True
    for _ in range(max_rounds):
        improved = False
        for p in range(len(chosen)):
            if ids is None:
                allowed = np.flatnonzero(~member[blocks[0]])
                allowed = blocks[0][allowed]
            else:
                allowed = blocks[ids[chosen[p]]]
                allowed = allowed[allowed != chosen[p]]
            if len(allowed) == 0:
                continue
            base = top.without(p) if len(chosen) > 1 else np.full(nq, -np.inf, np.float32)
            vals = np.maximum(base[:, None], s[:, allowed]).mean(axis=0, dtype=np.float64)
            o = _pick(vals, rng)
            if vals[o] > current + 1e-9:
                c = int(allowed[o])
                member[chosen[p]], member[c] = False, True
                chosen[p], current, improved = c, float(vals[o]), True
                top.replace(p, s[:, c])
        if not improved:
            break
    return chosen
