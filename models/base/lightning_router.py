"""The one router of every Lightning-trained model, needing no Trainer once fitted.

Reference: the Lightning design of a ``LightningModule`` trained by a ``Trainer`` over a
``LightningDataModule`` (Falcon et al., PyTorch Lightning, 2019).

:class:`LightningRouter` is the :class:`~recsys_router.router.Router` side of any
:class:`~recsys_router.models.base.router_module.RouterModule`, given as a class, an import
path or a ``{"class_path", "init_args"}`` config, plus trainer and encoder settings.
``fit(train, val)`` builds a
:class:`~recsys_router.datamodules.routing_datamodule.RoutingDataModule` over the given data, trains
the module with a quiet, seeded Trainer and keeps only what prediction needs - the
fitted encoder and a CPU copy of the module's plain ``net`` (no Lightning object), so
the router can be exported pickle-free and used inside ``recsys-router evaluate``.

The registry's ``mf``, ``two-tower``, ``mirt``, ``nirt`` and ``graph`` are this router with
a fixed module: :func:`~recsys_router.models.base.derive.for_module` derives each one's flat
hyperparameters and defaults from its module's signature.

Defaults scaled to the data (every Lightning router):

* the batch size, the number of optimizer steps and the learning-rate schedule (warm-up, then
  cosine decay) follow from the number of training items (observed cells for pointwise
  losses, queries for listwise ones, pairs for pairwise ones) by the rule of
  :func:`~recsys_router.models.base.schedule.data_scaled_plan`, unless ``batch_size``,
  ``max_steps`` or ``max_epochs`` are given;
* early stopping is on (``val_fraction=0.1``): a seeded tenth of the training queries is held
  out (or ``fit``'s ``val``), checked at epoch ends about every 5% of the step budget; training
  stops once the
  held-out loss (the graph router: the mean of its last 3 checks, ``stop_smoothing``) has
  not improved for ``patience`` checks, never before 40% of the budget
  (held-out ``mu_o`` alone plateaus at the best single LLM's level early in training, which
  stopped the graph router before it learned to route), and the network of the check with
  the best held-out ``mu_o`` (the later one on ties) is kept;
* scores are mapped onto [0, 1] targets by a transform chosen from the training scores
  (:func:`~recsys_router.score_scale.choose_score_scale`: 0/1 and fractions as they are,
  graded scores min-max scaled, skewed continuous scores rank-transformed) and predictions
  are mapped back to the data's scale. Training sees only the [0, 1] targets: the ``utility``
  loss's ``wtp`` is converted to them under min-max scaling (``wtp * (max - min)``, exact:
  see :meth:`LightningRouter.build_module`) but stays in target units under the rank
  transform; the held-out epoch metrics (``val/mu_o``, ``val/aiq``..., and so
  ``val_score_``) and the ``selection_ratio`` targets are on the target scale.
"""

from __future__ import annotations

import copy
import inspect

import numpy as np

from recsys_router.coldstart.pool import observed_range
from recsys_router.data import RoutingData
from recsys_router.router import Router, mean_llm_prices

from .lightning_state import LightningStateMixin
from .llm_rows import LLMRowsMixin, calibrated_sigmoid, ranking_calibration
# the module's class, arguments and building; resolve_module_class re-exported here
from .module_spec import ModuleSpecMixin, resolve_module_class
from .router_module import RouterModule, predict_logits
from .training import (MIN_QUERIES_TO_HOLD_OUT, early_stopping_callback, hold_out, quiet,
                       quiet_trainer, rescored)

__all__ = ["LightningRouter", "TRAINER_SETTINGS", "resolve_module_class"]

#: the trainer and encoder settings every Lightning router takes, in signature order, with
#: their defaults (``batch_size``, ``max_epochs`` and ``max_steps`` None: data-scaled)
TRAINER_SETTINGS = {"encoder": "hashing", "encoder_options": None, "mode": None,
                    "batch_size": None, "max_epochs": None, "seed": 0, "accelerator": "cpu",
                    "val_fraction": 0.1, "patience": 4, "max_steps": None,
                    "score_transform": "auto"}


