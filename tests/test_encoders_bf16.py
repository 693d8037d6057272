"""bfloat16 PyTorch MiniLM (`minilm:bf16`, the `minilm` default on CPUs with AMX-BF16 or
AVX512-BF16) against the sentence-transformers vectors; batch and padding independence; the
plain (emulated) path; the default's fallback; artifact state; hostile settings and weights."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import recsys_router.encoders as enc_mod
from recsys_router.encoders import (Bf16MiniLMEncoder, OnnxMiniLMEncoder,
                                    SentenceTransformerEncoder, bf16_support, get_encoder)
from recsys_router.encoders import bf16_minilm, onnx_minilm
from recsys_router.encoders.neural import packaged_minilm_stamp
from recsys_router.encoders.state import encoder_from_state, encoder_state
from recsys_router.state import StateError
from test_encoders_onnx import _cos

FILES = f"|files={packaged_minilm_stamp()}"  # the packaged model's stamp ends each identity
TEXTS = ["How do I bake bread at home?",
         "Prove that the square root of two is irrational.",
         "Which planet is known as the red planet? A) Venus B) Mars C) Jupiter D) Saturn",
         "def add(a, b):\n    return a + b\n# write a unit test for this function",
         # over 256 word pieces: truncation must match sentence-transformers'
         " ".join(f"option {i}: the {i}th answer about thermodynamics and entropy" for i in range(60)),
         # 65-96 word pieces: the second bucket step
         " ".join(f"step {i} of the proof" for i in range(14)),
         "ok", ""]


@pytest.fixture(scope="module")
def torch_vectors():
    """Today's vectors: sentence-transformers in float32 PyTorch (the same threads as the rest)."""
    reference = SentenceTransformerEncoder("minilm", cache=False, device="cpu")
    return reference.encode(TEXTS)


def test_bucket_lengths_by_hand():
    assert [bucket_length(n) for n in (1, 2, 16, 17, 48, 49, 64, 65, 96, 97, 255, 256)] == [
        16, 16, 16, 32, 48, 64, 64, 96, 96, 128, 256, 256]
    assert bf16_minilm.bucket_length(100, 100) == 100  # never past the truncation length
    assert bf16_minilm.bucket_length(9, 8) == 8


def bucket_length(n):
    return bf16_minilm.bucket_length(n, 256)


def test_vectors_match_sentence_transformers(torch_vectors):
    v = Bf16MiniLMEncoder(cache=False).encode(TEXTS)
    assert v.shape == (len(TEXTS), 384) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    cos = _cos(v, torch_vectors)
    assert cos.min() >= 0.999, cos  # bfloat16 rounding only (bench_encode: ~0.9999)
    assert np.abs(v - torch_vectors).max() > 1e-5  # really computed in bfloat16


def test_a_texts_vector_does_not_depend_on_batch_mates_or_padding():
    e = Bf16MiniLMEncoder(cache=False)
    together = e.encode(TEXTS)
    alone = np.vstack([e.encode([t]) for t in TEXTS])
    reversed_ = e.encode(TEXTS[::-1])[::-1]
    small = Bf16MiniLMEncoder(cache=False, batch_size=3)
    small.tokens_per_call = 16  # one text per model call
    one_per_call = small.encode(TEXTS)
    for other in (alone, reversed_, one_per_call):
        assert _cos(together, other).min() >= 0.9999
        np.testing.assert_allclose(together, other, atol=5e-3)
    # padded to a longer bucket (the attention mask keeps the padding out)
    model = bf16_minilm._model(packed=bf16_support()[0])
    import torch
    ids = torch.tensor([[101, 7592, 2088, 102]])
    with torch.inference_mode():
        short = model.hidden(torch.nn.functional.pad(ids, (0, 12)),
                             torch.tensor([[1] * 4 + [0] * 12]))[0, :4]
        long_ = model.hidden(torch.nn.functional.pad(ids, (0, 60)),
                             torch.tensor([[1] * 4 + [0] * 60]))[0, :4]
    assert float(torch.cosine_similarity(short, long_).min()) >= 0.9999


def test_threads_are_set_for_the_call_and_restored():
    import torch
    before = torch.get_num_threads()
    one = Bf16MiniLMEncoder(cache=False).encode(TEXTS[:4])
    assert torch.get_num_threads() == before
    two = Bf16MiniLMEncoder(cache=False, threads=2).encode(TEXTS[:4])
    assert torch.get_num_threads() == before
    assert _cos(one, two).min() >= 0.9999


