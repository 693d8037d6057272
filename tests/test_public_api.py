"""The public API: one import gives load_dataset, make_router, evaluate, export_router,
load_router and the Router base; the heavy ones load on first use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import recsys_router as rr

ROOT = Path(__file__).resolve().parents[1]


def test_every_public_name_is_its_home_object():
    from recsys_router.datasets import load_dataset
    from recsys_router.evaluation import EvalConfig, evaluate
    from recsys_router.export import export_router, load_router
    from recsys_router.registry import make_router
    from recsys_router.router import Router
    assert (rr.load_dataset, rr.make_router, rr.evaluate, rr.EvalConfig, rr.export_router,
            rr.load_router, rr.Router) == (load_dataset, make_router, evaluate, EvalConfig,
                                          export_router, load_router, Router)
    for name in rr.__all__:
        assert getattr(rr, name) is not None, name
    assert set(rr.__all__) <= set(dir(rr))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        rr.nope  # noqa: B018


def test_importing_the_package_loads_nothing_heavy():
    code = ("import sys, recsys_router\n"
            "heavy = [m for m in ('torch', 'pytorch_lightning', 'matplotlib', 'sklearn',\n"
            "         'recsys_router.evaluation', 'recsys_router.export') if m in sys.modules]\n"
            "assert not heavy, heavy\n"
            "from recsys_router import evaluate, load_router\n"
            "assert 'recsys_router.evaluation' in sys.modules and 'recsys_router.export' in sys.modules\n"
            "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         cwd=ROOT)
    assert out.returncode == 0 and "ok" in out.stdout, out.stdout + out.stderr


def test_the_whole_loop_through_the_top_level_names(tmp_path):
    data = rr.load_dataset("synthetic", n_queries=120, n_llms=4, seed=0)
    parts = data.split((0.8, 0.0, 0.2), seed=0)
    router = rr.make_router("best-single").fit(parts["train"])
    assert isinstance(router, rr.Router)
    # best-single by hand: the LLM of highest mean train score, for every test query
    best = parts["train"].llm_names[int(np.nanargmax(np.nanmean(parts["train"].scores, axis=0)))]
    assert set(router.route(parts["test"])) == {best}
    res = rr.evaluate(data, rr.EvalConfig(routers=["best-single"], protocols=["routereval"],
                                          seed=0), progress=False)
    mu = res.metrics.query("router == 'best-single' and metric == 'mu_o' and pool == 'all'")
    assert len(mu) >= 1 and 0.0 <= float(mu["value"].iloc[0]) <= 1.0
    out = rr.export_router(router, tmp_path / "bsm", train_data=parts["train"])
    loaded = rr.load_router(out)
    np.testing.assert_array_equal(loaded.router.route(parts["test"]), router.route(parts["test"]))
