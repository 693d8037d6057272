"""Tests of recsys_router.encoders: hashing, tfidf, precomputed, caching, MiniLM."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
import multiprocessing as mp

import numpy as np
import pandas as pd
import pytest

from recsys_router.data import RoutingData
from recsys_router.encoders import (DiskCache, Encoder, HashingEncoder, PrecomputedEncoder,
                                    SentenceTransformerEncoder, TfidfEncoder, get_encoder,
                                    text_key)
from recsys_router.encoders import cache as cache_mod
from recsys_router.errors import DataValidationError, NotFittedError


pytestmark = pytest.mark.usefixtures("isolated_embedding_cache")


# ---------------------------------------------------------------- hashing
def test_hashing_shape_norm_determinism():
    texts = ["What is the capital of France?", "solve 2x + 3 = 7", "What is the capital of France?"]
    e = get_encoder("hashing", dim=64)
    v = e.encode(texts)
    assert v.shape == (3, 64) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-6)
    np.testing.assert_array_equal(v[0], v[2])
    assert not np.allclose(v[0], v[1])
    np.testing.assert_array_equal(v, HashingEncoder(dim=64).encode(texts))
    assert get_encoder("hashing").dim == 512
    assert e.identity != get_encoder("hashing", dim=32).identity
    assert e.encode([]).shape == (0, 64)


def test_hashing_identity_tells_every_word_weight_apart():
    a = HashingEncoder(dim=64, word_weight=0.1234561, cache=True)
    b = HashingEncoder(dim=64, word_weight=0.1234564, cache=True)
    assert a.identity != b.identity          # ":g" printed both as 0.123456
    assert a.identity.endswith(",w=0.1234561)") and b.identity.endswith(",w=0.1234564)")
    texts = ["the quick brown fox jumps"]
    a.encode(texts)                          # cached under a's identity
    own = HashingEncoder(dim=64, word_weight=0.1234564, cache=False).encode(texts)
    np.testing.assert_array_equal(b.encode(texts), own)   # b is not served a's vector
    assert not np.array_equal(own, a.encode(texts))
    # values that ":g" already wrote exactly keep their identity (and their cache entries)
    for w, text in ((0.5, "0.5"), (0.3, "0.3"), (1.0, "1"), (0.0, "0"), (1e-07, "1e-07")):
        assert HashingEncoder(dim=8, word_weight=w).identity == \
            f"hashing-v1(dim=8,word=(1, 2),char=(3, 5),w={text})"


def test_hashing_matches_hand_computed_murmur_buckets():
    from sklearn.utils import murmurhash3_32
    dim = 1024
    e = HashingEncoder(dim=dim, word_ngrams=(1, 1), char_ngrams=None)
    text = "red fish blue fish"
    expected = np.zeros(dim)
    for tok in ["red", "fish", "blue", "fish"]:
        h = murmurhash3_32(tok, seed=0)
        expected[abs(h) % dim] += 1.0 if h >= 0 else -1.0
    expected /= np.linalg.norm(expected)
    np.testing.assert_allclose(e.encode([text])[0], expected, atol=1e-6)


def test_hashing_same_in_another_process():
    code = ("import numpy as np, sys; from recsys_router.encoders import HashingEncoder;"
            "np.save(sys.argv[1], HashingEncoder(dim=32).encode(['stable across runs']))")
    out = os.path.join(os.environ["RECSYS_ROUTER_CACHE"] + "-v.npy")
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    subprocess.run([sys.executable, "-c", code, out], check=True, env=env)
    np.testing.assert_array_equal(np.load(out), HashingEncoder(dim=32).encode(["stable across runs"]))


def test_bad_texts_are_named():
    with pytest.raises(DataValidationError, match=r"position 1 \(query 'q2'\)"):
        get_encoder("hashing").encode(["ok", None], ["q1", "q2"])
    with pytest.raises(TypeError, match="single str"):
        get_encoder("hashing").encode("not a list")


def test_encode_data_names_dataset_without_text(sim_small):
    v = get_encoder("hashing", dim=16).encode_data(sim_small.subset(range(5)))
    assert v.shape == (5, 16)
    d = RoutingData(["q1", "q2"], ["a"], [[1.0], [0.0]], name="notext")
    with pytest.raises(DataValidationError, match="dataset 'notext' has no query text for 2 of 2"):
        get_encoder("hashing").encode_data(d)


# ---------------------------------------------------------------- tfidf
def _hand_tfidf(texts):
    """Independent TF-IDF: sublinear tf, smooth idf, l2 rows (unigrams, >= 2-char tokens)."""
    docs = [t.lower().split() for t in texts]
    vocab = sorted({w for d in docs for w in d})
    n = len(docs)
    tf = np.array([[d.count(w) for w in vocab] for d in docs], dtype=float)
    df = (tf > 0).sum(axis=0)
    idf = np.log((1 + n) / (1 + df)) + 1
    x = np.where(tf > 0, 1 + np.log(np.maximum(tf, 1)), 0) * idf
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_tfidf_fit_encode_preserves_cosines():
    texts = ["red apple pie", "green apple juice", "blue sky today", "red red sky",
             "apple apple apple"]
    e = TfidfEncoder(dim=32, ngram_range=(1, 1))
    assert e.needs_fit
    with pytest.raises(NotFittedError):
        e.encode(texts)
    unfitted_id = e.identity
    e.fit(texts)
    assert e.identity != unfitted_id and e.n_components_ == 5
    z = e.encode(texts)
    assert z.shape == (5, 32) and z.dtype == np.float32
    x = _hand_tfidf(texts)
    # with all components kept, the SVD basis spans the rows: cosines are preserved
    np.testing.assert_allclose(z @ z.T, x @ x.T, atol=1e-4)
    other = TfidfEncoder(dim=32, ngram_range=(1, 1)).fit(texts[:4])
    assert other.identity != e.identity
    again = TfidfEncoder(dim=32, ngram_range=(1, 1)).fit(texts)
    assert again.identity == e.identity
    np.testing.assert_allclose(again.encode(texts), z, atol=1e-6)


# ---------------------------------------------------------------- precomputed
def test_precomputed_npy_with_sidecar(tmp_path):
    mat = np.arange(6, dtype=np.float32).reshape(3, 2)
    np.save(tmp_path / "emb.npy", mat)
    (tmp_path / "emb.ids.txt").write_text("a\nb\nc\n")
    e = get_encoder(f"precomputed:{tmp_path / 'emb.npy'}")
    assert e.dim == 2 and not e.needs_text
    np.testing.assert_array_equal(e.encode(None, ["c", "a"]), [[4, 5], [0, 1]])
    with pytest.raises(DataValidationError, match="no precomputed embedding for query_id 'zz'"):
        e.encode(None, ["a", "zz"])
    with pytest.raises(ValueError, match="query_ids"):
        e.encode(["text"])
    d = RoutingData(["b", "a"], ["m"], [[1.0], [0.0]])  # no texts needed
    np.testing.assert_array_equal(e.encode_data(d), [[2, 3], [0, 1]])
    out = e.encode(None, ["a", "a"])       # a new array: writing to it leaves the table as it was
    out[:] = -1.0
    np.testing.assert_array_equal(e.encode(None, ["a"]), [[0, 1]])
    assert not np.shares_memory(out, e.table()[1])


def test_precomputed_missing_sidecar_and_json_ids(tmp_path):
    np.save(tmp_path / "x.npy", np.eye(2, dtype=np.float32))
    with pytest.raises(DataValidationError, match="no ids file"):
        PrecomputedEncoder(tmp_path / "x.npy")
    (tmp_path / "x_ids.json").write_text(json.dumps(["p", "q"]))
    np.testing.assert_array_equal(PrecomputedEncoder(tmp_path / "x.npy").encode(None, ["q"]), [[0, 1]])


def _npy_case(d, arr, ids: bytes, ids_name="e.ids.txt", *, cut=0, pickle=False):
    d.mkdir()
    np.save(d / "e.npy", arr, allow_pickle=pickle)
    if cut:
        (d / "e.npy").write_bytes((d / "e.npy").read_bytes()[:-cut])
    (d / ids_name).write_bytes(ids)
    return d / "e.npy", d / ids_name


@pytest.mark.parametrize("case, needle", [
    ("object", "e.npy: cannot read the embedding matrix (Object arrays cannot be loaded"),
    ("truncated", "e.npy: cannot read the embedding matrix (Failed to read all data"),
    ("strings", "e.npy: embedding matrix of dtype <U1; expected numbers"),
    ("json-malformed", "e.ids.json: ids file is not valid JSON (Expecting value"),
    ("json-number", "e.ids.json: ids file holds a JSON number; expected a JSON list of query ids"),
    ("json-object", "e.ids.json: ids file holds a JSON object; expected a JSON list"),
    ("json-string", "e.ids.json: ids file holds a JSON string; expected a JSON list"),
    ("json-list-of-numbers", "e.ids.json, row 2: query id 2 is a JSON number; expected a string"),
    ("json-first-item", "e.ids.json, row 1: query id 7 is a JSON number; expected a string"),
    ("txt-latin1", "e.ids.txt, row 2: ids file is not UTF-8 (byte 4)"),
    ("txt-latin1-first-line", "e.ids.txt, row 1: ids file is not UTF-8 (byte 1)"),
    ("parquet-strings", "e.parquet, row 0, column 'embedding': embedding of query 'q1' is not a "
                        "list of numbers"),
    ("parquet-corrupt", "e.parquet: cannot read the parquet file"),
])
def test_precomputed_bad_files_are_named(tmp_path, case, needle):
    """A malformed embeddings or ids file is one error naming that file (and row/column): the
    numpy/json/pandas error alone said neither. An ids .json that is not a list of strings
    was read as its keys (an object: row numbers ignored) or characters (a string). Ids-file
    lines and list items count from 1, like every loader's lines."""
    eye, d = np.eye(2, dtype=np.float32), tmp_path / case
    f = {"object": lambda: _npy_case(d, np.array([[1, None]], dtype=object), b"q1\n", pickle=True),
         "truncated": lambda: _npy_case(d, eye, b"q1\nq2\n", cut=4),
         "strings": lambda: _npy_case(d, np.array([["a", "b"]]), b"q1\n"),
         "json-malformed": lambda: _npy_case(d, eye, b'["q1",', "e.ids.json"),
         "json-number": lambda: _npy_case(d, eye, b"5", "e.ids.json"),
         "json-object": lambda: _npy_case(d, eye, b'{"q1": 1, "q2": 0}', "e.ids.json"),
         "json-string": lambda: _npy_case(d, eye, b'"ab"', "e.ids.json"),
         "json-list-of-numbers": lambda: _npy_case(d, eye, b'["1", 2]', "e.ids.json"),
         "json-first-item": lambda: _npy_case(d, eye, b'[7, "q2"]', "e.ids.json"),
         "txt-latin1": lambda: _npy_case(d, eye, b"q1\nq\xe9\n"),
         "txt-latin1-first-line": lambda: _npy_case(d, eye, b"q\xe9\nq2\n"),
         }.get(case)
    if f is not None:
        path, _ = f()
    else:
        d.mkdir()
        path = d / "e.parquet"
        if case == "parquet-strings":
            pd.DataFrame({"query_id": ["q1", "q2"], "embedding": ["ab", "cd"]}).to_parquet(path)
        else:
            path.write_bytes(b"PAR1 not really a parquet file PAR1")
    with pytest.raises(DataValidationError) as info:
        get_encoder(f"precomputed:{path}")
    msg = str(info.value)
    assert msg.startswith(str(d)) and needle in msg and "\n" not in msg, msg


