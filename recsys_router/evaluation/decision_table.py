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
             sweep, answer_costs=None, observed: np.ndarray | None = None) -> list[tuple]:
    """``(value, choice, paid)`` per operating point of a router that says what it pays
    (:meth:`~recsys_router.router.Router.decide`), run on the pool's usable test queries with
    the pool's LLMs as candidates: a ``wtp`` / ``budget`` point is that policy at the point's
    value (a cascade's budget is its own cap on the total cost per query), ``argmax`` none;
    a setting that is no router policy (RouteLLM's thresholds) keeps the sweep's choice and
    pays :meth:`~recsys_router.router.Router.answer_costs` (a cascade: the chain that gave
    its verdict, plus the chosen LLM when the chain did not try it).

    ``observed`` (usable rows x pool columns), for a router that picks from its own
    predictions (``--missing mask``): each group of queries with the same observed LLMs is
    decided with those LLMs as candidates, as the sweeps of predictions mask unobserved cells;
    without it a query could be routed to an LLM whose score it does not have."""
    sub = test if rows.all() else test.subset(np.flatnonzero(rows))
    if observed is not None and not observed.all():
        decide = _by_observed(decide, sub, observed, names)
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


def _by_observed(decide, sub, observed: np.ndarray, names: list[str]):
    """``decide`` run once per group of rows of ``sub`` sharing an observed pattern, with that
    pattern's LLMs as candidates; the choices and paid costs put back in row order."""
    patterns, inverse = np.unique(observed, axis=0, return_inverse=True)
    inverse = np.asarray(inverse).reshape(-1)
    groups = [(np.flatnonzero(inverse == g), [names[j] for j in np.flatnonzero(pat)])
              for g, pat in enumerate(patterns) if pat.any()]

    def grouped(data, candidates=None, **kw):
        choice = np.full(data.n_queries, -1, dtype=np.int64)
        paid = np.full(data.n_queries, np.nan)
        for idx, cands in groups:
            ch, pd_ = decide(data.subset(idx), candidates=cands, **kw)
            choice[idx] = np.asarray(ch, dtype=np.int64)
            paid[idx] = np.asarray(pd_, dtype=np.float64)
        return choice, paid
    return grouped


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
