"""RouterEval's model-level scaling-up experiment (its figure 2).

For each pool size ``m`` and each ``p``, draw random candidate subsets of ``m`` LLMs and
average, over subsets, the closed-form expected test score of ``r_o(p)`` (the oracle with
probability ``p``, a uniformly random candidate otherwise;
:func:`recsys_router.metrics.routereval.expected_ro_mean`). With a capable router
(large ``p``) the score rises with ``m``; with a weak one it does not.

Reference: Huang et al., "RouterEval: A Comprehensive Benchmark for Routing LLMs to
Explore Model-level Scaling Up in LLMs", arXiv:2503.10657, section 3 and figure 2.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from ..data import RoutingData
from ..metrics.routereval import expected_ro_mean

__all__ = ["scaling_curve", "pool_sizes", "run_scaling", "SCALING_COLUMNS"]

SCALING_COLUMNS = ["m", "p", "mean_score", "std_score", "n_subsets", "n_queries_mean"]


def pool_sizes(max_m: int, grid: str = "linear", n_points: int = 20) -> list[int]:
    """Pool sizes ``1..max_m`` (``grid="linear"``) or a log grid of about ``n_points`` sizes.

    Example
    -------
    >>> pool_sizes(5)
    [1, 2, 3, 4, 5]
    >>> pool_sizes(1000, "log", 4)
    [1, 10, 100, 1000]
    """
    if max_m < 1:
        raise ValueError(f"max_m must be >= 1, got {max_m}")
    if grid == "linear":
        return list(range(1, max_m + 1))
    if grid == "log":
        return sorted({int(round(x)) for x in np.geomspace(1, max_m, n_points)})
    raise ValueError(f"grid must be 'linear' or 'log', got {grid!r}")


def scaling_curve(data: RoutingData, p_values: Sequence[float], sizes: Sequence[int], *,
                  subsets: int = 100, seed: int = 0, return_subsets: bool = False):
    """Mean expected test score of ``r_o(p)`` per pool size, over random candidate subsets.

    Parameters
    ----------
    data : RoutingData
        Test queries (scores only are used).
    p_values : sequence of float
        Oracle probabilities in [0, 1].
    sizes : sequence of int
        Pool sizes ``m`` (each <= ``data.n_llms``).
    subsets : int
        Random subsets drawn per ``m`` (the same subsets serve every ``p``). When ``m``
        equals the number of LLMs a single subset (the whole pool) is used.
    seed : int
    return_subsets : bool
        Also return ``{m: [column indices of each subset]}``.

    Returns
    -------
    pandas.DataFrame, or (DataFrame, dict) with ``return_subsets``
        :data:`SCALING_COLUMNS`: per (m, p) the mean and standard deviation over subsets,
        the number of subsets and the mean number of queries scored (queries with every
        candidate observed).

    Example
    -------
    >>> d = RoutingData(["a", "b"], ["x", "y"], [[1, 0], [0, 0]])
    >>> t = scaling_curve(d, [0.0, 1.0], [2], subsets=3)
    >>> t["mean_score"].tolist()
    [0.25, 0.5]
    """
    ps = [float(p) for p in p_values]
    bad = [p for p in ps if not 0.0 <= p <= 1.0]
    if bad or not ps:
        raise ValueError(f"p values must be in [0, 1], got {list(p_values)}")
    if subsets < 1:
        raise ValueError(f"subsets must be >= 1, got {subsets}")
    n_llms = data.n_llms
    too_big = [m for m in sizes if not 1 <= int(m) <= n_llms]
    if too_big:
        raise ValueError(f"pool sizes {too_big} are outside 1..{n_llms} (the data has {n_llms} LLMs)")
    rng = np.random.default_rng(seed)
    S = data.scores.astype(np.float64)
    obs = ~np.isnan(S)
    rows, drawn = [], {}
    for m in sorted({int(x) for x in sizes}):
        k = 1 if m == n_llms else subsets
        vals = np.full((k, len(ps)), np.nan)
        nq = np.zeros(k)
        for t in range(k):
            cols = np.sort(rng.choice(n_llms, size=m, replace=False))
            drawn.setdefault(m, []).append(cols.tolist())
            keep = obs[:, cols].all(axis=1)
            nq[t] = keep.sum()
            if not keep.any():
                continue
            sub = S[np.ix_(keep, cols)]
            vals[t] = [expected_ro_mean(sub, p) for p in ps]
        if np.isnan(vals).all():
            raise ValueError(f"no query has every LLM of any drawn subset of size {m} observed")
        for j, p in enumerate(ps):
            v = vals[:, j][~np.isnan(vals[:, j])]
            rows.append({"m": m, "p": p, "mean_score": float(v.mean()),
                         "std_score": float(v.std(ddof=1)) if len(v) > 1 else 0.0,
                         "n_subsets": int(len(v)), "n_queries_mean": float(nq.mean())})
    table = pd.DataFrame(rows, columns=SCALING_COLUMNS)
    return (table, drawn) if return_subsets else table


def run_scaling(data: RoutingData, out, *, p_values: Sequence[float], max_m: int | None = None,
                grid: str = "linear", subsets: int = 100, split=None,
                split_column: str | None = None, ood_tasks=None, seed: int = 0) -> pd.DataFrame:
    """RouterEval's scaling-up experiment on the test split of ``data``: writes
    ``scaling.csv``, ``scaling.png`` and ``scaling.json`` into ``out`` (atomically) and
    returns the table (see :func:`scaling_curve`)."""
    from .io import atomic_dir, check_out_dir, write_json  # noqa: PLC0415
    from .plots import plot_scaling  # noqa: PLC0415
    from .splits import make_folds  # noqa: PLC0415
    check_out_dir(out)  # refused before the work, not after it
    test = make_folds(data, split=split, split_column=split_column, ood_tasks=ood_tasks,
                      folds=1, seed=seed)[0].test
    if max_m is not None and not 1 <= max_m <= test.n_llms:
        raise ValueError(f"--max-m must be a whole number from 1 to {test.n_llms} (the data's "
                         f"LLMs; leave it out for all of them), got {max_m}")
    sizes = pool_sizes(test.n_llms if max_m is None else max_m, grid)
    table = scaling_curve(test, p_values, sizes, subsets=subsets, seed=seed)
    simulated = bool(data.meta.get("simulated"))
    with atomic_dir(out) as tmp:
        table.to_csv(tmp / "scaling.csv", index=False)
        plot_scaling(table, tmp / "scaling.png", f"r_o(p) vs pool size: {data.name}"
                     + (" [SIMULATED]" if simulated else ""))
        write_json(tmp / "scaling.json", {"dataset": data.name, "simulated": simulated,
                                          "n_test_queries": test.n_queries, "sizes": sizes,
                                          "p": list(p_values), "subsets": subsets, "seed": seed})
    return table
