"""graph_layouts.py refuses bad --router-seeds before loading any data."""

from __future__ import annotations

import pytest


@pytest.fixture
def graph_layouts(bench_script):
    return bench_script("graph_layouts")


@pytest.mark.parametrize("bad", ["x", "1,two", "-1", "", ",", "1;import os", ",".join(["1"] * 65)])
def test_bad_router_seeds_stop_with_one_line(graph_layouts, bad):
    with pytest.raises(SystemExit, match="--router-seeds must be 1 to 64"):
        graph_layouts.main(["--router-seeds", bad])


def test_router_seeds_parse(graph_layouts):
    assert graph_layouts._router_seeds("0, 1,2") == [0, 1, 2]


@pytest.mark.parametrize("bad, why", [("batch_size", "k=v pairs"), ("=3", "k=v pairs"),
                                      ("__import__('os')=1", "k=v pairs"),
                                      ("lr=abc", "must be a number"),
                                      ("seed=1;import os", "must be a number"),
                                      ("lr=nan", "finite number"), ("lr=-inf", "finite number")])
def test_bad_params_stop_with_one_line(graph_layouts, bad, why):
    with pytest.raises(SystemExit, match=why):
        graph_layouts.main(["--params", bad])


def test_params_parse_numbers(graph_layouts):
    got = graph_layouts._params("batch_size=23, max_epochs=20,val_fraction=0.1,x=-2")
    assert got == {"batch_size": 23, "max_epochs": 20, "val_fraction": 0.1, "x": -2}
    assert isinstance(got["batch_size"], int) and isinstance(got["val_fraction"], float)
