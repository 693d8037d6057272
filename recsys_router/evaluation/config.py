"""What an evaluation run is asked to do and what it hands back.

:class:`EvalConfig` mirrors the ``recsys-router evaluate`` options; :class:`EvalResult`
holds the decision table, the metrics and curves recomputed from it, timings and notes.
:func:`~recsys_router.evaluation.runner.evaluate` takes the one and returns the other (both
are re-exported by :mod:`recsys_router.evaluation.runner`, their earlier home).

Example
-------
>>> cfg = EvalConfig(["best-single"], protocols=["routereval"])
>>> cfg.pools, cfg.folds, cfg.fallback
(['all'], 1, True)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import pandas as pd

from .protocols import protocol_names

__all__ = ["EvalConfig", "EvalResult"]


@dataclass
class EvalConfig:
    """What to evaluate; mirrors the ``recsys-router evaluate`` options.

    Parameters
    ----------
    routers : list of str or Router
        Registry names (see ``recsys_router.registry.available_routers``), or configured
        :class:`~recsys_router.router.Router` instances (cloned and fitted per fold,
        labelled by class name).
    protocols : list of str
        Registered protocol names (default: those ``all`` stands for; see
        :func:`~recsys_router.evaluation.protocols.protocol_names`).
    pools : list
        Pool sizes (int) and/or ``"all"``.
    groups : list of str, optional
        Candidate groups to keep for sized pools (default: all three).
    group_method : {"routereval", "oracle-best"}
        How sized pools' groups are built (:func:`recsys_router.pools.candidate_groups`):
        RouterEval's released code (default) or the best combination within the same
        regions.
    split, split_column, ood_tasks, folds : see :func:`~recsys_router.evaluation.splits.make_folds`
    encoder : str or Encoder, optional
        Encoder (name or instance) given to every router with an ``encoder`` parameter;
        by default each router's own. Either way the dataset's texts are embedded once
        per encoder and shared by all routers and folds.
    p : float, optional
        ``p`` of the ``r_o`` router.
    seed : int
    router_params : dict, optional
        Extra constructor parameters per router name.
    reference_score : float, optional
        Reference score for RouterEval's V_R (default: the paper's value when the dataset is
        a RouterEval benchmark). Recorded in the metrics as router ``LLM:reference``, metric ``reference_score``.
    routellm_pair : (strong, weak), optional
        LLM names for the RouteLLM protocol; default (best train mean, cheapest other).
    n_wtp, n_thresholds, max_budgets : int
        Sweep sizes.
    fallback : bool
        Wrap every learned router (one that reads query text and not the true test scores)
        in :class:`~recsys_router.fallback.SafeFallbackRouter`: the better of best-single
        and task-best takes all queries when the router does not beat it on the mean over
        held-out training queries, and a task's queries only where that task's own held-out
        queries show a difference beyond the noise against that verdict (a one-sided paired
        test; default True; the report lists what each fold did).
    top_check : bool
        On data with costs, the safe fallback also checks each kept router's top choice (its
        LLM with no budget) against the better baseline and raises that baseline's LLM above
        the router's predictions where the router does not lead it by one SE
        (``SafeFallbackRouter(top_z="auto")``, default True); False: no such check
        (``top_z=None``).
    missing : {"mask", "drop"}
        Test queries with some LLMs unobserved: ``"mask"`` (default) keeps them and routes
        each among its observed LLMs (per-query candidate masks, every protocol and pool);
        ``"drop"`` leaves them out. Queries with no observed LLM are always left out.
    auto : int
        ``N > 0``: every registry router with a search space (``configs/search/``) gets an
        inner Optuna search of ``N`` trials on its fold's training queries
        (:class:`~recsys_router.tuning.inner.AutoTunedRouter`); the chosen parameters are in
        the notes. 0 (default): the routers' defaults.
    auto_objective : {"mu_o", "nauc", "auto"}
        What that search scores a setting by on the held-out training queries (see
        :class:`~recsys_router.tuning.inner.AutoTunedRouter`): ``mu_o``, ORBIT's nAUC, or
        ``auto`` (default: nAUC where the training data has costs, else mu_o).
    auto_folds : int or "auto"
        Where that search scores a setting (``inner_folds`` of
        :class:`~recsys_router.tuning.inner.AutoTunedRouter`): ``"auto"`` (default) five
        inner folds of the training queries for routers whose fit is cheap, one held-out
        fifth for the others; an integer forces that many (1: one held-out fifth).
    fallback_metric : {"auto", "mu_o", "nauc"}
        What the safe fallback's verdict compares on held-out training queries
        (``SafeFallbackRouter(verdict_metric=)``): each choice's top-LLM score (``mu_o``) or,
        on data with costs, the budget sweep's nAUC with a bootstrap SE (``nauc``); ``auto``
        (default): nAUC where the training data has costs, else mu_o.
    """

    routers: list
    protocols: list[str] = field(default_factory=lambda: protocol_names(all_only=True))
    pools: list = field(default_factory=lambda: ["all"])
    groups: list[str] | None = None
    group_method: str = "routereval"
    split: Sequence[float] | None = None
    split_column: str | None = None
    ood_tasks: Sequence[str] | None = None
    folds: int = 1
    encoder: object = None
    p: float | None = None
    seed: int = 0
    router_params: dict = field(default_factory=dict)
    routellm_pair: tuple[str, str] | None = None
    reference_score: float | None = None
    n_wtp: int = 100
    n_thresholds: int = 10
    max_budgets: int = 100
    fallback: bool = True
    top_check: bool = True
    missing: str = "mask"
    auto: int = 0
    auto_objective: str = "auto"
    fallback_metric: str = "auto"
    auto_folds: int | str = "auto"


@dataclass
class EvalResult:
    """Everything an evaluation produced (see :func:`evaluate`)."""

    dataset: str
    config: EvalConfig
    decisions: pd.DataFrame
    metrics: pd.DataFrame
    curves: pd.DataFrame
    timings: pd.DataFrame
    notes: list[str]
    simulated: bool = False
    info: dict = field(default_factory=dict)
