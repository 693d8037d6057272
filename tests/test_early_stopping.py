"""Opt-in early stopping of the Lightning routers (val_fraction / patience)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from recsys_router.models.base.lightning_router import _hold_out
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.registry import make_router

torch.set_num_threads(1)


def _mu_o(router, data) -> float:
    idx = router.route_indices(data)
    return float(np.nanmean(data.scores[np.arange(data.n_queries), idx]))


@pytest.mark.parametrize("name,extra", [("mf", {}), ("graph", {"hidden": 8, "batch_size": 128})])
def test_kept_network_is_the_best_held_out_epoch(name, extra):
    train = make_synthetic(200, 4, 3, seed=6)
    r = make_router(name, encoder_options={"dim": 32}, max_epochs=6, val_fraction=0.25,
                    patience=2, seed=1, **extra).fit(train)
    assert r.best_epoch_ is not None and 0 <= r.best_epoch_ < 6
    # the same seeded split, routed by the kept network, gives the recorded best mu_o
    _, held = _hold_out(train, 0.25, 1)
    assert _mu_o(r, held) == pytest.approx(r.val_score_, abs=1e-6)


def test_without_val_fraction_nothing_is_held_out():
    train = make_synthetic(120, 3, 2, seed=0)
    r = make_router("mf", encoder_options={"dim": 16}, max_epochs=1).fit(train)
    assert r.best_epoch_ is None and r.val_score_ is None


def test_hold_out_is_seeded_and_disjoint():
    d = make_synthetic(50, 3, 2, seed=0)
    a_tr, a_va = _hold_out(d, 0.2, 3)
    b_tr, b_va = _hold_out(d, 0.2, 3)
    assert list(a_va.query_ids) == list(b_va.query_ids) and a_va.n_queries == 10
    assert not set(a_tr.query_ids) & set(a_va.query_ids)


@pytest.mark.parametrize("frac", [-0.1, 1.0])
def test_bad_val_fraction_is_rejected(frac):
    with pytest.raises(ValueError, match="val_fraction"):
        make_router("mf", encoder_options={"dim": 16}, max_epochs=1,
                    val_fraction=frac).fit(make_synthetic(40, 3, 2, seed=0))
