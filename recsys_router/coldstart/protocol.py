"""The ``coldstart`` evaluation protocol: leave one LLM out, onboard it from K probes.

For each cold LLM ``c`` the router is fitted on the training queries without ``c``'s
column, ``c`` is onboarded with :meth:`Router.add_llm` from ``K`` probes drawn from the
training queries by a strategy (:func:`~recsys_router.coldstart.selection.select_probes`),
and on the test queries (metric names exactly these)::

    score_mae       = | mean_i p_ic - mean_i s_ic |        (lower is better)
    cell_auc        = AUC of p_ic against binary s_ic       (higher; binary scores)
    cell_rmse       = sqrt(mean_i (p_ic - s_ic)^2)          (lower; other scores)
    mu_o_onboarded  = mean_i s_i,argmax_j p_ij  with c in the pool        (higher)
                      (j over the LLMs observed on query i, as in every protocol)
    mu_o_full       = the same for the router fitted with c's full column (higher)
    mu_o_without    = the same for the pool without c                     (higher)
    route_gap       = mu_o_full - mu_o_onboarded                          (lower)

Probes are onboarded with the weights the strategy returns (``select_probes(...,
return_weights=True)``: cluster shares for ``informative``), so ``p_ic`` is the router's
prediction from a weighted fit. Baselines in the same run (router column, named with the
router they ran beside, e.g. ``probe-mean (knn)``: their probes, predictions and mu_o come
from that router's run, so two routers' baselines are never averaged together): ``probe-mean``
predicts the weighted probe mean ``sum_k v_k y_k / sum_k v_k`` for every query (the
tinyBenchmarks anchor estimate); ``nearest-llm`` copies the fitted router's predictions of
the existing LLM whose observed training scores agree best (least weighted mean absolute
difference) with the probes.
"""

from __future__ import annotations

import copy
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from recsys_router.data import RoutingData
from recsys_router.errors import DataValidationError
from recsys_router.policies import argmax_policy

from .selection import STRATEGIES, score_profiles, select_probes

__all__ = ["coldstart_rows", "summarise", "plot_curves", "parse_cold_llms", "check_cold_llms",
           "COLDSTART_METRICS"]

#: metric -> direction (+1 higher is better, -1 lower is better)
COLDSTART_METRICS = {"score_mae": -1, "cell_auc": +1, "cell_rmse": -1, "mu_o_onboarded": +1,
                     "mu_o_full": +1, "mu_o_without": +1, "route_gap": -1}


def parse_cold_llms(spec: str, names: Sequence[str], seed: int = 0) -> list[str]:
    """``all``, a count ``N`` (seeded random subset) or ``NAME,NAME`` (or a list of names),
    each named once.

    Example
    -------
    >>> parse_cold_llms("b,a", ["a", "b", "c"]), parse_cold_llms(["c"], ["a", "b", "c"])
    (['b', 'a'], ['c'])
    >>> len(parse_cold_llms("2", ["a", "b", "c"]))
    2
    """
    names = list(names)
    items = [s.strip() for s in (str(spec).split(",") if isinstance(spec, str) else spec)
             if str(s).strip()]
    if items == ["all"]:
        return names
    if len(items) == 1 and items[0].isdigit():
        n = int(items[0])
        if not 1 <= n <= len(names):
            raise ValueError(f"--cold-llms {n}: expected 1..{len(names)} (the pool size)")
        pick = np.random.default_rng(seed).choice(len(names), size=n, replace=False)
        return [names[i] for i in sorted(pick)]
    out = [str(s) for s in items]
    bad = [s for s in out if s not in names]
    if bad or not out:
        raise ValueError(f"--cold-llms: unknown LLM(s) {bad}; the pool is {names}")
    twice = sorted({s for s in out if out.count(s) > 1})
    if twice:
        raise ValueError(f"--cold-llms: LLM(s) {twice} named more than once (each would repeat "
                         "its rows)")
    return out


def check_cold_llms(train: RoutingData, test: RoutingData, cold_llms: Sequence[str]) -> None:
    """Refuse what the protocol cannot measure: a pool of fewer than 2 LLMs (the cold one and
    another for the router to be fitted on), a cold LLM with no observed training query (no
    answers to draw probes from) or with no observed test query (never routable there, so
    its onboarding cannot be scored: its route_gap would be 0 by construction).

    Raises
    ------
    DataValidationError
        Naming the data and the LLMs at fault.

    Example
    -------
    >>> d = RoutingData(["q1", "q2"], ["a", "b"], [[1, np.nan], [0, np.nan]])
    >>> check_cold_llms(d, d, ["a"])
    >>> check_cold_llms(d, d, ["b"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    recsys_router.errors.DataValidationError: data: LLM(s) 'b' have no observed training queries...
    """
    where = train.source or train.name
    if train.n_llms < 2:
        raise DataValidationError(f"coldstart needs at least 2 LLMs (the cold one and at least "
                                  f"one other to fit the router on); the data has "
                                  f"{train.n_llms}", source=where)
    for part, what, why in ((train, "training", "so they cannot be onboarded: there are no "
                             "answers to draw probes from"),
                            (test, "test", "so their onboarding cannot be scored: no router "
                             "can route to them there")):
        seen = np.isfinite(part.scores[:, part.llm_index(cold_llms)]).any(axis=0)
        none = [c for c, ok in zip(cold_llms, seen) if not ok]
        if none:
            raise DataValidationError(f"LLM(s) {', '.join(map(repr, none))} have no observed "
                                      f"{what} queries, {why}; leave them out of the cold LLMs "
                                      "(--cold-llms)", source=where)