def test_workers_run_a_pass_in_parallel_calls_with_the_same_vectors(monkeypatch):
    """``workers`` splits a pass's groups over a thread pool: the same vectors as one worker,
    the pool really used (one pool of the asked size, every model call on its threads, none
    on the caller's), and the process's thread count restored."""
    import threading

    import torch
    texts = [f"question number {i} about the boiling point of water" for i in range(7)]
    serial = Bf16MiniLMEncoder(cache=False, workers=1)
    serial.tokens_per_call = 32          # one text per call: seven calls
    one = serial.encode(texts)
    pools, seen = [], set()
    real_pool, real_hidden = bf16_minilm.ThreadPoolExecutor, bf16_minilm._Bf16Bert.hidden

    class Spy(real_pool):
        def __init__(self, n, *a, **k):
            pools.append(n)
            super().__init__(n, *a, **k)

    def hidden(self, ids, mask):
        seen.add(threading.get_ident())
        return real_hidden(self, ids, mask)

    monkeypatch.setattr(bf16_minilm, "ThreadPoolExecutor", Spy)
    monkeypatch.setattr(bf16_minilm._Bf16Bert, "hidden", hidden)
    before = torch.get_num_threads()
    par = Bf16MiniLMEncoder(cache=False, workers=2)
    par.tokens_per_call = 32
    two = par.encode(texts)
    assert pools == [2] and threading.get_ident() not in seen and 1 <= len(seen) <= 2
    assert torch.get_num_threads() == before
    np.testing.assert_allclose(one, two, atol=1e-6)
    # one text is one call: no pool
    pools.clear()
    np.testing.assert_allclose(par.encode(texts[:1]), one[:1], atol=1e-6)
    assert pools == []


def test_workers_default_follows_the_process_thread_count(monkeypatch):
    import torch
    seen = []
    real = bf16_minilm._groups

    def groups(buckets, tokens_per_call, workers):
        seen.append(workers)
        return real(buckets, tokens_per_call, workers)

    monkeypatch.setattr(bf16_minilm, "_groups", groups)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(4)
        Bf16MiniLMEncoder(cache=False).encode(TEXTS[:2])
        Bf16MiniLMEncoder(cache=False, threads=2).encode(TEXTS[:2])
        torch.set_num_threads(1)
        Bf16MiniLMEncoder(cache=False).encode(TEXTS[:2])
        Bf16MiniLMEncoder(cache=False, workers=3).encode(TEXTS[:2])
    finally:
        torch.set_num_threads(before)
    assert seen == [4, 2, 1, 3]


def test_plain_bfloat16_path_computes_the_same_function(monkeypatch, torch_vectors):
    """What a CPU without AMX/AVX512-BF16 runs (emulated bfloat16, unpacked weights)."""
    fast = Bf16MiniLMEncoder(cache=False).encode(TEXTS)
    monkeypatch.setattr(bf16_minilm, "bf16_support", lambda: (False, "no bf16 here (test)"))
    monkeypatch.setattr(bf16_minilm, "_WARNED", [])
    with pytest.warns(RuntimeWarning, match="runs emulated here .no bf16 here"):
        plain = Bf16MiniLMEncoder(cache=False).encode(TEXTS)
    assert not bf16_minilm._model(packed=False).packed
    # GELU rounded to bfloat16 before (plain) or inside (fused) the product: ~1e-4 apart
    assert _cos(fast, plain).min() >= 0.9995
    assert _cos(plain, torch_vectors).min() >= 0.999


def test_default_is_bf16_where_supported_and_int8_with_a_warning_elsewhere(monkeypatch):
    monkeypatch.setattr(onnx_minilm, "int8_weight_type", lambda: "s8")  # (u8: "int8u8")
    if bf16_support()[0]:
        d = get_encoder("minilm")
        assert isinstance(d, Bf16MiniLMEncoder)
        assert d.identity == "torch:all-MiniLM-L6-v2|bf16|norm=1|maxlen=256" + FILES
    monkeypatch.setattr(enc_mod, "bf16_support", lambda: (False, "this CPU lacks it (test)"))
    monkeypatch.setattr(enc_mod, "_FALLBACK_WARNED", [])
    with pytest.warns(RuntimeWarning, match="lacks it .test., so it is 'minilm:int8' here"):
        fb = get_encoder("minilm")
    assert isinstance(fb, OnnxMiniLMEncoder)
    assert fb.identity == "onnx:all-MiniLM-L6-v2|int8|norm=1|maxlen=256|per-text" + FILES
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once per process, then quiet
        get_encoder("minilm")
    # asked for by name, bf16 stays bf16 (its vectors, slower) on any CPU
    assert isinstance(get_encoder("minilm:bf16"), Bf16MiniLMEncoder)


