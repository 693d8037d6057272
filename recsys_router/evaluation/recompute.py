"""Every reported number, computed from the decision table alone.

``decisions.parquet`` holds, per (dataset, protocol, pool, group, fold): one row per query
for each single LLM of the pool (router ``"LLM:<name>"``; these give the true score and
cost matrices) and one row per (router, setting, query) for each router decision.
:func:`metrics_from_decisions` rebuilds the matrices from those rows and calls the
metric functions of :mod:`recsys_router.metrics` on them, so anyone holding the
decisions can reproduce ``metrics.csv`` and ``curves.csv`` exactly.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .protocols import LLM_PREFIX, Block, MetricContext, get_protocol
from .tables import UNREACHED_METRICS

__all__ = ["metrics_from_decisions", "METRIC_COLUMNS", "CURVE_COLUMNS", "aggregate_metrics",
           "split_block"]

KEYS = ["dataset", "protocol", "pool", "group", "fold"]
METRIC_COLUMNS = KEYS + ["router", "metric", "value"]
CURVE_COLUMNS = KEYS + ["router", "curve", "setting", "setting_value", "x", "y"]


def split_block(df: pd.DataFrame) -> Block:
    """Turn the decision rows of one (dataset, protocol, pool, group, fold) into matrices.

    Each (query, LLM) has at most one ``LLM:`` reference row, as each decision run covers
    each query once: a repeated pair (which would let one row silently replace the other in
    the truth matrices) raises a ``ValueError`` naming the query and the LLM.

    Returns
    -------
    Block
        ``scores``/``costs`` (n_queries x m, from the ``LLM:`` rows; costs None when all NaN),
        ``llms`` (names), ``roles`` (setting of each LLM row: single/strong/weak), and
        ``runs``: router -> list of (setting, value, choices, prob_entropy per query),
        ``paid``: router -> the decisions' paid cost per query of each run (same order).
    """
    is_llm = df["router"].str.startswith(LLM_PREFIX).to_numpy()
    ref = df[is_llm]
    names = list(dict.fromkeys(ref["llm"].tolist()))
    qids = list(dict.fromkeys(ref["query_id"].tolist()))
    qpos = pd.Index(qids)
    lpos = pd.Index(names)
    S = np.full((len(qids), len(names)), np.nan)
    C = np.full_like(S, np.nan)
    qi = qpos.get_indexer(ref["query_id"])
    lj = lpos.get_indexer(ref["llm"])
    cell = qi * len(names) + lj
    _, first, counts = np.unique(cell, return_index=True, return_counts=True)
    if (counts > 1).any():
        d = int(np.flatnonzero(counts > 1)[0])
        k = int(first[d])
        raise ValueError(f"LLM reference rows: query {ref['query_id'].iloc[k]!r} with LLM "
                         f"{ref['llm'].iloc[k]!r} appears in {int(counts[d])} rows; expected one "
                         f"row per (query, LLM) of the block")
    S[qi, lj] = ref["score"].to_numpy(dtype=np.float64)
    C[qi, lj] = ref["cost"].to_numpy(dtype=np.float64)
    roles = dict(zip(ref["llm"], ref["setting"]))
    runs: dict[str, list] = {}
    dec = df[~is_llm]
    if len(dec):
        gid = dec.groupby(["router", "setting", "setting_value"], sort=False, dropna=False,
                          observed=True).ngroup()
        gid = gid.to_numpy()
        n_groups = int(gid.max()) + 1
        qi = qpos.get_indexer(dec["query_id"])
        lj = lpos.get_indexer(dec["llm"])
        first = np.unique(gid, return_index=True)[1]
        keys = dec.iloc[first][["router", "setting", "setting_value"]].to_numpy()
        if (qi < 0).any():
            raise ValueError(f"decision for query {dec['query_id'].iloc[int(np.argmax(qi < 0))]!r} "
                             f"has no LLM reference rows")
        if (lj < 0).any():
            k = int(np.argmax(lj < 0))
            raise ValueError(f"router {dec['router'].iloc[k]!r} chose LLM {dec['llm'].iloc[k]!r} "
                             f"outside the pool {names}")
        ch = np.full((n_groups, len(qids)), -1, dtype=np.int64)
        ch[gid, qi] = lj
        count = np.bincount(gid, minlength=n_groups)
        ent = np.full((n_groups, len(qids)), np.nan)
        ent[gid, qi] = dec["prob_entropy"].to_numpy(dtype=np.float64)
        cost = np.full((n_groups, len(qids)), np.nan)
        cost[gid, qi] = dec["cost"].to_numpy(dtype=np.float64)
        for g, (router, setting, value) in enumerate(keys):
            if count[g] != len(qids) or (ch[g] < 0).any():
                raise ValueError(f"decisions of router {router!r} ({setting}={value}) do not cover "
                                 f"the {len(qids)} queries of the LLM reference rows exactly once")
            runs.setdefault(str(router), []).append((str(setting), float(value), ch[g], ent[g],
                                                     cost[g]))
    paid = {}
    for r in runs:
        runs[r].sort(key=lambda t: (np.isnan(t[1]), t[1]))
        paid[r] = [t[4] for t in runs[r]]
        runs[r] = [t[:4] for t in runs[r]]
    costs = None if np.isnan(C).all() else C
    return Block(scores=S, costs=costs, llms=names, roles=roles, runs=runs, paid=paid)


def metrics_from_decisions(decisions: pd.DataFrame, *, reference_score: float | None = None
                           ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Recompute ``metrics`` and ``curves`` from decisions.

    Parameters
    ----------
    decisions : pandas.DataFrame
        As written to ``decisions.parquet``.
    reference_score : float, optional
        RouterEval V_R reference (``--reference-score``); otherwise the paper's value for
        RouterEval benchmarks, and no V_R for other datasets.

    Returns
    -------
    (metrics, curves) : pandas.DataFrame, pandas.DataFrame
        ``metrics`` is long (:data:`METRIC_COLUMNS`) and includes the mean over groups
        (``group == "mean"``) for sized pools and the mean/std over folds
        (``fold == "mean"``/``"std"``) when there are several folds.
    """
    mrows: list[dict] = []
    crows: list[dict] = []
    if len(decisions):
        for key, df in decisions.groupby(KEYS, sort=False, observed=True):
            meta = dict(zip(KEYS, key))
            meta["fold"] = str(meta["fold"])
            protocol = get_protocol(meta["protocol"])
            if protocol.metrics is None:
                raise ValueError(f"decisions name protocol {protocol.name!r}, which has no "
                                 "decision metrics")
            block = split_block(df)
            ms, cs = protocol.metrics(block, MetricContext(str(meta["dataset"]), reference_score))
            mrows += [{**meta, **r} for r in ms]
            crows += [{**meta, **r} for r in cs]
    metrics = pd.DataFrame(mrows, columns=METRIC_COLUMNS)
    curves = pd.DataFrame(crows, columns=CURVE_COLUMNS)
    return aggregate_metrics(metrics), curves


