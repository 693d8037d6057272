"""Routers trained through Lightning that need no Trainer once fitted.

:class:`LightningRouter` is the :class:`~recsys_router.router.Router` side of a
:class:`~recsys_router.models.base.router_module.RouterModule`: ``fit(train, val)`` builds a
:class:`~recsys_router.datamodules.routing_datamodule.RoutingDataModule` over the given data, trains
the module with a quiet, seeded Trainer and keeps only what prediction needs - the
fitted encoder and a CPU copy of the module's plain ``net`` (no Lightning object), so
the router can be exported pickle-free and used inside ``recsys-router evaluate``.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import logging
import warnings

import numpy as np

from recsys_router.data import RoutingData
from recsys_router.router import Router

from .router_module import RouterModule, predict_logits

__all__ = ["LightningRouter", "LossConfigured", "ModuleRouter", "quiet_trainer"]

_QUIET_LOGGERS = ("pytorch_lightning", "lightning_fabric", "lightning.pytorch", "lightning")


@contextlib.contextmanager
def _quiet():
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
    with _quiet():
        return pl.Trainer(max_epochs=int(max_epochs), accelerator=accelerator, devices=devices,
                          enable_progress_bar=False, logger=False, enable_checkpointing=False,
                          enable_model_summary=False, num_sanity_val_steps=0,
                          limit_val_batches=None if validate else 0, **kwargs)


def _hold_out(train: RoutingData, frac: float, seed: int):
    """Seeded (inner train, held-out) split of the training queries for early stopping."""
    n_val = int(round(frac * train.n_queries))
    if n_val < 1 or n_val >= train.n_queries:
        raise ValueError(f"val_fraction={frac} holds out {n_val} of {train.n_queries} training "
                         "queries; it must leave at least one on each side")
    perm = np.random.default_rng(seed).permutation(train.n_queries)
    return train.subset(np.sort(perm[n_val:])), train.subset(np.sort(perm[:n_val]))


def _best_net_callback():
    """A callback keeping the weights of the epoch with the best ``val/mu_o`` (Lightning is
    imported only when it is needed)."""
    from pytorch_lightning.callbacks import Callback

    class BestNet(Callback):
        """Keeps a copy of ``pl_module.net``'s weights at the best ``val/mu_o`` so far."""

        def __init__(self):
            self.value, self.state, self.epoch = -np.inf, None, None

        def on_validation_end(self, trainer, pl_module):  # after the epoch's metrics are logged
            v = trainer.callback_metrics.get("val/mu_o")
            if v is not None and float(v) > self.value:
                self.value, self.epoch = float(v), int(trainer.current_epoch)
                self.state = copy.deepcopy(pl_module.net.state_dict())
    return BestNet()


