"""What a tampered artifact may not make the loader do (checksums re-fixed, as anyone who
edits the files can): name an encoder (a folder, ``precomputed:<file>``, a Hub model) that a
refit or copy of the loaded router would build, or encoder options naming a folder; hold
one array twice in ``weights.npz`` (two readers could disagree on it); store an array in a
byte order that is not this machine's. Each is refused with one line naming the file and
the field or member."""

from __future__ import annotations

import io
import json
import shutil
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.export import ArtifactError, export_router, load_router
from recsys_router.export.safe_io import LimitError, NpzReader
from recsys_router.registry import make_router
from recsys_router.router_state import check_document, router_class_name
from recsys_router.state import StateError
from test_artifact_probes import _man, _put_man, refix

#: the byte order that is not this machine's
OTHER = ">" if sys.byteorder == "little" else "<"


@pytest.fixture(scope="module")
def data():
    return make_synthetic(60, 3, 2, seed=0)


@pytest.fixture(scope="module")
def goods(data, tmp_path_factory):
    root = tmp_path_factory.mktemp("good")
    routers = {"knn": make_router("knn", k=3),
               "mlpr": make_router("mlpr", epochs=1, hidden_size=8)}
    return {n: export_router(r.fit(data), root / n, train_data=data) for n, r in routers.items()}


@pytest.fixture
def copy(goods, tmp_path):
    def make(name):
        return Path(shutil.copytree(goods[name], tmp_path / name))
    return make


def _one_line_refusal(d: Path, first: str, *needles: str) -> str:
    with pytest.raises(ArtifactError) as info:
        load_router(d)
    msg = str(info.value)
    assert msg.startswith(f"{d / first}: ") and "\n" not in msg, msg
    for needle in needles:
        assert needle in msg, msg
    return msg


# ------------------------------------------------------------------ r1: encoder parameters
def _evil_folder(root: Path) -> Path:
    """A folder sentence-transformers would read (its modules.json names a module)."""
    folder = root / "evil-model"
    folder.mkdir()
    (folder / "modules.json").write_text(json.dumps(
        [{"idx": 0, "name": "0", "path": "", "type": "this.Foo"}]))
    return folder


@pytest.mark.parametrize("spec", ["FOLDER", "precomputed:FOLDER/e.npy", "someone/evil-model",
                                  "minilm:../../evil", "hashing:x", "", "tfidf-extra"],
                         ids=["folder", "precomputed-file", "hub-id", "bad-variant",
                              "argument", "empty", "unknown-name"])
def test_stored_encoder_that_is_not_built_in_is_refused(copy, tmp_path, spec):
    d = copy("knn")
    spec = spec.replace("FOLDER", str(_evil_folder(tmp_path)))
    doc = json.loads((d / "state.json").read_text())
    doc["params"]["encoder"] = spec
    (d / "state.json").write_text(json.dumps(doc))
    refix(d)
    _one_line_refusal(d, "state.json", "state.json.params.encoder", "not a built-in encoder")


def _doc(router_cls_path: str, params: dict) -> dict:
    return {"class": router_cls_path, "params": params, "tuple_params": [], "state": {}}


def test_encoder_inside_a_wrappers_router_parameters_is_refused(tmp_path):
    """``--auto`` stores the parameters of the router it builds; a refit builds their encoder."""
    from recsys_router.tuning.inner import AutoTunedRouter
    doc = _doc(router_class_name(AutoTunedRouter),
               {"name": "knn", "params": {"k": 3, "encoder": str(_evil_folder(tmp_path))}})
    with pytest.raises(StateError, match=r"^state\.json\.params\.params\.encoder: .*not a built-in"):
        check_document(doc, "state.json")


@pytest.mark.parametrize("key", ["cache_dir", "ids_path"])
def test_encoder_options_naming_a_folder_or_file_are_refused(tmp_path, key):
    from recsys_router.models.mf_module import MFRouter
    doc = _doc(router_class_name(MFRouter), {"encoder": "hashing",
                                              "encoder_options": {"dim": 8, key: str(tmp_path)}})
    with pytest.raises(StateError, match=rf"^state\.json\.params\.encoder_options\.{key}: "):
        check_document(doc, "state.json")


@pytest.mark.parametrize("stored, rebuilt", [("st", "minilm:torch"), ("bf16-minilm", "minilm:bf16"),
                                             ("onnx-minilm", "minilm"), ("tfidf", "tfidf"),
                                             ("minilm:int8", "minilm:int8"),
                                             ("all-MiniLM-L6-v2", "all-MiniLM-L6-v2"),
                                             ("precomputed", "precomputed")])
def test_built_in_encoder_names_and_kinds_load(stored, rebuilt):
    """A kind stored for an encoder object becomes the built-in name that builds that kind
    (``st`` alone would be read as a Hub model id by a refit)."""
    from recsys_router.models.baselines.neighbours import KNNRouter
    _, params, _ = check_document(_doc(router_class_name(KNNRouter), {"encoder": stored}), "s")
    assert params["encoder"] == rebuilt


def test_export_stores_no_file_and_the_artifact_loads(tmp_path, data):
    """A router given ``precomputed:<file>`` and a cache folder exports the table, not the
    file or folder, and the artifact loads and predicts what the router does."""
    npy = tmp_path / "e.npy"
    vectors = np.random.default_rng(0).normal(size=(data.n_queries, 4)).astype(np.float32)
    np.save(npy, vectors)
    (tmp_path / "e.ids.txt").write_text("".join(f"{q}\n" for q in data.query_ids))
    router = make_router("mf", dim=4, max_epochs=1, encoder=f"precomputed:{npy}",
                         encoder_options={"cache_dir": str(tmp_path / "cache")}).fit(data)
    out = export_router(router, tmp_path / "art", train_data=data)
    params = json.loads((out / "state.json").read_text())["params"]
    assert params["encoder"] == "precomputed" and "cache_dir" not in params["encoder_options"]
    assert str(tmp_path) not in json.dumps(params)
    npy.unlink()
    back = load_router(out).router
    np.testing.assert_array_equal(back.predict_scores(data), router.predict_scores(data))


