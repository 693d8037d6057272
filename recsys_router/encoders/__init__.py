"""Query encoders: text -> float32 vectors, with a shared on-disk cache.

Use :func:`get_encoder` with a name:

* ``"hashing"`` (default): stateless hashed word + char n-grams, ``dim`` (512);
* ``"tfidf"``: TF-IDF + truncated SVD, needs ``fit(texts)``, ``dim`` (256);
* ``"minilm"`` / ``"all-MiniLM-L6-v2"`` / ``"sentence-transformers/all-MiniLM-L6-v2"``:
  384-d unit-norm MiniLM embeddings from packaged weights (works offline). By default
  ``"minilm:bf16"``: bfloat16 PyTorch with prepacked oneDNN weights and bucketed lengths
  (cosine ~0.9999 to sentence-transformers'; a text's vector does not depend on what else is
  encoded with it) where the CPU has AMX-BF16 or AVX512-BF16; elsewhere, with a warning,
  ``"minilm:int8"``: ONNX Runtime with int8 weights (exported and quantized locally on first
  use), one text per model call. ``"minilm:int8-batched"`` runs the int8 weights in batches
  of 32 sharing activation scales (a text's vector depends on the other distinct texts of its
  ``encode`` call, so it is never cached: a call's vectors never depend on earlier calls),
  ``"minilm:fp32"`` ONNX Runtime fp32, ``"minilm:torch"`` sentence-transformers in PyTorch
  (also used for ``device="cuda"``); every variant has its own cache identity, which ends with a stamp of the packaged model's files (``|files=``, see
  :func:`~recsys_router.encoders.neural.packaged_minilm_stamp`, a digest of the package's
  content), so an upgraded package never reads vectors cached for its old weights while every
  install of the same package shares the cache;
* ``"precomputed:<path>"``: stored embeddings keyed by ``query_id`` (.npy + ids, .parquet);
* any other name or local folder: ``sentence_transformers.SentenceTransformer(name)``.

Names are entries of :data:`ENCODERS`, a :class:`~recsys_router.registries.Registry` (the
mechanism routers and datasets use too): a factory ``factory(argument, **options)``, where
``argument`` is the text after ``NAME:`` (None without one). :func:`register_encoder` adds one.
"""

from __future__ import annotations

import warnings

from ..registries import Registry
from .base import Encoder, progress_bars
from .bf16_minilm import Bf16MiniLMEncoder, bf16_support
from .cache import DiskCache, MemoryLRU, cache_root, text_key
from .neural import (HAS_PACKAGED_MINILM, HAS_SENTENCE_TRANSFORMERS, MINILM_ALIASES, MINILM_NAME,
                     SentenceTransformerEncoder)
from .onnx_minilm import HAS_ONNXRUNTIME, ONNX_VARIANTS, OnnxMiniLMEncoder
from .precomputed import PrecomputedEncoder
from .text import HAS_SKLEARN, HashingEncoder, TfidfEncoder

__all__ = ["get_encoder", "Encoder", "HashingEncoder", "TfidfEncoder", "PrecomputedEncoder",
           "SentenceTransformerEncoder", "OnnxMiniLMEncoder", "Bf16MiniLMEncoder",
           "bf16_support", "HAS_ONNXRUNTIME", "DiskCache", "MemoryLRU", "cache_root", "text_key",
           "HAS_SENTENCE_TRANSFORMERS", "HAS_PACKAGED_MINILM", "HAS_SKLEARN", "MINILM_NAME",
           "BUILTIN_ENCODERS", "ENCODERS", "register_encoder", "MINILM_VARIANTS", "MINILM_DEFAULT",
           "MINILM_FALLBACK", "check_encoder_argument", "progress_bars"]