class LightningRouter(Router):
    """Base of routers that train a :class:`RouterModule` with Lightning.

    Subclasses add their model hyperparameters to ``__init__`` (stored as attributes of
    the same name, nothing else) and implement :meth:`build_module`.

    Parameters
    ----------
    encoder : str
        Query encoder name (``recsys_router.encoders.get_encoder``).
    encoder_options : dict, optional
    mode : {"pointwise", "listwise", "pairwise"}, optional
        Training batch layout (must suit the loss kind; None = the subclass's default).
    batch_size, max_epochs : int
    seed : int
        Seeds the split of nothing (data is given) but the initialisation, shuffling and
        dropout: the same seed gives the same fitted router.
    accelerator : str
        ``"cpu"``, ``"gpu"`` or ``"auto"``; prediction always runs on CPU.
    val_fraction : float
        0 (default): train ``max_epochs`` epochs on all the data. Otherwise early stopping:
        this seeded share of the training queries is held out (unless ``fit`` is given a
        ``val`` set, which is then used), the network of the epoch with the best held-out
        ``mu_o`` is kept, and training stops after ``patience`` epochs without improvement.
    patience : int
        Epochs without a better held-out ``mu_o`` before stopping (with ``val_fraction``).

    Attributes
    ----------
    net_ : nn.Module
        The trained scoring network (CPU, eval mode).
    encoder_ : Encoder
        The fitted query encoder (a property: stateless encoders are rebuilt by name, so
        exported artifacts hold only fitted ones, as ``fitted_encoder_``).
    train_history_ : dict
        Last logged values (``train/loss``, and ``val/...`` when a val set was given).
    best_epoch_, val_score_ : int or None, float or None
        With ``val_fraction``: the (0-based) epoch whose network was kept, and its held-out
        ``mu_o``.
    """

    uses_text = True
    _transient_attrs_ = ("_encoder",)

    def __init__(self, encoder: str = "hashing", encoder_options: dict | None = None,
                 mode: str | None = None, batch_size: int = 64, max_epochs: int = 10,
                 seed: int = 0, accelerator: str = "cpu",
                 val_fraction: float = 0.0, patience: int = 3):
        self.encoder = encoder
        self.encoder_options = encoder_options
        self.mode = mode
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.seed = seed
        self.accelerator = accelerator
        self.val_fraction = val_fraction
        self.patience = patience

    # ------------------------------------------------------------------ to implement
    def build_module(self, n_llms: int, embed_dim: int) -> RouterModule:
        """Build an untrained module for this pool and embedding width."""
        raise TypeError(f"{type(self).__name__} must implement build_module(n_llms, embed_dim)")

    def resolved_mode(self) -> str:
        """Training batch layout (subclasses may derive it from their loss)."""
        return self.mode or "pointwise"

    # ------------------------------------------------------------------ fitting
    def _datamodule(self, train: RoutingData, val: RoutingData | None):
        from recsys_router.datamodules.routing_datamodule import RoutingDataModule
        splits = {"train": train} if val is None else {"train": train, "val": val}
        return RoutingDataModule.from_splits(splits, carve_val=False, encoder=self.encoder,
                                             encoder_options=self.encoder_options, seed=self.seed,
                                             batch_size=self.batch_size, mode=self.resolved_mode())

    def _fit(self, train: RoutingData, val: RoutingData | None) -> None:
        import pytorch_lightning as pl
        if self.max_epochs < 1:
            raise ValueError(f"max_epochs must be >= 1, got {self.max_epochs}")
        frac = float(getattr(self, "val_fraction", 0.0) or 0.0)
        if not 0 <= frac < 1:
            raise ValueError(f"val_fraction must be in [0, 1), got {frac!r}")
        if frac > 0 and val is None:
            train, val = _hold_out(train, frac, int(self.seed))
        dm = self._datamodule(train, val)
        callbacks = []
        best = None
        if frac > 0:
            from pytorch_lightning.callbacks import EarlyStopping
            best = _best_net_callback()
            callbacks = [best, EarlyStopping("val/mu_o", mode="max",
                                             patience=int(getattr(self, "patience", 3)))]
        with _quiet():
            pl.seed_everything(int(self.seed), workers=True, verbose=False)
            module = self.build_module(dm.n_llms, dm.embed_dim)
            trainer = quiet_trainer(self.max_epochs, accelerator=self.accelerator,
                                    validate=val is not None, callbacks=callbacks)
            trainer.fit(module, datamodule=dm)
        self.train_history_ = {k: float(v) for k, v in trainer.callback_metrics.items()}
        self.best_epoch_, self.val_score_ = None, None
        if best is not None and best.state is not None:
            module.net.load_state_dict(best.state)
            self.best_epoch_, self.val_score_ = best.epoch, best.value
        self._set_fitted_state(module, dm)

    def _set_fitted_state(self, module: RouterModule, dm) -> None:
        self.net_ = copy.deepcopy(module.net).cpu().eval()
        enc = dm.encoder
        # a stateless encoder is rebuilt from its name (not stored in exported artifacts)
        self.fitted_encoder_ = enc if enc.needs_fit else None
        self._encoder = enc
        self.llm_feature_stats_ = dm.llm_feature_stats
        prices = dm.splits["train"].llms[["input_price", "output_price"]].to_numpy(dtype=float)
        self.llm_prices_ = prices.mean(axis=1)   # USD per 1M tokens (NaN when unknown)

    @property
    def encoder_(self):
        """The fitted query encoder (rebuilt from ``encoder``/``encoder_options`` when stateless)."""
        enc = getattr(self, "_encoder", None)
        if enc is None:
            enc = self.fitted_encoder_
            if enc is None:
                from recsys_router.encoders import get_encoder
                enc = get_encoder(self.encoder, **(self.encoder_options or {}))
            self._encoder = enc
        return enc

    # ------------------------------------------------------------------ prediction
    def embed(self, data: RoutingData) -> np.ndarray:
        """Query embeddings of ``data`` with the fitted encoder."""
        self._check_fitted()
        return self.encoder_.encode_data(data)

    def predict_logits(self, data: RoutingData) -> np.ndarray:
        """Network logits (n_queries, n_llms) before the sigmoid."""
        self._check_fitted()
        self._check_llms(data)
        return predict_logits(self.net_, self.embed(data), batch_size=max(256, self.batch_size))

    def _predict_scores(self, data: RoutingData) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-self.predict_logits(data).astype(np.float64)))


