"""Embed a dataset's query texts once and serve the rows to every router and fold."""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

__all__ = ["SharedEmbeddings", "share_encoder"]


class SharedEmbeddings:
    """Encoder stand-in holding precomputed embeddings of one dataset's queries.

    ``encode(texts, query_ids)`` returns the stored rows when every id is known and its
    text matches; anything else is passed to the wrapped encoder.

    Parameters
    ----------
    base : Encoder
        The encoder that produced the rows (used for unknown queries).
    query_ids, texts : sequence of str
        The dataset's queries, in the order of ``matrix`` rows.
    matrix : ndarray, shape (n_queries, dim)

    Example
    -------
    >>> from recsys_router.encoders import get_encoder
    >>> enc = get_encoder("hashing", dim=8)
    >>> shared = SharedEmbeddings(enc, ["a"], ["hello"], enc.encode(["hello"]))
    >>> bool(np.allclose(shared.encode(["hello"], query_ids=["a"]), enc.encode(["hello"])))
    True
    >>> from recsys_router.data import RoutingData
    >>> d = RoutingData(pd.DataFrame({"query_id": ["a"], "text": ["hello"]}), ["x"], [[1.0]])
    >>> shared.encode_data(d).shape
    (1, 8)
    """

    needs_fit = False
    needs_text = True

    def __init__(self, base, query_ids: Sequence[str], texts: Sequence[str], matrix: np.ndarray):
        self.base = base
        self.matrix = np.asarray(matrix)
        self.texts = np.asarray(list(texts), dtype=object)
        self._index = pd.Index([str(q) for q in query_ids])
        self.dim = self.matrix.shape[1]
        self.identity = getattr(base, "identity", repr(base))

    def fit(self, texts) -> "SharedEmbeddings":
        return self

    def encode(self, texts: Sequence[str], query_ids: Sequence[str] | None = None,
               **kwargs) -> np.ndarray:
        texts = list(texts)
        if query_ids is not None and len(query_ids) == len(texts):
            pos = self._index.get_indexer([str(q) for q in query_ids])
            if (pos >= 0).all() and list(self.texts[pos]) == texts:
                return self.matrix[pos]
        return self.base.encode(texts, query_ids=query_ids, **kwargs)

    def encode_data(self, data, **kwargs) -> np.ndarray:
        """Rows for every query of a :class:`~recsys_router.data.RoutingData` (row order)."""
        if data.has_text:
            return self.encode(list(data.texts), query_ids=list(data.query_ids), **kwargs)
        return self.base.encode_data(data, **kwargs)

    def __repr__(self) -> str:
        return f"SharedEmbeddings({self.identity}, {len(self._index)} queries)"


def share_encoder(name, data) -> SharedEmbeddings | None:
    """Encode every query text of ``data`` once with encoder ``name``.

    Returns None when the data has no texts or the encoder must be fitted on each train
    split (e.g. TF-IDF), where sharing would leak test vocabulary.
    """
    from ..encoders import get_encoder  # noqa: PLC0415
    if not data.has_text:
        return None
    enc = get_encoder(name)
    if getattr(enc, "needs_fit", False):
        return None
    matrix = enc.encode(list(data.texts), query_ids=list(data.query_ids))
    return SharedEmbeddings(enc, data.query_ids, data.texts, matrix)
