"""Hostile artifacts of the wrappers ``evaluate`` puts around routers (safe fallback, --auto):
each tampered artifact is refused with an ArtifactError naming the field, imports no module
a good load does not, and writes no file (same harness as test_artifact_probes)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.export import ArtifactError, export_router, load_router
from recsys_router.fallback import SafeFallbackRouter
from recsys_router.registry import make_router
from recsys_router.tuning.inner import AutoTunedRouter
from test_artifact_probes import _array_edit, _listing, _put_state, _state, refix


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    data = make_synthetic(150, 4, 3, seed=1)
    root = tmp_path_factory.mktemp("good_wrappers")
    arts = {"fallback": SafeFallbackRouter(make_router("knn", k=3, encoder="hashing"),
                                           min_task_queries=5),
            "auto": AutoTunedRouter("knn", {"k": 3, "encoder": "hashing"}, n_trials=1)}
    out = {}
    for name, r in arts.items():
        out[name] = export_router(r.fit(data), root / name, train_data=data)
        load_router(out[name]).route(["warm up every import a good load needs"])
    return out


def _edit(change, name):
    def probe(d):
        doc = _state(d)
        change(doc)
        _put_state(d, doc)
    probe.__name__ = f"p_{name}"
    return probe


def _first_task(doc):
    return sorted(doc["state"]["fallback_"]["tasks"])[0]


PROBES = [
    ("fallback", "decision", _edit(lambda doc: doc["state"]["fallback_"]["tasks"].__setitem__(
        _first_task(doc), "__import__('os').system('touch /tmp/pwned')"), "task_decision_code")),
    ("fallback", "decision", _edit(lambda doc: doc["state"]["fallback_"].__setitem__(
        "default", "os:system"), "default_decision")),
    ("fallback", "tasks", _edit(lambda doc: doc["state"]["fallback_"].__setitem__(
        "tasks", ["router"]), "tasks_not_an_object")),
    ("fallback", "enabled", _edit(lambda doc: doc["state"]["fallback_"].__setitem__(
        "enabled", "yes"), "enabled_not_bool")),
    ("fallback", "router", _edit(lambda doc: doc["params"].__setitem__("router", "knn"),
                                 "wrapped_router_as_parameter")),
    ("fallback", "verdict_z", _edit(lambda doc: doc["params"].__setitem__(
        "verdict_z", "__import__('os').system('touch /tmp/pwned')"), "verdict_z_code")),
    ("fallback", "verdict_z", _edit(lambda doc: doc["params"].__setitem__("verdict_z", [1.0]),
                                    "verdict_z_list")),
    ("fallback", "top_z", _edit(lambda doc: doc["params"].__setitem__(
        "top_z", "__import__('os').system('touch /tmp/pwned')"), "top_z_code")),
    ("fallback", "decision", _edit(lambda doc: doc["state"]["fallback_"].__setitem__(
        "top", "os:system"), "top_decision")),
    ("fallback", "verdict_metric", _edit(lambda doc: doc["params"].__setitem__(
        "verdict_metric", "__import__('os').system('touch /tmp/pwned')"), "verdict_metric_code")),
    ("fallback", "registered", _edit(lambda doc: doc["state"]["router_"].__setitem__(
        "class", "os:system"), "nested_class")),
    ("fallback", "class", _edit(lambda doc: doc.__setitem__(
        "class", "recsys_router.fallback:wrap_router"), "wrapper_function_as_class")),
    ("fallback", "n_base_tasks", _edit(lambda doc: doc["state"]["base_tasks_"].append("extra"),
                                       "more_tasks_than_rows")),
    ("fallback", "base_task_means_", _array_edit(
        "base_task_means_", lambda a: np.zeros((a.shape[0], a.shape[1] + 1)), "means_wrong_shape")),
    ("fallback", "base_overall_", _array_edit(
        "base_overall_", lambda a: a.astype(np.float32), "overall_wrong_dtype")),
    ("auto", "name", _edit(lambda doc: doc["params"].__setitem__("name", "os:system"),
                           "auto_unregistered_name")),
    ("auto", "search_dir", _edit(lambda doc: doc["params"].__setitem__("search_dir", "/etc"),
                                 "auto_search_dir")),
    ("auto", "trials_", _edit(lambda doc: doc["state"].__setitem__("trials_", "x" * 10),
                              "auto_trials_not_a_list")),
    ("auto", "objective", _edit(lambda doc: doc["params"].__setitem__("objective", "os:system"),
                                "auto_objective_not_a_choice")),
    ("auto", "objective_", _edit(lambda doc: doc["state"].__setitem__(
        "objective_", "__import__('os').system('touch /tmp/pwned')"), "auto_objective_state_code")),
    ("auto", "inner_folds", _edit(lambda doc: doc["params"].__setitem__(
        "inner_folds", "__import__('os').system('touch /tmp/pwned')"), "auto_inner_folds_code")),
    ("auto", "inner_folds", _edit(lambda doc: doc["params"].__setitem__("inner_folds", 10 ** 9),
                                  "auto_inner_folds_huge")),
    ("auto", "inner_folds_", _edit(lambda doc: doc["state"].__setitem__("inner_folds_", 0),
                                   "auto_inner_folds_state_zero")),
]


@pytest.mark.parametrize("base,field,probe", PROBES, ids=[p.__name__[2:] for _, _, p in PROBES])
def test_tampered_wrapper_artifact_refused(base, field, probe, good, tmp_path, monkeypatch):
    monkeypatch.setenv("RECSYS_ROUTER_CACHE", str(tmp_path / "cache"))
    d = tmp_path / "art"
    shutil.copytree(good[base], d)
    probe(d)
    refix(d)
    before_files = _listing(tmp_path, Path.cwd() / "tests")
    before_mods = set(sys.modules)
    with pytest.raises(ArtifactError) as info:
        load_router(d).route(["a query"])
    msg = str(info.value)
    assert "\n" not in msg and field in msg
    assert set(sys.modules) - before_mods == set()
    assert _listing(tmp_path, Path.cwd() / "tests") == before_files
    assert not Path("/tmp/pwned").exists()

