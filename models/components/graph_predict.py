"""The graph router's builder over a train split and its prediction of new queries.

Reference: Feng, Shen & You, "GraphRouter: A Graph-based Router for LLM Selections",
ICLR 2025 (arXiv 2410.03834). Used by :mod:`recsys_router.models.graph_module`.
"""

from __future__ import annotations

import hashlib
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch

from recsys_router.data import RoutingData
from recsys_router.errors import DataValidationError
from recsys_router.models.components.gnn import HeteroRouterGNN, _pair_heads
from recsys_router.models.components.graph import RoutingGraphBuilder, _task_name

__all__ = ["make_builder", "task_featurizer", "kept_states", "predict_graph", "predict_whole_graph",
           "train_states", "TrainStates"]


def make_builder(train: RoutingData, train_x: np.ndarray, llm_features: np.ndarray, encoder,
                 k: int) -> tuple[RoutingGraphBuilder, float]:
    """Graph builder over a train split; returns it with the cost scale (mean train cost)."""
    obs = train.scores[train.observed]
    if obs.size and (obs.min() < 0 or obs.max() > 1):
        raise DataValidationError(f"the graph router trains with BCE and needs scores in [0, 1]; "
                                  f"train scores range over [{obs.min()}, {obs.max()}]",
                                  source=train.source, column="score")
    scale = 1.0
    if train.costs is not None and np.isfinite(train.costs).any():
        scale = float(np.nanmean(train.costs)) or 1.0
    trained = sorted({_task_name(t) for t in train.tasks})
    return RoutingGraphBuilder(train_x, train.tasks, train.scores, train.costs, llm_features,
                               task_featurizer(encoder, trained), k=k, cost_scale=scale), scale


def _name_vector(name: str, dim: int) -> np.ndarray:
    """A fixed unit vector of ``dim`` floats derived from the task name alone (SHAKE-256 of
    its UTF-8 bytes read as uniform numbers in [-1, 1), then normalised): the same on every
    machine and numpy version."""
    raw = hashlib.shake_256(name.encode("utf-8", "surrogatepass")).digest(8 * dim)
    v = np.frombuffer(raw, np.uint64).astype(np.float64) / 2.0 ** 63 - 1.0
    return (v / (np.linalg.norm(v) + 1e-12)).astype(np.float32)


def task_featurizer(encoder, trained=(), overflow: str = "hash"):
    """``list of task names -> ndarray (n, d)``: the task node features of the graph router.

    With a text encoder, the embedding of ``"task: <name>"``. With an encoder that reads no
    text (``needs_text=False``, e.g. precomputed embeddings), a fixed vector per *name*,
    never per position in the list asked for: the ``i``-th of the ``trained`` task names
    (the fit's train tasks, sorted) gets the one-hot ``e_i`` while ``i < d`` and, past the
    encoder's ``d`` dimensions, a unit vector hashed from its name (``overflow="zeros"``: a
    zero row, as artifacts saved before task features were stored had); every other name
    (a task unseen in training, an onboarded LLM's probe task) gets the zero vector, which
    no trained task has. The router keeps the features of its train tasks in its builder
    (``task_x``) and asks the featuriser only for names it has no row for.

    Example
    -------
    >>> class Pre:  # an encoder that reads no text
    ...     needs_text, dim = False, 3
    >>> task_featurizer(Pre(), ["a", "b"])(["b", "new", "a"]).tolist()
    [[0.0, 1.0, 0.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]
    """
    if getattr(encoder, "needs_text", True):
        return lambda names: encoder.encode([f"task: {n}" for n in names])
    if overflow not in ("hash", "zeros"):
        raise ValueError(f"overflow must be 'hash' or 'zeros', got {overflow!r}")
    dim = int(encoder.dim)
    slots = {n: i for i, n in enumerate(trained)}

    def featurize(names):
        out = np.zeros((len(names), dim), np.float32)
        for row, name in enumerate(names):     # (task names, not queries: a few per call)
            i = slots.get(name)
            if i is not None and i < dim:
                out[row, i] = 1.0
            elif i is not None and overflow == "hash":
                out[row] = _name_vector(name, dim)
        return out
    return featurize


