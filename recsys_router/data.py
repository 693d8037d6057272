"""The central routing-data type: a validated query x LLM interaction matrix.

Queries are users, LLMs are items. ``scores[i, j]`` is how LLM ``j`` did on query
``i`` (NaN when not observed) and ``costs[i, j]`` what it cost (USD or a proxy).
"""

from __future__ import annotations

import logging
from typing import Iterable, Iterator, Sequence

import numpy as np
import pandas as pd
from scipy import sparse

from .data_summary import _nanmean_cols, data_summary, llm_summary  # noqa: F401
from .data_tables import check_values, llm_table, query_table
from .errors import DataValidationError
from .hyperparams import check_number
from .long_table import RowOffset, float32_matrix, long_to_matrix, matrix_to_long
from .splitting import split_indices

__all__ = ["RoutingData", "LLM_COLUMNS", "QUERY_COLUMNS", "MAX_TASK_CHARS"]

log = logging.getLogger(__name__)

QUERY_COLUMNS = ("query_id", "text", "task", "split")
LLM_COLUMNS = ("name", "input_price", "output_price", "size", "description")
#: the longest task label a routing request (``route(tasks=)``, ``POST /route``) or a
#: decision-log row may give
MAX_TASK_CHARS = 1_000


class RoutingData:
    """A validated query x LLM matrix of scores and (optionally) costs.

    Parameters
    ----------
    queries : pandas.DataFrame or sequence of str
        One row per query with column ``query_id`` (str, unique) and optionally ``text``,
        ``task``, ``split`` and any extra columns. A sequence is taken as query ids.
    llms : pandas.DataFrame or sequence of str
        One row per LLM with column ``name`` (unique) and optionally ``input_price``,
        ``output_price`` (USD per 1M tokens), ``size`` (billions of parameters), ``description``.
        Prices and sizes are finite numbers >= 0 or missing (unknown).
    scores : array-like, shape (n_queries, n_llms)
        Performance; NaN marks an unobserved cell. Stored as float32.
    costs : array-like, shape (n_queries, n_llms), optional
        Cost per query (NaN where unknown). Must be >= 0.
    name : str
        Dataset name used in reports.
    source : str, optional
        File or folder the data came from; named in every validation error.
    meta : dict, optional
        Free-form provenance (e.g. ``{"simulated": True}``).
    require_observed : bool
        If True, every query and every LLM must have at least one observed score.

    Example
    -------
    >>> d = RoutingData(["q1", "q2"], ["a", "b"], [[1, 0], [0, np.nan]])
    >>> d.shape
    (2, 2)
    >>> int(d.observed.sum())
    3
    """

    def __init__(self, queries, llms, scores, costs=None, *, name: str = "data",
                 source: str | None = None, meta: dict | None = None,
                 require_observed: bool = False):
        self.name = name
        self.source = source
        self.meta = dict(meta or {})
        self.queries = self._make_queries(queries, source)
        self.llms = self._make_llms(llms, source)
        shape = (len(self.queries), len(self.llms))
        if shape[0] == 0:
            raise DataValidationError("no queries: expected at least one query row", source=source)
        if shape[1] == 0:
            raise DataValidationError("no LLMs: expected at least one LLM", source=source)
        self.scores = float32_matrix(scores, "scores", shape, source)
        self.costs = None if costs is None else float32_matrix(costs, "costs", shape, source)
        self._validate_values(require_observed)

    @classmethod
    def _trusted(cls, queries: pd.DataFrame, llms: pd.DataFrame, scores: np.ndarray,
                 costs: np.ndarray | None = None, *, name: str = "data") -> "RoutingData":
        """Assemble from parts the caller has already validated (the serving fast path).

        ``queries`` and ``llms`` must already have the columns and types ``__init__`` makes;
        ``scores``/``costs`` float32 of shape (n_queries, n_llms). Nothing is checked here.
        """
        self = cls.__new__(cls)
        self.name, self.source, self.meta = name, None, {}
        self.queries, self.llms, self.scores, self.costs = queries, llms, scores, costs
        return self

    # ------------------------------------------------------------------ construction helpers
    # the checks live in data_tables (kept under their old names here)
    _make_queries = staticmethod(query_table)
    _make_llms = staticmethod(llm_table)

    def _validate_values(self, require_observed: bool) -> None:
        check_values(self, require_observed)

    # ------------------------------------------------------------------ from a long table
    @classmethod
    def from_long(cls, df: pd.DataFrame, *, duplicates: str = "error", llms: pd.DataFrame | None = None,
                  name: str = "data", source: str | None = None, meta: dict | None = None,
                  row_offset: RowOffset = 0, max_cells: int | None = None,
                  labels: str = "error") -> "RoutingData":
        """Build from a long table with one row per (query, LLM) record.

        Parameters
        ----------
        df : pandas.DataFrame
            Columns ``query_id``, ``model``, ``score``; optional ``cost``, ``text``, ``task``,
            ``split`` and extra per-query columns (first non-null value per query is kept;
            two different ``task`` or ``split`` labels on one query's records are an error
            unless ``labels="first"``);
            ``query_text`` (the name :meth:`to_long` writes) is read as ``text``. Queries and
            LLMs are ordered by first appearance, or by category order for categorical
            ``query_id`` / ``model`` columns (the fast path for very large tables).
        duplicates : {"error", "mean", "first", "last"}
            What to do with repeated (query, LLM) records. ``"error"`` raises naming the rows.
        llms : pandas.DataFrame, optional
            LLM metadata (column ``name``); LLMs in it but absent from ``df`` are kept.
        row_offset : int or callable
            Added to row numbers in error messages (e.g. 1 for files with a header line),
            or a function mapping a 0-based record index to the row to report (the file
            line of a record that spans several lines).
        max_cells : int, optional
            Refuse a table whose ids span a larger queries x LLMs matrix (default:
            :func:`recsys_router.long_table.cell_limit`, linear in the records).
        labels : {"error", "first"}
            A query with two different ``task``/``split`` labels: raise naming both rows,
            or keep the first (logged).

        Returns
        -------
        RoutingData

        Example
        -------
        >>> df = pd.DataFrame({"query_id": ["a", "a", "b"], "model": ["x", "y", "x"],
        ...                    "score": [1.0, 0.0, 0.5]})
        >>> RoutingData.from_long(df).scores.tolist()
        [[1.0, 0.0], [0.5, nan]]
        """
        queries, llm_table, scores, costs, n_dup = long_to_matrix(
            df, duplicates=duplicates, llms=None if llms is None else cls._make_llms(llms, source),
            name=name, source=source, row_offset=row_offset, max_cells=max_cells, labels=labels)
        return cls(queries, llm_table, scores, costs, name=name, source=source,
                   meta={**(meta or {}), "merged_duplicates": n_dup})

    # ------------------------------------------------------------------ basic properties
    @property
    def shape(self) -> tuple[int, int]:
        return self.scores.shape

    @property
    def n_queries(self) -> int:
        return self.scores.shape[0]

    @property
    def n_llms(self) -> int:
        return self.scores.shape[1]

    @property
    def query_ids(self) -> list[str]:
        return self.queries["query_id"].tolist()

    @property
    def llm_names(self) -> list[str]:
        return self.llms["name"].tolist()

    @property
    def texts(self) -> list[str | None]:
        return self.queries["text"].tolist()

    @property
    def tasks(self) -> np.ndarray:
        return self.queries["task"].to_numpy()

    @property
    def has_text(self) -> bool:
        return bool(self.queries["text"].notna().all())

    @property
    def observed(self) -> np.ndarray:
        """Boolean mask of observed score cells."""
        return ~np.isnan(self.scores)

    @property
    def density(self) -> float:
        return float(self.observed.mean())

    @property
    def is_binary(self) -> bool:
        s = self.scores[self.observed]
        return bool(np.all((s == 0) | (s == 1)))

    def llm_index(self, names: Iterable[str]) -> np.ndarray:
        """Column indices of the given LLM names; raises naming any unknown one."""
        idx = pd.Index(self.llm_names)
        names = list(names)
        pos = idx.get_indexer(names)
        if (pos < 0).any():
            bad = [n for n, p in zip(names, pos) if p < 0]
            raise KeyError(f"unknown LLM(s) {bad}; known: {self.llm_names}")
        return pos

    def __len__(self) -> int:
        return self.n_queries

    def __repr__(self) -> str:
        return (f"RoutingData(name={self.name!r}, queries={self.n_queries}, llms={self.n_llms}, "
                f"density={self.density:.3f}, costs={'yes' if self.costs is not None else 'no'})")

    # ------------------------------------------------------------------ views
    def to_dense(self, fill: float | None = None) -> np.ndarray:
        """Score matrix copy; ``fill`` replaces NaN when given."""
        out = self.scores.copy()
        if fill is not None:
            out[np.isnan(out)] = fill
        return out

    def to_csr(self, what: str = "scores") -> sparse.csr_matrix:
        """``scipy.sparse`` CSR of observed cells (zeros that were observed are stored explicitly)."""
        mat = self.scores if what == "scores" else self.costs
        if mat is None:
            raise ValueError(f"this dataset has no {what}")
        i, j = np.nonzero(self.observed)
        return sparse.csr_matrix((mat[i, j], (i, j)), shape=self.shape, dtype=np.float32)

    def to_long(self) -> pd.DataFrame:
        """Long table: one row per observed (query, LLM) cell, in the generic interchange format.

        See :func:`recsys_router.long_table.matrix_to_long` (a query column named like a
        record column is renamed, never overwrites it).

        Example
        -------
        >>> q = pd.DataFrame({"query_id": ["q1"], "score": [0.5]})
        >>> RoutingData(q, ["a"], [[1.0]]).to_long().columns.tolist()
        ['query_id', 'model', 'score', 'query_score']
        """
        return matrix_to_long(self.queries, self.llms["name"], self.scores, self.costs,
                              source=self.source or self.name)

    def selection_vectors(self, ratio: float = 0.95) -> np.ndarray:
        """RouterEval selection vectors, shape (n_queries, n_llms), float32 of 0/1.

        For binary scores an LLM is selected when it is correct (score 1). For continuous
        scores it is selected when ``score >= ratio * max_j score`` of that query (``ratio``
        in (0, 1]; and the best score is > 0). Unobserved cells are 0. A query where no LLM is correct is all-zero.
        """
        ratio = check_number(ratio, "ratio (selection-vector ratio)", low=0, high=1,
                             low_open=True)
        s = np.nan_to_num(self.scores, nan=-np.inf)
        if self.is_binary:
            return (s == 1).astype(np.float32)
        best = s.max(axis=1, keepdims=True)
        return ((s >= ratio * best) & (best > 0) & np.isfinite(s)).astype(np.float32)

    def mean_costs(self) -> np.ndarray:
        """Mean observed cost per LLM (NaN for an LLM with no cost)."""
        if self.costs is None:
            return np.full(self.n_llms, np.nan)
        return _nanmean_cols(self.costs)

    def llm_summary(self) -> pd.DataFrame:
        """One row per LLM: observed count, mean/std score, mean cost, prices, size."""
        return llm_summary(self)

    def summary(self) -> dict:
        """Headline numbers: counts, density, score range, tasks, splits."""
        return data_summary(self)

    # ------------------------------------------------------------------ operations
    def subset(self, queries=None, llms=None, *, name: str | None = None) -> "RoutingData":
        """Rows/columns by integer index, boolean mask, or ids/names.

        Example
        -------
        >>> d = RoutingData(["q1", "q2"], ["a", "b"], [[1, 0], [0, 1]])
        >>> d.subset(llms=["b"]).scores.tolist()
        [[0.0], [1.0]]
        """
        qi = self._resolve(queries, self.n_queries, self.queries["query_id"], "query")
        li = self._resolve(llms, self.n_llms, self.llms["name"], "LLM")
        scores = self.scores[np.ix_(qi, li)]
        costs = None if self.costs is None else self.costs[np.ix_(qi, li)]
        return RoutingData(self.queries.iloc[qi], self.llms.iloc[li], scores, costs,
                           name=name or self.name, source=self.source, meta=self.meta)

    @staticmethod
    def _resolve(sel, n, labels: pd.Series, what: str) -> np.ndarray:
        if sel is None:
            return np.arange(n)
        arr = np.asarray(sel)
        if arr.dtype == bool:
            if arr.shape != (n,):
                raise ValueError(f"{what} mask has shape {arr.shape}, expected ({n},)")
            return np.flatnonzero(arr)
        if arr.size and arr.dtype.kind in "iu":
            if arr.min() < -n or arr.max() >= n:
                raise IndexError(f"{what} index out of range for {n} {what}s")
            return arr.astype(np.int64)
        pos = pd.Index(labels.astype(str)).get_indexer([str(x) for x in arr])
        if (pos < 0).any():
            bad = [x for x, p in zip(arr, pos) if p < 0][:5]
            raise KeyError(f"unknown {what}(s): {bad}")
        return pos

    @staticmethod
    def concat(parts: Sequence["RoutingData"], *, name: str | None = None) -> "RoutingData":
        """Stack datasets over queries; LLMs are the union (missing cells become NaN)."""
        if not parts:
            raise ValueError("concat needs at least one dataset")
        names = list(dict.fromkeys(n for p in parts for n in p.llm_names))
        llm_rows = {}
        for p in parts:
            for _, r in p.llms.iterrows():
                llm_rows.setdefault(r["name"], r)
        llms = pd.DataFrame([llm_rows[n] for n in names]).reset_index(drop=True)
        any_cost = any(p.costs is not None for p in parts)
        blocks_s, blocks_c = [], []
        for p in parts:
            pos = pd.Index(names).get_indexer(p.llm_names)
            s = np.full((p.n_queries, len(names)), np.nan, np.float32)
            s[:, pos] = p.scores
            blocks_s.append(s)
            if any_cost:
                c = np.full_like(s, np.nan)
                if p.costs is not None:
                    c[:, pos] = p.costs
                blocks_c.append(c)
        queries = pd.concat([p.queries for p in parts], ignore_index=True)
        return RoutingData(queries, llms, np.vstack(blocks_s),
                           np.vstack(blocks_c) if any_cost else None,
                           name=name or "+".join(dict.fromkeys(p.name for p in parts)),
                           source=parts[0].source, meta=parts[0].meta)

    def split(self, ratios: Sequence[float] | None = (0.8, 0.1, 0.1), *, seed: int = 0,
              column: str | None = None, ood_tasks: Sequence[str] | None = None,
              stratify_task: bool = False) -> dict[str, "RoutingData"]:
        """Split queries into train/val/test.

        Parameters
        ----------
        ratios : sequence of float
            Train/val/test fractions (2 or 3 finite values >= 0 summing to 1) for a seeded
            random split.
        seed : int
            Random seed.
        column : str, optional
            Use this query column (e.g. ``"split"``) as given; its values become the keys.
            Labels are trimmed and lower-cased; ``"validation"``/``"valid"``/``"dev"`` are read
            as ``"val"``; any label other than train/val/test is an error naming the query.
        ood_tasks : sequence of str, optional
            Out-of-domain split: queries of these tasks form ``test``; the rest (queries
            without a task included) are split into train/val by the first two ratios
            (renormalised).
        stratify_task : bool
            Split each task separately with the same ratios (in-domain per-task split); the
            queries without a task are one more group, so every query lands in a part.

        Returns
        -------
        dict
            ``{"train": RoutingData, "val": ..., "test": ...}`` (empty parts are omitted).
        """
        parts = split_indices(self.queries, ratios, seed=seed, column=column, ood_tasks=ood_tasks,
                              stratify_task=stratify_task, source=self.source)
        return {k: self.subset(v, name=self.name) for k, v in parts.items()}

    def kfold(self, k: int = 5, *, seed: int = 0) -> Iterator[tuple["RoutingData", "RoutingData"]]:
        """Yield ``(train, test)`` for each of ``k`` seeded folds over queries."""
        if k < 2 or k > self.n_queries:
            raise ValueError(f"k must be in [2, {self.n_queries}], got {k}")
        perm = np.random.default_rng(seed).permutation(self.n_queries)
        folds = np.array_split(perm, k)
        for f in range(k):
            test = np.sort(folds[f])
            train = np.sort(np.concatenate([folds[g] for g in range(k) if g != f]))
            yield self.subset(train), self.subset(test)
