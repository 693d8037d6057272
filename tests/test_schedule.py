"""Data-scaled training plans: values worked by hand from the rule in the module docstring."""

import math

import pytest

from recsys_router.models.base.schedule import data_scaled_plan, lr_factor


def test_plan_for_a_mid_sized_matrix_by_hand():
    # 200,000 cells: 200000 / 256 = 781.25 -> log2 = 9.61 -> B = 1024
    # passes = 24 * sqrt(30000 / 200000) = 9.295; steps = ceil(9.295 * 200000 / 1024) = 1816
    p = data_scaled_plan(200_000)
    assert p.batch_size == 1024
    assert p.max_steps == math.ceil(24 * math.sqrt(0.15) * 200_000 / 1024) == 1816
    assert p.warmup_steps == math.ceil(0.05 * 1816) == 91
    assert p.check_every == math.ceil(1816 / 20) == 91
    assert p.min_steps == int(0.4 * 1816)
    # 300,000 cells: ceil(7.589 * 300000 / 1024) = 2224 steps, clipped to 2000
    assert data_scaled_plan(300_000).max_steps == 2000


def test_small_and_huge_matrices_hit_the_clips():
    small = data_scaled_plan(500)          # B = 32 (clip), passes = 60 (clip) -> 938 steps
    assert small.batch_size == 32 and small.max_steps == math.ceil(60 * 500 / 32)
    huge = data_scaled_plan(50_000_000)    # B = 4096 (clip), passes = 3 (clip) -> 2000 (clip)
    assert huge.batch_size == 4096 and huge.max_steps == 2000
    tiny = data_scaled_plan(10)            # 60 passes of 10 cells = 19 steps -> 300 (clip)
    assert tiny.max_steps == 300


def test_more_data_means_bigger_batches_and_fewer_passes():
    plans = [data_scaled_plan(n) for n in (30_000, 300_000, 3_000_000)]
    assert [p.batch_size for p in plans] == sorted(p.batch_size for p in plans)
    assert plans[0].passes > plans[1].passes > plans[2].passes


def test_overrides_and_bad_input():
    p = data_scaled_plan(300_000, batch_size=64, max_steps=10)
    assert (p.batch_size, p.max_steps, p.warmup_steps) == (64, 10, 1)
    for bad in ({"n_cells": 0}, {"n_cells": 10, "batch_size": 0}, {"n_cells": 10, "max_steps": -1}):
        with pytest.raises(ValueError, match="n_cells|batch_size|max_steps"):
            data_scaled_plan(**bad)


def test_lr_schedule_warms_up_then_decays_by_cosine():
    p = data_scaled_plan(300_000, max_steps=2224)   # warm-up 112 steps, then cosine over 2112
    assert lr_factor(0, p) == pytest.approx(1 / 112)
    assert lr_factor(55, p) == pytest.approx(56 / 112)
    assert lr_factor(112, p) == pytest.approx(1.0)
    mid = 112 + (2224 - 112) // 2            # half way: 0.05 + 0.95 * 0.5 * (1 + cos(pi/2))
    assert lr_factor(mid, p) == pytest.approx(0.05 + 0.95 * 0.5, abs=1e-3)
    assert lr_factor(2224, p) == pytest.approx(0.05) and lr_factor(99_999, p) == pytest.approx(0.05)
