"""Torch datasets over encoded routing data: query lists, observed cells, LLM pairs.

Each dataset implements ``__getitems__`` (a whole batch at once, gathered with numpy
fancy indexing) and is used with :func:`batch_collate`, so a batch costs one indexing
call instead of one Python call per item.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import Dataset

from recsys_router.policies import fill_unknown_costs
from recsys_router.errors import ArgumentValueError

__all__ = ["QueryListDataset", "CellDataset", "PairDataset", "batch_collate",
           "PermutationBatchSampler", "epoch_generator"]


def epoch_generator(seed: int, epoch: int) -> torch.Generator:
    """A torch generator seeded by ``(seed, epoch)`` together (numpy's ``SeedSequence`` of
    the two, so nearby seeds and epochs give unrelated streams).

    Example
    -------
    >>> a = torch.randperm(6, generator=epoch_generator(0, 1))
    >>> bool((a == torch.randperm(6, generator=epoch_generator(0, 1))).all())
    True
    """
    state = np.random.SeedSequence([int(seed) % 2**64, int(epoch)]).generate_state(1, np.uint64)
    return torch.Generator().manual_seed(int(state[0]))


class PermutationBatchSampler:
    """Batches of row indices as slices of one permutation per epoch (or of ``arange``).

    A ``DataLoader`` with ``shuffle=True`` draws every index through a Python iterator and
    collects them into lists: Python work per item. This draws one ``torch.randperm`` per
    epoch and yields int64 array slices, which ``__getitems__`` gathers with one indexing
    operation per batch.

    Parameters
    ----------
    n : int
        Number of items.
    batch_size : int
    shuffle : bool
    generator : torch.Generator, optional
        Source of the permutations when no ``seed`` is given (each pass draws the next one).
    seed : int, optional
        When given, the permutation of epoch ``e`` is drawn from a generator seeded by
        ``(seed, e)`` alone (:func:`epoch_generator`), so an epoch's order does not depend
        on how many permutations were drawn before it: a fit resumed from a checkpoint (a new
        sampler) continues the epoch sequence of the run that wrote it. Takes precedence over
        ``generator``.
    epoch_of : callable, optional
        Returns the current epoch (or None) when a pass starts; with ``seed``, the epoch
        whose permutation is drawn. Without it (or when it returns None) the epoch is the
        number of passes this sampler made before.

    Example
    -------
    >>> [b.tolist() for b in PermutationBatchSampler(5, 2, shuffle=False)]
    [[0, 1], [2, 3], [4]]
    """

    def __init__(self, n: int, batch_size: int, shuffle: bool, generator=None, *,
                 seed: int | None = None, epoch_of=None):
        if int(batch_size) < 1:
            raise ArgumentValueError(f"batch_size must be >= 1, got {batch_size}")
        self.n, self.batch_size, self.shuffle, self.generator = int(n), int(batch_size), shuffle, generator
        self.seed, self.epoch_of, self._passes = seed, epoch_of, 0

    def __len__(self) -> int:
        return -(-self.n // self.batch_size)

    def __iter__(self):
        if self.shuffle and self.seed is not None:
            epoch = self.epoch_of() if self.epoch_of is not None else None
            epoch = self._passes if epoch is None else int(epoch)
            self._passes += 1
            order = torch.randperm(self.n, generator=epoch_generator(self.seed, epoch)).numpy()
        elif self.shuffle:
            order = torch.randperm(self.n, generator=self.generator).numpy()
        else:
            order = np.arange(self.n, dtype=np.int64)
        for s in range(0, self.n, self.batch_size):
            yield order[s:s + self.batch_size]


def batch_collate(batch):
    """Collate function for datasets whose ``__getitems__`` already returns a batch dict."""
    if isinstance(batch, dict):
        return batch
    # a list of single-item dicts (a sampler that bypasses __getitems__)
    return {k: torch.stack([b[k] for b in batch]) for k in batch[0]}


class _BatchDataset(Dataset):
    def __init__(self, arrays: dict[str, np.ndarray], row_key: str | None = None,
                 x: np.ndarray | None = None):
        self.arrays = arrays
        self.row_key = row_key
        self.x = x
        self._n = len(next(iter(arrays.values())))

    def __len__(self) -> int:
        return self._n

    def __getitems__(self, idx) -> dict[str, torch.Tensor]:
        idx = np.asarray(idx, dtype=np.int64)
        out = {k: torch.from_numpy(np.ascontiguousarray(v[idx])) for k, v in self.arrays.items()}
        if self.x is not None:
            rows = self.arrays[self.row_key][idx]
            out["x"] = torch.from_numpy(np.ascontiguousarray(self.x[rows]))
        return out

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {k: v[0] for k, v in self.__getitems__([i]).items()}


class QueryListDataset(_BatchDataset):
    """One item per query: ``x`` (D,), ``y`` (L,) scores (0 where unobserved), ``mask`` (L,),
    ``sel`` (L,) selection vector, ``cost`` (L,) when costs exist, ``index`` (row number).

    Parameters
    ----------
    x : ndarray (n, D) float32
    scores : ndarray (n, L) with NaN = unobserved
    selection : ndarray (n, L)
    costs : ndarray (n, L), optional
    """

    def __init__(self, x: np.ndarray, scores: np.ndarray, selection: np.ndarray,
                 costs: np.ndarray | None = None):
        mask = ~np.isnan(scores)
        arrays = {"index": np.arange(len(x), dtype=np.int64), "x": np.asarray(x, np.float32),
                  "y": np.nan_to_num(scores, nan=0.0).astype(np.float32), "mask": mask,
                  "sel": np.asarray(selection, np.float32)}
        if costs is not None:
            # an observed cell's unknown cost is the dearest known one of its query, never
            # free (the ``utility`` loss's target and the held-out AIQ read it); 0 unobserved
            arrays["cost"] = np.where(mask, fill_unknown_costs(costs), 0.0).astype(np.float32)
        super().__init__(arrays)


class CellDataset(_BatchDataset):
    """One item per observed (query, LLM) cell: ``x``, ``llm`` (long), ``y`` (float)."""

    def __init__(self, x: np.ndarray, scores: np.ndarray):
        rows, cols = np.nonzero(~np.isnan(scores))
        super().__init__({"row": rows.astype(np.int64), "llm": cols.astype(np.int64),
                          "y": scores[rows, cols].astype(np.float32)}, "row", np.asarray(x, np.float32))


class PairDataset(_BatchDataset):
    """One item per (query, better LLM, worse LLM) pair: ``x``, ``pos``, ``neg``, ``tie``.

    Parameters
    ----------
    x : ndarray (n, D)
    rows, pos, neg : ndarray of int
        Query row, winner column and loser column of each pair.
    tie : ndarray of float, optional
        1 where the battle was a tie (then pos/neg are just the two LLMs).
    """

    def __init__(self, x: np.ndarray, rows, pos, neg, tie=None):
        rows = np.asarray(rows, np.int64)
        tie = np.zeros(len(rows), np.float32) if tie is None else np.asarray(tie, np.float32)
        super().__init__({"row": rows, "pos": np.asarray(pos, np.int64),
                          "neg": np.asarray(neg, np.int64), "tie": tie}, "row",
                         np.asarray(x, np.float32))


def score_pairs(scores: np.ndarray, max_pairs_per_query: int | None, seed: int):
    """All (row, better, worse) pairs with a strictly higher observed score, optionally
    sub-sampled to at most ``max_pairs_per_query`` per query (seeded)."""
    rng = np.random.default_rng(seed)
    rows, pos, neg = [], [], []
    s = np.nan_to_num(scores, nan=-np.inf)
    obs = ~np.isnan(scores)
    for i in range(scores.shape[0]):
        better = (s[i][:, None] > s[i][None, :]) & obs[i][:, None] & obs[i][None, :]
        b, w = np.nonzero(better)
        if max_pairs_per_query is not None and len(b) > max_pairs_per_query:
            keep = rng.choice(len(b), size=max_pairs_per_query, replace=False)
            b, w = b[keep], w[keep]
        rows.append(np.full(len(b), i))
        pos.append(b)
        neg.append(w)
    cat = (lambda parts: np.concatenate(parts) if parts else np.zeros(0, np.int64))
    return cat(rows), cat(pos), cat(neg)
