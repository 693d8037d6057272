"""Support violations: the target chooses an LLM the logging policy could not have chosen;
OPE counts such decisions and flags IPS, SNIPS and DR as biased."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.feedback.logged import log_to_data, logging_matrix
from recsys_router.feedback.logging_sim import simulate_log
from recsys_router.feedback.ope import estimate_all, unsupported
from recsys_router.feedback.report import evaluate_on_log, ope_markdown
from recsys_router.registry import make_router


def test_unsupported_counts_by_hand():
    pi = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.2, 0.3, 0.5], [0.0, 0.0, 1.0]])
    a = np.array([0, 0, 1, 2])
    # no logging probabilities: only the propensity-1 rows can be checked
    assert unsupported(pi, a, [1.0, 1.0, 1.0, 0.5]).tolist() == [True, False, True, False]
    mu = np.array([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.5, 0.5, 0.0]])
    assert unsupported(pi, a, [0.5, 1.0, 1.0, 0.5], mu).tolist() == [False, False, True, True]
    o = estimate_all(np.ones(4), [0.5, 1.0, 1.0, 0.5], pi, a, n_boot=0, logging_probs=mu)
    assert o["unsupported"] == 2


def test_deterministic_logger_flags_ips_snips_dr():
    d = make_synthetic(400, 3, seed=0)
    tr, te = d.subset(np.arange(200)), d.subset(np.arange(200, 400))
    router = make_router("knn").fit(tr)
    best = int(np.nanargmax(np.nanmean(tr.scores, axis=0)))
    probs = np.zeros((200, 3))
    probs[:, best] = 1.0
    log, _ = simulate_log(te, probs, seed=1)
    disagree = int((router.route_indices(te) != best).sum())
    assert disagree > 0
    t = evaluate_on_log(router, log, n_boot=20, seed=0)
    assert (t["unsupported"] == disagree).all()
    assert t.set_index(["outcome", "estimator"])["biased"].to_dict() == {
        (o, e): e != "dm" for o in ("score", "cost") for e in ("ips", "snips", "dm", "dr")}
    md = ope_markdown(t, "x", n_boot=20)
    assert f"on {disagree} of 200 decisions" in md and "| score | IPS (biased) |" in md
    assert "| score | DM |" in md
    # a log with full support: nothing flagged
    log_u, _ = simulate_log(te, np.full((200, 3), 1 / 3), seed=1)
    t = evaluate_on_log(router, log_u, n_boot=0, seed=0)
    assert (t["unsupported"] == 0).all() and not t["biased"].any()
    assert "Support violation" not in ope_markdown(t, "x", n_boot=0)


def _declog(probs):
    return pd.DataFrame({"decision_id": ["d0", "d1", "d2"], "chosen": ["A", "A", "B"],
                         "propensity": [0.9, 0.9, 0.5], "candidates": [json.dumps(["A", "B"])] * 3,
                         "feedback_score": [1.0, 0.0, 1.0], "explore": ["epsilon:0.2"] * 3,
                         "probs": probs})


def test_log_to_data_keeps_the_logging_probabilities():
    # d1 gives B no probability (B is left out; the rest of the mass went to an LLM, C, that
    # is not a column of the log: probs must sum to 1)
    d = log_to_data(_declog([json.dumps({"A": 0.9, "B": 0.1}), json.dumps({"A": 0.9, "C": 0.1}),
                             json.dumps({"A": 0.5, "B": 0.5})]))
    assert d.queries["explore"].tolist() == ["epsilon:0.2"] * 3
    mu = logging_matrix(d)
    assert d.llm_names == ["A", "B"]
    assert mu.tolist() == [[0.9, 0.1], [0.9, 0.0], [0.5, 0.5]]
    # a target always choosing B: d1 logged B with probability 0
    pi = np.tile([0.0, 1.0], (3, 1))
    a = np.array([0, 0, 1])
    o = estimate_all(np.array([1.0, 0.0, 1.0]), d.queries["propensity"], pi, a, n_boot=0,
                     logging_probs=mu)
    assert o["unsupported"] == 1
    with pytest.raises(ValueError, match=r"log: row 1 \(decision_id 'd1'\): probs"):
        log_to_data(_declog([json.dumps({"A": 0.9}), "[0.5]", None]))


def test_probs_contradicting_the_propensity_or_not_summing_to_one_are_refused():
    ok = [json.dumps({"A": 0.9, "B": 0.1}), json.dumps({"A": 0.9, "B": 0.1}),
          json.dumps({"A": 0.5, "B": 0.5})]
    # the logged LLM with logging probability 0 (it was drawn, so impossible)
    bad = ok[:1] + [json.dumps({"A": 0.0, "B": 1.0})] + ok[2:]
    with pytest.raises(ValueError, match=r"^log: row 1 \(decision_id 'd1'\): probs give the chosen "
                                         r"LLM 'A' probability 0\.0, but its propensity is 0\.9"):
        log_to_data(_declog(bad))
    # a distribution, but another probability than the propensity for the chosen LLM
    with pytest.raises(ValueError, match=r"row 0 \(decision_id 'd0'\): probs give the chosen LLM "
                                         r"'A' probability 0\.8, but its propensity is 0\.9"):
        log_to_data(_declog([json.dumps({"A": 0.8, "B": 0.2})] + ok[1:]))
    # probs[chosen] == propensity, but the probs sum to 1.8 / 1.4
    with pytest.raises(ValueError, match=r"row 0 \(decision_id 'd0'\): probs '.*' sum to 1\.8, not 1"):
        log_to_data(_declog([json.dumps({"A": 0.9, "B": 0.9})] + ok[1:]))
    with pytest.raises(ValueError, match=r"row 2 \(decision_id 'd2'\): probs '.*' sum to 1\.4, not 1"):
        log_to_data(_declog(ok[:2] + [json.dumps({"A": 0.9, "B": 0.5})]))
    # differences of rounding (1e-7) are accepted; a row without probs is not checked
    d = log_to_data(_declog([json.dumps({"A": 0.9000001, "B": 0.0999999}), None, ok[2]]))
    assert d.queries["propensity"].tolist() == [0.9, 0.9, 0.5]


def test_float32_target_probabilities_within_rounding_are_accepted():
    """A float32 softmax sums to 1 only within float32 rounding (~1e-7): estimate_all takes it
    (the 1e-9 tolerance refused it); a row summing to 1.01 is still refused, and so is a
    float64 row 1e-7 off."""
    rng = np.random.default_rng(0)
    n, n_llms = 50, 11
    logits = rng.normal(size=(n, n_llms)).astype(np.float32)
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    pi32 = e / e.sum(axis=1, keepdims=True)
    assert pi32.dtype == np.float32
    assert np.abs(pi32.astype(np.float64).sum(axis=1) - 1.0).max() > 1e-9    # the case at issue
    a = rng.integers(0, n_llms, n)
    r = rng.random(n)
    p = np.full(n, 1.0 / n_llms)
    out = estimate_all(r, p, pi32, a, n_boot=0)
    by_hand = float(np.mean(pi32[np.arange(n), a].astype(np.float64) / p * r))
    assert out["ips"]["value"] == pytest.approx(by_hand, rel=1e-12)
    off = pi32.copy()
    off[3] *= np.float32(1.01)
    with pytest.raises(ValueError, match=r"^target probabilities: row 3: .* summing to 1 "
                                         r"\(sum 1\.00999\d*; 1 such rows\)"):
        estimate_all(r, p, off, a, n_boot=0)
    off64 = pi32.astype(np.float64) / pi32.astype(np.float64).sum(axis=1, keepdims=True)
    off64[0] *= 1 + 1e-7
    with pytest.raises(ValueError, match=r"^target probabilities: row 0: "):
        estimate_all(r, p, off64, a, n_boot=0)
