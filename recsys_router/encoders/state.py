"""Encoders as declared data: ``encoder_state`` / ``encoder_from_state``.

Each built-in encoder kind persists its settings (JSON) and, when fitted, its learned
arrays; it is rebuilt from an explicit table of kinds (``hashing``, ``tfidf``, ``st``,
``onnx-minilm`` and ``bf16-minilm`` for the packaged MiniLM only, ``precomputed`` with its
whole embedding table). No encoder is
built from a name or path found in the data: an artifact cannot make the loader open a
file or load a model of its choosing. The cache directory is never stored. The same holds
for a router's ``encoder`` parameter, which a refit or copy of a loaded router builds:
:func:`stored_encoder_name` admits only a built-in encoder name there (``precomputed``
without its file), and :data:`PATH_OPTIONS` may not appear in its encoder options.

Example
-------
>>> from recsys_router.encoders import HashingEncoder
>>> info, arrays = encoder_state(HashingEncoder(dim=8))
>>> info["kind"], arrays
('hashing', {})
>>> encoder_from_state(info, {}, "enc").identity == HashingEncoder(dim=8).identity
True
"""

from __future__ import annotations

import numpy as np

from ..state import (BOOL, FLOAT, INT, NUM, STR, Arr, Opt, StateError, TupleOf, check_state,
                     check_value)
from .base import Encoder

__all__ = ["encoder_state", "encoder_from_state", "encoder_kind", "pack_strings", "unpack_strings",
           "ENCODER_KINDS", "save_encoder_part", "load_encoder_part", "stored_encoder_name",
           "check_stored_options", "PATH_OPTIONS", "encoder_name"]

_HASHING = {"dim": INT, "word_ngrams": TupleOf(INT, INT), "char_ngrams": Opt(TupleOf(INT, INT)),
            "word_weight": FLOAT, "batch_size": INT}
_TFIDF = {"dim": INT, "ngram_range": TupleOf(INT, INT), "min_df": NUM,
          "max_features": Opt(INT), "sublinear_tf": BOOL, "seed": INT, "batch_size": INT,
          "fingerprint": STR,
          "vocab_utf8": Arr("uint8", ("n_bytes",)), "vocab_offsets": Arr("int64", ("n_terms_1",)),
          "idf": Arr("float64", ("n_terms",)), "components": Arr("float64", ("k", "n_terms"))}
_ST = {"model_name": STR, "normalize": BOOL, "max_seq_length": Opt(INT), "batch_size": INT}
_ONNX = {"variant": STR, "max_seq_length": INT, "batch_size": INT}
_BF16 = {"max_seq_length": INT, "batch_size": INT}
_PRECOMPUTED = {"identity": STR, "batch_size": INT,
                "ids_utf8": Arr("uint8", ("n_bytes",)), "ids_offsets": Arr("int64", ("n_ids_1",)),
                "matrix": Arr("float32", ("n_ids", "dim"))}
#: bounds on stored sizes (an artifact must not make encoding allocate without limit)
_MAX_SIZE, _MAX_NGRAM = 65_536, 16
#: kind -> declared state of that encoder kind
ENCODER_KINDS = {"hashing": _HASHING, "tfidf": _TFIDF, "st": _ST, "onnx-minilm": _ONNX,
                 "bf16-minilm": _BF16, "precomputed": _PRECOMPUTED}
#: kinds that are not themselves encoder names -> the built-in name that builds that kind
#: (an ``encoder`` parameter given as an object is stored by :func:`encoder_name`; older
#: artifacts stored the kind, and ``onnx-minilm`` alone does not say which variant)
_KIND_NAMES = {"st": "minilm:torch", "onnx-minilm": "minilm", "bf16-minilm": "minilm:bf16"}


def encoder_name(enc) -> str:
    """The built-in name that builds an encoder object's kind and, for the packaged MiniLM,
    its variant: an ONNX MiniLM is ``minilm:fp32``, ``minilm:int8`` (one text per call) or
    ``minilm:int8-batched``, never ``minilm`` (bf16 on AMX CPUs: other vectors).

    Example
    -------
    >>> from recsys_router.encoders import get_encoder
    >>> encoder_name(get_encoder("minilm:int8-batched")), encoder_name(get_encoder("hashing"))
    ('minilm:int8-batched', 'hashing')
    """
    kind = encoder_kind(enc)
    if kind == "onnx-minilm":
        return "minilm:fp32" if enc.variant == "fp32" else (
            "minilm:int8" if enc.per_text else "minilm:int8-batched")
    return _KIND_NAMES.get(kind, kind)