def test_exported_precomputed_identity_names_no_local_path(tmp_path, data):
    """The encoder identity in ``manifest.json`` and in the encoder state held the file's
    absolute path (a folder of this machine's); both now hold the table's size and a digest
    of its ids and vectors, and the reloaded artifact records the same identity (no warning
    of another encoder)."""
    import hashlib
    import warnings
    private = tmp_path / "home_alice_private_project"
    private.mkdir()
    npy = private / "e.npy"
    vectors = np.random.default_rng(1).normal(size=(data.n_queries, 4)).astype(np.float32)
    np.save(npy, vectors)
    (private / "e.ids.txt").write_text("".join(f"{q}\n" for q in data.query_ids))
    router = make_router("knn", encoder=f"precomputed:{npy}").fit(data)
    out = export_router(router, tmp_path / "art", train_data=data)
    for f in out.iterdir():
        assert b"home_alice_private_project" not in f.read_bytes(), f.name
    digest = hashlib.sha1("\n".join(map(str, data.query_ids)).encode())
    digest.update(vectors.astype("<f4").tobytes())
    want = f"precomputed:table@{data.n_queries}x4#{digest.hexdigest()[:12]}"
    assert json.loads((out / "manifest.json").read_text())["encoder"]["identity"] == want
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)   # "exported with encoder ..." would raise
        back = load_router(out)
    assert back.router.encoder_.identity == want


@pytest.mark.parametrize("name", ["cost-aware", "task-residual"])
def test_wrapper_given_a_precomputed_file_exports_no_local_path(tmp_path, data, name):
    """A wrapper has no ``encoder_`` of its own: the manifest's identity came from its
    ``encoder`` parameter as given, the file's absolute path included; it is now the
    built-in name, as the stored parameter is."""
    private = tmp_path / "home_alice_private_project"
    private.mkdir()
    npy = private / "e.npy"
    np.save(npy, np.random.default_rng(1).normal(size=(data.n_queries, 4)).astype(np.float32))
    (private / "e.ids.txt").write_text("".join(f"{q}\n" for q in data.query_ids))
    out = export_router(make_router(name, encoder=f"precomputed:{npy}").fit(data),
                        tmp_path / "art", train_data=data)
    for f in out.iterdir():
        assert b"home_alice_private_project" not in f.read_bytes(), f.name
    assert json.loads((out / "manifest.json").read_text())["encoder"]["identity"] == "precomputed"
    load_router(out)


# ------------------------------------------------------------------ r2: repeated npz member
def _npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, a)
    return buf.getvalue()


def _twice(first: np.ndarray, second: np.ndarray, others: dict | None = None,
           name: str = "w") -> bytes:
    """An archive holding ``others`` and array ``name`` twice (``first``, then ``second``)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z, pytest.warns(UserWarning, match="Duplicate name"):
        for k, v in (others or {}).items():
            z.writestr(f"{k}.npy", _npy(v))
        z.writestr(f"{name}.npy", _npy(first))
        z.writestr(f"{name}.npy", _npy(second))
    return buf.getvalue()


@pytest.mark.parametrize("in_memory", [True, False], ids=["bytes", "file"])
def test_npz_holding_one_array_twice_is_refused(tmp_path, in_memory):
    raw = _twice(np.array([1.0, 2.0]), np.array([666.0, 666.0]))
    path = tmp_path / "weights.npz"
    path.write_bytes(raw)
    with pytest.raises(LimitError, match=r"weights\.npz: repeated member 'w\.npy'"):
        NpzReader(path, data=raw if in_memory else None)


def test_artifact_with_a_repeated_weights_member_is_refused(copy):
    d = copy("knn")
    with np.load(d / "weights.npz", allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    name = next(iter(arrays))
    raw = _twice(arrays[name], arrays[name] + 1, {k: v for k, v in arrays.items() if k != name},
                 name)
    (d / "weights.npz").write_bytes(raw)
    refix(d)
    _one_line_refusal(d, "weights.npz", f"repeated member '{name}.npy'")


# ------------------------------------------------------------------ r3: byte order
@pytest.mark.parametrize("family, array", [("knn", "x_train_"), ("mlpr", "model_/net.0.weight")])
def test_array_declared_in_the_other_byte_order_is_refused(copy, family, array):
    """numpy would read it (kNN), torch refuses it naming nothing (networks): both families
    are refused alike, naming the manifest field."""
    d = copy(family)
    with np.load(d / "weights.npz", allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    arrays[array] = arrays[array].astype(arrays[array].dtype.newbyteorder(OTHER))
    with open(d / "weights.npz", "wb") as fh:
        np.savez(fh, **arrays)
    man = _man(d)
    man["arrays"][array]["dtype"] = arrays[array].dtype.str
    _put_man(d, man)
    refix(d)
    _one_line_refusal(d, "manifest.json", f"arrays.{array}.dtype", "byte order")


def test_npy_header_in_the_other_byte_order_is_refused(tmp_path):
    """The .npy header is checked on its own too (the manifest may say ``float64``)."""
    buf = io.BytesIO()
    np.savez(buf, a=np.arange(3.0).astype(np.dtype("f8").newbyteorder(OTHER)))
    with NpzReader(tmp_path / "weights.npz", data=buf.getvalue()) as z, \
            pytest.raises(LimitError, match=r"weights\.npz:a: dtype '[<>]f8' .*byte order"):
        z.header("a")
