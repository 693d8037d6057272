"""Training from logged feedback: arrays and losses by hand, the ``logged`` router with every
loss, a LightningCLI config on a long table with a ``propensity`` column, the decision log
as training data, and clean errors for logs without or with bad propensities."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from recsys_router.cli import main
from recsys_router.data import RoutingData
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.feedback.bandit import simulate_log
from recsys_router.feedback.logged import check_logged, log_to_data, logged_arrays
from recsys_router.models.losses import logged_feedback_loss
from recsys_router.registry import make_router


def _tiny_log(prop=(0.5, 0.25, 1.0)):
    q = pd.DataFrame({"query_id": ["a", "b", "c"], "text": ["x", "y", "z"], "propensity": list(prop)})
    s = np.array([[1.0, np.nan], [np.nan, 0.0], [0.5, np.nan]])
    return RoutingData(q, ["m", "n"], s)


def test_logged_arrays_by_hand():
    d = _tiny_log()
    x = np.array([[0.0], [1.0], [2.0]])
    a = logged_arrays(d, x, "ips", clip=0.3)
    assert a["w"].tolist() == pytest.approx([2.0, 1 / 0.3, 1.0])  # 0.25 clipped to 0.3
    assert a["mask"].tolist() == [[True, False], [False, True], [True, False]]
    assert a["y"][0, 0] == 1.0 and a["y"][2, 0] == 0.5
    assert logged_arrays(d, x, "naive")["w"].tolist() == [1.0, 1.0, 1.0]
    assert "self_normalise" in logged_arrays(d, x, "snips")
    dr = logged_arrays(d, x, "dr", clip=0.01)
    assert dr["mask"].all() and dr["w"].tolist() == [1.0, 1.0, 1.0]
    # q: the ridge reward model (unweighted, shrunk to the pooled mean); LLM m is fitted on
    # rows a, c; the pseudo-target of a logged cell is q + w (y - q)
    from recsys_router.feedback.logged import ridge_reward_model
    q = ridge_reward_model(x, np.array([0, 1, 0]), np.array([1.0, 0.0, 0.5]), np.ones(3), 2)
    assert dr["y"][1, 0] == pytest.approx(q[1, 0])                       # unobserved: q
    assert dr["y"][0, 0] == pytest.approx(q[0, 0] + 2.0 * (1.0 - q[0, 0]))
    assert dr["y"][1, 1] == pytest.approx(q[1, 1] + 4.0 * (0.0 - q[1, 1]))


def test_logged_feedback_loss_by_hand():
    f = torch.tensor([[0.3, -1.0], [2.0, 0.5]])
    t = torch.tensor([[1.0, 0.0], [0.0, 1.4]])
    m = torch.tensor([[True, False], [True, True]])
    w = torch.tensor([2.0, 0.5])

    def bce(z, y):  # the same formula in numpy, target linear
        return -y * np.log(1 / (1 + np.exp(-z))) - (1 - y) * np.log(1 - 1 / (1 + np.exp(-z)))
    rows = [bce(0.3, 1.0), (bce(2.0, 0.0) + bce(0.5, 1.4)) / 2]
    want = (2.0 * rows[0] + 0.5 * rows[1]) / 2
    assert float(logged_feedback_loss(f, t, m, w)) == pytest.approx(want, rel=1e-5)
    want_sn = (2.0 * rows[0] + 0.5 * rows[1]) / 2.5
    assert float(logged_feedback_loss(f, t, m, w, self_normalise=True)) == pytest.approx(want_sn, rel=1e-5)
    sig = 1 / (1 + np.exp(-np.array([0.3, 2.0, 0.5])))
    want_mse = (2.0 * (sig[0] - 1) ** 2 + 0.5 * ((sig[1] - 0) ** 2 + (sig[2] - 1.4) ** 2) / 2) / 2
    assert float(logged_feedback_loss(f, t, m, w, "mse")) == pytest.approx(want_mse, rel=1e-5)
    with pytest.raises(ValueError, match="'bce' or 'mse'"):
        logged_feedback_loss(f, t, m, w, "bpr")


@pytest.mark.parametrize("bad,match", [((0.5, 0.0, 1.0), "row 1: propensity 0.0"),
                                       ((0.5, 1.5, 1.0), "row 1: propensity 1.5"),
                                       ((0.5, float("nan"), 1.0), "row 1: propensity nan")])
def test_bad_propensities(bad, match):
    with pytest.raises(ValueError, match=match):
        check_logged(_tiny_log(bad))
    with pytest.raises(ValueError, match=match):
        make_router("logged", router="mf", loss="ips", params={"max_epochs": 1}).fit(_tiny_log(bad))


def test_log_without_propensity_and_non_log_data():
    d = _tiny_log()
    d.queries.drop(columns="propensity", inplace=True)
    for loss in ("ips", "snips", "dr"):
        with pytest.raises(ValueError, match="no 'propensity' column"):
            make_router("logged", router="mf", loss=loss).fit(d)
    assert check_logged(d, need_propensity=False)[2].tolist() == [1.0, 1.0, 1.0]
    full = make_synthetic(10, 3, seed=0)
    with pytest.raises(ValueError, match="has 3 observed outcomes; logged feedback reveals exactly one"):
        check_logged(full)
    with pytest.raises(ValueError, match="'knn' trains only with naive"):
        make_router("logged", router="knn", loss="ips").fit(simulate_log(full, np.full((10, 3), 1 / 3))[0])


@pytest.fixture(scope="module")
def sim_log():
    d = make_synthetic(400, 4, 3, seed=2)
    sp = d.split((0.75, 0.0, 0.25), seed=0)
    log, _ = simulate_log(sp["train"], np.full((sp["train"].n_queries, 4), 0.25), seed=0)
    return log, sp["test"]


@pytest.mark.parametrize("loss", ["naive", "ips", "snips", "dr"])
def test_logged_router_trains_with_each_loss(sim_log, loss):
    log, test = sim_log
    r = make_router("logged", router="mf", loss=loss, params={"max_epochs": 3, "dim": 8}, seed=0).fit(log)
    s = r.predict_scores(test)
    assert s.shape == (test.n_queries, 4) and np.isfinite(s).all()
    assert r.route(test).shape == (test.n_queries,)
    assert not hasattr(r.router_, "_feedback")  # the loss setting lives for one fit only
    assert r.router_.val_fraction == 0.0  # no early stopping on mu_o of one-cell-per-query data


def test_logged_router_keeps_an_explicit_val_fraction(sim_log):
    log, _ = sim_log
    r = make_router("logged", router="mf", loss="ips", seed=0,
                    params={"max_epochs": 2, "dim": 8, "val_fraction": 0.2}).fit(log)
    assert r.router_.val_fraction == 0.2


def test_a_lightning_router_with_a_listwise_loss_is_refused(sim_log):
    log, _ = sim_log
    with pytest.raises(ValueError, match="needs loss 'bce' or 'mse'"):
        make_router("logged", router="mf", loss="ips", params={"loss": "bpr"}).fit(log)


def test_knn_trains_naive_on_a_log(sim_log):
    log, test = sim_log
    r = make_router("logged", router="knn", loss="naive", params={"k": 5}).fit(log)
    assert r.predict_scores(test).shape == (test.n_queries, 4)


def test_lightning_cli_config_on_a_logged_long_table(sim_log, tmp_path, capsys):
    log, _ = sim_log
    rows = [{"query_id": q, "model": log.llm_names[j], "score": float(log.scores[i, j]),
             "query_text": t, "propensity": p}
            for i, (q, t, p) in enumerate(zip(log.query_ids, log.texts, log.queries["propensity"]))
            for j in np.flatnonzero(~np.isnan(log.scores[i]))]
    path = tmp_path / "log.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(f"""
