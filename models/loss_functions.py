"""The loss functions behind :class:`~recsys_router.models.losses.RoutingLoss`, one term each.

Pointwise (BCE, squared error), listwise (softmax cross-entropy against selection vectors),
pairwise (BPR / Bradley-Terry, and the pairs of a score list), the cost-aware utility target,
the popularity re-weighting, the selection-entropy regulariser and the logged-feedback loss
(naive / IPS / SNIPS / DR). The references are in :mod:`recsys_router.models.losses`, which
re-exports every name here.

All functions take logits (pre-sigmoid scores) and boolean masks of observed cells, so
unobserved (NaN) cells never reach a loss.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from recsys_router.errors import ArgumentValueError

__all__ = ["pointwise_bce", "pointwise_mse", "listwise_softmax_ce", "pairwise_bpr",
           "pairs_from_lists", "utility_selection", "popularity_weights",
           "soft_selection_entropy", "logged_feedback_loss"]


def _wmean(values: torch.Tensor, weight: torch.Tensor | None) -> torch.Tensor:
    if weight is None:
        return values.mean() if values.numel() else values.sum()
    total = weight.sum()
    return (values * weight).sum() / total.clamp_min(1e-12)


def pointwise_bce(logits: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None = None,
                  pos_weight: torch.Tensor | None = None) -> torch.Tensor:
    """Binary cross-entropy on 0/1 targets, or soft-label BCE on continuous targets in [0, 1].

    Parameters
    ----------
    logits, target : Tensor, same shape (already restricted to observed cells)
    weight : Tensor, optional
        Per-cell weight (e.g. 0 for unobserved cells).
    pos_weight : Tensor, optional
        Extra weight of each cell's positive term (inverse propensity).

    Returns
    -------
    Tensor (scalar)

    Example
    -------
    >>> round(float(pointwise_bce(torch.tensor([0.0]), torch.tensor([1.0]))), 4)  # log 2
    0.6931
    """
    if target.numel() and (target.min() < 0 or target.max() > 1):
        raise ValueError(f"BCE needs targets in [0, 1], got range [{float(target.min())}, "
                         f"{float(target.max())}]; rescale the scores or use loss kind 'mse'")
    pos = -F.logsigmoid(logits) * target
    neg = -F.logsigmoid(-logits) * (1 - target)
    if pos_weight is not None:
        pos = pos * pos_weight
    return _wmean(pos + neg, weight)


def pointwise_mse(logits: torch.Tensor, target: torch.Tensor,
                  weight: torch.Tensor | None = None) -> torch.Tensor:
    """Squared error between ``sigmoid(logits)`` and continuous targets.

    Example
    -------
    >>> float(pointwise_mse(torch.tensor([0.0]), torch.tensor([1.0])))
    0.25
    """
    return _wmean((torch.sigmoid(logits) - target) ** 2, weight)


def listwise_softmax_ce(logits: torch.Tensor, selection: torch.Tensor, mask: torch.Tensor,
                        llm_weight: torch.Tensor | None = None) -> torch.Tensor:
    """Softmax cross-entropy against the normalised selection vector of each query.

    ``loss_i = -sum_j t_ij log softmax_j(logits_i)`` with ``t_i = sel_i / sum(sel_i)``; unobserved
    LLMs are excluded from the softmax and queries without any selected LLM are skipped.

    Parameters
    ----------
    logits : Tensor (B, L)
    selection : Tensor (B, L)
        Non-negative target mass (0/1 selection vectors, or soft targets).
    mask : Tensor (B, L) of bool
        Observed cells.
    llm_weight : Tensor (L,), optional
        Re-weights each LLM's target mass before normalising (inverse propensity).

    Example
    -------
    >>> l = torch.zeros(1, 2); s = torch.tensor([[1.0, 0.0]]); m = torch.ones(1, 2, dtype=torch.bool)
    >>> round(float(listwise_softmax_ce(l, s, m)), 4)  # -log(1/2)
    0.6931
    """
    sel = selection * mask
    if llm_weight is not None:
        sel = sel * llm_weight
    total = sel.sum(dim=1, keepdim=True)
    keep = total.squeeze(1) > 0
    if not bool(keep.any()):
        return logits.sum() * 0.0
    target = sel[keep] / total[keep]
    logp = torch.log_softmax(logits[keep].masked_fill(~mask[keep], float("-inf")), dim=1)
    logp = torch.where(mask[keep], logp, torch.zeros_like(logp))
    return -(target * logp).sum(dim=1).mean()


def pairwise_bpr(s_pos: torch.Tensor, s_neg: torch.Tensor, tie: torch.Tensor | None = None,
                 weight: torch.Tensor | None = None) -> torch.Tensor:
    """BPR / Bradley-Terry: ``-log sigmoid(s_w - s_l)``; a tie is a soft label 0.5.

    Example
    -------
    >>> round(float(pairwise_bpr(torch.tensor([1.0]), torch.tensor([1.0]))), 4)
    0.6931
    """
    d = s_pos - s_neg
    if tie is None:
        per = -F.logsigmoid(d)
    else:
        t = 1.0 - 0.5 * tie.float()
        per = -(t * F.logsigmoid(d) + (1 - t) * F.logsigmoid(-d))
    return _wmean(per, weight)


def pairs_from_lists(target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """All (row, better, worse) index triples of a batch of score lists.

    Returns
    -------
    Tensor (P, 3) of long: query row, index of the better LLM, index of the worse LLM.

    Example
    -------
    >>> pairs_from_lists(torch.tensor([[1.0, 0.0, 0.5]]), torch.ones(1, 3, dtype=torch.bool)).tolist()
    [[0, 0, 1], [0, 0, 2], [0, 2, 1]]
    """
    better = (target[:, :, None] > target[:, None, :]) & mask[:, :, None] & mask[:, None, :]
    return better.nonzero()


def utility_selection(target: torch.Tensor, cost: torch.Tensor, mask: torch.Tensor, wtp: float,
                      temperature: float = 0.0) -> torch.Tensor:
    """Target mass from the cost-aware utility ``u = wtp * score - cost``.

    ``temperature = 0`` selects the utility-maximising LLM(s) of each query (ties all
    selected); ``temperature > 0`` gives ``softmax(u / temperature)`` over observed LLMs.

    Example
    -------
    >>> s = torch.tensor([[1.0, 1.0]]); c = torch.tensor([[0.5, 0.1]]); m = torch.ones(1, 2, dtype=torch.bool)
    >>> utility_selection(s, c, m, wtp=1.0).tolist()
    [[0.0, 1.0]]
    """
    u = (wtp * target - cost).masked_fill(~mask, float("-inf"))
    if temperature > 0:
        out = torch.softmax(u / temperature, dim=1)
        return torch.nan_to_num(out, nan=0.0)
    best = u.max(dim=1, keepdim=True).values
    return ((u == best) & mask).float()


def popularity_weights(positives: torch.Tensor, clip: float) -> torch.Tensor:
    """Inverse-popularity weight per LLM from its share of train positives, clipped (a
    popularity correction, not a logging propensity: see :func:`logged_feedback_loss`).

    ``w_j = min(clip, 1 / (L * share_j))`` with ``share_j = pos_j / sum(pos)``; an LLM with
    the average share gets 1, the dominant LLM less, rare ones more (at most ``clip``).

    Example
    -------
    >>> popularity_weights(torch.tensor([6.0, 2.0, 0.0]), clip=5.0).tolist()
    [0.4444444477558136, 1.3333333730697632, 5.0]
    """
    if clip < 1:
        raise ArgumentValueError(f"ipw_clip must be >= 1, got {clip}")
    share = positives.float() / positives.float().sum().clamp_min(1e-12)
    w = 1.0 / (len(share) * share.clamp_min(1e-12))
    return w.clamp(max=clip)


def soft_selection_entropy(logits: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Entropy (nats) of the batch's mean selection distribution ``mean_i softmax(logits_i)``.

    The differentiable relaxation of RouterEval's selection entropy E_p
    (:func:`recsys_router.metrics.routereval.selection_entropy`, which counts hard
    choices): softmax probabilities replace the argmax choices so that a loss can reward
    spread. High when the batch's queries are spread over many LLMs; 0 when all go to one.
    With ``mask``, each query's softmax runs over its observed LLMs, and a query with none is
    left out (its all ``-inf`` row would make the whole batch's entropy NaN).

    Example
    -------
    >>> round(float(soft_selection_entropy(torch.zeros(3, 4))), 4)  # log 4
    1.3863
    """
    if mask is not None:
        rows = mask.any(dim=1)  # a query with no observed LLM has no distribution: left out
        if not bool(rows.all()):
            logits, mask = logits[rows], mask[rows]
        if logits.shape[0] == 0:
            return logits.sum() * 0.0  # zero, still part of the graph
        logits = logits.masked_fill(~mask, float("-inf"))
    p = torch.softmax(logits, dim=1).mean(dim=0)
    return -(p * torch.log(p.clamp_min(1e-12))).sum()


