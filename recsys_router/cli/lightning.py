"""``recsys-router fit|validate|test|predict``: LightningCLI over the CF router modules.

Examples
--------
recsys-router fit -c configs/models/mf.yaml -c configs/data/routerbench_zs.yaml
recsys-router test -c configs/models/mf.yaml -c configs/data/routerbench_zs.yaml \\
    --ckpt_path lightning_logs/version_0/checkpoints/last.ckpt
recsys-router fit -c configs/models/two_tower.yaml -c configs/data/synthetic.yaml \\
    --trainer.strategy=ddp --trainer.devices=2 --trainer.accelerator=cpu

The model is any :class:`~recsys_router.models.base.router_module.RouterModule` subclass and the data
any :class:`~recsys_router.datamodules.routing_datamodule.RoutingDataModule` (``class_path`` in YAML).
``n_llms`` and ``embed_dim`` are linked from the data module, never written in YAML.
Defaults: CSVLogger under ``lightning_logs/``, ModelCheckpoint and EarlyStopping on
``val/mu_o`` (maximised), ``seed_everything=0``; ``predict`` writes ``predictions.csv``
(query id, routed LLM, predicted score per LLM) to the log dir or ``--predictions.output_dir``.
"""

from __future__ import annotations

import sys

from jsonargparse import lazy_instance
from pytorch_lightning.callbacks import EarlyStopping, ModelCheckpoint
from pytorch_lightning.cli import LightningCLI
from pytorch_lightning.loggers import CSVLogger

from recsys_router.models.base.callbacks import ScoresWriter

__all__ = ["run_lightning_cli", "RouterCLI", "build_cli"]

MONITOR = "val/mu_o"


class RouterCLI(LightningCLI):
    """LightningCLI with size links and checkpoint / early-stopping defaults."""

    def add_arguments_to_parser(self, parser) -> None:
        parser.link_arguments("data.n_llms", "model.init_args.n_llms", apply_on="instantiate")
        parser.link_arguments("data.embed_dim", "model.init_args.embed_dim", apply_on="instantiate")
        parser.add_lightning_class_args(ModelCheckpoint, "checkpoint")
        parser.set_defaults({"checkpoint.monitor": MONITOR, "checkpoint.mode": "max",
                             "checkpoint.save_last": True,
                             "checkpoint.filename": "epoch{epoch:03d}-mu_o{val/mu_o:.4f}",
                             "checkpoint.auto_insert_metric_name": False})
        parser.add_lightning_class_args(ScoresWriter, "predictions")
        parser.add_lightning_class_args(EarlyStopping, "early_stopping")
        parser.set_defaults({"early_stopping.monitor": MONITOR, "early_stopping.mode": "max",
                             "early_stopping.patience": 5, "early_stopping.strict": False})


def build_cli(argv: list[str] | None, *, run: bool = True):
    """Build (and by default run) the CLI on ``argv`` (``["fit", "-c", ...]`` or, with
    ``run=False``, arguments without the sub-command).

    Returns
    -------
    LightningCLI
        With ``.model``, ``.datamodule``, ``.trainer`` (useful for Optuna objectives).
    """
    from recsys_router.datamodules.routing_datamodule import RoutingDataModule
    from recsys_router.models.base.router_module import RouterModule

    return RouterCLI(RouterModule, RoutingDataModule, subclass_mode_model=True, subclass_mode_data=True,
               seed_everything_default=0, args=None if argv is None else list(argv), run=run,
               trainer_defaults={"logger": lazy_instance(CSVLogger, save_dir=".", name="lightning_logs")},
               save_config_kwargs={"overwrite": True}, parser_kwargs=_parser_kwargs(run))


def _parser_kwargs(run: bool) -> dict:
    kw = {"prog": "recsys-router", "description": "Train/evaluate CF routers with Lightning"}
    if run:
        return {sub: dict(kw, prog=f"recsys-router {sub}") for sub in
                ("fit", "validate", "test", "predict")} | kw
    return kw


def run_lightning_cli(argv: list[str]) -> int:
    """Entry point used by ``recsys-router`` for ``fit``/``validate``/``test``/``predict``.

    Parameters
    ----------
    argv : list of str
        Starts with the sub-command, e.g. ``["fit", "-c", "configs/models/mf.yaml", ...]``.

    Returns
    -------
    int
        Exit status (0 on success; argument errors exit through jsonargparse).
    """
    argv = list(argv)
    # when argv is the process's own command line, let LightningCLI read sys.argv itself
    # (passing both makes it warn)
    build_cli(None if argv == sys.argv[1:] else argv, run=True)
    return 0


if __name__ == "__main__":  # `python -m recsys_router.cli.lightning fit ...` (DDP re-launch)
    sys.exit(run_lightning_cli(sys.argv[1:]))
