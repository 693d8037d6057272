"""ONNX Runtime MiniLM (fp32 / int8) against the sentence-transformers vectors, length-sorted
batching, cache identities, and hostile settings / cache files."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from recsys_router.encoders import (Encoder, OnnxMiniLMEncoder, SentenceTransformerEncoder,
                                    get_encoder)
from recsys_router.encoders import cache as cache_mod
from recsys_router.encoders import onnx_minilm

TEXTS = ["How do I bake bread at home?",
         "Prove that the square root of two is irrational.",
         "Which planet is known as the red planet? A) Venus B) Mars C) Jupiter D) Saturn",
         "def add(a, b):\n    return a + b\n# write a unit test for this function",
         # over 256 word pieces: truncation must match sentence-transformers'
         " ".join(f"option {i}: the {i}th answer about thermodynamics and entropy" for i in range(60)),
         "ok"]


@pytest.fixture(scope="module")
def onnx_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("onnx-cache")


@pytest.fixture(scope="module")
def torch_vectors():
    import torch
    torch.set_num_threads(1)
    return SentenceTransformerEncoder("minilm", cache=False, device="cpu").encode(TEXTS)


def _cos(a, b):
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_fp32_matches_sentence_transformers(onnx_dir, torch_vectors):
    v = OnnxMiniLMEncoder("fp32", cache=False, cache_dir=onnx_dir, threads=1).encode(TEXTS)
    assert v.shape == (len(TEXTS), 384) and v.dtype == np.float32
    np.testing.assert_allclose(v, torch_vectors, atol=2e-4)


def test_int8_cosine_to_sentence_transformers(onnx_dir, torch_vectors):
    v = OnnxMiniLMEncoder("int8", cache=False, cache_dir=onnx_dir, threads=1).encode(TEXTS)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    cos = _cos(v, torch_vectors)
    # the quantization error shows most on very short texts ("ok": ~0.97, bench_encode.py)
    assert cos.mean() >= 0.99 and cos.min() >= 0.96, cos
    # quantized, so not the same numbers: the int8 file is a different model
    assert np.abs(v - torch_vectors).max() > 1e-4


def test_int8_per_text_vectors_do_not_depend_on_batch_mates(onnx_dir, torch_vectors):
    enc = get_encoder("minilm:int8", cache=False, cache_dir=onnx_dir, threads=1)
    assert enc.per_text and enc.batch_size == 1 and "|per-text|" in enc.identity
    together = enc.encode(TEXTS, batch_size=4)  # a larger chunk still runs text by text
    alone = np.vstack([enc.encode([t]) for t in TEXTS])
    np.testing.assert_array_equal(together, alone)
    cos = _cos(together, torch_vectors)
    assert cos.mean() >= 0.99 and cos.min() >= 0.96, cos
    # batched int8 shares one activation scale per call: a text's vector moves with its mates
    batched = get_encoder("minilm:int8-batched", cache=False, cache_dir=onnx_dir, threads=1)
    assert not batched.per_text and batched.batch_size == 32
    b_all = batched.encode(TEXTS)
    b_alone = np.vstack([batched.encode([t]) for t in TEXTS])
    np.testing.assert_array_equal(b_alone, alone)  # one text per call: the same computation
    assert np.abs(b_all - b_alone).max() > 1e-5


def test_length_sorted_batches_keep_input_order(onnx_dir):
    enc = OnnxMiniLMEncoder("fp32", cache=False, cache_dir=onnx_dir, threads=1, batch_size=2)
    together = enc.encode(TEXTS)
    alone = np.vstack([enc.encode([t]) for t in TEXTS])
    np.testing.assert_allclose(together, alone, atol=1e-5)


class _Recorder(Encoder):
    """Row i = (len(text), first char code): order-revealing, batches recorded."""
    dim = 2
    identity = "recorder"
    sort_by_length = True

    def __init__(self, **kw):
        super().__init__(**kw)
        self.batches = []

    def _encode_batch(self, texts):
        self.batches.append(list(texts))
        return np.array([[len(t), ord(t[0])] for t in texts], dtype=np.float32)


def test_sorting_by_length_in_the_base_encoder(tmp_path, monkeypatch):
    monkeypatch.setenv("RECSYS_ROUTER_CACHE", str(tmp_path))
    cache_mod.MEMORY_CACHE.clear()
    texts = ["bb", "a", "dddd", "ccc", "eeeee", "f"]
    enc = _Recorder(cache=True, batch_size=2)
    out = enc.encode(texts)
    np.testing.assert_array_equal(out, [[len(t), ord(t[0])] for t in texts])
    assert enc.batches == [["eeeee", "dddd"], ["ccc", "bb"], ["a", "f"]]
    # the disk cache stored each vector under its own text's key
    cache_mod.MEMORY_CACHE.clear()
    again = _Recorder(cache=True, batch_size=2)
    np.testing.assert_array_equal(again.encode(texts[::-1]), out[::-1])
    assert again.batches == []
    cache_mod.MEMORY_CACHE.clear()


class _BatchMates(Encoder):
    """Row = (len(text), first char code, mean length of its model call): batch-dependent."""
    dim = 3
    identity = "batch-mates"
    sort_by_length = True
    cache_by_default = True
    batch_dependent = True

    def __init__(self, **kw):
        super().__init__(**kw)
        self.batches = []

    def _encode_batch(self, texts):
        self.batches.append(list(texts))
        mean = float(np.mean([len(t) for t in texts]))
        return np.array([[len(t), ord(t[0]), mean] for t in texts], dtype=np.float32)


def test_batch_dependent_encoder_vectors_depend_on_the_call_alone(tmp_path, monkeypatch):
    """A batch-dependent encoder never caches, and runs a call's distinct texts longest first,
    ties by text: the result depends on the set of distinct texts of the call, nothing else."""
    monkeypatch.setenv("RECSYS_ROUTER_CACHE", str(tmp_path))
    cache_mod.MEMORY_CACHE.clear()
    texts = ["bb", "a", "dddd", "ccc", "eeeee", "f", "bb", "ccc"]
    enc = _BatchMates(batch_size=2)
    assert not enc.use_cache and not _BatchMates(cache=True).use_cache
    out = enc.encode(texts)
    # batches by hand: eeeee dddd | ccc bb | a f  (mean lengths 4.5, 2.5, 1)
    assert enc.batches == [["eeeee", "dddd"], ["ccc", "bb"], ["a", "f"]]
    mean = {"eeeee": 4.5, "dddd": 4.5, "ccc": 2.5, "bb": 2.5, "a": 1.0, "f": 1.0}
    np.testing.assert_array_equal(out, [[len(t), ord(t[0]), mean[t]] for t in texts])
    # earlier calls (which a cache would have kept) change nothing; nor do order and repeats
    enc.encode(["bb", "a", "zzzzzzz"])
    np.testing.assert_array_equal(enc.encode(texts), out)
    np.testing.assert_array_equal(enc.encode(texts[::-1] + ["a"]), np.vstack([out[::-1], out[1]]))
    assert not (tmp_path / "embeddings").exists()
    assert cache_mod.MEMORY_CACHE.get(("batch-mates", cache_mod.text_key("bb"))) is None


def test_int8_batched_vectors_never_depend_on_history_or_caches(onnx_dir):
    """'minilm:int8-batched' shares activation scales within a batch of 32; a call's vectors
    depend on its distinct texts alone: never cached, never on what was encoded before."""
    rng = np.random.default_rng(0)
    words = "route model cheap answer question math code proof the a of".split()
    texts = [" ".join(rng.choice(words, size=int(rng.integers(2, 40)))) for _ in range(50)]
    texts += [f"question number {i:04d} about routing" for i in range(40)]  # equal lengths
    with pytest.raises(ValueError, match="never cached"):
        get_encoder("minilm:int8-batched", cache=True, cache_dir=onnx_dir)
    enc = get_encoder("minilm:int8-batched", cache_dir=onnx_dir, threads=1)
    assert enc.batch_dependent and not enc.use_cache
    assert not get_encoder("minilm:int8", cache_dir=onnx_dir).batch_dependent
    assert not get_encoder("minilm:fp32", cache_dir=onnx_dir).batch_dependent
    first = enc.encode(texts)
    enc.encode(texts[::3] + ["something else entirely"])  # history
    np.testing.assert_array_equal(enc.encode(texts), first)
    fresh = get_encoder("minilm:int8-batched", cache_dir=onnx_dir, threads=1)
    np.testing.assert_array_equal(fresh.encode(texts), first)
    # order and repeats: rows follow their texts (a repeat lands in another batch of 32)
    perm = rng.permutation(len(texts))
    again = enc.encode([texts[i] for i in perm] + [texts[50]])
    np.testing.assert_array_equal(again, np.vstack([first[perm], first[50]]))
    assert not cache_mod.DiskCache(enc.identity, 384, root=onnx_dir).dir.exists()
    assert cache_mod.MEMORY_CACHE.get((enc.identity, cache_mod.text_key(texts[0]))) is None


def test_variants_have_distinct_cache_identities():
    ids = {get_encoder("minilm:fp32").identity,
           get_encoder("minilm:int8").identity, get_encoder("minilm:torch").identity,
           get_encoder("minilm:int8", max_seq_length=128).identity,
           get_encoder("minilm:int8-batched").identity}
    assert len(ids) == 5
    assert get_encoder("minilm").identity in (get_encoder("minilm:bf16").identity,
                                              get_encoder("minilm:int8").identity)
    assert isinstance(get_encoder("minilm", device="cuda"), SentenceTransformerEncoder)
    # threads do not change the vectors, so they share the cache
    assert (get_encoder("minilm:int8", threads=1).identity
            == get_encoder("minilm:int8", threads=2).identity)


@pytest.mark.parametrize("name,options,match", [
    ("minilm:evil", {}, "unknown MiniLM variant"),
    ("minilm:__import__('os')", {}, "unknown MiniLM variant"),
    ("minilm", {"max_seq_length": 100000}, "max_seq_length must be in"),
    ("minilm", {"max_seq_length": 0}, "max_seq_length must be in"),
    ("minilm", {"threads": 0}, "threads must be in"),
    ("minilm:int8", {"max_seq_length": 0}, "max_seq_length must be in"),
    ("minilm:int8", {"threads": 0}, "threads must be in"),
    ("minilm:int8", {"device": "cuda"}, "use 'minilm:torch'"),
])
def test_hostile_settings_are_clean_errors(name, options, match):
    with pytest.raises(ValueError, match=match):
        get_encoder(name, **options)


def test_corrupt_cached_model_is_a_clean_error(tmp_path, monkeypatch):
    bad = tmp_path / "onnx" / "fake-int8.onnx"
    bad.parent.mkdir()
    bad.write_bytes(b"\x08\x07not an onnx model" * 10)
    monkeypatch.setattr(onnx_minilm, "_SESSIONS", {})
    monkeypatch.setattr(onnx_minilm, "export_minilm_onnx", lambda variant, cache_dir=None: bad)
    with pytest.raises(ValueError, match="fake-int8.onnx: not a loadable ONNX model"):
        OnnxMiniLMEncoder("int8", cache=False).encode(["hello"])


def test_failed_export_leaves_nothing_half_written(tmp_path, monkeypatch):
    import torch

    def crash(model, args, path, **kwargs):
        with open(path, "wb") as f:
            f.write(b"partial graph")
        raise RuntimeError("exporter crashed")
    monkeypatch.setattr(torch.onnx, "export", crash)
    with pytest.raises(RuntimeError, match="exporter crashed"):
        onnx_minilm.export_minilm_onnx("int8", cache_dir=tmp_path)
    assert [p.name for p in (tmp_path / "onnx").iterdir()] == []


def test_shared_disk_index_survives_shards_removed_by_someone_else(tmp_path):
    import shutil
    from recsys_router.encoders import HashingEncoder
    from recsys_router.encoders.base import _disk_cache
    cache_mod.MEMORY_CACHE.clear()
    texts = ["alpha beta", "gamma delta", "epsilon"]
    expected = HashingEncoder(dim=16, cache=False).encode(texts)
    first = HashingEncoder(dim=16, cache=True, cache_dir=tmp_path)
    np.testing.assert_array_equal(first.encode(texts), expected)
    disk = _disk_cache(first.identity, 16, tmp_path)
    assert disk is _disk_cache(first.identity, 16, tmp_path)  # one index per process
    assert set(disk.get([cache_mod.text_key(t) for t in texts])) == {
        cache_mod.text_key(t) for t in texts}
    shutil.rmtree(tmp_path / "embeddings")  # e.g. a cache clear by another process
    cache_mod.MEMORY_CACHE.clear()
    second = HashingEncoder(dim=16, cache=True, cache_dir=tmp_path)
    np.testing.assert_array_equal(second.encode(texts), expected)  # recomputed, not stale
    cache_mod.MEMORY_CACHE.clear()


def test_unwritable_cache_exports_to_a_temporary_folder(tmp_path, monkeypatch):
    # README: a cache folder that cannot be made only costs the caching
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("RECSYS_ROUTER_CACHE", str(blocker / "cache"))
    monkeypatch.setattr(onnx_minilm, "_FALLBACK_WARNED", set(), raising=False)
    seen = []

    class Stop(Exception):
        pass

    def fake_export(model_dir, dest):
        seen.append(dest)
        raise Stop
    monkeypatch.setattr(onnx_minilm, "_export_raw", fake_export)
    with pytest.warns(RuntimeWarning, match=r"ONNX model cache .*file/cache/onnx.* cannot be "
                                            r"used.*\$RECSYS_ROUTER_CACHE"):
        with pytest.raises(Stop):
            onnx_minilm.export_minilm_onnx("int8")
    (dest,) = seen
    assert dest.parent.is_dir() and blocker not in dest.parents
    assert dest.parent.name.startswith("recsys-router-onnx-")


@pytest.mark.parametrize("machine,flags,expected", [
    ("x86_64", {"avx2", "fma"}, "u8"),                       # AVX2 only: u8 x s8 saturates
    ("x86_64", {"avx2", "avx512f", "avx512bw"}, "u8"),       # AVX-512 without VNNI: same
    ("x86_64", {"avx2", "avx512f", "avx512_vnni"}, "s8"),    # VNNI: exact int32 dot products
    ("AMD64", {"avx2", "avx_vnni"}, "s8"),
    ("x86_64", {"amx_int8", "amx_tile"}, "s8"),
    ("x86_64", None, "u8"),                                  # flags unknown: the safe kind
    ("aarch64", None, "s8"),
])
def test_int8_weight_type_follows_the_cpu(monkeypatch, machine, flags, expected):
    monkeypatch.setattr(onnx_minilm.platform, "machine", lambda: machine)
    monkeypatch.setattr(onnx_minilm, "_cpu_flags", lambda: flags)
    onnx_minilm.int8_weight_type.cache_clear()
    try:
        assert onnx_minilm.int8_weight_type() == expected
    finally:
        onnx_minilm.int8_weight_type.cache_clear()


def test_int8_weight_types_are_separate_files_and_identities(onnx_dir, monkeypatch):
    import onnx
    from onnx import numpy_helper
    seen = {}
    for kind, token in (("s8", "int8"), ("u8", "int8u8")):
        monkeypatch.setattr(onnx_minilm, "int8_weight_type", lambda kind=kind: kind)
        enc = OnnxMiniLMEncoder("int8", cache=False, cache_dir=onnx_dir, batch_size=1)
        assert f"|{token}|" in enc.identity
        path = onnx_minilm.export_minilm_onnx("int8", cache_dir=onnx_dir)
        assert path.name.endswith(f"-{token}.onnx")
        # the quantized MatMul weights are stored in the chosen 8-bit type
        model = onnx.load(str(path))
        quant = [numpy_helper.to_array(t) for t in model.graph.initializer
                 if t.name.endswith("_quantized")]
        assert quant and {q.dtype for q in quant} == {np.dtype(np.int8 if kind == "s8"
                                                               else np.uint8)}
        seen[kind] = (enc.identity, path)
    assert seen["s8"][0] != seen["u8"][0] and seen["s8"][1] != seen["u8"][1]


@pytest.mark.parametrize("forced", ["s8", "u8"])
def test_int8_weight_type_environment_override(monkeypatch, forced):
    # a VNNI CPU forced to uint8 and an AVX2 one forced to int8 (e.g. to reproduce a table)
    flags = {"avx512_vnni"} if forced == "u8" else {"avx2"}
    monkeypatch.setattr(onnx_minilm.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(onnx_minilm, "_cpu_flags", lambda: flags)
    monkeypatch.setenv(onnx_minilm.INT8_WEIGHTS_ENV, forced)
    onnx_minilm.int8_weight_type.cache_clear()
    try:
        assert onnx_minilm.int8_weight_type() == forced
        monkeypatch.setenv(onnx_minilm.INT8_WEIGHTS_ENV, "int4; rm -rf /")
        onnx_minilm.int8_weight_type.cache_clear()
        with pytest.raises(ValueError, match="RECSYS_ROUTER_INT8_WEIGHTS must be 's8' or 'u8'"):
            onnx_minilm.int8_weight_type()
    finally:
        onnx_minilm.int8_weight_type.cache_clear()


def test_artifact_loaded_with_another_int8_weight_type_warns(tmp_path, monkeypatch):
    from recsys_router.datasets import load_dataset
    from recsys_router.export import export_router, load_router
    from recsys_router.registry import make_router
    data = load_dataset("synthetic", n_queries=40, n_llms=3, seed=0)
    monkeypatch.setattr(onnx_minilm, "int8_weight_type", lambda: "s8")
    enc = OnnxMiniLMEncoder("int8", cache=False, batch_size=1)
    router = make_router("knn", encoder=enc).fit(data)
    export_router(router, tmp_path / "a", train_data=data)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # same machine: no warning
        load_router(tmp_path / "a")
    monkeypatch.setattr(onnx_minilm, "int8_weight_type", lambda: "u8")
    with pytest.warns(RuntimeWarning, match=r"exported with encoder 'onnx:all-MiniLM-L6-v2\|int8\|"
                                            r".*rebuilt here it is 'onnx:all-MiniLM-L6-v2\|int8u8\|"):
        back = load_router(tmp_path / "a")
    assert "|int8u8|" in back.router.encoder_.identity