#: built-in encoders an artifact's ``encoder`` parameter may name (after aliases)
_STORABLE = ("hashing", "tfidf", "minilm", "precomputed")
#: encoder options naming a file or folder: never written to, and refused in, an artifact
PATH_OPTIONS = ("cache_dir", "ids_path")


def stored_encoder_name(spec, where: str) -> str | None:
    """The ``encoder`` parameter an artifact may hold, or a :class:`StateError` naming
    ``where``.

    Allowed: None, a built-in encoder name or alias (``hashing``, ``tfidf``, ``minilm`` and
    ``minilm:<variant>``), ``precomputed`` without a file, and an encoder kind (mapped to the
    built-in name that builds it). Anything else (a folder, ``precomputed:<file>``, a Hub
    model id, an encoder registered only by the running program) would make a refit of the
    loaded router open a file or load a model the artifact chose.

    Example
    -------
    >>> stored_encoder_name("st", "p"), stored_encoder_name("minilm:int8", "p")
    ('minilm:torch', 'minilm:int8')
    >>> stored_encoder_name("precomputed:/etc/e.npy", "params.encoder")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    recsys_router.state.StateError: params.encoder: 'precomputed:/etc/e.npy' is not a built-in ...
    """
    from . import ENCODERS, check_encoder_argument
    if spec is None:
        return None
    if not isinstance(spec, str):
        raise StateError(f"{where}: expected an encoder name, got {type(spec).__name__}")
    key = spec.strip().lower()
    if key in _KIND_NAMES:
        return _KIND_NAMES[key]
    scheme, sep, argument = key.partition(":")
    name = ENCODERS.canonical(scheme) if scheme in ENCODERS else None
    ok = name in _STORABLE and not (sep and name == "precomputed")
    if ok and sep:
        try:
            check_encoder_argument(name, argument)
        except ValueError:
            ok = False
    if not ok:
        raise StateError(f"{where}: {spec[:120]!r} is not a built-in encoder name; an artifact may "
                         "name only hashing, tfidf, minilm, minilm:<variant> or precomputed "
                         "(without a file)")
    return spec


def check_stored_options(options, where: str) -> None:
    """Refuse encoder options read from an artifact that name a file or folder
    (:data:`PATH_OPTIONS`)."""
    bad = [k for k in PATH_OPTIONS if isinstance(options, dict) and k in options]
    if bad:
        raise StateError(f"{where}.{bad[0]}: a stored artifact may not name a file or folder")


def pack_strings(items) -> tuple[np.ndarray, np.ndarray]:
    """Strings as one UTF-8 byte array plus ``n + 1`` offsets (no object arrays).

    Example
    -------
    >>> blob, off = pack_strings(["ab", "", "é"])
    >>> unpack_strings(blob, off, "x")
    ['ab', '', 'é']
    """
    parts = [str(s).encode("utf-8") for s in items]
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(p) for p in parts], dtype=np.int64)
    return np.frombuffer(b"".join(parts), dtype=np.uint8).copy(), offsets


def unpack_strings(blob: np.ndarray, offsets: np.ndarray, where: str) -> list[str]:
    """Inverse of :func:`pack_strings`, validating the offsets and the UTF-8."""
    off = np.asarray(offsets, dtype=np.int64)
    if len(off) < 1 or off[0] != 0 or off[-1] != len(blob) or (np.diff(off) < 0).any():
        raise StateError(f"{where}: string offsets are not increasing from 0 to {len(blob)}")
    raw = bytes(np.asarray(blob, dtype=np.uint8))
    try:
        return [raw[a:b].decode("utf-8") for a, b in zip(off[:-1].tolist(), off[1:].tolist())]
    except UnicodeDecodeError as err:
        raise StateError(f"{where}: strings are not valid UTF-8 ({err})") from err


