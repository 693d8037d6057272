"""Query encoders: text -> float32 vectors, with a shared on-disk cache.

Use :func:`get_encoder` with a name:

* ``"hashing"`` (default): stateless hashed word + char n-grams, ``dim`` (512);
* ``"tfidf"``: TF-IDF + truncated SVD, needs ``fit(texts)``, ``dim`` (256);
* ``"minilm"`` / ``"all-MiniLM-L6-v2"`` / ``"sentence-transformers/all-MiniLM-L6-v2"``:
  384-d unit-norm MiniLM embeddings from packaged weights (works offline), by default on
  ONNX Runtime with int8 weights (exported and quantized locally on first use), one text per
  model call (each text's activations quantized on their own: its vector never depends on
  what else is encoded with it); ``"minilm:int8-batched"`` the same weights in batches of 32
  sharing activation scales (the default before per-text calls), ``"minilm:fp32"`` ONNX
  Runtime fp32, ``"minilm:torch"`` sentence-transformers in PyTorch (also used for
  ``device="cuda"``); every variant has its own cache identity;
* ``"precomputed:<path>"``: stored embeddings keyed by ``query_id`` (.npy + ids, .parquet);
* any other name or local folder: ``sentence_transformers.SentenceTransformer(name)``.

Names are entries of :data:`ENCODERS`, a :class:`~recsys_router.registries.Registry` (the
mechanism routers and datasets use too): a factory ``factory(argument, **options)``, where
``argument`` is the text after ``NAME:`` (None without one). :func:`register_encoder` adds one.
"""

from __future__ import annotations

import warnings

from ..registries import Registry
from .base import Encoder
from .cache import DiskCache, MemoryLRU, cache_root, text_key
from .neural import (HAS_PACKAGED_MINILM, HAS_SENTENCE_TRANSFORMERS, MINILM_ALIASES, MINILM_NAME,
                     SentenceTransformerEncoder)
from .onnx_minilm import HAS_ONNXRUNTIME, ONNX_VARIANTS, OnnxMiniLMEncoder
from .precomputed import PrecomputedEncoder
from .text import HAS_SKLEARN, HashingEncoder, TfidfEncoder

__all__ = ["get_encoder", "Encoder", "HashingEncoder", "TfidfEncoder", "PrecomputedEncoder",
           "SentenceTransformerEncoder", "OnnxMiniLMEncoder", "HAS_ONNXRUNTIME", "DiskCache", "MemoryLRU", "cache_root", "text_key",
           "HAS_SENTENCE_TRANSFORMERS", "HAS_PACKAGED_MINILM", "HAS_SKLEARN", "MINILM_NAME",
           "BUILTIN_ENCODERS", "ENCODERS", "register_encoder", "MINILM_VARIANTS", "MINILM_DEFAULT"]

BUILTIN_ENCODERS = ("hashing", "tfidf", "minilm", "minilm:<fp32|int8|int8-batched|torch>",
                    "precomputed:<path>")


def _no_argument(cls):
    def build(argument, **options):
        if argument is not None:
            raise ValueError(f"encoder {cls.__name__} takes no ':' argument, got {argument!r}")
        return cls(**options)
    build.__doc__ = f"Build a {cls.__name__} (no ':' argument)."
    return build


def _precomputed(argument, **options):
    if not argument:
        raise ValueError("precomputed encoder needs a path: 'precomputed:<file.npy|file.parquet>'")
    return PrecomputedEncoder(argument, **options)


#: ``minilm:<variant>`` choices; ``minilm`` alone is :data:`MINILM_DEFAULT`
MINILM_VARIANTS = ONNX_VARIANTS + ("int8-batched", "torch")
#: fastest variant keeping cosine >= 0.99 to the PyTorch vectors (benchmarks/bench_encode.py)
MINILM_DEFAULT = "int8"
#: texts per ONNX call: int8 one at a time (per-text activation scales, and the fastest on
#: mixed lengths), int8-batched and fp32 in batches
_ONNX_BATCH = {"int8": 1, "int8-batched": 32, "fp32": 32}


