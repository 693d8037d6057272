"""Off-policy evaluation of a router on a decision log, its report, and the feedback plots.

:func:`evaluate_on_log` estimates a target router's mean score and mean cost on logged
traffic with every estimator of :mod:`recsys_router.feedback.ope`. DM's reward model of the
score is ``ridge`` (default: :func:`recsys_router.feedback.reward.ridge_reward` on the log's
query features, cross-fitted and refitted on every bootstrap resample, so DM/DR intervals
include its fitting variance) or a CF router trained ``naive`` on the log's scores (fitted
once; DM/DR intervals then hold it fixed and are too narrow; the ``refit`` column says which). For costs, the reward
model is each LLM's mean logged cost (SNIPS-weighted per LLM). :func:`plot_ope` draws the
estimates with their intervals, :func:`plot_regret` the online bandit's cumulative regret.
"""

from __future__ import annotations

import json

from pathlib import Path

import numpy as np
import pandas as pd

from ..data import RoutingData
from ..evaluation.figures import plain_text, pyplot, save_figure
from .logged import check_logged, logging_matrix
from .ope import ESTIMATORS, SUPPORT_NOTE, estimate_all
from .reward import mean_outcome_refit, query_features, ridge_reward

__all__ = ["evaluate_on_log", "ope_markdown", "plot_ope", "plot_regret", "target_probabilities"]


def target_probabilities(router, log: RoutingData, *, wtp=None, budget=None) -> np.ndarray:
    """One-hot choice probabilities (n, L) of a deterministic router on the logged queries,
    over the log's LLM columns; the router chooses among its LLMs that the log has (an LLM
    never logged has no observed outcome to estimate from).

    When the log keeps each decision's offered LLMs (a ``candidates`` query column, as
    :func:`~recsys_router.feedback.logged.log_to_data` makes from a decision log), the
    router chooses among those of them it knows, as it would have had to when serving that
    request: an LLM the request did not offer was never a possible action there, and
    choosing it would count as a miss in every estimator. A decision none of whose offered
    LLMs the router knows falls back to all of them."""
    from ..router import Router
    inner = router if isinstance(router, Router) else router.router  # ExportedRouter wraps one
    names = list(inner.llm_names_)
    cand = [n for n in names if n in log.llm_names]
    if not cand:
        raise ValueError(f"none of the target router's LLMs {names} appears in the log "
                         f"(logged LLMs: {log.llm_names})")
    if inner.uses_text and not any(isinstance(t, str) and t.strip() for t in log.texts):
        raise ValueError("the log keeps no query texts (--log-text hash|none): a text router "
                         "cannot be re-run on it; serve with --log-text full to evaluate others")
    data = RoutingData(log.queries, names, np.full((log.n_queries, len(names)), np.nan),
                       name=log.name)
    groups: dict[tuple, list[int]] = {}
    for i, allowed in enumerate(_offered(log, cand)):
        groups.setdefault(allowed, []).append(i)
    pi = np.zeros((log.n_queries, log.n_llms))
    for allowed, rows in groups.items():
        part = data if len(rows) == log.n_queries else data.subset(np.asarray(rows))
        ch = inner.route_indices(part, wtp=wtp, budget=budget,
                                 candidates=None if len(allowed) == len(names) else list(allowed))
        pi[rows, [log.llm_names.index(names[c]) for c in ch]] = 1.0
    return pi


def _offered(log: RoutingData, cand: list[str]) -> list[tuple]:
    """Per decision, the router's LLMs (``cand``, in its order) that the request offered."""
    if "candidates" not in log.queries.columns:
        return [tuple(cand)] * log.n_queries
    out = []
    for i, raw in enumerate(log.queries["candidates"]):
        try:
            offered = json.loads(raw) if isinstance(raw, str) else []
        except (ValueError, RecursionError):
            offered = None
        if not isinstance(offered, list):
            raise ValueError(f"{log.name}: query {i}: 'candidates' {str(raw)[:80]!r} is not a JSON "
                             "list of LLM names")
        out.append(tuple(n for n in cand if n in offered) or tuple(cand))
    return out


