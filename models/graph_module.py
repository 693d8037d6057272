"""Graph router: a heterogeneous task-query-LLM GNN predicting score and cost per edge.

Reference: Feng, Shen & You, "GraphRouter: A Graph-based Router for LLM Selections",
ICLR 2025 (arXiv 2410.03834).

The graph (:class:`~recsys_router.models.components.graph.RoutingGraphBuilder`) holds task, query and
LLM nodes; train query-LLM edges carry ``[score, cost]``; a query is linked to its task and
to its ``k`` nearest train queries. Training samples its own subgraphs (no
``NeighborLoader``, no torch-sparse): each step hides the rating edges of the queries of a
training batch (at most ``target_fraction`` of the train queries) and predicts them
(score: BCE, cost: MSE on cost / mean train cost), which is exactly the position of a new
query at routing time. The step's graph holds those target queries, their ``k`` nearest
context queries and at most ``context_size`` further context queries drawn at random, so
a step costs O(batch) whatever the train set's size (``context_size=0``: every train
query, full-batch).

The module works with the ordinary :class:`~recsys_router.datamodules.routing_datamodule.RoutingDataModule`:
it builds the graph from the data module's train split in :meth:`GraphModule.on_data` and
takes the queries of each training batch (``fixed_mode = "listwise"``: batches of queries)
as the step's targets, so one epoch predicts each training record once. On logged feedback
(the ``logged`` router, or a data module with ``feedback``), a batch is queries with weights
and targets (:func:`recsys_router.feedback.logged.logged_arrays`); the step predicts its
targets' masked cells and scores them with the pointwise routers' loss
(:func:`~recsys_router.models.losses.logged_feedback_loss`).
"""

from __future__ import annotations

import hashlib
import inspect

import numpy as np
from scipy.special import expit
import torch
import torch.nn.functional as F

from recsys_router.models.base.derive import for_module
from recsys_router.models.base.lightning_router import LightningRouter
from recsys_router.models.base.router_module import RouterModule
from recsys_router.models.graph_coldstart import GraphColdStartMixin
from recsys_router.models.losses import logged_feedback_loss
from recsys_router.models.components.graph import HeteroRouterGNN, RoutingGraphBuilder, _task_name
from recsys_router.models.components.graph_predict import (TrainStates, kept_states,
                                                             make_builder, predict_graph,
                                                             task_featurizer)
from recsys_router.data import RoutingData
from recsys_router.hyperparams import check_number, check_width
from recsys_router.policies import fill_unknown_costs
from recsys_router.state import BOOL, FLOAT, STR, Arr, ListOf, Opt, Part
from recsys_router.errors import ArgumentValueError

__all__ = ["GraphModule", "GraphRouter", "make_builder"]

_N_LLM_NUMERIC = 4  # numeric LLM features after the description embedding (data module)
_TARGET_FRACTION = 0.3  # GraphModule's default share of train queries a step hides
# default graph work in query nodes x steps (GraphRouter._plan) and the step cap's clip
_NODE_STEPS, _STEP_FLOOR, _STEP_CEIL = 720_000, 80, 2000


