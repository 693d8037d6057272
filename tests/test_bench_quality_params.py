"""bench_quality's --params parser: literals, strings, and commas inside brackets."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.bench_quality import parse_params  # noqa: E402


def test_nested_literals_keep_their_commas():
    got = parse_params("mf.batch_size=512, task-residual.base_params={'batch_size': 512, "
                       "'lr': 0.01},graph.encoder=minilm,x.grid=[1, 2]")
    assert got == {"mf": {"batch_size": 512},
                   "task-residual": {"base_params": {"batch_size": 512, "lr": 0.01}},
                   "graph": {"encoder": "minilm"}, "x": {"grid": [1, 2]}}


def test_entry_without_router_and_param_is_rejected():
    with pytest.raises(ValueError, match="router.param=value"):
        parse_params("batch_size=512")
