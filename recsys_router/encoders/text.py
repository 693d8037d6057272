"""Cheap classical text encoders: feature hashing and TF-IDF + truncated SVD."""

from __future__ import annotations

import hashlib
import importlib.util
import logging
from typing import Sequence

import numpy as np

from ..errors import DataValidationError, NotFittedError
from .base import Encoder

# scikit-learn is a declared dependency, imported where an encoder first needs it: importing
# it costs about a second (scipy.stats), which every `import recsys_router` would otherwise pay
HAS_SKLEARN = importlib.util.find_spec("sklearn") is not None

__all__ = ["HashingEncoder", "TfidfEncoder", "HAS_SKLEARN"]

log = logging.getLogger(__name__)


def _need_sklearn(what: str) -> None:
    if not HAS_SKLEARN:
        raise ImportError(f"the {what} encoder needs scikit-learn: pip install scikit-learn")


class HashingEncoder(Encoder):
    """Stateless hashed word + character n-gram features, L2-normalised, dense float32.

    Word n-grams and character n-grams (inside word boundaries) are each hashed into ``dim``
    signed buckets (MurmurHash3, fixed seed, so the output is identical across runs and
    machines), each block is L2-normalised, the two are mixed with ``word_weight`` and the
    result is L2-normalised again. Signed feature hashing is itself a random projection,
    so inner products approximate those of the full n-gram space.

    Parameters
    ----------
    dim : int
        Output width.
    word_ngrams, char_ngrams : tuple of int
        n-gram ranges; ``char_ngrams=None`` disables character features.
    word_weight : float
        Weight of the word block (character block gets ``1 - word_weight``).
    cache, cache_dir, batch_size
        See :class:`~recsys_router.encoders.base.Encoder` (caching is off by default:
        hashing is faster than a disk read).

    Example
    -------
    >>> e = HashingEncoder(dim=16)
    >>> v = e.encode(["a cat", "a cat"])
    >>> bool((v[0] == v[1]).all()), round(float(np.linalg.norm(v[0])), 4)
    (True, 1.0)
    """

    def __init__(self, dim: int = 512, *, word_ngrams: tuple[int, int] = (1, 2),
                 char_ngrams: tuple[int, int] | None = (3, 5), word_weight: float = 0.5,
                 cache: bool | None = None, cache_dir=None, batch_size: int = 4096):
        _need_sklearn("hashing")
        super().__init__(cache=cache, cache_dir=cache_dir, batch_size=batch_size)
        if int(dim) < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        if not 0.0 <= word_weight <= 1.0:
            raise ValueError(f"word_weight must be in [0, 1], got {word_weight}")
        self.dim = int(dim)
        self.word_ngrams = tuple(word_ngrams)
        self.char_ngrams = None if char_ngrams is None else tuple(char_ngrams)
        self.word_weight = float(word_weight)
        self.identity = (f"hashing-v1(dim={self.dim},word={self.word_ngrams},"
                         f"char={self.char_ngrams},w={_exact(self.word_weight)})")
        from sklearn.feature_extraction.text import HashingVectorizer
        self._word = HashingVectorizer(n_features=self.dim, ngram_range=self.word_ngrams,
                                       alternate_sign=True, norm="l2", lowercase=True)
        self._char = None if self.char_ngrams is None else HashingVectorizer(
            n_features=self.dim, analyzer="char_wb", ngram_range=self.char_ngrams,
            alternate_sign=True, norm="l2", lowercase=True)

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        from sklearn.preprocessing import normalize
        x = self._word.transform(texts)
        if self._char is not None:
            x = self.word_weight * x + (1.0 - self.word_weight) * self._char.transform(texts)
        return normalize(x, norm="l2").toarray().astype(np.float32)


def _exact(x: float) -> str:
    """``x`` as text that reads back as exactly ``x``: the short ``:g`` form when it does
    (``0.5``, ``1``: identities written before stay the same), else ``repr``; distinct
    floats never share a text (``:g`` alone keeps six digits)."""
    short = f"{x:g}"
    return short if float(short) == x else repr(x)