model:
  class_path: recsys_router.models.mf_module.MFModule
  init_args:
    dim: 8
    loss: {{class_path: recsys_router.models.losses.RoutingLoss, init_args: {{kind: bce}}}}
data:
  class_path: recsys_router.datamodules.routing_datamodule.RoutingDataModule
  init_args:
    dataset: {path}
    encoder_options: {{dim: 32}}
    feedback: ips
    propensity_clip: 0.1
trainer: {{max_epochs: 1, logger: false, default_root_dir: {tmp_path}}}
""")
    assert main(["fit", "-c", str(cfg), "--trainer.fast_dev_run=true"]) == 0
    bad = path.with_name("bad.csv")
    pd.DataFrame(rows).assign(propensity=0.0).to_csv(bad, index=False)
    cfg.write_text(cfg.read_text().replace(str(path), str(bad)))
    capsys.readouterr()
    # a data error: one line naming the file, exit 2 (as every command)
    assert main(["fit", "-c", str(cfg), "--trainer.fast_dev_run=true"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"recsys-router fit: error: {bad}, row ")
    assert "propensity 0.0 must be in" in err[0]


def test_decision_log_as_training_data():
    log = pd.DataFrame({
        "decision_id": ["d1", "d2", "d3"], "chosen": ["m", "n", "m"], "propensity": [0.5, 0.5, 1.0],
        "candidates": ['["m", "n"]'] * 3, "feedback_score": [0.8, None, None],
        "thumbs": [None, "up", None], "feedback_cost": [0.1, None, None],
        "costs": ['{"m": 0.2, "n": 0.3}'] * 3, "query_text": ["a", "b", "c"]})
    d = log_to_data(log)
    assert d.n_queries == 2 and d.llm_names == ["m", "n"]  # d3 has no feedback
    assert d.scores[0, 0] == pytest.approx(0.8) and d.scores[1, 1] == 1.0
    assert d.costs[0, 0] == pytest.approx(0.1) and d.costs[1, 1] == pytest.approx(0.3)
    assert "1 without" in d.name
    with pytest.raises(ValueError, match="not a decision log"):
        log_to_data(log.drop(columns="propensity"))
    with pytest.raises(ValueError, match="propensity"):
        log_to_data(log.assign(propensity=[0.0, 0.5, 1.0]))