def _minilm(argument, **options):
    variant = MINILM_DEFAULT if argument is None else str(argument).strip().lower()
    if variant not in MINILM_VARIANTS:
        raise ValueError(f"unknown MiniLM variant {argument!r}; expected 'minilm' or "
                         f"'minilm:<variant>' with variant one of {', '.join(MINILM_VARIANTS)}")
    device = options.get("device")
    torch_only = (device not in (None, "cpu")) or not options.get("normalize", True)
    if variant == "torch" or torch_only or not HAS_ONNXRUNTIME:
        if variant != "torch" and argument is not None:  # an explicit ONNX variant cannot run
            why = ("onnxruntime is not installed" if not HAS_ONNXRUNTIME
                   else f"device={device!r}, normalize={options.get('normalize', True)!r}")
            raise ValueError(f"encoder 'minilm:{variant}' runs on ONNX Runtime on the CPU with "
                             f"normalised vectors ({why}); use 'minilm:torch'")
        options.pop("threads", None)
        return SentenceTransformerEncoder(MINILM_NAME, **options)
    options.pop("device", None)
    options.pop("normalize", None)
    if options.get("max_seq_length") is None:
        options.pop("max_seq_length", None)
    if options.get("batch_size") is None:
        options["batch_size"] = _ONNX_BATCH[variant]
    return OnnxMiniLMEncoder("int8" if variant == "int8-batched" else variant, **options)


_minilm.needs_sentence_transformers = True


#: every named encoder; a name not registered is a sentence-transformers model name or path
ENCODERS = Registry("encoder")
ENCODERS.register("hashing", _no_argument(HashingEncoder))
ENCODERS.register("tfidf", _no_argument(TfidfEncoder))
ENCODERS.register("precomputed", _precomputed)
ENCODERS.register("minilm", _minilm, aliases=MINILM_ALIASES[1:])


def register_encoder(name: str, factory, *, overwrite: bool = False) -> None:
    """Add an encoder: ``get_encoder(name, **options)`` (or ``"name:argument"``) then calls
    ``factory(argument_or_None, **options)``.

    Example
    -------
    >>> register_encoder("hash32", lambda arg, **kw: HashingEncoder(dim=32, **kw))
    >>> get_encoder("hash32").dim
    32
    >>> ENCODERS.unregister("hash32")
    """
    ENCODERS.register(name, factory, overwrite=overwrite)


def get_encoder(name: str | Encoder = "hashing", *, on_missing: str = "warn", **kwargs) -> Encoder:
    """Build an encoder by name.

    Parameters
    ----------
    name : str or Encoder
        See the module docstring; an :class:`Encoder` instance is returned unchanged.
    on_missing : {"warn", "raise"}
        When a sentence-transformers model is asked for but the package is not installed:
        ``"warn"`` emits a ``RuntimeWarning`` and returns a :class:`HashingEncoder`
        (with ``dim`` from ``kwargs`` when given); ``"raise"`` raises ``ImportError``.
    **kwargs
        Encoder options, e.g. ``dim=``, ``cache=``, ``cache_dir=``, ``batch_size=``,
        ``device=``, ``seed=`` (tfidf), ``ids_path=`` / ``column=`` (precomputed).

    Returns
    -------
    Encoder

    Example
    -------
    >>> get_encoder("hashing", dim=64).dim
    64
    >>> get_encoder("minilm").identity
    'onnx:all-MiniLM-L6-v2|int8|norm=1|maxlen=256|per-text'
    >>> get_encoder("minilm:int8-batched").identity
    'onnx:all-MiniLM-L6-v2|int8|norm=1|maxlen=256'
    >>> get_encoder("minilm:torch").identity
    'st:sentence-transformers/all-MiniLM-L6-v2|norm=1|maxlen=default'
    """
    if isinstance(name, Encoder) or (not isinstance(name, str) and callable(getattr(name, "encode", None))):
        return name  # an encoder object (or a stand-in with the same interface) is used as is
    if on_missing not in ("warn", "raise"):
        raise ValueError(f"on_missing must be 'warn' or 'raise', got {on_missing!r}")
    key = str(name).strip()
    if not key:
        raise ValueError(f"empty encoder name; built-in encoders: {', '.join(BUILTIN_ENCODERS)}")
    factory, argument = None, None
    scheme, sep, rest = key.partition(":")
    if key in ENCODERS:
        factory = ENCODERS.get(key)
    elif sep and scheme in ENCODERS:
        factory, argument = ENCODERS.get(scheme), rest
    needs_st = factory is None or getattr(factory, "needs_sentence_transformers", False)
    if needs_st and not HAS_SENTENCE_TRANSFORMERS:
        msg = (f"encoder {key!r} needs the sentence-transformers package, which is not installed "
               f"(pip install sentence-transformers)")
        if on_missing == "raise":
            raise ImportError(msg)
        warnings.warn(msg + "; falling back to the 'hashing' encoder", RuntimeWarning, stacklevel=2)
        return HashingEncoder(**{k: v for k, v in kwargs.items()
                                 if k in ("dim", "cache", "cache_dir", "batch_size")})
    if factory is not None:
        return factory(argument, **kwargs)
    return SentenceTransformerEncoder(key, **kwargs)
