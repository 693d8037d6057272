"""Lightning plumbing shared by every trainable router: module base and the one Router of it."""

from .callbacks import ScoresWriter
from .derive import for_module
from .eval_metrics import epoch_metrics
from .lightning_router import LightningRouter
from .training import quiet_trainer
from .router_module import RouterModule, predict_logits

__all__ = ["RouterModule", "LightningRouter", "for_module", "quiet_trainer", "predict_logits",
           "epoch_metrics", "ScoresWriter"]