class LightningRouter(ModuleSpecMixin, LLMRowsMixin, LightningStateMixin, Router):
    """A router that trains any :class:`RouterModule` with Lightning.

    Parameters
    ----------
    module : type, str or dict
        The RouterModule class, its import path (``"package.module:Class"`` under
        ``recsys_router.models.``), or a config ``{"class_path": ..., "init_args": {...}}``
        as in ``configs/models/*.yaml``.
    module_options : dict, optional
        Constructor arguments except ``n_llms`` and ``embed_dim`` (override a config's
        ``init_args``); a ``loss`` given as a dict (``kind``, ``wtp``... or a
        ``class_path``/``init_args`` config) is built into a
        :class:`~recsys_router.models.losses.RoutingLoss`. The loss's ``selection_ratio``
        is passed to the data module, which builds the listwise targets and the ``ipw_clip``
        positives from it (RouterEval selection vectors, taken on the [0, 1] training
        targets of ``score_transform``, not on the raw scores when those are rescaled).
    encoder : str
        Query encoder name (``recsys_router.encoders.get_encoder``).
    encoder_options : dict, optional
    mode : {"pointwise", "listwise", "pairwise"}, optional
        Training batch layout (None: the one the loss needs).
    batch_size : int, optional
        Training items per step; None: data-scaled
        (:func:`~recsys_router.models.base.schedule.data_scaled_plan`).
    max_epochs : int, optional
        Passes over the training items; None: the data-scaled step budget (``max_steps``).
    seed : int
        Seeds the initialisation, shuffling and dropout (and the module's ``seed`` when it
        takes one): the same seed gives the same fitted router.
    accelerator : str
        ``"cpu"``, ``"gpu"`` or ``"auto"``; prediction always runs on CPU.
    val_fraction : float
        Early stopping (default 0.1): this seeded share of the training queries is held out
        (unless ``fit`` is given a ``val`` set, which is then used; with fewer than
        :data:`MIN_QUERIES_TO_HOLD_OUT` training queries nothing is held out), checked at the
        end of every epoch or every few epochs (about every 5% of the step budget); the network
        of the check with the best held-out ``mu_o`` is kept. 0: train the whole budget on
        all the data.
    patience : int
        Checks without a lower held-out loss before stopping (never before 40% of the budget).
    max_steps : int, optional
        Optimizer steps; None: data-scaled (or ``max_epochs`` passes when that is given).
    score_transform : {"auto", "identity", "minmax", "rank"}
        Map of training scores onto [0, 1] targets (``auto``: chosen from the data by
        :func:`~recsys_router.score_scale.choose_score_scale`); predictions are mapped back.
        The ``utility`` loss's ``wtp`` is per unit of the data's score under ``identity``
        and ``minmax`` (converted to target units), per unit of rank-transformed target
        under ``rank``.

    Attributes
    ----------
    net_ : nn.Module
        The trained scoring network (CPU, eval mode).
    encoder_ : Encoder
        The query encoder fixed at fit (a property reading ``fitted_encoder_``: the data
        module's encoder, fitted on the train texts when it learns from them; the stored
        one on a router rebuilt from an artifact), so ``set_params(encoder=...)`` or
        ``encoder_options`` after ``fit`` change no prediction until the next ``fit``.
    train_history_ : dict
        Last logged values (``train/loss``, and ``val/...`` when a val set was given).
    plan_ : dict
        The training plan used (batch size, step budget, warm-up, check interval...).
    steps_ : int
        Optimizer steps taken (fewer than the budget when training stopped early).
    best_step_, val_score_ : int or None, float or None
        With early stopping: the step whose network was kept, and its held-out ``mu_o``
        on the [0, 1] target scale of ``score_scale_`` (the mean transformed score of the
        LLMs it routes to), not on the data's scale: the same as the data's ``mu_o`` for
        identity scales, ``(mu_o - min) / (max - min)`` for ``minmax`` (training ``min``
        and ``max``; held-out scores outside them clipped to them) and a mean
        rank-transformed score (not invertible from the mean) for ``rank``.
    score_scale_ : ScoreScale
        The score transform used (``score_scale_.describe()``).

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> d = make_synthetic(80, 3, 2, seed=0)
    >>> r = LightningRouter("recsys_router.models.mf_module:MFModule", {"dim": 4},
    ...                     encoder_options={"dim": 16}, max_epochs=1).fit(d)
    >>> r.predict_scores(d).shape
    (80, 3)
    """

    uses_text = True
    #: on training sets of at most 20,000 observed cells (a few hundred to a few thousand
    #: queries) one held-out fifth is the noisiest and a data-scaled fit takes a few seconds,
    #: so the safe fallback's 5 inner folds (6 fits) are worth their cost there; above, one
    #: held-out fifth (1 fit: the inner-train fit is kept)
    fold_max_cells = 20_000
    #: every Lightning module trains on logged feedback (``RouterModule`` batches with ``w``)
    feedback_losses = ("naive", "ips", "snips", "dr")

    @property
    def holds_out_val(self) -> bool:            # type: ignore[override]
        """Early stopping on a held-out part of the training queries (``val_fraction > 0``)."""
        return float(self.val_fraction or 0.0) > 0

    def __init__(self, module, module_options: dict | None = None, encoder: str = "hashing",
                 encoder_options: dict | None = None, mode: str | None = None,
                 batch_size: int | None = None, max_epochs: int | None = None, seed: int = 0,
                 accelerator: str = "cpu", val_fraction: float = 0.1, patience: int = 4,
                 max_steps: int | None = None, score_transform: str = "auto"):
        self.module = module
        self.module_options = module_options
        self.encoder = encoder
        self.encoder_options = encoder_options
        self.mode = mode
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.seed = seed
        self.accelerator = accelerator
        self.val_fraction = val_fraction
        self.patience = patience
        self.max_steps = max_steps
        self.score_transform = score_transform

    # ------------------------------------------------------------------ fitting
    def _freeze_params(self) -> None:
        """Check the trainer settings (as ``fit`` does) and fix the ``batch_size`` prediction
        reads as ``batch_size_``: ``set_params`` after ``fit`` changes no prediction until the
        next ``fit``."""
        self._check_settings()
        self.batch_size_ = self.batch_size

    def _datamodule(self, train: RoutingData, val: RoutingData | None):
        from recsys_router.datamodules.routing_datamodule import RoutingDataModule
        splits = {"train": train} if val is None else {"train": train, "val": val}
        fb = getattr(self, "_feedback", None) or {}  # set by LoggedFeedbackRouter for one fit
        # the loss's selection_ratio decides the listwise targets (and the ipw positives),
        # which the data module builds
        loss = self.module_kwargs().get("loss")
        ratio = {} if loss is None else {"selection_ratio": float(loss.selection_ratio)}
        return RoutingDataModule.from_splits(splits, carve_val=False, encoder=self.encoder,
                                             encoder_options=self.encoder_options, seed=self.seed,
                                             batch_size=self.batch_size or 64,
                                             mode=self.resolved_mode(), **ratio, **fb)

    def _fit(self, train: RoutingData, val: RoutingData | None) -> None:
        import pytorch_lightning as pl

        from recsys_router.score_scale import choose_score_scale
        frac = self._check_settings()
        method = self.score_transform or "identity"
        self.score_scale_ = choose_score_scale(train.scores, method=method)
        every = train                                   # all training queries, for the Platt map
        if frac > 0 and val is None and train.n_queries >= MIN_QUERIES_TO_HOLD_OUT:
            train, val = hold_out(train, frac, int(self.seed))
        validate = val is not None and frac > 0
        dm = self._datamodule(rescored(train, self.score_scale_),
                              rescored(val, self.score_scale_) if validate else None)
        dm.setup("fit")
        n_items = len(dm._train_dataset())
        plan = self._plan(n_items)
        dm.batch_size = plan.batch_size
        self.plan_ = plan.as_dict()
        callbacks, best = [], None
        kwargs = {}
        if validate:
            best = early_stopping_callback(int(self.patience), plan.min_steps,
                                           int(getattr(self.module_class(), "stop_smoothing", 1)))
            callbacks = [best]
            # checks at epoch ends (a mid-epoch check disagreed with the fitted graph router's
            # routing), every epoch or every few: about every ``check_every`` steps
            per_epoch = -(-n_items // plan.batch_size)
            kwargs = {"check_val_every_n_epoch": max(1, round(plan.check_every / per_epoch))}
        with quiet():
            pl.seed_everything(int(self.seed), workers=True, verbose=False)
            module = self.build_module(dm.n_llms, dm.embed_dim, self.score_scale_)
            module.lr_plan = plan
            module.calibrate_eval = False   # held-out checks keep the network by mu_o
            trainer = quiet_trainer(-1, accelerator=self.accelerator, validate=validate,
                                    callbacks=callbacks, max_steps=plan.max_steps, **kwargs)
            trainer.fit(module, datamodule=dm)
        module.lr_plan = None
        self.train_history_ = {k: float(v) for k, v in trainer.callback_metrics.items()}
        self.steps_ = int(trainer.global_step)
        self.best_step_, self.val_score_ = None, None
        if best is not None and best.state is not None:
            module.net.load_state_dict(best.state)
            self.best_step_, self.val_score_ = best.step, best.value
        # the module and its trainer end with this call: the router takes the network itself
        self._set_fitted_state(module, dm, take_net=True)
        self.logit_calib_ = self._fit_logit_calibration(rescored(every, self.score_scale_))

    def _fit_logit_calibration(self, train: RoutingData) -> np.ndarray | None:
        """Platt map of the logits of a network trained with a ranking loss (listwise /
        pairwise / utility), fitted on the training cells; None for pointwise losses, whose
        ``sigmoid(logit)`` already estimates the score (the rule and fit of
        :func:`~recsys_router.models.base.llm_rows.ranking_calibration`, which the module's
        validation epochs share)."""
        loss = self.module_kwargs().get("loss")
        kind = loss.kind if loss is not None else self.module_class().default_loss
        # (called before fitted_ is set)
        return ranking_calibration(kind, getattr(self, "net_", None),
                                   lambda: self._pool_logits(self.encoder_.encode_data(train)),
                                   train.scores, seed=int(self.seed))

    def _set_fitted_state(self, module: RouterModule, dm, take_net: bool = False) -> None:
        """The fitted attributes from a trained ``module`` and its data module ``dm``.

        ``take_net``: the router takes ``module.net`` itself (the module is discarded, as in
        :meth:`_fit`) instead of a deep copy (a module the caller keeps,
        :meth:`from_module`); the first copy in a process took 0.26 s of the graph router's
        10 s fit on the 1M-record set, later ones 5-7 ms (``benchmarks/README.md``).
        """
        net = module.net if take_net else copy.deepcopy(module.net)
        self.net_ = net.cpu().eval()
        self.net_n_llms_ = int(dm.n_llms)  # the pool the network was built for (export)
        self.added_llm_rows_, self.kept_cols_ = None, None  # a refit forgets onboarded LLMs
        self.logit_calib_ = None    # set by _fit / from_module for ranking losses
        # the encoder the network was trained on, fixed as learned state (prediction never
        # reads the encoder / encoder_options parameters again)
        self.fitted_encoder_ = dm.encoder
        self.llm_feature_stats_ = dm.llm_feature_stats
        self.llm_prices_ = mean_llm_prices(dm.splits["train"].llms)  # as Router.fit sets them

    @classmethod
    def from_module(cls, module: RouterModule, datamodule, **options) -> "LightningRouter":
        """A fitted router from a trained module and the data module it was trained on.

        Parameters
        ----------
        module : RouterModule
            The trained module (its network is deep-copied).
        datamodule : RoutingDataModule
            The data module it was trained on: its encoder, LLM names, mean train costs and
            ``train`` split.
        **options
            Router settings (override those taken from ``datamodule``).

        Returns
        -------
        LightningRouter
            Fitted; for a ranking loss (listwise / pairwise / utility) with the same Platt map
            of the logits that :meth:`fit` fits (``logit_calib_``, on the ``train`` split's
            cells), so its scores estimate the data module's scores rather than being a raw
            ``sigmoid(logit)``.
        """
        hp = {k: v for k, v in dict(module.hparams).items()  # not LightningCLI's "_class_path"
              if k not in ("n_llms", "embed_dim") and not k.startswith("_")}
        if "loss" in inspect.signature(type(module).__init__).parameters:
            hp["loss"] = module.loss_config()
        defaults = {"encoder": datamodule.encoder_name, "encoder_options": datamodule.encoder_options,
                    "mode": datamodule.mode, "batch_size": datamodule.batch_size,
                    "seed": datamodule.seed}
        router = LightningRouter(f"{type(module).__module__}:{type(module).__name__}", hp,
                                 **{**defaults, **options})
        router._fix_params()
        train = datamodule.splits["train"]
        router.llm_names_ = list(train.llm_names)
        router.mean_costs_ = train.mean_costs() if train.costs is not None else None
        # as Router.fit sets them: the training scores' range (the scale add_llm holds probe
        # scores to) and an unchanged pool with no onboarded LLM
        router.score_range_ = observed_range(train.scores)
        router.core_llms_, router.probe_llms_, router.llm_info_ = None, {}, {}
        router._set_fitted_state(module, datamodule)
        # the Platt map of ranking losses, as ``fit`` fits it: on all the training queries, on
        # the scale the module was trained on (the data module's own scores: it rescales none)
        router.logit_calib_ = router._fit_logit_calibration(
            rescored(train, getattr(router, "score_scale_", None)))
        router.train_history_ = {}
        router.fitted_ = True
        return router

    @property
    def encoder_(self):
        """The query encoder fixed at fit (``fitted_encoder_``); before the first fit, the one
        ``encoder`` / ``encoder_options`` name (built on each call, never kept)."""
        enc = getattr(self, "fitted_encoder_", None)
        if enc is not None:
            return enc
        from recsys_router.encoders import get_encoder
        return get_encoder(self.encoder, **(self.encoder_options or {}))

    # ------------------------------------------------------------------ prediction
    def embed(self, data: RoutingData) -> np.ndarray:
        """Query embeddings of ``data`` with the fitted encoder."""
        self._check_fitted()
        return self.encoder_.encode_data(data)

    def predict_logits(self, data: RoutingData) -> np.ndarray:
        """Network logits (n_queries, n_llms) before the sigmoid."""
        self._check_fitted()
        self._check_llms(data)
        return self._pool_logits(self.embed(data))

    def _pool_logits(self, x: np.ndarray) -> np.ndarray:
        # rows per network call: the batch size fixed at fit (or the one its plan used), >= 256
        used = self.batch_size_ or (getattr(self, "plan_", None) or {}).get("batch_size")
        out = predict_logits(self.net_, x, batch_size=max(256, int(used or 0)))
        return self._with_added_llms(out, x)

    def to_data_scale(self, probs: np.ndarray) -> np.ndarray:
        """Map [0, 1] network outputs back to the training scores' scale (monotone)."""
        scale = getattr(self, "score_scale_", None)
        return probs if scale is None else scale.inverse(probs)

    def scores_from_logits(self, logits: np.ndarray) -> np.ndarray:
        """Predicted scores on the data's scale from network logits (n, L) of the pool: the
        logit calibration of ranking losses (``logit_calib_``), the sigmoid, then
        :meth:`to_data_scale`. :meth:`predict_scores` and the Thompson draws of
        :func:`recsys_router.feedback.sampling.sample_scores` both go through it."""
        calib = getattr(self, "logit_calib_", None)     # ranking losses: Platt-scaled logits
        return self.to_data_scale(calibrated_sigmoid(logits, calib))

    def _predict_scores(self, data: RoutingData) -> np.ndarray:
        return self.scores_from_logits(self.predict_logits(data))
