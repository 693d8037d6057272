"""Plain ``nn.Module`` building blocks shared by the collaborative-filtering routers.

These modules know nothing about Lightning, data or losses: a LightningModule receives
them already built (dependency injection, as in the lightning-hydra-template).
"""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from recsys_router.hyperparams import check_number, check_width
from recsys_router.errors import ArgumentValueError

__all__ = ["MLP", "LinearProjection"]


class MLP(nn.Module):
    """Feed-forward network ``in_dim -> hidden... -> out_dim``.

    Parameters
    ----------
    in_dim : int
        Input width.
    out_dim : int
        Output width.
    hidden : sequence of int
        Hidden layer widths (empty: a single linear layer).
    dropout : float
        Dropout after every hidden activation.
    activation : str
        ``"relu"``, ``"gelu"`` or ``"tanh"``.
    bias : bool
        Whether the layers have biases.

    Example
    -------
    >>> MLP(8, 4, hidden=(16,))(torch.zeros(2, 8)).shape
    torch.Size([2, 4])
    """

    _ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "tanh": nn.Tanh}

    def __init__(self, in_dim: int, out_dim: int, hidden: Sequence[int] = (), dropout: float = 0.0,
                 activation: str = "relu", bias: bool = True):
        super().__init__()
        if activation not in self._ACTIVATIONS:
            raise ArgumentValueError(f"activation must be one of {sorted(self._ACTIVATIONS)}, "
                                     f"got {activation!r}")
        if in_dim < 1 or out_dim < 1:
            raise ArgumentValueError(f"in_dim and out_dim must be >= 1, got {in_dim}, {out_dim}")
        check_number(dropout, "dropout", low=0, high=1, high_open=True)
        for h in hidden:
            check_width(h, "hidden (each layer width)")
        self.in_dim = in_dim
        self.out_dim = out_dim
        layers: list[nn.Module] = []
        width = in_dim
        for h in hidden:
            layers += [nn.Linear(width, int(h), bias=bias), self._ACTIVATIONS[activation]()]
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
            width = int(h)
        layers.append(nn.Linear(width, out_dim, bias=bias))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class LinearProjection(MLP):
    """A single linear map ``in_dim -> out_dim`` without bias (RouteLLM-MF's text projection).

    Example
    -------
    >>> LinearProjection(8, 3)(torch.ones(1, 8)).shape
    torch.Size([1, 3])
    """

    def __init__(self, in_dim: int, out_dim: int):
        super().__init__(in_dim, out_dim, hidden=(), bias=False)
