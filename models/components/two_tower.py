"""Two-tower scorer: a query tower and an LLM tower over [ID embedding, LLM features]."""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from .mlp import MLP
from recsys_router.errors import ArgumentValueError

__all__ = ["TwoTowerScorer"]


class TwoTowerScorer(nn.Module):
    """``s(q, j) = f(x_q) . g([e_j, phi_j])[:dim] + g([e_j, phi_j])[dim]``.

    ``f`` is the query tower over the text embedding ``x_q``; ``g`` the LLM tower over the
    LLM's ID embedding ``e_j`` concatenated with its features ``phi_j`` (description
    embedding, log price, size); ``g``'s last output is the LLM's bias. During training,
    each LLM's ID embedding is zeroed with probability ``id_dropout`` (DropoutNet), so the
    tower also learns to score from features alone - the path a new LLM takes.

    Parameters
    ----------
    n_llms : int
    embed_dim : int
        Query embedding width.
    feature_dim : int
        LLM feature width.
    dim : int
        Shared latent dimension.
    id_dim : int
        ID-embedding width (0 = features only).
    query_hidden, llm_hidden : sequence of int
        Hidden widths of the towers.
    dropout : float
        Dropout inside the towers.
    id_dropout : float
        Probability of dropping an LLM's ID embedding in a training forward pass.

    Example
    -------
    >>> t = TwoTowerScorer(3, 8, 10, dim=4, id_dim=2)
    >>> t(torch.zeros(5, 8)).shape
    torch.Size([5, 3])
    """

    def __init__(self, n_llms: int, embed_dim: int, feature_dim: int, dim: int = 64,
                 id_dim: int = 16, query_hidden: Sequence[int] = (128,),
                 llm_hidden: Sequence[int] = (64,), dropout: float = 0.0, id_dropout: float = 0.3):
        super().__init__()
        if not 0.0 <= id_dropout <= 1.0:
            raise ArgumentValueError(f"id_dropout must be in [0, 1], got {id_dropout}")
        self.dim = int(dim)
        self.id_dim = int(id_dim)
        self.id_dropout = float(id_dropout)
        self.query_tower = MLP(embed_dim, dim, hidden=tuple(query_hidden), dropout=dropout)
        self.llm_tower = MLP(self.id_dim + feature_dim, dim + 1, hidden=tuple(llm_hidden),
                             dropout=dropout)
        self.id_emb = nn.Embedding(n_llms, self.id_dim) if self.id_dim else None
        if self.id_emb is not None:
            nn.init.normal_(self.id_emb.weight, std=0.1)
        self.register_buffer("llm_features", torch.zeros(n_llms, feature_dim))

    def set_llm_features(self, features) -> None:
        f = torch.as_tensor(features, dtype=torch.float32, device=self.llm_features.device)
        if f.shape != self.llm_features.shape:
            raise ValueError(f"LLM features have shape {tuple(f.shape)}, expected "
                             f"{tuple(self.llm_features.shape)}")
        self.llm_features.copy_(f)

    def llm_output(self, features: torch.Tensor, ids: torch.Tensor | None = None,
                   drop_ids: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """LLM vectors (n, dim) and biases (n,) from features (and IDs; None = feature-only)."""
        n = features.shape[0]
        if self.id_emb is not None:
            if ids is None:
                e = features.new_zeros(n, self.id_dim)
            else:
                e = self.id_emb(ids)
                if drop_ids and self.id_dropout > 0:
                    keep = (torch.rand(n, 1, device=e.device) >= self.id_dropout).to(e.dtype)
                    e = e * keep
            features = torch.cat([e, features], dim=1)
        out = self.llm_tower(features)
        return out[:, :self.dim], out[:, self.dim]

    def pool_output(self) -> tuple[torch.Tensor, torch.Tensor]:
        ids = torch.arange(self.llm_features.shape[0], device=self.llm_features.device)
        return self.llm_output(self.llm_features, ids, drop_ids=self.training)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        v, b = self.pool_output()
        return self.query_tower(x) @ v.T + b

    def llm_rows(self) -> torch.Tensor:
        """Per-LLM ``[vector, bias]`` rows (n_llms, dim + 1) of the pool, for item cold start."""
        v, b = self.pool_output()
        return torch.cat([v, b[:, None]], dim=1)

    def score_rows(self, x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Logits (B, R) of queries ``x`` against LLM rows from :meth:`llm_rows`."""
        return self.query_tower(x) @ rows[:, :-1].T + rows[:, -1]
