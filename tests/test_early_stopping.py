"""Early stopping of the Lightning routers, on by default (val_fraction=0.1): held-out checks
over the data-scaled step budget, stop on a held-out loss plateau after 40% of the budget,
keep the network of the best held-out mu_o."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.models.base.training import early_stopping_callback, hold_out
from recsys_router.registry import make_router

torch.set_num_threads(1)


def _mu_o(router, data) -> float:
    idx = router.route_indices(data)
    return float(np.nanmean(data.scores[np.arange(data.n_queries), idx]))


@pytest.mark.parametrize("name,extra", [("mf", {}), ("graph", {"hidden": 8, "batch_size": 128})])
def test_kept_network_is_the_best_held_out_check(name, extra):
    train = make_synthetic(200, 4, 3, seed=6)
    r = make_router(name, encoder_options={"dim": 32}, max_steps=60, val_fraction=0.25,
                    patience=2, seed=1, **extra).fit(train)
    assert r.plan_["max_steps"] == 60 and r.plan_["check_every"] == 3
    assert r.best_step_ is not None and 0 < r.best_step_ <= r.steps_ <= 60
    # the same seeded split, routed by the kept network, gives the recorded best mu_o
    _, held = hold_out(train, 0.25, 1)
    assert _mu_o(r, held) == pytest.approx(r.val_score_, abs=1e-6)


def test_early_stopping_is_on_by_default_and_off_with_zero():
    train = make_synthetic(120, 3, 2, seed=0)
    on = make_router("mf", encoder_options={"dim": 16}, max_steps=20).fit(train)
    assert on.val_fraction == 0.1 and on.best_step_ is not None
    off = make_router("mf", encoder_options={"dim": 16}, max_steps=20, val_fraction=0).fit(train)
    assert off.best_step_ is None and off.val_score_ is None and off.steps_ == 20
    tiny = make_router("mf", encoder_options={"dim": 16}, max_steps=5).fit(train.subset(np.arange(12)))
    assert tiny.best_step_ is None and tiny.steps_ == 5       # too few queries to hold out


class _Trainer:
    def __init__(self):
        self.sanity_checking, self.should_stop, self.global_step = False, False, 0
        self.callback_metrics = {}


class _Module:
    def __init__(self):
        self.net = torch.nn.Linear(1, 1)


def test_stopping_waits_for_the_minimum_steps_and_a_loss_plateau():
    # a mu_o plateau (the best-single level) with a still-falling loss must not stop training;
    # a loss plateau stops it only after min_steps; the best mu_o check is kept (ties: later)
    cb = early_stopping_callback(patience=2, min_steps=50)
    t, m = _Trainer(), _Module()
    history = [(10, 0.70, 0.60), (20, 0.70, 0.55), (30, 0.70, 0.50), (40, 0.75, 0.50),
               (50, 0.74, 0.51), (60, 0.75, 0.52), (70, 0.73, 0.53)]
    stops = []
    for step, mu, loss in history:
        t.global_step, t.callback_metrics = step, {"val/mu_o": torch.tensor(mu),
                                                   "val/loss": torch.tensor(loss)}
        cb.on_validation_end(t, m)
        stops.append(t.should_stop)
    # loss stalls from step 40 (0.50 is not lower than 0.50): bad checks at 40, 50 -> stop at 50
    assert stops == [False, False, False, False, True, True, True]
    assert cb.stopped_at == 70 and cb.step == 60 and cb.value == pytest.approx(0.75)


def test_hold_out_is_seeded_and_disjoint():
    d = make_synthetic(50, 3, 2, seed=0)
    a_tr, a_va = hold_out(d, 0.2, 3)
    b_tr, b_va = hold_out(d, 0.2, 3)
    assert list(a_va.query_ids) == list(b_va.query_ids) and a_va.n_queries == 10
    assert not set(a_tr.query_ids) & set(a_va.query_ids)


@pytest.mark.parametrize("bad", [{"val_fraction": -0.1}, {"val_fraction": 1.0},
                                 {"max_steps": 0}, {"batch_size": 2.5}, {"max_epochs": -1}])
def test_bad_settings_are_rejected(bad):
    with pytest.raises(ValueError, match="val_fraction|max_steps|batch_size|max_epochs"):
        make_router("mf", encoder_options={"dim": 16}, **bad).fit(make_synthetic(40, 3, 2, seed=0))


@pytest.mark.parametrize("smooth, stop_at", [(1, 3), (2, 4)])
def test_smoothed_plateau_rule_averages_the_last_checks(smooth, stop_at):
    # losses 0.60, 0.50, 0.56, 0.52, 0.55, 0.56 with patience 2, no minimum:
    # raw: best 0.50 at check 1, bad at 2 and 3 -> stop at check 3;
    # means of 2: 0.60, 0.55, 0.53, 0.54, 0.535, 0.555 -> best 0.53 at 2, bad at 3, 4 -> check 4
    cb = early_stopping_callback(patience=2, min_steps=0, smooth=smooth)
    t, m = _Trainer(), _Module()
    for i, loss in enumerate([0.60, 0.50, 0.56, 0.52, 0.55, 0.56]):
        t.global_step = i
        t.callback_metrics = {"val/mu_o": torch.tensor(0.7), "val/loss": torch.tensor(loss)}
        cb.on_validation_end(t, m)
        if t.should_stop:
            break
    assert cb.stopped_at == stop_at


def test_smoothing_must_be_at_least_one_check():
    with pytest.raises(ValueError, match="smooth must be >= 1"):
        early_stopping_callback(patience=2, min_steps=0, smooth=0)


@pytest.mark.parametrize("name,extra,smooth", [("mf", {}, 1),
                                               ("graph", {"hidden": 8, "batch_size": 128}, 3)])
def test_router_passes_its_module_smoothing_to_the_callback(monkeypatch, name, extra, smooth):
    import recsys_router.models.base.lightning_router as lr
    seen = []

    def spy(patience, min_steps, smooth=1):
        seen.append(smooth)
        return early_stopping_callback(patience, min_steps, smooth)
    monkeypatch.setattr(lr, "early_stopping_callback", spy)
    make_router(name, encoder_options={"dim": 32}, max_steps=12, val_fraction=0.25, seed=1,
                **extra).fit(make_synthetic(80, 4, 3, seed=6))
    assert seen == [smooth]
