"""PreferenceDataModule: training on pairwise battles (RouteLLM's preference data).

A battle is (query, LLM a, LLM b, winner) with winner ``a``, ``b`` or a tie. Battles are
either read from a file (Chatbot-Arena style: ``prompt`` or ``query_id``, ``model_a``,
``model_b``, ``winner`` in ``model_a | model_b | tie | tie (bothbad)``) or derived from the
train split's scores (the higher score wins; equal scores tie). Training batches are
pairs ``x, pos, neg, tie`` for the Bradley-Terry loss (``RoutingLoss("bpr")``);
validation and test stay listwise on the routing dataset.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from recsys_router.datasets._json import read_jsonl_lines
from recsys_router.datasets._rows import CsvLines
from recsys_router.errors import DataValidationError
from recsys_router.hyperparams import check_number
from recsys_router.long_table import RowOffset, row_number

from ._datasets import PairDataset
from .routing_datamodule import RoutingDataModule

__all__ = ["PreferenceDataModule", "battles_from_scores", "read_battles"]

_TIE = {"tie", "tie (bothbad)", "both_bad", "both_good", "draw"}


def battles_from_scores(scores: np.ndarray, battles_per_query: int | None = None, *,
                        include_ties: bool = True, seed: int = 0):
    """Battles between every two LLMs observed on a query.

    Returns
    -------
    rows, winner, loser, tie : ndarray
        For a tie, ``winner``/``loser`` are just the two LLMs (``tie = 1``).

    Example
    -------
    >>> r, w, l, t = battles_from_scores(np.array([[1.0, 0.0, 1.0]]))
    >>> list(zip(w.tolist(), l.tolist(), t.tolist()))
    [(0, 1, 0.0), (0, 2, 1.0), (2, 1, 0.0)]
    """
    rng = np.random.default_rng(seed)
    out = {k: [] for k in ("rows", "w", "l", "t")}
    for i in range(scores.shape[0]):
        obs = np.flatnonzero(~np.isnan(scores[i]))
        a, b = np.triu_indices(len(obs), k=1)
        a, b = obs[a], obs[b]
        sa, sb = scores[i, a], scores[i, b]
        tie = sa == sb
        if not include_ties:
            a, b, sa, sb, tie = a[~tie], b[~tie], sa[~tie], sb[~tie], tie[~tie]
        if battles_per_query is not None and len(a) > battles_per_query:
            keep = np.sort(rng.choice(len(a), size=battles_per_query, replace=False))
            a, b, sa, sb, tie = a[keep], b[keep], sa[keep], sb[keep], tie[keep]
        w = np.where(sa >= sb, a, b)
        l_ = np.where(sa >= sb, b, a)
        out["rows"].append(np.full(len(a), i))
        out["w"].append(w)
        out["l"].append(l_)
        out["t"].append(tie.astype(np.float32))
    cat = {k: np.concatenate(v) if v else np.zeros(0) for k, v in out.items()}
    return (cat["rows"].astype(np.int64), cat["w"].astype(np.int64), cat["l"].astype(np.int64),
            cat["t"].astype(np.float32))


def read_battles(path, llm_names: list[str]) -> pd.DataFrame:
    """Read and check a battles file (.csv, .jsonl/.json lines, .parquet).

    Returns
    -------
    DataFrame
        Columns ``text`` (or ``query_id``), ``winner_idx``, ``loser_idx``, ``tie``.

    Raises
    ------
    DataValidationError
        A missing column, an unknown LLM or winner; the row is the record's file line as the
        long-table loader numbers it (:func:`recsys_router.long_table.row_number`: CSV and
        JSONL file lines, parquet / JSON array 1-based records).
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"battles file not found: {p}")
    offset: RowOffset = 1                       # parquet / JSON array: 1-based record number
    if p.suffix == ".parquet":
        df = pd.read_parquet(p)
    elif p.suffix == ".jsonl":
        df, lines = read_jsonl_lines(p)
        offset = lambda i: int(lines[i])  # noqa: E731 - file line of record i (blank lines skipped)
    elif p.suffix == ".json":
        df = pd.read_json(p)
    else:
        df = pd.read_csv(p)
        offset = CsvLines(p)                    # file line of record i (quoted fields may span lines)
    if "prompt" in df.columns and "text" not in df.columns:
        df = df.rename(columns={"prompt": "text"})
    for col in ("model_a", "model_b", "winner"):
        if col not in df.columns:
            raise DataValidationError(f"battles file has no {col!r} column; expected columns "
                                      f"prompt|query_id, model_a, model_b, winner", source=str(p),
                                      column=col)
    if "text" not in df.columns and "query_id" not in df.columns:
        raise DataValidationError("battles file needs a 'prompt' (or 'text') or 'query_id' column",
                                  source=str(p), column="prompt")
    pos = {n: i for i, n in enumerate(llm_names)}
    rows = []
    for r, rec in enumerate(df.itertuples(index=False)):
        a, b, win = str(rec.model_a), str(rec.model_b), str(rec.winner).strip().lower()
        for m, col in ((a, "model_a"), (b, "model_b")):
            if m not in pos:
                raise DataValidationError(f"unknown LLM {m!r}; the pool is {llm_names}",
                                          source=str(p), row=row_number(r, offset, col), column=col)
        if win == "model_a":
            rows.append((pos[a], pos[b], 0.0))
        elif win == "model_b":
            rows.append((pos[b], pos[a], 0.0))
        elif win in _TIE:
            rows.append((pos[a], pos[b], 1.0))
        else:
            raise DataValidationError(f"winner {rec.winner!r}; expected model_a, model_b or tie",
                                      source=str(p), row=row_number(r, offset, "winner"),
                                      column="winner")
    out = pd.DataFrame(rows, columns=["winner_idx", "loser_idx", "tie"])
    for col in ("text", "query_id"):
        if col in df.columns:
            out[col] = df[col].to_numpy()
    return out


