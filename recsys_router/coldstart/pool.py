"""Adding and removing LLMs on a fitted router (item cold start), all or nothing.

:meth:`Router.add_llm <recsys_router.router.Router.add_llm>` and ``remove_llm`` call these.
Routers that declare ``native_add_llm`` place the new LLM in their own learned state
(``_add_llm(name, probes, cost)`` / ``_remove_llm(column)``); every other router keeps its
fitted state untouched and gets a kNN probe head per added LLM
(:mod:`recsys_router.coldstart.heads`), removed LLMs being hidden from its predictions.

Bookkeeping (plain data, exported with the router):

``llm_names_``   the current pool, in column order (added LLMs last);
``core_llms_``   only for non-native routers after a change: the columns the fitted state
                 predicts (the original pool);
``probe_llms_``  only for non-native routers: ``{name: probe head}``;
``llm_info_``    ``{name: provenance}`` of every onboarded LLM (probe count, method, ...).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from recsys_router.data import RoutingData
from recsys_router.policies import fill_unknown_costs

from .heads import fit_probe_head, predict_probe_head
from .probes_input import check_llm_name, probe_data, probe_weights

__all__ = ["add_llm", "remove_llm", "pool_changed", "core_view", "predict_pool", "pool_costs",
           "estimate_cost", "observed_range", "answer_score_range", "score_scale", "outside_range", "scale_text",
           "check_probe_range", "UNKNOWN_RANGE_SCALE", "UNKNOWN_RANGE_HINT"]

#: the scale probe scores are held to when the training scores' range is unknown (an
#: artifact written before its manifest recorded ``score_range``, with no ``--data`` and no
#: ``--score-range``): most routing scores are accuracies or pass rates, and a score off
#: the pool's scale takes all traffic, so an unknown scale is never left unchecked
UNKNOWN_RANGE_SCALE = (0.0, 1.0)
UNKNOWN_RANGE_HINT = ("the router records no training score range (score_range_), so probe "
                      "scores must lie in [0, 1]; if its training scores are on another scale, "
                      "give their range explicitly (router.score_range_ = (LOW, HIGH), or "
                      "serve / onboard --score-range LOW,HIGH for an artifact)")


def pool_changed(router) -> bool:
    """Whether a non-native router's pool differs from its fitted columns."""
    return getattr(router, "core_llms_", None) is not None


def core_view(router, data: RoutingData) -> RoutingData:
    """``data`` re-laid on the fitted columns (missing ones all NaN) for the fitted state."""
    core = list(router.core_llms_)
    idx = {n: j for j, n in enumerate(data.llm_names)}
    s = np.full((data.n_queries, len(core)), np.nan, dtype=np.float32)
    c = None if data.costs is None else np.full_like(s, np.nan)
    for k, n in enumerate(core):
        if n in idx:
            s[:, k] = data.scores[:, idx[n]]
            if c is not None:
                c[:, k] = data.costs[:, idx[n]]
    return RoutingData(data.queries, core, s, c, name=data.name, source=data.source)


def predict_pool(router, data: RoutingData, core_scores: np.ndarray) -> np.ndarray:
    """Pool-ordered scores from the fitted columns' scores plus each probe head."""
    pos = {n: j for j, n in enumerate(router.core_llms_)}
    heads = getattr(router, "probe_llms_", None) or {}
    cols = [predict_probe_head(router, heads[n], data) if n in heads else core_scores[:, pos[n]]
            for n in router.llm_names_]
    return np.stack(cols, axis=1).astype(np.float64)


