"""``recsys-router ope``'s cost outcome and its report notes (review O of 2026-12-03): the cost
model was held fixed in the bootstrap (DM's cost interval of zero width, while the report said
it was refitted), one decision without a known cost dropped the whole cost section, and a
target that never agrees with the log got no warning."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import recsys_router.feedback.report as rep
from recsys_router.feedback.logged import log_to_data
from recsys_router.feedback.reward import mean_outcome_refit


def _log(n=200, unknown=(), seed=0, chosen=None):
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        ch = int(rng.integers(0, 2)) if chosen is None else chosen
        cost = None if i in unknown else float(rng.exponential([0.1, 1.0][ch]))
        rows.append({"decision_id": f"d{i}", "chosen": "ab"[ch], "propensity": 0.5,
                     "candidates": json.dumps(["a", "b"]), "probs": json.dumps({"a": 0.5, "b": 0.5}),
                     "query_text": f"q {i}", "feedback_score": float(rng.random() < 0.5),
                     "feedback_cost": cost})
    return log_to_data(pd.DataFrame(rows)), rows


@pytest.fixture
def always_b(monkeypatch):
    monkeypatch.setattr(rep, "target_probabilities",
                        lambda router, log, **k: np.tile([0.0, 1.0], (log.n_queries, 1)))


def test_mean_outcome_refit_by_hand():
    f = mean_outcome_refit(np.array([1.0, 3.0, 10.0]), np.array([0, 0, 1]), np.full(3, 0.5), 3)
    # LLM 0: (1 + 3) / 2; LLM 1: 10; LLM 2 (never chosen): the pooled mean 14 / 3
    assert f(np.ones(3))[0] == pytest.approx([2.0, 10.0, 14 / 3])
    assert f(np.array([2.0, 0.0, 1.0]))[1] == pytest.approx([1.0, 10.0, 4.0])   # (2 + 10) / 3


def test_the_cost_model_is_refitted_on_every_resample(always_b):
    log, rows = _log()
    t = rep.evaluate_on_log(None, log, n_boot=200, seed=0).set_index(["outcome", "estimator"])
    b = np.array([r["feedback_cost"] for r in rows if r["chosen"] == "b"])
    dm = t.loc[("cost", "dm")]
    assert dm["value"] == pytest.approx(b.mean())       # the mean cost of b, by hand
    assert dm["refit"] == 200
    # a plain bootstrap of that mean, for the interval's width (was [1.1464, 1.1464])
    rng = np.random.default_rng(1)
    naive = np.quantile([rng.choice(b, len(b)).mean() for _ in range(2000)], [0.025, 0.975])
    assert dm["lo"] < dm["value"] < dm["hi"]
    assert 0.5 < (dm["hi"] - dm["lo"]) / (naive[1] - naive[0]) < 2.0


def test_a_decision_without_a_known_cost_leaves_the_others_estimated(always_b):
    log, rows = _log(unknown={3})
    t = rep.evaluate_on_log(None, log, n_boot=20, seed=0)
    cost = t[t.outcome == "cost"].set_index("estimator")
    assert len(cost) == 4 and (cost["n"] == 199).all()
    # IPS over the 199 decisions with a cost: mean of 1[chose b] * cost / 0.5
    kept = [r for i, r in enumerate(rows) if i != 3]
    want = np.mean([(r["chosen"] == "b") * r["feedback_cost"] / 0.5 for r in kept])
    assert cost.loc["ips", "value"] == pytest.approx(want)
    md = rep.ope_markdown(t, "t", n_boot=20)
    assert "Cost estimates use the 199 decisions whose chosen LLM's cost is known (1 without" in md


def test_a_target_that_never_agrees_with_the_log_is_named(always_b):
    log, _ = _log(chosen=0)                              # the log chose a every time
    t = rep.evaluate_on_log(None, log, n_boot=20, seed=0)
    assert t["ess"].iloc[0] == 0
    assert "**No overlap**" in rep.ope_markdown(t, "t", n_boot=20)
    log, _ = _log()
    assert "No overlap" not in rep.ope_markdown(rep.evaluate_on_log(None, log, n_boot=20), "t", 20)


def test_no_overlap_on_the_known_cost_decisions_alone_is_named(always_b):
    """Cost is estimated on the decisions whose cost is known; when the target never agrees
    with the log there (every 'b' decision lacks its cost), the cost rows have no overlap
    while the score rows do, and the report said nothing of it (review D3 B3)."""
    _, rows = _log()
    for r in rows:
        if r["chosen"] == "b":
            r["feedback_cost"] = None
    n_known = sum(r["chosen"] == "a" for r in rows)
    t = rep.evaluate_on_log(None, log_to_data(pd.DataFrame(rows)), n_boot=20, seed=0)
    cost = t[t.outcome == "cost"].set_index("estimator")
    assert (cost["n"] == n_known).all() and (cost["ess"] == 0).all()
    assert t[t.outcome == "score"]["ess"].iloc[0] > 0
    md = rep.ope_markdown(t, "t", n_boot=20)
    assert "**No overlap**:" not in md          # the score rows do overlap
    assert (f"**No overlap for cost**: on the {n_known} decisions with a known cost the target "
            "never chooses the LLM the log chose") in md
    # one decision of 'b' with its cost known: overlap there too, no note
    rows[[r["chosen"] for r in rows].index("b")]["feedback_cost"] = 0.5
    t = rep.evaluate_on_log(None, log_to_data(pd.DataFrame(rows)), n_boot=20, seed=0)
    assert "No overlap" not in rep.ope_markdown(t, "t", n_boot=20)
