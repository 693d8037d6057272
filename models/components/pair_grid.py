"""The graph router's two pair heads over a whole (query x LLM) grid, computed in row chunks.

Reference: Feng, Shen & You, "GraphRouter: A Graph-based Router for LLM Selections",
ICLR 2025 (arXiv 2410.03834), whose edge-prediction heads these are. Used by
:func:`recsys_router.models.components.gnn._pair_heads` where a batch's pairs cover most of
the grid (a training step predicts whole rows of its target queries).

Each head is ``Linear(3h, h) -> ReLU -> Linear(h, 1)``; on the grid their first layers are one
product ``pre = hu @ M + bias`` of shape ``(n_q, n_llms * 2h)``. Formed whole, ``pre``, its
ReLU and their gradients are (n_q x n_llms x 2h) tensors of tens of megabytes that every
elementwise pass streams from main memory. :class:`GridHeads` walks the rows in chunks that
stay in the core's cache, keeps nothing of that size for the backward pass and recomputes a
chunk's ``pre`` there (one small product); the values and gradients are the same sums.
"""

from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

__all__ = ["GridHeads", "grid_heads", "CHUNK_ROWS"]

#: query rows per chunk: (256 x n_llms x 2h) floats, 1.3 MB for 10 LLMs and h = 64
CHUNK_ROWS = 256


class GridHeads(torch.autograd.Function):
    """``out[i, j, t] = relu(hu_i @ M + bias)[j, t, :] @ w2[t] + b2[t]`` for every query row
    ``i``, LLM ``j`` and head ``t`` (0 score, 1 cost).

    Inputs: ``hu`` (n_q, h), ``m`` (h, n_llms * 2h), ``bias`` (n_llms * 2h,), ``w2`` (2, h)
    (the heads' second-layer weights), ``b2`` (2,), the chunk size. The columns of ``m`` are
    ordered (LLM, head, unit). Output: (n_q, n_llms, 2).
    """

    @staticmethod
    def forward(ctx, hu, m, bias, w2, b2, chunk):
        n_q, h = hu.shape
        n_l = m.shape[1] // (2 * h)
        out = hu.new_empty(n_q, n_l, 2)
        w = w2.view(1, 1, 2, h)
        for s in range(0, n_q, chunk):
            pre = torch.addmm(bias, hu[s:s + chunk], m).relu_()
            out[s:s + chunk] = (pre.view(-1, n_l, 2, h) * w).sum(-1)
        out += b2
        ctx.save_for_backward(hu, m, bias, w2)
        ctx.chunk = chunk
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, g_out):
        hu, m, bias, w2 = ctx.saved_tensors
        n_q, h = hu.shape
        n_l = m.shape[1] // (2 * h)
        need = ctx.needs_input_grad
        g_hu = torch.empty_like(hu) if need[0] else None
        g_m, g_bias, g_w2 = torch.zeros_like(m), torch.zeros_like(bias), torch.zeros_like(w2)
        w = w2.view(1, 1, 2, h)
        g_out = g_out.contiguous()
        m_t = m.T.contiguous()
        for s in range(0, n_q, ctx.chunk):
            x = hu[s:s + ctx.chunk]
            r = torch.addmm(bias, x, m).relu_()
            g = g_out[s:s + ctx.chunk].unsqueeze(-1)                 # (c, n_l, 2, 1)
            g_w2 += (g * r.view(-1, n_l, 2, h)).sum((0, 1))
            # ReLU's gradient: zero where the unit was off (a masked_fill_ with a boolean
            # mask is 15x slower on CPU than this kernel)
            g_pre = torch.ops.aten.threshold_backward((g * w).view(len(x), -1), r, 0.0)
            if g_hu is not None:
                torch.mm(g_pre, m_t, out=g_hu[s:s + ctx.chunk])
            g_m.addmm_(x.T, g_pre)
            g_bias += g_pre.sum(0)
        g_b2 = g_out.sum((0, 1)) if need[4] else None
        return g_hu, g_m, g_bias, g_w2, g_b2, None


def grid_heads(hu: torch.Tensor, m: torch.Tensor, bias: torch.Tensor, w2: torch.Tensor,
               b2: torch.Tensor, chunk: int = CHUNK_ROWS) -> torch.Tensor:
    """Both heads' outputs (n_q, n_llms, 2) on the grid; see :class:`GridHeads`.

    Example
    -------
    >>> hu, m, bias = torch.ones(3, 2), torch.ones(2, 8), torch.zeros(8)
    >>> grid_heads(hu, m, bias, torch.ones(2, 2), torch.zeros(2)).shape
    torch.Size([3, 2, 2])
    """
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    return GridHeads.apply(hu, m, bias, w2, b2, int(chunk))
