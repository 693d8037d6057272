"""Training helpers of the Lightning routers: a quiet Trainer, the seeded inner hold-out of the
training queries, score rescaling, and the early-stopping callback.

Early stopping keeps the network of the check with the best held-out ``mu_o`` and stops on a
plateau of the held-out loss, never before a minimum number of optimizer steps (held-out
``mu_o`` sits at the best single LLM's level while the model first learns each LLM's mean,
so stopping on it ended training too early).
"""

from __future__ import annotations

import contextlib
import copy
import logging
import warnings

import numpy as np

from recsys_router.data import RoutingData

__all__ = ["quiet", "quiet_trainer", "hold_out", "rescored", "early_stopping_callback",
           "MIN_QUERIES_TO_HOLD_OUT"]

_QUIET_LOGGERS = ("pytorch_lightning", "lightning_fabric", "lightning.pytorch", "lightning")


@contextlib.contextmanager
def quiet():
    """Silence Lightning's loggers and warnings inside the block."""
    saved = {n: logging.getLogger(n).level for n in _QUIET_LOGGERS}
    for n in _QUIET_LOGGERS:
        logging.getLogger(n).setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", module="pytorch_lightning")
        warnings.filterwarnings("ignore", module="lightning_fabric")
        warnings.filterwarnings("ignore", message=".*does not have many workers.*")
        try:
            yield
        finally:
            for n, lvl in saved.items():
                logging.getLogger(n).setLevel(lvl)


def quiet_trainer(max_epochs: int, *, accelerator: str = "cpu", devices=1, validate: bool = True,
                  **kwargs):
    """A Trainer with no progress bar, logger, checkpoints or model summary.

    Example
    -------
    >>> quiet_trainer(1).max_epochs
    1
    """
    import pytorch_lightning as pl
    with quiet():
        return pl.Trainer(max_epochs=int(max_epochs), accelerator=accelerator, devices=devices,
                          enable_progress_bar=False, logger=False, enable_checkpointing=False,
                          enable_model_summary=False, num_sanity_val_steps=0,
                          limit_val_batches=None if validate else 0, **kwargs)


#: fewest training queries early stopping needs (fewer: train the whole budget on all)
MIN_QUERIES_TO_HOLD_OUT = 20


def hold_out(train: RoutingData, frac: float, seed: int):
    """Seeded (inner train, held-out) split of the training queries for early stopping."""
    n_val = int(round(frac * train.n_queries))
    if n_val < 1 or n_val >= train.n_queries:
        raise ValueError(f"val_fraction={frac} holds out {n_val} of {train.n_queries} training "
                         "queries; it must leave at least one on each side")
    perm = np.random.default_rng(seed).permutation(train.n_queries)
    return train.subset(np.sort(perm[n_val:])), train.subset(np.sort(perm[:n_val]))


def rescored(data: RoutingData | None, scale) -> RoutingData | None:
    """``data`` with its scores mapped through ``scale`` (the same object when identity)."""
    if data is None or scale is None or scale.method == "identity":
        return data
    return RoutingData(data.queries, data.llms, scale.transform(data.scores).astype(np.float32),
                       data.costs, name=data.name, source=data.source, meta=data.meta)


def early_stopping_callback(patience: int, min_steps: int, smooth: int = 1):
    """A callback that keeps the network of the check with the best held-out ``mu_o`` (ties:
    the later one) and stops once the held-out loss has not improved for ``patience``
    checks, never before ``min_steps`` optimizer steps (Lightning imported when needed).

    ``smooth`` > 1 compares the mean loss of the last ``smooth`` checks instead of each
    check's own (fewer at the start): on a small held-out split the loss moves by about as
    much from check to check as it improves over several, so one lucky low check would
    start the count of ``patience`` bad checks.
    """
    from pytorch_lightning.callbacks import Callback

    if int(smooth) < 1:
        raise ValueError(f"smooth must be >= 1 checks, got {smooth!r}")
    smooth = int(smooth)

    class BestNetEarlyStop(Callback):
        """Best-``mu_o`` weights and loss-plateau stopping after a minimum of steps."""

        def __init__(self):
            self.value, self.state, self.step = -np.inf, None, None
            self.best_loss, self.bad, self.stopped_at = np.inf, 0, None
            self.losses: list[float] = []

        def on_validation_end(self, trainer, pl_module):  # after the check's metrics are logged
            if trainer.sanity_checking:
                return
            m, loss = trainer.callback_metrics.get("val/mu_o"), trainer.callback_metrics.get("val/loss")
            step = int(trainer.global_step)
            if m is not None and float(m) >= self.value:
                self.value, self.step = float(m), step
                self.state = copy.deepcopy(pl_module.net.state_dict())
            if loss is not None:
                self.losses.append(float(loss))
                loss = float(np.mean(self.losses[-smooth:]))   # the last `smooth` checks
            if loss is not None and loss < self.best_loss - 1e-6:
                self.best_loss, self.bad = loss, 0
            else:
                self.bad += 1
            if self.bad >= patience and step >= min_steps:
                trainer.should_stop = True
                self.stopped_at = step
    return BestNetEarlyStop()
