"""Which queries to run on a new LLM: probe selection (batch and adaptive).

Strategies of :func:`select_probes`:

``random``       uniform without replacement;
``stratified``   proportional allocation over task labels (k-means clusters of the query
                 embedding when there are no tasks), random within each stratum;
``informative``  cluster anchors (tinyBenchmarks): k-means with ``k`` clusters on the queries'
                 score profiles over the existing LLMs (observed scores, predictions where
                 unobserved), one query per cluster, the one nearest its centre;
``adaptive``     sequential (:class:`ProbeSession`): the new LLM is treated as a mixture of the
                 existing LLMs; the posterior weight of LLM ``l`` is proportional to
                 ``prod_i N(y_i; p_il, s^2)`` over the answers so far, and the next query is the
                 one where the weighted variance ``sum_l w_l (p_il - pbar_i)^2`` (disagreement of
                 the LLMs it may resemble) is largest.

Reference: Polo et al., "tinyBenchmarks: evaluating LLMs with fewer examples", ICML 2024
(anchor points, IRT); uncertainty sampling (Lewis & Gale, SIGIR 1994).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from recsys_router.data import RoutingData

__all__ = ["select_probes", "ProbeSession", "STRATEGIES", "score_profiles"]

STRATEGIES = ("random", "stratified", "informative", "adaptive")
_NOISE = 0.25  # std of an answer around the LLM it resembles, in the adaptive likelihood


def score_profiles(router, queries: RoutingData) -> np.ndarray:
    """(n_queries, n_llms) matrix of the router's pool on ``queries``: observed scores where
    ``queries`` has them for a pool LLM, the router's predictions elsewhere."""
    pool = list(router.llm_names_)
    blank = RoutingData(queries.queries, pool, np.full((queries.n_queries, len(pool)), np.nan))
    prof = router.predict_scores(blank)
    for j, n in enumerate(pool):
        if n in queries.llm_names:
            col = queries.scores[:, queries.llm_names.index(n)].astype(np.float64)
            prof[:, j] = np.where(np.isnan(col), prof[:, j], col)
    return prof


def _check_k(k, n: int) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if k > n:
        raise ValueError(f"k={k} probes asked but only {n} candidate queries given")
    return int(k)


