"""Matrix-factorisation scorer: a projected query vector against learned LLM vectors."""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from recsys_router.errors import ArgumentValueError

from .mlp import MLP

__all__ = ["MFScorer", "SCORINGS"]

SCORINGS = ("hadamard", "bilinear")


class MFScorer(nn.Module):
    """``s(q, j) = w . (v_j * P x_q) + b_j`` (``hadamard``) or ``(P x_q) . v_j + b_j`` (``bilinear``).

    ``P`` projects the text embedding (a linear map, or an MLP with ``hidden`` layers),
    ``v_j`` is LLM ``j``'s learned vector (unit-normalised when ``normalize_llm``, as in
    RouteLLM-MF), ``w`` a learned linear read-out and ``b_j`` a per-LLM bias.

    Parameters
    ----------
    n_llms, embed_dim : int
    dim : int
        Latent dimension.
    scoring : {"hadamard", "bilinear"}
    hidden : sequence of int
        Hidden widths of the query projection (empty = linear, no bias).
    dropout : float
        Dropout inside the projection MLP.
    normalize_llm : bool
        L2-normalise the LLM vectors before scoring.

    Example
    -------
    >>> m = MFScorer(3, 8, dim=4)
    >>> m(torch.zeros(2, 8)).shape, m.cell_logits(torch.zeros(2, 8), torch.tensor([0, 2])).shape
    (torch.Size([2, 3]), torch.Size([2]))
    """

    def __init__(self, n_llms: int, embed_dim: int, dim: int = 64, scoring: str = "hadamard",
                 hidden: Sequence[int] = (), dropout: float = 0.0, normalize_llm: bool = True):
        super().__init__()
        if scoring not in SCORINGS:
            raise ArgumentValueError(f"scoring must be one of {SCORINGS}, got {scoring!r}")
        self.scoring = scoring
        self.normalize_llm = normalize_llm
        self.query_proj = MLP(embed_dim, dim, hidden=hidden, dropout=dropout, bias=bool(hidden))
        self.llm_emb = nn.Embedding(n_llms, dim)
        self.readout = nn.Linear(dim, 1, bias=False) if scoring == "hadamard" else None
        self.bias = nn.Parameter(torch.zeros(n_llms))

    def llm_vectors(self) -> torch.Tensor:
        v = self.llm_emb.weight
        return F.normalize(v, dim=1) if self.normalize_llm else v

    def _effective(self, v: torch.Tensor) -> torch.Tensor:
        return v * self.readout.weight if self.readout is not None else v

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = self.query_proj(x)
        return q @ self._effective(self.llm_vectors()).T + self.bias

    def cell_logits(self, x: torch.Tensor, llm: torch.Tensor) -> torch.Tensor:
        q = self.query_proj(x)
        v = self._effective(self.llm_vectors()[llm])
        return (q * v).sum(dim=1) + self.bias[llm]

    def llm_rows(self) -> torch.Tensor:
        """Per-LLM ``[effective vector, bias]`` rows (n_llms, dim + 1) for item cold start."""
        return torch.cat([self._effective(self.llm_vectors()), self.bias[:, None]], dim=1)

    def score_rows(self, x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Logits (B, R) of queries ``x`` against LLM rows from :meth:`llm_rows`."""
        return self.query_proj(x) @ rows[:, :-1].T + rows[:, -1]