def evaluate_on_log(router, log: RoutingData, *, wtp=None, budget=None, n_boot: int = 200,
                    seed: int = 0, dm_router: str = "ridge", dm_params: dict | None = None) -> pd.DataFrame:
    """Every estimator of the target's mean score (and mean cost when the log has costs).

    Returns
    -------
    DataFrame
        Columns ``outcome`` (score|cost), ``estimator``, ``value``, ``lo``, ``hi``, ``ess``, ``n``,
        ``refit`` (bootstrap resamples on which DM/DR's reward model was refitted; 0 = held
        fixed), ``unsupported`` (decisions where the target chooses an LLM the logging policy
        gave probability 0, from the log's ``probs`` or a propensity of 1), ``biased``
        (IPS, SNIPS and DR rows when ``unsupported`` > 0) and ``undefined_resamples``
        (bootstrap resamples where the estimator is undefined: SNIPS where the target agrees
        with no logged choice; ``lo``/``hi`` are NaN when they are too many, see
        :func:`~recsys_router.feedback.ope.percentile_interval`).
    """
    from ..registry import make_router
    action, r, p = check_logged(log)
    pi = target_probabilities(router, log, wtp=wtp, budget=budget)
    mu = logging_matrix(log)
    refit = q = None
    if dm_router == "ridge":
        x = query_features(log, **dict(dm_params or {}))
        refit = ridge_reward(x, action, r, log.n_llms, seed=seed)
    else:
        dm = make_router("logged", router=dm_router, params=dict(dm_params or {}), loss="naive",
                         seed=seed).fit(log)
        q = dm.predict_scores(log)
    rows = []
    every = np.ones(log.n_queries, dtype=bool)
    outcomes = [("score", every, r, q, refit)]
    if log.costs is not None:
        # the decisions whose chosen LLM's cost is known (the others are left out of the cost
        # estimates, and the table's n says how many remain)
        c = log.costs[np.arange(log.n_queries), action].astype(np.float64)
        known = np.isfinite(c)
        if known.any():
            outcomes.append(("cost", known, c[known], None,
                             mean_outcome_refit(c[known], action[known], p[known], log.n_llms)))
    for name, rows_in, y, qq, fit in outcomes:
        est = estimate_all(y, p[rows_in], pi[rows_in], action[rows_in], qq, n_boot=n_boot,
                           seed=seed, refit=fit, logging_probs=mu[rows_in])
        for e in ESTIMATORS:
            rows.append({"outcome": name, "estimator": e, "value": est[e]["value"],
                         "lo": est[e]["lo"], "hi": est[e]["hi"], "ess": est["ess"], "n": est["n"],
                         "refit": est["n_refit"] if e in ("dm", "dr") else 0,
                         "unsupported": est["unsupported"],
                         "biased": bool(est["unsupported"]) and e != "dm",
                         "undefined_resamples": est[e]["undefined_resamples"]})
    return pd.DataFrame(rows)


def ope_markdown(table: pd.DataFrame, title: str, n_boot: int | None = None) -> str:
    """The estimates as a Markdown report; with ``n_boot=0`` (no bootstrap) it has no interval
    column and says so."""
    def est(r) -> str:
        return r.estimator.upper() + (" (biased)" if getattr(r, "biased", False) else "")
    lines = [f"# {title}", "", f"{int(table['n'].iloc[0])} logged decisions with feedback; "
             f"effective sample size of the importance weights: {table['ess'].iloc[0]:.1f}.", ""]
    if n_boot == 0:
        lines += ["No intervals: no bootstrap resamples were drawn (n_boot = 0).", "",
                  "| outcome | estimator | estimate |", "|---|---|---|"]
        lines += [f"| {r.outcome} | {est(r)} | {r.value:.4f} |" for r in table.itertuples()]
    else:
        if n_boot is not None and n_boot < 100:
            lines += [f"Only {n_boot} bootstrap resamples: the percentile intervals are rough and may "
                      "not even hold their estimate.", ""]
        lines += ["| outcome | estimator | estimate | 95% interval |", "|---|---|---|---|"]
        lines += [f"| {r.outcome} | {est(r)} | {r.value:.4f} | {_interval(r.lo, r.hi)} |"
                  for r in table.itertuples()]
        lines += _undefined_lines(table, n_boot)
    n_all = int(table["n"].iloc[0])
    cost = table[table["outcome"] == "cost"]
    if len(cost) and int(cost["n"].iloc[0]) < n_all:
        lines += ["", f"Cost estimates use the {int(cost['n'].iloc[0])} decisions whose chosen "
                  f"LLM's cost is known ({n_all - int(cost['n'].iloc[0])} without one are left out)."]
    if float(table["ess"].iloc[0]) == 0:
        lines += ["", "**No overlap**: the target never chooses the LLM the log chose (effective "
                  "sample size 0), so IPS is 0 and SNIPS undefined by construction, DR equals DM "
                  "(the reward model alone), and no interval says anything about the target."]
    elif len(cost) and float(cost["ess"].iloc[0]) == 0:   # the known-cost subset alone
        lines += ["", f"**No overlap for cost**: on the {int(cost['n'].iloc[0])} decisions with a "
                  "known cost the target never chooses the LLM the log chose (effective sample "
                  "size 0), so the cost rows' IPS is 0, SNIPS undefined and DR equals DM."]
    bad = int(table["unsupported"].max()) if "unsupported" in table and len(table) else 0
    if bad:
        lines += ["", f"**Support violation, IPS/SNIPS/DR biased**: on {bad} of "
                  f"{int(table['n'].iloc[0])} decisions {SUPPORT_NOTE}."]
    score = table[(table["outcome"] == "score") & (table["estimator"] == "dm")]
    k = int(score["refit"].iloc[0]) if "refit" in table and len(score) else 0
    how = ("fitted once; no bootstrap" if n_boot == 0 else
           f"refitted on each of {k} bootstrap resamples" if k else
           "held fixed in the bootstrap, so DM/DR intervals are too narrow")
    costs = ("; the cost model, each LLM's weighted mean cost, is refitted on every resample"
             if len(cost) and n_boot != 0 else "")
    lines += ["", "IPS/SNIPS re-weight logged outcomes by target / logging probability; DM uses a "
              f"reward model fitted on the log ({how}{costs}); DR combines both."]
    return "\n".join(lines) + "\n"