class GraphModule(RouterModule):
    """LightningModule of the graph router.

    Parameters
    ----------
    n_llms, embed_dim : int
        Linked from the data module.
    hidden : int
        GNN width.
    num_layers : int
        Message-passing layers.
    dropout : float
    k : int
        Query-query neighbours.
    target_fraction : float
        The most train queries a step may hide (and predict), as a share; a batch with
        more distinct queries keeps a random subset of them.
    context_size : int
        Random context queries added to a step's subgraph besides the targets' nearest
        neighbours; 0 = all train queries (full-batch steps).
    cost_weight : float
        Weight of the cost head's MSE (0 = score only).
    lr, weight_decay : float
    seed : int
        Seed of the per-step target sampling.

    Example
    -------
    >>> GraphModule(n_llms=3, embed_dim=8).net.score_head[-1].out_features
    1
    """

    # epochs of ``recsys-router fit`` (its batch size, the queries of a step, is the data
    # config's data.batch_size)
    trainer_defaults = {"max_epochs": 10}
    # a step predicts every cell of up to target_fraction of the train queries from a subgraph
    # of about the whole graph's size on small sets: batches of >= 1,024 queries, 80 steps
    # (GraphRouter._plan raises the cap where a step's graph is small)
    plan_options = {"min_batch": 1024, "step_cap": 80}
    router_loss_options = False
    fixed_mode = "listwise"
    # early stopping compares the mean held-out loss of the last 3 checks: a step predicts
    # whole rows of a few queries, so the loss of a small held-out split jumps by about as
    # much between checks as it falls over many, and the raw rule stopped the ORBIT anchor's
    # fits at their minimum steps (40 %) while their routing still improved
    stop_smoothing = 3

    def __init__(self, n_llms: int, embed_dim: int, hidden: int = 64, num_layers: int = 2,
                 dropout: float = 0.1, k: int = 5, target_fraction: float = _TARGET_FRACTION,
                 context_size: int = 4096, cost_weight: float = 0.5, lr: float = 5e-3,
                 weight_decay: float = 1e-5, seed: int = 0):
        super().__init__(n_llms, embed_dim, lr=lr, weight_decay=weight_decay)
        if not 0 < target_fraction < 1:
            raise ArgumentValueError(f"target_fraction must be in (0, 1), got {target_fraction}")
        self.save_hyperparameters()
        for value, name in ((k, "k"), (num_layers, "num_layers")):
            check_number(value, name, low=1, integer=True)
        check_width(hidden, "hidden")
        self.k = int(k)
        self.target_fraction = float(target_fraction)
        if context_size < 0:
            raise ArgumentValueError(f"context_size must be >= 0, got {context_size}")
        self.context_size = int(context_size)
        self.cost_weight = check_number(cost_weight, "cost_weight", low=0)
        self.seed = int(seed)
        self.net = HeteroRouterGNN({"query": embed_dim, "task": embed_dim,
                                    "llm": embed_dim + _N_LLM_NUMERIC}, hidden, num_layers, dropout)
        self.builder: RoutingGraphBuilder | None = None
        self.cost_scale = 1.0
        self._tasks: dict[str, np.ndarray] = {}
        self._pending: dict[str, list[dict]] = {}

    def on_data(self, datamodule) -> None:
        train = datamodule.splits["train"]
        self.builder, self.cost_scale = make_builder(train, datamodule.embeddings("train"),
                                                     datamodule.llm_features, datamodule.encoder,
                                                     self.k)
        self._tasks = {k: v.tasks for k, v in datamodule.splits.items()}
        self._rng = np.random.default_rng(self.seed)

    def _require_builder(self) -> RoutingGraphBuilder:
        if self.builder is None:
            raise RuntimeError("GraphModule has no graph: train it through a RoutingDataModule "
                               "(its train split becomes the graph)")
        return self.builder

    def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
        # cell batches name their query as "row", query-list batches as "index"
        rows = batch["row"] if "row" in batch else batch["index"]
        g, t = self._require_builder().training_graph(
            self._rng, self.target_fraction, targets=rows.cpu().numpy(),
            context_size=self.context_size)
        g = g.to(self.device)
        if "w" in batch:  # logged feedback: the same loss as the pointwise routers
            loss, c, cost = self._logged_loss(g, t, batch)
        else:
            s, c = self.net(g, torch.as_tensor(t["q"], device=self.device),
                            torch.as_tensor(t["l"], device=self.device))
            loss = F.binary_cross_entropy_with_logits(s, torch.as_tensor(t["y"], device=self.device))
            cost = torch.as_tensor(t["cost"], device=self.device)
        ok = ~torch.isnan(cost)
        if self.cost_weight > 0 and bool(ok.any()):
            loss = loss + self.cost_weight * F.mse_loss(c[ok], cost[ok])
        self.log("train/loss", loss, on_step=False, on_epoch=True, prog_bar=True, batch_size=1)
        return loss

    def _logged_loss(self, g, t: dict, batch: dict):
        """Loss of a step on logged feedback, with its cost predictions and targets.

        The batch (from :func:`recsys_router.feedback.logged.logged_arrays`) carries, per
        train query, the target row ``y``, the cells in the loss ``mask`` (the logged cell;
        every cell for ``dr``) and the weight ``w``. The step's target queries (those that
        lost their rating edges) are predicted at their masked cells and scored with
        :func:`~recsys_router.models.losses.logged_feedback_loss` (BCE), exactly as the
        pointwise routers are; the cost head keeps its MSE on the logged costs.
        """
        rows = batch["index"].cpu().numpy()
        where = np.full(self._require_builder().n_train, -1, np.int64)
        where[rows] = np.arange(len(rows))
        local = np.unique(t["q"])  # every logged query has one observed cell
        b = torch.as_tensor(where[t["nodes"][local]], device=batch["w"].device)
        mask = batch["mask"][b]
        pi, li = (v.cpu().numpy() for v in mask.nonzero(as_tuple=True))
        s, c = self.net(g, torch.as_tensor(local[pi], device=self.device),
                        torch.as_tensor(li, device=self.device))
        logits = torch.zeros(mask.shape, device=self.device, dtype=s.dtype)
        logits[torch.as_tensor(pi, device=self.device), torch.as_tensor(li, device=self.device)] = s
        loss = logged_feedback_loss(logits, batch["y"][b].float().to(self.device), mask.to(self.device),
                                    batch["w"][b].to(self.device), "bce", "self_normalise" in batch)
        costs = self.builder.costs
        cost = (costs[t["nodes"][local[pi]], li] if costs is not None
                else np.full(len(pi), np.nan, np.float32))
        return loss, c, torch.as_tensor(cost, device=self.device)

    def predict_new(self, x: np.ndarray, tasks) -> tuple[torch.Tensor, torch.Tensor]:
        """Score logits and scaled costs (n, n_llms) of new queries (embeddings, tasks)."""
        builder = self._require_builder()
        # kept across the batches of a prediction; an optimizer step between two held-out
        # checks changes the weights, and with them the states
        return predict_graph(self.net, builder, x, tasks, self.device,
                             states=kept_states(self, self.net, builder, self.device))

    def _eval_step(self, batch: dict, stage: str) -> None:
        # predicted together at the epoch's end (each prediction joins the whole train graph)
        self._pending.setdefault(stage, []).append(
            {k: batch[k] for k in ("index", "x", "y", "mask", "cost") if k in batch})

    def _eval_epoch_end(self, stage: str) -> None:
        parts = self._pending.pop(stage, [])
        if parts:
            batch = {k: torch.cat([p[k] for p in parts]) for k in parts[0]}
            split = stage if stage in self._tasks else "val"
            tasks = np.asarray(self._tasks[split])[batch["index"].cpu().numpy()]
            logits, costs = self.predict_new(batch["x"].cpu().numpy(), tasks)
            m = batch["mask"]
            loss = F.binary_cross_entropy_with_logits(logits[m], batch["y"][m].float())
            self.log(f"{stage}/loss", loss, on_step=False, on_epoch=True,
                     prog_bar=stage == "val", batch_size=len(batch["x"]))
            y = torch.where(m, batch["y"], torch.full_like(batch["y"], float("nan")))
            # float64, as the fitted router routes (float32 sigmoids of distinct logits tie)
            rec = {"pred": torch.sigmoid(logits.double()), "y": y}
            if "cost" in batch:
                rec["cost"] = batch["cost"]
            if self.builder.costs is not None and self.cost_weight > 0:   # as GraphRouter routes
                rec["pred_cost"] = torch.clamp(costs.double() * self.cost_scale, min=0.0)
            self._eval_store.setdefault(stage, []).append(rec)
        super()._eval_epoch_end(stage)

    def predict_step(self, batch: dict, batch_idx: int) -> dict:
        tasks = np.asarray(self._tasks.get("test", self._tasks.get("val")))[batch["index"].cpu().numpy()]
        logits, _ = self.predict_new(batch["x"].cpu().numpy(), tasks)
        return {"index": batch["index"], "scores": torch.sigmoid(logits)}


