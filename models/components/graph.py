"""Heterogeneous task-query-LLM graph: neighbour search, graph construction and the builder
that holds the train graph's state (the GNN that scores query-LLM edges is in
:mod:`recsys_router.models.components.gnn`, re-exported here).

Reference: Feng, Shen & You, "GraphRouter: A Graph-based Router for LLM Selections",
ICLR 2025 (arXiv 2410.03834). Here the graph has three node types:

* ``task``  - one per task, features = task-name embedding, or (an encoder that reads no
  text) a fixed vector per task name (:func:`~recsys_router.models.components.graph_predict.task_featurizer`);
* ``query`` - features = text embedding;
* ``llm``   - features = description embedding plus log prices and log size.

Edges: ``query``-``in``-``task`` (context queries only) and ``task``-``has``-``query`` (every
query); ``query``-``near``-``query`` from each query to
its ``k`` nearest *context* queries by embedding cosine; and ``query``-``rates``-``llm`` for the
observed cells of context queries, carrying ``[score, cost]`` as edge attributes. Queries
to be predicted (new queries, or a held-out part of the train queries while training) have
no rating edges: they learn about LLMs through their task and their neighbours, two
message-passing hops away, which is what the two-layer GNN covers.
"""

from __future__ import annotations

import numpy as np
import torch
from torch_geometric.data import HeteroData

from recsys_router.models.components.gnn import HeteroRouterGNN
from recsys_router.models.components.graph_knn import (ClusterIndex, EXACT_MAX_CELLS, knn_edges,
                                                       nearest_context, neighbour_pool, as_unit)
from recsys_router.state import INT, STR, Arr, ListOf, StateError, check_indices, check_state

__all__ = ["build_graph", "knn_edges", "neighbour_pool", "nearest_context", "HeteroRouterGNN",
           "RoutingGraphBuilder", "EDGE_TYPES"]

EDGE_TYPES = (("query", "in", "task"), ("task", "has", "query"), ("query", "near", "query"),
              ("query", "rates", "llm"), ("llm", "rated_by", "query"))


def build_graph(query_x: np.ndarray, query_task: np.ndarray, task_x: np.ndarray,
                llm_x: np.ndarray, rate_q: np.ndarray, rate_l: np.ndarray,
                rate_attr: np.ndarray, context: np.ndarray, k: int,
                near_edges: np.ndarray | None = None,
                llm_reads: np.ndarray | None = None) -> HeteroData:
    """Assemble the heterogeneous routing graph.

    Parameters
    ----------
    query_x : ndarray (n_queries, d_q)
        Query features (text embeddings).
    query_task : ndarray of int (n_queries,)
        Task node of each query.
    task_x, llm_x : ndarray
        Task and LLM node features.
    rate_q, rate_l : ndarray of int
        Observed (query, LLM) cells of *context* queries, as rating edges.
    rate_attr : ndarray (n_edges, 2)
        ``[score, cost]`` of each rating edge (already scaled).
    context : ndarray of int
        Query indices that are context (neighbour candidates).
    k : int
        Neighbours per query.
    near_edges : ndarray of int (2, n_edges), optional
        Query-query edges already chosen (then ``k`` is not used for them).
    llm_reads : ndarray of bool (n_rating_edges,), optional
        Rating edges that also feed their LLM node (``query``-``rates``-``llm``); default
        all. Every rating edge feeds its query (``llm``-``rated_by``-``query``).

    Returns
    -------
    torch_geometric.data.HeteroData
    """
    g = HeteroData()
    g["query"].x = torch.as_tensor(query_x, dtype=torch.float32)
    g["task"].x = torch.as_tensor(task_x, dtype=torch.float32)
    g["llm"].x = torch.as_tensor(llm_x, dtype=torch.float32)
    q = np.arange(len(query_x))
    qt = torch.as_tensor(np.stack([q, query_task]), dtype=torch.long)
    ctx = torch.as_tensor(np.asarray(context, dtype=np.int64))
    # only context queries feed their task node, so a predicted query never changes what
    # another one sees (routing a batch equals routing each query alone, up to float rounding:
    # the products run over different row counts, ~1e-8 apart)
    g["query", "in", "task"].edge_index = qt[:, ctx]
    g["task", "has", "query"].edge_index = qt[[1, 0]]   # (flip(0) is a slow copy on CPU)
    if near_edges is None:
        near_edges = knn_edges(query_x, context, k)
    g["query", "near", "query"].edge_index = torch.as_tensor(near_edges, dtype=torch.long)
    ql = torch.as_tensor(np.stack([rate_q, rate_l]), dtype=torch.long).reshape(2, -1)
    attr = torch.as_tensor(rate_attr, dtype=torch.float32).reshape(-1, 2)
    if llm_reads is None:
        g["query", "rates", "llm"].edge_index = ql
        g["query", "rates", "llm"].edge_attr = attr
    else:
        sel = torch.as_tensor(np.asarray(llm_reads, bool))
        g["query", "rates", "llm"].edge_index = ql[:, sel]
        g["query", "rates", "llm"].edge_attr = attr[sel]
    g["llm", "rated_by", "query"].edge_index = ql[[1, 0]]
    g["llm", "rated_by", "query"].edge_attr = attr
    return g


