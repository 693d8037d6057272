"""models/losses.py: each loss by hand on tiny cases, then the effect of each in training."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

from recsys_router.models.losses import (RoutingLoss, default_mode, listwise_softmax_ce, pairs_from_lists,
                           pairwise_bpr, pointwise_bce, pointwise_mse, popularity_weights,
                           soft_selection_entropy, utility_selection)
from recsys_router.models.mf_module import MFRouter
from recsys_router.data import RoutingData
from recsys_router.metrics.routereval import mu_o
from recsys_router.metrics.routereval import selection_entropy as e_p

torch.set_num_threads(1)
T = torch.tensor
ALL = torch.ones(1, 3, dtype=torch.bool)


def _sig(z):
    return 1 / (1 + math.exp(-z))


# ---------------------------------------------------------------------- by hand
def test_pointwise_bce_and_soft_labels_by_hand():
    z, y = T([2.0, -1.0]), T([1.0, 0.25])
    expect = (-math.log(_sig(2.0)) - 0.25 * math.log(_sig(-1.0)) - 0.75 * math.log(1 - _sig(-1.0))) / 2
    assert float(pointwise_bce(z, y)) == pytest.approx(expect, rel=1e-6)
    # a positive weight of 3 on the first cell's positive term
    w_expect = (-3 * math.log(_sig(2.0)) - 0.25 * math.log(_sig(-1.0))
                - 0.75 * math.log(1 - _sig(-1.0))) / 2
    assert float(pointwise_bce(z, y, pos_weight=T([3.0, 1.0]))) == pytest.approx(w_expect, rel=1e-6)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        pointwise_bce(z, T([1.0, 2.0]))


def test_pointwise_mse_by_hand():
    expect = ((_sig(1.0) - 0.5) ** 2 + (_sig(0.0) - 1.0) ** 2) / 2
    assert float(pointwise_mse(T([1.0, 0.0]), T([0.5, 1.0]))) == pytest.approx(expect, rel=1e-6)


def test_listwise_ce_masks_and_normalises_by_hand():
    logits = T([[1.0, 2.0, 30.0], [0.0, 0.0, 0.0]])
    sel = T([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]])          # 2nd query: nothing selected -> skipped
    mask = T([[True, True, False], [True, True, True]])   # LLM 2 unobserved on query 1
    lse = math.log(math.exp(1) + math.exp(2))
    expect = -0.5 * ((1 - lse) + (2 - lse))
    assert float(listwise_softmax_ce(logits, sel, mask)) == pytest.approx(expect, rel=1e-6)
    # re-weighting LLM 1 by 3 moves target mass to it: t = (1/4, 3/4)
    w_expect = -(0.25 * (1 - lse) + 0.75 * (2 - lse))
    got = listwise_softmax_ce(logits, sel, mask, llm_weight=T([1.0, 3.0, 1.0]))
    assert float(got) == pytest.approx(w_expect, rel=1e-6)


def test_bpr_pairs_and_ties_by_hand():
    assert float(pairwise_bpr(T([2.0]), T([0.5]))) == pytest.approx(-math.log(_sig(1.5)), rel=1e-6)
    tie = 0.5 * (-math.log(_sig(1.5))) + 0.5 * (-math.log(_sig(-1.5)))
    assert float(pairwise_bpr(T([2.0]), T([0.5]), tie=T([1.0]))) == pytest.approx(tie, rel=1e-6)
    y = T([[0.2, 0.9, 0.2]])
    assert pairs_from_lists(y, ALL).tolist() == [[0, 1, 0], [0, 1, 2]]   # ties give no pair
    assert pairs_from_lists(y, T([[True, True, False]])).tolist() == [[0, 1, 0]]


def test_utility_selection_prefers_cheap_when_wtp_small():
    s, c = T([[1.0, 1.0, 0.0]]), T([[0.5, 0.1, 0.0]])
    assert utility_selection(s, c, ALL, wtp=1.0).tolist() == [[0.0, 1.0, 0.0]]
    assert utility_selection(s, c, ALL, wtp=0.05).tolist() == [[0.0, 0.0, 1.0]]  # 0.05-0.1 < 0
    soft = utility_selection(s, c, ALL, wtp=1.0, temperature=1.0)[0].numpy()
    u = np.array([0.5, 0.9, 0.0])
    np.testing.assert_allclose(soft, np.exp(u) / np.exp(u).sum(), rtol=1e-6)


def test_popularity_weights_and_selection_entropy_by_hand():
    w = popularity_weights(T([8.0, 1.0, 1.0]), clip=2.0)
    np.testing.assert_allclose(w.numpy(), [1 / (3 * 0.8), 2.0, 2.0], rtol=1e-6)  # 10/3 clipped to 2
    with pytest.raises(ValueError):
        popularity_weights(T([1.0]), clip=0.5)
    # two queries, one sure of LLM 0, one of LLM 1 -> mean distribution (1/2, 1/2) -> log 2
    h = soft_selection_entropy(T([[50.0, 0.0], [0.0, 50.0]]))
    assert float(h) == pytest.approx(math.log(2), rel=1e-5)
    assert float(soft_selection_entropy(T([[50.0, 0.0], [50.0, 0.0]]))) == pytest.approx(0.0, abs=1e-5)


def test_selection_entropy_leaves_out_a_query_with_no_observed_llm():
    """A query with no observed LLM (RoutingData allows it; subsets of sparse data make them)
    has no distribution: it is left out instead of turning the batch's entropy into NaN."""
    logits = T([[50.0, 0.0, 0.0], [0.0, 50.0, 0.0], [1.0, 2.0, 3.0]]).requires_grad_()
    mask = torch.tensor([[True, True, False], [True, True, False], [False, False, False]])
    h = soft_selection_entropy(logits, mask)
    assert float(h) == pytest.approx(math.log(2), rel=1e-5)  # the first two rows only
    h.backward()
    assert torch.isfinite(logits.grad).all() and float(logits.grad[2].abs().sum()) == 0.0
    none = soft_selection_entropy(T([[1.0, 2.0]]), torch.tensor([[False, False]]))
    assert float(none) == 0.0
    loss = RoutingLoss("listwise", entropy_weight=0.5)
    batch = {"y": T([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]), "mask": mask,
             "sel": T([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])}
    assert math.isfinite(float(loss({"logits": logits.detach()}, batch)))


