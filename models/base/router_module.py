"""RouterModule: the one LightningModule base of every trainable collaborative-filtering router.

A subclass only builds ``self.net``: a plain ``nn.Module`` mapping query embeddings
``x`` (B, D) to logits over the LLM pool (B, n_llms). Everything else - the shared step
over pointwise / listwise / pairwise batches, the configurable loss
(:class:`~recsys_router.models.losses.RoutingLoss`), per-stage routing metrics (``val/mu_o``,
``val/v_b``, ``val/e_p``, ``val/aiq``), optimisers, and :meth:`RouterModule.to_router`
(a fitted :class:`~recsys_router.router.Router` needing no Trainer) - lives here.
The loss and the metrics see the scores the data module serves: inside
:class:`~recsys_router.models.base.lightning_router.LightningRouter` those are the
[0, 1] targets of its score transform, so there the ``utility`` loss's ``wtp`` is in target
units (the router converts a min-max one from data units) and the epoch metrics are
target-scale means.
The structure follows the lightning-hydra-template's ``MNISTLitModule``.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytorch_lightning as pl
import torch
from torch import nn

from recsys_router.hyperparams import check_number
from recsys_router.models.losses import RoutingLoss
from recsys_router.errors import ArgumentValueError

from .eval_metrics import epoch_metrics

__all__ = ["RouterModule", "predict_logits"]


@torch.no_grad()
def predict_logits(net: nn.Module, x: np.ndarray, batch_size: int = 4096) -> np.ndarray:
    """Run ``net`` in eval mode without gradients over query embeddings.

    Parameters
    ----------
    net : nn.Module
        Maps (B, D) float tensors to (B, L) logits.
    x : ndarray (n, D)
    batch_size : int

    Returns
    -------
    ndarray float32 (n, L)
    """
    was_training = net.training
    net.eval()
    try:
        device = next((p.device for p in net.parameters()), torch.device("cpu"))
        outs = [net(torch.as_tensor(np.asarray(x[s:s + batch_size], np.float32), device=device))
                .float().cpu().numpy() for s in range(0, len(x), batch_size)]
    finally:
        net.train(was_training)
    if not outs:
        return np.zeros((0, 0), np.float32)
    return np.concatenate(outs, axis=0)


class RouterModule(pl.LightningModule):
    """Base LightningModule of the CF routers.

    Parameters
    ----------
    n_llms : int
        Size of the LLM pool (linked from the data module: ``data.n_llms``).
    embed_dim : int
        Query-embedding width (linked from ``data.embed_dim``).
    loss : RoutingLoss or dict, optional
        Training objective (default: the class's ``default_loss``), or its configuration as
        plain data (:meth:`RoutingLoss.config`, as a checkpoint's hyperparameters hold it).
        Saved as that plain configuration (:meth:`save_router_hyperparameters`).
    lr : float
        Adam learning rate.
    weight_decay : float
        Adam (decoupled: AdamW) weight decay.

    Class attributes (read by the derived registry routers, ``models/base/derive.py``)
    -----------------------------------------------------------------------------------
    trainer_defaults : dict
        ``max_epochs`` of ``recsys-router fit`` (LightningCLI; the model YAML's
        ``trainer.max_epochs`` mirrors it; the batch size is the data config's
        ``data.batch_size``). The registry routers scale theirs to the data instead
        (:func:`~recsys_router.models.base.schedule.data_scaled_plan`).
    plan_options : dict
        Limits of the router's data-scaled plan (e.g. a bigger ``min_batch`` for a model
        whose step is dear).
    default_loss : str
        Loss kind used when ``loss`` is None.
    router_loss_options : bool
        Whether the router exposes the loss kind and options as hyperparameters.
    fixed_mode : str or None
        A batch layout the model always trains on (the router then takes no ``mode``).
    stop_smoothing : int
        Checks whose held-out losses early stopping averages before comparing (1: each
        check's own; see :func:`~recsys_router.models.base.training.early_stopping_callback`).

    Subclass contract
    -----------------
    * call ``super().__init__(n_llms, embed_dim, loss=loss, lr=lr, weight_decay=weight_decay)``,
      then ``self.save_router_hyperparameters()`` (the loss kept as plain data) and set
      ``self.net``;
    * ``self.net(x)`` returns logits (B, n_llms); it may define ``cell_logits(x, llm)``
      (logit of one LLM per row) to avoid scoring the whole pool on pointwise batches;
    * override :meth:`on_data` to read training data (LLM features, the train matrix)
      before the first step.

    Example
    -------
    >>> from recsys_router.models.mf_module import MFModule
    >>> m = MFModule(n_llms=3, embed_dim=8, dim=4)
    >>> m(torch.zeros(2, 8)).shape
    torch.Size([2, 3])
    """

    trainer_defaults = {"max_epochs": 10}
    #: limits of the data-scaled training plan (``min_batch``, ``step_cap``; see
    #: :func:`~recsys_router.models.base.schedule.data_scaled_plan`)
    plan_options: dict = {}
    #: the data-scaled learning-rate plan, set by the router for one fit (None: constant lr)
    lr_plan = None
    default_loss = "bce"
    #: checks averaged by the early-stopping plateau rule (1: each check's own loss)
    stop_smoothing = 1
    router_loss_options = True
    fixed_mode: str | None = None
    #: score a validation/test epoch of a ranking loss (listwise, pairwise, utility) through the
    #: Platt map of the logits fitted on the train split, as the exported router routes
    #: (:meth:`LightningRouter.from_module`), so ``val/aiq`` is the artifact's; the registry
    #: router turns it off for its held-out checks (they keep the network by mu_o, which the
    #: monotone map leaves as it is)
    calibrate_eval = True

    def __init__(self, n_llms: int, embed_dim: int, loss: RoutingLoss | dict | None = None,
                 lr: float = 1e-3, weight_decay: float = 0.0):
        super().__init__()
        if int(n_llms) < 1 or int(embed_dim) < 1:
            raise ArgumentValueError(f"n_llms and embed_dim must be >= 1, got {n_llms}, "
                                     f"{embed_dim}")
        self.n_llms = int(n_llms)
        self.embed_dim = int(embed_dim)
        loss = RoutingLoss.coerce(loss, f"{type(self).__name__} loss")  # dict: a checkpoint's
        self.loss_fn = loss if loss is not None else RoutingLoss(self.default_loss)
        self.lr = check_number(lr, "lr", low=0, low_open=True)
        self.weight_decay = check_number(weight_decay, "weight_decay", low=0)
        self._eval_store: dict[str, list[dict]] = {}
        self.eval_mean_costs: np.ndarray | None = None

    # ------------------------------------------------------------------ network
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Logits of every LLM, shape (B, n_llms)."""
        return self.net(x)

    def cell_logits(self, x: torch.Tensor, llm: torch.Tensor) -> torch.Tensor:
        """Logit of LLM ``llm[b]`` for query ``x[b]``, shape (B,)."""
        if hasattr(self.net, "cell_logits"):
            return self.net.cell_logits(x, llm)
        return self.net(x).gather(1, llm[:, None]).squeeze(1)

    # ------------------------------------------------------------------ data hooks
    def setup(self, stage: str) -> None:
        dm = getattr(self.trainer, "datamodule", None) if self._trainer is not None else None
        if dm is None:
            return
        if getattr(dm, "n_llms", self.n_llms) != self.n_llms:
            raise ValueError(f"{type(self).__name__} was built for {self.n_llms} LLMs but the data "
                             f"module has {dm.n_llms}; link data.n_llms to model.n_llms")
        if hasattr(dm, "train_positives"):
            self.loss_fn.set_positives(dm.train_positives)
        if getattr(dm, "mean_costs", None) is not None:
            self.eval_mean_costs = np.asarray(dm.mean_costs, np.float64)
        self.on_data(dm)

    def on_data(self, datamodule) -> None:
        """Hook: read what the network needs from the data module (default: nothing)."""

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        """Record the trained LLMs' names (``checkpoint["llm_names"]``), in output order, so an
        export can check that the data module it rebuilds names the same columns, and the
        encoder's identity (``checkpoint["encoder_identity"]``) for ``--ckpt_path``."""
        dm = getattr(self.trainer, "datamodule", None) if self._trainer is not None else None
        names = getattr(dm, "llm_names", None)
        if names is not None:
            checkpoint["llm_names"] = [str(n) for n in names]
        from .checkpoint_checks import encoder_identity_of
        identity = encoder_identity_of(dm) if dm is not None else None
        if identity is not None:
            checkpoint["encoder_identity"] = identity

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        """Refuse a checkpoint that does not fit the trainer's data module, before its weights
        are loaded (``fit|validate|test|predict --ckpt_path``): trained for another number
        of LLMs, embedding width or weight shape
        (:func:`~.checkpoint_checks.check_checkpoint_sizes`), or on other LLMs or the same
        LLMs in another order (:func:`~.checkpoint_checks.check_llm_names`; a checkpoint
        without recorded names loads with a warning), or on another encoder's embeddings
        (:func:`~.checkpoint_checks.check_encoder`). Without a trainer's data module
        (``load_from_checkpoint``) names and encoders are not compared."""
        from .checkpoint_checks import check_checkpoint_sizes, check_encoder, check_llm_names
        trainer = self._trainer
        source = str(getattr(trainer, "ckpt_path", None) or "the checkpoint")
        check_checkpoint_sizes(self, checkpoint, source)
        dm = getattr(trainer, "datamodule", None)
        names = getattr(dm, "llm_names", None)
        if names is not None:
            check_llm_names(checkpoint.get("llm_names"), names, source)
        check_encoder(checkpoint, dm, source)

    def transfer_batch_to_device(self, batch, device, dataloader_idx: int):
        """A flat dict of tensors moves with one ``.to`` each (Lightning's generic walk over
        collections costs more than a small training step); anything else goes the usual way."""
        if isinstance(batch, dict) and all(isinstance(v, torch.Tensor) for v in batch.values()):
            return {k: v.to(device, non_blocking=True) for k, v in batch.items()}
        return super().transfer_batch_to_device(batch, device, dataloader_idx)

    # ------------------------------------------------------------------ shared step
    def model_step(self, batch: dict) -> tuple[torch.Tensor, dict]:
        """Loss and network outputs of any batch layout (cells, pairs or lists)."""
        x = batch["x"]
        out: dict[str, torch.Tensor] = {}
        if "pos" in batch:
            if self.loss_fn.needs_all_logits or not hasattr(self.net, "cell_logits"):
                all_logits = self(x)
                out["all_logits"] = all_logits
                out["pos"] = all_logits.gather(1, batch["pos"][:, None]).squeeze(1)
                out["neg"] = all_logits.gather(1, batch["neg"][:, None]).squeeze(1)
            else:
                out["pos"] = self.cell_logits(x, batch["pos"])
                out["neg"] = self.cell_logits(x, batch["neg"])
        elif "llm" in batch:
            if self.loss_fn.needs_all_logits:
                out["all_logits"] = self(x)
                out["logits"] = out["all_logits"].gather(1, batch["llm"][:, None]).squeeze(1)
            else:
                out["logits"] = self.cell_logits(x, batch["llm"])
        else:
            out["logits"] = self(x)
        return self.loss_fn(out, batch), out

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        loss, _ = self.model_step(batch)
        self.log("train/loss", loss, on_step=False, on_epoch=True, prog_bar=True,
                 batch_size=len(batch["x"]))
        return loss

    def _eval_step(self, batch: dict, stage: str) -> None:
        loss, out = self.model_step(batch)
        self.log(f"{stage}/loss", loss, on_step=False, on_epoch=True, prog_bar=stage == "val",
                 batch_size=len(batch["x"]), sync_dist=True)
        rec = {"pred": torch.sigmoid(out["logits"]).detach(),
               "y": torch.where(batch["mask"], batch["y"], torch.full_like(batch["y"], float("nan")))}
        if self._eval_calibrates():
            rec["logit"] = out["logits"].detach()
        if "cost" in batch:
            rec["cost"] = batch["cost"]
        if "index" in batch:
            rec["index"] = batch["index"][:, None]
        self._eval_store.setdefault(stage, []).append(rec)

    def validation_step(self, batch: dict, batch_idx: int) -> None:
        self._eval_step(batch, "val")

    def test_step(self, batch: dict, batch_idx: int) -> None:
        self._eval_step(batch, "test")

    def _eval_epoch_end(self, stage: str) -> None:
        recs = self._eval_store.pop(stage, [])
        if not recs:
            return
        cat = {k: torch.cat([r[k] for r in recs]) for k in recs[0]}
        if self.trainer.world_size > 1:  # DistributedSampler pads ranks to equal sizes
            cat = {k: self.all_gather(v).reshape(-1, v.shape[-1]) for k, v in cat.items()}
            if "index" in cat:  # the padding repeats rows: score each held-out query once
                _, first = np.unique(cat["index"][:, 0].cpu().numpy(), return_index=True)
                cat = {k: v[torch.as_tensor(first)] for k, v in cat.items()}
        cat.pop("index", None)
        # predictions keep their precision (the graph router's are float64, as it routes:
        # float32 sigmoids of distinct logits can tie and pick another LLM)
        arr = {k: (v.double() if k.startswith("pred") else v.float()).cpu().numpy()
               for k, v in cat.items()}
        logit = arr.pop("logit", None)
        # not for Lightning's sanity check before training, whose metrics are discarded
        sanity = bool(getattr(self._trainer, "sanity_checking", False))
        calib = self._train_logit_calibration() if logit is not None and not sanity else None
        if calib is not None:  # as the exported router's scores_from_logits
            from .llm_rows import calibrated_sigmoid
            arr["pred"] = calibrated_sigmoid(logit, calib)
        # ties between predicted scores go to the cheaper predicted cost: the module's own
        # cost predictions where it makes them (as its router routes), else mean train costs
        pred_cost = arr.pop("pred_cost", None)
        if pred_cost is None and "cost" in arr:
            pred_cost = self.eval_mean_costs
        metrics = epoch_metrics(arr["pred"], arr["y"], arr.get("cost"), pred_cost)
        for name, value in metrics.items():
            self.log(f"{stage}/{name}", float(value), prog_bar=name == "mu_o", rank_zero_only=False,
                     sync_dist=False)

    def _eval_calibrates(self) -> bool:
        """Whether evaluation epochs go through the train split's Platt map (see
        :attr:`calibrate_eval`) by the exported router's rule,
        :func:`~recsys_router.models.base.llm_rows.calibrates`."""
        from .llm_rows import calibrates
        return bool(self.calibrate_eval) and calibrates(self._loss_kind(), self.net)

    def _loss_kind(self) -> str:
        """The training loss's kind (``bce`` for a loss without one)."""
        return getattr(self.loss_fn, "kind", "bce")

    def _train_logit_calibration(self) -> np.ndarray | None:
        """``[a, b]`` fitted on the data module's train split with the network as it is now
        (the exported router's ``logit_calib_``: the same logits, cells and seed), or None
        without a data module that has one (or where the rule of
        :func:`~recsys_router.models.base.llm_rows.calibrates` fits none)."""
        from .llm_rows import ranking_calibration
        dm = getattr(self._trainer, "datamodule", None)
        splits = getattr(dm, "splits", None) or {}
        if "train" not in splits or not callable(getattr(dm, "embeddings", None)):
            return None
        batch = max(256, int(getattr(dm, "batch_size", 0) or 0))   # as the router predicts
        return ranking_calibration(
            self._loss_kind(), self.net,
            lambda: predict_logits(self.net, dm.embeddings("train"), batch_size=batch),
            splits["train"].scores, seed=int(getattr(dm, "seed", 0)))

    def on_validation_epoch_end(self) -> None:
        self._eval_epoch_end("val")

    def on_test_epoch_end(self) -> None:
        self._eval_epoch_end("test")

    def predict_step(self, batch: dict, batch_idx: int) -> dict:
        """Predicted scores (sigmoid of the logits) of every LLM, with the query row index."""
        return {"index": batch["index"], "scores": torch.sigmoid(self(batch["x"]))}

    def configure_optimizers(self):
        opt = torch.optim.AdamW(self.parameters(), lr=self.lr, weight_decay=self.weight_decay)
        plan = getattr(self, "lr_plan", None)
        if plan is None:
            return opt
        from .schedule import lr_factor
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: lr_factor(step, plan))
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}

    # ------------------------------------------------------------------ export
    def loss_config(self) -> dict:
        """The loss's constructor arguments (to rebuild it without the module)."""
        return self.loss_fn.config()

    def save_router_hyperparameters(self) -> None:
        """``save_hyperparameters`` of the calling ``__init__`` with the loss as plain data:
        the ``loss`` hyperparameter is its :meth:`loss_config` (not the module), so a
        checkpoint keeps it and ``load_from_checkpoint`` (or LightningCLI's ``--ckpt_path``)
        passes it back to ``__init__``, which rebuilds the loss with
        :meth:`RoutingLoss.from_config` (only the project's loss; nothing is imported)."""
        self.save_hyperparameters(ignore=["loss"], frame=inspect.currentframe().f_back)
        self.hparams["loss"] = self.loss_config()

    def to_router(self, datamodule=None, **router_options):
        """A fitted :class:`~recsys_router.models.base.lightning_router.LightningRouter` that needs
        no Trainer.

        Parameters
        ----------
        datamodule : RoutingDataModule, optional
            Supplies the encoder, LLM names and mean train costs (default: the trainer's).
        **router_options
            Training options of the returned router (``max_epochs``, ``batch_size``...),
            used only if it is re-fitted.

        Returns
        -------
        LightningRouter
            Holds a CPU copy of ``self.net`` in eval mode and the fitted encoder.
        """
        from .lightning_router import LightningRouter
        dm = datamodule
        if dm is None and self._trainer is not None:
            dm = getattr(self.trainer, "datamodule", None)
        if dm is None:
            raise ValueError("to_router needs the data module that the model was trained on "
                             "(for the encoder and LLM names): pass datamodule=")
        return LightningRouter.from_module(self, dm, **router_options)
