"""Exploration policies (probabilities by hand, propensities against empirical frequencies)
and the off-policy estimators (by hand, against a loop implementation, and against the truth
of a simulated bandit)."""

from __future__ import annotations

import numpy as np
import pytest

from recsys_router.feedback.explore import (choice_probabilities, draw, parse_explore,
                                            policy_utility)
from recsys_router.feedback.ope import (check_propensities, effective_sample_size,
                                        estimate_all)


def test_parse_explore_and_bad_values():
    assert parse_explore("none").kind == "none"
    assert parse_explore("epsilon:0.2").value == 0.2
    assert parse_explore("thompson:16").n_samples == 16
    for bad in ("epsilon:1.5", "epsilon:x", "softmax:0", "softmax:-1", "greedy", "thompson:1"):
        with pytest.raises(ValueError, match="--explore"):
            parse_explore(bad)


def test_probabilities_by_hand():
    util = np.array([[0.1, 0.5, 0.2]])
    allowed = np.array([[True, True, False]])
    p = choice_probabilities(parse_explore("epsilon:0.4"), np.array([1]), util, allowed)
    assert np.allclose(p, [[0.2, 0.8, 0.0]])  # 0.4/2 each, greedy + 0.6
    p = choice_probabilities(parse_explore("softmax:0.5"), np.array([1]), util, allowed)
    e = np.exp(np.array([0.1, 0.5]) / 0.5)
    assert np.allclose(p, [[e[0] / e.sum(), e[1] / e.sum(), 0.0]])
    # budget: only the affordable LLMs; none affordable -> the cheapest
    u, a = policy_utility(np.array([[0.9, 0.5, 0.1]]), np.array([[5.0, 1.0, 0.5]]), "budget", 1.0)
    assert a.tolist() == [[False, True, True]]
    u, a = policy_utility(np.array([[0.9, 0.5, 0.1]]), np.array([[5.0, 1.0, 0.5]]), "budget", 0.1)
    assert a.tolist() == [[False, False, True]]
    # thompson: the empirical distribution of the draws' winners
    samples = np.array([[[0.9, 0.1, 0.0]], [[0.1, 0.9, 0.0]], [[0.2, 0.8, 0.0]], [[0.0, 0.5, 0.9]]])
    p = choice_probabilities(parse_explore("thompson:4"), np.array([1]), util, allowed, samples)
    assert np.allclose(p, [[0.25, 0.75, 0.0]])  # the third LLM is not allowed


@pytest.mark.parametrize("spec", ["epsilon:0.5", "softmax:0.2"])
def test_budget_without_known_costs_explores_only_the_allowed_llms(spec):
    # no allowed LLM has a known cost: the allowed set stays the request's mask
    mask = np.array([True, False, True])
    u, a = policy_utility(np.array([[0.9, 0.5, 0.1]]), np.full((1, 3), np.nan), "budget", 0.1,
                          mask=mask)
    assert a.tolist() == [[True, False, True]]
    p = choice_probabilities(parse_explore(spec), np.array([0]), u, a)
    assert p[0, 1] == 0.0 and np.isclose(p.sum(), 1.0)
    # one masked column has the only known cost: still only the cheapest *allowed* one
    u, a = policy_utility(np.array([[0.9, 0.5, 0.1]]), np.array([[np.nan, 0.01, 3.0]]),
                          "budget", 0.1, mask=mask)
    assert a.tolist() == [[False, False, True]]


def test_wtp_unknown_cost_is_infinite_as_in_wtp_policy():
    from recsys_router.policies import wtp_policy
    s, c = np.array([[0.5, 0.5]]), np.array([[0.2, np.nan]])
    u, a = policy_utility(s, c, "wtp", 1.0)
    # by hand: 1*0.5 - 0.2 = 0.3 for the known cost, -inf (never free) for the unknown one
    assert u.tolist() == [[0.3, -np.inf]] and wtp_policy(s, c, 1.0).tolist() == [0]
    p = choice_probabilities(parse_explore("softmax:0.5"), np.array([0]), u, a)
    assert p.tolist() == [[1.0, 0.0]]
    # no known cost at all: ranked by predicted score, as wtp_policy does
    s2 = np.array([[0.2, 0.7]])
    u, _ = policy_utility(s2, np.full((1, 2), np.nan), "wtp", 1.0)
    assert u.tolist() == [[0.2, 0.7]] and wtp_policy(s2, np.full((1, 2), np.nan), 1.0).tolist() == [1]