def pool_costs(router, data: RoutingData, core_costs: np.ndarray, fill: bool = True) -> np.ndarray:
    """Pool-ordered costs: fitted columns' costs, each added LLM's estimated mean cost.

    With ``fill`` (what routing uses), an LLM whose cost is unknown (a fitted one with no
    recorded training cost, or an added one whose cost could not be estimated) gets the
    dearest known cost of its row (:func:`~recsys_router.policies.fill_unknown_costs`),
    never the price of a free LLM; without, it stays NaN.
    """
    pos = {n: j for j, n in enumerate(router.core_llms_)}
    heads = getattr(router, "probe_llms_", None) or {}
    mc = getattr(router, "mean_costs_", None)
    core_known = (np.ones(len(pos), bool) if mc is None
                  else np.isfinite(np.asarray(mc, np.float64)))
    cols, known = [], []
    for n in router.llm_names_:
        if n in heads:
            cols.append(np.full(data.n_queries, float(heads[n]["cost"])))
            known.append(np.isfinite(float(heads[n]["cost"])))
        else:
            cols.append(core_costs[:, pos[n]])
            known.append(bool(core_known[pos[n]]))
    out = np.stack(cols, axis=1).astype(np.float64)
    if not fill:
        return np.where(known, out, np.nan)
    return fill_unknown_costs(out, np.array(known, dtype=bool))


def estimate_cost(router, name: str, probes: RoutingData, price_in, price_out,
                  weights: np.ndarray | None = None) -> float:
    """Mean cost per query of a new LLM: its probe costs (averaged with the probe
    ``weights``, as its score is), else its price scaled like the pool's.

    NaN when the router was fitted without costs. Computed in float64 (a float32 mean of
    large finite costs overflows to infinity).

    Example
    -------
    >>> p = RoutingData(["a", "b"], ["new"], [[1.0], [0.0]], costs=[[1.0], [0.0]])
    >>> estimate_cost(None, "new", p, None, None, np.array([1.5, 0.5]))
    0.75
    """
    if probes.costs is not None:
        return float(np.average(probes.costs[:, 0].astype(np.float64), weights=weights))
    mc = getattr(router, "mean_costs_", None)
    if mc is None or not np.isfinite(np.asarray(mc, np.float64)).any():
        return float("nan")
    prices = [p for p in (price_in, price_out) if p is not None]
    known = getattr(router, "llm_prices_", None)
    if prices and known is not None:
        # mean_costs_ covers the fitted columns (core_llms_ once a non-native router's pool
        # changed), llm_prices_ the current pool: pair them by name
        price_of = dict(zip(router.llm_names_, np.asarray(known, np.float64)))
        cost_names = router.core_llms_ if pool_changed(router) else router.llm_names_
        pairs = [(c, price_of[n]) for n, c in zip(cost_names, np.asarray(mc, np.float64))
                 if n in price_of]
        ratio = np.array([c / pr for c, pr in pairs]) if pairs else np.zeros(0)
        ratio = ratio[np.isfinite(ratio) & (ratio > 0)]
        if ratio.size:
            with np.errstate(over="ignore"):  # huge prices: infinity, refused by add_llm
                return float(np.median(ratio) * np.mean(prices))
    if prices:  # a price alone cannot be put on the pool's cost scale
        raise ValueError(f"the router predicts costs, so {name!r} needs probe costs: its price "
                         "cannot be scaled like the pool's costs because the pool's LLM prices "
                         "are unknown (the training data has none); add a cost column to the "
                         "probe answers")
    raise ValueError(f"the router predicts costs, so {name!r} needs probe costs or a price "
                     "(price_in / price_out, USD per 1M tokens, with pool prices known)")


def observed_range(scores) -> tuple[float, float] | None:
    """``(min, max)`` of the observed (not NaN) cells of a score matrix; None when no cell is
    observed. Reduces the matrix in place (no float64 copy, no mask).

    Example
    -------
    >>> observed_range(np.array([[np.nan, 0.5], [2.0, np.nan]], np.float32))
    (0.5, 2.0)
    """
    s = np.asarray(scores)
    if s.size == 0:
        return None
    lo, hi = np.fmin.reduce(s, axis=None), np.fmax.reduce(s, axis=None)  # NaN only if all are
    return None if np.isnan(lo) else (float(lo), float(hi))


def answer_score_range(router, data=None):
    """The training scores' range a new LLM's probe answers are checked against (through
    :func:`~recsys_router.coldstart.pool.score_scale`): the range the router recorded at fit
    (``score_range_``, set by its fit or, for a loaded artifact, from its manifest's
    ``score_range``), else that of ``data``'s observed scores (artifacts written before the
    range was recorded), else None (unchecked).

    Example
    -------
    >>> class Old: pass
    >>> from recsys_router.data import RoutingData
    >>> answer_score_range(Old(), RoutingData(["a", "b"], ["m"], [[0.0], [1.0]]))
    (0.0, 1.0)
    """
    rng = getattr(router, "score_range_", None)
    if rng is not None:
        return tuple(float(x) for x in rng)
    return observed_range(data.scores) if data is not None else None


