"""Matrix-factorisation router (RouteLLM-MF / EmbedLLM).

References
----------
* Ong et al., "RouteLLM: Learning to Route LLMs with Preference Data", arXiv:2406.18665
  (2024): the query embedding is projected into the latent space of learned LLM vectors
  and scored element-wise then linearly; trained on battles with Bradley-Terry.
* Zhuang et al., "EmbedLLM: Learning Compact Representations of Large Language Models",
  arXiv:2410.02223 (2024): the same factorisation trained on per-(query, LLM) correctness.

Train on observed cells (``bce``/``mse``), whole queries (``listwise``/``utility``) or
pairs and battles (``bpr``: ``-log sigmoid(s_w - s_l)``).
"""

from __future__ import annotations

from typing import Sequence

from recsys_router.hyperparams import check_width
from recsys_router.models.base.derive import for_module
from recsys_router.models.base.lightning_router import LightningRouter
from recsys_router.models.base.router_module import RouterModule
from recsys_router.models.components.mf import MFScorer
from recsys_router.models.losses import RoutingLoss

__all__ = ["MFModule", "MFRouter"]


class MFModule(RouterModule):
    """LightningModule of the matrix-factorisation router.

    Parameters
    ----------
    n_llms, embed_dim : int
        Linked from the data module.
    dim : int
        Latent dimension.
    scoring : {"hadamard", "bilinear"}
        Element-wise product then linear read-out (RouteLLM), or a plain dot product.
    hidden : sequence of int
        Hidden widths of the query projection (empty: linear).
    dropout : float
    normalize_llm : bool
        Unit-normalise LLM vectors.
    loss : RoutingLoss or dict, optional
        Default pointwise BCE.
    lr, weight_decay : float

    Example
    -------
    >>> import torch
    >>> MFModule(n_llms=4, embed_dim=16, dim=8)(torch.zeros(3, 16)).shape
    torch.Size([3, 4])
    """

    def __init__(self, n_llms: int, embed_dim: int, dim: int = 64, scoring: str = "hadamard",
                 hidden: Sequence[int] = (), dropout: float = 0.0, normalize_llm: bool = True,
                 loss: RoutingLoss | dict | None = None, lr: float = 1e-2, weight_decay: float = 1e-5):
        super().__init__(n_llms, embed_dim, loss=loss, lr=lr, weight_decay=weight_decay)
        check_width(dim, "dim")
        self.save_router_hyperparameters()
        self.net = MFScorer(n_llms, embed_dim, dim=dim, scoring=scoring, hidden=tuple(hidden),
                            dropout=dropout, normalize_llm=normalize_llm)


@for_module(MFModule)
class MFRouter(LightningRouter):
    """Matrix-factorisation router trained with Lightning (registered as ``"mf"``).

    The generic :class:`~recsys_router.models.base.lightning_router.LightningRouter` with
    :class:`MFModule`; its hyperparameters and their defaults are MFModule's.

    Parameters
    ----------
    dim, scoring, hidden, dropout, normalize_llm, lr, weight_decay
        See :class:`MFModule`.
    loss : {"bce", "mse", "listwise", "bpr", "utility"}
        Loss kind (:class:`~recsys_router.models.losses.RoutingLoss`).
    wtp, temperature, ipw_clip, logit_adjust, entropy_weight
        Loss options (cost-aware utility and debiasing).
    encoder, encoder_options, mode, batch_size, max_epochs, seed, accelerator, val_fraction, patience
        See :class:`~recsys_router.models.base.lightning_router.LightningRouter`; ``mode=None``
        picks the batch layout that suits ``loss``.

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> d = make_synthetic(100, 3, 2, seed=0)
    >>> MFRouter(dim=4, max_epochs=1, encoder_options={"dim": 16}).fit(d).route(d).shape
    (100,)
    """
