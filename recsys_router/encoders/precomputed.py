"""Embeddings computed elsewhere, looked up by query id (``precomputed:<path>``)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from ..errors import DataValidationError
from .base import Encoder

__all__ = ["PrecomputedEncoder", "sidecar_ids_path"]

_SIDE_SUFFIXES = (".ids.txt", ".ids.json", "_ids.txt", "_ids.json")
#: numpy dtype kinds read as embedding values: signed and unsigned integers, floats
_REAL = "iuf"


def sidecar_ids_path(npy_path: str | Path) -> Path | None:
    """The ids file next to a ``.npy`` matrix: ``<stem>.ids.txt|.ids.json|_ids.txt|_ids.json``."""
    p = Path(npy_path)
    stem = p.with_suffix("")
    for suf in _SIDE_SUFFIXES:
        cand = stem.parent / (stem.name + suf)
        if cand.exists():
            return cand
    return None


def _json_type(value) -> str:
    """What JSON calls the type of a parsed value."""
    for kind, name in ((bool, "boolean"), (str, "string"), (dict, "object"), (list, "list"),
                       ((int, float), "number")):
        if isinstance(value, kind):
            return name
    return "null"


def _read_ids(side: Path) -> list[str]:
    """The query ids of a ``.npy`` matrix's sidecar: a UTF-8 text file of one id per line, or
    (``.json``) a JSON list of strings; anything else is an error naming the file and its
    line or list item, counted from 1."""
    try:
        text = side.read_bytes().decode("utf-8")
    except UnicodeDecodeError as err:
        line = side.read_bytes()[:err.start].count(b"\n") + 1  # file lines count from 1
        raise DataValidationError(f"ids file is not UTF-8 (byte {err.start}); expected one "
                                  f"query_id per line", source=str(side), row=line) from err
    except OSError as err:
        raise DataValidationError(f"cannot read the ids file ({err.strerror or err})",
                                  source=str(side)) from err
    if side.suffix != ".json":
        ids = [ln.rstrip("\r\n") for ln in text.splitlines()]
        while ids and ids[-1] == "":
            ids.pop()
        return ids
    try:
        ids = json.loads(text)
    except ValueError as err:  # JSONDecodeError, and over-deep nesting
        raise DataValidationError(f"ids file is not valid JSON ({err}); expected a JSON list "
                                  f"of query ids", source=str(side)) from err
    except RecursionError as err:
        raise DataValidationError("ids file nests too deep; expected a JSON list of query ids",
                                  source=str(side)) from err
    if not isinstance(ids, list):
        raise DataValidationError(f"ids file holds a JSON {_json_type(ids)}; expected a "
                                  f"JSON list of query ids (strings)", source=str(side))
    for r, x in enumerate(ids):
        if not isinstance(x, str):
            raise DataValidationError(f"query id {x!r} is a JSON {_json_type(x)}; expected a "
                                      f"string", source=str(side), row=r + 1)
    return ids


def _check_ids(ids: list, source: str, first_row: int) -> list[str]:
    """``ids`` when every one is a non-empty string; a missing (None) or empty (or blank)
    id is an error naming ``source`` and its row (counted from ``first_row``): its vector
    could never be looked up, and an artifact's digest of the ids needs strings."""
    for r, q in enumerate(ids):
        if not isinstance(q, str) or not q.strip():
            raise DataValidationError(f"missing or empty query_id {q!r}; expected a non-empty "
                                      f"id", source=source, row=r + first_row, column="query_id")
    return ids


