"""A loaded artifact routing raw texts: :class:`ExportedRouter`."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from ..data import RoutingData
from ..encoders.cache import text_key
from ..policies import apply_policy
from ..router import Router

__all__ = ["ExportedRouter"]


def _custom_routing(router: Router) -> bool:
    """Whether the router decides with its own ``route_indices`` (not scores + a policy)."""
    return type(router).route_indices is not Router.route_indices


class ExportedRouter:
    """A loaded artifact: the router plus its manifest, routing raw texts.

    ``route`` encodes texts inside (through the router's encoder and its cache) and
    returns, per query, the chosen LLM, every candidate's predicted score and cost, and
    the policy used. Texts get query ids derived from their content, so a text is routed
    the same way whatever else is in its batch (seeded routers draw per query id), and a
    text repeated in one batch is predicted once.
    """

    def __init__(self, router: Router, manifest: dict, path: Path | None = None):
        self.router = router
        self.manifest = manifest
        self.path = path
        #: (LLM names, the request LLM table for them), rebuilt when the pool changes
        self._llms: tuple[list[str], pd.DataFrame] | None = None

    @property
    def llm_names(self) -> list[str]:
        return list(self.router.llm_names_)

    @property
    def default_policy(self) -> tuple[str, float | None]:
        p = self.manifest.get("default_policy") or {"name": "argmax", "value": None}
        return p["name"], p.get("value")

    @property
    def custom_routing(self) -> bool:
        """True when the router chooses through its own ``route_indices`` (e.g. zero)."""
        return _custom_routing(self.router)

    def to_data(self, texts: Sequence[str], *, validate: bool = False) -> RoutingData:
        """Wrap distinct raw texts as an unlabelled RoutingData over this router's LLM pool
        (query ids ``t<sha1 of the text>``).

        By default the request's tables are assembled directly (ids are distinct non-empty
        digests, the LLM table is validated once per artifact), skipping the pandas
        validation of :class:`RoutingData`; ``validate=True`` builds it through the full
        constructor (same result, slower: the reference the fast path is tested against).
        """
        texts = [str(t) for t in texts]
        if not texts:
            raise ValueError("no queries to route")
        ids = ["t" + text_key(t)[:20] for t in texts]
        if len(set(ids)) != len(ids):
            raise ValueError("to_data expects distinct texts (route() removes repeats itself)")
        n, names = len(texts), self.llm_names
        scores = np.full((n, len(names)), np.nan, dtype=np.float32)
        if validate:
            q = pd.DataFrame({"query_id": ids, "text": texts})
            return RoutingData(q, names, scores, name="requests")
        if self._llms is None or self._llms[0] != names:  # validated once per LLM pool
            self._llms = (list(names),
                          RoutingData(["_"], names, np.full((1, len(names)), np.nan)).llms)
        q = pd.DataFrame({"query_id": np.asarray(ids, dtype=object),
                          "text": np.asarray(texts, dtype=object),
                          "task": np.full(n, None, dtype=object),
                          "split": np.full(n, None, dtype=object)})
        return RoutingData._trusted(q, self._llms[1].copy(deep=False), scores, name="requests")

    def _unique(self, texts: Sequence[str]) -> tuple[RoutingData, np.ndarray]:
        texts = [str(t) for t in texts]
        uniq, inverse = np.unique(np.asarray(texts, dtype=object), return_inverse=True)
        return self.to_data(list(uniq)), inverse.ravel()

    def predict(self, queries) -> tuple[np.ndarray, np.ndarray | None, RoutingData]:
        """Predicted scores and costs, shape (n, n_llms), of raw texts or a RoutingData.

        Returns ``(scores, costs, data)``; for texts, ``data`` holds the distinct texts and
        the arrays are expanded back to one row per given text.
        """
        if isinstance(queries, RoutingData):
            data, inverse = queries, None
        else:
            data, inverse = self._unique(queries)
        if self.router.uses_ground_truth and np.isnan(data.scores).all():
            raise ValueError(f"{type(self.router).__name__} routes from ground-truth scores; "
                             "give it a RoutingData with scores, not raw texts")
        scores, costs = self.router.predict_scores(data), self.router.predict_costs(data)
        if inverse is not None:
            scores = scores[inverse]
            costs = None if costs is None else costs[inverse]
        return scores, costs, data

    def decide(self, queries, scores: np.ndarray, costs: np.ndarray | None, *,
               wtp: float | None = None, budget: float | None = None,
               candidates: Sequence[str] | None = None) -> tuple[np.ndarray, str, float | None]:
        """Chosen column per query from predictions (the default policy when neither
        ``wtp`` nor ``budget`` is given); returns ``(choices, policy, value)``."""
        if wtp is None and budget is None:
            name, value = self.default_policy
            if name == "wtp":
                wtp = value
            elif name == "budget":
                budget = value
        if wtp is not None and budget is not None:
            raise ValueError("give either wtp or budget, not both")
        mask = self.router.candidate_mask(candidates)
        if self.custom_routing:
            if isinstance(queries, RoutingData):
                choice = self.router.route_indices(queries, wtp=wtp, budget=budget,
                                                   candidates=candidates)
            else:
                data, inverse = self._unique(queries)
                choice = self.router.route_indices(data, wtp=wtp, budget=budget,
                                                   candidates=candidates)[inverse]
            policy = "wtp" if wtp is not None else "budget" if budget is not None else "argmax"
        else:
            choice, policy = apply_policy(scores, costs, wtp=wtp, budget=budget, mask=mask)
        value = wtp if policy == "wtp" else budget if policy == "budget" else None
        return np.asarray(choice), policy, value

    def route(self, queries, *, wtp: float | None = None, budget: float | None = None,
              candidates: Sequence[str] | None = None) -> list[dict]:
        """Route raw texts (or a RoutingData); the artifact's default policy when neither
        ``wtp`` nor ``budget`` is given.

        Returns
        -------
        list of dict
            ``{"llm", "policy", "policy_value", "scores": {llm: s}, "costs": {llm: c}}`` per
            query (``costs`` is None when the router predicts none).

        Example
        -------
        >>> load_router("out/knn").route(["What is 2+2?"], wtp=100.0)[0]["llm"]  # doctest: +SKIP
        'gpt-4'
        """
        scores, costs, _ = self.predict(queries)
        choice, policy, value = self.decide(queries, scores, costs, wtp=wtp, budget=budget,
                                            candidates=candidates)
        return self.results(choice, policy, value, scores, costs, candidates)

    def results(self, choice, policy, value, scores, costs, candidates=None) -> list[dict]:
        """Per-query result dicts (see :meth:`route`)."""
        mask = self.router.candidate_mask(candidates)
        names = self.llm_names
        keep = range(len(names)) if mask is None else np.flatnonzero(mask)
        out = []
        for i, c in enumerate(choice):
            out.append({"llm": names[c], "policy": policy, "policy_value": value,
                        "scores": {names[j]: float(scores[i, j]) for j in keep},
                        "costs": None if costs is None else {names[j]: float(costs[i, j]) for j in keep}})
        return out
