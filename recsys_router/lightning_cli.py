"""The router LightningCLI: model and data configs (``class_path`` in YAML) into a model, a
data module and a trainer, with size links and checkpoint / early-stopping defaults. Used by
``recsys-router fit|validate|test|predict``, by ``export -c`` and by the tuning objectives.

The model is any :class:`~recsys_router.models.base.router_module.RouterModule` subclass and the
data any :class:`~recsys_router.datamodules.routing_datamodule.RoutingDataModule`. ``n_llms`` and
``embed_dim`` are linked from the data module: a config or argument giving another value is
refused (:func:`check_linked_sizes`; the data's value replaced it silently). Defaults: CSVLogger under
``lightning_logs/``, ModelCheckpoint (the best epoch, ``epochNNN-mu_oX.ckpt``) and
EarlyStopping on ``val/mu_o`` (maximised), ``last.ckpt`` rewritten at every epoch's end (the
final epoch's state, from the unmonitored ``last_checkpoint`` ModelCheckpoint),
``seed_everything=0``; ``predict`` writes ``predictions.csv`` (query id, routed LLM, predicted
score per LLM) of ``--predictions.split`` (default ``test``; linked to the data module's
``predict_split``) to the log dir or ``--predictions.output_dir``. A loss
``selection_ratio`` that differs from the data module's is refused
(:func:`check_selection_ratio`): the data module builds the targets from its own; so is a
loss kind the data module's ``mode`` cannot train (:func:`check_mode_loss`).

Untrusted input: a ``class_path`` (in a config or an argument) may only name a class under
:data:`ALLOWED_IMPORT_PATHS` (jsonargparse imports the module of any path it parses: anything
else is refused before an import). An argument that does not parse or that a constructor
refuses is raised as one :class:`~recsys_router.errors.ConfigArgumentError` naming the argument
(:func:`argument_error`), which ``recsys-router`` prints as one line (exit 2). A checkpoint
is data: ``--ckpt_path`` must be a local file, read as plain data here and by Lightning
(:mod:`recsys_router.lightning_ckpt`).
"""

from __future__ import annotations

from jsonargparse import ArgumentError, lazy_instance
from pytorch_lightning.callbacks import EarlyStopping, ModelCheckpoint
from pytorch_lightning.cli import LightningCLI
from pytorch_lightning.loggers import CSVLogger

from recsys_router.lightning_ckpt import check_ckpt_hparams as _check_ckpt_hparams
from recsys_router.lightning_ckpt import check_ckpt_model_class as _check_ckpt_model_class
from recsys_router.lightning_ckpt import check_ckpt_path, check_weights_only
from recsys_router.lightning_ckpt import read_ckpt_hparams as _read_ckpt_hparams
from recsys_router.lightning_errors import ALLOWED_IMPORT_PATHS, argument_error, error_chain
from recsys_router.models.base.callbacks import ScoresWriter

__all__ = ["RouterCLI", "build_lightning_cli", "last_checkpoint_path", "MONITOR",
           "LIGHTNING_COMMANDS", "check_selection_ratio", "argument_error",
           "ALLOWED_IMPORT_PATHS", "restrict_class_paths", "check_linked_sizes",
           "check_mode_loss"]

#: metric that checkpointing and early stopping watch by default
MONITOR = "val/mu_o"
LIGHTNING_COMMANDS = ("fit", "validate", "test", "predict")


