"""Manifest probes: a ``manifest.json`` that is a symbolic link (to a file inside or
outside the artifact) and declared dtypes that numpy would parse into something other than
a plain numeric dtype are refused with an ArtifactError naming the file (and field)."""

from __future__ import annotations

import json
import shutil

import pytest

from recsys_router.datasets.synthetic import make_synthetic
from recsys_router.export import ArtifactError, export_router, load_router
from recsys_router.export.safe_io import LimitError, read_json
from recsys_router.registry import make_router


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    data = make_synthetic(40, 3, 2, seed=0)
    out = tmp_path_factory.mktemp("good") / "knn"
    return export_router(make_router("knn", k=3).fit(data), out, train_data=data)


@pytest.fixture
def art(good, tmp_path):
    d = tmp_path / "art"
    shutil.copytree(good, d)
    return d


@pytest.mark.parametrize("where", ["outside", "inside"])
def test_manifest_symlink_is_refused(art, tmp_path, where):
    target = tmp_path / "outside.json" if where == "outside" else art.parent / "twin.json"
    shutil.move(art / "manifest.json", target)
    (art / "manifest.json").symlink_to(target)
    with pytest.raises(ArtifactError, match=r"art/manifest.json: not a regular file \(a symbolic link\)"):
        load_router(art)


def test_dangling_manifest_symlink_is_refused(art, tmp_path):
    (art / "manifest.json").unlink()
    (art / "manifest.json").symlink_to(tmp_path / "nowhere.json")
    with pytest.raises(ArtifactError, match="manifest.json: not a regular file"):
        load_router(art)


def test_read_json_refuses_links_and_folders(tmp_path):
    real = tmp_path / "real.json"
    real.write_text('{"a": 1}')
    (tmp_path / "link.json").symlink_to(real)
    with pytest.raises(LimitError, match="link.json: not a regular file"):
        read_json(tmp_path / "link.json", max_bytes=100, max_depth=4)
    with pytest.raises(LimitError, match="not a regular file"):
        read_json(tmp_path, max_bytes=100, max_depth=4)
    assert read_json(real, max_bytes=100, max_depth=4) == {"a": 1}


@pytest.mark.parametrize("dtype", ["(99999999999,)f8", "(2,)f8", "f8,f8", "O", "U8", "V8",
                                   "<<f8", "datetime64", "c16", "float64 ", ""])
def test_declared_dtype_outside_the_allowed_set_is_refused(art, dtype):
    man = json.loads((art / "manifest.json").read_text())
    man["arrays"]["llm_means_"]["dtype"] = dtype
    (art / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(ArtifactError) as info:
        load_router(art)
    assert str(info.value).startswith(f"{art / 'manifest.json'}: arrays.llm_means_.dtype: ")


@pytest.mark.parametrize("dtype", ["float64", "f8", "<f8"])
def test_numeric_dtype_spellings_are_accepted(art, dtype):
    man = json.loads((art / "manifest.json").read_text())
    man["arrays"]["llm_means_"]["dtype"] = dtype
    (art / "manifest.json").write_text(json.dumps(man))
    assert load_router(art).llm_names == ["sim-llm-0", "sim-llm-1", "sim-llm-2"]


@pytest.mark.parametrize("name", ["manifest.json", "state.json"])
def test_a_fifo_in_place_of_a_json_file_is_refused_without_waiting(art, name):
    # opening a FIFO for reading waits for a writer; the reader must refuse it, not block
    import os
    import threading
    (art / name).unlink()
    os.mkfifo(art / name)
    out = {}

    def load():
        try:
            load_router(art)
        except ArtifactError as err:
            out["err"] = str(err)

    t = threading.Thread(target=load, daemon=True)
    t.start()
    t.join(60)
    assert not t.is_alive(), "load_router blocked on a FIFO"
    assert "not a regular file" in out["err"] and name in out["err"]
