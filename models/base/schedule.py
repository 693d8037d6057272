"""Training budgets scaled to the data: batch size, optimizer steps and learning-rate schedule.

A fixed batch size and epoch count chosen on a 7-11 LLM pool asks 60,000 optimizer steps
of a 12,000-query x 40-LLM matrix and 1,000 of a 1,000 x 5 one. :func:`data_scaled_plan`
derives the work from the number ``n`` of training items instead (observed query-LLM cells
for pointwise losses; queries for listwise ones, pairs for pairwise ones):

* **batch size** ``B = clip(2 ** round(log2(n / 256)), 32, 4096)``: about 256 steps per
  pass over the cells;
* **passes** ``E = clip(24 * (30,000 / n) ** 0.5, 3, 60)``: small matrices are seen more
  often, large ones need fewer passes (the gradient noise of a pass shrinks with ``n``);
* **optimizer steps** ``S = clip(ceil(E * n / B), 300, 2000)`` (about 15 CPU s of ``mf`` at
  batch 1,024 on one core);
* **learning rate**: the family's base rate, linear warm-up over the first 5% of the steps,
  then cosine decay to 5% of the base rate at step ``S``;
* **early stopping** checks the inner validation split every ``ceil(S / 20)`` steps (at
  least 20 checks), never stops before 40% of ``S``, and stops after ``patience``
  checks without a better validation loss.

The number of LLMs enters through ``n`` (cells = queries x observed LLMs). The constants
were set from the cost of a step (10,000 x 30 cells in about 12 CPU s for ``mf``), not tuned
on any dataset. A model whose step is dear passes ``min_batch`` and
``step_cap`` (the graph router: 1,024, and a cap from its step's graph size, 80-2,000).

Reference: Goyal et al., "Accurate, Large Minibatch SGD: Training ImageNet in 1 Hour",
arXiv:1706.02677 (2017) (warm-up with large batches); Loshchilov & Hutter, "SGDR:
Stochastic Gradient Descent with Warm Restarts", ICLR 2017 (cosine decay).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

__all__ = ["TrainingPlan", "data_scaled_plan", "lr_factor"]

MIN_BATCH, MAX_BATCH = 32, 4096
MIN_STEPS, MAX_STEPS = 300, 2000
WARMUP_SHARE, FINAL_LR_SHARE = 0.05, 0.05
MIN_STOP_SHARE = 0.4
CHECKS = 20


@dataclass(frozen=True)
class TrainingPlan:
    """How much training a fit asks for (see the module docstring for the rule).

    Attributes
    ----------
    n_cells : int
        Observed training cells the plan was derived from.
    batch_size, max_steps, warmup_steps, check_every, min_steps : int
    passes : float
        ``max_steps * batch_size / n_cells``: passes over the cells the budget allows.
    """

    n_cells: int
    batch_size: int
    max_steps: int
    warmup_steps: int
    check_every: int
    min_steps: int
    passes: float

    def as_dict(self) -> dict:
        """Plain dict (for reports)."""
        return asdict(self)


def data_scaled_plan(n_cells: int, *, batch_size: int | None = None,
                     max_steps: int | None = None, min_batch: int = MIN_BATCH,
                     step_cap: int = MAX_STEPS) -> TrainingPlan:
    """The training plan for ``n_cells`` observed training cells.

    Parameters
    ----------
    n_cells : int
        Observed (query, LLM) training cells, >= 1.
    batch_size, max_steps : int, optional
        Given values override the rule (the rest of the plan follows them).
    min_batch, step_cap : int
        The rule's lower batch clip and upper step clip (a model whose step is dear, such
        as the graph router, asks for bigger batches and fewer steps).

    Returns
    -------
    TrainingPlan

    Example
    -------
    >>> p = data_scaled_plan(300_000)
    >>> p.batch_size, p.max_steps
    (1024, 2000)
    >>> data_scaled_plan(5_000).batch_size
    32
    """
    n = int(n_cells)
    if n < 1:
        raise ValueError(f"no observed training cell to plan training for (n_cells={n_cells!r})")
    if batch_size is None:
        batch_size = 2 ** round(math.log2(max(n / 256.0, 1.0)))
        batch_size = int(min(max(batch_size, min_batch), max(MAX_BATCH, min_batch)))
    if int(batch_size) < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size!r}")
    batch_size = int(batch_size)
    if max_steps is None:
        passes = min(max(24.0 * math.sqrt(30_000.0 / n), 3.0), 60.0)
        max_steps = int(min(max(math.ceil(passes * n / batch_size), min(MIN_STEPS, step_cap)),
                            step_cap))
    if int(max_steps) < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps!r}")
    max_steps = int(max_steps)
    check_every = max(1, math.ceil(max_steps / CHECKS))
    return TrainingPlan(n_cells=n, batch_size=batch_size, max_steps=max_steps,
                        warmup_steps=int(math.ceil(WARMUP_SHARE * max_steps)),
                        check_every=check_every,
                        min_steps=int(MIN_STOP_SHARE * max_steps),
                        passes=round(max_steps * batch_size / n, 3))


def lr_factor(step: int, plan: TrainingPlan) -> float:
    """Multiplier of the base learning rate at optimizer step ``step`` (0-based).

    Linear warm-up to 1 over ``warmup_steps``, then cosine decay to
    :data:`FINAL_LR_SHARE` at ``max_steps`` (held there beyond it).

    Example
    -------
    >>> p = data_scaled_plan(300_000)
    >>> round(lr_factor(0, p), 4), lr_factor(p.warmup_steps, p), lr_factor(10 ** 6, p)
    (0.01, 1.0, 0.05)
    """
    w, s = plan.warmup_steps, plan.max_steps
    if step < w:
        return (step + 1) / w
    progress = min(1.0, (step - w) / max(1, s - w))
    return FINAL_LR_SHARE + (1.0 - FINAL_LR_SHARE) * 0.5 * (1.0 + math.cos(math.pi * progress))
