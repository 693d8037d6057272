"""Item cold start of the graph router: an onboarded LLM becomes a node of the train graph.

:class:`GraphColdStartMixin` gives :class:`~recsys_router.models.graph_module.GraphRouter`
its native ``add_llm`` / ``remove_llm``: a new LLM node (features from its name, price
unknown) is wired to the graph by its probe edges (the probe queries join as context
queries whose only rating edge goes to it), and a logit offset calibrates its mean predicted
score on the probes to the probe mean; removing it restores the fitted graph. Kept apart
from the module and the router's fitting and prediction so that
:mod:`recsys_router.models.graph_module` stays small.
"""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
from scipy.special import expit
import torch

from recsys_router.data import RoutingData
from recsys_router.models.components.graph import _task_name, neighbour_pool
from recsys_router.models.components.graph_predict import predict_graph

__all__ = ["GraphColdStartMixin"]


class GraphColdStartMixin:
    """The LLM onboarding of :class:`~recsys_router.models.graph_module.GraphRouter`.

    Reads and replaces the router's ``builder_`` (the train graph), ``graph_owners_`` (the
    LLM whose probes each context query is, or None), ``llm_offsets_`` (per-LLM logit
    offsets) and uses its ``embed``, ``encoder_``, ``llm_feature_stats_``, ``score_scale_``,
    ``cost_scale_``, ``net_`` and ``_train_states``.
    """

    native_add_llm = True

    def _rebuild(self, train_x, tasks, scores, costs, llm_x, owners) -> None:
        """Replace the builder by a copy over new context queries / LLM nodes (not mutated)."""
        b = copy.copy(self.builder_)
        b.train_x, b.train_tasks = np.asarray(train_x, np.float32), list(tasks)
        b.scores, b.costs, b.llm_x = scores, costs, np.asarray(llm_x, np.float32)
        b.task_names = sorted(set(b.train_tasks))
        # a task keeps its features (those the network was trained with), whatever its new
        # position; only new names (an onboarded LLM's probe tasks) are featurised
        had = dict(zip(self.builder_.task_names, self.builder_.task_x))
        new = [n for n in b.task_names if n not in had]
        had.update(zip(new, np.asarray(b.task_featurizer(new), np.float32)) if new else ())
        b.task_x = np.stack([had[n] for n in b.task_names]).astype(np.float32)
        # searched as the fit's pool was (the builder's rule: above its exact size, its
        # cluster index over these rows), so removing an added LLM restores it exactly
        b.neighbour_pool = neighbour_pool(b.train_x, self.builder_.neighbour_pool.shape[1],
                                          b.context_index(b.n_train))
        tix = {n: i for i, n in enumerate(b.task_names)}
        b.train_task_index = np.array([tix[t] for t in b.train_tasks], dtype=np.int64)
        self.builder_, self.graph_owners_ = b, owners

    def _add_llm(self, name: str, probes: RoutingData, cost: float, weights: np.ndarray) -> None:
        """A new LLM node (features from its name, price unknown) wired by its probe edges: the
        probe queries join the graph as context queries whose only rating edge goes to it; a
        logit offset calibrates its (probe-weighted) mean predicted score on the probes to the
        weighted probe mean."""
        from recsys_router.datamodules.routing_datamodule import llm_feature_matrix
        y = probes.scores[:, 0].astype(np.float64)
        scale = getattr(self, "score_scale_", None)     # probes on the training targets' scale
        y = (y if scale is None else scale.transform(y)).astype(np.float32)
        if y.min() < 0 or y.max() > 1:
            raise ValueError(f"the graph router needs probe scores in [0, 1] for {name!r}; got "
                             f"[{y.min()}, {y.max()}]")
        b = self.builder_
        n, n_llms = b.scores.shape
        m = probes.n_queries
        table = pd.DataFrame({"name": [name], "input_price": [np.nan], "output_price": [np.nan],
                              "size": [np.nan], "description": [name]})
        feat, _ = llm_feature_matrix(table, self.encoder_, stats=self.llm_feature_stats_)
        scores = np.full((n + m, n_llms + 1), np.nan, np.float32)
        scores[:n, :n_llms], scores[n:, n_llms] = b.scores, y
        costs = None
        if b.costs is not None:
            c = probes.costs[:, 0] if probes.costs is not None else np.full(m, cost)
            costs = np.full_like(scores, np.nan)
            costs[:n, :n_llms], costs[n:, n_llms] = b.costs, c / self.cost_scale_
        owners = np.asarray(getattr(self, "graph_owners_", None) or [""] * n, dtype=object)
        x = self.embed(probes)
        self._rebuild(np.vstack([b.train_x, x]), b.train_tasks + [_task_name(t) for t in probes.tasks],
                      scores, costs, np.vstack([b.llm_x, feat]), list(owners) + [name] * m)
        # the GNN reads a node it was not trained with mostly through its features: a logit
        # offset makes its mean predicted score on the probes equal the probe mean (bisection)
        z = predict_graph(self.net_, self.builder_, x, probes.tasks, torch.device("cpu"),
                          states=self._train_states())[0]
        z = z[:, -1].double().numpy()
        w = np.asarray(weights, np.float64)
        target = float(np.clip(np.average(y, weights=w), 1e-3, 1 - 1e-3))
        lo, hi = -30.0, 30.0
        for _ in range(60):
            mid = (lo + hi) / 2
            p = np.average(expit(z + mid), weights=w)
            lo, hi = (mid, hi) if p < target else (lo, mid)
        offs = getattr(self, "llm_offsets_", None)
        offs = np.zeros(n_llms) if offs is None else np.asarray(offs, np.float64)
        self.llm_offsets_ = np.append(offs, (lo + hi) / 2)

    def _remove_llm(self, j: int) -> None:
        b, name = self.builder_, self.llm_names_[j]
        owners = np.asarray(getattr(self, "graph_owners_", None) or [""] * b.n_train, dtype=object)
        keep = owners != name
        cols = np.delete(np.arange(b.scores.shape[1]), j)
        costs = None if b.costs is None else b.costs[keep][:, cols]
        owners = owners[keep].tolist()
        offs = getattr(self, "llm_offsets_", None)
        if offs is not None:
            offs = np.delete(np.asarray(offs, np.float64), j)
            self.llm_offsets_ = offs if np.any(offs) else None
        self._rebuild(b.train_x[keep], [t for t, k in zip(b.train_tasks, keep) if k],
                      b.scores[keep][:, cols], costs, b.llm_x[cols],
                      owners if any(owners) else None)
