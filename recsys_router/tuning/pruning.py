"""Optuna pruning for ``pytorch_lightning`` Trainers.

``optuna_integration.PyTorchLightningPruningCallback`` is built on the ``lightning.pytorch``
namespace, which this project does not use (a ``pytorch_lightning.Trainer`` rejects its
callbacks), so this is a small equivalent on :class:`pytorch_lightning.Callback`.
"""

from __future__ import annotations

import math
import warnings

import optuna
import pytorch_lightning as pl

__all__ = ["PruningCallback"]


class PruningCallback(pl.Callback):
    """Report a validation metric to an Optuna trial after every validation epoch and stop
    the run with :class:`optuna.TrialPruned` when the study's pruner says so.

    Parameters
    ----------
    trial : optuna.trial.Trial
        The running trial (anything with ``report(value, step)`` and ``should_prune()``).
    monitor : str
        Key of ``trainer.callback_metrics``, e.g. ``"val/aiq"``.

    Attributes
    ----------
    reported : list of (int, float)
        ``(epoch, value)`` pairs reported so far.

    Notes
    -----
    The step is the epoch number. Nothing is reported during the sanity check. Meant for
    single-process training (under DDP every rank would report).

    Example
    -------
    >>> import optuna
    >>> study = optuna.create_study(direction="maximize")
    >>> cb = PruningCallback(study.ask(), "val/mu_o")
    >>> cb.monitor
    'val/mu_o'
    """

    def __init__(self, trial, monitor: str):
        super().__init__()
        self.trial = trial
        self.monitor = monitor
        self.reported: list[tuple[int, float]] = []
        self._warned = False

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        value = trainer.callback_metrics.get(self.monitor)
        if value is None:
            if not self._warned:
                warnings.warn(f"PruningCallback: metric {self.monitor!r} was not logged; available: "
                              f"{sorted(trainer.callback_metrics)}; not pruning", stacklevel=2)
                self._warned = True
            return
        value = float(value)
        epoch = int(trainer.current_epoch)
        if math.isnan(value):
            return
        self.trial.report(value, step=epoch)
        self.reported.append((epoch, value))
        if self.trial.should_prune():
            raise optuna.TrialPruned(f"trial pruned at epoch {epoch}: {self.monitor}={value:.6g}")
