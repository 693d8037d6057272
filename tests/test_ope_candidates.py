"""Off-policy evaluation restricts the target router, per logged decision, to the LLMs that
request offered: an LLM it was not offered was never a possible action there."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from recsys_router.data import RoutingData
from recsys_router.feedback.logged import log_to_data
from recsys_router.feedback.report import evaluate_on_log, target_probabilities
from recsys_router.registry import make_router


@pytest.fixture
def target():
    # b is the better LLM on every training query, so the router always prefers b
    train = RoutingData(pd.DataFrame({"query_id": [f"t{i}" for i in range(6)]}), ["a", "b"],
                        np.tile([0.0, 1.0], (6, 1)))
    return make_router("best-single").fit(train)


def _log():
    # four requests offered only a (chosen with probability 1, score 0.5), two offered a and b
    # (b chosen with probability 0.5, score 1)
    return log_to_data(pd.DataFrame({
        "decision_id": [f"d{i}" for i in range(6)], "chosen": ["a"] * 4 + ["b"] * 2,
        "propensity": [1.0] * 4 + [0.5] * 2,
        "candidates": ['["a"]'] * 4 + ['["a", "b"]'] * 2,
        "feedback_score": [0.5] * 4 + [1.0] * 2}))


def test_target_chooses_among_the_offered_llms(target):
    log = _log()
    pi = target_probabilities(target, log)
    b = log.llm_names.index("b")
    assert pi[:4, b].tolist() == [0.0] * 4 and pi[4:, b].tolist() == [1.0, 1.0]
    # IPS by hand: (4 x 0.5 / 1 + 2 x 1 / 0.5) / 6 = 1.0 (counting b on the a-only requests
    # as misses gave 4 / 6)
    table = evaluate_on_log(target, log, n_boot=0)
    ips = table[(table["outcome"] == "score") & (table["estimator"] == "ips")]["value"].iloc[0]
    assert ips == pytest.approx(1.0)


def test_without_offered_llms_the_target_chooses_among_all(target):
    log = _log()
    log = RoutingData(log.queries.drop(columns="candidates"), log.llm_names, log.scores,
                      name=log.name)
    assert target_probabilities(target, log)[:, log.llm_names.index("b")].tolist() == [1.0] * 6


def test_a_malformed_candidates_column_is_refused(target):
    log = _log()
    q = log.queries.copy()
    q.loc[2, "candidates"] = "{not json"
    bad = RoutingData(q, log.llm_names, log.scores, name="hand-made")
    with pytest.raises(ValueError, match=r"hand-made: query 2: 'candidates' '\{not json' is not a JSON list"):
        target_probabilities(target, bad)
