"""Oracle-best search of a candidate group (``candidate_groups(..., method="oracle-best")``).

Within a region (one list of column positions, choose ``m``) or a list of blocks (one column
per block), find the combination maximising the oracle score (mean over queries of the best
chosen score): exhaustively in vectorised chunks when there are at most ``exact_limit``
combinations, otherwise by greedy forward selection (optionally a beam search) followed by
a 1-swap local search. Exact ties are broken by the caller's seeded generator.
"""

from __future__ import annotations

import itertools
import math
from typing import Sequence

import numpy as np

__all__ = ["best_combination"]

_TOL = 1e-12


def best_combination(s: np.ndarray, blocks: list, m: int, rng, exact_limit: int,
                     beam_width: int) -> list[int]:
    """Column positions of the best combination of ``m`` columns of ``s`` (queries x LLMs).

    ``blocks`` is one array of positions (choose ``m`` of them) or ``m`` arrays (one each).
    """
    return _best_combination(s, blocks, m, rng, exact_limit, beam_width)


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
