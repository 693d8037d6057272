"""Which queries to run on a new LLM: probe selection (batch and adaptive).

Strategies of :func:`select_probes`:

``random``       uniform without replacement;
``stratified``   proportional allocation over strata, random within each stratum. The strata
                 are the task labels; without them (or with one), ``min(k, 10)`` k-means
                 clusters of the router's query embedding, or of the queries' score
                 profiles (:func:`score_profiles`) for a router that reads no text. A
                 stratum's share of ``k`` is rounded down or up at random under the seed,
                 up with probability equal to its fractional part (see :func:`_allocate`):
                 with more strata than probes, which strata get one is drawn, not taken
                 in label order;
``informative``  cluster anchors (tinyBenchmarks): k-means with ``k`` clusters on the queries'
                 score profiles over the existing LLMs (observed scores, predictions where
                 unobserved), one query per cluster, the one nearest its centre; its weight is
                 the cluster's size (so a weighted fit estimates the mean over all candidates);
                 when k-means leaves clusters empty (fewer distinct profiles than ``k``) the
                 largest clusters give further members, so there are always ``k`` probes;
``adaptive``     sequential (:class:`ProbeSession`): the new LLM is treated as one of the
                 existing LLMs, unknown which; the posterior weight of LLM ``l`` is
                 ``w_l ~ prod_i N(y_i; p_il, s^2)`` over the answers so far, and the next query
                 is the one whose answer is expected to shrink most the posterior variance of
                 the new LLM's mean score over the candidates, ``V(w) = sum_l w_l (m_l - mbar)^2``
                 with ``m_l = mean_i p_il``: ``argmin_i sum_l w_l V(w * N(p_il; p_i., s^2))``
                 (the answer on query ``i`` simulated as each LLM's ``p_il`` in turn).

Probe weights (``return_weights=True``, for ``Router.add_llm(..., weights=)``): the number of
candidates each probe stands for, normalised to mean 1: cluster size / probes in the cluster
for ``informative``; for ``stratified``, stratum size / probes in the stratum when its share is
at least one probe, and candidates / ``k`` (its size / its share, the inverse of its chance of
being probed) when its share is below one; equal for ``random`` and ``adaptive`` (whose probes
are fitted by the model, not averaged). The ``stratified`` weighted mean of the probes' scores
is then unbiased over seeds when every share is at least one or every share below one, and a
ratio estimate (nearly unbiased) when both kinds of strata are present.

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


def _allocate(sizes: np.ndarray, k: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Probes per stratum and the number of candidates each of its probes stands for.

    Stratum ``g`` of ``n_g`` candidates (``N`` in all) has the share ``s_g = k n_g / N``; it
    gets ``floor(s_g)`` probes plus one with probability ``s_g - floor(s_g)`` exactly
    (systematic sampling of the remainders, in exact integers, over the strata in a seeded
    random order), so ``k`` probes in all and ``E[probes_g] = s_g``: every candidate is
    probed with probability ``k / N`` and no stratum is favoured by its label. A probe of a
    stratum with ``floor(s_g) >= 1`` weighs ``n_g / probes_g``; one of a stratum with
    ``s_g < 1`` (probed or not, by chance) weighs ``n_g / s_g = N / k``. Each stratum's
    weighted sum of scores is then an unbiased estimate of its total.

    Example
    -------
    >>> take, w = _allocate(np.array([6, 2]), 4, np.random.default_rng(0))
    >>> take.tolist(), w.tolist()
    ([3, 1], [2.0, 2.0])
    """
    total = int(sizes.sum())
    whole, part = np.divmod(sizes.astype(np.int64) * k, total)  # s_g = whole + part / total
    extra = np.zeros(len(sizes), dtype=np.int64)
    slots = int(part.sum()) // total                              # k - sum(whole)
    if slots:
        order = rng.permutation(len(sizes))
        ends = np.cumsum(part[order])                             # stratum g owns [end - part, end)
        points = int(rng.integers(total)) + total * np.arange(slots)
        extra[order[np.searchsorted(ends, points, side="right")]] = 1
    take = whole + extra
    weight = np.where(whole >= 1, sizes / np.maximum(take, 1), total / k)
    return take, weight


def _stratified(queries: RoutingData, router, k: int, rng, seed: int) -> tuple[np.ndarray, np.ndarray]:
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
    take, weight = _allocate(np.array([len(g) for g in groups]), k, rng)
    picks = [rng.choice(g, size=t, replace=False) for g, t in zip(groups, take) if t]
    weights = [np.full(t, wt) for wt, t in zip(weight, take) if t]
    order = rng.permutation(int(take.sum()))
    return np.concatenate(picks)[order], np.concatenate(weights)[order]