def score_scale(score_range) -> tuple[float, float] | None:
    """The scale a new LLM's probe scores must lie on, from the range ``(low, high)`` of the
    scores the router was fitted on (None: unchecked).

    Training scores within [0, 1] (accuracies, pass rates, binary outcomes) give [0, 1];
    others (grades, rewards) give their range widened by its own width on each side, since a
    new LLM may do worse or better than every fitted one. What it refuses is a score off the
    scale (a 7 among 0/1 scores would outrank every fitted LLM on every query).

    Example
    -------
    >>> score_scale((0.0, 1.0)), score_scale((0.2, 0.9)), score_scale((1.5, 10.0))
    ((0.0, 1.0), (0.0, 1.0), (-7.0, 18.5))
    """
    if score_range is None:
        return None
    low, high = (float(x) for x in score_range)
    if 0.0 <= low and high <= 1.0:
        return 0.0, 1.0
    width = high - low if high > low else max(abs(high), 1.0)
    return low - width, high + width


def outside_range(values, score_range) -> np.ndarray:
    """Positions of ``values`` off the scale :func:`score_scale` derives from ``score_range``
    (the training scores' ``(low, high)``; None: none).

    Example
    -------
    >>> outside_range(np.array([0.0, 7.0, 1.0, -1.0, 0.5]), (0.0, 1.0)).tolist()
    [1, 3]
    """
    scale = score_scale(score_range)
    if scale is None:
        return np.zeros(0, dtype=np.int64)
    v = np.asarray(values, dtype=np.float64)
    return np.flatnonzero((v < scale[0]) | (v > scale[1]))


def scale_text(score_range) -> str:
    """How the messages name the scale: ``[0, 1]`` or ``[-7, 18.5] (training scores 1.5-10)``."""
    low, high = score_scale(score_range)
    text = f"[{low:g}, {high:g}]"
    if (low, high) != (0.0, 1.0):
        text += f" (training scores {float(score_range[0]):g}-{float(score_range[1]):g})"
    return text


def check_probe_range(name: str, values, score_range, labels) -> None:
    """Refuse a probe score off the scale of the scores the router was fitted on
    (:func:`score_scale`); ``labels`` name the probes in the message. With no known range
    (None) the scale is :data:`UNKNOWN_RANGE_SCALE`, [0, 1]."""
    unknown = score_range is None
    bad = outside_range(values, UNKNOWN_RANGE_SCALE if unknown else score_range)
    if bad.size:
        i = int(bad[0])
        head = f"probe score {float(values[i]):g} of {name!r} on query {labels[i]} is"
        if unknown:
            raise ValueError(f"{head} outside [0, 1]: {UNKNOWN_RANGE_HINT}")
        raise ValueError(f"{head} off the scale of the router's training scores "
                         f"{scale_text(score_range)}")


def _price(v, what: str):
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
            or not np.isfinite(float(v)) or float(v) < 0:
        raise ValueError(f"{what} must be a finite number >= 0 (USD per 1M tokens), got {v!r}")
    return float(v)