def test_precomputed_parquet_list_and_numeric_columns(tmp_path):
    pd.DataFrame({"query_id": ["q1", "q2"], "embedding": [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]}) \
        .to_parquet(tmp_path / "l.parquet")
    e = PrecomputedEncoder(tmp_path / "l.parquet")
    np.testing.assert_array_equal(e.encode(None, ["q2"]), [[4, 5, 6]])
    pd.DataFrame({"query_id": ["q1", "q2"], "e0": [1.0, 2.0], "e1": [3.0, 4.0]}) \
        .to_parquet(tmp_path / "n.parquet")
    np.testing.assert_array_equal(PrecomputedEncoder(tmp_path / "n.parquet").encode(None, ["q1"]),
                                  [[1, 3]])
    pd.DataFrame({"query_id": ["q1", "q1"], "e0": [1.0, 2.0]}).to_parquet(tmp_path / "d.parquet")
    with pytest.raises(DataValidationError, match="duplicate query_id 'q1'"):
        PrecomputedEncoder(tmp_path / "d.parquet")


# ---------------------------------------------------------------- caching
class CountingEncoder(Encoder):
    """Fake model: vector = [len(text), number of vowels]; records every text it encodes."""

    cache_by_default = True

    def __init__(self, **kw):
        super().__init__(**kw)
        self.identity, self.dim, self.seen = "counting-v1", 2, []

    def _encode_batch(self, texts):
        self.seen.extend(texts)
        return np.array([[len(t), sum(c in "aeiou" for c in t)] for t in texts], dtype=np.float32)