class TfidfEncoder(Encoder):
    """TF-IDF n-gram features reduced by truncated SVD (LSA), L2-normalised. Needs ``fit``.

    When the fitted vocabulary or corpus is too small for ``dim`` components, fewer are
    learned and the output is zero-padded so that ``dim`` stays as requested.

    Parameters
    ----------
    dim : int
        Output width (SVD components).
    ngram_range : tuple of int
        Word n-gram range.
    min_df : int or float
        Ignore terms rarer than this.
    max_features : int, optional
        Keep only the most frequent terms.
    sublinear_tf : bool
        Use ``1 + log(tf)``.
    seed : int
        Random state of the randomized SVD.
    cache, cache_dir, batch_size
        See :class:`~recsys_router.encoders.base.Encoder`.

    Notes
    -----
    After ``fit`` the identity carries a fingerprint (sha1 of the settings and of the
    training texts in order); fitting is deterministic given the seed, so equal
    fingerprints mean equal fitted state.

    Example
    -------
    >>> e = TfidfEncoder(dim=2).fit(["red apple", "green apple", "blue sky"])
    >>> e.encode(["red apple"]).shape
    (1, 2)
    """

    needs_fit = True

    def __init__(self, dim: int = 256, *, ngram_range: tuple[int, int] = (1, 2), min_df=1,
                 max_features: int | None = 200_000, sublinear_tf: bool = True, seed: int = 0,
                 cache: bool | None = None, cache_dir=None, batch_size: int = 4096):
        _need_sklearn("tfidf")
        super().__init__(cache=cache, cache_dir=cache_dir, batch_size=batch_size)
        if int(dim) < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        self.dim = int(dim)
        self.ngram_range = tuple(ngram_range)
        self.min_df = min_df
        self.max_features = max_features
        self.sublinear_tf = sublinear_tf
        self.seed = seed
        self.fingerprint_: str | None = None
        self.n_components_: int | None = None
        #: fitted state (plain data): terms by column, their idf weights, the SVD basis
        self.vocab_: list[str] | None = None
        self.idf_: np.ndarray | None = None
        self.components_: np.ndarray | None = None
        self._counter = None

    @property
    def _settings(self) -> str:
        return (f"dim={self.dim},ngram={self.ngram_range},min_df={self.min_df},"
                f"max_features={self.max_features},sublinear={self.sublinear_tf},seed={self.seed}")

    @property
    def identity(self) -> str:  # type: ignore[override]
        fp = self.fingerprint_ or "unfitted"
        return f"tfidf-v1({self._settings})@{fp}"

    def fit(self, texts: Sequence[str]) -> "TfidfEncoder":
        """Learn vocabulary, IDF weights and the SVD basis from ``texts``; returns self."""
        texts = self._check_texts(texts, None)
        if not texts:
            raise DataValidationError("cannot fit the tfidf encoder on zero texts", column="text")
        from sklearn.decomposition import TruncatedSVD
        from sklearn.feature_extraction.text import TfidfVectorizer
        vec = TfidfVectorizer(ngram_range=self.ngram_range, min_df=self.min_df,
                              max_features=self.max_features, sublinear_tf=self.sublinear_tf,
                              lowercase=True)
        try:
            x = vec.fit_transform(texts)
        except ValueError as err:  # e.g. empty vocabulary
            raise DataValidationError(f"cannot fit the tfidf encoder: {err}", column="text") from err
        k = min(self.dim, x.shape[1], x.shape[0])  # randomized SVD allows k <= n_features
        svd = TruncatedSVD(n_components=k, algorithm="randomized", n_iter=7,
                           random_state=self.seed).fit(x)
        if k < self.dim:
            log.warning("tfidf encoder: only %d SVD components fit (vocabulary %d terms, %d texts); "
                        "output zero-padded to dim=%d", k, x.shape[1], x.shape[0], self.dim)
        h = hashlib.sha1(self._settings.encode())
        for t in texts:
            h.update(hashlib.sha1(t.encode("utf-8")).digest())
        terms = [""] * len(vec.vocabulary_)
        for term, col in vec.vocabulary_.items():
            terms[col] = term
        self.set_fitted(terms, vec.idf_, svd.components_, h.hexdigest()[:16])
        return self

    def set_fitted(self, vocab: Sequence[str], idf: np.ndarray, components: np.ndarray,
                   fingerprint: str) -> "TfidfEncoder":
        """Set the fitted state (terms by column, idf weights, SVD basis (k, n_terms)).

        Encoding uses only this state, so an encoder rebuilt from it (e.g. from an
        exported artifact) encodes exactly as the one that was fitted.
        """
        from sklearn.feature_extraction.text import CountVectorizer
        self.vocab_ = list(vocab)
        self.idf_ = np.asarray(idf, dtype=np.float64)
        self.components_ = np.asarray(components, dtype=np.float64)
        self.n_components_ = int(self.components_.shape[0])
        self.fingerprint_ = fingerprint
        self._counter = CountVectorizer(ngram_range=self.ngram_range, lowercase=True,
                                        vocabulary={t: i for i, t in enumerate(self.vocab_)})
        return self

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        if self._counter is None:
            raise NotFittedError("TfidfEncoder is not fitted: call fit(train_texts) before encode")
        from sklearn.preprocessing import normalize
        x = self._counter.transform(texts).astype(np.float64)  # term counts (csr)
        if self.sublinear_tf:
            np.log(x.data, x.data)
            x.data += 1.0
        x.data *= self.idf_[x.indices]
        x = normalize(x, norm="l2", copy=False)
        z = normalize(np.asarray(x @ self.components_.T, dtype=np.float64), norm="l2")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        out[:, :z.shape[1]] = z
        return out

    def encode(self, texts, query_ids=None, batch_size=None, show_progress=None) -> np.ndarray:
        if self._counter is None:
            raise NotFittedError("TfidfEncoder is not fitted: call fit(train_texts) before encode")
        return super().encode(texts, query_ids, batch_size, show_progress)
