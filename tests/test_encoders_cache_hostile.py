"""Encoder caches never serve vectors that are not what the encoder computes: a malformed or
non-finite shard on disk is skipped, a local model folder's cache follows its files, and a
sentence-transformer's truncation length never leaks to another encoder of the process."""

from __future__ import annotations

import numpy as np
import pytest

from recsys_router.encoders import neural
from recsys_router.encoders.cache import DiskCache
from recsys_router.encoders.neural import SentenceTransformerEncoder, folder_stamp


def _shard(cache: DiskCache, name: str, keys, vecs) -> None:
    cache.dir.mkdir(parents=True, exist_ok=True)
    with open(cache.dir / f"{name}.npz", "wb") as f:
        np.savez(f, keys=keys, vecs=vecs)


@pytest.mark.parametrize("keys, vecs", [
    (np.array(["a", "b", "c"]), np.ones((2, 4), np.float32)),          # more keys than rows
    (np.array([["a", "b"], ["c", "d"]]), np.ones((2, 4), np.float32)),  # 2-D keys
    (np.array(["a", "b"]), np.array([[np.nan, 0, 0, 0], [1, 1, 1, 1]], np.float32)),  # NaN
    (np.array(["a", "b"]), np.full((2, 4), np.inf, np.float32)),         # inf
    (np.array([1, 2]), np.ones((2, 4), np.float32)),                     # keys not strings
    (np.array(["a", "b"]), np.ones((2, 4), np.int64)),                   # vectors not floats
    (np.array(["a", "b"]), np.ones((2, 3), np.float32)),                 # another width
])
def test_malformed_shards_are_never_served_and_do_not_break_the_cache(tmp_path, keys, vecs):
    c = DiskCache("hostile", 4, root=tmp_path)
    _shard(c, "0000-bad", keys, vecs)
    assert c.get(["a", "b", "c", "zz"]) == {}
    c.put(["a", "zz"], np.array([[1, 2, 3, 4], [5, 6, 7, 8]], np.float32))   # a miss is stored
    fresh = DiskCache("hostile", 4, root=tmp_path)
    got = fresh.get(["a", "b", "zz"])
    assert sorted(got) == ["a", "zz"]
    np.testing.assert_array_equal(got["a"], [1, 2, 3, 4])
    fresh.compact()                                 # the bad shard goes with the merge
    assert [p.name for p in fresh._shards()] != [] and not (fresh.dir / "0000-bad.npz").exists()
    np.testing.assert_array_equal(DiskCache("hostile", 4, root=tmp_path).get(["zz"])["zz"], [5, 6, 7, 8])


def test_a_good_shard_beside_a_bad_one_is_still_read(tmp_path):
    c = DiskCache("mixed", 2, root=tmp_path)
    _shard(c, "0001-bad", np.array(["x"]), np.array([[np.nan, 1]], np.float32))
    _shard(c, "0002-good", np.array(["x", "y"]), np.array([[1, 2], [3, 4]], np.float32))
    got = c.get(["x", "y"])
    np.testing.assert_array_equal(got["x"], [1, 2])
    np.testing.assert_array_equal(got["y"], [3, 4])


def test_local_model_folder_identity_follows_its_files(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"v1")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "config.json").write_text("{}")
    first = SentenceTransformerEncoder(str(tmp_path), device="cpu").identity
    assert first == SentenceTransformerEncoder(str(tmp_path), device="cpu").identity
    assert first.startswith(f"st:{tmp_path.resolve()}|norm=1|maxlen=default|files=")
    (tmp_path / "model.safetensors").write_bytes(b"v2 re-saved")
    second = SentenceTransformerEncoder(str(tmp_path), device="cpu").identity
    (tmp_path / "sub" / "extra.bin").write_bytes(b"")
    third = SentenceTransformerEncoder(str(tmp_path), device="cpu").identity
    assert len({first, second, third}) == 3
    # hub names and the packaged MiniLM keep their plain identity
    assert SentenceTransformerEncoder("minilm").identity == \
        "st:sentence-transformers/all-MiniLM-L6-v2|norm=1|maxlen=default"


def test_folder_stamp_refuses_a_folder_of_too_many_files(tmp_path, monkeypatch):
    monkeypatch.setattr(neural, "MAX_STAMP_FILES", 2)
    for i in range(3):
        (tmp_path / f"f{i}").write_bytes(b"")
    with pytest.raises(ValueError, match="over 2 files"):
        folder_stamp(tmp_path)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "16"])
def test_max_seq_length_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match="max_seq_length"):
        SentenceTransformerEncoder("minilm", max_seq_length=bad)


def test_truncation_length_is_per_encoder_not_per_process(monkeypatch):
    monkeypatch.setattr(neural, "_MODELS", {})
    text = ["which of these models should answer a long question " * 12]
    short = SentenceTransformerEncoder("minilm", max_seq_length=16, cache=False, device="cpu")
    v_short = short.encode(text)[0]
    default = SentenceTransformerEncoder("minilm", cache=False, device="cpu")
    assert default.model is not short.model
    assert short.model.max_seq_length == 16 and default.model.max_seq_length == 256
    v_default = default.encode(text)[0]
    # the default encoder reads all of the ~110 tokens, so it differs from the 16-token vector
    assert float(v_short @ v_default) < 0.95
    again = SentenceTransformerEncoder("minilm", max_seq_length=16, cache=False, device="cpu")
    assert again.model is short.model               # the same length shares its model
    np.testing.assert_allclose(again.encode(text)[0], v_short, atol=1e-6)