class PreferenceDataModule(RoutingDataModule):
    """A :class:`RoutingDataModule` whose training batches are battles.

    Parameters
    ----------
    battles : str, optional
        Battles file; when None, battles are derived from the train split's scores. A file
        keyed by ``query_id`` (no prompt column) gets each id's text from the dataset's
        splits (an id without one is an error when the encoder reads text).
    battles_per_query : int, optional
        Derived battles: sample at most this many per query (>= 1; None: all).
    include_ties : bool
        Keep ties (soft label 0.5 in the Bradley-Terry loss). A battles file left with no
        battle (empty, or only ties without ``include_ties``) is a
        :class:`~recsys_router.errors.DataValidationError` naming the file.
    **kwargs
        :class:`RoutingDataModule` arguments (``mode`` is forced to ``pairwise``).

    Example
    -------
    >>> dm = PreferenceDataModule("synthetic", dataset_options={"n_queries": 50, "n_llms": 3},
    ...                           encoder_options={"dim": 8})
    >>> b = next(iter(dm.train_dataloader()))
    >>> sorted(b)
    ['neg', 'pos', 'row', 'tie', 'x']
    """

    def __init__(self, dataset: str = "synthetic", battles: str | None = None,
                 battles_per_query: int | None = None, include_ties: bool = True, **kwargs):
        kwargs["mode"] = "pairwise"
        super().__init__(dataset=dataset, **kwargs)
        check_number(battles_per_query, "battles_per_query", low=1, integer=True, none=True)
        self.battles = battles
        self.battles_per_query = battles_per_query
        self.include_ties = include_ties

    def _texts_of(self, ids: list[str]) -> list[str]:
        """The text of each battle's ``query_id``, looked up in the dataset's splits.

        Raises
        ------
        DataValidationError
            Naming the ids the splits hold no text for, when the encoder reads text (an
            encoder that looks queries up by id, e.g. ``precomputed:``, gets "" for them).
        """
        known: dict[str, str] = {}
        for data in self.splits.values():
            for q, t in zip(data.query_ids, data.texts):
                if isinstance(t, str) and t.strip():
                    known.setdefault(str(q), t)
        missing = sorted({q for q in ids if q not in known})
        if missing and getattr(self.encoder, "needs_text", True):
            raise DataValidationError(
                f"{len(missing)} battle query_id(s) have no query text in the dataset's splits "
                f"(e.g. {missing[:3]}); the encoder embeds text: give the battles a 'prompt' "
                "column or use a dataset holding these queries", source=str(self.battles),
                column="query_id")
        return [known.get(q, "") for q in ids]

    def _train_dataset(self) -> PairDataset:
        if self.battles is None:
            rows, w, l_, t = battles_from_scores(self.splits["train"].scores, self.battles_per_query,
                                                 include_ties=self.include_ties, seed=self.seed)
            if not len(rows):
                raise DataValidationError("no battles: no train query has two observed LLMs",
                                          source=self.splits["train"].source)
            return PairDataset(self.embeddings("train"), rows, w, l_, t)
        table = read_battles(self.battles, self.llm_names)
        n_read = len(table)
        if not self.include_ties:
            table = table[table["tie"] == 0].reset_index(drop=True)
        if not len(table):
            why = "the file holds no battles" if not n_read else \
                f"all {n_read} battles are ties and include_ties is false"
            raise DataValidationError(f"no battles to train on: {why}", source=str(self.battles))
        if "text" in table.columns:
            x = self.encoder.encode(table["text"].astype(str).tolist())
        else:
            ids = table["query_id"].astype(str).tolist()
            x = self.encoder.encode(self._texts_of(ids), ids)
        return PairDataset(x, np.arange(len(table)), table["winner_idx"].to_numpy(),
                           table["loser_idx"].to_numpy(), table["tie"].to_numpy())