def encoder_kind(enc) -> str:
    """The kind (``hashing``, ``tfidf``...) of a built-in encoder object, fitted or not; an
    encoder of any other class is a :class:`StateError`."""
    from .bf16_minilm import Bf16MiniLMEncoder
    from .neural import SentenceTransformerEncoder
    from .onnx_minilm import OnnxMiniLMEncoder
    from .precomputed import PrecomputedEncoder
    from .text import HashingEncoder, TfidfEncoder
    for cls, kind in ((HashingEncoder, "hashing"), (TfidfEncoder, "tfidf"),
                      (SentenceTransformerEncoder, "st"), (OnnxMiniLMEncoder, "onnx-minilm"),
                      (Bf16MiniLMEncoder, "bf16-minilm"), (PrecomputedEncoder, "precomputed")):
        if type(enc) is cls:
            return kind
    raise StateError(f"encoder {type(enc).__name__} cannot be exported: only the built-in "
                     f"encoders ({', '.join(ENCODER_KINDS)}) declare their state")


def encoder_state(enc: Encoder) -> tuple[dict, dict]:
    """``(info, arrays)`` of a built-in encoder; ``info["kind"]`` names its kind."""
    kind = encoder_kind(enc)
    if kind == "hashing":
        info = {"dim": enc.dim, "word_ngrams": list(enc.word_ngrams),
                "char_ngrams": None if enc.char_ngrams is None else list(enc.char_ngrams),
                "word_weight": enc.word_weight, "batch_size": int(enc.batch_size)}
        return {"kind": kind, **info}, {}
    if kind == "tfidf":
        if enc.vocab_ is None:
            raise StateError("an unfitted tfidf encoder cannot be exported: fit it first")
        blob, off = pack_strings(enc.vocab_)
        info = {"dim": enc.dim, "ngram_range": list(enc.ngram_range), "min_df": enc.min_df,
                "max_features": enc.max_features, "sublinear_tf": bool(enc.sublinear_tf),
                "seed": int(enc.seed), "batch_size": int(enc.batch_size),
                "fingerprint": enc.fingerprint_}
        return {"kind": kind, **info}, {"vocab_utf8": blob, "vocab_offsets": off,
                                        "idf": np.asarray(enc.idf_, np.float64),
                                        "components": np.asarray(enc.components_, np.float64)}
    if kind == "st":
        from .neural import MINILM_NAME
        if enc.model_name != MINILM_NAME:
            raise StateError(f"encoder {enc.model_name!r}: an artifact may name only the packaged "
                             "MiniLM among sentence-transformers models")
        return {"kind": kind, "model_name": enc.model_name, "normalize": bool(enc.normalize),
                "max_seq_length": enc.max_seq_length, "batch_size": int(enc.batch_size)}, {}
    if kind == "onnx-minilm":  # the packaged weights; threads are the machine's business
        return {"kind": kind, "variant": enc.variant, "max_seq_length": int(enc.max_seq_length),
                "batch_size": int(enc.batch_size)}, {}
    if kind == "bf16-minilm":
        return {"kind": kind, "max_seq_length": int(enc.max_seq_length),
                "batch_size": int(enc.batch_size)}, {}
    ids, mat = enc.table()
    blob, off = pack_strings(ids)
    return ({"kind": kind, "identity": enc.stored_identity(), "batch_size": int(enc.batch_size)},
            {"ids_utf8": blob, "ids_offsets": off, "matrix": np.asarray(mat, np.float32)})


