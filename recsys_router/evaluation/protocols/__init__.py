"""Evaluation protocols, one record per file, registered by name.

Each module here (except those starting with ``_``) defines one :class:`Protocol` and
registers it in :data:`PROTOCOLS`, which imports them all on its first lookup, so a new
protocol is one new file.
See ``_base.py`` for the record's fields and ARCHITECTURE.md for a walk-through.

Example
-------
>>> from recsys_router.evaluation.protocols import protocol_names, get_protocol
>>> protocol_names(all_only=True)
['routereval', 'routerbench', 'orbit', 'routellm']
>>> get_protocol("orbit").needs_costs
True
"""

from __future__ import annotations

from ._base import (LLM_PREFIX, PROTOCOLS, Block, mean_paid, MetricContext, PoolView, Predictions, Protocol,
                    ProtocolOption, RunOutcome, Sweep, all_singles, train_test_parts, curve_row, get_protocol, metric_row, parse_protocols,
                    protocol_names, register_protocol, registered_protocols, unregister_protocol)

__all__ = ["Protocol", "Block", "mean_paid", "PoolView", "Predictions", "Sweep", "MetricContext",
           "ProtocolOption", "RunOutcome", "train_test_parts",
           "register_protocol", "unregister_protocol", "get_protocol", "protocol_names",
           "registered_protocols", "parse_protocols", "all_singles", "metric_row", "curve_row",
           "LLM_PREFIX", "PROTOCOLS"]