def test_ipw_clip_is_refused_with_the_mse_loss():
    with pytest.raises(ValueError, match="ipw_clip re-weights each LLM's positives, which the "
                                         "'mse' loss does not have"):
        RoutingLoss("mse", ipw_clip=3.0)
    assert RoutingLoss("mse").ipw_clip is None and RoutingLoss("bce", ipw_clip=3.0).ipw_clip == 3.0


def test_routing_loss_ignores_unobserved_cells_and_checks_kinds():
    loss = RoutingLoss("bce")
    batch = {"y": T([[1.0, 0.0, 0.0]]), "mask": T([[True, True, False]]), "sel": T([[1.0, 0.0, 0.0]])}
    out = {"logits": T([[0.3, -0.2, 5.0]])}
    a = float(loss(out, batch))
    batch2 = dict(batch, y=T([[1.0, 0.0, 1.0]]))  # the unobserved cell's value must not matter
    assert float(loss(out, batch2)) == pytest.approx(a)
    expect = (-math.log(_sig(0.3)) - math.log(1 - _sig(-0.2))) / 2
    assert a == pytest.approx(expect, rel=1e-6)
    with pytest.raises(ValueError, match="loss kind"):
        RoutingLoss("hinge")
    with pytest.raises(ValueError, match="pairwise"):
        RoutingLoss("listwise")({"pos": T([1.0]), "neg": T([0.0])}, {"pos": T([0]), "neg": T([1])})
    with pytest.raises(RuntimeError, match="positives"):
        RoutingLoss("bce", ipw_clip=3.0)(out, batch)
    assert [default_mode(k) for k in ("bce", "listwise", "bpr")] == ["pointwise", "listwise", "pairwise"]


