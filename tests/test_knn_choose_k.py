"""kNN with k=None: k chosen on an inner validation split of the training queries."""

import numpy as np

from recsys_router.data import RoutingData
from recsys_router.fallback import stratified_holdout
from recsys_router.models.baselines.neighbours import K_GRID, KNNRouter, choose_k


def _brute_table(x, s, tasks, seed):
    """Second implementation: a plain loop over validation queries and k."""
    tr, va = stratified_holdout(tasks, 0.2, seed)
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    means = np.nanmean(s[tr], axis=0)
    table = {}
    for k in [k for k in K_GRID if k <= len(tr)]:
        got = []
        for i in va:
            d = np.round(1.0 - xn[tr] @ xn[i], 10)
            nb = tr[np.argsort(d, kind="stable")[:k]]
            pred = np.array([np.nanmean(s[nb, j]) if (~np.isnan(s[nb, j])).any() else means[j]
                             for j in range(s.shape[1])])
            obs = ~np.isnan(s[i])
            pred[~obs] = -np.inf
            got.append(s[i, int(np.argmax(pred))])
        table[k] = float(np.mean(got))
    return table


def _noisy_clusters(seed=0, n=120):
    rng = np.random.default_rng(seed)
    c = rng.integers(0, 3, n)
    x = np.eye(3)[c] + 0.6 * rng.standard_normal((n, 3))
    p = np.array([[0.8, 0.3, 0.4], [0.2, 0.7, 0.4], [0.3, 0.3, 0.9]])[c]
    s = (rng.random((n, 3)) < p).astype(float)
    s[rng.random((n, 3)) < 0.1] = np.nan
    s[np.isnan(s).all(axis=1), 0] = 1.0
    return x, s, [f"t{v % 2}" for v in c]


def test_choose_k_matches_a_brute_force_search():
    x, s, tasks = _noisy_clusters()
    k, table = choose_k(x, s, tasks, "cosine", seed=3)
    ref = _brute_table(x, s, tasks, 3)
    assert table.keys() == ref.keys()
    np.testing.assert_allclose([table[k_] for k_ in ref], list(ref.values()), atol=1e-12)
    best = max(ref.values())
    assert k == max(k_ for k_, v in ref.items() if v == best)
    assert 1 < k          # noisy labels: one neighbour is not the best


def test_router_with_k_none_uses_the_chosen_k_and_given_k_is_kept():
    x, s, tasks = _noisy_clusters(seed=1)
    ids = [f"q{i}" for i in range(len(s))]

    class Vec:
        needs_fit, needs_text = False, False

        def encode(self, texts, query_ids=None):
            return x[[ids.index(q) for q in query_ids]]

    import pandas as pd
    d = RoutingData(pd.DataFrame({"query_id": ids, "task": tasks}), ["a", "b", "c"], s)
    r = KNNRouter(encoder=Vec(), seed=2).fit(d)
    k, table = choose_k(x, s, np.asarray(tasks, dtype=object), "cosine", 2)
    assert r.k_ == k and r.k_scores_ == table
    r5 = KNNRouter(k=5, encoder=Vec()).fit(d)
    assert r5.k_ == 5 and r5.k_scores_ == {}