BUILTIN_ENCODERS = ("hashing", "tfidf", "minilm", "minilm:<bf16|fp32|int8|int8-batched|torch>",
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


#: ``minilm:<variant>`` choices; ``minilm`` alone is :data:`MINILM_DEFAULT` where the CPU
#: supports it, else :data:`MINILM_FALLBACK`
MINILM_VARIANTS = ("bf16",) + ONNX_VARIANTS + ("int8-batched", "torch")
#: fastest variant keeping cosine >= 0.99 to the PyTorch vectors (benchmarks/bench_encode.py)
MINILM_DEFAULT = "bf16"
#: the default on CPUs without bfloat16 matrix instructions (bf16 would run emulated there)
MINILM_FALLBACK = "int8"
#: texts per ONNX call: int8 one at a time (per-text activation scales, and the fastest on
#: mixed lengths), int8-batched and fp32 in batches
_ONNX_BATCH = {"int8": 1, "int8-batched": 32, "fp32": 32}
_FALLBACK_WARNED: list[str] = []


def _default_variant() -> str:
    ok, why = bf16_support()
    if ok:
        return MINILM_DEFAULT
    if not _FALLBACK_WARNED:  # once per process
        _FALLBACK_WARNED.append(why)
        warnings.warn(f"encoder 'minilm': {why}, so it is 'minilm:{MINILM_FALLBACK}' here (ONNX "
                      f"int8, its own cache identity) instead of 'minilm:{MINILM_DEFAULT}'; ask "
                      f"for 'minilm:{MINILM_DEFAULT}' to get the bfloat16 vectors (slow here)",
                      RuntimeWarning, stacklevel=4)
    return MINILM_FALLBACK


def _minilm(argument, **options):
    variant = _default_variant() if argument is None else str(argument).strip().lower()
    if variant not in MINILM_VARIANTS:
        raise ValueError(f"unknown MiniLM variant {argument!r}; expected 'minilm' or "
                         f"'minilm:<variant>' with variant one of {', '.join(MINILM_VARIANTS)}")
    device = options.get("device")
    torch_only = (device not in (None, "cpu")) or not options.get("normalize", True)
    workers = options.pop("workers", None)
    if workers is not None and variant != "bf16":
        raise ValueError(f"workers= is an option of 'minilm:bf16' (parallel model calls); "
                         f"this encoder is 'minilm:{variant}'")
    onnx_missing = variant != "bf16" and not HAS_ONNXRUNTIME
    if variant == "torch" or torch_only or onnx_missing:
        if variant != "torch" and argument is not None:  # an explicit CPU variant cannot run
            why = ("onnxruntime is not installed" if not torch_only
                   else f"device={device!r}, normalize={options.get('normalize', True)!r}")
            where = "PyTorch" if variant == "bf16" else "ONNX Runtime"
            raise ValueError(f"encoder 'minilm:{variant}' runs on {where} on the CPU with "
                             f"normalised vectors ({why}); use 'minilm:torch'")
        options.pop("threads", None)
        return SentenceTransformerEncoder(MINILM_NAME, **options)
    options.pop("device", None)
    options.pop("normalize", None)
    if options.get("max_seq_length") is None:
        options.pop("max_seq_length", None)
    if variant == "bf16":
        for key in ("batch_size", "threads"):
            if options.get(key) is None:
                options.pop(key, None)
        return Bf16MiniLMEncoder(workers=workers, **options)
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


#: the ``NAME:argument`` choices of built-in encoders, by canonical name (``()``: no argument);
#: a name not listed takes any argument (``precomputed:<path>``, registered encoders)
_ARGUMENTS = {"minilm": MINILM_VARIANTS, "hashing": (), "tfidf": ()}


def check_encoder_argument(scheme: str, argument: str) -> None:
    """Refuse an argument that a built-in encoder ``scheme`` does not take, without building it
    (the command line checks ``--encoder minilm:bogus`` when parsed).

    Raises
    ------
    ValueError
        One line naming the encoder and its valid arguments.

    Example
    -------
    >>> check_encoder_argument("minilm", "int8")
    >>> check_encoder_argument("minilm", "bogus")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: unknown MiniLM variant 'bogus'; expected 'minilm' or 'minilm:<variant>' with variant one of bf16, ...
    """
    name = ENCODERS.canonical(scheme) if scheme in ENCODERS else None
    choices = _ARGUMENTS.get(name)
    if choices is None:
        return
    if not choices:
        raise ValueError(f"encoder {name!r} takes no ':' argument, got {argument!r}")
    if str(argument).strip().lower() not in choices:
        raise ValueError(f"unknown MiniLM variant {argument!r}; expected 'minilm' or "
                         f"'minilm:<variant>' with variant one of {', '.join(choices)}")


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
    >>> get_encoder("minilm:bf16").identity  # doctest: +ELLIPSIS
    'torch:all-MiniLM-L6-v2|bf16|norm=1|maxlen=256|files=...'
    >>> get_encoder("minilm:int8").identity  # doctest: +ELLIPSIS
    'onnx:all-MiniLM-L6-v2|int8...|norm=1|maxlen=256|per-text|files=...'
    >>> get_encoder("minilm:int8-batched").identity  # doctest: +ELLIPSIS
    'onnx:all-MiniLM-L6-v2|int8...|norm=1|maxlen=256|files=...'
    >>> get_encoder("minilm:torch").identity  # doctest: +ELLIPSIS
    'st:sentence-transformers/all-MiniLM-L6-v2|norm=1|maxlen=default|files=...'
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
