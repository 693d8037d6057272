"""benchmarks/encode_ceiling.py: the product work per text (counted by hand on a tiny model)
and the ceiling taken as the fastest shape's rate (so a multiple above 1 holds for any shape)."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def ceiling_script(bench_script):
    return bench_script("encode_ceiling")


def test_product_work_counted_by_hand(ceiling_script):
    cfg = {"hidden_size": 4, "intermediate_size": 8, "num_hidden_layers": 2}
    # n = 3 pieces: q/k/v 2*3*4*12 = 288, output 2*3*4*4 = 96, feed-forward 2*(2*3*4*8) = 384,
    # attention 2*(2*3*3*4) = 144 -> 912 a layer, two layers; 300 pieces are capped at 256
    n = 256
    capped = 2 * (2 * n * 4 * 12 + 2 * n * 4 * 4 + 2 * (2 * n * 4 * 8) + 2 * (2 * n * n * 4))
    got = ceiling_script.product_flops(np.array([3, 300]), cfg)
    assert got.tolist() == [2 * 912, capped]


def test_ceiling_is_the_fastest_shape(ceiling_script):
    rates = [64.9e9, 83.5e9, 77.0e9, 70.1e9]
    assert ceiling_script.ceiling(rates) == 83.5e9
    assert ceiling_script.ceiling(rates) >= np.average(rates, weights=[3, 1, 4, 4])


@pytest.mark.parametrize("argv, says", [(["--n", "-1"], "--n"), (["--n", "0"], "--n"),
                                        (["--sets", "rb,xx"], "unknown text set 'xx'")])
def test_bad_arguments_are_one_line(ceiling_script, capsys, argv, says):
    with pytest.raises(SystemExit) as exc:
        ceiling_script.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err