class RouterCLI(LightningCLI):
    """LightningCLI with size links and checkpoint / early-stopping defaults; argument errors
    raise :class:`~recsys_router.errors.ConfigArgumentError` (one line) instead of exiting."""

    def init_parser(self, **kwargs):
        """The parser, raising its errors instead of printing usage and exiting (status 2),
        and refusing a ``class_path`` outside :data:`ALLOWED_IMPORT_PATHS`."""
        restrict_class_paths()
        kwargs.setdefault("exit_on_error", False)
        return super().init_parser(**kwargs)

    def parse_arguments(self, parser, args) -> None:
        """Parse as LightningCLI does; a refused argument raises one ConfigArgumentError."""
        try:
            super().parse_arguments(parser, args)
        except ArgumentError as exc:
            raise argument_error(exc) from exc
        # the linked sizes the config itself gives (a --ckpt_path checkpoint's come later)
        self._given_sizes = _given_sizes(self.config)

    def add_arguments_to_parser(self, parser) -> None:
        parser.link_arguments("data.n_llms", "model.init_args.n_llms", apply_on="instantiate")
        parser.link_arguments("data.embed_dim", "model.init_args.embed_dim", apply_on="instantiate")
        parser.add_lightning_class_args(ModelCheckpoint, "checkpoint")
        parser.set_defaults({"checkpoint.monitor": MONITOR, "checkpoint.mode": "max",
                             "checkpoint.save_last": False,
                             "checkpoint.filename": "epoch{epoch:03d}-mu_o{val/mu_o:.4f}",
                             "checkpoint.auto_insert_metric_name": False})
        # last.ckpt = the final epoch: a monitored checkpoint's save_last only rewrites it when
        # a top-k checkpoint is saved (pytorch-lightning 2.6), so an unmonitored one writes it
        parser.add_lightning_class_args(ModelCheckpoint, "last_checkpoint")
        parser.set_defaults({"last_checkpoint.monitor": None, "last_checkpoint.save_top_k": 1,
                             "last_checkpoint.filename": "last",
                             "last_checkpoint.save_last": False,
                             "last_checkpoint.enable_version_counter": False})
        # last.ckpt lies beside the other checkpoints
        parser.link_arguments("checkpoint.dirpath", "last_checkpoint.dirpath")
        parser.add_lightning_class_args(ScoresWriter, "predictions")
        # one source of truth: the data module serves the split whose ids the writer writes
        parser.link_arguments("predictions.split", "data.init_args.predict_split")
        parser.add_lightning_class_args(EarlyStopping, "early_stopping")
        parser.set_defaults({"early_stopping.monitor": MONITOR, "early_stopping.mode": "max",
                             "early_stopping.patience": 5, "early_stopping.strict": False})

    def instantiate_classes(self) -> None:
        """Instantiate as LightningCLI does, then refuse a loss ``selection_ratio`` that
        differs from the data module's (see :func:`check_selection_ratio`), a loss kind the
        data module's batches cannot train (:func:`check_mode_loss`) and an ``n_llms`` /
        ``embed_dim`` the config gives that differs from the data's
        (:func:`check_linked_sizes`). A value a
        constructor refuses (its :class:`~recsys_router.errors.ArgumentValueError`) raises
        one ConfigArgumentError naming the argument; another ``ValueError`` (it may be a bug,
        e.g. in the data loading that runs here) one too, ending in "(rerun with --debug for
        the traceback)"; any other exception propagates with its traceback."""
        from recsys_router.errors import ArgumentValueError, DataValidationError  # noqa: PLC0415
        try:
            super().instantiate_classes()
        except ValueError as exc:
            inner = error_chain(exc)[-1]
            # a data error raised as it is (loading the data for the size links) says where
            # already; not a ValueError inside (a bug): the traceback
            if isinstance(exc, DataValidationError) or not isinstance(inner, ValueError):
                raise
            error = argument_error(exc, getattr(self, "config", None))
            if not isinstance(inner, ArgumentValueError):  # not a deliberate refusal
                argument = error.argument
                error = type(error)(f"{error} (rerun with --debug for the traceback)")
                error.argument = argument
            raise error from exc
        check_linked_sizes(getattr(self, "_given_sizes", {}), self.datamodule)
        check_selection_ratio(self.model, self.datamodule)
        check_mode_loss(self.model, self.datamodule)

    def _parse_ckpt_path(self) -> None:
        """Read a ``--ckpt_path`` checkpoint once, check its hyperparameters, then parse them
        into the model config as LightningCLI does (this replaces its method, which read the
        file a second time).

        jsonargparse imports the module of any ``class_path`` it is given, so both class paths
        a checkpoint names are checked as text first, nothing imported: the model's
        ``_class_path`` must lie under ``recsys_router.models.`` (the rule of
        :func:`~recsys_router.models.base.lightning_router.resolve_module_class`), and a
        ``loss`` must be the project's
        :class:`~recsys_router.models.losses.RoutingLoss` as plain data
        (:meth:`RoutingLoss.from_config`); and a checkpoint of another model class than the
        configured ``--model`` is refused (it would replace that model). Before that, the
        path must be a local file (:func:`~recsys_router.lightning_ckpt.check_ckpt_path`: no
        URL, fsspec path or Lightning keyword, which Lightning would resolve or fetch itself)
        and ``--weights_only`` not false. Each refusal is one error line, exit 2."""
        sub = self.config.get("subcommand") if hasattr(self, "config") else None
        if not sub:
            return
        check_weights_only(self.config[sub].get("weights_only"))
        ckpt_path = check_ckpt_path(self.config[sub].get("ckpt_path"))
        if ckpt_path is None:
            return
        hparams = dict(_read_ckpt_hparams(str(ckpt_path)))
        _check_ckpt_hparams(hparams, str(ckpt_path))
        _check_ckpt_model_class(hparams, self.config[sub].get("model"), str(ckpt_path))
        hparams.pop("_instantiator", None)
        if not hparams:
            return
        if "_class_path" in hparams:
            model = {"class_path": hparams.pop("_class_path"), "dict_kwargs": hparams}
        else:
            model = hparams
        try:
            self.config = self.parser.parse_object({sub: {"model": model}}, self.config)
        except (ArgumentError, ImportError) as exc:  # ImportError: a class_path refused
            raise argument_error(exc) from exc

    def _prepare_subcommand_kwargs(self, subcommand: str) -> dict:
        """LightningCLI's arguments of the sub-command, with ``weights_only=True``: Lightning's
        own read of the checkpoint (the one ``--ckpt_path`` names, or one it picks itself, e.g.
        an HPC resume) unpickles plain data only, whatever ``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD``
        says."""
        kwargs = super()._prepare_subcommand_kwargs(subcommand)
        kwargs["weights_only"] = True
        return kwargs