@contextmanager
def _eval_mode(net: torch.nn.Module):
    """``net`` in eval mode inside the block, its own mode after (switched only when it was
    training: walking the modules to set the mode they have costs about 1 ms a call)."""
    was = net.training
    if was:
        net.eval()
    try:
        yield net
    finally:
        if was:
            net.train()


@dataclass(frozen=True)
class TrainStates:
    """The node states of the train graph that new queries read, for one network in eval mode
    (:func:`train_states`).

    Attributes
    ----------
    query, task, llm : list of Tensor
        Per layer ``i``, the states that enter it: ``(n_train, h)``, ``(n_tasks, h)`` (the
        train tasks) and ``(n_llms, h)``.
    llm_final : Tensor
        The LLM nodes' final states ``(n_llms, h)``, which the pair heads read.
    """

    query: list
    task: list
    llm: list
    llm_final: torch.Tensor


@torch.no_grad()
def train_states(net: HeteroRouterGNN, builder: RoutingGraphBuilder,
                 device=None) -> TrainStates:
    """One pass of ``net`` (eval mode) over :meth:`RoutingGraphBuilder.train_graph`.

    Its states are those of the train, task and LLM nodes of any graph in which new queries
    join the train graph (no edge leaves a new query), so one pass serves every later
    prediction of the same network over the same builder.
    """
    with _eval_mode(net):
        device = device or next(net.parameters()).device
        g = builder.train_graph().to(device)
        trace: list = []
        # the last layer on one query row: the LLM nodes' final states are what it is for
        h = net.embed(g, final_queries=torch.zeros(1, dtype=torch.long, device=device),
                      states=trace)
    return TrainStates([t["query"] for t in trace], [t["task"] for t in trace],
                       [t["llm"] for t in trace], h["llm"])


def kept_states(owner, net: HeteroRouterGNN, builder: RoutingGraphBuilder,
                device=None) -> TrainStates:
    """:func:`train_states` of ``net`` over ``builder``, kept on ``owner`` (a router or a
    module) while both are the same objects on the same device and no parameter of ``net``
    changed in place (a refit, a load, a new builder, an optimizer step or any in-place
    weight change makes new ones). One attribute read and one write, so concurrent callers
    at worst compute the same states twice."""
    device = device or next(net.parameters()).device
    stamp = (str(device), tuple(p._version for p in net.parameters()))
    held = getattr(owner, "_states_held", None)   # (net, builder, stamp, states)
    if held is not None and held[0] is net and held[1] is builder and held[2] == stamp:
        return held[3]
    states = train_states(net, builder, device)
    owner._states_held = (net, builder, stamp, states)
    return states


