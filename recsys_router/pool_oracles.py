"""Oracle scores of many candidate sets at once, for RouterEval's construction of candidate
groups (:mod:`recsys_router.pools`, ``method="routereval"``): every window of ``m``
consecutive columns (:func:`window_oracles`) and every random one-column-per-block draw
(:func:`draw_oracles`). The oracle score of a set of columns is the mean over queries (rows)
of the best score among them; sums are accumulated in float64.
"""

from __future__ import annotations

import numpy as np

__all__ = ["window_oracles", "draw_oracles"]


def window_oracles(s: np.ndarray, m: int, cells: int = 1 << 22) -> np.ndarray:
    """Oracle score of every window of ``m`` consecutive columns of ``s`` (queries x LLMs).

    Sliding-window maxima (van Herk / Gil-Werman: per block of ``m`` columns a prefix and a
    suffix maximum), so the cost is O(queries x columns) whatever ``m``; rows in chunks.
    """
    nq, width = s.shape
    n_win = width - m + 1
    nb = -(-width // m)
    tot = np.zeros(n_win)
    step = max(1, cells // (nb * m))
    for r0 in range(0, nq, step):
        a = s[r0:r0 + step]
        pad = np.full((len(a), nb * m), -np.inf, dtype=s.dtype)
        pad[:, :width] = a
        blk = pad.reshape(len(a), nb, m)
        pre = np.maximum.accumulate(blk, axis=2).reshape(len(a), -1)
        suf = np.maximum.accumulate(blk[:, :, ::-1], axis=2)[:, :, ::-1].reshape(len(a), -1)
        tot += np.maximum(suf[:, :n_win], pre[:, m - 1:m - 1 + n_win]).sum(axis=0,
                                                                             dtype=np.float64)
    return tot / max(nq, 1)


def draw_oracles(s: np.ndarray, idx: np.ndarray, cells: int = 1 << 23,
                 max_levels: int = 16, path: str = "auto") -> np.ndarray:
    """Oracle score of each draw (row of ``idx``: one column of ``s`` per block).

    Columns every draw holds (blocks of one LLM) are folded into a per-query base, and the
    queries where no other column beats that base are counted once. The rest is evaluated
    per chunk of draws (``path``, default chosen by the data): with at most ``max_levels``
    distinct score values (binary scores), as bit sets per value level (``"levels"``: one OR
    of ``m`` packed columns per draw); else, when the blocks are small (at most 4 LLMs on
    average, e.g. m = 1000 of 2,000), by scanning each query's columns from its best down to
    the first one the draw holds (``"scan"``: about block-size steps per query and draw);
    else as the maximum over the gathered columns (``"dense"``). A draw costs at most
    O(queries x m).
    """
    nq = s.shape[0]
    fixed = np.all(idx == idx[:1], axis=0)
    base = s[:, idx[0, fixed]].max(axis=1) if fixed.any() else np.full(nq, -np.inf, s.dtype)
    var = idx[:, ~fixed]
    if var.shape[1] == 0:
        return np.full(len(idx), base.sum(dtype=np.float64) / max(nq, 1))
    cols, local = np.unique(var, return_inverse=True)
    local = local.reshape(var.shape)
    sv = s if len(cols) == s.shape[1] else s[:, cols]      # no copy when every column varies
    rows = sv.max(axis=1) > base
    const = float(base[~rows].sum(dtype=np.float64))
    if not rows.any():                  # no draw can beat the columns every draw holds
        return np.full(len(idx), const / max(nq, 1))
    if not rows.all():
        sv, base = sv[rows], base[rows]
    levels = _levels(sv, base, max_levels) if path in ("auto", "levels") else None
    if path == "auto":
        path = "levels" if levels is not None else \
            "scan" if local.shape[1] >= 16 and len(cols) <= 4 * local.shape[1] else "dense"
    if path == "levels" and levels is not None:
        got = _level_sums(sv, base, local, levels, cells)
    elif path == "scan":
        got = _scan_sums(sv, base, local, cells)
    else:
        got = _dense_sums(sv, base, local, cells)
    return (const + got) / max(nq, 1)


def _levels(sv, base, max_levels: int) -> np.ndarray | None:
    """The distinct values of ``sv`` and the finite ``base`` when there are at most
    ``max_levels`` of them, else None (a sample of rows is looked at first)."""
    fin = base[np.isfinite(base)]
    cand = np.unique(np.concatenate([np.unique(sv[:64]), np.unique(fin)]))
    if len(cand) > max_levels:
        return None
    if sum(np.count_nonzero(sv == v) for v in cand) == sv.size:
        return cand
    lv = np.unique(np.concatenate([np.unique(sv), fin]))     # a value the sample missed
    return lv if len(lv) <= max_levels else None


def _popcount(words: np.ndarray) -> np.ndarray:
    """Set bits per row of a (rows, words) uint64 array."""
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(words).sum(axis=1, dtype=np.int64)
    return np.unpackbits(words.view(np.uint8), axis=1).sum(axis=1, dtype=np.int64)


def _pack(bits: np.ndarray) -> np.ndarray:
    """Boolean (rows, queries) -> (rows, words) uint64 bit sets."""
    p = np.packbits(bits, axis=1)
    pad = (-p.shape[1]) % 8
    if pad:
        p = np.concatenate([p, np.zeros((len(p), pad), np.uint8)], axis=1)
    return np.ascontiguousarray(p).view(np.uint64)


def _level_sums(sv, base, local, levels, cells) -> np.ndarray:
    """Sum over queries of each draw's best score, as ``levels[0] x queries`` plus, for each
    higher level, its step times the number of queries whose best reaches it."""
    nr = len(sv)
    out = np.full(len(local), levels[0] * nr, dtype=np.float64)
    for lo, t in zip(levels[:-1], levels[1:]):
        col_bits = _pack((sv >= t).T)                      # (columns, words)
        base_bits = _pack((base >= t)[None, :])[0]
        per = max(1, cells // max(1, local.shape[1] * col_bits.shape[1]))
        for d0 in range(0, len(local), per):
            acc = np.bitwise_or.reduce(col_bits[local[d0:d0 + per]], axis=1) | base_bits
            out[d0:d0 + per] += (t - lo) * _popcount(acc)
    return out


def _dense_sums(sv, base, local, cells) -> np.ndarray:
    """Sum over queries of each draw's best score, gathering the drawn columns."""
    st = np.ascontiguousarray(sv.T)                        # (columns, queries)
    out = np.empty(len(local))
    per = max(1, cells // max(1, local.shape[1] * st.shape[1]))
    for d0 in range(0, len(local), per):
        best = np.maximum(st[local[d0:d0 + per]].max(axis=1), base)
        out[d0:d0 + per] = best.sum(axis=1, dtype=np.float64)
    return out


def _scan_sums(sv, base, local, cells) -> np.ndarray:
    """Sum over queries of each draw's best score: each query's columns in descending score
    order, walked (all unresolved (draw, query) pairs at once) until the draw holds the
    column or the score falls to the base."""
    nr, nv = sv.shape
    order = np.argsort(-sv, axis=1, kind="stable").astype(np.int32)
    ranked = np.take_along_axis(sv, order, axis=1)
    out = np.empty(len(local))
    per = max(1, cells // max(1, nr + nv))
    for d0 in range(0, len(local), per):
        loc = local[d0:d0 + per]
        nb = len(loc)
        held = np.zeros((nb, nv), bool)
        held[np.arange(nb)[:, None], loc] = True
        q = np.tile(np.arange(nr), nb)
        d = np.repeat(np.arange(nb), nr)
        val = np.empty(nb * nr, dtype=sv.dtype)
        active = np.arange(nb * nr)
        for r in range(nv):
            if not active.size:
                break
            qa = q[active]
            v = ranked[qa, r]
            low = v <= base[qa]
            done = low | held[d[active], order[qa, r]]
            val[active[done]] = np.where(low[done], base[qa[done]], v[done])
            active = active[~done]
        val[active] = base[q[active]]
        out[d0:d0 + nb] = val.reshape(nb, nr).sum(axis=1, dtype=np.float64)
    return out