def _mean_std(values: pd.DataFrame, by: list[str], with_std: bool):
    """Group mean (and std) of ``value``; a metric of ``UNREACHED_METRICS`` never reached in
    one of the group's rows (NaN) has a NaN mean and std instead of the others' mean."""
    g = values.groupby(by, sort=False)["value"]
    mean = g.mean().reset_index()
    std = g.std(ddof=1).reset_index() if with_std else None
    missed = values["value"].isna() & values["metric"].isin(UNREACHED_METRICS)
    # the same keys in the same first-seen order as ``g``: one flag per row of ``mean``
    hit = missed.groupby([values[c] for c in by], sort=False).any().to_numpy()
    mean.loc[hit, "value"] = np.nan
    if std is not None:
        std.loc[hit, "value"] = np.nan
    return mean, std


def aggregate_metrics(metrics: pd.DataFrame) -> pd.DataFrame:
    """Add group means (sized pools) and fold mean/std rows to per-fold metric rows.

    Means skip a NaN metric value, except for targets that can be missed
    (``UNREACHED_METRICS``: CPT, QNC): a router that never reached the target in one fold or
    group has no mean there, rather than the mean of the folds where it did.
    """
    if metrics.empty:
        return metrics
    metrics = metrics.copy()
    metrics["fold"] = metrics["fold"].astype(str)
    parts = [metrics]
    sized = metrics[metrics["pool"] != "all"]
    if len(sized):
        gm, _ = _mean_std(sized, ["dataset", "protocol", "pool", "fold", "router", "metric"], False)
        gm["group"] = "mean"
        parts.append(gm[METRIC_COLUMNS])
    per_fold = pd.concat(parts, ignore_index=True)
    folds = per_fold["fold"].unique()
    if len(folds) > 1:
        by = ["dataset", "protocol", "pool", "group", "router", "metric"]
        mean, std = _mean_std(per_fold, by, True)
        mean["fold"] = "mean"
        std["fold"] = "std"
        per_fold = pd.concat([per_fold, mean[METRIC_COLUMNS], std[METRIC_COLUMNS]], ignore_index=True)
    return per_fold.reset_index(drop=True)