def test_cache_hits_skip_the_model(tmp_path):
    texts = ["alpha", "beta", "alpha", "gamma"]
    e1 = CountingEncoder(batch_size=2)
    v1 = e1.encode(texts)
    np.testing.assert_array_equal(v1, [[5, 2], [4, 2], [5, 2], [5, 2]])
    assert sorted(e1.seen) == ["alpha", "beta", "gamma"]  # duplicates encoded once
    # new instance, empty memory: everything comes from disk
    cache_mod.MEMORY_CACHE.clear()
    e2 = CountingEncoder()
    np.testing.assert_array_equal(e2.encode(texts), v1)
    assert e2.seen == []
    # only the missing text is encoded
    e3 = CountingEncoder()
    np.testing.assert_array_equal(e3.encode(["beta", "delta"]), [[4, 2], [5, 2]])
    assert e3.seen == ["delta"]
    # in-memory LRU: works even after the disk cache is wiped
    import shutil
    shutil.rmtree(os.environ["RECSYS_ROUTER_CACHE"])
    e4 = CountingEncoder()
    e4.encode(texts)
    assert e4.seen == []
    # cache=False always calls the model
    e5 = CountingEncoder(cache=False)
    e5.encode(["alpha"])
    assert e5.seen == ["alpha"]


def test_disk_cache_survives_compaction_by_another_reader(tmp_path):
    a = DiskCache("ident", 2, root=tmp_path, max_shards=100)
    for i in range(5):
        a.put([f"k{i}"], np.full((1, 2), i, np.float32))
    assert len(a) == 5
    b = DiskCache("ident", 2, root=tmp_path)
    b.compact()  # deletes the 5 shards a has indexed
    assert len(list(p for p in b.dir.iterdir() if p.suffix == ".npz")) == 1
    got = a.get(["k3", "k0", "nope"])
    assert sorted(got) == ["k0", "k3"] and got["k3"].tolist() == [3.0, 3.0]
    assert DiskCache("other", 2, root=tmp_path).get(["k0"]) == {}