def test_logit_adjustment_shifts_by_log_prior():
    loss = RoutingLoss("bce", logit_adjust=1.0)
    loss.set_positives([3.0, 0.0])        # prior with +1 smoothing: (4/5, 1/5)
    batch = {"x": torch.zeros(2, 1), "llm": T([0, 1]), "y": T([1.0, 1.0])}
    got = float(loss({"logits": T([0.0, 0.0])}, batch))
    expect = (-math.log(_sig(math.log(4 / 5))) - math.log(_sig(math.log(1 / 5)))) / 2
    assert got == pytest.approx(expect, rel=1e-6)


# ---------------------------------------------------------------------- effects in training
FAST = {"dim": 16, "encoder_options": {"dim": 64}, "max_epochs": 5}


def _biased(n=600, seed=0) -> RoutingData:
    """LLM 0 is best on average (0.85); LLM t+1 is nearly as good (0.82) on topic t only."""
    rng = np.random.default_rng(seed)
    topic = rng.integers(0, 4, n)
    words = [["alpha", "beta", "gamma"], ["delta", "eps", "zeta"], ["eta", "theta", "iota"],
             ["kappa", "lam", "mu"]]
    texts = [" ".join(rng.choice(words[t], 5)) for t in topic]
    p = np.full((n, 5), 0.3)
    p[:, 0] = 0.85
    for t in range(4):
        p[topic == t, t + 1] = 0.82
    s = np.clip(p + rng.normal(0, 0.03, p.shape), 0, 1)
    q = pd.DataFrame({"query_id": [f"b{i}" for i in range(n)], "text": texts})
    return RoutingData(q, [f"llm{j}" for j in range(5)], s)


@pytest.fixture(scope="module")
def biased_split():
    return _biased().split((0.8, 0.2), seed=0)


@pytest.fixture(scope="module")
def plain_choice(biased_split):
    return MFRouter(**FAST).fit(biased_split["train"]).route_indices(biased_split["test"])


@pytest.mark.parametrize("debias", [{"ipw_clip": 5.0}, {"logit_adjust": 1.0},
                                    {"entropy_weight": 0.5}], ids=["ipw", "logit-adjust", "entropy"])
def test_debiasing_raises_ep_without_losing_mu_o(biased_split, plain_choice, debias):
    """Against collapse: E_p rises by >= 0.5 bit; mu_o falls by at most 0.05 (stated tolerance)."""
    test = biased_split["test"]
    choice = MFRouter(**FAST, **debias).fit(biased_split["train"]).route_indices(test)
    ep_plain, ep = e_p(plain_choice, 5), e_p(choice, 5)
    # independent check of E_p: entropy in bits of the choice histogram
    f = np.bincount(choice, minlength=5) / len(choice)
    assert ep == pytest.approx(-(f[f > 0] * np.log2(f[f > 0])).sum())
    assert ep >= ep_plain + 0.5, (ep_plain, ep)
    assert mu_o(test.scores, choice) >= mu_o(test.scores, plain_choice) - 0.05


@pytest.mark.parametrize("kind", ["bce", "mse", "listwise", "bpr"])
def test_each_loss_learns_the_topic_specialists(kind):
    """Scores where LLM t+1 is best on topic t: every loss must route most queries right."""
    d = _biased(400, seed=1)
    s = d.scores.copy()
    s[:, 0] = np.clip(0.5 + np.random.default_rng(2).normal(0, 0.03, len(s)), 0, 1)
    d = RoutingData(d.queries, d.llms, s)
    sp = d.split((0.75, 0.25), seed=0)
    choice = MFRouter(**FAST, loss=kind).fit(sp["train"]).route_indices(sp["test"])
    best = np.nanargmax(sp["test"].scores, axis=1)
    assert (choice == best).mean() >= 0.8


