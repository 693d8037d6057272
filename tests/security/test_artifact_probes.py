"""Hostile artifacts: every tampered artifact is refused with an ArtifactError, imports no
module that loading a good artifact does not, and writes no file.

Each probe copies a good artifact, changes it the way an attacker would, and (unless the
probe is about checksums) re-fixes the manifest's checksums, so that only the format-2
checks stand between the file and the loader.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import shutil
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.export import ArtifactError, LIMITS, export_router, load_router
from recsys_router.registry import make_router

KEY = "s3cret-key"


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _man(d: Path) -> dict:
    return json.loads((d / "manifest.json").read_text())


def _put_man(d: Path, man) -> None:
    (d / "manifest.json").write_text(json.dumps(man))


def refix(d: Path) -> None:
    """Recompute the checksums an attacker can recompute (no signature)."""
    man = _man(d)
    if isinstance(man, dict) and isinstance(man.get("files"), dict):
        for f in ("state.json", "weights.npz"):
            if (d / f).is_file():
                man["files"][f] = _sha(d / f)
        _put_man(d, man)


def _state(d: Path) -> dict:
    return json.loads((d / "state.json").read_text())


def _put_state(d: Path, doc) -> None:
    (d / "state.json").write_text(json.dumps(doc))


def _arrays(d: Path) -> dict:
    with np.load(d / "weights.npz", allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def _put_arrays(d: Path, arrays: dict, declare: bool = True) -> None:
    with open(d / "weights.npz", "wb") as fh:
        np.savez(fh, **arrays)
    if declare:
        man = _man(d)
        man["arrays"] = {k: {"dtype": v.dtype.name, "shape": list(v.shape)} for k, v in arrays.items()}
        _put_man(d, man)


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    """Good artifacts of a text router (knn + tfidf), an index-holding one (zero), a torch
    one (mlpr), a Lightning one (mf), a count-holding one (random) and a nested one
    (task-residual around best-single)."""
    data = make_synthetic(120, 4, 3, seed=1)
    root = tmp_path_factory.mktemp("good")
    arts = {
        "knn": make_router("knn", k=3, encoder="tfidf"),
        "zero": make_router("zero"),
        "random": make_router("random", seed=3),
        "mf": make_router("mf", max_epochs=1, encoder_options={"dim": 16}),
        "mlpr": make_router("mlpr", epochs=1, hidden_size=8),
        "nested": make_router("task-residual", base="best-single", alpha=0.5),
    }
    out = {}
    for name, r in arts.items():
        out[name] = export_router(r.fit(data), root / name, train_data=data,
                                  sign_key=KEY if name == "knn" else None)
        load_router(out[name]).route(["warm up every import a good load needs"])
    return out


def _listing(*roots: Path) -> dict:
    files = {}
    for root in roots:
        for dirpath, _, names in os.walk(root):
            for n in names:
                p = Path(dirpath, n)
                st = p.lstat()
                files[str(p)] = (st.st_size, st.st_mtime_ns)
    return files


# ------------------------------------------------------------------ the probes
def p_flip_npz_magic(d):
    raw = bytearray((d / "weights.npz").read_bytes())
    raw[raw.index(b"\x93NUMPY") + 1] ^= 0xFF
    (d / "weights.npz").write_bytes(bytes(raw))


def p_flip_zip_directory(d):
    raw = bytearray((d / "weights.npz").read_bytes())
    raw[raw.rindex(b"PK\x01\x02") + 2] ^= 0xFF
    (d / "weights.npz").write_bytes(bytes(raw))


def p_flip_npy_header_dtype(d):
    raw = (d / "weights.npz").read_bytes()
    (d / "weights.npz").write_bytes(raw.replace(b"'descr': '<f8'", b"'descr': '|O8'", 1))


def p_flip_state_json(d):
    raw = bytearray((d / "state.json").read_bytes())
    raw[0] = ord("[")
    (d / "state.json").write_bytes(bytes(raw))


def p_bad_checksum(d):
    man = _man(d)
    man["files"]["weights.npz"] = "0" * 64
    _put_man(d, man)


def p_manifest_is_list(d):
    _put_man(d, [_man(d)])


def p_manifest_no_format(d):
    man = _man(d)
    del man["format"]
    _put_man(d, man)


def _man_field(key, value, name):
    """A probe setting one manifest field."""
    def probe(d):
        man = _man(d)
        man[key] = value
        _put_man(d, man)
    probe.__name__ = f"p_{name}"
    return probe


p_version_as_string = _man_field("format_version", "2", "version_as_string")
p_version_1 = _man_field("format_version", 1, "version_1")
p_class_not_string = _man_field("router_class", {"module": "os", "name": "system"},
                                "class_not_string")
# the training score range add_llm checks probe scores against: code, one number, reversed
p_score_range_code = _man_field("score_range", ["__import__('os')", 1.0], "score_range_code")
p_score_range_short = _man_field("score_range", [0.0], "score_range_short")
p_score_range_reversed = _man_field("score_range", [1.0, 0.0], "score_range_reversed")


def _class(name):
    def probe(d):
        man, doc = _man(d), _state(d)
        man["router_class"] = doc["class"] = name
        _put_man(d, man)
        _put_state(d, doc)
    probe.__name__ = f"p_class_{name}"
    return probe


def p_state_class_differs(d):
    doc = _state(d)
    doc["class"] = "recsys_router.models.baselines.simple:BestSingleRouter"
    _put_state(d, doc)


def p_params_unknown(d):
    doc = _state(d)
    doc["params"]["__reduce__"] = "os.system"
    _put_state(d, doc)


def p_params_wrong_type(d):
    doc = _state(d)
    doc["params"]["seed"] = "rm -rf /"
    _put_state(d, doc)


def p_state_object_node(d):
    doc = _state(d)
    doc["state"]["k_"] = {"__object__": "os:system", "state": {"__dict__": {}}}
    _put_state(d, doc)


def p_state_undeclared_dict(d):
    doc = _state(d)
    doc["state"]["__dict__"] = {"predict_scores": {"__type__": "builtins:eval"}}
    _put_state(d, doc)


def p_state_missing_field(d):
    doc = _state(d)
    del doc["state"]["k_"]
    _put_state(d, doc)


def p_duplicate_llm_names(d):
    doc = _state(d)
    doc["state"]["llm_names_"][1] = doc["state"]["llm_names_"][0]
    _put_state(d, doc)


def p_state_deep_json(d):
    (d / "state.json").write_text("[" * 200_000 + "]" * 200_000)


def p_manifest_nan_and_duplicate_keys(d):
    text = (d / "manifest.json").read_text()
    (d / "manifest.json").write_text(text.replace('"uses_text": true',
                                                  '"uses_text": true, "uses_text": NaN', 1))


def p_manifest_oversized(d):
    man = _man(d)
    man["metrics"] = {f"m{i}": 0.0 for i in range(LIMITS["manifest_bytes"] // 8)}
    _put_man(d, man)


def p_manifest_symlink_dev_zero(d):
    (d / "manifest.json").unlink()
    os.symlink("/dev/zero", d / "manifest.json")


def p_missing_state(d):
    (d / "state.json").unlink()


def p_missing_weights(d):
    (d / "weights.npz").unlink()


def p_extra_file(d):
    (d / "evil.py").write_text("import os; os.system('touch /tmp/pwned')\n")


def p_dotdot_file_name(d):
    man = _man(d)
    man["files"]["../../outside.npz"] = man["files"].pop("weights.npz")
    _put_man(d, man)


def p_dotdot_array_name(d):
    arrays = _arrays(d)
    arrays["../../x_train_"] = arrays.pop("x_train_")
    _put_arrays(d, arrays)


def p_pickled_member(d):
    arrays = _arrays(d)
    with zipfile.ZipFile(d / "weights.npz", "w") as z:
        for k, v in arrays.items():
            buf = io.BytesIO()
            np.save(buf, v)
            z.writestr(k + ".npy", buf.getvalue())
        z.writestr("payload.pkl", pickle.dumps(os.getcwd))


def p_object_array(d):
    arrays = _arrays(d)
    arrays["llm_means_"] = np.array([os.system] * len(arrays["llm_means_"]), dtype=object)
    with zipfile.ZipFile(d / "weights.npz", "w") as z:
        for k, v in arrays.items():
            buf = io.BytesIO()
            np.save(buf, v, allow_pickle=True)
            z.writestr(k + ".npy", buf.getvalue())
    man = _man(d)
    man["arrays"]["llm_means_"]["dtype"] = "object"
    _put_man(d, man)


def p_zip_bomb(d):
    arrays = _arrays(d)
    arrays["x_train_"] = np.zeros((40_000, 1000))  # 320 MB of zeros, ~300 KB compressed
    with open(d / "weights.npz", "wb") as fh:
        np.savez_compressed(fh, **arrays)
    man = _man(d)
    man["arrays"]["x_train_"]["shape"] = [40_000, 1000]
    _put_man(d, man)


def p_declared_too_big(d):
    man = _man(d)
    man["arrays"]["x_train_"]["shape"] = [10 ** 7, 10 ** 4]
    _put_man(d, man)


def p_header_lies_about_size(d):
    raw = (d / "weights.npz").read_bytes()
    (d / "weights.npz").write_bytes(raw.replace(b"'shape': (4,)", b"'shape': (9,)", 1))


def p_extra_array(d):
    arrays = _arrays(d)
    arrays["__init__"] = np.zeros(3)
    _put_arrays(d, arrays)


def p_missing_array(d):
    arrays = _arrays(d)
    del arrays["y_train_"]
    _put_arrays(d, arrays)


def p_wrong_shape(d):
    arrays = _arrays(d)
    arrays["y_train_"] = arrays["y_train_"][:, :2]
    _put_arrays(d, arrays)


def p_big_endian(d):
    arrays = _arrays(d)
    arrays["llm_means_"] = arrays["llm_means_"].astype(">f8")
    _put_arrays(d, arrays, declare=False)


def _array_edit(key, change, name):
    """A probe replacing (or adding) one array, declared in the manifest."""
    def probe(d):
        arrays = _arrays(d)
        arrays[key] = change(arrays.get(key))
        _put_arrays(d, arrays)
    probe.__name__ = f"p_{name}"
    return probe


p_wrong_dtype = _array_edit("llm_means_", lambda a: a.astype(np.float32), "wrong_dtype")
p_vocab_offsets_out_of_range = _array_edit("encoder_/vocab_offsets", lambda a: a * 1000,
                                           "vocab_offsets_out_of_range")
p_hull_index_out_of_range = _array_edit("hull_", lambda a: a + 100, "hull_index_out_of_range")
p_negative_index = _array_edit("hull_", lambda a: a - 100, "negative_index")
p_net_extra_weight = _array_edit("model_/9.weight", lambda a: np.zeros((2, 2), np.float32),
                                 "net_extra_weight")
p_net_wrong_shape = _array_edit("model_/0.weight", lambda a: np.zeros((3, 3), np.float32),
                                "net_wrong_shape")


def p_encoder_model_path(d):
    doc = _state(d)
    doc["state"]["encoder_"] = {"kind": "st", "model_name": "/tmp/evil-model", "normalize": True,
                                "max_seq_length": None, "batch_size": 8}
    _put_state(d, doc)


def p_encoder_unknown_kind(d):
    doc = _state(d)
    doc["state"]["encoder_"]["kind"] = "pickle"
    _put_state(d, doc)


PROBES_KNN = [p_flip_npz_magic, p_flip_zip_directory, p_flip_npy_header_dtype, p_flip_state_json,
              p_bad_checksum, p_manifest_is_list, p_manifest_no_format, p_version_as_string,
              p_version_1, _class("recsys_router.export.artifact:os.system"),
              _class("os:system"), _class("builtins:eval"), _class("subprocess:Popen"),
              _class("posix:system"), p_class_not_string, p_state_class_differs,
              p_params_unknown, p_params_wrong_type, p_state_object_node, p_state_undeclared_dict,
              p_state_missing_field, p_duplicate_llm_names, p_state_deep_json,
              p_manifest_nan_and_duplicate_keys, p_manifest_oversized,
              p_manifest_symlink_dev_zero, p_missing_state, p_missing_weights, p_extra_file,
              p_dotdot_file_name, p_dotdot_array_name, p_pickled_member, p_object_array,
              p_zip_bomb, p_declared_too_big, p_header_lies_about_size, p_extra_array,
              p_missing_array, p_wrong_dtype, p_wrong_shape, p_big_endian, p_encoder_model_path,
              p_encoder_unknown_kind, p_vocab_offsets_out_of_range, p_score_range_code,
              p_score_range_short, p_score_range_reversed]


def p_net_huge_sizes(d):
    doc = _state(d)
    doc["state"]["model_"]["hidden_size"] = 10 ** 9
    _put_state(d, doc)


def p_net_large_but_in_range(d):
    """Sizes within the range checks but far beyond the stored weights: refused by comparing
    with a network built on the meta device (nothing allocated)."""
    doc = _state(d)
    doc["state"]["model_"].update({"in_dim": 90_000, "hidden_size": 90_000, "n_hidden": 60})
    _put_state(d, doc)


def p_count_beyond_pool(d):
    doc = _state(d)
    doc["state"]["n_llms_"] = 10 ** 12
    _put_state(d, doc)


def p_encoder_huge_dim(d):
    doc = _state(d)
    doc["state"]["encoder_"] = {"kind": "hashing", "dim": 10 ** 9, "word_ngrams": [1, 2],
                                "char_ngrams": [3, 5], "word_weight": 0.5, "batch_size": 64}
    _put_state(d, doc)


def p_encoder_huge_ngrams(d):
    doc = _state(d)
    doc["state"]["encoder_"] = {"kind": "hashing", "dim": 64, "word_ngrams": [1, 100000],
                                "char_ngrams": None, "word_weight": 0.5, "batch_size": 64}
    _put_state(d, doc)


def p_score_scale_tampered(d):
    doc = _state(d)
    doc["state"]["score_scale_"] = {"kind": "grades", "method": "rank", "lo": 0.0, "hi": 1.0,
                                    "knots_x": [1.0, 0.0], "knots_y": [0.0, 1.0],
                                    "skewness": 0.0, "n_levels": 2}
    _put_state(d, doc)


def p_net_pool_too_large(d):
    doc = _state(d)
    doc["state"]["net_"]["n_llms"] = 10 ** 6
    _put_state(d, doc)


def p_nested_class(d):
    doc = _state(d)
    doc["state"]["router_"]["class"] = "os:system"
    _put_state(d, doc)


def p_nested_bad_pool(d):
    doc = _state(d)
    doc["state"]["router_"]["state"]["llm_names_"] = ["x", "y", "z", "w"]
    _put_state(d, doc)


OTHER = [("zero", p_hull_index_out_of_range), ("zero", p_negative_index),
         ("mlpr", p_net_extra_weight), ("mlpr", p_net_wrong_shape), ("mlpr", p_net_huge_sizes),
         ("mlpr", p_net_large_but_in_range), ("random", p_count_beyond_pool),
         ("knn", p_encoder_huge_dim), ("knn", p_encoder_huge_ngrams),
         ("mf", p_score_scale_tampered), ("mf", p_net_pool_too_large),
         ("nested", p_nested_class), ("nested", p_nested_bad_pool)]
CASES = [("knn", p) for p in PROBES_KNN] + OTHER
NO_REFIX = {p_bad_checksum}


def test_enough_probes():
    assert len(CASES) >= 30


@pytest.mark.parametrize("base,probe", CASES, ids=[f"{b}-{p.__name__[2:]}" for b, p in CASES])
def test_tampered_artifact_refused(base, probe, good, tmp_path, monkeypatch):
    monkeypatch.setenv("RECSYS_ROUTER_CACHE", str(tmp_path / "cache"))
    d = tmp_path / "art"
    shutil.copytree(good[base], d)
    probe(d)
    if probe not in NO_REFIX and (d / "manifest.json").is_file():
        try:
            refix(d)
        except (json.JSONDecodeError, UnicodeDecodeError):
            pass
    before_files = _listing(tmp_path, Path.cwd() / "tests")
    before_mods = set(sys.modules)
    with pytest.raises(ArtifactError) as info:
        load_router(d).route(["a query"])
    assert "\n" not in str(info.value)
    assert set(sys.modules) - before_mods == set()
    assert _listing(tmp_path, Path.cwd() / "tests") == before_files
    assert not Path("/tmp/pwned").exists()


def test_signed_artifact_refuses_data_edits(good, tmp_path):
    d = tmp_path / "art"
    shutil.copytree(good["knn"], d)
    assert load_router(d, sign_key=KEY).llm_names
    arrays = _arrays(d)
    arrays["llm_means_"] = arrays["llm_means_"] + 1.0  # valid data, but not what was signed
    _put_arrays(d, arrays)
    refix(d)
    load_router(d)  # without the key, a data edit with re-fixed checksums is only data
    with pytest.raises(ArtifactError, match="signature mismatch"):
        load_router(d, sign_key=KEY)
    with pytest.raises(ArtifactError, match="signature mismatch"):
        load_router(good["knn"], sign_key="another key")
    with pytest.raises(ArtifactError, match="not signed"):
        load_router(good["zero"], sign_key=KEY)


def test_zip_bomb_refused_before_allocation(good, tmp_path):
    import tracemalloc
    d = tmp_path / "art"
    shutil.copytree(good["knn"], d)
    p_zip_bomb(d)
    refix(d)
    assert (d / "weights.npz").stat().st_size < 5 << 20
    tracemalloc.start()
    try:
        with pytest.raises(ArtifactError, match="compressed"):
            load_router(d)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 << 20, f"peak {peak / 2**20:.0f} MiB while refusing a zip bomb"