def restrict_class_paths() -> None:
    """Make jsonargparse refuse (before importing anything) a ``class_path`` or import path
    value outside :data:`ALLOWED_IMPORT_PATHS` (its import path policy, jsonargparse >= 4.53;
    a process-wide setting). Without that policy nothing is restricted here; a warning says so.
    """
    import jsonargparse  # noqa: PLC0415
    try:
        jsonargparse.set_parsing_settings(import_path_denylist=["*"],
                                          import_path_allowlist=list(ALLOWED_IMPORT_PATHS))
    except TypeError:  # an older jsonargparse: no import path policy
        import warnings  # noqa: PLC0415
        warnings.warn("this jsonargparse cannot restrict class_path imports (needs >= 4.53): a "
                      "config's class_path may import any module", stacklevel=2)


def check_selection_ratio(model, datamodule) -> None:
    """Refuse a model whose loss's ``selection_ratio`` differs from the data module's.

    The data module builds the listwise targets (RouterEval selection vectors) and the
    ``ipw_clip`` positives from its own ``selection_ratio``; the loss's is only recorded.
    ``LightningRouter`` passes its loss's value to the data module it builds, but a config
    holds both (``model.init_args.loss.init_args.selection_ratio`` and
    ``data.init_args.selection_ratio``, each 0.95 by default), and the data module is
    instantiated before the model, so the two cannot be linked: set both to the same value.

    Parameters
    ----------
    model : RouterModule
    datamodule : RoutingDataModule or None

    Raises
    ------
    DataValidationError
        When both define a ``selection_ratio`` and they differ (a ``ValueError``; the CLI
        prints it as one error line and exits 2, like the other config data errors).
    """
    loss = getattr(model, "loss_fn", None)
    mine = getattr(loss, "selection_ratio", None)
    theirs = getattr(datamodule, "selection_ratio", None)
    if mine is not None and theirs is not None and float(mine) != float(theirs):
        from recsys_router.errors import DataValidationError  # noqa: PLC0415
        raise DataValidationError(
            f"the model's loss has selection_ratio={mine} but the data module has "
            f"selection_ratio={theirs}: the data module's builds the targets, so set both "
            f"(model.init_args.loss.init_args.selection_ratio and "
            f"data.init_args.selection_ratio) to one value")


def _given_sizes(config) -> dict:
    """The ``n_llms`` / ``embed_dim`` the parsed ``config`` gives the model (None: not given)."""
    sub = config.get("subcommand") if hasattr(config, "get") else None
    cfg = config.get(sub) if sub else config
    model = cfg.get("model") if hasattr(cfg, "get") else None
    init_args = model.get("init_args") if hasattr(model, "get") else None
    if not hasattr(init_args, "get"):
        return {}
    return {name: init_args.get(name) for name in ("n_llms", "embed_dim")}


