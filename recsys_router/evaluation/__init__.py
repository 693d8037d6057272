"""Evaluation runner: routers x protocols x pools x folds -> decisions, metrics, report.

Example
-------
>>> from recsys_router.evaluation import EvalConfig, evaluate, write_results  # doctest: +SKIP
>>> res = evaluate(load_dataset("synthetic"), EvalConfig(["oracle", "knn"]))  # doctest: +SKIP
>>> write_results(res, "results/")                                          # doctest: +SKIP
"""

from __future__ import annotations

from .io import atomic_dir
from .output import OUTPUT_FILES, write_results
from .recompute import CURVE_COLUMNS, METRIC_COLUMNS, metrics_from_decisions
from .protocols import (Protocol, get_protocol, parse_protocols, protocol_names,
                        register_protocol)
from .report import leaderboard, markdown_table
from .runner import DECISION_COLUMNS, EvalConfig, EvalResult, evaluate
from .scaling import pool_sizes, scaling_curve
from .splits import make_folds, parse_pools

__all__ = ["EvalConfig", "EvalResult", "evaluate", "write_results", "metrics_from_decisions",
           "leaderboard", "markdown_table", "scaling_curve", "pool_sizes", "make_folds",
           "parse_pools", "parse_protocols", "atomic_dir", "DECISION_COLUMNS", "Protocol",
           "register_protocol", "get_protocol", "protocol_names",
           "METRIC_COLUMNS", "CURVE_COLUMNS", "OUTPUT_FILES"]