def test_cost_aware_utility_buys_cheaper_at_small_wtp(sim_split):
    """With a small willingness to pay, the utility loss picks cheaper LLMs and earns a higher
    realised utility ``wtp * score - cost`` than the cost-blind listwise loss."""
    train, test = sim_split["train"], sim_split["test"]
    wtp = 0.5 * float(np.nanmean(train.costs)) / max(float(np.nanstd(train.scores)), 1e-6)
    rows = np.arange(test.n_queries)
    blind = MFRouter(**FAST, loss="listwise").fit(train).route_indices(test)
    aware = MFRouter(**FAST, loss="utility", wtp=wtp).fit(train).route_indices(test)

    def utility(c):
        return float(np.mean(wtp * test.scores[rows, c] - test.costs[rows, c]))

    assert test.costs[rows, aware].mean() < test.costs[rows, blind].mean()
    assert utility(aware) > utility(blind)


@pytest.mark.parametrize("module_path", ["recsys_router.models.mf_module:MFModule",
                                         "recsys_router.models.two_tower_module:TwoTowerModule",
                                         "recsys_router.models.irt_module:MIRTModule",
                                         "recsys_router.models.irt_module:NIRTModule"])
def test_checkpoint_keeps_the_loss_configuration(module_path, tmp_path):
    """A checkpoint records the loss as plain data and load_from_checkpoint rebuilds it
    (it fell back to the module's default loss)."""
    import importlib
    import pytorch_lightning as pl
    mod, name = module_path.split(":")
    cls = getattr(importlib.import_module(mod), name)
    loss = RoutingLoss("utility", wtp=2.5, temperature=0.3, ipw_clip=4.0, logit_adjust=0.5,
                       entropy_weight=0.2)
    m = cls(n_llms=3, embed_dim=8, loss=loss)
    trainer = pl.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False)
    trainer.strategy.connect(m)
    trainer.save_checkpoint(tmp_path / "m.ckpt")
    raw = torch.load(tmp_path / "m.ckpt", map_location="cpu", weights_only=False)
    expect = {"kind": "utility", "wtp": 2.5, "temperature": 0.3, "selection_ratio": 0.95,
              "ipw_clip": 4.0, "logit_adjust": 0.5, "entropy_weight": 0.2}
    assert raw["hyper_parameters"]["loss"] == expect
    back = cls.load_from_checkpoint(tmp_path / "m.ckpt", map_location="cpu")
    assert back.loss_config() == expect


def test_loss_from_config_builds_only_the_projects_loss():
    with pytest.raises(ValueError, match="class_path 'os.system' is not a known loss"):
        RoutingLoss.from_config({"class_path": "os.system", "init_args": {"kind": "bce"}})
    with pytest.raises(ValueError, match=r"unknown loss argument\(s\) \['cmd'\]"):
        RoutingLoss.from_config({"kind": "bce", "cmd": "rm"})
    with pytest.raises(ValueError, match="'kind' is dict, not a plain number or text"):
        RoutingLoss.from_config({"kind": {"class_path": "os.system"}})
    built = RoutingLoss.from_config({"class_path": "recsys_router.models.losses.RoutingLoss",
                                     "init_args": {"kind": "bpr"}})
    assert (type(built), built.kind) == (RoutingLoss, "bpr")


