"""IRT routers: multidimensional IRT (MIRT) and neural IRT (NIRT) as Lightning modules.

Reference: Song et al., "IRT-Router: Effective and Interpretable Multi-LLM Routing via Item
Response Theory", ACL 2025 (arXiv 2506.01048).

* MIRT: ``P(query i solved by LLM j) = sigmoid(sum_k a_ik theta_jk - b_i)``;
* NIRT: ``P = f(a_i * r_i (.) (sigmoid(theta_j) - sigmoid(beta_i)))`` with a positive-weight
  (monotone) network ``f`` (see :mod:`recsys_router.models.components.irt`).

The LLM ability ``theta_j`` comes from the LLM's ID embedding plus a linear map of its
features (description embedding, prices, size: the data module's ``llm_features``); the
query's discrimination, difficulty (and NIRT relevance) come from its text embedding, so
new queries are scored from text alone. Trained with BCE on observed cells. Abilities and
difficulties are inspectable: :meth:`IRTRouter.abilities`, :meth:`IRTRouter.difficulty`.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
from scipy.special import expit
import torch
from torch import nn

from recsys_router.models.base.derive import for_module
from recsys_router.models.base.lightning_router import LightningRouter
from recsys_router.models.base.router_module import RouterModule
from recsys_router.models.components.irt import MIRTNet, NIRTNet
from recsys_router.models.losses import RoutingLoss
from recsys_router.data import RoutingData
from recsys_router.hyperparams import check_number, check_width
from recsys_router.errors import ArgumentValueError

__all__ = ["IRTScorer", "MIRTModule", "NIRTModule", "IRTRouter", "MIRTRouter", "NIRTRouter"]

#: numeric LLM features after the description embedding (recsys_router.datamodules.routing_datamodule)
_N_LLM_NUMERIC = 4


class IRTScorer(nn.Module):
    """Wraps an IRT net and the LLM feature matrix (a buffer) into ``x -> (B, n_llms)`` logits.

    Parameters
    ----------
    kind : {"mirt", "nirt"}
    n_llms, embed_dim : int
    dim : int
        Ability dimension K.
    use_llm_features : bool
        Add a linear map of the LLM features to the ID embedding.
    hidden, dropout
        NIRT interaction network.
    """

    def __init__(self, kind: str, n_llms: int, embed_dim: int, dim: int = 8,
                 use_llm_features: bool = True, hidden: Sequence[int] = (32, 16),
                 dropout: float = 0.0):
        super().__init__()
        if kind not in ("mirt", "nirt"):
            raise ArgumentValueError(f"kind must be 'mirt' or 'nirt', got {kind!r}")
        check_width(dim, "dim")
        feat_dim = embed_dim + _N_LLM_NUMERIC if use_llm_features else 0
        self.register_buffer("llm_feats", torch.zeros(n_llms, max(feat_dim, 1)))
        self.use_llm_features = bool(use_llm_features)
        if kind == "mirt":
            self.core = MIRTNet(embed_dim, n_llms, feat_dim, dim)
        else:
            dropout = check_number(dropout, "dropout", low=0, high=1, high_open=True)
            for h in hidden:
                check_width(h, "hidden (each layer width)")
            self.core = NIRTNet(embed_dim, n_llms, feat_dim, dim, tuple(hidden), dropout)

    def set_llm_features(self, feats: np.ndarray) -> None:
        """Copy the data module's LLM features into the buffer."""
        if not self.use_llm_features:
            return
        t = torch.as_tensor(np.asarray(feats, np.float32))
        if t.shape != self.llm_feats.shape:
            raise ValueError(f"LLM features have shape {tuple(t.shape)}, the IRT net expects "
                             f"{tuple(self.llm_feats.shape)} (n_llms, embed_dim + 4)")
        self.llm_feats.copy_(t)

    def theta(self) -> torch.Tensor:
        """Abilities of every LLM, (n_llms, K)."""
        idx = torch.arange(self.llm_feats.shape[0], device=self.llm_feats.device)
        return self.core.ability(idx, self.llm_feats if self.use_llm_features else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.core.all_logits(x, self.theta())

    def cell_logits(self, x: torch.Tensor, llm: torch.Tensor) -> torch.Tensor:
        return self.core(x, llm, self.llm_feats if self.use_llm_features else None)

    def llm_rows(self) -> torch.Tensor:
        """Abilities ``theta`` (n_llms, K): the LLM rows fitted for item cold start."""
        return self.theta()

    def score_rows(self, x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Logits (B, R) of queries ``x`` against abilities ``rows`` (item parameters fixed)."""
        return self.core.all_logits(x, rows)

    def difficulty(self, x: torch.Tensor) -> torch.Tensor:
        return self.core.difficulty(x)


class _IRTModule(RouterModule):
    kind = "mirt"
    router_loss_options = False   # IRT is fitted by its likelihood: BCE on observed cells

    def on_data(self, datamodule) -> None:
        feats = getattr(datamodule, "llm_features", None)
        if feats is not None:
            self.net.set_llm_features(feats)


class MIRTModule(_IRTModule):
    """LightningModule of the MIRT router.

    Parameters
    ----------
    n_llms, embed_dim : int
        Linked from the data module.
    dim : int
        Ability dimension K.
    use_llm_features : bool
        Use the LLM description embedding and prices besides the ID embedding.
    loss : RoutingLoss or dict, optional
        Default pointwise BCE on observed cells.
    lr, weight_decay : float

    Example
    -------
    >>> MIRTModule(n_llms=3, embed_dim=8, dim=2)(torch.zeros(4, 8)).shape
    torch.Size([4, 3])
    """

    kind = "mirt"

    def __init__(self, n_llms: int, embed_dim: int, dim: int = 8, use_llm_features: bool = True,
                 loss: RoutingLoss | dict | None = None, lr: float = 1e-2, weight_decay: float = 1e-5):
        super().__init__(n_llms, embed_dim, loss=loss, lr=lr, weight_decay=weight_decay)
        self.save_router_hyperparameters()
        self.net = IRTScorer("mirt", n_llms, embed_dim, dim, use_llm_features)


class NIRTModule(_IRTModule):
    """LightningModule of the NIRT router (monotone neural interaction).

    Parameters
    ----------
    n_llms, embed_dim, dim, use_llm_features, loss, lr, weight_decay
        As :class:`MIRTModule`.
    hidden : sequence of int
        Widths of the positive-weight interaction network.
    dropout : float
        Dropout probability inside that network, in [0, 1).

    Example
    -------
    >>> NIRTModule(n_llms=3, embed_dim=8, dim=2)(torch.zeros(4, 8)).shape
    torch.Size([4, 3])
    """

    kind = "nirt"

    def __init__(self, n_llms: int, embed_dim: int, dim: int = 8, use_llm_features: bool = True,
                 hidden: Sequence[int] = (32, 16), dropout: float = 0.0,
                 loss: RoutingLoss | dict | None = None, lr: float = 1e-2, weight_decay: float = 1e-5):
        super().__init__(n_llms, embed_dim, loss=loss, lr=lr, weight_decay=weight_decay)
        self.save_router_hyperparameters()
        self.net = IRTScorer("nirt", n_llms, embed_dim, dim, use_llm_features, tuple(hidden),
                             dropout)


class IRTRouter(LightningRouter):
    """Shared Router side of MIRT/NIRT: abilities and difficulties of a fitted IRT network."""

    kind = "mirt"

    def abilities(self) -> pd.DataFrame:
        """One row per LLM: ``llm``, ``ability`` (mean over dimensions) and ``theta_0..K-1``.

        For MIRT every discrimination is >= 0, so a larger ``theta_k`` never lowers a success
        probability; NIRT's ``sigmoid(theta_k)`` is monotone likewise.
        """
        self._check_fitted()
        th = self.llm_rows()
        if self.kind == "nirt":
            th = expit(th)
        out = pd.DataFrame({"llm": self.llm_names_, "ability": th.mean(axis=1)})
        for k in range(th.shape[1]):
            out[f"theta_{k}"] = th[:, k]
        return out

    def difficulty(self, data: RoutingData) -> np.ndarray:
        """Difficulty per query of ``data`` (MIRT: ``b``; NIRT: relevance-weighted mean of
        ``sigmoid(beta)``); larger is harder.

        Returns
        -------
        ndarray float64 (n_queries,)
        """
        self._check_fitted()
        x = torch.as_tensor(self.embed(data), dtype=torch.float32)
        with torch.no_grad():
            return self.net_.difficulty(x).cpu().numpy().astype(np.float64)


@for_module(MIRTModule)
class MIRTRouter(IRTRouter):
    """Multidimensional-IRT router (registered as ``"mirt"``).

    The generic :class:`~recsys_router.models.base.lightning_router.LightningRouter` with
    :class:`MIRTModule` (BCE on observed cells); its hyperparameters and their defaults are
    MIRTModule's.

    Parameters
    ----------
    dim, use_llm_features, lr, weight_decay
        See :class:`MIRTModule`.
    encoder, encoder_options, mode, batch_size, max_epochs, seed, accelerator, val_fraction, patience
        See :class:`~recsys_router.models.base.lightning_router.LightningRouter`.

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> d = make_synthetic(100, 3, 2, seed=0)
    >>> r = MIRTRouter(dim=2, max_epochs=1, encoder_options={"dim": 16}).fit(d)
    >>> r.abilities().shape[0], r.difficulty(d).shape
    (3, (100,))
    """

    kind = "mirt"


@for_module(NIRTModule)
class NIRTRouter(IRTRouter):
    """Neural-IRT router with a monotone interaction network (registered as ``"nirt"``).

    The generic :class:`~recsys_router.models.base.lightning_router.LightningRouter` with
    :class:`NIRTModule` (BCE on observed cells); its hyperparameters and their defaults are
    NIRTModule's.

    Parameters
    ----------
    dim, use_llm_features, hidden, dropout, lr, weight_decay
        See :class:`NIRTModule`.
    encoder, encoder_options, mode, batch_size, max_epochs, seed, accelerator, val_fraction, patience
        See :class:`~recsys_router.models.base.lightning_router.LightningRouter`.
    """

    kind = "nirt"