def _kmeans_labels(x: np.ndarray, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.cluster import KMeans
    km = KMeans(n_clusters=k, n_init=3, random_state=seed).fit(x)
    return km.labels_, km.cluster_centers_


def _stratified(queries: RoutingData, router, k: int, rng, seed: int) -> np.ndarray:
    tasks = queries.tasks
    if tasks is not None and len(set(map(str, tasks))) > 1:
        labels = np.unique(np.asarray(tasks, dtype=str), return_inverse=True)[1]
    else:
        from .heads import router_embed
        emb = router_embed(router, queries)
        if emb is None:
            emb = score_profiles(router, queries)
        labels = _kmeans_labels(emb, min(k, 10, queries.n_queries), seed)[0]
    groups = [np.flatnonzero(labels == g) for g in np.unique(labels)]
    share = np.array([len(g) for g in groups], dtype=np.float64) * k / queries.n_queries
    take = np.floor(share).astype(int)
    for g in np.argsort(-(share - take), kind="stable")[:k - take.sum()]:
        take[g] += 1
    picks = [rng.choice(g, size=t, replace=False) for g, t in zip(groups, take) if t]
    return rng.permutation(np.concatenate(picks))


def _informative(queries: RoutingData, router, k: int, seed: int, prof=None) -> np.ndarray:
    prof = score_profiles(router, queries) if prof is None else prof
    labels, centres = _kmeans_labels(prof, k, seed)
    out = []
    for c in range(k):
        members = np.flatnonzero(labels == c)
        if members.size:
            d = ((prof[members] - centres[c]) ** 2).sum(axis=1)
            out.append(int(members[np.argmin(d)]))
    return np.asarray(out, dtype=np.int64)


def select_probes(router, queries: RoutingData, k: int, strategy: str = "informative", *,
                  seed: int = 0, answer: Callable[[int], float] | None = None,
                  profiles: np.ndarray | None = None) -> np.ndarray:
    """Row indices of ``queries`` to run on a new LLM.

    Parameters
    ----------
    router : Router
        Fitted on the existing pool.
    queries : RoutingData
        Candidate probe queries (scores of pool LLMs, where present, inform ``informative``
        and ``adaptive``).
    k : int
        Number of probes.
    strategy : {"random", "stratified", "informative", "adaptive"}
    seed : int
    answer : callable, optional
        ``adaptive`` only: ``answer(row) -> score`` of the new LLM (e.g. from a simulation);
        interactively, use :class:`ProbeSession`.
    profiles : ndarray, optional
        :func:`score_profiles` of ``router`` on ``queries``, when already computed.

    Returns
    -------
    ndarray of int, shape (k,) (``informative`` may return fewer when clusters coincide)

    Example
    -------
    >>> from recsys_router.registry import make_router
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> d = make_synthetic(80, 3, 2, seed=0)
    >>> r = make_router("best-single").fit(d)
    >>> select_probes(r, d, 5, "random", seed=1).shape
    (5,)
    """
    router._check_fitted()
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown probe strategy {strategy!r}; choose from {', '.join(STRATEGIES)}")
    k = _check_k(k, queries.n_queries)
    rng = np.random.default_rng(seed)
    if strategy == "random":
        return rng.choice(queries.n_queries, size=k, replace=False).astype(np.int64)
    if strategy == "stratified":
        return _stratified(queries, router, k, rng, seed).astype(np.int64)
    if strategy == "informative":
        return _informative(queries, router, k, seed, profiles)
    if answer is None:
        raise ValueError("the adaptive strategy chooses each probe from the answers so far: use "
                         "ProbeSession (next() / record(score)) or pass answer=")
    session = ProbeSession(router, queries, seed=seed, profiles=profiles)
    for _ in range(k):
        session.record(float(answer(session.next())))
    return np.asarray(session.asked, dtype=np.int64)


class ProbeSession:
    """Sequential probe selection for one new LLM (the ``adaptive`` strategy).

    Parameters
    ----------
    router : Router
        Fitted on the existing pool.
    queries : RoutingData
        Candidate probe queries.
    seed : int
        Breaks ties among equally informative queries.
    profiles : ndarray, optional
        :func:`score_profiles` of ``router`` on ``queries``, when already computed.

    Attributes
    ----------
    asked : list of int
        Rows asked so far (in order); ``answers`` their recorded scores.
    weights : ndarray
        Posterior weight of each existing LLM as the one the new LLM resembles.

    Example
    -------
    >>> from recsys_router.registry import make_router
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> d = make_synthetic(80, 3, 2, seed=0)
    >>> s = ProbeSession(make_router("best-single").fit(d), d)
    >>> row = s.next(); s.record(1.0); len(s.asked)
    1
    """

    def __init__(self, router, queries: RoutingData, *, seed: int = 0,
                 profiles: np.ndarray | None = None):
        router._check_fitted()
        self.queries = queries
        self.profiles = score_profiles(router, queries) if profiles is None else \
            np.asarray(profiles, dtype=np.float64)
        if self.profiles.shape != (queries.n_queries, len(router.llm_names_)):
            raise ValueError(f"profiles have shape {self.profiles.shape}, expected "
                             f"{(queries.n_queries, len(router.llm_names_))}")
        self.asked: list[int] = []
        self.answers: list[float] = []
        self._pending: int | None = None
        self._log_w = np.zeros(self.profiles.shape[1])
        self._tie = np.random.default_rng(seed).random(queries.n_queries) * 1e-9

    @property
    def weights(self) -> np.ndarray:
        w = np.exp(self._log_w - self._log_w.max())
        return w / w.sum()

    def next(self) -> int:
        """Row of the next query to run (the same row until :meth:`record` is called)."""
        if self._pending is not None:
            return self._pending
        if len(self.asked) >= self.queries.n_queries:
            raise ValueError("every candidate query has been asked")
        w = self.weights
        mean = self.profiles @ w
        spread = ((self.profiles - mean[:, None]) ** 2) @ w + self._tie
        spread[self.asked] = -np.inf
        self._pending = int(np.argmax(spread))
        return self._pending

    def record(self, score: float) -> None:
        """Record the new LLM's score on the query returned by :meth:`next`."""
        if self._pending is None:
            raise ValueError("call next() before record(score)")
        if isinstance(score, bool) or not isinstance(score, (int, float, np.integer, np.floating)) \
                or not np.isfinite(float(score)):
            raise ValueError(f"score must be a finite number, got {score!r}")
        row, self._pending = self._pending, None
        self.asked.append(row)
        self.answers.append(float(score))
        self._log_w = self._log_w - 0.5 * ((float(score) - self.profiles[row]) / _NOISE) ** 2