def test_a_checkpoint_naming_another_loss_class_imports_nothing(tmp_path, monkeypatch):
    """A checkpoint whose loss hyperparameter names a class path outside the project's loss
    is refused by load_from_checkpoint without importing that module."""
    import sys
    import pytorch_lightning as pl
    from recsys_router.models.mf_module import MFModule
    (tmp_path / "evil_loss_mod.py").write_text("import pathlib\npathlib.Path(__file__)"
                                               ".with_name('imported').touch()\nclass Evil: pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    m = MFModule(n_llms=3, embed_dim=8)
    m.hparams["loss"] = {"class_path": "evil_loss_mod.Evil", "init_args": {}}
    trainer = pl.Trainer(logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False)
    trainer.strategy.connect(m)
    trainer.save_checkpoint(tmp_path / "m.ckpt")
    with pytest.raises(ValueError, match="class_path 'evil_loss_mod.Evil' is not a known loss"):
        MFModule.load_from_checkpoint(tmp_path / "m.ckpt", map_location="cpu")
    assert "evil_loss_mod" not in sys.modules and not (tmp_path / "imported").exists()


def test_a_bad_module_loss_is_refused_where_it_is_converted():
    """A LightningRouter's ``loss`` option and a RouterModule's ``loss`` argument go through
    the one conversion (RoutingLoss.coerce): a foreign class path, an unknown argument or a
    value that is neither a loss nor a mapping is one clear error naming its source (a string
    or number reached the module as its loss_fn before, and failed later)."""
    from recsys_router.models.base.lightning_router import LightningRouter
    from recsys_router.models.mf_module import MFModule
    path = "recsys_router.models.mf_module:MFModule"
    evil = LightningRouter(path, {"loss": {"class_path": "os.system", "init_args": {}}})
    with pytest.raises(ValueError, match="^module loss: class_path 'os.system' is not a known loss"):
        evil.module_kwargs()
    with pytest.raises(ValueError, match=r"^module loss: unknown loss argument\(s\) \['cmd'\]"):
        LightningRouter(path, {"loss": {"kind": "bce", "cmd": "rm"}}).build_module(3, 8)
    with pytest.raises(ValueError, match=r"^module loss: a loss is a RoutingLoss or its "
                                         r"configuration \(a mapping\), got str$"):
        LightningRouter(path, {"loss": "bpr"}).module_kwargs()
    with pytest.raises(ValueError, match=r"^MFModule loss: a loss is a RoutingLoss or its "
                                         r"configuration \(a mapping\), got int$"):
        MFModule(n_llms=3, embed_dim=8, loss=3)
    built = LightningRouter(path, {"loss": {"kind": "bpr", "wtp": 2.0}}).build_module(3, 8)
    assert (built.loss_fn.kind, built.loss_fn.wtp) == ("bpr", 2.0)
    same = RoutingLoss("listwise")
    assert MFModule(n_llms=3, embed_dim=8, loss=same).loss_fn is same  # kept, not rebuilt
    assert MFModule(n_llms=3, embed_dim=8).loss_fn.kind == MFModule.default_loss


@pytest.mark.parametrize("kwargs,says", [
    ({"logit_adjust": math.nan}, "logit_adjust must be a finite number, got nan"),
    ({"logit_adjust": math.inf}, "logit_adjust must be a finite number, got inf"),
    ({"ipw_clip": math.nan}, "ipw_clip must be a finite number >= 1 or None, got nan"),
    ({"ipw_clip": math.inf}, "ipw_clip must be a finite number >= 1 or None, got inf"),
    ({"ipw_clip": 0.5}, "ipw_clip must be a finite number >= 1 or None, got 0.5"),
    ({"selection_ratio": math.nan}, "selection_ratio must be a finite number in (0, 1], got nan"),
    ({"selection_ratio": 5.0}, "selection_ratio must be a finite number in (0, 1], got 5.0"),
    ({"kind": "utility", "selection_ratio": -1.0},
     "selection_ratio must be a finite number in (0, 1], got -1.0"),
    ({"selection_ratio": 0.0}, "selection_ratio must be a finite number in (0, 1], got 0.0"),
])
def test_a_non_finite_or_out_of_range_loss_argument_is_refused(kwargs, says):
    """NaN/inf logit_adjust, ipw_clip and selection_ratio were accepted (a NaN logit_adjust
    trained to NaN predictions)."""
    from recsys_router.errors import ArgumentValueError
    with pytest.raises(ArgumentValueError) as info:
        RoutingLoss(**kwargs)
    assert str(info.value) == says


def test_the_loss_keeps_in_range_values():
    loss = RoutingLoss(selection_ratio=1, ipw_clip=1, logit_adjust=-0.5)
    assert (loss.selection_ratio, loss.ipw_clip, loss.logit_adjust) == (1.0, 1.0, -0.5)
    assert RoutingLoss().ipw_clip is None
