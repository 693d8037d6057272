"""Held-out metrics recorded in an artifact's manifest at export time."""

from __future__ import annotations

import numpy as np

from ..data import RoutingData
from ..router import Router

__all__ = ["heldout_metrics"]


def heldout_metrics(router: Router, data: RoutingData, prefix: str = "test") -> dict[str, float]:
    """Routing metrics of a fitted router on a labelled split.

    Queries whose scores (and costs, when the data has costs) are all observed count, as
    in RouterEval. The argmax decisions give ``mu_o`` (mean score of the chosen LLM),
    ``v_b`` (share of the best single LLM's score), ``e_p`` (selection entropy, bits) and,
    with costs, ``mean_cost`` of the chosen LLMs; ``aiq`` is RouterBench's area under the
    willingness-to-pay hull of the predictions (true costs needed).

    Parameters
    ----------
    router : Router
        Fitted on the same LLM pool as ``data``.
    data : RoutingData
        Held-out queries with scores.
    prefix : str
        Key prefix (``"val"``, ``"test"``).

    Returns
    -------
    dict
        ``{prefix}/mu_o``, ``{prefix}/v_b``, ``{prefix}/e_p``, ``{prefix}/n_queries`` and,
        with costs, ``{prefix}/mean_cost`` and ``{prefix}/aiq``; empty if no query is complete.

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> from recsys_router.models.baselines.simple import BestSingleRouter
    >>> d = make_synthetic(60, 3, 2, seed=0)
    >>> m = heldout_metrics(BestSingleRouter().fit(d), d)
    >>> round(m["test/mu_o"], 4) == round(float(np.nanmean(d.scores, axis=0).max()), 4)
    True
    """
    from ..metrics.base import complete_rows
    from ..metrics.routerbench import routerbench_metrics
    from ..metrics.routereval import mu_o, selection_entropy, v_b

    ok = complete_rows(data.scores, data.costs)
    if not ok.any():
        return {}
    part = data.subset(np.flatnonzero(ok))
    choice = router.route_indices(part)
    s = part.scores.astype(np.float64)
    out = {f"{prefix}/mu_o": mu_o(s, choice), f"{prefix}/v_b": v_b(s, choice),
           f"{prefix}/e_p": selection_entropy(choice, s.shape[1]),
           f"{prefix}/n_queries": float(part.n_queries)}
    if part.costs is not None:
        c = part.costs.astype(np.float64)
        out[f"{prefix}/mean_cost"] = float(c[np.arange(len(choice)), choice].mean())
        pred_c = router.predict_costs(part)
        if pred_c is not None:
            rb = routerbench_metrics(router.predict_scores(part), np.nan_to_num(pred_c), s, c)
            out[f"{prefix}/aiq"] = float(rb["aiq"])
    return out
