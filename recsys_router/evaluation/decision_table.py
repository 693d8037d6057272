"""The decision table of an evaluation: one row per (setting, query), its columns and how the
blocks of one (router, setting) sweep are stacked into it.

:func:`~recsys_router.evaluation.runner.evaluate` records every decision through
:func:`_block` and stacks them with :func:`_assemble`; every metric is then recomputed from
that table alone (:func:`~recsys_router.evaluation.recompute.metrics_from_decisions`).
:mod:`recsys_router.evaluation.runner` re-exports :data:`DECISION_COLUMNS`, its public path.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["DECISION_COLUMNS"]

#: the columns of ``decisions.parquet``, in order
DECISION_COLUMNS = ["dataset", "protocol", "pool", "group", "fold", "router", "setting",
                    "setting_value", "query_id", "llm", "score", "cost", "prob_entropy"]

_SCALARS = ("dataset", "protocol", "pool", "group", "fold", "router", "setting", "setting_value")


def _block(meta: dict, router: str, setting: str, value: float, qcode: np.ndarray,
           lcode: np.ndarray, choice: np.ndarray, s: np.ndarray, c: np.ndarray | None,
           ent: np.ndarray | None, paid: np.ndarray | None = None) -> dict:
    """One (router, setting) block of decisions: scalars plus per-query arrays.

    ``qcode`` indexes the dataset's query ids, ``lcode[choice]`` its LLM names. The cost is
    ``paid`` when the router said what it paid
    (:meth:`~recsys_router.router.Router.decide`), else the chosen LLM's true cost.
    """
    n = len(qcode)
    rows = np.arange(n)
    if paid is not None:
        cost = np.asarray(paid, dtype=np.float64)
    else:
        cost = c[rows, choice].astype(np.float64) if c is not None else np.full(n, np.nan)
    return {**meta, "router": router, "setting": setting, "setting_value": float(value),
            "qcode": qcode, "lcode": lcode[choice], "score": s[rows, choice].astype(np.float64),
            "cost": cost,
            "prob_entropy": ent if ent is not None else np.full(n, np.nan)}


def _decided(decide, test, rows: np.ndarray, cols: np.ndarray, names: list[str],
             sweep, answer_costs=None) -> list[tuple]:
    """``(value, choice, paid)`` per operating point of a router that says what it pays
    (:meth:`~recsys_router.router.Router.decide`), run on the pool's usable test queries with
    the pool's LLMs as candidates: a ``wtp`` / ``budget`` point is that policy at the point's
    value (a cascade's budget is its own cap on the total cost per query), ``argmax`` none;
    a setting that is no router policy (RouteLLM's thresholds) keeps the sweep's choice and
    pays :meth:`~recsys_router.router.Router.answer_costs` (a cascade: the chain that gave
    its verdict, plus the chosen LLM when the chain did not try it)."""
    sub = test if rows.all() else test.subset(np.flatnonzero(rows))
    pos = np.full(test.n_llms, -1, dtype=np.int64)
    pos[cols] = np.arange(len(cols))
    out = []
    for value, choice in sweep.points:
        if sweep.setting not in ("wtp", "budget", "argmax"):
            paid = None if answer_costs is None else \
                answer_costs(sub, cols[np.asarray(choice, dtype=np.int64)], candidates=list(names))
            out.append((value, choice, paid))
            continue
        kw = {} if sweep.setting == "argmax" else {sweep.setting: float(value)}
        ch, paid = decide(sub, candidates=list(names), **kw)
        out.append((value, pos[np.asarray(ch, dtype=np.int64)], paid))
    return out


def _assemble(blocks: list[dict], query_ids: list[str], llm_names: list[str]) -> pd.DataFrame:
    """Stack decision blocks into the long table; text columns are categorical (compact)."""
    if not blocks:
        return pd.DataFrame({k: pd.Series(dtype=float if k in ("score", "cost", "prob_entropy",
                                                                "setting_value") else object)
                             for k in DECISION_COLUMNS})
    lengths = np.array([len(b["qcode"]) for b in blocks])
    cols = {}
    for key in _SCALARS:
        vals = [b[key] for b in blocks]
        if key == "fold":
            cols[key] = np.repeat(np.asarray(vals, dtype=np.int64), lengths)
        elif key == "setting_value":
            cols[key] = np.repeat(np.asarray(vals, dtype=np.float64), lengths)
        else:
            cats, codes = np.unique(np.asarray(vals, dtype=str), return_inverse=True)
            cols[key] = pd.Categorical.from_codes(np.repeat(codes, lengths), categories=list(cats))
    cols["query_id"] = pd.Categorical.from_codes(np.concatenate([b["qcode"] for b in blocks]),
                                                 categories=list(query_ids))
    cols["llm"] = pd.Categorical.from_codes(np.concatenate([b["lcode"] for b in blocks]),
                                            categories=list(llm_names))
    for key in ("score", "cost", "prob_entropy"):
        cols[key] = np.concatenate([b[key] for b in blocks])
    return pd.DataFrame({k: cols[k] for k in DECISION_COLUMNS})
