"""Hostile values inside well-formed artifacts (checksums re-fixed, shapes declared): NaN
or infinite weights, a kNN ``k_`` or stored parameters out of range, sizes that do not fit
together. Each is refused at load with an ArtifactError naming state.json and the field;
legitimate NaN (an unobserved score, an unknown cost) still loads and routes."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from recsys_router.data import RoutingData
from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.export import ArtifactError, export_router, load_router
from recsys_router.registry import make_router


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _refix(d: Path) -> None:
    man = json.loads((d / "manifest.json").read_text())
    man["files"] = {f: _sha(d / f) for f in ("state.json", "weights.npz")}
    (d / "manifest.json").write_text(json.dumps(man))


def _arrays(d: Path) -> dict:
    with np.load(d / "weights.npz", allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _put_arrays(d: Path, arrays: dict) -> None:
    with open(d / "weights.npz", "wb") as fh:
        np.savez(fh, **arrays)
    man = json.loads((d / "manifest.json").read_text())
    man["arrays"] = {k: {"dtype": v.dtype.name, "shape": list(v.shape)} for k, v in arrays.items()}
    (d / "manifest.json").write_text(json.dumps(man))
    _refix(d)


def _edit_state(d: Path, fn) -> None:
    doc = json.loads((d / "state.json").read_text())
    fn(doc)
    (d / "state.json").write_text(json.dumps(doc))
    _refix(d)


@pytest.fixture(scope="module")
def data():
    return make_synthetic(60, 3, 2, seed=0)


@pytest.fixture(scope="module")
def good(tmp_path_factory, data):
    root = tmp_path_factory.mktemp("good")
    routers = {"knn": make_router("knn", k=3), "prknn": make_router("prknn"),
               "linearr": make_router("linearr"), "best-single": make_router("best-single"),
               "mlpr": make_router("mlpr", epochs=1, hidden_size=8)}
    return {n: export_router(r.fit(data), root / n, train_data=data) for n, r in routers.items()}


@pytest.fixture
def copy(good, tmp_path):
    def make(name):
        d = tmp_path / name
        shutil.copytree(good[name], d)
        return d
    return make


def _refused(d: Path, *needles: str) -> str:
    with pytest.raises(ArtifactError) as info:
        load_router(d)
    msg = str(info.value)
    assert msg.startswith(f"{d / 'state.json'}: ") and "\n" not in msg
    for n in needles:
        assert n in msg, msg
    return msg


# --------------------------------------------------------------- non-finite weights
@pytest.mark.parametrize("name,array", [("best-single", "mean_scores_"), ("linearr", "coef_"),
                                        ("linearr", "intercept_"), ("knn", "x_train_"),
                                        ("knn", "llm_means_"), ("mlpr", "x_mean_")])
@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_weight_is_refused(copy, name, array, value):
    d = copy(name)
    a = _arrays(d)
    a[array].flat[1] = value
    _put_arrays(d, a)
    _refused(d, f"array {array!r}: 1 value(s)", "NaN or infinite")


def test_non_finite_network_weight_is_refused(copy):
    d = copy("mlpr")
    a = _arrays(d)
    name = next(k for k in sorted(a) if k.startswith("model_/") and a[k].dtype.kind == "f")
    a[name][...] = np.nan
    _put_arrays(d, a)
    _refused(d, f"array {name!r}: {a[name].size} value(s)")


def test_missing_values_may_be_nan_but_not_infinite(copy):
    d = copy("knn")
    a = _arrays(d)
    a["y_train_"][0, 0] = np.nan                     # an unobserved score: allowed
    _put_arrays(d, a)
    assert load_router(d).route(["hello world"])[0]["llm"] in load_router(d).llm_names
    a["y_train_"][0, 1] = np.inf
    _put_arrays(d, a)
    _refused(d, "array 'y_train_': 1 value(s) infinite", "finite numbers or NaN (missing)")


def test_legitimate_nan_loads_and_routes(tmp_path, data):
    """An LLM nobody scored and an LLM whose cost is unknown: exported, loaded, served."""
    s = data.scores.astype(float).copy()
    s[:, 0] = np.nan
    c = data.costs.astype(float).copy()
    c[:, 2] = np.nan
    d2 = RoutingData(data.queries, data.llm_names, s, costs=c, name="gaps")
    for name in ("knn", "best-single", "linearr", "zero", "task-best"):
        out = export_router(make_router(name).fit(d2), tmp_path / name, train_data=d2)
        r = load_router(out).route(["hello world"])[0]
        assert r["llm"] != data.llm_names[0] and set(r["scores"]) == set(data.llm_names)


# --------------------------------------------------------------- encoder settings
@pytest.mark.parametrize("length", [513, 10 ** 9, 0])
def test_minilm_truncation_length_beyond_its_positions_is_refused(copy, length):
    """MiniLM holds 512 positions: a longer ``max_seq_length`` crashed inside PyTorch on the
    first long text served."""
    d = copy("knn")
    _edit_state(d, lambda doc: doc["state"].__setitem__("encoder_", {
        "kind": "st", "model_name": "sentence-transformers/all-MiniLM-L6-v2",
        "normalize": True, "max_seq_length": length, "batch_size": 8}))
    _refused(d, "max_seq_length must be an integer in [1, 512]", f"got {length}")


# --------------------------------------------------------------- kNN k_ and parameters
@pytest.mark.parametrize("name", ["knn", "prknn"])
@pytest.mark.parametrize("k", [0, -1, 61, 10 ** 12])
def test_knn_k_out_of_range_is_refused(copy, name, k):
    d = copy(name)
    _edit_state(d, lambda doc: doc["state"].__setitem__("k_", k))
    _refused(d, f"k_: {k} neighbours, expected 1 <= k_ <= n_train=60")


def test_knn_k_at_the_bounds_loads(copy, data):
    d = copy("knn")
    for k in (1, 60):
        _edit_state(d, lambda doc: doc["state"].__setitem__("k_", k))
        assert load_router(d).router.neighbours(data).shape == (60, k)


@pytest.mark.parametrize("key,value,needle", [("metric", "nope", "params.metric: 'nope'"),
                                              ("k", 0, "params.k: 0"), ("k", 2.5, "params.k: 2.5"),
                                              ("k", True, "params.k: True")])
def test_knn_stored_parameters_out_of_range_are_refused(copy, key, value, needle):
    d = copy("knn")
    _edit_state(d, lambda doc: doc["params"].__setitem__(key, value))
    _refused(d, needle)


# --------------------------------------------------------------- sizes tied together
def test_knn_without_training_rows_is_refused(copy):
    d = copy("knn")
    a = _arrays(d)
    a["x_train_"], a["y_train_"] = a["x_train_"][:0], a["y_train_"][:0]
    _put_arrays(d, a)
    _refused(d, "x_train_: no training rows")


def test_knn_embedding_width_must_match_the_encoder(copy):
    d = copy("knn")
    a = _arrays(d)
    width = a["x_train_"].shape[1]
    a["x_train_"] = a["x_train_"][:, : width // 2].copy()
    _put_arrays(d, a)
    _refused(d, f"x_train_: embedding width {width // 2}, but the encoder outputs {width}")


def test_linearr_embedding_width_must_match_the_encoder(copy):
    d = copy("linearr")
    a = _arrays(d)
    a["coef_"] = a["coef_"][:, :7].copy()
    _put_arrays(d, a)
    _refused(d, "coef_: embedding width 7")


@pytest.mark.parametrize("cut", [0, 7])
def test_mlpr_feature_sizes_must_match_the_network(copy, cut):
    d = copy("mlpr")
    a = _arrays(d)
    a["x_mean_"], a["x_scale_"] = a["x_mean_"][:cut].copy(), a["x_scale_"][:cut].copy()
    _put_arrays(d, a)
    _refused(d, f"x_mean_: embedding width {cut}")


def test_mlpr_network_output_must_match_the_pool(copy):
    """A consistent network of 2 outputs (last layer cut to match) for a pool of 3."""
    d = copy("mlpr")
    a = _arrays(d)
    last = max((k for k in a if k.startswith("model_/") and k.endswith(".bias")),
               key=lambda k: int(k.split("/")[1].split(".")[-2]))
    stem = last[: -len("bias")]
    a[stem + "weight"], a[stem + "bias"] = a[stem + "weight"][:2].copy(), a[stem + "bias"][:2].copy()
    _put_arrays(d, a)
    _edit_state(d, lambda doc: doc["state"]["model_"].__setitem__("out_dim", 2))
    _refused(d, "model_: network of 512 inputs and 2 outputs, expected 512 (x_mean_) and 3")


def test_mlpr_zero_feature_scale_is_refused(copy):
    d = copy("mlpr")
    a = _arrays(d)
    a["x_scale_"][3] = 0.0
    _put_arrays(d, a)
    _refused(d, "x_scale_: feature scales must be > 0")


# --------------------------------------------------------------- ALS fold-in state
@pytest.fixture(scope="module")
def als_onboarded(tmp_path_factory):
    """An ALS artifact with an onboarded LLM (its column is clipped to ``score_range_``)."""
    from recsys_router.coldstart.onboard import onboard_artifact
    from recsys_router.coldstart.probes_input import probe_data
    d = make_synthetic(120, 4, 2, seed=0, binary=False)
    old = d.subset(llms=d.llm_names[:3])
    root = tmp_path_factory.mktemp("als")
    export_router(make_router("als", factors=4).fit(old), root / "src", train_data=old)
    texts = [str(t) for t in d.texts[:8]]
    probes = probe_data("new", dict(zip(texts, map(float, d.scores[:8, 3]))),
                        dict.fromkeys(texts, 1e-6))
    return onboard_artifact(root / "src", "new", probes, root / "onb")


def _als_copy(src: Path, tmp_path: Path) -> Path:
    d = tmp_path / "als"
    shutil.copytree(src, d)
    return d


def test_als_state_score_range_reversed_is_refused(als_onboarded, tmp_path):
    """A reversed range pinned every onboarded score to its low end (0.1 for all queries);
    with the manifest's range removed, the refusal is the state's own check."""
    d = _als_copy(als_onboarded, tmp_path)
    _edit_state(d, lambda doc: doc["state"].__setitem__("score_range_", [0.9, 0.1]))
    man = json.loads((d / "manifest.json").read_text())
    man.pop("score_range")
    (d / "manifest.json").write_text(json.dumps(man))
    _refused(d, "score_range_: expected finite [lowest, highest], got [0.9, 0.1]")


def test_als_state_score_range_differing_from_the_manifest_is_refused(als_onboarded, tmp_path):
    """A narrowed range (both ends 0.5) clipped the onboarded column to 0.5 everywhere."""
    d = _als_copy(als_onboarded, tmp_path)
    man = json.loads((d / "manifest.json").read_text())
    assert man["score_range"] is not None
    _edit_state(d, lambda doc: doc["state"].__setitem__("score_range_", [0.5, 0.5000001]))
    _refused(d, "score_range_ [0.5, 0.5000001] differs from the manifest's score_range "
                f"{[float(x) for x in man['score_range']]}")


@pytest.mark.parametrize("value", [-1.0, 0.0, 5e-324, 1e-13])
def test_als_noise_var_zero_negative_or_subnormal_is_refused(als_onboarded, tmp_path, value):
    """0 or a subnormal dropped the fold-in's prior; -1 turned it into a repulsion."""
    d = _als_copy(als_onboarded, tmp_path)
    _edit_state(d, lambda doc: doc["state"].__setitem__("noise_var_", value))
    _refused(d, f"noise_var_: {value!r}, expected a finite variance in [1e-12, 1e+06]")


@pytest.mark.parametrize("value", [1e300, 1e6 * (1 + 1e-9)])
def test_als_noise_var_absurdly_large_is_refused(als_onboarded, tmp_path, value):
    """1e300 loaded (the preferences are 0/1: a genuine estimate is a weighted mean squared
    residual of 0/1 values) and would make any later onboarded LLM's factor the pool mean
    whatever its probes; just over the bound is refused too, the bound itself loads."""
    d = _als_copy(als_onboarded, tmp_path)
    _edit_state(d, lambda doc: doc["state"].__setitem__("noise_var_", value))
    _refused(d, f"noise_var_: {value!r}, expected a finite variance in [1e-12, 1e+06]")


def test_als_noise_var_at_its_bounds_loads(als_onboarded, tmp_path):
    for value in (1e-12, 1e6):
        d = _als_copy(als_onboarded, tmp_path / str(value))
        _edit_state(d, lambda doc, v=value: doc["state"].__setitem__("noise_var_", v))
        assert load_router(d).router.noise_var_ == value


def test_als_untampered_onboarded_artifact_loads(als_onboarded):
    art = load_router(als_onboarded)
    assert art.router.score_range_ == tuple(art.manifest["score_range"])
    assert art.router.llm_names_[-1] == "new"
