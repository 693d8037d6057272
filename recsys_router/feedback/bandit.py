"""The ``bandit`` protocol: simulate a production log from a full matrix, train on it, and
measure both the routers and the off-policy estimators against the full-matrix truth.

Offline (:func:`bandit_evaluate`): a seeded logging policy reveals one LLM per training
query with its propensity (``uniform``; ``epsilon-greedy:E`` around the best single LLM of
the training matrix; ``router:NAME``, the named router fitted with full information on a
10% warm-up slice of the training queries, which then leaves the log, with epsilon 0.1
exploration around its choice). Each router is trained on that log with each loss and
scored on the full test matrix (``mu_o``, ``nauc``), next to the same router trained with
full information on the same training queries and the best single LLM. OPE accuracy: the
test queries are logged by the same policy, and each estimator's estimate of each trained
router's test ``mu_o`` is compared with the truth (``ope_error_<est>`` = absolute error,
``ope_ci_covered_<est>`` = 1 when the 95% interval covers it, 0 when not, NaN without an
interval (``n_boot=0``), ``ope_ci_covered`` = their mean over the estimators with one);
DM/DR's reward model is by default the ridge of :mod:`recsys_router.feedback.reward`, fitted
on the test log and refitted on every bootstrap resample.

Online (:func:`online_bandit`): T rounds of epsilon-greedy routing by a router retrained
on the growing log every B queries; cumulative regret against the oracle and against the
best fixed LLM in hindsight (:func:`recsys_router.feedback.plots.plot_regret`).

Reference: Li, Chu, Langford & Wang, "Unbiased Offline Evaluation of Contextual-bandit-based
News Article Recommendation Algorithms", WSDM 2011 (evaluation from a full-information
simulator).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from ..data import RoutingData
from ..errors import DataValidationError
from ..metrics.orbit import orbit_metrics
from ..metrics.routereval import mu_o
from .logged import FEEDBACK_LOSSES
from .explore import draw
from .logging_sim import (_eps_greedy, log_from_choices, logging_probabilities,
                          parse_logging_policy, simulate_log, simulated_train_log)
from .ope import ESTIMATORS, check_n_boot, estimate_all
from .reward import query_features, ridge_reward

__all__ = ["logging_probabilities", "simulate_log", "simulated_train_log", "log_from_choices",
           "bandit_evaluate", "bandit_parts", "BanditParts", "online_bandit", "epsilon_schedule",
           "parse_logging_policy"]


def _complete(data: RoutingData) -> RoutingData:
    keep = np.flatnonzero(~np.isnan(data.scores).any(axis=1))
    return data if len(keep) == data.n_queries else data.subset(keep)


class BanditParts(NamedTuple):
    """The queries the offline bandit protocol uses: ``train`` the logged training queries,
    ``test`` the test queries scored on the full matrix, ``warmup`` the training queries the
    ``router:NAME`` logging policy is fitted on (None for the other policies), ``notes`` what
    was left out and why."""
    train: RoutingData
    test: RoutingData
    warmup: RoutingData | None
    notes: list


def _complete_part(data: RoutingData, what: str, why: str, notes: list) -> RoutingData:
    """``data`` without its queries that miss an LLM (a note counts them); an error naming
    the data when none is complete."""
    n = data.n_queries
    keep = int((~np.isnan(data.scores).any(axis=1)).sum())
    if keep == 0:
        raise DataValidationError(f"the bandit protocol needs {what} queries with every LLM "
                                  f"observed ({why}); 0 of {n} are",
                                  source=data.source or data.name)
    if keep < n:
        notes.append(f"{n - keep} of {n} {what} queries left out: each misses the score of at "
                     f"least one LLM, and {why}")
    return _complete(data)


def bandit_parts(train: RoutingData, test: RoutingData, logging_policy: str = "uniform",
                 seed: int = 0) -> BanditParts:
    """Split ``train``/``test`` into the queries :func:`bandit_evaluate` logs, tests and warms
    the logging router up on.

    Queries with a missing score are left out (the log is simulated from, and the routers
    scored on, the full matrix), each part's count in a note; ``router:NAME`` then fits its
    router on a seeded ``max(1, n // 10)`` of the ``n`` complete training queries, which leave
    the log.

    Raises
    ------
    DataValidationError
        When no training or no test query has every LLM observed, or ``router:NAME`` leaves no
        training query to log.

    Example
    -------
    >>> d = RoutingData(["a", "b", "c"], ["x", "y"], [[1, 0], [np.nan, 1], [0, 1]])
    >>> parts = bandit_parts(d, d)
    >>> parts.train.n_queries, parts.notes[0]  # doctest: +NORMALIZE_WHITESPACE
    (2, '1 of 3 training queries left out: each misses the score of at least one LLM, and the
    log is simulated from the full matrix')
    """
    notes: list[str] = []
    train = _complete_part(train, "training", "the log is simulated from the full matrix", notes)
    test = _complete_part(test, "test", "the routers are scored on the full matrix", notes)
    kind, val = parse_logging_policy(logging_policy)
    warmup = None
    if kind == "router":
        n = train.n_queries
        if n < 2:
            raise DataValidationError(f"--logging-policy {logging_policy} needs at least 2 "
                                      f"complete training queries (a warm-up one to fit the "
                                      f"logging router, the others to log); the data has {n}",
                                      source=train.source or train.name)
        n_warm = max(1, n // 10)
        perm = np.random.default_rng(seed).permutation(n)
        warmup = train.subset(np.sort(perm[:n_warm]))
        train = train.subset(np.sort(perm[n_warm:]))
        notes.append(f"{n_warm} of the {n} complete training queries fitted the logging router "
                     f"{val!r} and left the log ({train.n_queries} logged)")
    return BanditParts(train, test, warmup, notes)


def _quality(router, test: RoutingData) -> dict:
    s = router.predict_scores(test)
    ch = s.argmax(axis=1)
    out = {"mu_o": mu_o(test.scores, ch)}
    if test.costs is not None:
        c = router.predict_costs(test)
        out["nauc"] = orbit_metrics(s, c, test.scores, test.costs)["nauc"]
    return out, ch


def bandit_evaluate(train: RoutingData, test: RoutingData, routers: dict, *,
                    logging_policy: str = "uniform", losses=FEEDBACK_LOSSES, seed: int = 0,
                    n_boot: int = 200, dm_router: tuple = ("ridge", {}), progress=None) -> pd.DataFrame:
    """Run the offline bandit protocol; returns metric rows (router, loss, metric, value).

    Parameters
    ----------
    train, test : RoutingData
        Full matrices (queries with any missing score are left out: :func:`bandit_parts`
        says which queries are logged and tested).
    routers : dict
        label -> (registry name, params) of each router to train on the log.
    logging_policy : str
        See :func:`parse_logging_policy`.
    losses : sequence of str
        Logged-feedback losses to train with.
    seed, n_boot : int
        Seed of the log draws and the bootstrap; bootstrap resamples (0: no intervals, so
        every ``ope_ci_covered*`` value is NaN, not 0).
    dm_router : (str, dict)
        Reward model of DM/DR: ``("ridge", query_features options)`` (default) is
        :func:`~recsys_router.feedback.reward.ridge_reward` fitted on the test log itself,
        cross-fitted and refitted on every bootstrap resample; ``(registry name, params)`` a CF
        router trained ``naive`` on the training log, held fixed in the bootstrap.
    """
    from ..registry import make_router
    check_n_boot(n_boot)  # before any fit
    train, test, warmup, _ = bandit_parts(train, test, logging_policy, seed)
    logger = None
    if warmup is not None:
        logger = make_router(parse_logging_policy(logging_policy)[1]).fit(warmup)
    log_tr, _ = simulate_log(train, logging_probabilities(train, train, logging_policy, seed, logger), seed)
    log_te, a_te = simulate_log(test, logging_probabilities(train, test, logging_policy, seed, logger),
                                seed + 1)
    rows = []

    def add(router, loss, metric, value):
        rows.append({"router": router, "loss": loss, "metric": metric, "value": float(value)})

    best = int(np.nanargmax(np.nanmean(train.scores, axis=0)))
    add("best-single", "full", "mu_o", mu_o(test.scores, np.full(test.n_queries, best)))
    r_te = test.scores[np.arange(test.n_queries), a_te].astype(np.float64)
    p_te = log_te.queries["propensity"].to_numpy(dtype=float)
    refit = None
    if dm_router[0] == "ridge":
        refit = ridge_reward(query_features(test, **dict(dm_router[1])), a_te, r_te, test.n_llms,
                             seed=seed)
        q = refit(np.ones(test.n_queries))
    else:
        q = make_router("logged", router=dm_router[0], params=dict(dm_router[1]), loss="naive",
                        seed=seed).fit(log_tr).predict_scores(test)
    for label, (name, params) in routers.items():
        full, _ = _quality(make_router(name, **params).fit(train), test)
        for m, v in full.items():
            add(label, "full", m, v)
        for loss in losses:
            if progress is not None:
                progress(f"{label} / {loss}")
            r = make_router("logged", router=name, params=dict(params), loss=loss, seed=seed).fit(log_tr)
            qual, ch = _quality(r, test)
            for m, v in qual.items():
                add(label, loss, m, v)
            pi = np.zeros(test.scores.shape)
            pi[np.arange(test.n_queries), ch] = 1.0
            est = estimate_all(r_te, p_te, pi, a_te, q, n_boot=n_boot, seed=seed, refit=refit)
            truth = qual["mu_o"]
            covered = []
            for e in ESTIMATORS:
                add(label, loss, f"ope_{e}", est[e]["value"])
                add(label, loss, f"ope_error_{e}", abs(est[e]["value"] - truth))
                cov = _covered(est[e]["lo"], est[e]["hi"], truth)
                covered.append(cov)
                add(label, loss, f"ope_ci_covered_{e}", cov)
            known = [c for c in covered if c == c]
            add(label, loss, "ope_ci_covered", np.mean(known) if known else np.nan)
            add(label, loss, "ope_ess", est["ess"])
            add(label, loss, "ope_unsupported", est["unsupported"])  # > 0: IPS/SNIPS/DR biased
    return pd.DataFrame(rows)


def _covered(lo: float, hi: float, truth: float) -> float:
    """1.0 when ``[lo, hi]`` holds ``truth``, 0.0 when not, NaN when there is no interval.

    Example
    -------
    >>> _covered(0.1, 0.3, 0.2), _covered(0.1, 0.3, 0.4), _covered(float("nan"), float("nan"), 0.2)
    (1.0, 0.0, nan)
    """
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return float("nan")
    return float(lo <= truth <= hi)


def epsilon_schedule(epsilon: float, decay: str, block: int) -> float:
    """Exploration rate of the ``block``-th retrained model (1-based): ``epsilon`` when
    ``decay`` is ``constant``, ``min(1, epsilon / sqrt(block))`` when it is ``sqrt``.

    Example
    -------
    >>> epsilon_schedule(0.2, "constant", 4), epsilon_schedule(0.2, "sqrt", 4)
    (0.2, 0.1)
    """
    if not 0 <= epsilon <= 1:
        raise ValueError(f"epsilon must be in [0, 1], got {epsilon!r}")
    if decay == "constant":
        return float(epsilon)
    if decay == "sqrt":
        return float(min(1.0, epsilon / np.sqrt(block)))
    raise ValueError(f"epsilon decay must be 'constant' or 'sqrt', got {decay!r}")


def online_bandit(data: RoutingData, router: tuple, *, loss: str = "dr", rounds: int = 1000,
                  retrain_every: int = 200, epsilon: float = 0.1, decay: str = "constant",
                  seed: int = 0, progress=None) -> pd.DataFrame:
    """Online epsilon-greedy routing with periodic retraining on the growing log.

    The first ``retrain_every`` rounds are uniform (no model yet); after the ``k``-th
    retraining the exploration rate is :func:`epsilon_schedule` ``(epsilon, decay, k)``.

    Returns
    -------
    DataFrame
        One row per round: ``t``, ``chosen``, ``propensity``, ``score``, ``oracle``,
        ``best_fixed`` (score of the best fixed LLM in hindsight), and the cumulative
        regrets ``regret_policy`` (oracle - chosen), ``regret_best_fixed`` (oracle - best
        fixed) and ``regret_vs_best_fixed`` (best fixed - chosen).
    """
    from ..registry import make_router
    data = _complete(data)
    if rounds < 1 or retrain_every < 1:
        raise ValueError("rounds and retrain_every must be >= 1")
    rng = np.random.default_rng(seed)
    order = rng.permutation(data.n_queries)[:rounds]
    stream = data.subset(order)
    n, L = stream.scores.shape
    chosen, prop, eps = np.zeros(n, np.int64), np.zeros(n), np.ones(n)
    model = None
    for k, start in enumerate(range(0, n, retrain_every)):
        block = stream.subset(np.arange(start, min(n, start + retrain_every)))
        e = 1.0 if model is None else epsilon_schedule(epsilon, decay, k)
        greedy = np.zeros(block.n_queries, np.int64) if model is None else model.route_indices(block)
        probs = np.full((block.n_queries, L), 1.0 / L) if model is None else _eps_greedy(greedy, L, e)
        ch, p = draw(probs, rng)
        sl = slice(start, start + block.n_queries)
        chosen[sl], prop[sl], eps[sl] = ch, p, e
        seen = start + block.n_queries
        if seen < n:
            if progress is not None:
                progress(f"retrain at {seen}")
            past = log_from_choices(stream.subset(np.arange(seen)), chosen[:seen], prop[:seen])
            model = make_router("logged", router=router[0], params=dict(router[1]), loss=loss,
                                seed=seed).fit(past)
    S = stream.scores.astype(np.float64)
    got = S[np.arange(n), chosen]
    oracle = S.max(axis=1)
    j = int(S.mean(axis=0).argmax())
    return pd.DataFrame({"t": np.arange(1, n + 1), "chosen": np.asarray(stream.llm_names)[chosen],
                         "propensity": prop, "score": got, "oracle": oracle, "best_fixed": S[:, j],
                         "regret_policy": np.cumsum(oracle - got),
                         "regret_best_fixed": np.cumsum(oracle - S[:, j]),
                         "regret_vs_best_fixed": np.cumsum(S[:, j] - got), "epsilon": eps})
