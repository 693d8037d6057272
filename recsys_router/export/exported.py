"""A loaded artifact routing raw texts: :class:`ExportedRouter`."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from ..data import MAX_TASK_CHARS, RoutingData
from ..encoders.cache import text_key
from ..policies import apply_policy
from ..router import Router, custom_routing

__all__ = ["ExportedRouter", "router_uses_tasks", "check_tasks", "check_texts", "MAX_TASK_CHARS"]



def router_uses_tasks(router) -> bool:
    """Whether ``router`` (or a router it wraps, as ``router_``) reads query task labels.

    Example
    -------
    >>> from recsys_router.models.baselines import BestSingleRouter, TaskBestRouter
    >>> router_uses_tasks(TaskBestRouter()), router_uses_tasks(BestSingleRouter())
    (True, False)
    """
    seen = 0
    while router is not None and seen < 16:        # a wrapper chain, never a cycle
        if bool(getattr(router, "uses_tasks", False)):
            return True
        router, seen = getattr(router, "router_", None), seen + 1
    return False


def check_texts(texts) -> list[str]:
    """``texts`` (raw query texts: a list, tuple, 1-d array or Series of strings) as a list.
    A single string is refused (iterating it would route each character), and so is an entry
    that is not a string (None, a number), naming its index.

    Example
    -------
    >>> check_texts(("a", "b"))
    ['a', 'b']
    >>> check_texts("hello")
    Traceback (most recent call last):
    ...
    ValueError: queries: expected a list of texts, got one str; pass ["..."] to route one text
    """
    if isinstance(texts, (str, bytes)):
        raise ValueError(f"queries: expected a list of texts, got one {type(texts).__name__}; "
                         'pass ["..."] to route one text')
    if isinstance(texts, (np.ndarray, pd.Series, pd.Index)) and texts.ndim != 1:
        raise ValueError(f"queries: expected one text per query, got an array of shape "
                         f"{tuple(texts.shape)}")
    try:
        out = list(texts)
    except TypeError:
        raise ValueError(f"queries: expected a list of texts, got {type(texts).__name__}") from None
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise ValueError(f"queries[{i}]: expected a text (str), got {type(t).__name__} "
                             f"{str(t)[:40]!r}")
    return out


def check_tasks(tasks, n: int) -> list[str | None]:
    """``tasks`` (one label per query, None, NaN or "" for none) checked: a list (or 1-d
    array, Series) of ``n`` strings or None, each at most :data:`MAX_TASK_CHARS` characters.
    Returns the labels with "" and NaN turned into None.

    Raises
    ------
    ValueError
        Naming the first bad entry and what was expected.

    Example
    -------
    >>> check_tasks(["math", None, ""], 3)
    ['math', None, None]
    >>> check_tasks(pd.Series(["math", float("nan")]), 2)
    ['math', None]
    """
    if isinstance(tasks, (np.ndarray, pd.Series, pd.Index)):  # a column such as df.task
        if tasks.ndim != 1:
            raise ValueError(f"tasks: expected one task label per query, got an array of shape "
                             f"{tuple(tasks.shape)}")
        tasks = list(tasks)
    if isinstance(tasks, (str, bytes)) or not isinstance(tasks, Sequence):
        raise ValueError(f"tasks: expected a list of task labels, one per query, got "
                         f"{type(tasks).__name__}")
    if len(tasks) != n:
        raise ValueError(f"tasks: {len(tasks)} labels for {n} queries; give one per query")
    out = []
    for i, t in enumerate(tasks):
        if t is not None and not isinstance(t, str) and pd.api.types.is_scalar(t):
            try:  # NaN, pd.NA (a string-dtype column), NaT: pandas' missing value, no task
                t = None if bool(pd.isna(t)) else t
            except (TypeError, ValueError):
                pass
        if t is not None and not isinstance(t, str):
            raise ValueError(f"tasks[{i}]: expected a string or None, got {type(t).__name__}")
        if t is not None and len(t) > MAX_TASK_CHARS:
            raise ValueError(f"tasks[{i}]: {len(t)} characters; the limit is {MAX_TASK_CHARS}")
        out.append(t or None)
    return out


class ExportedRouter:
    """A loaded artifact: the router plus its manifest, routing raw texts.

    ``route`` encodes texts inside (through the router's encoder and its cache) and
    returns, per query, the chosen LLM, every candidate's predicted score and cost, and
    the policy used. Texts get query ids derived from their content, so a text is routed
    the same way whatever else is in its batch (seeded routers draw per query id), and a
    text repeated in one batch is predicted once.

    A router that reads task labels (:attr:`uses_tasks`: task-best, task-residual, graph,
    a safe fallback deciding per task) routes a text by its task too: pass ``tasks=``, one
    label per text (None for none). Without it every text is routed as a query without a
    task (task-best: the best single LLM for all).
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
    def uses_tasks(self) -> bool:
        """Whether routing reads each query's task label (the manifest's ``uses_tasks``;
        for an artifact written before it was recorded, the router's own flag)."""
        recorded = self.manifest.get("uses_tasks")
        return bool(recorded) if recorded is not None else router_uses_tasks(self.router)

    @property
    def custom_routing(self) -> bool:
        """True when the router chooses through its own ``route_indices`` (e.g. zero)."""
        return custom_routing(self.router)

    def to_data(self, texts: Sequence[str], *, tasks: Sequence[str | None] | None = None,
                validate: bool = False) -> RoutingData:
        """Wrap distinct raw texts (distinct (text, task) pairs with ``tasks``) as an
        unlabelled RoutingData over this router's LLM pool (query ids ``t<sha1 of the text>``,
        followed by ``-<sha1 of the task>`` for a text with a task).

        By default the request's tables are assembled directly (ids are distinct non-empty
        digests, the LLM table is validated once per artifact), skipping the pandas
        validation of :class:`RoutingData`; ``validate=True`` builds it through the full
        constructor (same result, slower: the reference the fast path is tested against).
        """
        texts = check_texts(texts)
        if not texts:
            raise ValueError("no queries to route")
        labels = [None] * len(texts) if tasks is None else check_tasks(tasks, len(texts))
        ids = ["t" + text_key(t)[:20] + ("" if k is None else "-" + text_key(k)[:12])
               for t, k in zip(texts, labels)]
        if len(set(ids)) != len(ids):
            raise ValueError("to_data expects distinct texts (route() removes repeats itself)")
        n, names = len(texts), self.llm_names
        scores = np.full((n, len(names)), np.nan, dtype=np.float32)
        if validate:
            q = pd.DataFrame({"query_id": ids, "text": texts, "task": labels})
            return RoutingData(q, names, scores, name="requests")
        if self._llms is None or self._llms[0] != names:  # validated once per LLM pool
            self._llms = (list(names),
                          RoutingData(["_"], names, np.full((1, len(names)), np.nan)).llms)
        q = pd.DataFrame({"query_id": np.asarray(ids, dtype=object),
                          "text": np.asarray(texts, dtype=object),
                          "task": np.array(labels, dtype=object),
                          "split": np.full(n, None, dtype=object)})
        return RoutingData._trusted(q, self._llms[1].copy(deep=False), scores, name="requests")

    def _unique(self, texts: Sequence[str], tasks=None) -> tuple[RoutingData, np.ndarray]:
        texts = check_texts(texts)
        if tasks is None:
            uniq, inverse = np.unique(np.asarray(texts, dtype=object), return_inverse=True)
            return self.to_data(list(uniq)), inverse.ravel()
        labels = check_tasks(tasks, len(texts))
        first: dict[tuple, int] = {}
        inverse = np.array([first.setdefault(p, len(first)) for p in zip(texts, labels)],
                           dtype=np.int64)
        pairs = list(first)
        return (self.to_data([p[0] for p in pairs], tasks=[p[1] for p in pairs]), inverse)

    @staticmethod
    def _no_tasks_for_data(queries, tasks) -> None:
        if tasks is not None and isinstance(queries, RoutingData):
            raise ValueError("tasks= is for raw texts; a RoutingData carries its own 'task' "
                             "column")

    def predict(self, queries, *, tasks: Sequence[str | None] | None = None
                ) -> tuple[np.ndarray, np.ndarray | None, RoutingData]:
        """Predicted scores and costs, shape (n, n_llms), of raw texts or a RoutingData.

        ``tasks``: one task label per text (None for none), read by routers that use tasks.
        Returns ``(scores, costs, data)``; for texts, ``data`` holds the distinct texts (the
        distinct (text, task) pairs) and the arrays are expanded back to one row per text.
        """
        self._no_tasks_for_data(queries, tasks)
        if isinstance(queries, RoutingData):
            data, inverse = queries, None
        else:
            data, inverse = self._unique(queries, tasks)
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
               candidates: Sequence[str] | None = None,
               tasks: Sequence[str | None] | None = None,
               argmax: bool = False) -> tuple[np.ndarray, str, float | None]:
        """Chosen column per query from predictions (the default policy when neither
        ``wtp`` nor ``budget`` is given, unless ``argmax``: then the best predicted score,
        whatever the default policy, as the proxy's ``router-argmax`` asks); returns
        ``(choices, policy, value)``. ``tasks`` as in :meth:`predict` (read by a router with
        its own ``route_indices``)."""
        self._no_tasks_for_data(queries, tasks)
        if argmax and (wtp is not None or budget is not None):
            raise ValueError("argmax takes neither wtp nor budget")
        if wtp is None and budget is None and not argmax:
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
                data, inverse = self._unique(queries, tasks)
                choice = self.router.route_indices(data, wtp=wtp, budget=budget,
                                                   candidates=candidates)[inverse]
            policy = "wtp" if wtp is not None else "budget" if budget is not None else "argmax"
        else:
            choice, policy = apply_policy(scores, costs, wtp=wtp, budget=budget, mask=mask)
        value = wtp if policy == "wtp" else budget if policy == "budget" else None
        return np.asarray(choice), policy, value

    def route(self, queries, *, wtp: float | None = None, budget: float | None = None,
              candidates: Sequence[str] | None = None,
              tasks: Sequence[str | None] | None = None) -> list[dict]:
        """Route raw texts (or a RoutingData); the artifact's default policy when neither
        ``wtp`` nor ``budget`` is given. ``tasks``: one task label per text (None for none)
        for a router that reads them (:attr:`uses_tasks`); a RoutingData has its own.

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
        scores, costs, _ = self.predict(queries, tasks=tasks)
        choice, policy, value = self.decide(queries, scores, costs, wtp=wtp, budget=budget,
                                            candidates=candidates, tasks=tasks)
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