def _writer(args):
    root, worker = args
    c = DiskCache("shared", 3, root=root, max_shards=4)
    for i in range(12):
        k = f"key{(i + worker) % 15}"
        c.put([k], np.full((1, 3), (i + worker) % 15, np.float32))
    return worker


def test_disk_cache_concurrent_writers(tmp_path):
    with ProcessPoolExecutor(2, mp_context=mp.get_context("fork")) as ex:
        list(ex.map(_writer, [(str(tmp_path), 0), (str(tmp_path), 5)]))
    keys = [f"key{i}" for i in range(15)]
    got = DiskCache("shared", 3, root=tmp_path).get(keys)
    assert sorted(got) == sorted(keys)
    for k, v in got.items():
        assert v.tolist() == [float(k[3:])] * 3
    assert not any(p.name.startswith(".tmp") for p in (tmp_path / "embeddings").rglob("*"))


def test_text_key_is_sha1():
    assert text_key("abc") == "a9993e364706816aba3e25717850c26c9cd0d89d"


# ---------------------------------------------------------------- names and fallbacks
def test_get_encoder_names_and_errors(monkeypatch):
    m = get_encoder("all-MiniLM-L6-v2")
    assert m.dim == 384 and m.identity == get_encoder("minilm").identity
    with pytest.raises(ValueError, match="needs a path"):
        get_encoder("precomputed:")
    with pytest.raises(ValueError, match="built-in encoders"):
        get_encoder("  ")
    import recsys_router.encoders as enc
    monkeypatch.setattr(enc, "HAS_SENTENCE_TRANSFORMERS", False)
    with pytest.warns(RuntimeWarning, match="falling back to the 'hashing'"):
        fb = enc.get_encoder("minilm", dim=24)
    assert isinstance(fb, HashingEncoder) and fb.dim == 24
    with pytest.raises(ImportError):
        enc.get_encoder("minilm", on_missing="raise")


