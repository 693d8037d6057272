"""Summary statistics of a :class:`~recsys_router.data.RoutingData`: per-LLM and headline
numbers (``RoutingData.llm_summary`` / ``RoutingData.summary`` / ``RoutingData.mean_costs``).

Kept apart from the data type so that :mod:`recsys_router.data` stays small. The functions
only read a dataset's matrices and tables (this module imports no other project module).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["llm_summary", "data_summary"]


def _nanmean_cols(a: np.ndarray) -> np.ndarray:
    """Column means over the non-NaN cells (NaN for an all-NaN column)."""
    ok = ~np.isnan(a)
    n = ok.sum(axis=0)
    s = np.where(ok, a, 0.0).astype(np.float64).sum(axis=0)
    return np.divide(s, n, out=np.full(a.shape[1], np.nan), where=n > 0)


def llm_summary(data) -> pd.DataFrame:
    """One row per LLM of ``data``: observed count, mean/std score, mean cost, prices, size
    (:meth:`recsys_router.data.RoutingData.llm_summary`).

    Example
    -------
    >>> from recsys_router.data import RoutingData
    >>> llm_summary(RoutingData(["q1", "q2"], ["a"], [[1.0], [0.0]]))["std_score"].tolist()
    [0.5]
    """
    obs = data.observed
    n = obs.sum(axis=0)
    s0 = np.where(obs, data.scores, 0.0).astype(np.float64)
    mean = np.divide(s0.sum(axis=0), n, out=np.full(data.n_llms, np.nan), where=n > 0)
    sq = np.divide((s0 ** 2).sum(axis=0), n, out=np.full(data.n_llms, np.nan), where=n > 0)
    out = pd.DataFrame({"llm": data.llm_names, "n_observed": n, "mean_score": mean,
                        "std_score": np.sqrt(np.maximum(sq - mean ** 2, 0)),
                        "mean_cost": _nanmean_cols(data.costs) if data.costs is not None
                        else np.nan})
    for col in ("input_price", "output_price", "size"):
        out[col] = data.llms[col].to_numpy()
    return out


def data_summary(data) -> dict:
    """Headline numbers of ``data``: counts, density, score range, tasks, splits
    (:meth:`recsys_router.data.RoutingData.summary`).

    Example
    -------
    >>> from recsys_router.data import RoutingData
    >>> data_summary(RoutingData(["q1", "q2"], ["a"], [[1.0], [0.0]]))["binary_scores"]
    True
    """
    obs = data.scores[data.observed]
    tasks = data.queries["task"].dropna()
    splits = data.queries["split"].dropna()
    return {
        "name": data.name, "source": data.source, "n_queries": data.n_queries,
        "n_llms": data.n_llms, "n_observed": int(obs.size), "density": data.density,
        "score_min": float(obs.min()) if obs.size else float("nan"),
        "score_max": float(obs.max()) if obs.size else float("nan"),
        "binary_scores": data.is_binary, "has_costs": data.costs is not None,
        "has_text": data.has_text,
        "tasks": {str(k): int(v) for k, v in tasks.value_counts().sort_index().items()},
        "splits": {str(k): int(v) for k, v in splits.value_counts().sort_index().items()},
        "simulated": bool(data.meta.get("simulated", False)),
    }