class ModuleRouter(LightningRouter):
    """A router around any :class:`RouterModule` class, given by import path and options.

    This is what :meth:`RouterModule.to_router` returns (already fitted); calling ``fit``
    trains a fresh module of the same class and options.

    Parameters
    ----------
    module_class : str
        ``"package.module:Class"`` or ``"package.module.Class"`` of a RouterModule.
    module_options : dict, optional
        Constructor arguments except ``n_llms`` and ``embed_dim``; a ``loss`` given as a
        dict is built into a :class:`~recsys_router.models.losses.RoutingLoss`.
    encoder, encoder_options, mode, batch_size, max_epochs, seed, accelerator
        See :class:`LightningRouter`.

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> d = make_synthetic(80, 3, 2, seed=0)
    >>> r = ModuleRouter("recsys_router.models.mf_module:MFModule", {"dim": 4}, encoder_options={"dim": 16},
    ...                  max_epochs=1).fit(d)
    >>> r.predict_scores(d).shape
    (80, 3)
    """

    def __init__(self, module_class: str, module_options: dict | None = None,
                 encoder: str = "hashing", encoder_options: dict | None = None,
                 mode: str = "pointwise", batch_size: int = 64, max_epochs: int = 10, seed: int = 0,
                 accelerator: str = "cpu",
                 val_fraction: float = 0.0, patience: int = 3):
        super().__init__(encoder=encoder, encoder_options=encoder_options, mode=mode,
                         batch_size=batch_size, max_epochs=max_epochs, seed=seed,
                         accelerator=accelerator,
                         val_fraction=val_fraction, patience=patience)
        self.module_class = module_class
        self.module_options = module_options

    def _resolve_class(self):
        path = self.module_class.replace(":", ".")
        mod, _, name = path.rpartition(".")
        if not mod.startswith("recsys_router.models."):
            raise ValueError(f"module_class must live under recsys_router.models., got "
                             f"{self.module_class!r}")
        cls = getattr(importlib.import_module(mod), name, None)
        if not (isinstance(cls, type) and issubclass(cls, RouterModule)):
            raise ValueError(f"{self.module_class!r} is not a RouterModule subclass")
        return cls

    def build_module(self, n_llms: int, embed_dim: int) -> RouterModule:
        from recsys_router.models.losses import RoutingLoss
        opts = dict(self.module_options or {})
        if isinstance(opts.get("loss"), dict):
            opts["loss"] = RoutingLoss(**opts["loss"])
        return self._resolve_class()(n_llms=n_llms, embed_dim=embed_dim, **opts)

    @classmethod
    def from_module(cls, module: RouterModule, datamodule, **options) -> "ModuleRouter":
        """A fitted router from a trained module and the data module it was trained on."""
        hp = {k: v for k, v in dict(module.hparams).items() if k not in ("n_llms", "embed_dim")}
        hp["loss"] = module.loss_config()
        defaults = {"encoder": datamodule.encoder_name, "encoder_options": datamodule.encoder_options,
                    "mode": datamodule.mode, "batch_size": datamodule.batch_size,
                    "seed": datamodule.seed}
        router = cls(f"{type(module).__module__}:{type(module).__name__}", hp,
                     **{**defaults, **options})
        train = datamodule.splits["train"]
        router.llm_names_ = list(train.llm_names)
        router.mean_costs_ = train.mean_costs() if train.costs is not None else None
        router._set_fitted_state(module, datamodule)
        router.train_history_ = {}
        router.fitted_ = True
        return router


class LossConfigured:
    """Mixin for routers whose loss is set by the parameters ``loss``, ``wtp``, ``ipw_clip``,
    ``logit_adjust`` and ``entropy_weight``: builds the loss and derives the batch layout."""

    def routing_loss(self):
        """The :class:`~recsys_router.models.losses.RoutingLoss` these parameters describe."""
        from recsys_router.models.losses import RoutingLoss
        return RoutingLoss(self.loss, wtp=self.wtp, ipw_clip=self.ipw_clip,
                           logit_adjust=self.logit_adjust, entropy_weight=self.entropy_weight)

    def resolved_mode(self) -> str:
        """``mode`` when given, else the layout the loss needs (pointwise/listwise/pairwise)."""
        from recsys_router.models.losses import default_mode
        return self.mode or default_mode(self.loss)