@pytest.mark.parametrize("spec", ["epsilon:0.3", "softmax:0.2"])
def test_propensity_matches_empirical_frequency(spec):
    rng = np.random.default_rng(0)
    util = np.array([[0.2, 0.9, 0.4, 0.5]])
    allowed = np.array([[True, True, True, False]])
    probs = choice_probabilities(parse_explore(spec), np.array([1]), util, allowed)
    n = 40_000
    choice, prop = draw(np.repeat(probs, n, axis=0), rng)
    freq = np.bincount(choice, minlength=4) / n
    # each logged propensity is the probability of what was drawn ...
    assert np.allclose(prop, probs[0, choice])
    # ... and matches how often it was drawn (4 binomial standard errors)
    se = np.sqrt(probs[0] * (1 - probs[0]) / n)
    assert np.all(np.abs(freq - probs[0]) <= 4 * se + 1e-12)
    assert freq[3] == 0


def _loop_estimates(r, p, pi, a, q):
    """Second, loop-based implementation of the four estimators."""
    n = len(r)
    w = [pi[i][a[i]] / p[i] for i in range(n)]
    ips = sum(w[i] * r[i] for i in range(n)) / n
    snips = sum(w[i] * r[i] for i in range(n)) / sum(w)
    dm = sum(sum(pi[i][j] * q[i][j] for j in range(len(q[i]))) for i in range(n)) / n
    dr = dm + sum(w[i] * (r[i] - q[i][a[i]]) for i in range(n)) / n
    return {"ips": ips, "snips": snips, "dm": dm, "dr": dr}


def test_estimators_against_loop_implementation():
    rng = np.random.default_rng(1)
    n, L = 50, 3
    r = rng.random(n)
    p = rng.uniform(0.1, 1.0, n)
    a = rng.integers(0, L, n)
    pi = rng.dirichlet(np.ones(L), n)
    q = rng.random((n, L))
    got = estimate_all(r, p, pi, a, q, n_boot=0)
    want = _loop_estimates(r, p, pi, a, q)
    for k in want:
        assert got[k]["value"] == pytest.approx(want[k], rel=1e-12)
    w = pi[np.arange(n), a] / p
    assert got["ess"] == pytest.approx(w.sum() ** 2 / (w ** 2).sum())
    assert effective_sample_size([2.0, 2.0]) == 2.0


def test_estimates_cover_the_truth_of_a_simulated_bandit():
    """Uniform logging over 4 arms, a deterministic target: DR/SNIPS close to the true
    value computed from the full matrix, and their intervals cover it."""
    rng = np.random.default_rng(3)
    n, L = 4000, 4
    full = (rng.random((n, L)) < np.array([0.3, 0.5, 0.6, 0.4])).astype(float)
    target = rng.integers(0, L, n)
    truth = full[np.arange(n), target].mean()
    a = rng.integers(0, L, n)
    pi = np.zeros((n, L))
    pi[np.arange(n), target] = 1.0
    q = np.tile(np.array([0.3, 0.5, 0.6, 0.4]), (n, 1)) + 0.05  # slightly wrong reward model
    out = estimate_all(full[np.arange(n), a], np.full(n, 1 / L), pi, a, q, n_boot=300, seed=0)
    for k in ("snips", "dr", "ips"):
        assert abs(out[k]["value"] - truth) < 0.03
        assert out[k]["lo"] <= truth <= out[k]["hi"]
    assert abs(out["dm"]["value"] - truth) > 0.02  # DM inherits the model's bias
    assert out["ess"] == pytest.approx(n / L, rel=0.1)


@pytest.mark.parametrize("bad", [0.0, 1.5, -0.1, float("nan")])
def test_bad_propensities_are_clear_errors(bad):
    with pytest.raises(ValueError, match=r"row 1: propensity .* must be in \(0, 1\]"):
        check_propensities([0.5, bad, 0.2])
    with pytest.raises(ValueError, match="propensity"):
        estimate_all([1.0, 0.0], [0.5, bad], np.eye(2), [0, 1], n_boot=0)


@pytest.mark.parametrize("bad", [-1, 3])
def test_logged_action_outside_the_columns_is_an_error_naming_the_row(bad):
    pi = np.array([[1.0, 0, 0], [0, 0, 1.0], [0, 1.0, 0]])
    with pytest.raises(ValueError, match=rf"row 1: logged action {bad} is not a column of the 3"):
        estimate_all([1.0, 1.0, 0.0], [0.5, 0.5, 0.5], pi, [0, bad, 1], n_boot=0)