class PrecomputedEncoder(Encoder):
    """Look up stored embeddings by query id; texts are ignored.

    Accepted files:

    * ``.npy`` of shape ``(n, dim)`` with a sidecar ids file (see :func:`sidecar_ids_path`:
      one id per line, or a JSON list of strings), or ``ids_path=``;
    * ``.parquet`` with a ``query_id`` column and either one list/array column (named by
      ``column=``, default ``"embedding"`` when present) or numeric columns (all of them
      except ``query_id``, in file order).

    Every id must be a non-empty string, unique, and the values finite integers or floats
    (not booleans or complex numbers), at least one row of width at least 1; anything else
    is a :class:`~recsys_router.errors.DataValidationError` naming the file (and row).

    Parameters
    ----------
    path : str or path
        The file.
    ids_path : str or path, optional
        Ids file for a ``.npy`` matrix (overrides the sidecar lookup).
    column : str, optional
        Embedding list column of a parquet file.
    table : (ids, matrix), optional
        Use these in-memory embeddings instead of a file (``path`` is then ignored).
    identity : str, optional
        Identity of an in-memory table (the one it had when it was read from its file).

    Example
    -------
    >>> import tempfile, os
    >>> d = tempfile.mkdtemp(); np.save(os.path.join(d, "e.npy"), np.eye(2, dtype=np.float32))
    >>> _ = open(os.path.join(d, "e.ids.txt"), "w").write("q1\\nq2\\n")
    >>> PrecomputedEncoder(os.path.join(d, "e.npy")).encode(["", ""], ["q2", "q1"]).tolist()
    [[0.0, 1.0], [1.0, 0.0]]
    """

    needs_text = False

    def __init__(self, path, *, ids_path=None, column: str | None = None, batch_size: int = 64,
                 table: tuple | None = None, identity: str | None = None, **_ignored):
        super().__init__(cache=False, batch_size=batch_size)
        self.ids_path = ids_path
        self.column = column
        if table is not None:  # an in-memory table (e.g. restored from an artifact): no file
            self.path = Path(identity or "precomputed")
            ids, mat = [str(i) for i in table[0]], np.asarray(table[1], dtype=np.float32)
        else:
            self.path = Path(path).expanduser()
            if not self.path.exists():
                raise FileNotFoundError(f"precomputed embeddings file not found: {self.path}")
            ids, mat = self._read()
        if mat.ndim != 2 or len(ids) != mat.shape[0]:
            raise DataValidationError(f"{len(ids)} ids but an embedding matrix of shape "
                                      f"{mat.shape}; expected one row per id", source=str(self.path))
        if mat.shape[0] == 0 or mat.shape[1] == 0:  # width 0: every query the same features
            raise DataValidationError(f"an embedding matrix of shape {mat.shape}; expected at "
                                      f"least one query and one number per query",
                                      source=str(self.path))
        if not np.isfinite(mat).all():
            r = int(np.flatnonzero(~np.isfinite(mat).all(axis=1))[0])
            raise DataValidationError(f"non-finite embedding for query {ids[r]!r}",
                                      source=str(self.path), row=r)
        index = pd.Index(ids)
        if index.has_duplicates:
            r = int(np.flatnonzero(index.duplicated())[0])
            raise DataValidationError(f"duplicate query_id {ids[r]!r}; expected unique ids",
                                      source=str(self.path), row=r, column="query_id")
        self._index, self._mat = index, mat
        self.dim = int(mat.shape[1])
        if table is not None:
            self.identity = identity or f"precomputed:table@{len(ids)}x{self.dim}"
            return
        st = self.path.stat()
        stamp = hashlib.sha1(f"{self.path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode())
        self.identity = f"precomputed:{self.path.resolve()}@{stamp.hexdigest()[:12]}"

    def _read(self) -> tuple[list[str], np.ndarray]:
        p = self.path
        if p.suffix == ".npy":
            try:
                mat = np.load(p, allow_pickle=False)
            except (OSError, ValueError, EOFError) as err:  # object array, truncated, not .npy
                raise DataValidationError(f"cannot read the embedding matrix ({err}); expected "
                                          f"a numeric .npy array", source=str(p)) from err
            if mat.dtype.kind not in _REAL:  # bool, complex (imaginary parts), text, dates
                raise DataValidationError(f"embedding matrix of dtype {mat.dtype}; expected "
                                          f"numbers (an integer or float dtype)", source=str(p))
            side = Path(self.ids_path) if self.ids_path is not None else sidecar_ids_path(p)
            if side is None:
                raise DataValidationError(
                    f"no ids file for the embedding matrix; expected one of "
                    f"{[p.with_suffix('').name + s for s in _SIDE_SUFFIXES]} next to it "
                    f"(one query_id per line) or ids_path=", source=str(p))
            ids = _read_ids(side)
            return _check_ids(ids, str(side), 1), np.asarray(mat, dtype=np.float32)
        if p.suffix in (".parquet", ".pq"):
            try:
                df = pd.read_parquet(p)
            except Exception as err:  # pyarrow raises its own types for a file it cannot read
                raise DataValidationError(f"cannot read the parquet file ({type(err).__name__}: "
                                          f"{err})", source=str(p)) from err
            if "query_id" not in df.columns:
                raise DataValidationError(f"no 'query_id' column; columns: {list(df.columns)}",
                                          source=str(p), column="query_id")
            qid = df["query_id"]
            # null or nested (list, dict) ids: None, refused with their row by _check_ids
            bad = (qid.isna() | qid.map(lambda v: isinstance(v, (list, tuple, dict, np.ndarray)))
                   ).to_numpy(dtype=bool)
            ids = _check_ids([None if b else s for b, s in zip(bad, qid.astype(str).tolist())],
                             str(p), 0)
            col = self.column or ("embedding" if "embedding" in df.columns else None)
            if col is not None:
                if col not in df.columns:
                    raise DataValidationError(f"no embedding column {col!r}; columns: "
                                              f"{list(df.columns)}", source=str(p), column=col)
                lens = df[col].map(lambda v: -1 if v is None else len(v)).to_numpy()
                if len(set(lens.tolist())) > 1 or (lens < 0).any():
                    r = int(np.flatnonzero(lens != lens[0])[0]) if (lens >= 0).all() else \
                        int(np.flatnonzero(lens < 0)[0])
                    raise DataValidationError(f"embedding of query {ids[r]!r} has length "
                                              f"{lens[r]}, expected {lens[0]}", source=str(p),
                                              row=r, column=col)
                rows = []
                for r, v in enumerate(df[col]):
                    try:
                        if isinstance(v, (str, bytes)):
                            raise ValueError(f"a {type(v).__name__}")
                        a = np.asarray(v)
                        if a.size and a.dtype.kind not in _REAL:  # bool, complex, nulls
                            raise ValueError(f"values of dtype {a.dtype}")
                        rows.append(np.asarray(a, dtype=np.float32))
                    except (TypeError, ValueError) as err:
                        raise DataValidationError(f"embedding of query {ids[r]!r} is not a list "
                                                  f"of numbers ({err})", source=str(p), row=r,
                                                  column=col) from err
                mat = np.stack(rows) if rows else np.zeros((0, 0), np.float32)
                return ids, mat
            num = [c for c in df.columns if c != "query_id"]
            bad = [c for c in num if not pd.api.types.is_numeric_dtype(df[c])
                   or df[c].dtype.kind not in _REAL]   # bool and complex are not features
            if bad or not num:
                raise DataValidationError(f"expected an 'embedding' list column or numeric "
                                          f"(integer or float) columns; non-numeric: {bad}",
                                          source=str(p))
            return ids, df[num].to_numpy(dtype=np.float32)
        raise DataValidationError(f"unsupported embeddings file type {p.suffix!r}; expected "
                                  f".npy (+ ids sidecar) or .parquet", source=str(p))

    def stored_identity(self) -> str:
        """The identity an artifact records: the table's size and a digest of its ids and
        vectors, never the file's path (a folder name of this machine's, which an exported
        artifact must not carry); an in-memory table keeps the identity it was given.

        Example
        -------
        >>> enc = PrecomputedEncoder(None, table=(["a", "b"], np.eye(2)))
        >>> enc.stored_identity()
        'precomputed:table@2x2'
        >>> PrecomputedEncoder(None, table=(["a", "b"], np.eye(2)),
        ...                    identity="precomputed:/home/me/e.npy@1").stored_identity()  # doctest: +ELLIPSIS
        'precomputed:table@2x2#...'
        """
        if self.identity.startswith("precomputed:table@"):
            return self.identity
        ids, mat = self.table()
        digest = hashlib.sha1("\n".join(ids).encode("utf-8", "surrogatepass"))
        digest.update(np.ascontiguousarray(mat, dtype="<f4").tobytes())
        return f"precomputed:table@{len(ids)}x{self.dim}#{digest.hexdigest()[:12]}"

    def table(self) -> tuple[list[str], np.ndarray]:
        """The stored ``(query ids, embedding matrix)``."""
        return list(self._index), self._mat

    def encode(self, texts: Sequence[str] | None, query_ids: Sequence[str] | None = None,
               batch_size: int | None = None, show_progress: bool | None = None) -> np.ndarray:
        """Rows for ``query_ids`` (required); ``texts`` are ignored."""
        if query_ids is None:
            raise ValueError("precomputed embeddings are looked up by query id: pass query_ids=")
        ids = [str(q) for q in query_ids]
        if texts is not None and len(texts) != len(ids):
            raise ValueError(f"{len(texts)} texts but {len(ids)} query_ids")
        pos = self._index.get_indexer(ids)
        if (pos < 0).any():
            miss = [q for q, p in zip(ids, pos) if p < 0]
            raise DataValidationError(f"no precomputed embedding for query_id {miss[0]!r} "
                                      f"({len(miss)} of {len(ids)} ids missing)",
                                      source=str(self.path), column="query_id")
        return self._mat[pos]      # (integer-array indexing: already a new array)
