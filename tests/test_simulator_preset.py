"""The many-LLM simulator preset: 40 LLMs x 20,000 queries with task and within-task structure."""

import numpy as np

from recsys_router.datasets import load_dataset
from recsys_router.datasets.synthetic import make_synthetic


def test_many_llm_preset_has_its_size_and_structure():
    d = load_dataset("synthetic-many", seed=0, with_text=False)
    assert d.shape == (20_000, 40) and d.meta["simulated"] and d.name == "synthetic-many"
    tasks = np.asarray(d.tasks)
    names = sorted(set(tasks))
    assert len(names) == 12
    means = np.array([d.scores[tasks == t].mean(axis=0) for t in names])     # task x LLM
    # per-task structure: the best LLM is not the same on every task
    assert len(set(means.argmax(axis=1))) >= 4
    # tasks differ in mean difficulty, and queries differ within a task
    assert means.mean(axis=1).std() > 0.05
    q = d.scores.mean(axis=1)
    within = np.mean([q[tasks == t].std() for t in names])
    assert within > 0.15


def test_preset_options_override_and_default_data_is_unchanged():
    d = load_dataset("synthetic-many", seed=1, n_queries=200, with_text=True)
    assert d.shape == (200, 40) and all(isinstance(t, str) and t for t in d.texts)
    # task_difficulty=0 (the default) leaves the classic simulator's draws untouched
    a = make_synthetic(300, 5, 3, seed=4)
    b = make_synthetic(300, 5, 3, seed=4, task_difficulty=0.0)
    np.testing.assert_array_equal(a.scores, b.scores)
    c = make_synthetic(300, 5, 3, seed=4, task_difficulty=1.0)
    assert not np.array_equal(a.scores, c.scores)


def test_routereval_scale_preset_options_and_qualifying_llms():
    from recsys_router.pools import qualified_llms   # noqa: PLC0415
    d = load_dataset("synthetic-routereval", seed=0, n_queries=400, with_text=False)
    assert d.shape == (400, 2_000) and d.name == "synthetic-routereval" and d.meta["simulated"]
    # most LLMs have a mean score in RouterEval's [0.1, 0.9] band, so pools of 1,000 exist
    assert len(qualified_llms(d)[0]) >= 1_000