def test_estimate_all_refuses_target_probabilities_that_are_not_distributions():
    r, p, a = np.array([1.0, 0.0, 1.0]), np.array([0.5, 0.5, 0.25]), np.array([0, 1, 2])
    good = np.array([[0.7, 0.2, 0.1], [1 / 3, 1 / 3, 1 / 3], [0.0, 0.0, 1.0]])
    # (1/3) * (0.7/0.5 * 1 + (1/3)/0.5 * 0 + 1/0.25 * 1) by hand
    assert estimate_all(r, p, good, a, n_boot=0)["ips"]["value"] == pytest.approx((1.4 + 4.0) / 3)
    for row, bad, what in ((0, [3.0, 0.0, 0.0], r"sum 3.0"), (1, [-1.0, 1.0, 1.0], r"sum 1.0"),
                           (2, [np.nan, 0.5, 0.5], r"nan"), (1, [0.5, 0.5 + 1e-6, 0.0], r"sum 1.000001"),
                           (2, [np.inf, 0.0, 0.0], r"inf")):
        pi = good.copy()
        pi[row] = bad
        with pytest.raises(ValueError, match=rf"^target probabilities: row {row}: .*{what}"):
            estimate_all(r, p, pi, a, n_boot=0)
    pi = good.copy()
    pi[1] = [0.5, 0.5 + 1e-12, 0.0]     # within 1e-9 of summing to 1
    assert np.isfinite(estimate_all(r, p, pi, a, n_boot=0)["ips"]["value"])


def test_softmax_tiny_temperature_is_the_argmax_and_never_nan():
    util = np.array([[0.9, 0.5, 0.1], [0.7, 0.7, 0.2], [0.3, 0.8, 0.8], [-np.inf, -np.inf, 0.0]])
    allowed = np.array([[True] * 3, [True] * 3, [True, True, False], [True, True, False]])
    expected = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.0, 1.0, 0.0], [0.5, 0.5, 0.0]])
    for t in (1e-300, 1e-310, 5e-324):   # 1e-310 overflowed u / T to inf and gave NaN
        p = choice_probabilities(parse_explore(f"softmax:{t!r}"), np.array([0, 0, 1, 0]), util,
                                 allowed)
        assert np.array_equal(p, expected)
        ch, prop = draw(p, np.random.default_rng(0))
        assert np.isfinite(prop).all() and np.array_equal(prop, p[np.arange(4), ch])
    # a moderate temperature still matches the formula: exp(u / T) / sum exp(u / T)
    p = choice_probabilities(parse_explore("softmax:0.25"), np.array([0]), util[:1], allowed[:1])
    e = np.exp(util[0] / 0.25)
    assert np.allclose(p[0], e / e.sum(), rtol=1e-12)
    with pytest.raises(ValueError, match="query 0 are not a distribution"):
        draw(np.array([[np.nan, np.nan]]), np.random.default_rng(0))


def test_draw_refuses_rows_that_are_not_distributions():
    """A row not summing to 1 was sampled renormalised but returned its raw value as the
    propensity ([0.2, 0.2]: drawn at 0.5, logged as 0.2); it is refused now."""
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=r"query 1 are not a distribution: \[0\.2, 0\.2\] \(sum 0\.4;"):
        draw(np.array([[0.5, 0.5], [0.2, 0.2]]), rng)
    with pytest.raises(ValueError, match=r"query 0 are not a distribution: \[1\.0, 0\.5\] \(sum 1\.5;"):
        draw(np.array([[1.0, 0.5]]), rng)
    with pytest.raises(ValueError, match=r"query 0 are not a distribution"):
        draw(np.array([[0.5, 0.5 + 1e-6]]), rng)      # float64: 1e-9 of rounding at most
    # within rounding of the dtype: accepted, the propensity is the row's value at the choice
    p32 = np.full((50, 3), 1 / 3, np.float32)          # sums to 1 within float32 rounding only
    ch, prop = draw(p32, rng)
    assert np.array_equal(prop, p32[np.arange(50), ch].astype(np.float64))
    ch, prop = draw(np.array([[0.25, 0.75]] * 4000), rng)
    assert abs(np.mean(ch == 1) - 0.75) < 0.03 and set(prop[ch == 1].tolist()) == {0.75}


def test_budget_exploration_never_admits_an_unknown_cost_even_at_an_infinite_budget():
    """policies.budget_policy never lets an LLM of unknown (NaN) cost fit, even C = inf; the
    exploration set of policy_utility admitted it at C = inf (softmax served it 98%)."""
    from recsys_router.policies import budget_policy
    s, c = np.array([[0.2, 0.9, 0.5]]), np.array([[0.1, np.nan, 0.3]])
    for budget in (1.0, float("inf")):
        u, allowed = policy_utility(s, c, "budget", budget)
        assert allowed.tolist() == [[True, False, True]]
        g = budget_policy(s, c, budget)
        assert g.tolist() == [2]
        # epsilon 0.3 over the 2 affordable LLMs: 0.15 each, plus 0.7 on the greedy one
        p = choice_probabilities(parse_explore("epsilon:0.3"), g, u, allowed)
        assert np.allclose(p, [[0.15, 0.0, 0.85]])
        p = choice_probabilities(parse_explore("softmax:0.1"), g, u, allowed)
        e = np.exp(np.array([0.2, 0.5]) / 0.1)
        assert np.allclose(p, [[e[0] / e.sum(), 0.0, e[1] / e.sum()]])
    # a second, plain implementation of the rule on random rows: an LLM is affordable when
    # its cost is known and <= C; when none is, the cheapest known ones; with no known cost,
    # all of them. budget_policy's own choice is always among them.
    rng = np.random.default_rng(0)
    for _ in range(300):
        s = rng.random((1, 4))
        c = np.where(rng.random((1, 4)) < 0.4, np.nan, rng.random((1, 4)))
        budget = float(rng.choice([0.0, 0.3, 0.7, np.inf]))
        known = np.isfinite(c[0])
        fits = known & (np.nan_to_num(c[0], nan=np.inf) <= budget)
        if not fits.any():
            fits = known & (c[0] == np.nanmin(c[0])) if known.any() else np.ones(4, bool)
        _, allowed = policy_utility(s, c, "budget", budget)
        assert allowed[0].tolist() == fits.tolist()
        assert allowed[0, budget_policy(s, c, budget)[0]]


