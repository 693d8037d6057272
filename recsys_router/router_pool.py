"""The LLM-pool methods of every :class:`~recsys_router.router.Router`: onboarding a new LLM from
a few probe scores, removing one, and each pool LLM's mean cost.

:class:`LLMPoolMixin` is a base of :class:`~recsys_router.router.Router`; its methods are thin
entries into :mod:`recsys_router.coldstart.pool`, which holds the pool bookkeeping. Kept apart
from the router contract so that :mod:`recsys_router.router` stays small.
"""

from __future__ import annotations

import numpy as np

from .coldstart.pool import add_llm, pool_changed, pool_costs, remove_llm
from .data import RoutingData

__all__ = ["LLMPoolMixin"]


class LLMPoolMixin:
    """``add_llm``, ``remove_llm`` and ``llm_mean_costs`` of a fitted router (reads its
    ``mean_costs_``, ``core_llms_`` and pool state; ``_check_fitted`` comes from
    :class:`~recsys_router.router.Router`)."""

    def add_llm(self, name: str, scores, costs=None, *, price_in: float | None = None,
                price_out: float | None = None, weights=None,
                provenance: dict | None = None) -> "Router":
        """Add a new LLM to the fitted router from its scores on a few probe queries.

        Routers with ``native_add_llm`` fit the new LLM's parameters with everything else
        frozen; the others predict it by kNN over its probes. The other LLMs' predictions do
        not change, except on two routers whose predictions read the whole pool: ``graph``
        (the new LLM node and probe edges join the message passing, which moves every LLM's
        predictions a little) and ``cascade`` (its scores are the one-hot end of a cost
        chain, which the new LLM joins); removing the added LLM restores them exactly. All
        or nothing: on any error the router is left exactly as it was.

        Parameters
        ----------
        name : str
            The new LLM (not already in the pool).
        scores : mapping, RoutingData or DataFrame
            ``{query text: score}``, a RoutingData with a column ``name`` or a long table;
            see :func:`recsys_router.coldstart.probes_input.probe_data`.
        costs : mapping, optional
            ``{query text: cost}`` of the probes (else estimated from the price).
        price_in, price_out : float, optional
            USD per 1M tokens; used to estimate the cost when no probe costs are given.
        weights : sequence of float, optional
            One weight >= 0 per probe (in probe order): how many candidate queries each
            probe stands for, e.g. the cluster shares returned by
            ``select_probes(..., return_weights=True)``. Every fit weights each probe's term
            by it (normalised to mean 1), so the new LLM's estimated mean is that of the
            candidates, not of an unevenly chosen probe set. Default: equal weights.
        provenance : dict, optional
            Extra plain fields recorded in ``llm_info_[name]`` (e.g. probe strategy).

        Raises
        ------
        ValueError
            Among others, a probe score off the scale of the scores the router was fitted on
            in this process (``score_range_``, see
            :func:`~recsys_router.coldstart.pool.score_scale`: [0, 1] for scores within it,
            else their range widened by its width each side; e.g. a 7 among 0/1 scores would
            outrank every fitted LLM everywhere). A router loaded from an artifact takes it
            from the manifest (``score_range``); for artifacts written before it was recorded,
            ``recsys-router onboard`` checks against ``--data``'s scores.

        Returns
        -------
        Router
            ``self``, with ``name`` as the last LLM.

        Example
        -------
        >>> from recsys_router.registry import make_router
        >>> from recsys_router.datasets.synthetic import make_synthetic
        >>> d = make_synthetic(60, 3, 2, seed=0)
        >>> r = make_router("best-single").fit(d)
        >>> r.add_llm("new", {"q a": 1.0, "q b": 0.5}, {"q a": 0.1, "q b": 0.1}).llm_names_[-1]
        'new'
        """
        return add_llm(self, name, scores, costs, price_in=price_in, price_out=price_out,
                       weights=weights, provenance=provenance)

    def remove_llm(self, name: str) -> "Router":
        """Remove an LLM (added or fitted) from the pool; the other LLMs' predictions do not
        change (except on ``graph`` and ``cascade``, whose predictions read the whole pool:
        see :meth:`add_llm`), and removing an added LLM restores the router's previous
        decisions exactly (on every router).

        Returns
        -------
        Router
            ``self``.

        Example
        -------
        >>> from recsys_router.registry import make_router
        >>> from recsys_router.datasets.synthetic import make_synthetic
        >>> d = make_synthetic(60, 3, 2, seed=0)
        >>> make_router("best-single").fit(d).remove_llm(d.llm_names[0]).llm_names_ == d.llm_names[1:]
        True
        """
        return remove_llm(self, name)

    def llm_mean_costs(self) -> np.ndarray | None:
        """Mean cost per query of each pool LLM (added ones: their estimate; NaN: unknown),
        or None."""
        self._check_fitted()
        if self.mean_costs_ is None:
            return None
        if not pool_changed(self):
            return np.asarray(self.mean_costs_, dtype=np.float64)
        one = RoutingData(["q"], list(self.core_llms_), np.full((1, len(self.core_llms_)), np.nan))
        return pool_costs(self, one, np.asarray(self.mean_costs_, np.float64)[None, :],
                          fill=False)[0]
