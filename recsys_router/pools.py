"""RouterEval-style candidate pools (Huang et al., 2025, "RouterEval", section 4.2).

Given a query x LLM score matrix and a pool size ``m``, three groups of ``m`` candidate LLMs
are formed from the LLMs whose mean train score qualifies. Two constructions
(``candidate_groups(..., method=)``):

``"routereval"`` (default) follows RouterEval's released code (``select_candidates`` in
``get_router_dataset.py``; where it and the paper differ, the code):

* the LLMs are ranked by mean train score, ascending (ties keep the dataset's LLM order);
  the qualifying ones have ``low < mean <= high`` (default ``0.1 < mean <= 0.9``; the mean
  is taken in float64 of the float32-stored scores, and one within float32's rounding of a
  bound counts as equal to it, as RouterEval's float64 data would have it);
* the region size is ``k = max(floor(frac * N), m)`` with ``N`` *all* the LLMs of the data
  (``frac = 0.2``: ``max(N // 5, m)``);
* ``"all-weak"``: the lowest region is the ``k`` qualifying LLMs starting at the weakest one;
  the group is the window of ``m`` consecutively ranked LLMs in it with the highest oracle
  score; ``"all-strong"``: the same in the highest region, the ``k`` qualifying LLMs ending
  at the strongest one. Windows are scanned weakest first and the first maximum wins;
* ``"strong-to-weak"``: the ascending qualifying list is cut into ``m`` consecutive blocks
  (the first ``len % m``, i.e. the weakest, one LLM larger) and the best of ``draws`` (1000)
  random draws of one LLM per block is kept (first maximum wins). The draws come from
  ``np.random.default_rng([seed, 2, m])``: a ``(draws, m)`` matrix of offsets
  ``rng.integers(0, block_sizes, size=(draws, m))``.

Where the released code misbehaves this raises a one-line :class:`DataValidationError`
instead: fewer than ``m`` qualifying LLMs (every group), and, for all-strong / all-weak, a
region larger than the qualifying list (``k > n``: the released code's region would take
LLMs above ``high`` into all-weak or at or below ``low`` into all-strong, or wrap around).

``"oracle-best"`` keeps this package's earlier construction: the qualifying LLMs have
``low <= mean <= high``; all-strong / all-weak take ``m`` LLMs from the top / bottom
``max(ceil(frac * n), m)`` of the ``n`` qualifying LLMs, strong-to-weak one from each of ``m``
equal consecutive blocks, and within those regions the *combination* with the best oracle
score is searched (exhaustively, or greedily with a swap search; see
:mod:`recsys_router.pool_search`), ties broken by the seeded generator.

The oracle score is the mean over train queries of the best score among the chosen LLMs;
unobserved cells count as 0 (means are over the observed cells). Oracle values within
``1e-12`` of each other count as equal.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .data import RoutingData
from .errors import DataValidationError
from .pool_oracles import draw_oracles, window_oracles
from .pool_search import best_combination

__all__ = ["candidate_groups", "oracle_score", "qualified_llms", "range_size", "region_size",
           "region_problem", "GROUPS", "METHODS"]

GROUPS = ("all-strong", "all-weak", "strong-to-weak")
#: candidate-group constructions: RouterEval's released code, or the best-combination search
METHODS = ("routereval", "oracle-best")
_TOL = 1e-12
#: float32's unit round-off (2**-24): scores are stored as float32, so a stored score, and the
#: float64 mean of stored scores, can sit this far (relative) from the value the data meant
_F32_ROUNDING = float(np.finfo(np.float32).eps) / 2


def oracle_score(data: RoutingData, llms: Sequence[str]) -> float:
    """Mean over queries of the best score among ``llms`` (unobserved cells count as 0).

    Example
    -------
    >>> d = RoutingData(["q1", "q2"], ["a", "b"], [[1, 0], [0, 0.5]])
    >>> oracle_score(d, ["a", "b"])
    0.75
    """
    s = np.nan_to_num(data.scores[:, data.llm_index(llms)], nan=0.0).astype(np.float64)
    return float(s.max(axis=1).mean())


def _check_method(method: str) -> str:
    if method not in METHODS:
        raise ValueError(f"group method must be one of {', '.join(METHODS)}, got {method!r}")
    return method


def _ranked(train: RoutingData, low: float, high: float, method: str) -> np.ndarray:
    """Qualifying column positions: weakest first for ``"routereval"`` (its ascending sort),
    strongest first for ``"oracle-best"`` (as it always was); stable, so ties keep the
    dataset's LLM order."""
    obs = train.observed
    n = obs.sum(axis=0)
    total = np.where(obs, train.scores.astype(np.float64), 0.0).sum(axis=0)
    mean = np.divide(total, n, out=np.full(train.n_llms, np.nan), where=n > 0)
    tol_low, tol_high = _bound_tolerance(low), _bound_tolerance(high)
    above = mean > low + tol_low if method == "routereval" else mean >= low - tol_low
    ok = np.flatnonzero(above & (mean <= high + tol_high))
    sign = 1.0 if method == "routereval" else -1.0
    return ok[np.argsort(sign * mean[ok], kind="stable")]