def test_estimate_all_refuses_bad_alpha_fractional_actions_and_misshapen_propensities():
    r, p, pi = np.array([1.0, 0.0, 1.0, 0.5]), np.full(4, 0.5), np.eye(2)[[0, 1, 0, 1]]
    a = [0, 1, 0, 1]
    # alpha = 1.5 gave an inverted interval (lo 1.5 > hi 1.0)
    for alpha in (1.5, 1.0, 0.0, -0.1, float("nan"), True, "0.05"):
        with pytest.raises(ValueError, match=r"alpha must be a number in \(0, 1\)"):
            estimate_all(r, p, pi, a, n_boot=5, alpha=alpha)
    o = estimate_all(r, p, pi, a, n_boot=50, alpha=np.float64(0.1))
    assert o["ips"]["lo"] <= o["ips"]["hi"]
    # fractional actions were truncated ([0.9, 1.7, 0.2, 1.0] read as [0, 1, 0, 1])
    with pytest.raises(ValueError, match=r"^row 0: logged action 0\.9 is not a whole number"):
        estimate_all(r, p, pi, [0.9, 1.7, 0.2, 1.0], n_boot=0)
    with pytest.raises(ValueError, match=r"^row 2: logged action nan is not a whole number"):
        estimate_all(r, p, pi, [0.0, 1.0, np.nan, 1.0], n_boot=0)
    with pytest.raises(ValueError, match=r"^row 0: logged action 'x' is not a whole number"):
        estimate_all(r, p, pi, ["x", 1, 0, 1], n_boot=0)
    # whole floats are columns: w = 1 / 0.5 = 2 on every row, IPS = 2 * mean(r) = 1.25 by hand
    assert estimate_all(r, p, pi, [0.0, 1.0, 0.0, 1.0], n_boot=0)["ips"]["value"] == 1.25
    # 3 propensities for 4 outcomes: a bare numpy broadcast error before
    with pytest.raises(ValueError, match=r"shapes disagree: 4 outcomes, .*propensities \(3,\)"):
        estimate_all(r, p[:3], pi, a, n_boot=0)
    with pytest.raises(ValueError, match=r"shapes disagree: 4 outcomes, .*propensities \(\)"):
        estimate_all(r, 0.5, pi, a, n_boot=0)


def test_softmax_and_thompson_at_a_wtp_past_float64_follow_the_best_score():
    """lambda * P_hat overflowing made every allowed utility +inf: softmax split the mass
    evenly and Thompson took the first column. The limit puts the mass on the best score."""
    s = np.array([[2.0, 9.0, 9.0, 5.0]])
    c = np.array([[1.0, 5.0, 5.0, 0.1]])
    u, a = policy_utility(s, c, "wtp", 1e308)
    assert u.tolist() == [[-np.inf, -5.0, -5.0, -np.inf]] and a.all()
    p = choice_probabilities(parse_explore("softmax:1"), np.array([1]), u, a)
    assert p.tolist() == [[0.0, 0.5, 0.5, 0.0]]        # the two best, equal cost: halves
    mask = np.array([[True, False, False, True]])       # best allowed score is 5 (column 3)
    u2, a2 = policy_utility(s, c, "wtp", 1e308, mask)
    assert np.argmax(np.where(a2, u2, -np.inf)) == 3
    samples = np.stack([policy_utility(s + d, c, "wtp", 1e308)[0]
                        for d in ([0.0, 0.0, 1.0, 0.0], [0.0, 2.0, 0.0, 0.0])])
    p = choice_probabilities(parse_explore("thompson:2"), np.array([1]), u, a, samples)
    assert p.tolist() == [[0.0, 0.5, 0.5, 0.0]]
    u3, _ = policy_utility(s, c, "wtp", 2.0)            # ordinary values unchanged
    assert u3.tolist() == [[3.0, 13.0, 13.0, 9.9]]
