"""MIRT / NIRT routers: formula by hand, parameter signs, monotonicity, quality, contract."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from recsys_router.models.components.irt import MIRTNet, NIRTNet, PositiveLinear
from recsys_router.models.irt_module import MIRTModule, MIRTRouter, NIRTRouter
from recsys_router.data import RoutingData
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.registry import make_router
from router_contract import RouterContract

torch.set_num_threads(1)
FAST = {"encoder_options": {"dim": 64}, "max_epochs": 4}


def test_mirt_logit_by_hand():
    net = MIRTNet(embed_dim=2, n_llms=2, llm_feat_dim=0, dim=2)
    with torch.no_grad():
        net.ability.ids.weight.copy_(torch.tensor([[1.0, 2.0], [-1.0, 0.5]]))
        net.disc.weight.copy_(torch.eye(2)); net.disc.bias.zero_()
        net.diff.weight.copy_(torch.tensor([[1.0, -1.0]])); net.diff.bias.fill_(0.5)
    e = torch.tensor([[0.3, 1.2]])
    sp = np.log1p(np.exp([0.3, 1.2]))           # softplus discrimination
    b = 0.3 - 1.2 + 0.5
    expect = [sp @ [1.0, 2.0] - b, sp @ [-1.0, 0.5] - b]
    got = net.all_logits(e, net.ability(torch.arange(2), None))
    np.testing.assert_allclose(got.detach().numpy()[0], expect, rtol=1e-5)
    np.testing.assert_allclose(net(e.repeat(2, 1), torch.arange(2)).detach().numpy(), expect,
                               rtol=1e-5)


def test_positive_linear_and_nirt_monotone_in_ability():
    torch.manual_seed(0)
    assert (PositiveLinear(3, 4).weight > 0).all()
    net = NIRTNet(embed_dim=6, n_llms=3, llm_feat_dim=0, dim=4)
    emb = torch.randn(50, 6)
    theta = torch.randn(3, 4)
    base = net.all_logits(emb, theta)
    for k in range(4):
        up = theta.clone()
        up[:, k] += 0.7
        assert (net.all_logits(emb, up) >= base - 1e-6).all()
    # harder (larger beta) never helps
    with torch.no_grad():
        net.diff.bias += 1.0
    assert (net.all_logits(emb, theta) <= base + 1e-6).all()


def _difficulty_case(seed=0, n=240):
    """Easy/hard queries (marked by vocabulary) and three LLMs of growing ability."""
    rng = np.random.default_rng(seed)
    hard = rng.random(n) < 0.5
    easy_w, hard_w = ["plain", "simple", "basic", "short"], ["intricate", "proof", "deep", "tricky"]
    texts = [" ".join(rng.choice(hard_w if h else easy_w, 6)) for h in hard]
    theta = np.array([-1.0, 0.0, 1.5])
    b = np.where(hard, 1.5, -1.5)
    p = 1 / (1 + np.exp(-(theta[None, :] * 1.5 - b[:, None])))
    scores = (rng.random(p.shape) < p).astype(np.float32)
    q = pd.DataFrame({"query_id": [f"q{i}" for i in range(n)], "text": texts, "task": "t"})
    llms = pd.DataFrame({"name": ["weak", "mid", "strong"], "description": ["a", "b", "c"]})
    return RoutingData(q, llms, scores), hard


@pytest.mark.parametrize("cls", [MIRTRouter, NIRTRouter])
def test_parameters_have_the_right_sign(cls):
    data, hard = _difficulty_case()
    r = cls(dim=2, max_epochs=15, encoder_options={"dim": 64}, seed=0).fit(data)
    d = r.difficulty(data)
    assert d[hard].mean() > d[~hard].mean()
    ab = r.abilities().set_index("llm")["ability"]
    assert ab["weak"] < ab["mid"] < ab["strong"]
    assert list(r.abilities().columns[:2]) == ["llm", "ability"]


@pytest.mark.parametrize("name", ["mirt", "nirt"])
def test_beats_random_on_held_out_sim(name):
    wins = []
    for seed in (1, 2):
        parts = make_synthetic(300, 5, 4, seed=seed).split((0.7, 0.3), seed=0)
        tr, te = parts["train"], parts["test"]
        r = make_router(name, **FAST).fit(tr)
        idx = r.route_indices(te)
        wins.append(te.scores[np.arange(te.n_queries), idx].mean() - np.nanmean(te.scores))
    assert min(wins) > 0.05, wins


def test_llm_features_reach_the_abilities():
    parts = make_synthetic(120, 3, 2, seed=3).split((0.8, 0.2), seed=0)
    r = MIRTRouter(dim=2, **FAST).fit(parts["train"])
    feats = r.net_.llm_feats.numpy()
    assert feats.shape == (3, 64 + 4) and np.abs(feats).sum() > 0
    m = MIRTModule(3, 64, dim=2)
    with pytest.raises(ValueError, match="LLM features"):
        m.net.set_llm_features(np.zeros((3, 10)))


class TestMIRTContract(RouterContract):
    router_factory = staticmethod(lambda: make_router("mirt", **FAST))


class TestNIRTContract(RouterContract):
    router_factory = staticmethod(lambda: make_router("nirt", **FAST))


@pytest.mark.parametrize("dropout,says", [
    (float("nan"), "dropout must be a finite number in [0, 1), got nan"),
    (-0.1, "dropout must be a finite number in [0, 1), got -0.1"),
    (1.0, "dropout must be a finite number in [0, 1), got 1.0"),
])
def test_nirt_refuses_a_dropout_outside_0_1(dropout, says):
    """NaN was accepted; -0.1 was torch's ValueError (with the CLI's --debug hint)."""
    from recsys_router.errors import ArgumentValueError
    from recsys_router.models.irt_module import NIRTModule
    with pytest.raises(ArgumentValueError) as info:
        NIRTModule(n_llms=3, embed_dim=8, dropout=dropout)
    assert str(info.value) == says