def _bound_tolerance(bound: float) -> float:
    """How close (float64) a mean of float32-stored scores must be to a qualifying bound to
    count as equal to it: float32's rounding of a value the size of the bound (at least
    1e-12). An LLM scoring 0.1 on every query has the float64 mean 0.10000000149 of its
    stored scores, which RouterEval's float64 rule (``0.1 < mean``) leaves out; so must this.

    Example
    -------
    >>> 0.9000000059604645 <= 0.9 + _bound_tolerance(0.9)     # mean of 0.85f and 0.95f
    True
    >>> 0.10000000149011612 > 0.1 + _bound_tolerance(0.1)     # mean of 0.1f everywhere
    False
    """
    return max(_TOL, _F32_ROUNDING * abs(float(bound)))


def _means(train: RoutingData, cols: np.ndarray) -> np.ndarray:
    sub = train.scores[:, cols]
    return np.nanmean(sub, axis=0) if len(cols) else np.zeros(0)


def qualified_llms(data: RoutingData, *, low: float = 0.1, high: float = 0.9,
                   train_split: str | None = None, method: str = "routereval"
                   ) -> tuple[list[str], np.ndarray]:
    """Qualifying LLMs, strongest first, and their mean train scores.

    ``method="routereval"``: ``low < mean <= high`` (the released code's rule);
    ``"oracle-best"``: ``low <= mean <= high``. The order is the reverse of the ascending,
    stable ranking the groups are built from.
    """
    train = _train_part(data, train_split)
    order = _ranked(train, low, high, _check_method(method))
    if method == "routereval":
        order = order[::-1]
    names = train.llm_names
    return [names[j] for j in order], _means(train, order)


def range_size(frac: float, n: int, m: int = 1) -> int:
    """Oracle-best region size ``max(ceil(frac * n), m)``, robust to float round-off
    (0.2 * 15 -> 3, not 4)."""
    return max(math.ceil(round(frac * n, 9)), int(m))


def region_size(frac: float, n_all: int, m: int) -> int:
    """RouterEval region size ``max(floor(frac * n_all), m)`` (``max(N // 5, m)``)."""
    return max(math.floor(round(frac * n_all, 9)), int(m))


def region_problem(data: RoutingData, m: int, *, method: str = "routereval", low: float = 0.1,
                   high: float = 0.9, frac: float = 0.2) -> str | None:
    """Why the all-strong / all-weak groups of size ``m`` cannot be formed on ``data`` (its
    train part), or None. Fewer than ``m`` qualifying LLMs is not reported here (no group can
    be formed then; :func:`candidate_groups` raises)."""
    n = len(_ranked(data, low, high, _check_method(method)))
    return _region_problem(n, data.n_llms, m, method, low, high, frac)


def _region_problem(n: int, n_all: int, m: int, method: str, low: float, high: float,
                    frac: float) -> str | None:
    if method == "oracle-best" or n < m:
        return None
    k = region_size(frac, n_all, m)
    if k <= n:
        return None
    return (f"the all-strong/all-weak region of max(floor({frac:g} x {n_all} LLMs), m={m}) "
            f"= {k} LLMs is larger than the {n} qualifying LLMs (mean train score in "
            f"({low:g}, {high:g}]); RouterEval's code would reach outside them")