def _informative(queries: RoutingData, router, k: int, seed: int,
                 prof=None) -> tuple[np.ndarray, np.ndarray]:
    """``k`` cluster anchors and the number of candidates each stands for.

    Each non-empty k-means cluster gives its member nearest the centre. When k-means leaves
    clusters empty (fewer distinct score profiles than ``k``, e.g. binary scores of a small
    pool), the missing probes are further members of the clusters whose probes stand for
    the most candidates (size / probes taken), the nearest the centre first (ties in seeded
    random order); each probe of a cluster of size ``S`` given ``t`` probes weighs ``S / t``,
    so the weights still sum to the number of candidates.
    """
    prof = score_profiles(router, queries) if prof is None else prof
    labels, centres = _kmeans_labels(prof, k, seed)
    rng = np.random.default_rng(seed)
    clusters = []  # members of each non-empty cluster, the anchor first
    for c in range(k):
        members = np.flatnonzero(labels == c)
        if members.size:
            d = ((prof[members] - centres[c]) ** 2).sum(axis=1)
            first = int(np.argmin(d))
            rest = np.delete(np.arange(members.size), first)
            rest = rest[np.lexsort((rng.random(rest.size), d[rest]))]
            clusters.append(members[np.concatenate([[first], rest])])
    sizes = np.array([m.size for m in clusters], dtype=np.float64)
    take = np.ones(len(clusters), dtype=np.int64)
    for _ in range(k - len(clusters)):  # k <= candidates, so room is always left
        share = np.where(take < sizes, sizes / take, -np.inf)
        take[int(np.argmax(share))] += 1
    rows = np.concatenate([m[:t] for m, t in zip(clusters, take)])
    weights = np.concatenate([np.full(t, m.size / t) for m, t in zip(clusters, take)])
    return rows.astype(np.int64), weights


def _mean_one(w: np.ndarray) -> np.ndarray:
    w = np.asarray(w, dtype=np.float64)
    return w * (len(w) / w.sum())


def select_probes(router, queries: RoutingData, k: int, strategy: str = "informative", *,
                  seed: int = 0, answer: Callable[[int], float] | None = None,
                  profiles: np.ndarray | None = None, return_weights: bool = False):
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
    return_weights : bool
        Also return each probe's weight (mean 1; see the module docstring), to pass to
        ``Router.add_llm(..., weights=)``.

    Returns
    -------
    ndarray of int, shape (k,)
        The rows; with ``return_weights``, the tuple ``(rows, weights)``.

    Example
    -------
    >>> from recsys_router.registry import make_router
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> d = make_synthetic(80, 3, 2, seed=0)
    >>> r = make_router("best-single").fit(d)
    >>> select_probes(r, d, 5, "random", seed=1).shape
    (5,)
    >>> rows, w = select_probes(r, d, 5, "informative", return_weights=True)
    >>> bool(np.isclose(w.mean(), 1.0))
    True
    """
    router._check_fitted()
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown probe strategy {strategy!r}; choose from {', '.join(STRATEGIES)}")
    k = _check_k(k, queries.n_queries)
    rng = np.random.default_rng(seed)
    if strategy == "random":
        rows, w = rng.choice(queries.n_queries, size=k, replace=False), np.ones(k)
    elif strategy == "stratified":
        rows, w = _stratified(queries, router, k, rng, seed)
    elif strategy == "informative":
        rows, w = _informative(queries, router, k, seed, profiles)
    else:
        rows = _adaptive(router, queries, k, seed, answer, profiles)
        w = np.ones(len(rows))
    rows = np.asarray(rows, dtype=np.int64)
    return (rows, _mean_one(w)) if return_weights else rows


def _adaptive(router, queries, k, seed, answer, profiles) -> np.ndarray:
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
        self._means = self.profiles.mean(axis=0)             # each LLM's mean over the candidates
        self._tie = np.random.default_rng(seed).random(queries.n_queries) * 1e-9

    @property
    def weights(self) -> np.ndarray:
        w = np.exp(self._log_w - self._log_w.max())
        return w / w.sum()

    def next(self) -> int:
        """Row of the next query to run (the same row until :meth:`record` is called): the one
        minimising the expected posterior variance of the new LLM's mean score."""
        if self._pending is not None:
            return self._pending
        if len(self.asked) >= self.queries.n_queries:
            raise ValueError("every candidate query has been asked")
        crit = self.expected_variance() + self._tie
        crit[self.asked] = np.inf
        self._pending = int(np.argmin(crit))
        return self._pending

    def expected_variance(self) -> np.ndarray:
        """(n_queries,) expected posterior variance of the new LLM's mean score after asking
        each query, its answer simulated as each candidate LLM's score (weighted by ``w``)."""
        w = self.weights
        live = np.flatnonzero(w > 1e-8 * w.max())            # LLMs still plausible
        p, wl, m = self.profiles[:, live], w[live], self._means[live]
        out = np.empty(self.queries.n_queries)
        step = max(1, 2_000_000 // max(1, len(live) ** 2))     # bounded memory per block
        for a in range(0, len(out), step):
            blk = p[a:a + step]                                 # (b, L)
            # post[b, o, l] ~ w_l N(p_bo; p_bl, s^2): the posterior if the answer were LLM o's
            post = wl * np.exp(-0.5 * ((blk[:, :, None] - blk[:, None, :]) / _NOISE) ** 2)
            post /= post.sum(axis=2, keepdims=True)
            mbar = post @ m
            var = post @ (m ** 2) - mbar ** 2                  # (b, o)
            out[a:a + step] = np.maximum(var, 0.0) @ wl
        return out

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