def _auc(p: np.ndarray, y: np.ndarray) -> float:
    """Rank AUC (ties count one half); NaN when one class is absent."""
    pos, neg = p[y > 0.5], p[y <= 0.5]
    if not len(pos) or not len(neg):
        return float("nan")
    order = np.argsort(np.concatenate([pos, neg]), kind="mergesort")
    ranks = np.empty(len(order))
    allv = np.concatenate([pos, neg])[order]
    # average ranks for ties
    _, inv, counts = np.unique(allv, return_inverse=True, return_counts=True)
    cum = np.cumsum(counts)
    avg = cum - (counts - 1) / 2.0
    ranks[order] = avg[inv]
    return float((ranks[:len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def _mu_o(scores: np.ndarray, pred: np.ndarray) -> float:
    """Mean true score of the argmax choice, each query routed among its observed LLMs (as
    every other protocol does); queries with no observed LLM are left out.

    Example
    -------
    >>> _mu_o(np.array([[np.nan, 0.0], [1.0, 0.0]]), np.array([[0.9, 0.1], [0.9, 0.1]]))
    0.5
    """
    obs = ~np.isnan(scores)
    rows = np.flatnonzero(obs.any(axis=1))
    if not len(rows):
        return float("nan")
    choice = argmax_policy(pred[rows], mask=obs[rows])
    return float(scores[rows, choice].mean())


def _cell_metrics(pred, y, binary: bool) -> dict:
    ok = ~np.isnan(y)
    p, t = pred[ok], y[ok]
    out = {"score_mae": abs(float(p.mean()) - float(t.mean()))}
    if binary:
        out["cell_auc"] = _auc(p, t)
    else:
        out["cell_rmse"] = float(np.sqrt(np.mean((p - t) ** 2)))
    return out


def _weighted_nanmean(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Column means of ``x`` (n, L) with row weights ``w``, NaN cells left out (NaN when a
    column has none)."""
    ok = ~np.isnan(x)
    tot = (ok * w[:, None]).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(tot > 0, (np.where(ok, x, 0.0) * w[:, None]).sum(axis=0) / tot, np.nan)


def coldstart_rows(train: RoutingData, test: RoutingData, make: Callable, *, router: str,
                   cold_llms: Sequence[str], ks: Sequence[int], strategies: Sequence[str],
                   seeds: Sequence[int] = (0,), progress: bool = True) -> pd.DataFrame:
    """Metric rows of the coldstart protocol (one row per cold LLM, strategy, K, seed, method).

    ``make()`` returns a fresh unfitted router. Columns: ``router`` (the router name,
    ``probe-mean (ROUTER)`` or ``nearest-llm (ROUTER)``), ``cold_llm``, ``strategy``, ``k`` (the probe count
    asked; 0 for the full-column row), ``n_probes`` (the probes the LLM was onboarded from;
    the full column's observed training queries on its row), ``seed`` (the probe seed; the
    full-column rows, fitted once whatever the probe seed, record the first of ``seeds``),
    ``metric``, ``value``. A ``k`` above the cold LLM's observed training queries gets no
    rows (the ``evaluate`` protocol notes it).
    """
    bad = [s for s in strategies if s not in STRATEGIES]
    if bad:
        raise ValueError(f"unknown probe strategy {bad}; choose from {', '.join(STRATEGIES)}")
    seeds = list(seeds)
    if not seeds:
        raise ValueError("seeds: expected at least one probe seed")
    check_cold_llms(train, test, cold_llms)
    binary = train.is_binary and test.is_binary
    rows = []
    total = len(cold_llms) * len(seeds)
    from tqdm.auto import tqdm
    bar = tqdm(total=total, desc="coldstart", disable=not progress)
    full = make().fit(train)
    full_pred = full.predict_scores(test)
    mu_full = _mu_o(test.scores, full_pred)
    for c in cold_llms:
        j = test.llm_names.index(c)
        others = [n for n in train.llm_names if n != c]
        cand = np.flatnonzero(~np.isnan(train.scores[:, train.llm_names.index(c)]))
        tr_c = train.subset(cand)
        r0 = make().fit(train.subset(llms=others))
        test_wo = test.subset(llms=others)
        base = r0.predict_scores(test_wo)
        mu_without = _mu_o(test_wo.scores, base)
        y = test.scores[:, j].astype(np.float64)
        order = others + [c]
        t_order = test.subset(llms=order)
        cand_q = tr_c.subset(llms=others)
        prof = score_profiles(r0, cand_q)
        full_cell = _cell_metrics(full_pred[:, j], y, binary)
        for m, v in full_cell.items():
            rows.append(dict(router=f"{router} (full column)", cold_llm=c, strategy="-", k=0,
                             n_probes=int(tr_c.n_queries), seed=int(seeds[0]), metric=m, value=v))
        col = tr_c.scores[:, tr_c.llm_names.index(c)].astype(np.float64)
        for seed in seeds:
            for strategy in strategies:
                fit_ks = [int(k) for k in ks if k <= tr_c.n_queries]
                if strategy == "adaptive" and fit_ks:
                    # one sequential session to the largest K: its first K probes are what a
                    # session stopped at K asks (the same answers, the same choices)
                    seq = select_probes(r0, cand_q, max(fit_ks), strategy, seed=seed,
                                        answer=lambda i: col[i], profiles=prof)
                for k in fit_ks:
                    if strategy == "adaptive":
                        idx, w = seq[:k], np.ones(k)
                    else:
                        idx, w = select_probes(r0, cand_q, k, strategy, seed=seed,
                                               profiles=prof, return_weights=True)
                    probes = tr_c.subset(idx, llms=[c])
                    r = copy.deepcopy(r0).add_llm(c, probes, weights=w,
                                                  provenance={"strategy": strategy})
                    pred = r.predict_scores(t_order)
                    ys = probes.scores[:, 0].astype(np.float64)
                    # baselines: weighted probe mean; the existing LLM agreeing best on the probes
                    obs = tr_c.subset(idx, llms=others).scores.astype(np.float64)
                    gap = _weighted_nanmean(np.abs(obs - ys[:, None]), w)
                    near = int(np.nanargmin(np.where(np.isnan(gap), np.inf, gap)))
                    # the baselines' rows name the router they ran beside: their probes (the
                    # router's strategy), nearest-llm's predictions and every mu_o are its own
                    methods = {router: pred[:, -1],
                               f"probe-mean ({router})": np.full(len(y), np.average(ys, weights=w)),
                               f"nearest-llm ({router})": base[:, near]}
                    for name, p in methods.items():
                        met = _cell_metrics(p, y, binary)
                        mu = _mu_o(t_order.scores, np.hstack([base, p[:, None]])) if name != router \
                            else _mu_o(t_order.scores, pred)
                        met.update(mu_o_onboarded=mu, mu_o_full=mu_full, mu_o_without=mu_without,
                                   route_gap=mu_full - mu)
                        rows += [dict(router=name, cold_llm=c, strategy=strategy, k=int(k),
                                      n_probes=int(len(idx)), seed=int(seed), metric=m,
                                      value=float(v)) for m, v in met.items()]
            bar.update(1)
    bar.close()
    return pd.DataFrame(rows)


def summarise(rows: pd.DataFrame) -> pd.DataFrame:
    """Mean and std over cold LLMs and seeds per (router, strategy, k, metric)."""
    g = rows.groupby(["router", "strategy", "k", "metric"], sort=True)["value"]
    out = g.agg(mean="mean", std="std", n="count").reset_index()
    return out


def plot_curves(summary: pd.DataFrame, path, metrics=("score_mae", "route_gap")) -> bool:
    """One panel per metric: mean against K, a line per (router, strategy). Returns False when
    there is nothing to draw."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    sub = summary[(summary["k"] > 0) & summary["metric"].isin(metrics)]
    if sub.empty:
        return False
    from recsys_router.evaluation.figures import plain_text
    with plain_text():  # router names drawn as written
        fig, axes = plt.subplots(1, len(metrics), figsize=(6 * len(metrics), 4.5), squeeze=False)
        for ax, m in zip(axes[0], metrics):
            for (router, strat), grp in sub[sub["metric"] == m].groupby(["router", "strategy"]):
                grp = grp.sort_values("k")
                ax.errorbar(grp["k"], grp["mean"], yerr=grp["std"].fillna(0), marker="o", capsize=2,
                            label=f"{router} / {strat}")
            ax.set_xscale("log")
            ks = sorted(sub["k"].unique())
            ax.set_xticks(ks)
            ax.set_xticklabels([str(int(k)) for k in ks])
            ax.minorticks_off()
            ax.set_xlabel("probes K")
            ax.set_ylabel(m + (" (lower is better)" if COLDSTART_METRICS[m] < 0 else ""))
            ax.set_title(f"coldstart: {m}")
            ax.grid(alpha=0.3)
        axes[0][0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
    return True