# ---------------------------------------------------------------- real MiniLM
def test_minilm_real_embeddings_offline(monkeypatch):
    import torch
    torch.set_num_threads(1)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    e = get_encoder("sentence-transformers/all-MiniLM-L6-v2", device="cpu")
    texts = ["How do I bake bread at home?", "What is a simple recipe for homemade bread?",
             "Prove that the square root of two is irrational."]
    v = e.encode(texts)
    assert v.shape == (3, 384) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    sim = v @ v.T
    assert sim[0, 1] > sim[0, 2] + 0.2 and sim[0, 1] > sim[1, 2] + 0.2
    # second call is a cache hit: identical output
    np.testing.assert_array_equal(e.encode(texts[:1]), v[:1])


def test_importing_the_encoders_does_not_import_sklearn():
    """scikit-learn (about a second: scipy.stats) loads when a classical encoder is built."""
    code = ("import sys, recsys_router.encoders as e; a = 'sklearn' in sys.modules; "
            "e.HashingEncoder(dim=8, cache=False).encode(['x']); "
            "print(a, 'sklearn' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "True"]


def test_a_name_too_long_for_a_path_is_not_a_local_folder():
    """The local-folder check raised OSError (File name too long) for a 300-character name; it
    is a hub name like any other (its load error then names it)."""
    name = "x" * 300
    assert SentenceTransformerEncoder(name).identity == f"st:{name}|norm=1|maxlen=default"


@pytest.mark.parametrize("spec", ["hashing", "tfidf", "minilm:bf16", "minilm:int8",
                                  "minilm:int8-batched", "minilm:fp32", "minilm:torch"])
def test_a_lone_surrogate_is_named_by_position_and_query_id(spec):
    """A text holding a lone surrogate (a JSON "\\ud800" escape) failed inside each encoder
    (UnicodeEncodeError, a tokenizers TypeError) naming neither its position nor its id."""
    enc = get_encoder(spec, cache=False)
    if enc.needs_fit:
        enc.fit(["some training text", "another one"])
    texts = ["fine text", "caf\u00e9", json.loads('"bad \\ud800 text"')]
    with pytest.raises(DataValidationError) as info:
        enc.encode(texts, query_ids=["q0", "q1", "q2"])
    assert str(info.value) == ("row 2, column 'text': text at position 2 (query 'q2') cannot be "
                               "UTF-8 encoded: lone surrogate U+D800 at character 4; expected "
                               "valid Unicode text")


def test_progress_bars_setting_is_per_context_as_documented():
    """``progress_bars`` is a context variable: asyncio tasks made in the block copy it, but
    threads started in the block begin from the default (its docstring said they inherit it)."""
    import asyncio
    import contextvars
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from recsys_router.encoders import progress_bars
    from recsys_router.encoders.base import _PROGRESS
    seen = {}
    with progress_bars(False):
        t = threading.Thread(target=lambda: seen.setdefault("thread", _PROGRESS.get()))
        t.start()
        t.join()
        with ThreadPoolExecutor(1) as pool:
            seen["pool"] = pool.submit(_PROGRESS.get).result()
            seen["pool+copy"] = pool.submit(contextvars.copy_context().run, _PROGRESS.get).result()

        async def read():
            return _PROGRESS.get()

        async def in_task():
            return await asyncio.create_task(read())
        seen["task"] = asyncio.run(in_task())
    assert seen == {"thread": True, "pool": True, "pool+copy": False, "task": False}
    doc = progress_bars.__doc__
    assert "ThreadPoolExecutor" in doc and "copy_context" in doc