def add_llm(router, name, scores, costs=None, *, price_in=None, price_out=None,
            weights=None, provenance: dict | None = None):
    """Add LLM ``name`` from its probe records; the router is unchanged when anything fails.

    See :meth:`recsys_router.router.Router.add_llm`.
    """
    router._check_fitted()
    name = check_llm_name(name)
    if name in router.llm_names_:
        raise ValueError(f"LLM {name!r} is already in the pool; remove_llm({name!r}) first")
    price_in, price_out = _price(price_in, "price_in"), _price(price_out, "price_out")
    probes = probe_data(name, scores, costs)
    check_probe_range(name, probes.scores[:, 0], getattr(router, "score_range_", None),
                      [f"{q!r} (text {str(t)[:60]!r})" for q, t in
                       zip(probes.query_ids, probes.queries["text"])])
    w = probe_weights(name, probes, weights)
    need = int(getattr(router, "min_probes", 2))
    if probes.n_queries < need:
        raise ValueError(f"{type(router).__name__} needs at least {need} probe records to add "
                         f"{name!r}; got {probes.n_queries}")
    if router.uses_text and not probes.has_text:
        raise ValueError(f"{type(router).__name__} reads query text but the probes of {name!r} "
                         "have no 'text'")
    cost = estimate_cost(router, name, probes, price_in, price_out, w)
    if np.isinf(cost):  # NaN is "unknown"; an infinite mean would break every cost comparison
        raise ValueError(f"the estimated mean cost of {name!r} is not a finite number; its probe "
                         "costs or prices are too large")
    with np.errstate(over="ignore"):
        price = np.mean([p for p in (price_in, price_out) if p is not None]) \
            if (price_in is not None or price_out is not None) else np.nan
    saved = dict(router.__dict__)
    try:
        native = bool(getattr(router, "native_add_llm", False))
        if native:
            router._add_llm(name, probes, cost, w)
            if router.mean_costs_ is not None:
                router.mean_costs_ = np.append(np.asarray(router.mean_costs_, np.float64), cost)
        else:
            if not pool_changed(router):
                router.core_llms_ = list(router.llm_names_)
            head = fit_probe_head(router, probes, w)
            head["cost"] = cost
            router.probe_llms_ = {**(getattr(router, "probe_llms_", None) or {}), name: head}
        if getattr(router, "llm_prices_", None) is not None:
            router.llm_prices_ = np.append(np.asarray(router.llm_prices_, np.float64), price)
        router.llm_names_ = list(router.llm_names_) + [name]
        info = {"origin": "onboarded", "n_probes": int(probes.n_queries),
                "probe_mean": float(np.average(probes.scores[:, 0], weights=w)),
                "weighted": weights is not None,
                "method": type(router).__name__ + (" native" if native else " knn-probes"),
                "price_in": price_in, "price_out": price_out, **(provenance or {})}
        router.llm_info_ = {**(getattr(router, "llm_info_", None) or {}), name: info}
    except BaseException:
        router.__dict__.clear()
        router.__dict__.update(saved)
        raise
    return router


def remove_llm(router, name):
    """Remove LLM ``name`` from the pool (added or fitted); the last one cannot go."""
    router._check_fitted()
    if name not in router.llm_names_:
        raise ValueError(f"unknown LLM {name!r}; the pool is {router.llm_names_}")
    if len(router.llm_names_) == 1:
        raise ValueError(f"cannot remove {name!r}: it is the only LLM in the pool")
    j = router.llm_names_.index(name)
    saved = dict(router.__dict__)
    try:
        if getattr(router, "native_add_llm", False):
            router._remove_llm(j)
            if router.mean_costs_ is not None:
                router.mean_costs_ = np.delete(np.asarray(router.mean_costs_, np.float64), j)
        else:
            if not pool_changed(router):
                router.core_llms_ = list(router.llm_names_)
            heads = dict(getattr(router, "probe_llms_", None) or {})
            heads.pop(name, None)
            router.probe_llms_ = heads
        if getattr(router, "llm_prices_", None) is not None:
            router.llm_prices_ = np.delete(np.asarray(router.llm_prices_, np.float64), j)
        router.llm_names_ = [n for n in router.llm_names_ if n != name]
        info = dict(getattr(router, "llm_info_", None) or {})
        info.pop(name, None)
        router.llm_info_ = info
        if pool_changed(router) and router.llm_names_ == router.core_llms_:
            router.core_llms_, router.probe_llms_ = None, {}
    except BaseException:
        router.__dict__.clear()
        router.__dict__.update(saved)
        raise
    return router


def llm_table(router) -> pd.DataFrame:
    """One row per pool LLM: name, origin (``fit``/``onboarded``) and provenance fields."""
    info = getattr(router, "llm_info_", None) or {}
    rows = [{"name": n, "origin": "fit", **info.get(n, {})} for n in router.llm_names_]
    return pd.DataFrame(rows)
