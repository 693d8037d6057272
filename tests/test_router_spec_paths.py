"""A router spec that is a registry name means the registry's router, even when the working
directory holds an artifact folder of that name; the folder is read when the spec is
clearly a path, and parameters given with an artifact are an error, never dropped."""

from __future__ import annotations

from pathlib import Path

import pytest

from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.export import export_router
from recsys_router.registry import make_router
from recsys_router.router_spec import is_artifact_dir, resolve_router


@pytest.fixture
def cwd_with_knn_folder(tmp_path, monkeypatch):
    d = make_synthetic(40, 3, 2, seed=0)
    export_router(make_router("best-single").fit(d), tmp_path / "knn", train_data=d)
    export_router(make_router("best-single").fit(d), tmp_path / "mine", train_data=d)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("name", ["knn", "KNN", " knn "])
def test_registry_name_wins_over_a_same_named_folder(cwd_with_knn_folder, name):
    r, needs_fit = resolve_router(name, {"k": 5}, encoder="hashing")
    assert type(r).__name__ == "KNNRouter" and needs_fit and r.get_params()["k"] == 5
    assert not is_artifact_dir(name)


@pytest.mark.parametrize("spec", ["./knn", "knn/", Path("knn"), "mine"])
def test_a_path_or_an_unregistered_name_loads_the_folder(cwd_with_knn_folder, spec):
    r, needs_fit = resolve_router(spec)
    assert type(r).__name__ == "BestSingleRouter" and not needs_fit and r.is_fitted
    assert is_artifact_dir(spec)


def test_absolute_path_loads_the_folder(cwd_with_knn_folder):
    r, needs_fit = resolve_router(str(cwd_with_knn_folder / "knn"))
    assert type(r).__name__ == "BestSingleRouter" and not needs_fit


@pytest.mark.parametrize("spec", ["./knn", "mine"])
def test_parameters_with_an_artifact_are_an_error(cwd_with_knn_folder, spec):
    with pytest.raises(ValueError, match=r"is an exported artifact, already fitted: parameters \['k'\]"):
        resolve_router(spec, {"k": 5})
    assert resolve_router(spec, {})[0].is_fitted           # empty parameters are no parameters


def test_path_spec_rule():
    from recsys_router.router_spec import is_path_spec
    assert [is_path_spec(s) for s in ("knn", "os.system", ".knn", "a/b", Path("x"), 3)] == \
        [False, False, True, True, True, False]