def _interval(lo: float, hi: float) -> str:
    """``[lo, hi]`` to four decimals, or ``undefined`` when the bootstrap gave no bounds."""
    return "undefined" if np.isnan(lo) or np.isnan(hi) else f"[{lo:.4f}, {hi:.4f}]"


def _undefined_lines(table: pd.DataFrame, n_boot: int | None) -> list[str]:
    """One note per row whose estimator was undefined on some bootstrap resamples (SNIPS on
    a resample where the target agrees with no logged choice): how many, and what they did
    to the interval (:func:`~recsys_router.feedback.ope.percentile_interval`)."""
    if "undefined_resamples" not in table:
        return []
    out = []
    for r in table[table["undefined_resamples"] > 0].itertuples():
        of = f" of {n_boot}" if n_boot else ""
        effect = ("so its interval is undefined (more of them than the 2.5% each bound may "
                  "leave out)" if np.isnan(r.lo) else
                  "counted at the worst case on each side, which widens its interval")
        out += ["", f"{r.estimator.upper()} ({r.outcome}): {int(r.undefined_resamples)}{of} "
                f"bootstrap resamples hold no decision where the target agrees with the log, "
                f"where it is undefined; {effect}."]
    return out


def plot_ope(table: pd.DataFrame, path: Path, title: str) -> None:
    """Estimates with their 95% intervals, one panel per outcome (error bars clipped at 0: a
    percentile interval of few resamples may not hold its point estimate)."""
    with plain_text():
        plt = pyplot()
        outs = list(dict.fromkeys(table["outcome"]))
        fig, axes = plt.subplots(1, len(outs), figsize=(5 * len(outs), 4), squeeze=False)
        for ax, o in zip(axes[0], outs):
            sub = table[table["outcome"] == o]
            x = np.arange(len(sub))
            err = np.vstack([sub["value"] - sub["lo"], sub["hi"] - sub["value"]])
            ax.errorbar(x, sub["value"], yerr=np.clip(np.nan_to_num(err), 0.0, None), fmt="o",
                        capsize=6)
            ax.set_xticks(x, [e.upper() for e in sub["estimator"]])
            ax.set_ylabel(f"estimated mean {o}")
            ax.grid(alpha=0.3)
        fig.suptitle(title)
        save_figure(fig, path)


def plot_regret(runs: pd.DataFrame, path: Path, title: str) -> None:
    """Cumulative regret against the oracle: the online policy and the best fixed LLM."""
    with plain_text():  # the title names the router
        plt = pyplot()
        fig, ax = plt.subplots(figsize=(7, 4.5))
        ax.plot(runs["t"], runs["regret_policy"], label="online router (epsilon-greedy, retrained)")
        ax.plot(runs["t"], runs["regret_best_fixed"], "--", label="best fixed LLM (in hindsight)")
        ax.set_xlabel("round t")
        ax.set_ylabel("cumulative regret vs the oracle")
        ax.set_title(title)
        ax.legend()
        ax.grid(alpha=0.3)
        save_figure(fig, path)