def _new_query_states(net: HeteroRouterGNN, st: TrainStates, x: torch.Tensor,
                      task_of: torch.Tensor, unseen_task_x: torch.Tensor,
                      near: torch.Tensor) -> torch.Tensor:
    """Final states ``(n, h)`` of new queries: what each layer of :meth:`HeteroRouterGNN.embed`
    computes for their rows of the joined graph, from the train graph's states.

    A new query's row in a layer reads its task (``has``), its near train queries
    (``near``) and no rating edge (``rated_by``: the convolution's bias alone); the
    convolutions run on these rows as destinations, summed in the layer's order, then ReLU
    and the residual, as in :func:`~recsys_router.models.components.gnn._summed_layer` and
    ``_last_layer``. Task nodes unseen in training (no query feeds them) get each layer's
    ``in`` convolution over no edges, as in the joined graph.
    """
    n = x.size(0)
    h = torch.relu(net.inp["query"](x))
    ht_new = torch.relu(net.inp["task"](unseen_task_x)) if len(unseen_task_x) else None
    used, src = torch.unique(near[0], return_inverse=True)
    e_near = torch.stack([src, near[1]])
    e_task = torch.stack([task_of, torch.arange(n, device=x.device)])
    none = torch.zeros((2, 0), dtype=torch.long, device=x.device)
    for i, conv in enumerate(net.convs):
        ht = st.task[i] if ht_new is None else torch.cat([st.task[i], ht_new])
        out = None
        for et, c in conv.convs.items():
            if et[2] != "query":
                continue
            if et == ("task", "has", "query"):
                y = c((ht, h), e_task)
            elif et == ("query", "near", "query"):
                y = c((st.query[i][used], h), e_near)
            elif et == ("llm", "rated_by", "query"):
                y = c((st.llm[i], h), none, edge_attr=x.new_zeros((0, 2)))
            else:
                raise ValueError(f"no rule for the new queries' edge type {et}")
            out = y if out is None else out + y
        if ht_new is not None and i + 1 < len(net.convs):
            c = conv.convs[("query", "in", "task")]
            ht_new = net.dropout(torch.relu(c((st.query[i], ht_new), none))) + ht_new
        h = net.dropout(torch.relu(out)) + h
    return h


@torch.no_grad()
def predict_graph(net: HeteroRouterGNN, builder: RoutingGraphBuilder, x: np.ndarray, tasks,
                  device=None, states: TrainStates | None = None
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """Score logits and scaled costs (n, n_llms) of new queries joined to the train graph.

    The same numbers as ``net`` over :meth:`RoutingGraphBuilder.inference_graph` (tests),
    computed in two parts: the train graph's states (``states``, from :func:`train_states`
    for this network and builder, computed here when None) and the new queries' own rows.
    With ``states`` given, a prediction costs the new queries' neighbour search and a few
    small products, not a pass over the whole train graph. Both, and a query predicted
    alone or in a batch, agree up to float32 rounding (~1e-8 here; the products run over
    different row counts), not bit for bit.
    """
    with _eval_mode(net):
        device = device or next(net.parameters()).device
        if states is None:
            states = train_states(net, builder, device)
        x = np.asarray(x, np.float32)
        task_of, unseen_x, near = builder.new_query_links(x, list(tasks))
        hq = _new_query_states(net, states, torch.as_tensor(x, device=device),
                               torch.as_tensor(task_of, device=device),
                               torch.as_tensor(unseen_x, device=device),
                               torch.as_tensor(near, device=device))
        n, n_llms = len(x), len(states.llm_final)
        q = torch.arange(n, device=device).repeat_interleave(n_llms)
        lidx = torch.arange(n_llms, device=device).repeat(n)
        s, c = _pair_heads(net.score_head, net.cost_head, hq, states.llm_final, q, lidx)
    return s.reshape(n, n_llms), c.reshape(n, n_llms)


@torch.no_grad()
def predict_whole_graph(net: HeteroRouterGNN, builder: RoutingGraphBuilder, x: np.ndarray,
                        tasks, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`predict_graph`'s numbers the way they were computed before it: ``net`` over the
    whole joined graph (:meth:`RoutingGraphBuilder.inference_graph`, every train query plus
    the new ones) on every call. The reference for its tests and
    ``benchmarks/bench_graph_route.py``."""
    with _eval_mode(net):
        g, off = builder.inference_graph(np.asarray(x, np.float32), list(tasks))
        device = device or next(net.parameters()).device
        g = g.to(device)
        n, n_llms = len(x), len(builder.llm_x)
        q = torch.arange(off, off + n, device=device).repeat_interleave(n_llms)
        lidx = torch.arange(n_llms, device=device).repeat(n)
        s, c = net(g, q, lidx)
    return s.reshape(n, n_llms), c.reshape(n, n_llms)
