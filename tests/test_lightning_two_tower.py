"""Two-tower router: cold start from LLM features (ID dropout), few-shot add_llm_from_features refinement."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from recsys_router.models.components.two_tower import TwoTowerScorer
from recsys_router.models.two_tower_module import TwoTowerRouter
from recsys_router.data import RoutingData

torch.set_num_threads(1)
WORDS = [["alpha", "beta", "gamma"], ["delta", "epsilon", "zeta"], ["eta", "theta", "iota"],
         ["kappa", "lambda", "omicron"]]
N_NEW = 6


def _cold_start_data(n=400, n_llms=30, seed=0) -> RoutingData:
    """Each LLM is strong on a random subset of 4 topics and its description names them
    (with the topics' words); dearer LLMs are a little better. SIMULATED."""
    rng = np.random.default_rng(seed)
    topic = rng.integers(0, 4, n)
    texts = [" ".join(rng.choice(WORDS[t], 6)) for t in topic]
    strong = rng.random((n_llms, 4)) < 0.5
    price = np.exp(rng.uniform(np.log(0.2), np.log(20), n_llms))
    zp = (np.log(price) - np.log(price).mean()) / np.log(price).std()
    desc = ["a model strong at " + " ".join(w for t in range(4) if strong[j, t] for w in WORDS[t])
            for j in range(n_llms)]
    logit = -1.0 + 2.5 * strong[:, topic].T + 0.5 * zp[None, :]
    scores = (rng.random((n, n_llms)) < 1 / (1 + np.exp(-logit))).astype(np.float32)
    q = pd.DataFrame({"query_id": [f"c{i}" for i in range(n)], "text": texts,
                      "task": [f"t{t}" for t in topic]})
    llms = pd.DataFrame({"name": [f"m{j:02d}" for j in range(n_llms)], "input_price": price,
                         "output_price": price, "size": np.nan, "description": desc})
    return RoutingData(q, llms, scores, np.outer(np.full(n, 1e-4), price), name="cold-sim")


def _bce(p, y):
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return float(-(y * np.log(p) + (1 - y) * np.log(1 - p)).mean())


@pytest.fixture(scope="module")
def cold():
    d = _cold_start_data()
    sp = d.split((0.75, 0.25), seed=0)
    old, new = d.llm_names[:-N_NEW], d.llm_names[-N_NEW:]
    router = TwoTowerRouter(dim=16, id_dim=8, query_hidden=(32,), llm_hidden=(32,),
                            id_dropout=0.5, loss="bce", lr=2e-2, batch_size=256, max_epochs=5,
                            encoder_options={"dim": 64}).fit(sp["train"].subset(llms=old))
    return d, sp, old, new, router


def test_feature_only_vectors_beat_the_mean_score_prior(cold):
    """Held-out LLMs (never seen in training) scored from their description and price only
    predict their test scores better (BCE) than each new LLM's own mean test score."""
    d, sp, old, new, router = cold
    before = router.predict_scores(sp["test"].subset(llms=old))
    for name in new:
        row = d.llms.set_index("name").loc[name]
        router.add_llm_from_features(name, description=row["description"], price=float(row["input_price"]))
    test = sp["test"].subset(llms=old + new)
    pred = router.predict_scores(test)
    y = test.scores[:, -N_NEW:]
    prior = np.broadcast_to(y.mean(axis=0, keepdims=True), y.shape)   # oracle mean per new LLM
    assert _bce(pred[:, -N_NEW:], y) < _bce(prior, y) - 0.05
    # adding LLMs changed nothing for the trained pool
    np.testing.assert_allclose(pred[:, :-N_NEW], before, rtol=1e-6)
    assert router.llm_names_ == old + new
    # a cost estimate from the price (cost/price ratio of the pool = 1e-4 per query here)
    np.testing.assert_allclose(router.mean_costs_[-N_NEW:],
                               1e-4 * d.llms["input_price"].to_numpy()[-N_NEW:], rtol=1e-4)
    with pytest.raises(ValueError, match="already"):
        router.add_llm_from_features(new[0], description="dup")


def test_few_shot_records_refine_only_the_new_vector():
    d = _cold_start_data(seed=1, n_llms=12)
    sp = d.split((0.6, 0.4), seed=1)
    old, name = d.llm_names[:-1], d.llm_names[-1]
    base = dict(dim=16, id_dim=8, query_hidden=(32,), llm_hidden=(32,), id_dropout=0.5,
                loss="bce", lr=2e-2, batch_size=256, max_epochs=3, encoder_options={"dim": 64})
    # the description says nothing here: only the records can tell the LLM's strengths
    row = d.llms.set_index("name").loc[name]
    shots = sp["test"].subset(np.arange(60))
    rest = sp["test"].subset(np.arange(60, sp["test"].n_queries))
    plain = TwoTowerRouter(**base).fit(sp["train"].subset(llms=old))
    tuned = TwoTowerRouter(**base).fit(sp["train"].subset(llms=old))
    weights = {k: v.clone() for k, v in tuned.net_.state_dict().items()}
    plain.add_llm_from_features(name, description="a model", price=float(row["input_price"]))
    tuned.add_llm_from_features(name, description="a model", price=float(row["input_price"]), records=shots)
    after = tuned.net_.state_dict()
    for k, v in weights.items():                     # the trained network is untouched
        torch.testing.assert_close(after[k], v)
    assert tuned.added_llm_rows_.shape == (1, 18)    # [vector (16), bias, offset 0] of the new LLM
    y = rest.scores[:, -1]
    assert _bce(tuned.predict_scores(rest)[:, -1], y) < _bce(plain.predict_scores(rest)[:, -1], y)
    np.testing.assert_allclose(tuned.mean_costs_[-1], np.nanmean(shots.costs[:, -1]), rtol=1e-6)


def test_id_dropout_only_in_training():
    torch.manual_seed(0)
    net = TwoTowerScorer(4, 6, 10, dim=3, id_dim=2, id_dropout=1.0)
    feats = torch.randn(4, 10)
    net.set_llm_features(feats)
    x = torch.randn(2, 6)
    net.train()
    with torch.no_grad():
        v_drop, b_drop = net.llm_output(feats, torch.arange(4), drop_ids=True)
        v_feat, b_feat = net.llm_output(feats)           # features only = every ID dropped
        torch.testing.assert_close(v_drop, v_feat)
        net.eval()
        v_eval, _ = net.pool_output()
        assert not torch.allclose(v_eval, v_feat)       # IDs are used at prediction time
        logits = net(x)
    torch.testing.assert_close(logits, net.query_tower(x) @ v_eval.T + net.pool_output()[1])
    with pytest.raises(ValueError, match="id_dropout"):
        TwoTowerScorer(2, 2, 2, id_dropout=1.5)
    with pytest.raises(ValueError, match="shape"):
        net.set_llm_features(torch.zeros(3, 10))


def test_an_unpriced_llm_is_refused_when_the_router_predicts_costs():
    d = _cold_start_data(n=120, n_llms=4, seed=2)
    r = TwoTowerRouter(dim=4, id_dim=2, query_hidden=(8,), llm_hidden=(8,), max_epochs=1,
                       encoder_options={"dim": 16}).fit(d)
    before = (list(r.llm_names_), r.mean_costs_.copy(), dict(r.llm_info_ or {}))
    with pytest.raises(ValueError, match="needs a mean_cost, records with costs or a price"):
        r.add_llm_from_features("mystery", description="an unknown model")
    with pytest.raises(ValueError, match="mean_cost must be a finite number >= 0"):
        r.add_llm_from_features("mystery", description="x", mean_cost=-1.0)
    # all or nothing: the router is as it was
    assert r.llm_names_ == before[0] and (r.llm_info_ or {}) == before[2]
    np.testing.assert_array_equal(r.mean_costs_, before[1])
    r.add_llm_from_features("mystery", description="x", mean_cost=3e-4)
    assert r.llm_names_[-1] == "mystery" and r.mean_costs_[-1] == 3e-4
    # a router fitted without costs needs no cost for the new LLM
    free = TwoTowerRouter(dim=4, id_dim=2, query_hidden=(8,), llm_hidden=(8,), max_epochs=1,
                          encoder_options={"dim": 16}).fit(
        RoutingData(d.queries, d.llms, d.scores))
    assert free.add_llm_from_features("mystery", description="x").llm_names_[-1] == "mystery"
    assert free.predict_costs(RoutingData(d.queries, d.llm_names + ["mystery"],
                                          np.full((d.n_queries, 5), np.nan))) is None