def test_identities_are_distinct_and_threads_do_not_change_them():
    ids = {get_encoder(f"minilm:{v}").identity for v in enc_mod.MINILM_VARIANTS}
    assert len(ids) == len(enc_mod.MINILM_VARIANTS)
    assert (get_encoder("minilm:bf16", max_seq_length=128).identity
            == "torch:all-MiniLM-L6-v2|bf16|norm=1|maxlen=128" + FILES)
    assert (get_encoder("minilm:bf16", threads=1).identity
            == get_encoder("minilm:bf16", threads=2).identity)


def test_artifact_state_round_trip_and_old_artifacts_keep_their_identity(monkeypatch):
    monkeypatch.setattr(onnx_minilm, "int8_weight_type", lambda: "s8")  # (u8: "int8u8")
    e = Bf16MiniLMEncoder(max_seq_length=128, batch_size=16, cache=False)
    info, arrays = encoder_state(e)
    assert info == {"kind": "bf16-minilm", "max_seq_length": 128, "batch_size": 16}
    assert arrays == {}
    back = encoder_from_state(info, arrays, "enc")
    assert back.identity == e.identity and back.batch_size == 16
    back.cache = False  # (the test leaves no vectors in the user's cache)
    np.testing.assert_array_equal(back.encode(TEXTS[:3]), e.encode(TEXTS[:3]))
    # an artifact exported when int8 per-text was the default rebuilds that encoder
    old = {"kind": "onnx-minilm", "variant": "int8", "max_seq_length": 256, "batch_size": 1}
    assert (encoder_from_state(old, {}, "enc").identity
            == "onnx:all-MiniLM-L6-v2|int8|norm=1|maxlen=256|per-text" + FILES)


@pytest.mark.parametrize("bad,match", [
    ({"max_seq_length": 10 ** 9}, "max_seq_length must be in"),
    ({"max_seq_length": -1}, "max_seq_length must be in"),
    ({"batch_size": 0}, "dim and batch_size must be in"),
    ({"max_seq_length": "256; import os"}, "max_seq_length"),
    ({"module": "os.system"}, "module"),
])
def test_hostile_artifact_state_is_a_clean_error(bad, match):
    info = {"kind": "bf16-minilm", "max_seq_length": 256, "batch_size": 64, **bad}
    with pytest.raises(StateError, match=match):
        encoder_from_state(info, {}, "enc")


@pytest.mark.parametrize("name,options,match", [
    ("minilm:bf16", {"max_seq_length": 100000}, "max_seq_length must be in"),
    ("minilm:bf16", {"max_seq_length": 0}, "max_seq_length must be in"),
    ("minilm:bf16", {"batch_size": 0}, "batch_size must be in"),
    ("minilm:bf16", {"threads": 0}, "threads must be in"),
    ("minilm:bf16", {"workers": 0}, "workers must be in"),
    ("minilm:bf16", {"workers": 10**9}, "workers must be in"),
    ("minilm:int8", {"workers": 2}, "workers= is an option of 'minilm:bf16'"),
    ("minilm:bf16", {"device": "cuda"}, "use 'minilm:torch'"),
    ("minilm:BF16 ", {"normalize": False}, "use 'minilm:torch'"),
])
def test_hostile_settings_are_clean_errors(name, options, match):
    with pytest.raises(ValueError, match=match):
        get_encoder(name, **options)


def test_foreign_weights_are_a_clean_error_naming_the_file(tmp_path, monkeypatch):
    import torch
    from safetensors.torch import save_file
    monkeypatch.setattr(bf16_minilm, "minilm_model_dir", lambda: tmp_path)
    monkeypatch.setattr(bf16_minilm, "_MODELS", {})
    (tmp_path / "model.safetensors").write_bytes(b"\x00" * 8 + b"not a tensor file")
    with pytest.raises(ValueError, match=r"model.safetensors: not a readable safetensors"):
        bf16_minilm._model(packed=False)
    save_file({"embeddings.word_embeddings.weight": torch.zeros(3, 3)},
              str(tmp_path / "model.safetensors"))
    with pytest.raises(ValueError, match=r"'embeddings.word_embeddings.weight' is torch.float32 "
                                         r"\(3, 3\); expected float \(30522, 384\)"):
        bf16_minilm._model(packed=False)
    assert bf16_minilm._MODELS == {}  # nothing half-built is kept


def test_support_probe_says_why_and_never_raises(monkeypatch):
    import torch

    def broken():
        raise RuntimeError("cpuinfo unavailable")
    try:
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)
        bf16_minilm._probe.cache_clear()
        assert bf16_minilm.bf16_support() == (
            False, "this CPU has neither AMX-BF16 nor AVX512-BF16 instructions")
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", broken)
        bf16_minilm._probe.cache_clear()
        assert bf16_minilm.bf16_support()[0] is False
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True)
        bf16_minilm._probe.cache_clear()
        assert bf16_minilm.bf16_support() == (True, "")
    finally:
        monkeypatch.undo()
        bf16_minilm._probe.cache_clear()
