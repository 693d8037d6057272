"""Shared fixtures: the real data folder (skipped when absent), small simulated data and the
benchmark scripts as modules."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest

from recsys_router.datasets.synthetic import make_synthetic

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("RECSYS_ROUTER_DATA", ROOT.parent / "shared" / "data"))
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def shared_path(*parts: str) -> Path:
    """Path under the shared data folder; skips the test when it is not there."""
    p = SHARED_DATA.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"real data not available: {p} is absent (CI has ../shared/data)")
    return p


@pytest.fixture(scope="session")
def sim_small():
    """300 queries x 5 LLMs, binary scores, texts, costs (simulated)."""
    return make_synthetic(300, 5, 4, seed=7)


@pytest.fixture(scope="session")
def sim_split(sim_small):
    return sim_small.split((0.7, 0.1, 0.2), seed=0)


@pytest.fixture
def bench_script():
    """``bench_script("bench_train")``: a script of ``benchmarks/`` imported as a module; the
    folder is on ``sys.path`` only while the test runs."""
    folder = str(ROOT / "benchmarks")
    sys.path.insert(0, folder)
    try:
        yield importlib.import_module
    finally:
        sys.path.remove(folder)


@pytest.fixture
def isolated_embedding_cache(tmp_path, monkeypatch):
    """An empty disk cache folder for the test and an empty process memory cache around it."""
    from recsys_router.encoders import cache as cache_mod
    monkeypatch.setenv("RECSYS_ROUTER_CACHE", str(tmp_path / "cache"))
    cache_mod.MEMORY_CACHE.clear()
    yield
    cache_mod.MEMORY_CACHE.clear()