_MODULE_DEFAULTS = inspect.signature(GraphModule.__init__).parameters


@for_module(GraphModule)
class GraphRouter(GraphColdStartMixin, LightningRouter):
    """GraphRouter-style heterogeneous GNN router (registered as ``"graph"``).

    The generic :class:`~recsys_router.models.base.lightning_router.LightningRouter` with
    :class:`GraphModule`; its hyperparameters and their defaults are GraphModule's (its
    ``seed`` is the router's).

    Parameters
    ----------
    hidden, num_layers, dropout, k, target_fraction, context_size, cost_weight, lr, weight_decay
        See :class:`GraphModule`.
    encoder, encoder_options, batch_size, max_epochs, seed, accelerator, val_fraction, patience
        See :class:`~recsys_router.models.base.lightning_router.LightningRouter`; one graph step is taken
        per training batch of queries (``batch_size`` counts queries), whose cells are that
        step's targets. Without ``batch_size``/``max_epochs`` the budget is data-scaled
        (batches of >= 1,024 queries, never more than a step hides; steps capped by a budget
        of graph work, 80 on 10,000 queries, more on smaller sets; see :meth:`_plan`).

    New queries are predicted from the train graph's node states, computed by the first
    prediction after a fit, load or change of the pool and kept (:meth:`_train_states`), so a
    routed query costs its neighbour search and its own rows.

    Example
    -------
    >>> from recsys_router.datasets.synthetic import make_synthetic
    >>> d = make_synthetic(100, 3, 2, seed=0)
    >>> r = GraphRouter(hidden=8, max_epochs=1, encoder_options={"dim": 16}).fit(d)
    >>> r.predict_scores(d).shape, r.predict_costs(d).shape
    ((100, 3), (100, 3))
    """

    #: a new query's task node joins it to the train graph
    uses_tasks = True

    # declared state beyond the network: the graph builder's arrays (the train graph new
    # queries are joined to) and the cost scale; the task featuriser is rebuilt from the encoder
    _state_ = {"cost_scale_": FLOAT, "has_costs_": BOOL, "builder_": Part(missing=("scores", "costs")),
               "graph_owners_": Opt(ListOf(STR)),
               "llm_offsets_": Arr("float64", ("n_pool",), optional=True)}

    def _freeze_params(self) -> None:
        """Also fix ``cost_weight`` (``cost_weight_``): whether the cost head was trained,
        and so predicts the costs, is decided at fit."""
        super()._freeze_params()
        self.cost_weight_ = check_number(self.cost_weight, "cost_weight", low=0)

    def _plan(self, n_items: int, batch_size: int | None = None):
        """The data-scaled plan, its batch cut to what a step hides and its steps to a budget
        of graph work.

        * Batch: where the rule's batch exceeds ``cap = floor(target_fraction x n)`` train
          queries, ``ceil(n / cap)`` equal batches (else the cap drops batch queries and an
          epoch misses records).
        * Steps: a step costs about the number ``m`` of query nodes in its graph (all ``n``
          train queries, or ``min(n, batch x (1 + k) + context_size)`` with sampled
          context), so the step cap is ``clip(720,000 / m, 80, 2,000)``: 80 steps of the
          ~9,000-node subgraphs of a 10,000-query set (its 120 s fit target), more for
          smaller graphs, whose steps are cheaper (at most the rule's steps, with its
          300-step floor). A fixed cap of 80 left a few hundred train queries (80 steps of
          ~140 queries) routing below the best single LLM.
        """
        kw = self.module_kwargs()
        batch = self.batch_size or batch_size
        if batch is None:
            batch = super()._plan(n_items).batch_size            # the rule's batch
            cap = max(1, int(float(kw.get("target_fraction", _TARGET_FRACTION)) * n_items))
            if batch > cap:
                batch = batch_size = -(-n_items // -(-n_items // cap))
        step_cap = None
        if self.max_steps is None and self.max_epochs is None:
            ctx, k = (int(kw.get(n, _MODULE_DEFAULTS[n].default)) for n in ("context_size", "k"))
            nodes = n_items if not ctx else min(n_items, batch * (1 + k) + ctx)
            step_cap = min(max(_NODE_STEPS // max(nodes, 1), _STEP_FLOOR), _STEP_CEIL)
        return super()._plan(n_items, batch_size, step_cap)

    def _get_state(self):
        fields, arrays = super()._get_state()
        info, b_arrays = self.builder_.state()
        fields["builder_"] = info
        arrays.update({f"builder_/{k}": v for k, v in b_arrays.items()})
        return fields, arrays

    def _after_load(self, fields: dict, arrays: dict) -> None:
        head = "builder_/"
        mine = {k[len(head):]: v for k, v in arrays.items() if k.startswith(head)}
        # an artifact saved before the builder stored its task features (no task_x) gets
        # them as its saving code had them: one-hots in the order of its stored task names
        # (zero rows past the encoder's dimensions); tasks unseen there now get zeros
        legacy = fields["builder_"].get("task_names") if "task_x" not in mine else None
        if not (isinstance(legacy, list) and all(isinstance(n, str) for n in legacy)):
            legacy = ()     # (none, or malformed: from_state refuses it by its spec)
        self.builder_ = RoutingGraphBuilder.from_state(
            fields["builder_"], mine, task_featurizer(self.encoder_, legacy, overflow="zeros"),
            n_llms=len(getattr(self, "core_llms_", None) or self.llm_names_),
            where="GraphRouter.builder_")

    def _set_fitted_state(self, module: GraphModule, dm, take_net: bool = False) -> None:
        super()._set_fitted_state(module, dm, take_net)
        self.builder_ = module._require_builder()
        self.graph_owners_, self.llm_offsets_ = None, None  # a refit forgets onboarded LLMs
        self.cost_scale_ = float(module.cost_scale)
        self.has_costs_ = dm.splits["train"].costs is not None

    def _train_states(self) -> TrainStates:
        """The train graph's node states for the fitted network and builder, computed on the
        first prediction and kept (:func:`kept_states`: a refit, a load, an added or removed
        LLM, or an in-place change of a weight makes new ones), so routing a query costs its
        own rows, not a pass over the train graph."""
        return kept_states(self, self.net_, self.builder_, torch.device("cpu"))

    def _predict_both(self, data: RoutingData) -> tuple[np.ndarray, np.ndarray]:
        """Score logits and scaled costs of ``data``'s queries. ``route`` asks for scores and
        then costs of the same queries, which one pass gives: the last result is kept with a
        digest of its inputs (embeddings and task names, by value, not by object) and the
        states it came from, and returned again for the same ones."""
        states = self._train_states()
        x = np.ascontiguousarray(self.embed(data), np.float32)
        digest = hashlib.blake2b(repr(x.shape).encode(), digest_size=32)
        digest.update(x.tobytes())
        for t in data.tasks:
            name = _task_name(t).encode("utf-8", "surrogatepass")
            digest.update(len(name).to_bytes(8, "little") + name)
        key = digest.digest()
        last = getattr(self, "_last_both", None)     # one read: safe under concurrent routes
        if last is not None and last[0] is states and last[1] == key:
            return last[2]
        s, c = predict_graph(self.net_, self.builder_, x, data.tasks, torch.device("cpu"),
                             states=states)
        out = (s.double().numpy(), c.double().numpy())
        for a in out:
            a.flags.writeable = False                # shared by the two callers
        self._last_both = (states, key, out)
        return out

    def _predict_scores(self, data: RoutingData) -> np.ndarray:
        s, _ = self._predict_both(data)
        offs = getattr(self, "llm_offsets_", None)
        if offs is not None:
            s = s + np.asarray(offs, np.float64)
        return self.to_data_scale(expit(s))

    def _predict_costs(self, data: RoutingData) -> np.ndarray | None:
        """Cost head's prediction per (query, LLM) (>= 0), or None without train costs; an LLM
        with no recorded training cost (the head never saw one) gets the dearest known
        prediction of its row (:func:`~recsys_router.policies.fill_unknown_costs`)."""
        self._check_fitted()
        if not self.has_costs_ or self.cost_weight_ <= 0:
            return super()._predict_costs(data)
        _, c = self._predict_both(data)
        known = np.isfinite(np.asarray(self.mean_costs_, np.float64))   # has_costs_: not None
        return fill_unknown_costs(np.maximum(c * self.cost_scale_, 0.0), known)
