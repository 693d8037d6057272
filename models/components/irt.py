"""Item-response-theory networks for routing: multidimensional IRT and neural IRT.

Reference: Song et al., "IRT-Router: Effective and Interpretable Multi-LLM Routing via Item
Response Theory", ACL 2025 (arXiv 2506.01048); NIRT follows the neural cognitive diagnosis
interaction (Wang et al., "Neural Cognitive Diagnosis for Intelligent Education Systems",
AAAI 2020) with positive-weight layers.

LLMs are examinees and queries are items. An LLM's ability ``theta`` (K-dim) comes from its
ID embedding plus a linear map of its description embedding; a query's parameters come from
its text embedding.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["LLMAbility", "MIRTNet", "NIRTNet", "PositiveLinear"]


class LLMAbility(nn.Module):
    """``theta_j = id_embedding[j] + W desc_j`` (K-dim), the LLM side of both models.

    Parameters
    ----------
    n_llms : int
        Number of LLMs (ID embeddings).
    llm_feat_dim : int
        Size of the LLM feature vector (description embedding, prices); 0 for IDs only.
    dim : int
        Ability dimension K.
    """

    def __init__(self, n_llms: int, llm_feat_dim: int, dim: int):
        super().__init__()
        self.ids = nn.Embedding(n_llms, dim)
        nn.init.normal_(self.ids.weight, std=0.1)
        self.feat = nn.Linear(llm_feat_dim, dim, bias=False) if llm_feat_dim > 0 else None

    def forward(self, llm_idx: torch.Tensor, llm_feats: torch.Tensor | None) -> torch.Tensor:
        theta = self.ids(llm_idx)
        if self.feat is not None and llm_feats is not None:
            theta = theta + self.feat(llm_feats[llm_idx])
        return theta


class MIRTNet(nn.Module):
    """Multidimensional IRT: ``P = sigmoid(sum_k a_k theta_k - b)``.

    Discrimination ``a = softplus(W_a e) >= 0`` (K-dim) and difficulty ``b = w_b . e + c``
    come from the query embedding ``e``; ``theta`` from :class:`LLMAbility`. Because
    ``a >= 0``, the success probability never decreases when an ability grows.

    Parameters
    ----------
    embed_dim : int
        Query embedding size.
    n_llms, llm_feat_dim, dim : int
        See :class:`LLMAbility`.
    """

    def __init__(self, embed_dim: int, n_llms: int, llm_feat_dim: int, dim: int = 8):
        super().__init__()
        self.ability = LLMAbility(n_llms, llm_feat_dim, dim)
        self.disc = nn.Linear(embed_dim, dim)
        self.diff = nn.Linear(embed_dim, 1)

    def query_params(self, emb: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(a, b)``: discrimination (n, K) >= 0 and difficulty (n,)."""
        return F.softplus(self.disc(emb)), self.diff(emb).squeeze(-1)

    def forward(self, emb: torch.Tensor, llm_idx: torch.Tensor,
                llm_feats: torch.Tensor | None = None) -> torch.Tensor:
        """Logits for pairs (row ``i`` of ``emb``, LLM ``llm_idx[i]``)."""
        a, b = self.query_params(emb)
        theta = self.ability(llm_idx, llm_feats)
        return (a * theta).sum(-1) - b

    def all_logits(self, emb: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
        """Logits of every query (B) against every ability row of ``theta`` (L, K): (B, L)."""
        a, b = self.query_params(emb)
        return a @ theta.T - b[:, None]

    def difficulty(self, emb: torch.Tensor) -> torch.Tensor:
        """Difficulty ``b`` per query."""
        return self.query_params(emb)[1]


class PositiveLinear(nn.Module):
    """Linear layer whose weights are ``softplus(raw) > 0`` (monotone increasing map)."""

    def __init__(self, d_in: int, d_out: int):
        super().__init__()
        self.raw = nn.Parameter(torch.randn(d_out, d_in) * 0.1 - 1.0)
        self.bias = nn.Parameter(torch.zeros(d_out))

    @property
    def weight(self) -> torch.Tensor:
        return F.softplus(self.raw)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)


class NIRTNet(nn.Module):
    """Neural IRT: ``P = f(a * r (.) (sigmoid(theta) - sigmoid(beta)))`` with monotone ``f``.

    ``r = sigmoid(W_r e)`` (K-dim relevance of each ability to the query), ``beta`` (K-dim
    difficulty) and ``a = softplus(w_a . e)`` (scalar discrimination) come from the query
    embedding; ``f`` is a stack of :class:`PositiveLinear` layers with sigmoid activations,
    so ``P`` is non-decreasing in every ability ``theta_k`` and non-increasing in every
    difficulty ``beta_k``.

    Parameters
    ----------
    embed_dim, n_llms, llm_feat_dim, dim : int
        As :class:`MIRTNet`.
    hidden : sequence of int
        Hidden widths of the positive-weight interaction network.
    dropout : float
        Dropout inside the interaction network (dropout keeps monotonicity).
    """

    def __init__(self, embed_dim: int, n_llms: int, llm_feat_dim: int, dim: int = 8,
                 hidden: tuple[int, ...] = (32, 16), dropout: float = 0.0):
        super().__init__()
        self.ability = LLMAbility(n_llms, llm_feat_dim, dim)
        self.relevance = nn.Linear(embed_dim, dim)
        self.diff = nn.Linear(embed_dim, dim)
        self.disc = nn.Linear(embed_dim, 1)
        layers: list[nn.Module] = []
        d = dim
        for h in hidden:
            layers += [PositiveLinear(d, h), nn.Sigmoid(), nn.Dropout(dropout)]
            d = h
        layers.append(PositiveLinear(d, 1))
        self.interaction = nn.Sequential(*layers)

    def query_params(self, emb: torch.Tensor):
        """``(a, r, beta)``: discrimination (n,), relevance (n, K), difficulty logits (n, K)."""
        return (F.softplus(self.disc(emb)).squeeze(-1), torch.sigmoid(self.relevance(emb)),
                self.diff(emb))

    def difficulty(self, emb: torch.Tensor) -> torch.Tensor:
        """Scalar difficulty per query: relevance-weighted mean of ``sigmoid(beta)``."""
        _, r, beta = self.query_params(emb)
        return (r * torch.sigmoid(beta)).sum(-1) / r.sum(-1).clamp_min(1e-8)

    def interact(self, theta: torch.Tensor, emb: torch.Tensor) -> torch.Tensor:
        """Logits from abilities ``theta`` (n, K) and query embeddings (n, d)."""
        a, r, beta = self.query_params(emb)
        x = a.unsqueeze(-1) * r * (torch.sigmoid(theta) - torch.sigmoid(beta))
        return self.interaction(x).squeeze(-1)

    def forward(self, emb: torch.Tensor, llm_idx: torch.Tensor,
                llm_feats: torch.Tensor | None = None) -> torch.Tensor:
        """Logits for pairs (row ``i`` of ``emb``, LLM ``llm_idx[i]``)."""
        return self.interact(self.ability(llm_idx, llm_feats), emb)

    def all_logits(self, emb: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
        """Logits of every query (B) against every ability row of ``theta`` (L, K): (B, L)."""
        a, r, beta = self.query_params(emb)
        x = (a[:, None, None] * r[:, None, :]
             * (torch.sigmoid(theta)[None, :, :] - torch.sigmoid(beta)[:, None, :]))
        return self.interaction(x).squeeze(-1)
