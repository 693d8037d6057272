"""``stratified`` probe selection: which strata get probes is drawn under the seed, each
stratum's expected probe count is its proportional share, and the weights are the ones the
module docstring gives (checked against counts and by-hand formulas, over many seeds)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recsys_router.coldstart.selection import select_probes
from recsys_router.data import RoutingData
from recsys_router.registry import make_router


def _tasks_data(sizes: dict[str, int]) -> RoutingData:
    tasks = [t for t, n in sizes.items() for _ in range(n)]
    q = pd.DataFrame({"query_id": [f"q{i}" for i in range(len(tasks))],
                      "text": [f"question number {i}" for i in range(len(tasks))],
                      "task": tasks})
    scores = np.random.default_rng(0).integers(0, 2, (len(tasks), 2)).astype(float)
    return RoutingData(q, ["a", "b"], scores)


@pytest.fixture(scope="module")
def twenty_tasks():
    d = _tasks_data({f"task_{i:02d}": 10 for i in range(20)})
    return d, make_router("best-single").fit(d)


def test_more_equal_tasks_than_probes_every_task_can_be_chosen(twenty_tasks):
    """The reviewer's case: 20 tasks of 10 queries, 5 probes. Each task's share is 1/4 of a
    probe, so each seed probes 5 distinct tasks, each task with chance 1/4 (the old code
    probed task_00..task_04 under every seed)."""
    d, r = twenty_tasks
    tasks = np.asarray(d.tasks, dtype=str)
    n_seeds = 400
    chosen = pd.Series(0, index=sorted(set(tasks)))
    sets = set()
    for seed in range(n_seeds):
        rows = select_probes(r, d, 5, "stratified", seed=seed)
        picked = tasks[rows]
        assert len(set(picked)) == 5           # one probe per chosen task
        chosen[list(picked)] += 1
        sets.add(tuple(sorted(picked)))
    # every task chosen; each about n_seeds / 4 = 100 times (binomial sd 8.7; +-40 is 4.6 sd)
    assert (chosen > 0).all()
    assert ((chosen - n_seeds / 4).abs() <= 40).all(), chosen.to_dict()
    assert len(sets) > 300                      # the choice depends on the seed
    a, b = (tuple(sorted(tasks[select_probes(r, d, 5, "stratified", seed=s)])) for s in (0, 1))
    assert a != b


def test_the_weighted_probe_mean_is_unbiased_over_seeds(twenty_tasks):
    """A new LLM right on tasks 10-19 only (true mean 0.5): the weighted probe mean averages
    0.5 over seeds (it was 0.0 under every seed). Per seed the estimate is the mean of 5 of
    20 task values drawn without replacement: sd sqrt(0.25 / 5 * 15 / 19) = 0.199, so the
    mean of 400 seeds has sd 0.010; the bound 0.05 is 5 sd."""
    d, r = twenty_tasks
    y = (np.array([int(t[-2:]) for t in d.tasks]) >= 10).astype(float)
    est = []
    for seed in range(400):
        rows, w = select_probes(r, d, 5, "stratified", seed=seed, return_weights=True)
        np.testing.assert_allclose(w, 1.0)     # every share < 1: each probe stands for N / k
        est.append(np.average(y[rows], weights=w))
    assert abs(np.mean(est) - 0.5) < 0.05
    assert min(est) < 0.5 < max(est)


def test_unequal_strata_get_their_share_in_expectation_and_the_stated_weights():
    """Strata of 70, 50, 40, 30 and 10 queries (N = 200), k = 6: shares 2.1, 1.5, 1.2, 0.9,
    0.3. Each seed gives each stratum floor(share) or that plus one probe, 6 in all, and over
    seeds the mean count is the share (the old largest-remainder rule gave 2, 2, 1, 1, 0
    under every seed: E never probed). Weights: size / probes for the strata with a share of
    at least one, N / k = 33.3 for D and E, scaled to mean 1."""
    sizes = {"A": 70, "B": 50, "C": 40, "D": 30, "E": 10}
    d = _tasks_data(sizes)
    r = make_router("best-single").fit(d)
    tasks = np.asarray(d.tasks, dtype=str)
    share = {t: 6 * n / 200 for t, n in sizes.items()}
    counts = []
    for seed in range(1000):
        rows, w = select_probes(r, d, 6, "stratified", seed=seed, return_weights=True)
        assert len(set(rows.tolist())) == 6
        got = pd.Series(tasks[rows]).value_counts().reindex(list(sizes), fill_value=0)
        for t in sizes:
            assert int(np.floor(share[t])) <= got[t] <= int(np.floor(share[t])) + 1
        raw = np.array([sizes[t] / got[t] if share[t] >= 1 else 200 / 6 for t in tasks[rows]])
        np.testing.assert_allclose(w, raw * 6 / raw.sum())
        counts.append(got.to_numpy())
    mean = np.mean(counts, axis=0)
    # each count is floor + Bernoulli(fraction): sd of the mean over 1000 seeds <= 0.016
    np.testing.assert_allclose(mean, [share[t] for t in sizes], atol=0.07)


def test_integer_shares_are_exact_and_seeds_still_vary_the_rows():
    """Shares that are whole numbers leave nothing to chance in the counts (3 and 1 probes
    of strata of 60 and 20 at k = 4); the rows within them still vary with the seed."""
    d = _tasks_data({"big": 60, "small": 20})
    r = make_router("best-single").fit(d)
    tasks = np.asarray(d.tasks, dtype=str)
    seen = set()
    for seed in range(20):
        rows, w = select_probes(r, d, 4, "stratified", seed=seed, return_weights=True)
        assert sorted(tasks[rows].tolist()) == ["big", "big", "big", "small"]
        np.testing.assert_allclose(w, 1.0)     # 60 / 3 = 20 / 1
        seen.add(tuple(sorted(rows.tolist())))
    assert len(seen) > 1
