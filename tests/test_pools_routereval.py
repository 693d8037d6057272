"""candidate_groups(method="routereval") against RouterEval's released rule, re-implemented
here naively (a plain loop over windows, a loop over the seeded draws)."""

from __future__ import annotations

import numpy as np
import pytest

from recsys_router.data import RoutingData
from recsys_router.errors import DataValidationError
from recsys_router.pool_oracles import draw_oracles, window_oracles
from recsys_router.pools import candidate_groups, qualified_llms, region_problem


def _data(s: np.ndarray) -> RoutingData:
    return RoutingData([f"q{i}" for i in range(s.shape[0])],
                       [f"l{j}" for j in range(s.shape[1])], s)


def _naive(s: np.ndarray, m: int, seed: int, draws: int = 1000) -> dict[str, list[str]]:
    """The released rule on a complete matrix: ascending mean, 0.1 < mean <= 0.9,
    region max(N // 5, m), best window (first maximum), best of the seeded draws."""
    n_all = s.shape[1]
    mean = s.mean(axis=0)
    ranking = sorted(range(n_all), key=lambda j: (mean[j], j))      # ascending, ties by index
    q = [j for j in ranking if 0.1 < mean[j] <= 0.9]
    k = max(n_all // 5, m)

    def oracle(cols):
        return s[:, list(cols)].max(axis=1).mean()

    def best_window(region):
        best, arg = -np.inf, None
        for st in range(len(region) - m + 1):
            v = oracle(region[st:st + m])
            if v > best:
                best, arg = v, region[st:st + m]
        return arg

    out = {}
    if k <= len(q):
        out["all-strong"] = best_window(q[len(q) - k:])
        out["all-weak"] = best_window(q[:k])
    size, rem = divmod(len(q), m)
    blocks, st = [], 0
    for i in range(m):
        end = st + size + (1 if i < rem else 0)
        blocks.append(q[st:end])
        st = end
    offs = np.random.default_rng([seed, 2, m]).integers(0, [len(b) for b in blocks],
                                                        size=(draws, m))
    best, arg = -np.inf, None
    for d in range(draws):
        cols = [blocks[i][offs[d, i]] for i in range(m)]
        v = oracle(cols)
        if v > best:
            best, arg = v, cols
    out["strong-to-weak"] = arg
    rank = {j: r for r, j in enumerate(ranking)}
    return {g: [f"l{j}" for j in sorted(c, key=rank.get, reverse=True)] for g, c in out.items()}


def _random(seed: int, nq: int, n_llm: int, kind: str) -> np.ndarray:
    rng = np.random.default_rng(seed)
    p = np.clip(rng.uniform(0.0, 1.0, n_llm)[None, :] + rng.normal(0, 0.2, (nq, n_llm)), 0, 1)
    if kind == "binary":
        return (rng.random((nq, n_llm)) < p).astype(float)
    if kind == "levels":
        return np.round(p * 4) / 4
    return p


@pytest.mark.parametrize("kind", ["binary", "levels", "continuous"])
@pytest.mark.parametrize("seed", range(3))
def test_same_groups_as_the_released_rule(seed, kind):
    s = _random(seed, 30, 26, kind)
    d = _data(s)
    for m in (1, 2, 3, 5, 8):
        want = _naive(s, m, seed, draws=200)
        groups = [g for g in ("all-strong", "all-weak", "strong-to-weak") if g in want]
        got = candidate_groups(d, m, seed=seed, draws=200, groups=groups)
        assert got == want, (m, kind)


def _fifteen() -> np.ndarray:
    """The reviewer's case: 15 LLMs with means 0.85 .. 0.15; the best all-strong pair
    (l0 + l2, oracle 1.0) is not two consecutively ranked LLMs."""
    nq = 20
    s = np.zeros((nq, 15))
    means = np.linspace(0.85, 0.15, 15)
    for j in range(3, 15):
        s[:int(round(means[j] * nq)), j] = 1
    s[0:17, 0] = 1          # queries 0..16, mean 0.85
    s[1:17, 1] = 1          # queries 1..16, mean 0.80
    s[5:20, 2] = 1          # queries 5..19, mean 0.75
    return s


def test_fifteen_llms_window_pair_not_best_pair():
    d = _data(_fifteen())
    # region max(15 // 5, 2) = 3: l2 l1 l0 (ascending); windows (l2, l1) .95 and (l1, l0) .85
    assert candidate_groups(d, 2, groups=("all-strong",)) == {"all-strong": ["l1", "l2"]}
    assert candidate_groups(d, 2, method="oracle-best",
                            groups=("all-strong",)) == {"all-strong": ["l0", "l2"]}


def test_fifteen_llms_five_per_group_now_formed():
    d = _data(_fifteen())
    g = candidate_groups(d, 5)
    # region max(15 // 5, 5) = 5 = m: the one window is the whole region
    assert g["all-strong"] == ["l0", "l1", "l2", "l3", "l4"]
    assert g["all-weak"] == ["l10", "l11", "l12", "l13", "l14"]
    # 15 qualifying LLMs in 5 blocks of 3: one per block
    blocks = [{f"l{j}" for j in range(b, b + 3)} for b in (12, 9, 6, 3, 0)]
    assert [sum(n in b for n in g["strong-to-weak"]) for b in blocks] == [1] * 5
    # oracle-best: the region is max(ceil(0.2 x 15), 5) = 5 too, so it is formed as well
    assert candidate_groups(d, 5, method="oracle-best")["all-strong"] == g["all-strong"]


def test_bounds_exactly_point_one_out_point_nine_in():
    # 20 queries: means 0.1 (2/20), 0.9 (18/20), 0.5, 0.95 and 0.05
    s = np.zeros((20, 5))
    for j, k in enumerate((2, 18, 10, 19, 1)):
        s[:k, j] = 1
    d = _data(s)
    assert qualified_llms(d)[0] == ["l1", "l2"]
    assert qualified_llms(d, method="oracle-best")[0] == ["l1", "l2", "l0"]
    np.testing.assert_allclose(qualified_llms(d)[1], [0.9, 0.5])
    # N = 5: region max(1, 1) = 1; the strongest is l1 (0.9, kept), the weakest l2
    assert candidate_groups(d, 1) == {"all-strong": ["l1"], "all-weak": ["l2"],
                                      "strong-to-weak": ["l1"]}


def test_bounds_hold_for_continuous_scores_stored_as_float32():
    # an LLM scoring 0.1 on every query (mean 0.1: out), one scoring 0.85 / 0.95 (mean 0.9:
    # in); stored as float32 their float64 means are 0.10000000149 and 0.90000000596
    s = np.array([[0.10, 0.85, 0.5, 0.6, 0.1000001, 0.9000001],
                  [0.10, 0.95, 0.5, 0.6, 0.1000001, 0.9000001]])
    d = _data(s)
    assert d.scores.dtype == np.float32
    # the released rule on the float64 values the data meant: l0 out, l1 in; a mean above a
    # bound by more than float32's rounding still counts (l4 in, l5 out)
    expected = [f"l{j}" for j in np.argsort(-s.mean(axis=0), kind="stable")
                if 0.1 < s.mean(axis=0)[j] <= 0.9]
    assert expected == ["l1", "l3", "l2", "l4"]
    assert qualified_llms(d)[0] == expected
    assert qualified_llms(d, method="oracle-best")[0] == ["l1", "l3", "l2", "l4", "l0"]
    assert candidate_groups(d, 4, groups=["strong-to-weak"]) == {
        "strong-to-weak": ["l1", "l3", "l2", "l4"]}


def test_too_few_qualifying_and_region_outside_the_list_are_one_line_errors():
    s = _fifteen()
    d = _data(np.hstack([s, np.ones((20, 10))]))     # 25 LLMs, 10 above 0.9: 15 qualify
    with pytest.raises(DataValidationError,
                       match=r"only 15 of 25 LLMs .*\(0.1, 0.9\]; need at least m=16") as e:
        candidate_groups(d, 16)
    assert "\n" not in str(e.value)
    wide = _data(np.hstack([s[:, :3], np.ones((20, 12))]))   # 15 LLMs, 3 qualify
    # region max(15 // 5, 2) = 3 fits the 3 qualifying LLMs
    assert region_problem(wide, 2) is None
    few = _data(np.hstack([s[:, :3], np.ones((20, 17))]))    # 20 LLMs, 3 qualify: region 4
    msg = region_problem(few, 2)
    assert msg is not None and "= 4 LLMs is larger than the 3 qualifying LLMs" in msg
    with pytest.raises(DataValidationError, match="larger than the 3 qualifying") as e:
        candidate_groups(few, 2)
    assert "\n" not in str(e.value)
    # strong-to-weak needs only m qualifying LLMs; oracle-best regions never leave the list
    assert len(candidate_groups(few, 2, groups=("strong-to-weak",))["strong-to-weak"]) == 2
    assert region_problem(few, 2, method="oracle-best") is None
    assert candidate_groups(few, 2, method="oracle-best", groups=("all-weak",)) == \
        {"all-weak": ["l1", "l2"]}   # bottom max(ceil(0.6), 2) = 2 of l0 l1 l2
    with pytest.raises(ValueError, match="group method must be one of routereval, oracle-best"):
        candidate_groups(d, 2, method="best")


def test_seeded_and_groups_independent():
    s = np.tile(np.where(np.arange(20) % 2 == 0, 0.6, 0.4), (8, 1))   # ties everywhere
    d = _data(s)
    picks = set()
    for seed in range(6):
        full = candidate_groups(d, 2, seed=seed)
        assert full == candidate_groups(d, 2, seed=seed)
        for g in full:
            assert candidate_groups(d, 2, seed=seed, groups=[g])[g] == full[g]
        picks.add(tuple(full["strong-to-weak"]))
    assert len(picks) > 1   # the draws depend on the seed


@pytest.mark.parametrize("kind", ["binary", "levels", "continuous"])
def test_draw_and_window_oracles_match_a_loop(kind):
    s = _random(5, 70, 40, kind)
    rng = np.random.default_rng(1)
    sizes = np.array([1, 3, 1, 2, 5, 1, 4, 2])           # size-1 blocks: held by every draw
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    idx = starts + rng.integers(0, sizes, size=(300, len(sizes)))
    want = np.array([s[:, r].max(axis=1).mean() for r in idx])
    np.testing.assert_allclose(draw_oracles(s, idx), want, rtol=0, atol=1e-12)
    for path in ("dense", "scan", "levels"):
        np.testing.assert_allclose(draw_oracles(s, idx, cells=50, path=path), want, atol=1e-12)
    np.testing.assert_allclose(draw_oracles(s, idx[:, [0, 2, 5]]),
                               np.full(300, s[:, [0, 4, 12]].max(axis=1).mean()), atol=1e-12)
    sizes = rng.integers(1, 3, 20)          # 20 blocks of 1-2 LLMs (<= 40 columns): scan path
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    idx = starts + rng.integers(0, sizes, size=(300, 20))
    want = np.array([s[:, r].max(axis=1).mean() for r in idx])
    for path in ("auto", "dense", "scan"):
        np.testing.assert_allclose(draw_oracles(s, idx, cells=300, path=path), want, atol=1e-12)
    for m in (1, 3, 7, 40):
        loop = [s[:, i:i + m].max(axis=1).mean() for i in range(40 - m + 1)]
        np.testing.assert_allclose(window_oracles(s, m), loop, atol=1e-12)
        np.testing.assert_allclose(window_oracles(s, m, cells=7), loop, atol=1e-12)