class RoutingGraphBuilder:
    """Builds training and inference graphs over a fixed set of train (context) queries.

    Each train query's ``pool`` nearest other train queries are found once (exact cosine,
    chunked, up to 20,000 train queries; above, through the approximate
    :class:`~recsys_router.models.components.graph_knn.ClusterIndex`); a step's query-query edges then link every query to its ``k`` nearest
    queries among those that are context *in that step*, read off the pool. This equals a
    fresh exact kNN over the step's context whenever at least ``k`` of a query's pool
    members are context (the pool is ``max(3k, k + 8)`` wide and a step hides at most
    ``target_fraction`` of the queries, so a shortfall is rare; a query then keeps fewer
    neighbours).

    Parameters
    ----------
    train_x : ndarray (n_train, d)
        Train query embeddings.
    train_tasks : sequence of str
        Task of each train query (None/NaN read as ``"unknown"``).
    scores, costs : ndarray (n_train, n_llms)
        Train scores (NaN = unobserved), already scaled to [0, 1], and costs (or None).
    llm_x : ndarray (n_llms, d_llm)
        LLM node features.
    task_featurizer : callable
        ``list of task names -> ndarray (n, d_task)``; must handle unseen names.
    k : int
        Query-query neighbours.
    cost_scale : float
        Costs are divided by this before they become edge attributes / targets.
    pool : int or ndarray, optional
        Neighbours per train query (default ``max(3k, k + 8)``), or the neighbour array
        itself (n_train, width) computed earlier.
    task_x : ndarray (n_tasks, d), optional
        Features of the train tasks (sorted names) kept earlier (a restored builder), so a
        task's feature stays the one the network was trained with; else from
        ``task_featurizer``.
    """

    #: declared state (see :meth:`state`); the featuriser (a closure over the encoder) is
    #: not stored: the owning router passes it again on load
    _STATE = {"k": INT, "task_names": ListOf(STR, dim="n_tasks"),
              "train_x": Arr("float32", ("n_train", "d")),
              "scores": Arr("float32", ("n_train", "n_llms")),
              "costs": Arr("float32", ("n_train", "n_llms"), optional=True),
              "llm_x": Arr("float32", ("n_llms", "d_llm")),
              "neighbour_pool": Arr("int64", ("n_train", "width"), index_of="n_train"),
              "train_task_index": Arr("int64", ("n_train",), index_of="n_tasks"),
              # absent in artifacts saved before it was stored: then from the featuriser
              "task_x": Arr("float32", ("n_tasks", "d"), optional=True)}

    def __init__(self, train_x, train_tasks, scores, costs, llm_x, task_featurizer, k: int = 5,
                 cost_scale: float = 1.0, pool: int | None = None, task_x=None):
        self.train_x = np.asarray(train_x, np.float32)
        self.train_tasks = [_task_name(t) for t in train_tasks]
        self.scores = np.asarray(scores, np.float32)
        self.costs = None if costs is None else np.asarray(costs, np.float32) / cost_scale
        self.llm_x = np.asarray(llm_x, np.float32)
        self.task_featurizer = task_featurizer
        self.k = int(k)
        self.task_names = sorted(set(self.train_tasks))
        self.task_x = np.asarray(task_featurizer(self.task_names) if task_x is None else task_x,
                                 np.float32)
        if self.task_x.shape[0] != len(self.task_names):
            raise ValueError(f"task_x has {self.task_x.shape[0]} rows for "
                             f"{len(self.task_names)} train tasks")
        self._index = None
        if isinstance(pool, np.ndarray):  # neighbours computed earlier (a restored builder)
            self.neighbour_pool = pool
        else:
            width = max(3 * self.k, self.k + 8) if pool is None else int(pool)
            self.neighbour_pool = neighbour_pool(self.train_x, width,
                                                 self.context_index(self.n_train))
        tix = {n: i for i, n in enumerate(self.task_names)}
        self.train_task_index = np.array([tix[t] for t in self.train_tasks], dtype=np.int64)

    @property
    def n_train(self) -> int:
        return len(self.train_x)

    def context_index(self, n_rows: int) -> ClusterIndex | None:
        """The cluster index over the train queries when ``n_rows`` rows searching them
        exceed the exact search's size (built once per ``train_x``, not stored), else None."""
        if n_rows * self.n_train <= EXACT_MAX_CELLS:
            return None
        if self._index is None or self._index[0] is not self.train_x:
            # unit rows already (MiniLM's, most stored embeddings): no normalised copy
            self._index = (self.train_x, ClusterIndex(as_unit(self.train_x)))
        return self._index[1]

    def _train_unit(self) -> np.ndarray:
        """The train queries' unit rows for the exact search of new queries, kept while
        ``train_x`` is the same array (no copy when its rows are unit already)."""
        held = getattr(self, "_unit", None)
        if held is None or held[0] is not self.train_x:
            held = self._unit = (self.train_x, as_unit(self.train_x))
        return held[1]

    def state(self) -> tuple[dict, dict]:
        """``(JSON, arrays)`` of the builder (costs stored already scaled)."""
        info = {"k": self.k, "task_names": list(self.task_names)}
        arrays = {"train_x": self.train_x, "scores": self.scores, "llm_x": self.llm_x,
                  "neighbour_pool": np.asarray(self.neighbour_pool, np.int64),
                  "train_task_index": np.asarray(self.train_task_index, np.int64),
                  "task_x": np.asarray(self.task_x, np.float32)}
        if self.costs is not None:
            arrays["costs"] = self.costs
        return info, arrays

    @classmethod
    def from_state(cls, info: dict, arrays: dict, task_featurizer, *, n_llms: int,
                   where: str) -> "RoutingGraphBuilder":
        """A builder from :meth:`state` output, validated against its declared spec."""
        dims = {"n_llms": n_llms}
        v = check_state(cls._STATE, info, {k: (a.dtype, a.shape) for k, a in arrays.items()},
                        dims, "")
        check_indices(cls._STATE, arrays, dims)
        if not 1 <= v["k"] <= 10_000 or len(set(v["task_names"])) != len(v["task_names"]):
            raise StateError(f"{where}: k must be in [1, 10000] and task names distinct")
        tasks = [v["task_names"][i] for i in arrays["train_task_index"].tolist()]
        return cls(arrays["train_x"], tasks, arrays["scores"], arrays.get("costs"),
                   arrays["llm_x"], task_featurizer, k=v["k"], cost_scale=1.0,
                   pool=arrays["neighbour_pool"], task_x=arrays.get("task_x"))

    def _tasks(self, extra: list[str]):
        names = list(self.task_names) + sorted(set(extra) - set(self.task_names))
        x = self.task_x
        if len(names) > len(self.task_names):
            x = np.vstack([x, np.asarray(self.task_featurizer(names[len(self.task_names):]),
                                         np.float32)])
        return {n: i for i, n in enumerate(names)}, x

    def _rating_edges(self, rows: np.ndarray):
        """Observed cells of train queries ``rows``: (row position in ``rows``, LLM, attr)."""
        sub = self.scores[rows]
        pi, li = np.nonzero(~np.isnan(sub))
        qi = rows[pi]
        cost = self.costs[qi, li] if self.costs is not None else np.zeros(len(qi), np.float32)
        return pi, li, np.stack([sub[pi, li], np.nan_to_num(cost)], axis=1)

    def _near(self, rows: np.ndarray, allowed: np.ndarray, k: int) -> np.ndarray:
        """Pool edges ``(source, target)`` (train ids) from each row's first ``k`` allowed
        pool members."""
        cand = self.neighbour_pool[rows]
        ok = allowed[cand]
        keep = ok & (np.cumsum(ok, axis=1) <= k)
        return np.stack([cand[keep], np.repeat(rows, keep.sum(axis=1))])

    def training_graph(self, rng: np.random.Generator, target_fraction: float,
                       targets: np.ndarray | None = None, context_size: int = 0):
        """A step's graph: target queries lose their rating edges and are predicted.

        Parameters
        ----------
        rng : numpy Generator
        target_fraction : float
            Without ``targets``: the share of train queries drawn as targets. With them: the
            most that may be targets (a random subset is kept beyond it), so the step
            always keeps context.
        targets : ndarray of int, optional
            Train query ids to predict (e.g. the queries of a training batch).
        context_size : int
            0: every non-target train query is context (full graph). Otherwise the graph
            holds the targets, their ``k`` nearest context queries and at most
            ``context_size`` further context queries drawn at random (a sampled subgraph,
            so a step costs O(batch), not O(train set)); the LLM nodes then read the rating
            edges of those random ones only (a uniform sample of the context, as at
            inference, where they read every train query), while every context query
            reads its own rating edges.

        Returns
        -------
        graph : HeteroData
            Query nodes are the step's queries in increasing train id order.
        targets : dict of ndarray
            ``q``, ``l`` (pair indices into the graph), ``y`` (score), ``cost`` (scaled,
            NaN if unknown) and ``nodes`` (train id of each query node).
        """
        n = self.n_train
        target = np.zeros(n, bool)
        if targets is None:
            target = rng.random(n) < target_fraction
        else:
            t = np.unique(np.asarray(targets, np.int64))
            cap = max(1, int(target_fraction * n))
            if len(t) > cap:
                t = np.sort(rng.choice(t, cap, replace=False))
            target[t] = True
        if not target.any():
            target[rng.integers(n)] = True
        if target.all() and n > 1:
            target[rng.integers(n)] = False
        context = ~target
        reads = None
        if context_size and context.sum() > context_size:
            tid = np.flatnonzero(target)
            near_t = self._near(tid, context, self.k)[0]
            rest = np.flatnonzero(context)
            extra = rng.choice(rest, min(int(context_size), len(rest)), replace=False)
            mark = np.zeros(n, bool)   # the union, in increasing id order, without a sort
            mark[tid], mark[near_t], mark[extra] = True, True, True
            nodes = np.flatnonzero(mark)
            reads = np.zeros(n, bool)   # the LLM nodes read a uniform sample of the context
            reads[extra] = True
        else:
            nodes = np.arange(n)
        local = np.full(n, -1, dtype=np.int64)
        local[nodes] = np.arange(len(nodes))
        in_graph = np.zeros(n, bool)
        in_graph[nodes] = True
        near = local[self._near(nodes, context & in_graph, self.k)]
        ctx_nodes = nodes[context[nodes]]
        pi, li, attr = self._rating_edges(ctx_nodes)
        tix, task_x = self._tasks([])
        g = build_graph(self.train_x[nodes], self.train_task_index[nodes], task_x, self.llm_x,
                        local[ctx_nodes][pi], li, attr, local[ctx_nodes], self.k, near_edges=near,
                        llm_reads=None if reads is None else reads[ctx_nodes][pi])
        tnodes = nodes[target[nodes]]
        tp, tl = np.nonzero(~np.isnan(self.scores[tnodes]))
        tq = tnodes[tp]
        cost = (self.costs[tq, tl] if self.costs is not None
                else np.full(len(tq), np.nan, np.float32))
        return g, {"q": local[tq], "l": tl, "y": self.scores[tq, tl], "cost": cost,
                   "nodes": nodes}

    def train_graph(self) -> HeteroData:
        """The graph of the train queries alone, every one of them context.

        No edge leaves a new query in :meth:`inference_graph` (it reads its task and its
        ``k`` nearest train queries; only context queries feed task and LLM nodes), so the
        train, task and LLM node states there equal this graph's: they are computed once
        for any number of new queries (:func:`~recsys_router.models.components.graph_predict.train_states`).
        """
        rows, qi, li, attr, near = self._train_edges()
        return build_graph(self.train_x, self.train_task_index, self.task_x, self.llm_x, qi, li,
                           attr, rows, self.k, near_edges=near)

    def _train_edges(self):
        """Every train query as context: ``(rows, rating edges (row, LLM, attr), near edges off
        the pool)``, the train part of :meth:`train_graph` and :meth:`inference_graph`."""
        rows = np.arange(self.n_train)
        qi, li, attr = self._rating_edges(rows)
        return rows, qi, li, attr, self._near(rows, np.ones(self.n_train, bool), self.k)

    def new_query_links(self, new_x: np.ndarray, new_tasks):
        """What new queries read in the graph: ``(task node of each, features of the task nodes
        unseen in training (appended after the train tasks, sorted), near edges (train row,
        new row) from each one's k nearest train queries)``.

        The search is exact or through the cluster index as the train pool's is, by the
        number of train queries alone (exact up to 20,000): never by the batch's size, so a
        query's neighbours are the same routed alone or in any batch (barring similarities
        tied to float rounding, which products over different row counts can order
        differently)."""
        new_tasks = [_task_name(t) for t in new_tasks]
        tix, task_x = self._tasks(new_tasks)
        task_of = np.array([tix[t] for t in new_tasks], dtype=np.int64)
        index = self.context_index(self.n_train)
        near = nearest_context(np.asarray(new_x, np.float32), self.train_x, self.k, index,
                               None if index is not None else self._train_unit(), exact=True)
        return task_of, task_x[len(self.task_names):], near

    def inference_graph(self, new_x: np.ndarray, new_tasks) -> tuple[HeteroData, int]:
        """Graph of all train queries (context) plus the new queries appended after them (the
        whole graph that :func:`~recsys_router.models.components.graph_predict.predict_graph`
        computes in two parts; its tests' reference).

        Returns the graph and the node offset of the first new query.
        """
        new_x = np.asarray(new_x, np.float32)
        task_of, unseen_x, near_new = self.new_query_links(new_x, new_tasks)
        task_x = np.vstack([self.task_x, unseen_x]) if len(unseen_x) else self.task_x
        qx = np.vstack([self.train_x, new_x])
        qt = np.concatenate([self.train_task_index, task_of])
        # train rows read their neighbours off the pool; new rows search every train query
        rows, qi, li, attr, near_train = self._train_edges()
        near_new = np.stack([near_new[0], near_new[1] + self.n_train])
        g = build_graph(qx, qt, task_x, self.llm_x, qi, li, attr, rows, self.k,
                        near_edges=np.concatenate([near_train, near_new], axis=1))
        return g, self.n_train


def _task_name(t) -> str:
    if t is None or (isinstance(t, float) and np.isnan(t)):
        return "unknown"
    return str(t)