def logged_feedback_loss(logits: torch.Tensor, target: torch.Tensor, mask: torch.Tensor,
                         w: torch.Tensor, kind: str = "bce",
                         self_normalise: bool = False) -> torch.Tensor:
    """Loss on logged feedback: ``(1/B) sum_i w_i mean_{j in mask_i} l(f_ij, t_ij)``
    (``self_normalise``: divided by ``sum_i w_i`` instead of ``B``).

    With one masked cell per row (the logged LLM) and ``w_i = 1`` this is the naive loss,
    with ``w_i = 1 / p_i`` IPS, self-normalised SNIPS; with
    every cell masked, ``w = 1`` and doubly robust pseudo-targets ``t`` it is the DR loss
    (targets from :func:`recsys_router.feedback.logged.logged_arrays`). ``l`` is soft-label
    BCE written linearly in the target (so a DR target outside [0, 1] keeps its unbiased
    expectation; logits are clamped to [-8, 8] so such a cell cannot drive the loss to
    minus infinity) or the squared error of ``sigmoid(f)``.

    Example
    -------
    >>> f, t = torch.zeros(2, 2), torch.tensor([[1.0, 0.0], [0.0, 0.0]])
    >>> m = torch.tensor([[True, False], [False, True]])
    >>> round(float(logged_feedback_loss(f, t, m, torch.tensor([2.0, 1.0]))), 4)  # 1.5 log 2
    1.0397
    """
    if kind == "mse":
        cell = (torch.sigmoid(logits) - target) ** 2
    elif kind == "bce":
        z = logits.clamp(-8.0, 8.0)
        cell = target * F.softplus(-z) + (1.0 - target) * F.softplus(z)
    else:
        raise ValueError(f"logged-feedback training needs loss kind 'bce' or 'mse', got {kind!r}")
    m = mask.float()
    per_row = (cell * m).sum(dim=1) / m.sum(dim=1).clamp_min(1.0)
    w = w.float()
    if self_normalise:
        return (per_row * w).sum() / w.sum().clamp_min(1e-12)
    return (per_row * w).mean()
