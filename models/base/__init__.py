"""Lightning plumbing shared by every trainable router: module base and Router wrapper."""

from .callbacks import ScoresWriter
from .eval_metrics import epoch_metrics
from .lightning_router import LightningRouter, ModuleRouter, quiet_trainer
from .router_module import RouterModule, predict_logits

__all__ = ["RouterModule", "LightningRouter", "ModuleRouter", "quiet_trainer", "predict_logits",
           "epoch_metrics", "ScoresWriter"]
