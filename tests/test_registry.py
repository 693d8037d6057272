"""Router registry: names, lazy imports, parameter errors, registration."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from recsys_router import registry
from recsys_router.registry import (available_routers, make_router, register_router, router_class,
                                    unregister_router)
from recsys_router.router import Router

BASELINES = {"random": "RandomRouter", "oracle": "OracleRouter", "r_o": "ROracleRouter",
             "best-single": "BestSingleRouter", "zero": "ZeroRouter", "cascade": "CascadeRouter",
             "knn": "KNNRouter", "prknn": "PRKnnRouter", "c-roberta": "ClusterRouter",
             "svm": "SVMRouter", "linearr": "LinearRRouter", "mlpr": "MLPRRouter",
             "mlc": "MLCRouter"}


@pytest.fixture
def isolated(monkeypatch):
    monkeypatch.setattr(registry.ROUTERS, "_entries", dict(registry.ROUTERS._entries))
    monkeypatch.setattr(registry.ROUTERS, "_aliases", dict(registry.ROUTERS._aliases))


def test_baseline_names_build_the_right_classes():
    assert set(BASELINES) <= set(available_routers())
    assert available_routers() == sorted(available_routers())
    for name, cls in BASELINES.items():
        r = make_router(name)
        assert type(r).__name__ == cls and isinstance(r, Router) and not r.is_fitted
        assert router_class(name) is type(r)


def test_text_flags():
    text = {"knn", "prknn", "c-roberta", "svm", "linearr", "mlpr", "mlc"}
    for name in BASELINES:
        assert make_router(name).uses_text is (name in text), name
    truth = {"oracle", "r_o", "cascade"}
    for name in BASELINES:
        assert make_router(name).uses_ground_truth is (name in truth), name


def test_params_are_passed_and_names_are_case_insensitive():
    r = make_router("KNN", k=3, metric="euclidean")
    assert (r.k, r.metric) == (3, "euclidean")
    assert make_router(" r_o ", p=0.25).p == 0.25


def test_unknown_name_and_parameter_errors():
    with pytest.raises(KeyError, match="available: .*knn"):
        make_router("no-such-router")
    with pytest.raises(TypeError, match=r"no parameter\(s\) \['kk'\]; valid: \['k', 'metric', 'encoder', 'seed'\]"):
        make_router("knn", kk=3)
    with pytest.raises(ValueError):
        make_router("")


def test_register_string_and_callable(isolated):
    register_router("bsm-alias", "recsys_router.models.baselines.simple:BestSingleRouter")
    assert type(make_router("bsm-alias")).__name__ == "BestSingleRouter"
    register_router("knn3", lambda **kw: make_router("knn", k=3, **kw))
    assert make_router("knn3").k == 3
    assert "knn3" in available_routers()
    with pytest.raises(TypeError, match="factory function"):
        router_class("knn3")
    # re-registering the same name needs overwrite=True (identical re-registration is fine)
    register_router("bsm-alias", "recsys_router.models.baselines.simple:BestSingleRouter")
    with pytest.raises(ValueError, match="already registered"):
        register_router("bsm-alias", "recsys_router.models.baselines.simple:OracleRouter")
    register_router("bsm-alias", "recsys_router.models.baselines.simple:OracleRouter", overwrite=True)
    assert type(make_router("bsm-alias")).__name__ == "OracleRouter"
    unregister_router("BSM-alias")
    assert "bsm-alias" not in available_routers()
    with pytest.raises(KeyError):
        unregister_router("bsm-alias")


def test_bad_registrations(isolated):
    with pytest.raises(ValueError, match="package.module:attribute"):
        register_router("x", "recsys_router.models.baselines.simple.BestSingleRouter")
    with pytest.raises(TypeError):
        register_router("x", 42)
    register_router("ghost", "recsys_router.models.nowhere:Ghost")
    with pytest.raises(ImportError, match="ghost"):
        make_router("ghost")
    register_router("not-a-router", lambda: object())
    with pytest.raises(TypeError, match="not a Router"):
        make_router("not-a-router")


def test_importing_the_library_does_not_import_models():
    code = ("import sys, recsys_router, recsys_router.registry as r; r.available_routers(); "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('models', 'datamodules') "
            "or m.startswith('recsys_router.models')]; "
            "assert not bad, bad; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr
