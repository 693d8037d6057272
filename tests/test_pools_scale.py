"""The pool search at RouterEval scale gives the same groups as the plain search it replaced.

``_naive_groups`` is the straightforward forward selection + 1-swap search (every candidate's
oracle value recomputed from the full matrix at every step); :func:`candidate_groups` keeps
incremental sums and per-query top-two values instead, so its cost is not quadratic in the
pool size. Both must pick the same LLMs, including seeded tie-breaks.
"""

from __future__ import annotations

import numpy as np
import pytest

from recsys_router.data import RoutingData
from recsys_router.pool_search import _allowed
from recsys_router.pools import candidate_groups, qualified_llms, range_size

_TOL = 1e-12


def _pick(values, rng):
    ties = np.flatnonzero(values >= values.max() - _TOL)
    return int(ties[0] if len(ties) == 1 else rng.choice(ties))


def _free(blocks, chosen):
    if len(blocks) == 1:
        return np.array([c for c in blocks[0] if c not in chosen], dtype=np.int64)
    used = [bi for bi, b in enumerate(blocks) if any(c in b for c in chosen)]
    free = [b for bi, b in enumerate(blocks) if bi not in used]
    return np.concatenate(free) if free else np.zeros(0, np.int64)


def _naive_search(s, blocks, m, rng):
    nq = s.shape[0]
    cur, chosen = np.full(nq, -np.inf, np.float32), []
    for _ in range(m):
        allowed = _free(blocks, chosen)
        vals = np.maximum(cur[:, None], s[:, allowed]).mean(axis=0, dtype=np.float64)
        c = int(allowed[_pick(vals, rng)])
        chosen.append(c)
        cur = np.maximum(cur, s[:, c])
    current = float(s[:, chosen].max(axis=1).mean(dtype=np.float64))
    for _ in range(100):
        improved = False
        for p in range(len(chosen)):
            rest = chosen[:p] + chosen[p + 1:]
            base = s[:, rest].max(axis=1) if rest else np.full(nq, -np.inf, np.float32)
            allowed = _free(blocks, rest)
            allowed = allowed[allowed != chosen[p]]
            if len(allowed) == 0:
                continue
            vals = np.maximum(base[:, None], s[:, allowed]).mean(axis=0, dtype=np.float64)
            o = _pick(vals, rng)
            if vals[o] > current + 1e-9:
                chosen[p], current, improved = int(allowed[o]), float(vals[o]), True
        if not improved:
            break
    return chosen


def _naive_groups(d, m, seed, groups=("all-strong", "all-weak", "strong-to-weak")):
    names, _ = qualified_llms(d, method="oracle-best")
    n = len(names)
    k = range_size(0.2, n)
    s = np.nan_to_num(d.scores[:, d.llm_index(names)], nan=0.0).astype(np.float32)
    out = {}
    for gi, (g, blocks) in enumerate((("all-strong", [np.arange(k)]),
                                      ("all-weak", [np.arange(n - k, n)]),
                                      ("strong-to-weak", np.array_split(np.arange(n), m)))):
        if g not in groups:
            continue
        rng = np.random.default_rng([seed, gi, m])     # one generator per (seed, group, m)
        out[g] = [names[c] for c in sorted(_naive_search(s, blocks, m, rng))]
    return out


def _data(nq, n_llm, seed, binary=True, levels=None):
    rng = np.random.default_rng(seed)
    ability = rng.uniform(0.05, 0.95, n_llm)
    p = np.clip(ability[None, :] + rng.normal(0, 0.2, (nq, n_llm)), 0, 1)
    if binary:
        s = (rng.random((nq, n_llm)) < p).astype(float)
    elif levels:
        s = np.round(p * levels) / levels          # many exact ties, non-integer values
    else:
        s = p
    return RoutingData([f"q{i}" for i in range(nq)], [f"m{j}" for j in range(n_llm)], s)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("kind", ["binary", "levels", "continuous"])
def test_same_groups_as_the_naive_search(seed, kind):
    d = _data(60, 40, seed, binary=kind == "binary", levels=4 if kind == "levels" else None)
    for m in (1, 2, 3, 5):
        groups = [g for g in ("all-strong", "all-weak", "strong-to-weak")
                  if g == "strong-to-weak"
                  or range_size(0.2, len(qualified_llms(d, method="oracle-best")[0])) >= m]
        got = candidate_groups(d, m, method="oracle-best", seed=seed, exact_limit=0, groups=groups)
        assert got == _naive_groups(d, m, seed, groups), (m, kind)


def test_same_groups_with_300_llms_and_large_pools():
    d = _data(200, 300, 7)
    for m in (3, 20, 100):
        groups = (["all-strong", "all-weak"] if m <= 20 else []) + ["strong-to-weak"]
        got = candidate_groups(d, m, method="oracle-best", seed=1, exact_limit=0, groups=groups)
        assert got == _naive_groups(d, m, 1, groups), m


def test_identical_llms_tie_break_like_the_naive_search():
    s = np.tile(np.array([[1.0], [0.0], [1.0], [0.0]]), (1, 30))   # thirty identical LLMs
    d = RoutingData([f"q{i}" for i in range(4)], [f"t{j}" for j in range(30)], s)
    for seed in range(5):
        assert candidate_groups(d, 4, method="oracle-best", seed=seed, exact_limit=0) == \
            _naive_groups(d, 4, seed)


def test_allowed_by_block_ids():
    blocks = [np.arange(0, 3), np.arange(3, 5), np.arange(5, 8)]
    assert _allowed(blocks, [4]).tolist() == [0, 1, 2, 5, 6, 7]
    assert _allowed(blocks, [0, 6]).tolist() == [3, 4]
    assert _allowed([np.arange(5)], [1, 3]).tolist() == [0, 2, 4]


@pytest.mark.parametrize("levels", [2, 3, 0])
def test_top_two_bookkeeping_matches_brute_force(levels):
    from recsys_router.pool_search import _Top2  # noqa: PLC0415
    rng = np.random.default_rng(levels)
    s = rng.random((50, 30)).astype(np.float32)
    if levels:
        s = np.round(s * (levels - 1)).astype(np.float32)    # many exact ties
    chosen = list(rng.choice(30, size=6, replace=False))
    top = _Top2(s, chosen)
    for _ in range(40):
        for p in range(len(chosen)):
            rest = chosen[:p] + chosen[p + 1:]
            np.testing.assert_array_equal(top.without(p), s[:, rest].max(axis=1))
        np.testing.assert_array_equal(top.top1, s[:, chosen].max(axis=1))
        p = int(rng.integers(len(chosen)))
        new = int(rng.choice([c for c in range(30) if c not in chosen]))
        chosen[p] = new
        top.replace(p, s[:, new])
