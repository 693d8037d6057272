"""A damaged file in the ONNX MiniLM cache (cut or emptied by a power cut after its un-synced
rename, or foreign) is exported again once instead of failing every encode for good: a cut
``-raw`` graph raised a bare protobuf DecodeError naming no file, an empty one an onnxruntime
InvalidArgument, a cut fused ``-fp32`` file asked to be deleted by hand, and a cut one under a
missing int8 file failed inside the quantizer. A file that still cannot be read after one new
export is one error naming it."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from recsys_router.atomic import atomic_write
from recsys_router.encoders import OnnxMiniLMEncoder
from recsys_router.encoders import onnx_minilm

TEXTS = ["How do I bake bread at home?", "ok"]


@pytest.fixture(scope="module")
def good():
    """The good raw and fused files (the shared cache's), and the fp32 vectors of TEXTS."""
    fp32 = onnx_minilm.export_minilm_onnx("fp32")
    raw = fp32.with_name(fp32.name.replace("-fp32.onnx", "-raw.onnx"))
    vectors = OnnxMiniLMEncoder("fp32", cache=False, threads=1).encode(TEXTS)
    return raw, fp32, vectors


@pytest.fixture
def exports(monkeypatch, good):
    """Count the raw exports; each writes a copy of the good raw graph (as torch would)."""
    calls = []

    def fake_export(model_dir, dest):
        calls.append(dest.name)
        with atomic_write(dest) as tmp:
            shutil.copyfile(good[0], tmp)
    monkeypatch.setattr(onnx_minilm, "_export_raw", fake_export)
    return calls


def _folder(tmp_path, good):
    (tmp_path / "onnx").mkdir()
    return tmp_path / "onnx" / good[0].name, tmp_path / "onnx" / good[1].name


@pytest.mark.parametrize("damage", ["cut", "empty"])
def test_a_cut_or_empty_raw_graph_is_exported_again_once(tmp_path, good, exports, damage):
    raw, fp32 = _folder(tmp_path, good)
    raw.write_bytes(good[0].read_bytes()[:len(good[0].read_bytes()) // 2] if damage == "cut"
                    else b"")
    got = OnnxMiniLMEncoder("fp32", cache=False, cache_dir=tmp_path, threads=1).encode(TEXTS)
    np.testing.assert_allclose(got, good[2], atol=1e-5)
    assert exports == [raw.name]
    assert raw.read_bytes() == good[0].read_bytes() and fp32.is_file()


def test_a_damaged_fused_file_is_exported_again_once(tmp_path, good, exports):
    raw, fp32 = _folder(tmp_path, good)
    shutil.copyfile(good[0], raw)
    fp32.write_bytes(good[1].read_bytes()[:1000])
    got = OnnxMiniLMEncoder("fp32", cache=False, cache_dir=tmp_path, threads=1).encode(TEXTS)
    np.testing.assert_allclose(got, good[2], atol=1e-5)
    assert exports == [raw.name]           # the raw graph goes with it: made afresh
    assert fp32.stat().st_size > 1000


def test_a_damaged_fused_file_is_made_again_before_quantizing(tmp_path, good, exports):
    raw, fp32 = _folder(tmp_path, good)
    fp32.write_bytes(good[1].read_bytes()[:1000])   # no raw graph, no int8 file yet
    int8 = onnx_minilm.export_minilm_onnx("int8", cache_dir=tmp_path)
    assert exports == [raw.name] and int8.is_file() and fp32.stat().st_size > 1000
    v = OnnxMiniLMEncoder("int8", cache=False, cache_dir=tmp_path, threads=1,
                          batch_size=1).encode(TEXTS[:1])
    assert float(v[0] @ good[2][0]) > 0.95        # the int8 model of the same weights


@pytest.mark.parametrize("cached", [False, True])
def test_an_export_that_stays_unreadable_is_one_error_naming_it(tmp_path, good, monkeypatch,
                                                                cached):
    """No cached raw graph: the one just exported is not exported again; a cached one is
    exported again once, then reported."""
    raw, _ = _folder(tmp_path, good)
    calls = []

    def broken_export(model_dir, dest):
        calls.append(dest.name)
        dest.write_bytes(b"\x08\x07garbage")
    monkeypatch.setattr(onnx_minilm, "_export_raw", broken_export)
    if cached:
        raw.write_bytes(b"")
    with pytest.raises(ValueError) as info:
        onnx_minilm.export_minilm_onnx("fp32", cache_dir=tmp_path)
    msg = str(info.value)
    assert msg.startswith(f"{raw}: not a loadable ONNX model (") and "\n" not in msg, msg
    assert ("even after exporting it again" in msg) == cached
    assert msg.endswith("; delete it and it is exported again")
    assert calls == [raw.name]


def test_a_damaged_file_that_cannot_be_removed_is_reported_as_it_is(tmp_path, monkeypatch):
    """A read-only cache folder: the file is not exported again (nothing could be written
    there), and the error names it and the cause."""
    import pathlib
    bad = tmp_path / "m-int8.onnx"
    bad.write_bytes(b"\x08\x07not an onnx model")
    asked = []
    monkeypatch.setattr(onnx_minilm, "export_minilm_onnx",
                        lambda variant, cache_dir=None: asked.append(variant) or bad)

    def refuse(self, missing_ok=False):
        raise PermissionError(13, "Permission denied", str(self))
    monkeypatch.setattr(pathlib.Path, "unlink", refuse)
    with pytest.raises(ValueError) as info:
        OnnxMiniLMEncoder("int8", cache=False, batch_size=1).encode(["hello"])
    msg = str(info.value)
    assert msg.startswith(f"{bad}: not a loadable ONNX model (") and "even after" not in msg
    assert asked == ["int8"] and bad.read_bytes() == b"\x08\x07not an onnx model"
