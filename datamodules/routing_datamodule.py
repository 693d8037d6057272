"""RoutingDataModule: any registered routing dataset as Lightning dataloaders.

Queries are encoded once (``prepare_data``; the encoder's on-disk cache makes later runs
and other ranks cheap), splits are made in ``setup``. Training batches follow ``mode``:

* ``pointwise`` - observed (query, LLM, score) cells: keys ``x, llm, y``;
* ``listwise`` - one row per query: ``x, y, mask, sel[, cost], index``;
* ``pairwise`` - (query, better LLM, worse LLM) pairs: ``x, pos, neg, tie``.

Validation, test and predict batches are always listwise, so routing metrics can be
computed on whole queries.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, Dataset

from recsys_router.data import RoutingData
from recsys_router.errors import ArgumentValueError, DataValidationError

from ._arguments import check_datamodule_args
from ._datasets import (CellDataset, PairDataset, PermutationBatchSampler, QueryListDataset,
                        _BatchDataset, batch_collate,
                        score_pairs)
# the LLM side features live in llm_features; re-exported here (their public path)
from .llm_features import N_LLM_NUMERIC_FEATURES, llm_feature_matrix

__all__ = ["RoutingDataModule", "MODES", "N_LLM_NUMERIC_FEATURES", "llm_feature_matrix"]

MODES = ("pointwise", "listwise", "pairwise")
_SPLIT_ALIASES = {"validation": "val", "valid": "val", "dev": "val"}


class RoutingDataModule(pl.LightningDataModule):
    """Lightning data module over a routing dataset.

    Parameters
    ----------
    dataset : str
        Registered dataset name (``load_dataset``) or a path to a file/folder.
    data_dir : str, optional
        Folder holding the named dataset's folder (default: the registry's search path).
    dataset_options : dict, optional
        Extra loader options (e.g. ``{"n_queries": 300, "seed": 1}`` for ``synthetic``); a
        key the named dataset's loader does not take is refused here.
    encoder : str
        Encoder name for ``recsys_router.encoders.get_encoder`` (``hashing``, ``tfidf``,
        ``minilm``, ``precomputed:<file>``...).
    encoder_options : dict, optional
        Encoder options (e.g. ``{"dim": 256}``).
    split_ratios : sequence of float
        Train/val/test fractions of a seeded random split (used when the dataset has no
        split of its own and neither ``split_column`` nor ``ood_tasks`` is given). When a
        split has no validation part, ``val`` is carved out of train with ``val_fraction``.
    split_column : str, optional
        Use this query column as the split (e.g. ``"split"``, the published train/test split
        of ``routerbench_zs``, ``llmrouter`` and ``routerdc_split2_model7``).
    val_fraction : float, optional
        Fraction of the train split carved out as ``val`` when the split has no validation
        part (a published train/test split, ``split_column``, ``ood_tasks``), in [0, 1);
        0 (or a val ratio of 0) carves nothing, so there is no validation split.
        Default ``r_val / (r_train + r_val)`` of ``split_ratios`` (0.1 / 0.9 = 11.1% for
        the default ratios: val's share of train + val in the random split).
    ood_tasks : list of str, optional
        Out-of-domain split: these tasks form the test set.
    seed : int
        Seed of the split, pair sampling and shuffling.
    candidates : list of str, optional
        Restrict the LLM pool to these LLMs (in this order).
    candidate_group : {"all-strong", "all-weak", "strong-to-weak"}, optional
        Restrict the pool to a RouterEval candidate group of ``pool_size`` LLMs, chosen on
        the train split (:func:`recsys_router.pools.candidate_groups`, seeded).
    pool_size : int
        Size of that group.
    group_method : {"routereval", "oracle-best"}
        How that group is built (``candidate_groups(method=)``): RouterEval's released code
        (default) or the best combination within the same regions.
    batch_size : int
        Training/eval batch size.
    mode : {"pointwise", "listwise", "pairwise"}
        Layout of training batches (see the module docstring). ``listwise`` suits every
        loss kind; ``pointwise`` only ``bce``/``mse``; ``pairwise`` only ``bpr``.
    selection_ratio : float
        RouterEval selection-vector ratio for continuous scores: it builds the listwise
        targets and the ``ipw_clip`` positives (the loss's own ``selection_ratio`` is not
        read; ``LightningRouter`` passes its loss's value here, and the LightningCLI refuses
        a config whose loss names another value than this one).
    max_pairs_per_query : int, optional
        Pairwise mode: sample at most this many pairs per query (>= 1; None: all).
    num_workers : int
        DataLoader workers (>= 0).
    carve_val : bool
        Carve a validation split out of train when the data has none (else: no validation).
    feedback : {"naive", "ips", "snips", "dr"}, optional
        Train on logged feedback (one observed LLM per train query and a ``propensity``
        column, :mod:`recsys_router.feedback.logged`) with this loss; batches carry the
        weights ``w`` that select :func:`~recsys_router.models.losses.logged_feedback_loss`.
    propensity_clip : float
        Propensities below this count as this (IPS weights at most ``1 / clip``), in (0, 1].
    logging_policy : {"uniform", "epsilon-greedy:E"}, optional
        With ``feedback``: simulate the log from a full matrix, one LLM per train query drawn
        by this policy (seeded by ``seed``) with its propensity; val/test stay full
        (:func:`recsys_router.feedback.logging_sim.simulated_train_log`).
    predict_split : str
        The split ``predict_dataloader`` serves (``test``, ``val`` or ``train``; ``test``
        falls back to ``val`` when the data has no test split). ``recsys-router predict``
        links it to ``--predictions.split``, so the written query ids are the predicted ones.

    Attributes
    ----------
    n_llms, embed_dim, llm_feature_dim : int
        Sizes for the model (available right after construction; the dataset is loaded
        and the encoder fitted lazily on first access).
    llm_names : list of str
    llm_features : ndarray (n_llms, embed_dim + 4)
    train_positives : ndarray (n_llms,)
        Count of selected (positive) train cells per LLM (the prior for debiasing losses).

    Example
    -------
    >>> dm = RoutingDataModule("synthetic", dataset_options={"n_queries": 60, "n_llms": 3},
    ...                        encoder_options={"dim": 16}, batch_size=8)
    >>> dm.n_llms, dm.embed_dim, dm.llm_feature_dim
    (3, 16, 20)
    """

    def __init__(self, dataset: str = "synthetic", data_dir: str | None = None,
                 dataset_options: dict | None = None, encoder: str = "hashing",
                 encoder_options: dict | None = None,
                 split_ratios: Sequence[float] = (0.8, 0.1, 0.1), split_column: str | None = None,
                 val_fraction: float | None = None,
                 ood_tasks: list[str] | None = None, seed: int = 0,
                 candidates: list[str] | None = None, candidate_group: str | None = None,
                 pool_size: int = 5, group_method: str = "routereval", batch_size: int = 64,
                 mode: str = "listwise", selection_ratio: float = 0.95,
                 max_pairs_per_query: int | None = None, num_workers: int = 0,
                 carve_val: bool = True, feedback: str | None = None,
                 propensity_clip: float = 0.05, logging_policy: str | None = None,
                 predict_split: str = "test"):
        super().__init__()
        check_datamodule_args(mode=mode, modes=MODES, batch_size=batch_size,
                              val_fraction=val_fraction, group_method=group_method,
                              num_workers=num_workers, max_pairs_per_query=max_pairs_per_query,
                              propensity_clip=propensity_clip, dataset=dataset,
                              dataset_options=dataset_options)
        self.save_hyperparameters()
        self.dataset, self.data_dir = dataset, data_dir
        self.dataset_options = dict(dataset_options or {})
        self.encoder_name, self.encoder_options = encoder, dict(encoder_options or {})
        self.split_ratios, self.split_column = tuple(split_ratios), split_column
        self.val_fraction, self.ood_tasks, self.seed = val_fraction, ood_tasks, seed
        self.candidates, self.candidate_group = candidates, candidate_group
        self.pool_size, self.group_method = pool_size, group_method
        self.batch_size, self.mode, self.selection_ratio = batch_size, mode, selection_ratio
        self.max_pairs_per_query, self.num_workers = max_pairs_per_query, num_workers
        self.carve_val, self.feedback, self.propensity_clip = carve_val, feedback, propensity_clip
        if logging_policy is not None and feedback is None:
            raise ArgumentValueError("logging_policy simulates logged feedback: set feedback "
                                     "(naive, ips, snips or dr) too")
        self.logging_policy = logging_policy
        self.predict_split = predict_split
        self._splits: dict[str, RoutingData] | None = None
        self._encoder = None
        self._x: dict[str, np.ndarray] = {}
        self._llm_features: np.ndarray | None = None
        self.llm_feature_stats: dict | None = None

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_splits(cls, splits: dict[str, RoutingData], **kwargs) -> "RoutingDataModule":
        """A data module over in-memory splits (``{"train": ..., "val": ..., "test": ...}``).

        Example
        -------
        >>> from recsys_router.datasets.synthetic import make_synthetic
        >>> dm = RoutingDataModule.from_splits({"train": make_synthetic(40, 3, seed=0)},
        ...                                    encoder_options={"dim": 8})
        >>> sorted(dm.splits)
        ['train', 'val']
        """
        if "train" not in splits or not isinstance(splits["train"], RoutingData):
            raise ValueError("from_splits needs at least a 'train' RoutingData")
        dm = cls(dataset=splits["train"].name, **kwargs)
        dm._splits = dm._finish_splits({k: v for k, v in splits.items() if v is not None})
        return dm

    # ------------------------------------------------------------------ loading
    @property
    def splits(self) -> dict[str, RoutingData]:
        """The train/val/test RoutingData (loaded on first access)."""
        if self._splits is None:
            self._splits = self._finish_splits(self._load_splits())
        return self._splits

    def _load_splits(self) -> dict[str, RoutingData]:
        from recsys_router.datasets import load_dataset
        data = load_dataset(self.dataset, data_dir=self.data_dir, **self.dataset_options)
        if isinstance(data, dict):
            parts = {_SPLIT_ALIASES.get(str(k).lower(), str(k).lower()): v for k, v in data.items()}
            if "train" not in parts:
                data = RoutingData.concat(list(parts.values()))
            else:
                return parts
        if self.split_column is not None:
            return data.split(column=self.split_column)
        if self.ood_tasks is not None:
            return data.split(self.split_ratios, seed=self.seed, ood_tasks=self.ood_tasks)
        return data.split(self.split_ratios, seed=self.seed)

    def _finish_splits(self, parts: dict[str, RoutingData]) -> dict[str, RoutingData]:
        if "train" not in parts:
            raise DataValidationError(f"dataset {self.dataset!r} has no 'train' split; splits: "
                                      f"{sorted(parts)}", column="split")
        if self.candidates is not None and self.candidate_group is not None:
            raise ArgumentValueError("give either candidates or candidate_group, not both")
        if self.candidates is not None:
            parts = {k: v.subset(llms=list(self.candidates)) for k, v in parts.items()}
        if self.candidate_group is not None:
            from recsys_router.pools import GROUPS, candidate_groups
            if self.candidate_group not in GROUPS:
                raise ArgumentValueError(f"candidate_group must be one of {GROUPS}, got "
                                         f"{self.candidate_group!r}")
            pool = candidate_groups(parts["train"], int(self.pool_size), seed=self.seed,
                                    method=self.group_method,
                                    groups=[self.candidate_group])[self.candidate_group]
            parts = {k: v.subset(llms=pool) for k, v in parts.items()}
        names = parts["train"].llm_names
        for k, v in parts.items():
            if v.llm_names != names:
                raise DataValidationError(f"split {k!r} has LLMs {v.llm_names}, train has {names}",
                                          source=v.source, column="llm")
        if "val" not in parts and self.carve_val:
            r = self.split_ratios
            frac = self.val_fraction if self.val_fraction is not None else \
                r[1] / (r[0] + r[1]) if len(r) == 3 and r[0] + r[1] > 0 else 0.1
            n = parts["train"].n_queries
            n_val = max(1, int(round(frac * n))) if n > 1 and frac > 0 else 0  # 0: no val
            if n_val:
                perm = np.random.default_rng(self.seed).permutation(n)
                train = parts["train"]
                parts = {**parts, "train": train.subset(np.sort(perm[n_val:])),
                         "val": train.subset(np.sort(perm[:n_val]))}
        if self.logging_policy is not None:
            from recsys_router.feedback.logging_sim import simulated_train_log
            parts = {**parts, "train": simulated_train_log(parts["train"], self.logging_policy,
                                                           self.seed)}
        return parts

    @property
    def encoder(self):
        """The query encoder (fitted on the train texts when it needs fitting)."""
        if self._encoder is None:
            from recsys_router.encoders import get_encoder
            enc = get_encoder(self.encoder_name, **self.encoder_options)
            if enc.needs_fit:
                enc.fit(self.splits["train"].texts)
            self._encoder = enc
        return self._encoder

    # ------------------------------------------------------------------ sizes & features
    @property
    def n_llms(self) -> int:
        return self.splits["train"].n_llms

    @property
    def llm_names(self) -> list[str]:
        return self.splits["train"].llm_names

    @property
    def embed_dim(self) -> int:
        return int(self.encoder.dim)

    @property
    def llm_feature_dim(self) -> int:
        return self.embed_dim + N_LLM_NUMERIC_FEATURES

    @property
    def llm_features(self) -> np.ndarray:
        if self._llm_features is None:
            self._llm_features, self.llm_feature_stats = llm_feature_matrix(
                self.splits["train"].llms, self.encoder)
        return self._llm_features

    @property
    def train_positives(self) -> np.ndarray:
        return self.splits["train"].selection_vectors(self.selection_ratio).sum(axis=0)

    @property
    def mean_costs(self) -> np.ndarray | None:
        tr = self.splits["train"]
        return tr.mean_costs() if tr.costs is not None else None

    def embeddings(self, split: str) -> np.ndarray:
        """Encoded queries of a split, float32 (n_queries, embed_dim)."""
        if split not in self._x:
            if split not in self.splits:
                raise KeyError(f"no split {split!r}; splits: {sorted(self.splits)}")
            self._x[split] = self.encoder.encode_data(self.splits[split])
        return self._x[split]

    # ------------------------------------------------------------------ Lightning hooks
    def prepare_data(self) -> None:
        """Load the dataset and encode every split (filling the encoder's cache)."""
        for split in self.splits:
            self.embeddings(split)
        _ = self.llm_features

    def setup(self, stage: str | None = None) -> None:
        for split in self.splits:
            self.embeddings(split)
        _ = self.llm_features

    def _list_dataset(self, split: str) -> QueryListDataset:
        d = self.splits[split]
        return QueryListDataset(self.embeddings(split), d.scores, d.selection_vectors(self.selection_ratio),
                                d.costs)

    def _train_dataset(self) -> Dataset:
        tr, x = self.splits["train"], self.embeddings("train")
        if self.feedback is not None:
            from recsys_router.feedback.logged import logged_arrays
            return _BatchDataset(logged_arrays(tr, x, self.feedback, self.propensity_clip))
        if self.mode == "pointwise":
            return CellDataset(x, tr.scores)
        if self.mode == "pairwise":
            rows, pos, neg = score_pairs(tr.scores, self.max_pairs_per_query, self.seed)
            if not len(rows):
                raise DataValidationError("pairwise mode found no query with two different observed "
                                          "scores in the train split", source=tr.source)
            return PairDataset(x, rows, pos, neg)
        return self._list_dataset("train")

    def _fit_epoch(self) -> int | None:
        """The fit's epoch as Lightning gives ``set_epoch`` (resumed fits count on), or None."""
        loop = getattr(getattr(self, "trainer", None), "fit_loop", None)
        return None if loop is None else int(loop.epoch_progress.current.processed)

    def _loader(self, ds: Dataset, shuffle: bool) -> DataLoader:
        gen = torch.Generator().manual_seed(int(self.seed)) if shuffle else None
        trainer = getattr(self, "trainer", None)
        distributed = trainer is not None and getattr(trainer, "world_size", 1) > 1
        # whole batches, no per-item Python work, epoch e's order from (seed, e) alone (a
        # resumed fit continues the sequence); under DDP Lightning shards a plain sampler
        if hasattr(ds, "__getitems__") and not distributed:
            batches = PermutationBatchSampler(len(ds), self.batch_size, shuffle,
                                              seed=int(self.seed) if shuffle else None,
                                              epoch_of=self._fit_epoch)
            return DataLoader(ds, batch_sampler=batches, collate_fn=batch_collate,
                              num_workers=self.num_workers,
                              persistent_workers=self.num_workers > 0)
        return DataLoader(ds, batch_size=self.batch_size, shuffle=shuffle, generator=gen,
                          collate_fn=batch_collate, num_workers=self.num_workers,
                          persistent_workers=self.num_workers > 0)

    def train_dataloader(self) -> DataLoader:
        return self._loader(self._train_dataset(), shuffle=True)

    def val_dataloader(self):
        if "val" not in self.splits:
            return []
        return self._loader(self._list_dataset("val"), shuffle=False)

    def eval_split(self, split: str) -> str:
        """The split that stands for ``split`` in test/predict: ``split`` itself, or ``val``
        for a ``test`` the data does not have.

        Raises
        ------
        DataValidationError
            When neither is there, naming the splits the data has.

        Example
        -------
        >>> dm = RoutingDataModule(dataset_options={"n_queries": 40, "n_llms": 3},
        ...                        encoder_options={"dim": 8}, split_ratios=(0.8, 0.2, 0.0))
        >>> dm.eval_split("test"), dm.eval_split("train")
        ('val', 'train')
        """
        if split in self.splits:
            return split
        if split == "test" and "val" in self.splits:
            return "val"
        raise DataValidationError(f"no {split!r} split" + (" (nor 'val')" if split == "test" else "")
                                  + f"; splits: {sorted(self.splits)}", source=str(self.dataset),
                                  column="split")

    def test_dataloader(self) -> DataLoader:
        return self._loader(self._list_dataset(self.eval_split("test")), shuffle=False)

    def predict_dataloader(self) -> DataLoader:
        """Listwise batches of ``predict_split`` (see :meth:`eval_split`)."""
        return self._loader(self._list_dataset(self.eval_split(self.predict_split)), shuffle=False)