def check_linked_sizes(given: dict, datamodule) -> None:
    """Refuse an ``n_llms`` / ``embed_dim`` given in a config or argument that differs from
    the data module's: both are linked from the data (its value replaced the given one
    without a word). An equal value passes.

    Raises
    ------
    ConfigArgumentError
        Naming the option, the given value and the data's.
    """
    for name in ("n_llms", "embed_dim"):
        value, linked = given.get(name), getattr(datamodule, name, None)
        if value is not None and linked is not None and value != linked:
            from recsys_router.errors import ConfigArgumentError  # noqa: PLC0415
            raise ConfigArgumentError(
                f"{value!r} differs from the data's {name} {linked}: {name} is linked from the "
                f"data module (data.{name}); leave it out", f"--model.init_args.{name}")


def check_mode_loss(model, datamodule) -> None:
    """Refuse a model whose loss kind cannot train on the data module's batches (its
    ``mode``, or logged feedback when ``feedback`` is set; ``LAYOUT_LOSS_KINDS`` of
    :mod:`~recsys_router.models.losses`), before training: the loss raised at the first
    training step. A model with its own ``training_step`` (it does not train through its
    loss) is not checked.

    Raises
    ------
    DataValidationError
        Naming both settings and what would fit (one error line, exit 2).
    """
    from recsys_router.models.base.router_module import RouterModule  # noqa: PLC0415
    from recsys_router.models.losses import LAYOUT_LOSS_KINDS, default_mode  # noqa: PLC0415
    kind = getattr(getattr(model, "loss_fn", None), "kind", None)
    mode = getattr(datamodule, "mode", None)
    if kind is None or mode is None or type(model).training_step is not RouterModule.training_step:
        return
    from recsys_router.errors import DataValidationError  # noqa: PLC0415
    if getattr(datamodule, "feedback", None) is not None:
        if kind not in LAYOUT_LOSS_KINDS["logged"]:
            raise DataValidationError(
                f"logged feedback (data.init_args.feedback={datamodule.feedback!r}) trains with "
                f"loss kind 'bce' or 'mse', but the model's loss kind is {kind!r}: set "
                "model.init_args.loss.init_args.kind")
        return
    if mode in LAYOUT_LOSS_KINDS and kind not in LAYOUT_LOSS_KINDS[mode]:
        raise DataValidationError(
            f"the data module's mode {mode!r} cannot train the model's loss kind {kind!r} "
            f"(that mode trains {', '.join(map(repr, LAYOUT_LOSS_KINDS[mode]))}): set "
            f"data.init_args.mode={default_mode(kind)!r} or another "
            "model.init_args.loss.init_args.kind")


def build_lightning_cli(argv: list[str] | None, *, run: bool = True):
    """Build (and by default run) the CLI on ``argv`` (``["fit", "-c", ...]`` or, with
    ``run=False``, arguments without the sub-command).

    Returns
    -------
    LightningCLI
        With ``.model``, ``.datamodule``, ``.trainer``.
    """
    from recsys_router.datamodules.routing_datamodule import RoutingDataModule  # noqa: PLC0415
    from recsys_router.models.base.router_module import RouterModule  # noqa: PLC0415

    kw = {"prog": "recsys-router", "description": "Train/evaluate CF routers with Lightning"}
    if run:
        kw = {sub: dict(kw, prog=f"recsys-router {sub}") for sub in LIGHTNING_COMMANDS} | kw
    return RouterCLI(RouterModule, RoutingDataModule, subclass_mode_model=True,
                     subclass_mode_data=True, seed_everything_default=0,
                     args=None if argv is None else list(argv), run=run,
                     trainer_defaults={"logger": lazy_instance(CSVLogger, save_dir=".",
                                                               name="lightning_logs")},
                     save_config_kwargs={"overwrite": True}, parser_kwargs=kw)


def last_checkpoint_path(trainer) -> str | None:
    """The path of the final epoch's checkpoint (``last.ckpt``) a fit wrote, or None.

    It is the file of the unmonitored ``last_checkpoint`` callback (a ModelCheckpoint
    without ``monitor``), or a ``save_last`` file of another checkpoint callback.
    """
    for cb in getattr(trainer, "checkpoint_callbacks", []):
        if cb.monitor is None and cb.best_model_path:
            return cb.best_model_path
    for cb in getattr(trainer, "checkpoint_callbacks", []):
        if cb.last_model_path:
            return cb.last_model_path
    return None