def candidate_groups(data: RoutingData, m: int, *, method: str = "routereval", seed: int = 0,
                     train_split: str | None = None, exact_limit: int = 100_000,
                     beam_width: int = 1, low: float = 0.1, high: float = 0.9,
                     frac: float = 0.2, draws: int = 1000,
                     groups: Sequence[str] = GROUPS) -> dict[str, list[str]]:
    """Build RouterEval candidate groups of ``m`` LLMs each (see the module docstring).

    Parameters
    ----------
    data : RoutingData
        Scores used for ranking and for the oracle (restricted to ``train_split``).
    m : int
        Candidates per group (RouterEval uses 3, 5 and 10).
    method : {"routereval", "oracle-best"}
        RouterEval's released construction (consecutive windows, best of ``draws`` random
        draws; default) or the search for the best combination within the same kind of
        regions.
    seed : int
        Seeds each group's own generator, ``np.random.default_rng([seed, group, m])``
        (``group`` its index in :data:`GROUPS`), so a group's pool is the same whichever
        other groups are asked for: the strong-to-weak draws (``"routereval"``) or the
        tie-breaks between combinations of equal oracle score (``"oracle-best"``).
    train_split : str, optional
        Value of the queries' ``split`` column to use (e.g. ``"train"``); default all queries.
    exact_limit, beam_width : int
        ``"oracle-best"`` only: exhaustive search when a group has at most ``exact_limit``
        combinations, else greedy (keeping ``beam_width`` partial groups per step), then a
        1-swap local search.
    low, high : float
        Qualifying mean train scores: ``(low, high]`` (``"routereval"``) or ``[low, high]``.
    frac : float
        Region share: ``max(floor(frac * N), m)`` of all ``N`` LLMs (``"routereval"``) or
        ``max(ceil(frac * n), m)`` of the ``n`` qualifying LLMs (``"oracle-best"``).
    draws : int
        ``"routereval"`` strong-to-weak: random draws compared (RouterEval: 1000).
    groups : sequence of str
        Which of ``"all-strong"``, ``"all-weak"``, ``"strong-to-weak"`` to build.

    Returns
    -------
    dict
        Group name -> list of ``m`` LLM names, strongest first (for strong-to-weak with
        ``"oracle-best"``: block order, block 1 the strongest; the same order).

    Raises
    ------
    DataValidationError
        Fewer than ``m`` qualifying LLMs, or (``"routereval"``) an all-strong/all-weak region
        larger than the qualifying list (:func:`region_problem`).

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> g = candidate_groups(make_synthetic(200, 30, seed=0), 3)
    >>> sorted(g), [len(v) for v in g.values()]
    (['all-strong', 'all-weak', 'strong-to-weak'], [3, 3, 3])
    """
    m = int(m)
    _check_method(method)
    if m < 1:
        raise ValueError(f"m must be >= 1, got {m}")
    if not 0 < frac <= 1:
        raise ValueError(f"frac must be in (0, 1], got {frac}")
    if int(draws) < 1:
        raise ValueError(f"draws must be >= 1, got {draws}")
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        raise ValueError(f"unknown group(s) {unknown}; valid: {list(GROUPS)}")
    train = _train_part(data, train_split)
    order = _ranked(train, low, high, method)
    n = len(order)
    src = data.source or data.name
    if n < m:
        rng_txt = f"({low:g}, {high:g}]" if method == "routereval" else f"[{low:g}, {high:g}]"
        raise DataValidationError(f"only {n} of {data.n_llms} LLMs have a mean train score in "
                                  f"{rng_txt}; need at least m={m}", source=src)
    if {"all-strong", "all-weak"} & set(groups):
        problem = _region_problem(n, train.n_llms, m, method, low, high, frac)
        if problem:
            raise DataValidationError(problem, source=src)
    s = np.nan_to_num(train.scores[:, order], nan=0.0)
    names = train.llm_names
    out: dict[str, list[str]] = {}
    for g in groups:
        rng = np.random.default_rng([int(seed), GROUPS.index(g), m])
        if method == "routereval":
            chosen = _routereval_group(s, g, m,
                                       region_size(frac, train.n_llms, m), rng, int(draws))
            chosen = sorted(chosen, reverse=True)      # weakest-first positions: reversed
        else:
            chosen = sorted(_oracle_best_group(s.astype(np.float32), g, m,
                                               range_size(frac, n, m), rng, exact_limit,
                                               beam_width))
        out[g] = [names[order[c]] for c in chosen]     # strongest first
    return out


def _oracle_best_group(s, g, m, k, rng, exact_limit, beam_width) -> list[int]:
    """Positions (in ``s``, strongest first) of the best combination in ``g``'s region."""
    n = s.shape[1]
    if g == "all-strong":
        blocks = [np.arange(k)]
    elif g == "all-weak":
        blocks = [np.arange(n - k, n)]
    else:
        blocks = np.array_split(np.arange(n), m)
    return best_combination(s, blocks, m, rng, exact_limit, beam_width)


def _routereval_group(s, g, m, k, rng, draws) -> list[int]:
    n = s.shape[1]
    if g != "strong-to-weak":
        lo = 0 if g == "all-weak" else n - k
        start = lo + _first_max(window_oracles(s[:, lo:lo + k], m))
        return list(range(start, start + m))
    blocks = np.array_split(np.arange(n), m)
    sizes = np.array([len(b) for b in blocks])
    starts = np.array([b[0] for b in blocks])
    idx = starts + rng.integers(0, sizes, size=(draws, m))
    return idx[_first_max(draw_oracles(s, idx))].tolist()


def _first_max(values: np.ndarray) -> int:
    """First index whose value is the maximum (within round-off)."""
    return int(np.flatnonzero(values >= values.max() - _TOL)[0])


def _train_part(data: RoutingData, train_split: str | None) -> RoutingData:
    if train_split is None:
        return data
    split = data.queries["split"]
    mask = (split.astype(str) == str(train_split)).to_numpy() & split.notna().to_numpy()
    if not mask.any():
        vals = sorted(set(split.dropna().astype(str)))
        raise DataValidationError(f"no query has split {train_split!r}; split values present: "
                                  f"{vals}", source=data.source or data.name, column="split")
    return data.subset(mask)
