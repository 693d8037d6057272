"""Tests of RouterEval candidate pools (recsys_router.pools)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest

from recsys_router.data import RoutingData
from recsys_router.errors import DataValidationError
from recsys_router.pools import GROUPS, candidate_groups, oracle_score, qualified_llms


def _cover(sets: dict[str, set[int]], nq: int = 10) -> RoutingData:
    """Binary matrix: LLM name -> set of queries it answers correctly."""
    names = list(sets)
    s = np.array([[1.0 if q in sets[n] else 0.0 for n in names] for q in range(nq)])
    return RoutingData([f"q{i}" for i in range(nq)], names, s)


def _six() -> RoutingData:
    r = range
    return _cover({"P": set(r(10)), "L1": set(r(8)), "L2": set(r(6)) | {9}, "L3": set(r(6)),
                   "L4": set(r(4)) | {8}, "Q": set(), "L5": {8, 9, 0, 1}, "L6": {9, 0, 1}})


def test_hand_made_six_llms():
    d = _six()
    names, means = qualified_llms(d, method="oracle-best")
    assert names == ["L1", "L2", "L3", "L4", "L5", "L6"]  # P (1.0) and Q (0.0) excluded
    np.testing.assert_allclose(means, [0.8, 0.7, 0.6, 0.5, 0.4, 0.3])
    # top/bottom 20% of 6 = ceil(1.2) = 2 LLMs; blocks [L1 L2 L3] [L4 L5 L6];
    # by hand: L1+L4 .9, L1+L5 1.0, L1+L6 .9, L2+L4 .8, L2+L5 .8, L2+L6 .7, L3+L4 .7, L3+L5 .8, L3+L6 .7
    want = {"all-strong": ["L1", "L2"], "all-weak": ["L5", "L6"], "strong-to-weak": ["L1", "L5"]}
    assert candidate_groups(d, 2, method="oracle-best") == want
    # greedy + swap finds it too
    assert candidate_groups(d, 2, method="oracle-best", exact_limit=0) == want
    assert oracle_score(d, ["L1", "L5"]) == 1.0
    assert oracle_score(d, ["L2", "L4"]) == pytest.approx(0.8)


def test_hand_made_fifteen_llms_exact_beats_ranking():
    r = range
    sets = {"A": set(r(8)), "B": set(r(7)), "C": {8, 9, 0, 1, 2}}
    sets.update({f"M{i}": set(r(4)) for i in range(9)})
    sets.update({"X": {0, 1, 2}, "Y": {3, 4}, "Z": {0}, "P": set(r(10)), "Q": set()})
    d = _cover(sets)
    # strong range {A .8, B .7, C .5}: A+B .8, A+C 1.0, B+C .9 -> A, C (not the top-2 A, B)
    # weak range {X .3, Y .2, Z .1}: X+Y .5, X+Z .3, Y+Z .3 -> X, Y
    g = candidate_groups(d, 2, method="oracle-best", groups=("all-strong", "all-weak"))
    assert g == {"all-strong": ["A", "C"], "all-weak": ["X", "Y"]}
    assert candidate_groups(d, 2, method="oracle-best", exact_limit=0,
                            groups=("all-strong", "all-weak")) == g


def _reference(d: RoutingData, m: int, frac=0.2):
    """Independent brute force: qualifying LLMs, ranges/blocks, best oracle value per group."""
    mean = np.nanmean(d.scores, axis=0)
    q = [j for j in np.argsort(-mean, kind="stable") if 0.1 <= mean[j] <= 0.9]
    names = [d.llm_names[j] for j in q]
    k = math.ceil(round(frac * len(names), 9))
    blocks = [list(b) for b in np.array_split(np.array(names, dtype=object), m)]
    spaces = {"all-strong": [names[:k]], "all-weak": [names[-k:]], "strong-to-weak": blocks}
    best = {}
    for g, sp in spaces.items():
        combos = itertools.combinations(sp[0], m) if len(sp) == 1 else itertools.product(*sp)
        best[g] = max(oracle_score(d, list(c)) for c in combos)
    return spaces, best


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("m", [1, 2, 3])
def test_random_cases_exact_greedy_and_blocks(seed, m):
    rng = np.random.default_rng(seed)
    n_llm = 20
    ability = rng.uniform(0.05, 0.95, n_llm)
    s = (rng.random((40, n_llm)) < ability).astype(float)
    d = RoutingData([f"q{i}" for i in range(40)], [f"m{j}" for j in range(n_llm)], s)
    spaces, best = _reference(d, m)
    exact = candidate_groups(d, m, method="oracle-best", seed=seed)
    greedy = candidate_groups(d, m, method="oracle-best", seed=seed, exact_limit=0)
    beam = candidate_groups(d, m, method="oracle-best", seed=seed, exact_limit=0, beam_width=4)
    for g in spaces:
        for res in (exact[g], greedy[g], beam[g]):
            assert len(res) == m and len(set(res)) == m
            if g == "strong-to-weak":  # the j-th LLM from the j-th block
                assert all(res[j] in spaces[g][j] for j in range(m))
            else:
                assert set(res) <= set(spaces[g][0])
        assert oracle_score(d, exact[g]) == pytest.approx(best[g])
        v_greedy, v_beam = oracle_score(d, greedy[g]), oracle_score(d, beam[g])
        assert v_greedy <= best[g] + 1e-12 and v_beam <= best[g] + 1e-12
        bound = 0.5 if g == "strong-to-weak" else 1 - 1 / math.e  # submodular guarantees
        assert v_greedy >= bound * best[g] - 1e-12
        if m == 1:  # one step of forward selection is exhaustive
            assert v_greedy == pytest.approx(best[g])


def test_seed_reproducible_and_tie_breaking():
    d = _cover({f"t{i}": set(range(5)) for i in range(10)})  # ten identical LLMs: all tie
    a = candidate_groups(d, 2, method="oracle-best", seed=3, groups=("strong-to-weak",))
    assert a == candidate_groups(d, 2, method="oracle-best", seed=3, groups=("strong-to-weak",))
    picks = {tuple(candidate_groups(d, 2, method="oracle-best", seed=s,
                                    groups=("strong-to-weak",))["strong-to-weak"])
             for s in range(8)}
    assert len(picks) > 1  # ties are broken by the seed, not always the same way


def test_train_split_is_used_for_ranking_and_oracle():
    s = np.array([[1, 0, 0.5], [1, 0, 0.5], [0, 1, 0.5], [0, 1, 0.5]], dtype=float)
    q = pd.DataFrame({"query_id": list("abcd"), "split": ["train", "train", "test", "test"]})
    d = RoutingData(q, ["u", "v", "w"], s)
    # on train rows u has mean 1 (excluded), v 0 (excluded), w 0.5 -> only w qualifies
    names, _ = qualified_llms(d, method="oracle-best", train_split="train")
    assert names == ["w"]
    assert candidate_groups(d, 1, method="oracle-best", train_split="train",
                            groups=("strong-to-weak",)) == \
        {"strong-to-weak": ["w"]}
    with pytest.raises(DataValidationError, match="no query has split 'dev'"):
        candidate_groups(d, 1, method="oracle-best", train_split="dev")


def test_errors_name_the_problem():
    d = _six()
    with pytest.raises(DataValidationError, match="only 6 of 8 LLMs .* need at least m=7"):
        candidate_groups(d, 7, method="oracle-best")
    # the top/bottom 20% of 6 is 2 LLMs, but a region is never below m: the top/bottom 3
    g3 = candidate_groups(d, 3, method="oracle-best", groups=("all-strong", "all-weak"))
    assert g3 == {"all-strong": ["L1", "L2", "L3"], "all-weak": ["L4", "L5", "L6"]}
    s2w = candidate_groups(d, 3, method="oracle-best", groups=("strong-to-weak",))
    assert len(s2w["strong-to-weak"]) == 3
    with pytest.raises(ValueError, match="unknown group"):
        candidate_groups(d, 2, method="oracle-best", groups=("mixed",))
    with pytest.raises(ValueError, match="m must be >= 1"):
        candidate_groups(d, 0, method="oracle-best")


def test_a_groups_pool_does_not_depend_on_which_other_groups_are_built():
    # 20 LLMs on two score levels (even columns 0.6, odd 0.4): every pool of two 0.6 LLMs
    # ties in oracle score, so the seeded tie-break decides; it must not depend on the
    # other groups asked for or their order
    sc = np.tile(np.where(np.arange(20) % 2 == 0, 0.6, 0.4), (8, 1))
    d = RoutingData([f"q{i}" for i in range(8)], [f"L{j:02d}" for j in range(20)], sc)
    for seed in (0, 1, 2):
        full = candidate_groups(d, 2, method="oracle-best", seed=seed)
        for g in GROUPS:
            assert candidate_groups(d, 2, method="oracle-best", seed=seed, groups=[g])[g] == full[g]
        rev = candidate_groups(d, 2, method="oracle-best", seed=seed, groups=list(reversed(GROUPS)))
        assert rev == full
        # the top 20 % (4 of the 0.6 LLMs) holds the all-strong pool: oracle 0.6
        assert oracle_score(d, full["all-strong"]) == pytest.approx(0.6)