def encoder_from_state(info: dict, arrays: dict, where: str, headers: dict | None = None,
                       prefix: str = "") -> Encoder:
    """Rebuild an encoder from :func:`encoder_state` output (validated here first).

    Parameters
    ----------
    info : dict
        The JSON part (``kind`` and settings).
    arrays : dict
        Arrays by name (``prefix + name``).
    where : str
        Name used in error messages.
    headers : dict, optional
        ``name -> (dtype, shape)`` to validate against (default: from ``arrays``).
    prefix : str
        Prefix of this encoder's array names.
    """
    from .neural import MINILM_NAME, SentenceTransformerEncoder
    from .precomputed import PrecomputedEncoder
    from .text import HashingEncoder, TfidfEncoder
    if not isinstance(info, dict):
        raise StateError(f"{where}: expected an object, got {type(info).__name__}")
    kind = check_value(STR, info.get("kind"), f"{where}.kind")
    if kind not in ENCODER_KINDS:
        raise StateError(f"{where}.kind: {kind!r} is not an encoder kind ({', '.join(ENCODER_KINDS)})")
    if headers is None:
        headers = {k: (v.dtype, v.shape) for k, v in arrays.items()}
    mine = {k: v for k, v in headers.items() if k.startswith(prefix)}
    v = check_state(ENCODER_KINDS[kind], {k: x for k, x in info.items() if k != "kind"}, mine,
                    {}, prefix)
    if not 1 <= v["batch_size"] <= _MAX_SIZE or not 1 <= v.get("dim", 1) <= _MAX_SIZE:
        raise StateError(f"{where}: dim and batch_size must be in [1, {_MAX_SIZE}]")
    for key in ("word_ngrams", "char_ngrams", "ngram_range"):
        lo_hi = v.get(key)
        if lo_hi is not None and not 1 <= lo_hi[0] <= lo_hi[1] <= _MAX_NGRAM:
            raise StateError(f"{where}.{key}: expected 1 <= min <= max <= {_MAX_NGRAM}, got {lo_hi}")
    if kind == "hashing":
        return HashingEncoder(v["dim"], word_ngrams=v["word_ngrams"], char_ngrams=v["char_ngrams"],
                              word_weight=v["word_weight"], batch_size=v["batch_size"])
    if kind == "st":
        if v["model_name"] != MINILM_NAME:
            raise StateError(f"{where}.model_name: {v['model_name']!r} is not the packaged MiniLM; "
                             "an artifact may only name built-in encoders")
        try:  # the class bounds the length by MiniLM's 512 positions
            return SentenceTransformerEncoder(MINILM_NAME, normalize=v["normalize"],
                                              max_seq_length=v["max_seq_length"],
                                              batch_size=v["batch_size"])
        except ValueError as err:
            raise StateError(f"{where}: {err}") from err
    if kind == "onnx-minilm":
        from .onnx_minilm import OnnxMiniLMEncoder
        try:  # the class checks variant and length against its own fixed choices
            return OnnxMiniLMEncoder(v["variant"], max_seq_length=v["max_seq_length"],
                                     batch_size=v["batch_size"])
        except ValueError as err:
            raise StateError(f"{where}: {err}") from err
    if kind == "bf16-minilm":
        from .bf16_minilm import Bf16MiniLMEncoder
        try:  # the class checks the length against its own fixed range
            return Bf16MiniLMEncoder(max_seq_length=v["max_seq_length"], batch_size=v["batch_size"])
        except ValueError as err:
            raise StateError(f"{where}: {err}") from err
    if kind == "precomputed":
        ids = unpack_strings(arrays[prefix + "ids_utf8"], arrays[prefix + "ids_offsets"], where)
        return PrecomputedEncoder(None, table=(ids, arrays[prefix + "matrix"]),
                                  identity=v["identity"], batch_size=v["batch_size"])
    vocab = unpack_strings(arrays[prefix + "vocab_utf8"], arrays[prefix + "vocab_offsets"], where)
    if len(vocab) != len(arrays[prefix + "idf"]) or len(set(vocab)) != len(vocab):
        raise StateError(f"{where}: the vocabulary must list {len(arrays[prefix + 'idf'])} "
                         "distinct terms, one per idf weight")
    if arrays[prefix + "components"].shape[0] > v["dim"]:
        raise StateError(f"{where}: more SVD components than dim={v['dim']}")
    enc = TfidfEncoder(v["dim"], ngram_range=v["ngram_range"], min_df=v["min_df"],
                       max_features=v["max_features"], sublinear_tf=v["sublinear_tf"],
                       seed=v["seed"], batch_size=v["batch_size"])
    enc.set_fitted(vocab, arrays[prefix + "idf"], arrays[prefix + "components"], v["fingerprint"])
    return enc


def save_encoder_part(name: str, enc) -> tuple[dict, dict]:
    """``({name: info}, {name/array: ndarray})`` for a router's encoder part."""
    info, arrays = encoder_state(enc)
    return {name: info}, {f"{name}/{k}": v for k, v in arrays.items()}


def load_encoder_part(name: str, fields: dict, arrays: dict, where: str) -> Encoder:
    """The encoder stored by :func:`save_encoder_part` (validated first)."""
    return encoder_from_state(fields[name], arrays, f"{where}: {name}", prefix=f"{name}/",
                              headers={k: (v.dtype, v.shape) for k, v in arrays.items()})
