"""Simulated logging policies: reveal one LLM per query of a full matrix, with its propensity.

The logging policies of the ``bandit`` protocol (:mod:`recsys_router.feedback.bandit`) and of
``RoutingDataModule(logging_policy=...)``: ``uniform``, ``epsilon-greedy:E`` around the best
single LLM of the training matrix, and ``router:NAME`` (epsilon 0.1 around a fitted router's
choice; the bandit protocol fits it).
"""

from __future__ import annotations

import logging

import numpy as np

from ..data import RoutingData
from .explore import draw

log = logging.getLogger(__name__)

__all__ = ["parse_logging_policy", "logging_probabilities", "simulate_log", "simulated_train_log",
           "log_from_choices"]


def parse_logging_policy(spec: str) -> tuple[str, object]:
    """``uniform`` | ``epsilon-greedy:E`` | ``router:NAME`` -> (kind, value).

    Example
    -------
    >>> parse_logging_policy("epsilon-greedy:0.1"), parse_logging_policy("router:knn")
    (('epsilon-greedy', 0.1), ('router', 'knn'))
    """
    kind, _, val = str(spec).partition(":")
    if kind == "uniform" and not val:
        return "uniform", None
    if kind == "epsilon-greedy":
        try:
            e = float(val)
        except ValueError:
            e = -1.0
        if not 0 < e <= 1:
            raise ValueError(f"--logging-policy epsilon-greedy:E needs 0 < E <= 1, got {spec!r}")
        return kind, e
    if kind == "router" and val:
        return kind, val
    raise ValueError(f"--logging-policy must be uniform, epsilon-greedy:E or router:NAME, got {spec!r}")


def _eps_greedy(greedy: np.ndarray, n_llms: int, eps: float) -> np.ndarray:
    p = np.full((len(greedy), n_llms), eps / n_llms)
    p[np.arange(len(greedy)), greedy] += 1.0 - eps
    return p


def logging_probabilities(train: RoutingData, data: RoutingData, spec: str, seed: int = 0,
                          logger=None) -> np.ndarray:
    """Choice probabilities (n, L) of the logging policy on ``data``.

    ``logger`` is the fitted router of ``router:NAME`` (see :func:`simulate_log`).
    """
    kind, val = parse_logging_policy(spec)
    L = data.n_llms
    if kind == "uniform":
        return np.full((data.n_queries, L), 1.0 / L)
    if kind == "epsilon-greedy":
        best = int(np.nanargmax(np.nanmean(train.scores, axis=0)))
        return _eps_greedy(np.full(data.n_queries, best), L, val)
    if logger is None:
        raise ValueError("router:NAME logging needs the fitted logging router")
    return _eps_greedy(logger.route_indices(data), L, 0.1)


def simulate_log(data: RoutingData, probs: np.ndarray, seed: int = 0) -> tuple[RoutingData, np.ndarray]:
    """Reveal one observed LLM per query, drawn from ``probs``; returns the logged data (one
    observed cell and a ``propensity`` column per query) and the chosen columns.

    Only a query's observed score cells can be revealed: ``probs`` is restricted to them and
    renormalised per query, and the recorded propensity is that renormalised probability
    (the one the LLM was actually drawn with). A query with no observed score has no outcome
    to log: it is left out of the log, ``log.meta["unobserved_queries_skipped"]`` counts
    such queries (0 when none) and a warning says how many.

    Returns
    -------
    log : RoutingData
        The logged queries (all queries of ``data`` but the skipped ones, in order).
    a : ndarray int
        The chosen column of each logged query (aligned with ``log``).

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> d = make_synthetic(20, 3, seed=0)
    >>> log, a = simulate_log(d, np.full((20, 3), 1 / 3))
    >>> int((~np.isnan(log.scores)).sum()), float(log.queries["propensity"].iloc[0])
    (20, 0.3333333333333333)
    """
    probs = np.asarray(probs, dtype=np.float64)
    observed = ~np.isnan(data.scores)
    p = np.where(observed, probs, 0.0)
    mass = p.sum(axis=1)
    keep = observed.any(axis=1)
    no_mass = keep & ~(mass > 0)
    if no_mass.any():
        i = int(np.flatnonzero(no_mass)[0])
        raise ValueError(f"query {data.query_ids[i]!r}: the logging policy gives no probability "
                         f"to any of its observed LLMs; nothing to reveal")
    skipped = int((~keep).sum())
    if skipped:
        log.warning("simulated log of %s: %d of %d queries have no observed score and are left "
                    "out (nothing to reveal)", data.name, skipped, data.n_queries)
        rows = np.flatnonzero(keep)
        data, p, mass = data.subset(rows), p[rows], mass[rows]
    a, prop = draw(p / mass[:, None], np.random.default_rng(seed))
    out = log_from_choices(data, a, prop)
    out.meta["unobserved_queries_skipped"] = skipped
    return out, a


def simulated_train_log(train: RoutingData, spec: str, seed: int = 0) -> RoutingData:
    """A log of ``train`` under the logging policy ``spec`` (``uniform`` or
    ``epsilon-greedy:E``; ``router:NAME`` needs the ``bandit`` protocol, which fits it).
    Each query reveals one of its observed LLMs (see :func:`simulate_log`: unobserved cells
    are never drawn, a query with no observed score is left out and counted in ``meta``).

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> log = simulated_train_log(make_synthetic(30, 3, seed=0), "epsilon-greedy:0.3")
    >>> sorted(set(log.queries["propensity"].round(2)))
    [0.1, 0.8]
    """
    if parse_logging_policy(spec)[0] == "router":
        raise ValueError(f"logging policy {spec!r}: router:NAME logging needs a fitted router "
                         "(the bandit protocol of evaluate); use uniform or epsilon-greedy:E")
    return simulate_log(train, logging_probabilities(train, train, spec, seed), seed)[0]


def log_from_choices(data: RoutingData, a: np.ndarray, p: np.ndarray) -> RoutingData:
    """Logged data revealing column ``a[i]`` of each query, with propensity ``p[i]``."""
    rows = np.arange(data.n_queries)
    scores = np.full(data.scores.shape, np.nan, np.float32)
    scores[rows, a] = data.scores[rows, a]
    costs = None
    if data.costs is not None:
        costs = np.full(data.costs.shape, np.nan, np.float32)
        costs[rows, a] = data.costs[rows, a]
    q = data.queries.copy()
    q["propensity"] = np.asarray(p, dtype=np.float64)
    return RoutingData(q, data.llms, scores, costs, name=f"{data.name} (log)",
                       source=data.source)
